//! Incremental indexing: a transcript read on from where the last sync
//! stopped embeds only its new chunks; a model change rebuilds everything; a
//! deleted memory file leaves the index; the incremental index equals a
//! rebuild from scratch.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sessionlog_memory::{EmbedError, Embedder, HashEmbedder, IndexConfig, MemoryIndex, SearchSettings};

/// The hashing embedder under another model name, counting the texts it embeds.
struct Counting {
    inner: HashEmbedder,
    model: String,
    texts: Arc<AtomicUsize>,
}

impl Embedder for Counting {
    fn id(&self) -> &str {
        "counting"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn dims(&self) -> usize {
        self.inner.dims()
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_batch(texts)
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    sessions: std::path::PathBuf,
    state: std::path::PathBuf,
}

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

/// One user message line of about 330 characters, numbered.
fn message(n: usize) -> String {
    let text =
        format!("Message {n}: the deploy of service number {n} needs a database migration and a review. ")
            .repeat(4);
    format!(
        r#"{{"type":"message","id":"m{n:07}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}"}}}}"#
    )
}

fn fixture(messages: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    fs::write(ws.join("MEMORY.md"), "# Memory\n- The billing database is PostgreSQL 16.\n").unwrap();
    fs::write(ws.join("memory/2026-12-01.md"), "- Ramped the flag to 50%.\n").unwrap();
    fs::write(ws.join("memory/people.md"), "- Priya reviews billing changes.\n").unwrap();
    let sessions = dir.path().join("sessions");
    fs::create_dir(&sessions).unwrap();
    let mut t = String::from(HEADER);
    t.push('\n');
    for n in 0..messages {
        t.push_str(&message(n));
        t.push('\n');
    }
    fs::write(sessions.join("a.jsonl"), t).unwrap();
    let state = dir.path().join("state");
    Fixture { _dir: dir, ws, sessions, state }
}

fn open(f: &Fixture, model: &str, counter: &Arc<AtomicUsize>) -> MemoryIndex {
    let mut config = IndexConfig::new(&f.ws, Some(&f.state));
    config.sessions_dirs = vec![f.sessions.clone()];
    let embedder = Counting { inner: HashEmbedder::new(64), model: model.to_owned(), texts: counter.clone() };
    MemoryIndex::open(config, Box::new(embedder)).unwrap()
}

/// Every chunk row: (path, start, end, hash, model), sorted — read with SQLite directly.
fn rows(db: &Path) -> Vec<(String, i64, i64, String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT path, start_line, end_line, hash, model FROM chunks ORDER BY path, start_line, end_line, hash").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

fn append(path: &Path, lines: &[String]) {
    let mut file = fs::OpenOptions::new().append(true).open(path).unwrap();
    for l in lines {
        writeln!(file, "{l}").unwrap();
    }
}

#[test]
fn appending_to_a_transcript_embeds_only_the_new_chunks() {
    // 40 messages of ~350 characters ("User: " + text): ~14,000 characters,
    // about 4 messages per 1,600-character chunk → 10+ chunks.
    let f = fixture(40);
    let counter = Arc::new(AtomicUsize::new(0));
    let mut index = open(&f, "m1", &counter);
    let first = index.sync(false, 1).unwrap();
    let before = rows(&index.config().db_path);
    let transcript_chunks = before.iter().filter(|r| r.0 == "sessions/a.jsonl").count();
    assert!(transcript_chunks >= 10, "{transcript_chunks}");
    assert_eq!(first.embedded, before.len());
    assert_eq!(counter.load(Ordering::SeqCst), before.len());

    // Two more messages: the last chunk changes (or a new one starts); every
    // earlier chunk keeps its text, so at most two texts are new.
    append(&f.sessions.join("a.jsonl"), &[message(40), message(41)]);
    counter.store(0, Ordering::SeqCst);
    let second = index.sync(false, 2).unwrap();
    let after = rows(&index.config().db_path);
    let old: std::collections::HashSet<_> = before.iter().map(|r| r.3.clone()).collect();
    let new_texts = after.iter().filter(|r| !old.contains(&r.3)).count();
    assert!((1..=2).contains(&new_texts), "{new_texts}");
    assert_eq!(counter.load(Ordering::SeqCst), new_texts);
    assert_eq!(second.embedded, new_texts);
    assert!(!second.full_reindex);
    // Memory files were unchanged: 3 skipped; the transcript re-indexed.
    assert_eq!((second.files_unchanged, second.files_indexed), (3, 1));
    // The new messages are lines 42 and 43 of the JSONL file (header is line 1).
    assert_eq!(after.iter().filter(|r| r.0 == "sessions/a.jsonl").map(|r| r.2).max(), Some(43));

    // Nothing changed: nothing embedded, nothing re-indexed.
    counter.store(0, Ordering::SeqCst);
    let third = index.sync(false, 3).unwrap();
    assert_eq!((third.embedded, third.files_indexed, third.files_unchanged), (0, 0, 4));
    assert_eq!(counter.load(Ordering::SeqCst), 0);

    // The incremental index equals one built from scratch over the same files.
    let g = Fixture { _dir: tempfile::tempdir().unwrap(), ..fixture(0) };
    let scratch_state = g.state.clone();
    let mut config = IndexConfig::new(&f.ws, Some(&scratch_state));
    config.sessions_dirs = vec![f.sessions.clone()];
    let embedder =
        Counting { inner: HashEmbedder::new(64), model: "m1".into(), texts: Arc::new(AtomicUsize::new(0)) };
    let mut scratch = MemoryIndex::open(config, Box::new(embedder)).unwrap();
    scratch.sync(false, 9).unwrap();
    assert_eq!(rows(&scratch.config().db_path), after);
}

#[test]
fn a_partly_written_line_waits_and_a_shrunk_transcript_is_read_again() {
    let f = fixture(3);
    let counter = Arc::new(AtomicUsize::new(0));
    let mut index = open(&f, "m1", &counter);
    index.sync(false, 1).unwrap();
    let path = f.sessions.join("a.jsonl");
    // A torn last line (no newline yet) is not read.
    let torn = message(3);
    fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn.as_bytes()[..50]).unwrap();
    let r = index.sync(false, 2).unwrap();
    assert_eq!(r.files_indexed, 0);
    // Rewritten shorter (e.g. replaced by another session): read from the start.
    fs::write(&path, format!("{HEADER}\n{}\n", message(7))).unwrap();
    let r = index.sync(false, 3).unwrap();
    assert_eq!(r.files_indexed, 1);
    let hits =
        index.search("Message 7", &SearchSettings { min_score: 0.0, ..Default::default() }, 0).unwrap();
    assert_eq!(hits.iter().filter(|h| h.source == "sessions").count(), 1);
    // Replaced by a longer transcript of another session (a different first
    // line): read from the start too.
    let other = HEADER.replace("\"s1\"", "\"s2\"");
    let lines: Vec<String> = (20..25).map(message).collect();
    fs::write(&path, format!("{other}\n{}\n", lines.join("\n"))).unwrap();
    let r = index.sync(false, 4).unwrap();
    assert_eq!(r.files_indexed, 1);
    let hits =
        index.search("Message 20", &SearchSettings { min_score: 0.0, ..Default::default() }, 0).unwrap();
    let session_hits: Vec<_> = hits.iter().filter(|h| h.source == "sessions").collect();
    assert!(session_hits[0].snippet.starts_with("User: Message 20:"));
    assert_eq!(session_hits[0].start_line, 2);
    // Nothing of the replaced transcript is left (read on from the old
    // position, its message 7 would stay and a torn piece of the new file
    // would be skipped).
    let conn = rusqlite::Connection::open(&index.config().db_path).unwrap();
    let stale: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM chunks WHERE path = 'sessions/a.jsonl' AND text LIKE '%Message 7:%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stale, 0);
    let session_rows: Vec<_> =
        rows(&index.config().db_path).into_iter().filter(|r| r.0 == "sessions/a.jsonl").collect();
    assert_eq!(session_rows.iter().map(|r| r.1).min(), Some(2));
    assert_eq!(session_rows.iter().map(|r| r.2).max(), Some(6));
}

#[test]
fn changing_the_model_reindexes_everything() {
    let f = fixture(10);
    let counter = Arc::new(AtomicUsize::new(0));
    let total = {
        let mut index = open(&f, "m1", &counter);
        index.sync(false, 1).unwrap();
        rows(&index.config().db_path).len()
    };
    counter.store(0, Ordering::SeqCst);
    let mut index = open(&f, "m2", &counter);
    // Status sees the identity change before the sync: every file is dirty.
    let status = index.status().unwrap();
    assert_eq!(status.index_model.as_deref(), Some("m1"));
    assert_eq!(status.dirty_files.len(), 4);
    let r = index.sync(false, 2).unwrap();
    assert!(r.full_reindex);
    assert_eq!(r.embedded, total);
    assert_eq!(counter.load(Ordering::SeqCst), total);
    let after = rows(&index.config().db_path);
    assert_eq!(after.len(), total);
    assert!(after.iter().all(|r| r.4 == "m2"));
    // Back to m1: rebuilt again, vectors from the cache.
    counter.store(0, Ordering::SeqCst);
    let mut index = open(&f, "m1", &counter);
    let r = index.sync(false, 3).unwrap();
    assert!(r.full_reindex);
    assert_eq!((r.embedded, r.cached), (0, total));
    assert_eq!(counter.load(Ordering::SeqCst), 0);
}

#[test]
fn a_deleted_memory_file_leaves_the_index() {
    let f = fixture(2);
    let counter = Arc::new(AtomicUsize::new(0));
    let mut index = open(&f, "m1", &counter);
    index.sync(false, 1).unwrap();
    let settings = SearchSettings { min_score: 0.0, ..Default::default() };
    let found = |index: &MemoryIndex| {
        index.search("Priya reviews", &settings, 0).unwrap().iter().any(|r| r.path == "memory/people.md")
    };
    assert!(found(&index));
    fs::remove_file(f.ws.join("memory/people.md")).unwrap();
    let r = index.sync(false, 2).unwrap();
    assert_eq!(r.files_removed, 1);
    assert!(!found(&index));
    assert!(rows(&index.config().db_path).iter().all(|r| r.0 != "memory/people.md"));
    // FTS rows went too: a keyword-only query finds nothing.
    let conn = rusqlite::Connection::open(&index.config().db_path).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'priya'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(index.status().unwrap().files, 3);
}

#[test]
fn an_edited_memory_file_is_the_only_one_embedded_again() {
    let f = fixture(2);
    let counter = Arc::new(AtomicUsize::new(0));
    let mut index = open(&f, "m1", &counter);
    index.sync(false, 1).unwrap();
    fs::write(f.ws.join("memory/2026-12-01.md"), "- Ramped the flag to 100%.\n").unwrap();
    counter.store(0, Ordering::SeqCst);
    let r = index.sync(false, 2).unwrap();
    assert_eq!((r.files_indexed, r.files_unchanged, r.embedded), (1, 3, 1));
    assert_eq!(counter.load(Ordering::SeqCst), 1);
}

#[test]
fn a_transcript_without_a_header_is_reported_and_skipped() {
    let f = fixture(2);
    fs::write(f.sessions.join("bad.jsonl"), format!("{}\n", message(1))).unwrap();
    let counter = Arc::new(AtomicUsize::new(0));
    let mut index = open(&f, "m1", &counter);
    let r = index.sync(false, 1).unwrap();
    assert_eq!(r.files_indexed, 4);
    assert_eq!(r.warnings.len(), 1);
    assert!(
        r.warnings[0].contains("bad.jsonl") && r.warnings[0].contains("not a Pi transcript"),
        "{}",
        r.warnings[0]
    );
}
