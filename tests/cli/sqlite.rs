//! OpenClaw's SQLite session store (2026.8.1 and later) through the commands,
//! against OpenClaw itself: OpenClaw migrates a copy of the JSONL fixture
//! store (`doctor --session-sqlite import`), and what we read from the
//! result is compared with the database read by an independent reader
//! (Python's sqlite3), with what OpenClaw lists, and with the JSONL originals.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};
use sessionlog_test_support::oracle::openclaw;

use crate::support::{arg, fixtures, json, run, run_ok};
use fixtures::copy_tree;

/// A copy of the JSONL fixture store at `state`, migrated by OpenClaw itself.
fn migrated_by_openclaw(state: &Path) {
    let said = openclaw::migrated_fixture(state, |_| {});
    assert!(said.contains("imported=14/888 events"), "{said}");
}

/// A copy at `state` of the committed store OpenClaw migrated
/// (`fixtures/openclaw-sqlite`); returns its database.
fn committed_copy(state: &Path) -> PathBuf {
    copy_tree(&fixtures::shared_dir().join("fixtures/openclaw-sqlite/agents"), &state.join("agents"));
    database(state)
}

fn database(state: &Path) -> PathBuf {
    state.join("agents/build/agent/openclaw-agent.sqlite")
}

/// Session id and JSONL bytes of each transcript, in id order.
pub type Transcripts = Vec<(String, Vec<u8>)>;

/// `session_nodes` (key → entry_json text) and each transcript's events
/// (session id → the `event_json` lines joined as a JSONL file; compressed
/// rows through the `zstd` tool), read by Python's sqlite3, not by our code.
pub fn python_read(db: &Path) -> (Vec<(String, String)>, Transcripts) {
    let script = r#"
import json, sqlite3, subprocess, sys, urllib.parse
db = sqlite3.connect('file:' + urllib.parse.quote(sys.argv[1]) + '?mode=ro', uri=True)
nodes = [[k, e] for k, e in db.execute('SELECT session_key, entry_json FROM session_nodes ORDER BY rowid')]
ids = [r[0] for r in db.execute('SELECT DISTINCT session_id FROM transcript_events ORDER BY session_id')]
def text(plain, packed):
    if plain is not None:
        return plain
    return subprocess.run(['zstd', '-dcq'], input=packed, capture_output=True, check=True).stdout.decode()
transcripts = [[i, ''.join(text(*r) + '\n' for r in db.execute(
    'SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq', (i,)))]
    for i in ids]
json.dump({'nodes': nodes, 'transcripts': transcripts}, sys.stdout)
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(db).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out.stdout);
    let pairs = |name: &str| -> Vec<(String, String)> {
        v[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_str().unwrap().to_owned()))
            .collect()
    };
    let transcripts = pairs("transcripts").into_iter().map(|(id, text)| (id, text.into_bytes())).collect();
    (pairs("nodes"), transcripts)
}

/// The database file's bytes and modification time.
fn fingerprint(db: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (fs::read(db).unwrap(), fs::metadata(db).unwrap().modified().unwrap())
}

fn name(db: &Path, session_id: &str) -> String {
    format!("{}#{session_id}", db.display())
}

#[test]
fn sessions_of_a_sqlite_state_folder_are_what_openclaw_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    migrated_by_openclaw(&state);
    let db = database(&state);
    // The migration leaves the JSONL era's sessions folder beside the database.
    assert!(state.join("agents/build/sessions").is_dir());
    let before = fingerprint(&db);

    let ours = json(&run_ok(&["sessions", "--store", arg(&state), "--json"]));
    let ours = ours.as_object().unwrap();
    let (nodes, _) = python_read(&db);
    assert_eq!(nodes.len(), 14);
    let expected: Map<String, Value> =
        nodes.iter().map(|(k, e)| (k.clone(), serde_json::from_str(e).unwrap())).collect();
    assert_eq!(ours.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (key, entry) in &expected {
        assert_eq!(&ours[key], entry, "{key}");
    }
    // OpenClaw lists the same sessions.
    openclaw::write_config(&state, &["build"], None);
    let listed = openclaw::json(&state, &["sessions", "--agent", "build", "--json"]);
    let listed: BTreeSet<&str> =
        listed["sessions"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(listed, ours.keys().map(String::as_str).collect::<BTreeSet<_>>());
    for (key, s) in ours {
        assert!(s["sessionId"].is_string(), "{key}");
    }
    // The store log's commands refuse the read-only store clearly.
    for args in [&["sessions", "--rebuild"][..], &["sessions", "--at", "1"]] {
        let out = run(&[args, &["--store", arg(&state)]].concat());
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("OpenClaw's SQLite store"), "{stderr}");
    }
    assert!(fingerprint(&db) == before, "reading changed the database");
}

#[test]
fn transcripts_read_from_sqlite_equal_the_jsonl_originals() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    migrated_by_openclaw(&state);
    let db = database(&state);
    let before = fingerprint(&db);
    let originals = fixtures::shared_dir().join("fixtures/openclaw/agents/build/sessions");
    let (_, transcripts) = python_read(&db);
    let ids: Vec<&str> = transcripts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "26f24350-50e0-432d-bfa3-f0ec08fa2691",
            "678366ea-e225-4877-a005-d4b79b0ed0ec",
            "684637ff-e673-46e4-a1a9-0de622f22f21"
        ]
    );
    for (id, stored) in &transcripts {
        let original = fs::read(originals.join(format!("{id}.jsonl"))).unwrap();
        // OpenClaw stores lines verbatim, except that it renames a retired
        // provider in one transcript's messages.
        if id.starts_with("684637ff") {
            assert_ne!(stored, &original, "{id}");
            assert_eq!(
                stored.iter().filter(|&&b| b == b'\n').count(),
                original.iter().filter(|&&b| b == b'\n').count()
            );
        } else {
            assert!(stored == &original, "{id}: OpenClaw changed the transcript");
        }
        let named = name(&db, id);
        // Byte for byte, as Pi would leave the file after opening it.
        let bytes = run_ok(&["entries", &named, "--jsonl"]);
        assert!(&bytes == stored, "{id}: entries --jsonl differs from the stored events");
        // The same file on disk reads the same in every command.
        let file = tmp.path().join(format!("{id}.jsonl"));
        fs::write(&file, stored).unwrap();
        for command in [&["entries"][..], &["context"], &["cut"]] {
            let from_db = run_ok(&[command, &[named.as_str()]].concat());
            let from_file = run_ok(&[command, &[arg(&file)]].concat());
            assert_eq!(
                String::from_utf8_lossy(&from_db),
                String::from_utf8_lossy(&from_file),
                "{command:?} {id}"
            );
        }
        // Documents that name their input: equal but for the name (and format).
        for command in [&["inspect", "--json"][..], &["replay", "--json"]] {
            let mut from_db = json(&run_ok(&[command, &[named.as_str()]].concat()));
            assert_eq!(from_db["file"], named.as_str());
            let mut from_file = json(&run_ok(&[command, &[arg(&file)]].concat()));
            if command[0] == "inspect" {
                assert_eq!(
                    (&from_db["format"], &from_file["format"]),
                    (&"openclaw-sqlite".into(), &"pi-jsonl".into())
                );
            }
            for doc in [&mut from_db, &mut from_file] {
                let doc = doc.as_object_mut().unwrap();
                doc.remove("file");
                doc.remove("format");
            }
            assert_eq!(from_db, from_file, "{command:?} {id}");
        }
    }
    // A sweep over the state folder finds the database's transcripts, not the
    // sessions folder the migration left beside it.
    let out = tmp.path().join("sweep");
    run_ok(&["sweep", arg(&state), "--out", arg(&out), "--quiet", "--preset", "codex"]);
    let results = fs::read_to_string(out.join("results.jsonl")).unwrap();
    let swept: BTreeSet<String> =
        results.lines().map(|l| json(l.as_bytes())["transcript"].as_str().unwrap().to_owned()).collect();
    let expected: BTreeSet<String> = ids.iter().map(|id| name(&db, id)).collect();
    assert_eq!(swept, expected);
    assert!(fingerprint(&db) == before, "reading changed the database");
}

#[test]
fn transcripts_in_the_database_are_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let db = committed_copy(&state);
    let before = fingerprint(&db);
    let named = name(&db, "26f24350-50e0-432d-bfa3-f0ec08fa2691");
    for args in [&["compact", named.as_str()][..], &["append", named.as_str()]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&named) && stderr.contains("reads but never writes"), "{args:?}: {stderr}");
    }
    // A dry run reads it.
    run_ok(&["compact", &named, "--dry-run"]);
    // A transcript that is not there, and a file that is no database, are named.
    let out = run(&["inspect", &name(&db, "no-such-session")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-session: no such transcript"));
    let not_db = tmp.path().join("openclaw-agent.sqlite");
    fs::write(&not_db, "not a database").unwrap();
    let out = run(&["context", &name(&not_db, "x")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&not_db.display().to_string()));
    assert!(fingerprint(&db) == before, "the database changed");
    assert!(!Path::new(&named).exists(), "a file named after the transcript was created");
}

#[test]
fn a_sqlite_store_reads_while_openclaw_holds_a_write_transaction() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let db = committed_copy(&state);
    let (nodes, transcripts) = python_read(&db);
    // OpenClaw's connection: WAL mode, a write transaction open and uncommitted.
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer.pragma_update(None, "journal_mode", "WAL").unwrap();
    writer
        .execute_batch("BEGIN IMMEDIATE; UPDATE session_nodes SET entry_json = '{\"sessionId\":\"x\"}';")
        .unwrap();
    let before = fingerprint(&db);
    let wal = fs::read(db.with_file_name("openclaw-agent.sqlite-wal")).unwrap();

    let ours = json(&run_ok(&["sessions", "--store", arg(&state), "--json"]));
    assert_eq!(ours.as_object().unwrap().len(), nodes.len());
    for (key, entry) in &nodes {
        assert_eq!(
            ours[key],
            serde_json::from_str::<Value>(entry).unwrap(),
            "{key}: not the committed entry"
        );
    }
    let (id, stored) = &transcripts[1];
    assert!(&run_ok(&["entries", &name(&db, id), "--jsonl"]) == stored);

    assert!(fingerprint(&db) == before, "the database changed");
    assert!(fs::read(db.with_file_name("openclaw-agent.sqlite-wal")).unwrap() == wal, "the WAL changed");
    writer.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn import_from_a_sqlite_store_keeps_every_entry_and_transcript_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    // OpenClaw's own migration of the fixture store, with the JSONL era's
    // sessions folder beside it (as a migration leaves it): the database wins.
    copy_tree(&fixtures::shared_dir().join("fixtures/openclaw-sqlite/agents"), &state.join("agents"));
    copy_tree(
        &fixtures::shared_dir().join("fixtures/openclaw/agents/build/sessions"),
        &state.join("agents/build/sessions"),
    );
    let db = database(&state);
    let before = fingerprint(&db);
    let into = tmp.path().join("ours");
    let said = String::from_utf8(run_ok(&["import", arg(&state), "--into", arg(&into)])).unwrap();
    assert!(said.starts_with("agent build: 14 sessions imported, 3 transcripts copied"), "{said}");
    assert!(fingerprint(&db) == before, "importing changed the database");

    let (nodes, transcripts) = python_read(&db);
    let sessions = into.join("agents/build/sessions");
    // Every entry, in stored order, field for field.
    let projected: Map<String, Value> =
        serde_json::from_slice(&fs::read(sessions.join("sessions.json")).unwrap()).unwrap();
    assert_eq!(
        projected.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(),
        nodes.iter().map(|(k, e)| (k.clone(), serde_json::from_str::<Value>(e).unwrap())).collect::<Vec<_>>()
    );
    // Every transcript, byte for byte, and nothing else.
    let mut files: Vec<String> = fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && n != "events.jsonl")
        .collect();
    files.sort();
    assert_eq!(files, transcripts.iter().map(|(id, _)| format!("{id}.jsonl")).collect::<Vec<_>>());
    for (id, bytes) in &transcripts {
        assert!(&fs::read(sessions.join(format!("{id}.jsonl"))).unwrap() == bytes, "{id}");
    }
    // The imported store is ours to write: its log rebuilds the same projection.
    let projection = fs::read(sessions.join("sessions.json")).unwrap();
    run_ok(&["sessions", "--store", arg(&into), "--rebuild"]);
    assert!(fs::read(sessions.join("sessions.json")).unwrap() == projection);
    // A second import into the same store is refused, and changes nothing.
    let out = run(&["import", arg(&state), "--into", arg(&into)]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_store_we_export_is_listed_and_validated_by_openclaw() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("ours");
    let jsonl = fixtures::shared_dir().join("fixtures/openclaw");
    run_ok(&["import", arg(&jsonl), "--into", arg(&ours)]);
    let theirs = tmp.path().join("theirs");
    let said = String::from_utf8(run_ok(&[
        "export",
        "--store",
        arg(&ours),
        "--to",
        arg(&theirs),
        "--now",
        "1796000000000",
    ]))
    .unwrap();
    // The fixture has 12 entries; one transcript (455 lines) belongs to one of them.
    assert!(said.starts_with("agent build: 12 sessions, 455 transcript events written to"), "{said}");
    let sessions = json(&run_ok(&["sessions", "--store", arg(&ours), "--json"]));
    let sessions = sessions.as_object().unwrap();

    // OpenClaw lists every key with the fields we hold.
    openclaw::write_config(&theirs, &["build"], None);
    let listed = openclaw::json(&theirs, &["sessions", "--agent", "build", "--json"]);
    let rows = listed["sessions"].as_array().unwrap();
    let keys: BTreeSet<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, sessions.keys().map(String::as_str).collect::<BTreeSet<_>>());
    let mut compared = 0;
    for row in rows {
        let entry = &sessions[row["key"].as_str().unwrap()];
        for (field, value) in row.as_object().unwrap() {
            // Resolved when listing: the token total (shown only while fresh) and the
            // context window (from OpenClaw's model catalogue).
            if field.starts_with("totalTokens") || field == "contextTokens" {
                continue;
            }
            if let Some(ours) = entry.get(field) {
                assert_eq!(value, ours, "{}: {field}", row["key"]);
                compared += 1;
            }
        }
        assert_eq!(row["sessionId"], entry["sessionId"]);
        assert_eq!(row["updatedAt"], entry["updatedAt"]);
    }
    assert!(compared > 3 * rows.len(), "only {compared} fields compared");

    // OpenClaw's inspection reads every session without an issue.
    let out =
        openclaw::run(&theirs, &["doctor", "--session-sqlite", "inspect", "--session-sqlite-all-agents"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 target(s), 0 legacy entries, 12 sqlite entries, 0 issue(s)"), "{said}");
    // Validation against the JSONL store it came from: every entry and every
    // event found. The other issues are the two transcripts no entry refers
    // to (OpenClaw's own migration makes them `recovered` sessions) and the
    // JSONL file still beside an SQLite session.
    copy_tree(&jsonl.join("agents/build/sessions"), &theirs.join("agents/build/sessions"));
    let out =
        openclaw::run(&theirs, &["doctor", "--session-sqlite", "validate", "--session-sqlite-all-agents"]);
    // (It exits non-zero for any issue; what counts is which ones.)
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("validated=12/455 events"), "{said}");
    let mut issues: Vec<String> = said
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('['))
        .map(|l| l.split(':').next().unwrap().to_owned())
        .collect();
    issues.sort();
    assert_eq!(
        issues,
        [
            "[active_sqlite_transcript_jsonl] agent",
            "[sqlite_entry_missing] agent",
            "[sqlite_entry_missing] agent"
        ],
        "{said}"
    );
    assert!(said.contains("[sqlite_entry_missing] agent:build:recovered:26f24350"), "{said}");
    assert!(said.contains("[sqlite_entry_missing] agent:build:recovered:684637ff"), "{said}");
    // Exporting again never replaces the database.
    let out = run(&["export", "--store", arg(&ours), "--to", arg(&theirs)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never overwritten"));
}

#[test]
fn calibrate_reads_a_transcript_inside_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    // OpenClaw's own migration of the JSONL fixture store.
    let db = committed_copy(&state);
    let id = "26f24350-50e0-432d-bfa3-f0ec08fa2691";
    let from_db = json(&run_ok(&["calibrate", &name(&db, id), "--json"]));
    // By hand on the JSONL original (jq 'select(.type=="compaction")'): two
    // recorded compactions, the second (a9cfc991) at 655 tokens right after
    // the first, which no threshold reproduces.
    assert_eq!(from_db["file"], name(&db, id));
    assert_eq!(from_db["format"], "openclaw-sqlite");
    assert_eq!((from_db["recorded"].as_u64(), from_db["reproduced"].as_u64()), (Some(2), Some(1)));
    assert_eq!(from_db["anomalies"], serde_json::json!(["a9cfc991"]));
    // The same calibration as the JSONL file OpenClaw migrated.
    let original = fixtures::shared_dir().join(format!("fixtures/openclaw/agents/build/sessions/{id}.jsonl"));
    let from_file = json(&run_ok(&["calibrate", arg(&original), "--json"]));
    for field in ["recorded", "reproduced", "matchRate", "anomalies", "manual", "policy", "candidates"] {
        assert_eq!(from_db[field], from_file[field], "{field}");
    }
    // The database itself stands for each transcript in it.
    let out = String::from_utf8(run_ok(&["calibrate", arg(&db), "--json"])).unwrap();
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let files: Vec<&str> = lines.iter().map(|l| l["file"].as_str().unwrap()).collect();
    let (_, transcripts) = python_read(&db);
    let expected: Vec<String> = transcripts.iter().map(|(id, _)| name(&db, id)).collect();
    assert_eq!(files, expected);
    assert_eq!(lines.iter().find(|l| l["file"] == name(&db, id)), Some(&from_db));
}
