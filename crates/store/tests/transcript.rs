//! The transcript write path: what it refuses, what it appends, and what it
//! reports about the transcript as it goes.

use std::fs;
use std::time::Duration;

use sessionlog_event_log::{LockOptions, Mode};
use sessionlog_events::write::{header, message, Head};
use sessionlog_store::{load_transcript, TranscriptWriter, WriteOptions};

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/"}"#;

#[test]
fn entries_built_with_fresh_ids_chain_from_the_leaf_and_read_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.jsonl");
    let head = header("s1", "2026-03-01T00:00:00.000Z", "/w", None).unwrap();
    let mut w = TranscriptWriter::create(&path, &head, WriteOptions::default()).unwrap();
    assert_eq!(w.leaf_id(), None);
    let mut ids = Vec::new();
    for (i, text) in ["hello", "again"].iter().enumerate() {
        let id = w.fresh_id(&format!("s1\n{i}"));
        let at = Head { id: &id, parent_id: w.leaf_id(), timestamp: "2026-03-01T00:00:00.000Z" };
        let entry = message(&at, &serde_json::json!({"role": "user", "content": text})).unwrap();
        w.append(&[entry]).unwrap();
        assert_eq!(w.leaf_id(), Some(id.as_str()));
        ids.push(id);
    }
    // The same seed again gives another id: the first is taken now.
    assert_ne!(w.fresh_id("s1\n0"), ids[0]);
    drop(w);
    let t = load_transcript(&path, Mode::Strict).unwrap().loaded.transcript;
    assert_eq!(t.entries.len(), 2);
    assert_eq!(t.entries[1].parent_id.as_deref(), Some(ids[0].as_str()));
    // No usage yet: the counters are every message's estimate, ceil(5/4) twice.
    let w = TranscriptWriter::open(&path, WriteOptions::default()).unwrap();
    assert_eq!((w.counters().tokens(), w.counters().last_usage()), (4.0, None));
}

#[test]
fn a_new_transcript_never_overwrites_a_file_and_a_missing_one_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    let head = header("s1", "t", "/", None).unwrap();
    let err = TranscriptWriter::create(&path, &head, WriteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("exists already"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), format!("{HEADER}\n"));
    let missing = dir.path().join("absent.jsonl");
    let err = TranscriptWriter::open(&missing, WriteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("no such transcript"), "{err}");
    assert!(!missing.exists());
}

#[test]
fn one_writer_per_transcript_in_a_process_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    let first = TranscriptWriter::open(&path, WriteOptions::default()).unwrap();
    let quick = WriteOptions {
        lock: LockOptions { timeout: Duration::from_millis(150), ..LockOptions::default() },
        ..WriteOptions::default()
    };
    let err =
        std::thread::scope(|s| s.spawn(|| TranscriptWriter::open(&path, quick).map(|_| ())).join().unwrap())
            .unwrap_err();
    assert!(err.to_string().starts_with("session file locked (timeout 150ms)"), "{err}");
    drop(first);
    TranscriptWriter::open(&path, quick).unwrap();
}
