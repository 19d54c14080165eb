//! The live loop's SQLite storage at the store's level: a transcript inside
//! an agent database appended through `TranscriptWriter::open_in_database`,
//! beside another writer of the same session.

use std::time::Duration;

use serde_json::json;
use sessionlog_event_log::{LockOptions, Mode};
use sessionlog_events::write::{header, message, Head};
use sessionlog_events::Entry;
use sessionlog_sqlite_store::{LiveDatabase, TranscriptName};
use sessionlog_store::{load_transcript, visible_window_bytes, TranscriptWriter, WriteOptions};

const T: &str = "2026-03-01T00:00:00.000Z";

/// An agent database under `root` whose store names session `sid` (as
/// OpenClaw's would), that session's transcript name, and a header for it.
fn session_in_database(root: &std::path::Path, sid: &str) -> (std::path::PathBuf, TranscriptName, Entry) {
    let db = root.join("agents/main/agent/openclaw-agent.sqlite");
    LiveDatabase::open(&db, "main", 0)
        .unwrap()
        .put_entry("agent:main:main", json!({"sessionId": sid, "updatedAt": 1}).as_object().unwrap())
        .unwrap();
    let name = TranscriptName { database: db.clone(), session_id: sid.into() };
    let head = header(sid, T, "/w", None).unwrap();
    (db, name, head)
}

fn user(id: &str, parent: Option<&str>, text: &str) -> Entry {
    message(&Head { id, parent_id: parent, timestamp: T }, &json!({"role": "user", "content": text})).unwrap()
}

#[test]
fn another_writers_entries_land_between_ours_and_the_writer_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let (db, name, head) = session_in_database(dir.path(), "s1");
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

/// OpenClaw 2026.9 sizes a transcript in its database for the memory
/// flush's `forceFlushTranscriptBytes` over the model-visible window
/// (`readVisibleTranscriptStats`): the current path's entries that go into
/// the context, after the latest compaction (itself and the messages it
/// keeps counted) — each line with its newline. The expected sizes are the
/// lines picked here by that rule.
#[test]
fn the_size_the_flush_reads_is_openclaws_visible_window() {
    let dir = tempfile::tempdir().unwrap();
    let (_, name, head) = session_in_database(dir.path(), "s1");
    let mut w = TranscriptWriter::open_in_database(&name, "main", &head, WriteOptions::default(), 0).unwrap();
    let line = |id: &str, parent: &str, rest: &str| {
        format!(r#"{{"type":{rest},"id":"{id}","parentId":"{parent}","timestamp":"{T}"}}"#)
    };
    let a = format!(
        r#"{{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"{T}","message":{{"role":"user","content":"first question"}}}}"#
    );
    let b = line(
        "bbbbbbbb",
        "aaaaaaaa",
        r#""message","message":{"role":"assistant","content":[{"type":"text","text":"first answer"}]}"#,
    );
    let x = line(
        "xxxxxxxx",
        "bbbbbbbb",
        r#""message","message":{"role":"user","content":"a branch left behind"}"#,
    );
    // A user's `!!` command: in the transcript, not in the context.
    let c = line(
        "cccccccc",
        "bbbbbbbb",
        r#""message","message":{"role":"bashExecution","command":"ls","output":"a b","exitCode":0,"excludeFromContext":true}"#,
    );
    let k = line(
        "kkkkkkkk",
        "cccccccc",
        r#""compaction","summary":"the first question","firstKeptEntryId":"bbbbbbbb","tokensBefore":900"#,
    );
    let d = line(
        "dddddddd",
        "kkkkkkkk",
        r#""message","message":{"role":"user","content":"after the compaction"}"#,
    );
    let e = line(
        "eeeeeeee",
        "dddddddd",
        r#""message","message":{"role":"bashExecution","command":"pwd","output":"/w","exitCode":0,"excludeFromContext":true}"#,
    );
    let f = line("ffffffff", "eeeeeeee", r#""model_change","provider":"openai","modelId":"gpt-5""#);
    let g = line(
        "gggggggg",
        "ffffffff",
        r#""message","message":{"role":"assistant","content":[{"type":"text","text":"second answer"}]}"#,
    );
    let size = |lines: &[&String]| lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    // Kept as entries are appended, the size always equals the window
    // computed again from the whole transcript.
    let append = |w: &mut TranscriptWriter, l: &String| {
        w.append(&[Entry::parse(l).unwrap()]).unwrap();
        let whole = visible_window_bytes(w.transcript(), w.transcript().default_leaf_index());
        assert_eq!(w.jsonl_bytes(), whole, "after {l}");
    };
    for l in [&a, &b, &x] {
        append(&mut w, l);
    }
    // The path a → b → x; the header is not counted.
    assert_eq!(w.jsonl_bytes(), size(&[&a, &b, &x]));
    append(&mut w, &c);
    // x is off the path now (c continues from b), and c is not in the context.
    assert_eq!(w.jsonl_bytes(), size(&[&a, &b]));
    append(&mut w, &k);
    // The compaction and the message it keeps from b; a is summarised.
    assert_eq!(w.jsonl_bytes(), size(&[&k, &b]));
    for l in [&d, &e, &f, &g] {
        append(&mut w, l);
    }
    assert_eq!(w.jsonl_bytes(), size(&[&k, &b, &d, &f, &g]));
    // Everything written, what the size was before (every event once).
    let all = size(&[&a, &b, &x, &c, &k, &d, &e, &f, &g]);
    assert!(w.jsonl_bytes() < all);
}

/// A `reset` entry (OpenClaw 2026.9) ends the window before it, itself
/// not counted; from its `firstKeptEntryId` it keeps user and assistant
/// messages and the tool results whose call is kept.
#[test]
fn a_reset_entry_keeps_its_messages_and_paired_results_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_, name, head) = session_in_database(dir.path(), "s2");
    let mut w = TranscriptWriter::open_in_database(&name, "main", &head, WriteOptions::default(), 0).unwrap();
    let line = |id: &str, parent: Option<&str>, rest: &str| {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(r#"{{"type":{rest},"id":"{id}","parentId":{parent},"timestamp":"{T}"}}"#)
    };
    let o = line("00000000", None, r#""message","message":{"role":"user","content":"old"}"#);
    let u = line("11111111", Some("00000000"), r#""message","message":{"role":"user","content":"read it"}"#);
    let a = line(
        "22222222",
        Some("11111111"),
        r#""message","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_1","name":"read","arguments":{}}]}"#,
    );
    let t = line(
        "33333333",
        Some("22222222"),
        r#""message","message":{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"42"}],"isError":false}"#,
    );
    let s = line(
        "44444444",
        Some("33333333"),
        r#""message","message":{"role":"toolResult","toolCallId":"call_9","toolName":"read","content":[{"type":"text","text":"stray"}],"isError":false}"#,
    );
    let r = line("55555555", Some("44444444"), r#""reset","firstKeptEntryId":"11111111""#);
    let n =
        line("66666666", Some("55555555"), r#""message","message":{"role":"user","content":"new start"}"#);
    for l in [&o, &u, &a, &t, &s, &r, &n] {
        w.append(&[Entry::parse(l).unwrap()]).unwrap();
        let whole = visible_window_bytes(w.transcript(), w.transcript().default_leaf_index());
        assert_eq!(w.jsonl_bytes(), whole, "after {l}");
    }
    let size = |lines: &[&String]| lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    assert_eq!(w.jsonl_bytes(), size(&[&u, &a, &t, &n]));
}
