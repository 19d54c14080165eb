//! The store's write path: one writer at a time (across threads of a process,
//! and across processes through the lock file), a torn tail repaired, a bad
//! line named by file, line and reason, the projection always the fold of
//! the log, and the lifecycle bus fed from what is appended.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use sessionlog_event_log::TailRepair;
use sessionlog_events::StoreEvent;
use sessionlog_sessions::bus::Bus;
use sessionlog_store::{AgentStore, StoreError};

fn created(key: &str, id: &str, at: i64) -> StoreEvent {
    StoreEvent::Created {
        key: key.to_owned(),
        session_id: id.to_owned(),
        at,
        reason: "inbound".into(),
        fields: Map::new(),
        provenance: None,
    }
}

fn store_with(root: &Path, events: &[StoreEvent]) -> AgentStore {
    let store = AgentStore::jsonl(root, "main");
    store.append(events).unwrap();
    store
}

fn on_disk(store: &AgentStore) -> Value {
    serde_json::from_slice(&fs::read(store.projection_path()).unwrap()).unwrap()
}

#[test]
fn a_torn_tail_is_left_out_by_readers_and_moved_aside_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    let log = store.log_path();
    let whole = fs::read(&log).unwrap();
    let torn = &created("agent:main:b", "s2", 2).to_line().unwrap()[..30];
    fs::OpenOptions::new().append(true).open(&log).unwrap().write_all_str(torn);
    // A reader sees the acknowledged events only.
    assert_eq!(store.events().unwrap(), [created("agent:main:a", "s1", 1)]);
    // The next writer moves the fragment aside, reports it, and appends on a fresh line.
    let mut writer = store.writer().unwrap();
    let Some(TailRepair::MovedAside { line, bytes, aside, .. }) = writer.tail_repair().cloned() else {
        panic!("expected a repair, got {:?}", writer.tail_repair());
    };
    assert_eq!((line, bytes), (2, 30));
    assert_eq!(fs::read_to_string(&aside).unwrap(), torn);
    writer.append(&[created("agent:main:c", "s3", 3)]).unwrap();
    drop(writer);
    let after = fs::read(&log).unwrap();
    assert!(after.starts_with(&whole));
    assert_eq!(store.events().unwrap().len(), 2);
    assert_eq!(on_disk(&store), Value::Object(store.project(None).unwrap()));
}

trait WriteStr {
    fn write_all_str(self, s: &str);
}

impl WriteStr for fs::File {
    fn write_all_str(mut self, s: &str) {
        std::io::Write::write_all(&mut self, s.as_bytes()).unwrap();
    }
}

#[test]
fn a_bad_line_is_an_error_naming_file_line_and_reason_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    let log = store.log_path();
    let mut text = fs::read_to_string(&log).unwrap();
    text.push_str("{\"type\":\"created\",\"key\":\"agent:main:b\"}\n");
    text.push_str(&created("agent:main:c", "s3", 3).to_line().unwrap());
    text.push('\n');
    fs::write(&log, &text).unwrap();
    let err = store.events().unwrap_err().to_string();
    // Line 2: the missing field is named by serde, with the column.
    assert!(err.starts_with(&format!("{}:2:", log.display())), "{err}");
    assert!(err.contains("missing field `sessionId`"), "{err}");
    // A writer refuses the same way, and the log stays as it was.
    let err = store.patch("agent:main:a", Map::new(), 5, false).unwrap_err().to_string();
    assert!(err.contains(":2:") && err.contains("missing field `sessionId`"), "{err}");
    assert_eq!(fs::read_to_string(&log).unwrap(), text);
}

#[test]
fn an_event_that_does_not_apply_is_refused_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    let before = fs::read(store.log_path()).unwrap();
    let err = store.append(&[StoreEvent::Deleted { key: "agent:main:nobody".into(), at: 2 }]).unwrap_err();
    assert!(matches!(err, StoreError::Fold { .. }), "{err}");
    assert_eq!(fs::read(store.log_path()).unwrap(), before);
}

#[test]
fn a_second_writer_in_the_same_process_waits_and_is_refused_while_the_first_holds_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    let other = AgentStore::jsonl(dir.path(), "main").with_lock_timeout(Duration::from_millis(200));
    let held = store.writer().unwrap();
    let refused = std::thread::scope(|s| s.spawn(|| other.writer().map(|_| ())).join().unwrap());
    let err = refused.unwrap_err().to_string();
    assert!(err.starts_with("session file locked (timeout 200ms)"), "{err}");
    drop(held);
    other.writer().unwrap();
}

#[test]
fn concurrent_writers_of_one_process_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    const THREADS: usize = 6;
    const PATCHES: usize = 20;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = &store;
            s.spawn(move || {
                for i in 0..PATCHES {
                    let mut patch = Map::new();
                    patch.insert(format!("p{t}"), json!(i));
                    store.patch("agent:main:a", patch, 10 + i as i64, false).unwrap();
                }
            });
        }
    });
    let events = store.events().unwrap();
    assert_eq!(events.len(), 1 + THREADS * PATCHES);
    let projected = on_disk(&store);
    for t in 0..THREADS {
        assert_eq!(projected["agent:main:a"][format!("p{t}")], PATCHES - 1, "p{t}");
    }
    assert_eq!(projected, Value::Object(store.project(None).unwrap()));
}

#[test]
fn the_bus_publishes_what_the_store_appends() {
    let dir = tempfile::tempdir().unwrap();
    let bus = Bus::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let _sub = bus.subscribe(move |e| {
        s.lock().unwrap().push((e.session_key.clone(), e.reason.clone()));
        Ok(())
    });
    let store = AgentStore::jsonl(dir.path(), "main").with_bus(bus);
    store.append(&[created("agent:main:a", "s1", 1)]).unwrap();
    store.patch("agent:main:a", Map::new(), 2, false).unwrap();
    // A refused event publishes nothing.
    store.append(&[StoreEvent::Deleted { key: "agent:main:zz".into(), at: 3 }]).unwrap_err();
    store.append(&[StoreEvent::Deleted { key: "agent:main:a".into(), at: 4 }]).unwrap();
    let seen = seen.lock().unwrap().clone();
    let expect = [("agent:main:a", "created"), ("agent:main:a", "updated"), ("agent:main:a", "deleted")];
    assert_eq!(seen, expect.map(|(k, r)| (k.to_owned(), r.to_owned())));
}

#[test]
fn the_writer_reads_only_what_was_appended_since_it_last_looked() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:a", "s1", 1)]);
    // Another store object (another process, say) appends meanwhile.
    AgentStore::jsonl(dir.path(), "main").append(&[created("agent:main:b", "s2", 2)]).unwrap();
    let writer = store.writer().unwrap();
    assert_eq!(writer.events(), 2);
    assert_eq!(Value::Object(writer.store().clone()), Value::Object(store.project(None).unwrap()));
}

#[test]
fn a_session_transcript_swapped_for_a_link_after_the_check_is_refused_by_the_open_itself() {
    use sessionlog_store::{SessionOptions, SessionWriter, TranscriptWriter, WriteOptions};
    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/"}"#;
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &[created("agent:main:main", "s1", 0)]);
    let path = store.dir().join("s1.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    let victim = dir.path().join("victim.jsonl");
    fs::write(&victim, format!("{HEADER}\n")).unwrap();
    // Another writer of this process holds the transcript, so the session's
    // open passes the link check (a plain file then) and waits for it.
    let holder = TranscriptWriter::open(&path, WriteOptions::default()).unwrap();
    let options =
        SessionOptions { cwd: "/", now_ms: 0, context_window: None, write: WriteOptions::default() };
    std::thread::scope(|s| {
        let opening = s.spawn(|| SessionWriter::open(&store, "agent:main:main", &options).map(|_| ()));
        // Once the open waits for the holder's claim, it has passed the check.
        while sessionlog_store::waiting_for(&path) == 0 {
            assert!(!opening.is_finished(), "the open ended without waiting for the holder");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The swap: the transcript replaced by a link to a file outside.
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        drop(holder);
        let err = opening.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("s1.jsonl: a symbolic link; not written through"), "{err}");
    });
    assert_eq!(fs::read_to_string(&victim).unwrap(), format!("{HEADER}\n"));
    assert!(path.symlink_metadata().unwrap().file_type().is_symlink());
}
