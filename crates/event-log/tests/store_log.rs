//! The store log through the same reader and writer as transcripts: no
//! header, store events as lines, a bad line named by file, line and reason,
//! a torn tail repaired on open.

use std::fs;
use std::path::Path;

use sessionlog_event_log::{
    AppendOptions, FsyncPolicy, Mode, ReadError, StoreAppender, StoreReader, TailRepair,
};
use sessionlog_events::StoreEvent;

fn deleted(key: &str, at: i64) -> StoreEvent {
    StoreEvent::Deleted { key: key.to_owned(), at }
}

fn read(path: &Path, mode: Mode) -> (Vec<(u64, StoreEvent)>, Option<ReadError>) {
    let mut out = Vec::new();
    for record in StoreReader::open(path, mode).unwrap() {
        match record {
            Ok(r) => out.push((r.line, r.entry)),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[test]
fn store_events_are_written_as_lines_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut log = StoreAppender::open(&path, AppendOptions::default()).unwrap();
    log.append_batch(&[deleted("a", 1), deleted("b", 2)]).unwrap();
    assert_eq!(log.end().unwrap(), fs::metadata(&path).unwrap().len());
    drop(log);
    // The lines as written by hand: JSON.stringify of each event, one per line.
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "{\"type\":\"deleted\",\"key\":\"a\",\"at\":1}\n{\"type\":\"deleted\",\"key\":\"b\",\"at\":2}\n"
    );
    let (events, error) = read(&path, Mode::Strict);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, [(1, deleted("a", 1)), (2, deleted("b", 2))]);
}

#[test]
fn an_empty_store_log_has_no_events_and_needs_no_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    fs::write(&path, "\n").unwrap();
    assert_eq!(read(&path, Mode::Strict).0.len(), 0);
    assert!(read(&path, Mode::Strict).1.is_none());
}

#[test]
fn a_bad_line_names_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let good = deleted("a", 1).to_line().unwrap();
    fs::write(&path, format!("{good}\n\n{{\"type\":\"teleported\",\"key\":\"k\"}}\n{good}\n")).unwrap();
    let (events, error) = read(&path, Mode::Strict);
    assert_eq!(events.len(), 1);
    let message = error.unwrap().to_string();
    // Line 3 (the blank line 2 still counts), the column serde reports, the reason.
    assert!(message.starts_with(&format!("{}:3:", path.display())), "{message}");
    assert!(message.contains("unknown variant `teleported`"), "{message}");
    // Lenient mode skips it and says where.
    let mut reader = StoreReader::open(&path, Mode::Lenient).unwrap();
    let lines: Vec<u64> = reader.by_ref().map(|r| r.unwrap().line).collect();
    assert_eq!(lines, [1, 4]);
    assert_eq!(reader.skipped()[0].line, 3);
}

#[test]
fn a_torn_tail_is_moved_aside_on_open_and_the_next_event_starts_a_fresh_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let first = deleted("a", 1).to_line().unwrap();
    let torn = &deleted("b", 2).to_line().unwrap()[..20];
    fs::write(&path, format!("{first}\n{torn}")).unwrap();
    let options = AppendOptions { fsync: FsyncPolicy::EveryEntry, ..AppendOptions::default() };
    let mut log = StoreAppender::open(&path, options).unwrap();
    let Some(TailRepair::MovedAside { line, offset, bytes, aside }) = log.tail_repair().cloned() else {
        panic!("expected the fragment moved aside, got {:?}", log.tail_repair());
    };
    assert_eq!((line, offset, bytes), (2, first.len() as u64 + 1, 20));
    assert_eq!(fs::read_to_string(aside).unwrap(), torn);
    log.append(&deleted("c", 3)).unwrap();
    drop(log);
    let (events, error) = read(&path, Mode::Strict);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events, [(1, deleted("a", 1)), (2, deleted("c", 3))]);
}

#[test]
fn reading_resumes_where_an_earlier_read_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let first = deleted("a", 1).to_line().unwrap();
    fs::write(&path, format!("{first}\n{}\n", deleted("b", 2).to_line().unwrap())).unwrap();
    let bytes = fs::read(&path).unwrap();
    let rest = &bytes[first.len() + 1..];
    let records: Vec<_> = StoreReader::new(rest, &path, Mode::Strict)
        .resume_at(1, first.len() as u64 + 1)
        .map(Result::unwrap)
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].line, records[0].offset), (2, first.len() as u64 + 1));
}
