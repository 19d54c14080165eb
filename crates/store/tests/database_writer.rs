//! The live loop's SQLite storage at the store's level: a transcript inside
//! an agent database appended through `TranscriptWriter::open_in_database`,
//! beside another writer of the same session.

use std::time::Duration;

use serde_json::json;
use sessionlog_event_log::{LockOptions, Mode};
use sessionlog_events::write::{header, message, Head};
use sessionlog_events::Entry;
use sessionlog_sqlite_store::{LiveDatabase, TranscriptName};
use sessionlog_store::{load_transcript, TranscriptWriter, WriteOptions};

const T: &str = "2026-03-01T00:00:00.000Z";

fn user(id: &str, parent: Option<&str>, text: &str) -> Entry {
    message(&Head { id, parent_id: parent, timestamp: T }, &json!({"role": "user", "content": text})).unwrap()
}

#[test]
fn another_writers_entries_land_between_ours_and_the_writer_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agents/main/agent/openclaw-agent.sqlite");
    LiveDatabase::open(&db, "main", 0)
        .unwrap()
        .put_entry("agent:main:main", json!({"sessionId": "s1", "updatedAt": 1}).as_object().unwrap())
        .unwrap();
    let name = TranscriptName { database: db.clone(), session_id: "s1".into() };
    let head = header("s1", T, "/w", None).unwrap();
    let options = WriteOptions {
        lock: LockOptions { timeout: Duration::from_millis(200), ..LockOptions::default() },
        ..WriteOptions::default()
    };
    let mut ours = TranscriptWriter::open_in_database(&name, "main", &head, options, 0).unwrap();
    let a = user("aaaaaaaa", None, "ours 1");
    ours.append(std::slice::from_ref(&a)).unwrap();
    // A second writer of this process is refused while we hold the session.
    assert!(TranscriptWriter::open_in_database(&name, "main", &head, options, 0).is_err());
    // Another process (OpenClaw, say) appends to the same session.
    let theirs = user("bbbbbbbb", Some("aaaaaaaa"), "theirs");
    LiveDatabase::open(&db, "main", 0).unwrap().append("s1", &[theirs.raw()], None, 0).unwrap();
    let c = user("cccccccc", Some("aaaaaaaa"), "ours 2");
    ours.append(std::slice::from_ref(&c)).unwrap();
    // In seq order: header, ours, theirs, ours — and the writer holds the same.
    let expected: Vec<&str> = vec![head.raw(), a.raw(), theirs.raw(), c.raw()];
    let read = load_transcript(&std::path::PathBuf::from(name.to_string()), Mode::Strict).unwrap();
    let mut lines = vec![read.loaded.transcript.header.raw()];
    lines.extend(read.loaded.transcript.entries.iter().map(Entry::raw));
    assert_eq!(lines, expected);
    let held: Vec<&str> = ours.transcript().entries.iter().map(Entry::raw).collect();
    assert_eq!(held, expected[1..]);
    assert_eq!(ours.leaf_id(), Some("cccccccc"));
    // Reopened, it continues after the last event.
    drop(ours);
    let mut again = TranscriptWriter::open_in_database(&name, "main", &head, options, 0).unwrap();
    assert_eq!(again.transcript().entries.len(), 3);
    again.append(&[user("dddddddd", Some("cccccccc"), "ours 3")]).unwrap();
    let read = load_transcript(&std::path::PathBuf::from(name.to_string()), Mode::Strict).unwrap();
    assert_eq!(read.loaded.transcript.entries.len(), 4);
}
