//! Reading OpenClaw's agent database: the committed store OpenClaw migrated
//! itself, read in its read-only folder and checked against an independent
//! reader (Python's sqlite3) and the JSONL files it was migrated from; reads
//! beside a writer; errors that name the file.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use sessionlog_sqlite_store::{AgentDatabase, Error, OpenMode};
use sessionlog_test_support::fixtures::shared_dir;
use support::check_against_independent_reads;

fn committed_db() -> PathBuf {
    shared_dir().join("fixtures/openclaw-sqlite/agents/build/agent/openclaw-agent.sqlite")
}

fn folder_listing(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn the_committed_store_reads_in_its_read_only_folder_without_a_trace() {
    let path = committed_db();
    let dir = path.parent().unwrap();
    let before = folder_listing(dir);
    let db = AgentDatabase::open(&path).unwrap();
    // The folder cannot be written and has no WAL: the file is read as immutable.
    assert_eq!(db.mode(), OpenMode::Immutable);
    assert_eq!(db.schema_version().unwrap(), 23);
    assert_eq!(db.agent_id().unwrap().as_deref(), Some("build"));
    check_against_independent_reads(&db);
    let windows = db.windows().unwrap();
    assert_eq!(windows.len(), 13);
    assert!(windows.iter().all(|w| db.nodes().unwrap().iter().any(|n| n.key == w.session_key)));
    drop(db);
    assert!(folder_listing(dir) == before, "reading changed the folder of the database");
}

fn copy_of_committed(dir: &Path) -> PathBuf {
    let path = dir.join("openclaw-agent.sqlite");
    std::fs::copy(committed_db(), &path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

#[test]
fn a_copy_in_a_writable_folder_is_read_shared_and_never_modified() {
    let tmp = tempfile::tempdir().unwrap();
    let path = copy_of_committed(tmp.path());
    let original = std::fs::read(&path).unwrap();
    let db = AgentDatabase::open(&path).unwrap();
    assert_eq!(db.mode(), OpenMode::Shared);
    check_against_independent_reads(&db);
    drop(db);
    assert!(std::fs::read(&path).unwrap() == original, "the database file changed");
}

fn writer(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn
}

const SESSION: &str = "678366ea-e225-4877-a005-d4b79b0ed0ec";

#[test]
fn a_transcript_is_read_from_one_snapshot_while_openclaw_rewrites_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = copy_of_committed(tmp.path());
    let w = writer(&path);
    let db = AgentDatabase::open(&path).unwrap();
    let whole = db.transcript_bytes(SESSION).unwrap();
    assert!(whole.iter().filter(|&&b| b == b'\n').count() > 256, "more than one page of rows");

    let mut reader = db.transcript(SESSION).unwrap();
    let first_page = reader.fill_buf().unwrap().to_vec();
    assert!(!first_page.is_empty() && first_page.len() < whole.len());
    reader.consume(first_page.len());
    // A writer replaces every event (as a transcript rewrite does) and commits.
    w.execute_batch(&format!(
        "BEGIN; UPDATE transcript_events SET event_json = '{{\"type\":\"custom\",\"rewritten\":true}}', \
         event_zstd = NULL, navigation_json = NULL WHERE session_id = '{SESSION}'; COMMIT;"
    ))
    .unwrap();
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    let mut seen = first_page;
    seen.extend(rest);
    assert!(seen == whole, "the reader mixed two versions of the transcript");
    drop(reader);
    // A new read sees the rewrite.
    let after = db.transcript_bytes(SESSION).unwrap();
    assert!(after.starts_with(b"{\"type\":\"custom\",\"rewritten\":true}\n"));
}

#[test]
fn a_reader_waits_for_a_writer_that_holds_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let path = copy_of_committed(tmp.path());
    // A rollback-journal database is locked for readers while a writer commits.
    let w = Connection::open(&path).unwrap();
    w.pragma_update(None, "journal_mode", "DELETE").unwrap();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        w.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        w.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    let db = AgentDatabase::open(&path).expect("the reader waits for the lock instead of failing");
    assert_eq!(db.entries().unwrap().len(), 14);
    holder.join().unwrap();
}

#[test]
fn bad_databases_are_named_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.sqlite");
    std::fs::write(&text, "hello, not a database\n").unwrap();
    let e = AgentDatabase::open(&text).unwrap_err();
    assert!(e.to_string().starts_with(&text.display().to_string()), "{e}");

    let empty = tmp.path().join("empty.sqlite");
    Connection::open(&empty).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    let e = AgentDatabase::open(&empty).unwrap_err();
    assert!(matches!(e, Error::NotAgentDatabase { .. }), "{e}");
    assert!(e.to_string().contains("session_nodes"), "{e}");

    let missing = tmp.path().join("missing.sqlite");
    assert!(matches!(AgentDatabase::open(&missing).unwrap_err(), Error::Io { .. }));

    let path = copy_of_committed(tmp.path());
    let w = writer(&path);
    let db = AgentDatabase::open(&path).unwrap();
    let e = db.transcript_bytes("no-such-session").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}#no-such-session: no such transcript in the database", path.display())
    );
    w.execute(
        "UPDATE session_nodes SET entry_json = '{\"sessionId\":' WHERE session_key = 'agent:build:main'",
        [],
    )
    .unwrap();
    let e = db.entries().unwrap_err();
    assert!(
        e.to_string().starts_with(&format!("{}: session agent:build:main: entry_json:", path.display())),
        "{e}"
    );
    // A row OpenClaw itself marked invalid is left out, as OpenClaw leaves it out.
    w.execute("UPDATE session_nodes SET entry_valid = -1 WHERE session_key = 'agent:build:main'", [])
        .unwrap();
    assert_eq!(db.entries().unwrap().len(), 13);
    // A compressed event that does not decompress names its row.
    let (compressed, seq): (String, i64) = w
        .query_row(
            "SELECT session_id, seq FROM transcript_events WHERE event_zstd IS NOT NULL ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    w.execute(
        "UPDATE transcript_events SET event_zstd = zeroblob(length(event_zstd)) WHERE session_id = ?1 AND seq = ?2",
        rusqlite::params![compressed, seq],
    )
    .unwrap();
    let e = db.transcript_bytes(&compressed).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}#{compressed}: event seq {seq}: compressed event", path.display())),
        "{e}"
    );
}
