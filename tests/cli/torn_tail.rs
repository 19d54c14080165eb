//! Torn-tail recovery: a real transcript cut at every byte of its last line.

use std::fs;

use sessionlog_event_log::{AppendOptions, Appender, FsyncPolicy, TailRepair};
use sessionlog_events::Entry;

use crate::support::fixtures;

#[test]
fn cutting_the_last_line_anywhere_loses_nothing_and_the_next_append_starts_a_fresh_line() {
    let source = fixtures::shared_dir()
        .join("fixtures/openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl");
    let bytes = fs::read(&source).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'));
    let last_start = bytes[..bytes.len() - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let complete = &bytes[..last_start];
    let last_line = &bytes[last_start..];
    let next = Entry::parse(r#"{"type":"custom","customType":"t","data":1,"id":"ffffffff","parentId":null}"#)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = AppendOptions { fsync: FsyncPolicy::Never, ..AppendOptions::default() };
    for cut in 0..=last_line.len() {
        let path = dir.path().join(format!("cut-{cut}.jsonl"));
        fs::write(&path, &bytes[..last_start + cut]).unwrap();
        let mut app = Appender::open(&path, options).unwrap();
        let repair = app.tail_repair().cloned();
        app.append(&next).unwrap();
        drop(app);
        let after = fs::read(&path).unwrap();
        let kept = match repair {
            None => {
                // Nothing to repair: the file ended on a line boundary.
                assert!(cut == 0 || cut == last_line.len(), "cut {cut}: no repair reported");
                &bytes[..last_start + cut]
            }
            Some(TailRepair::Terminated { line }) => {
                // The object was whole, only its newline was missing.
                assert_eq!(cut, last_line.len() - 1, "cut {cut}");
                assert_eq!(line, 455);
                &bytes[..]
            }
            Some(TailRepair::MovedAside { line, offset, bytes: moved, aside }) => {
                assert!(cut > 0 && cut < last_line.len() - 1, "cut {cut}");
                assert_eq!((line, offset, moved), (455, last_start as u64, cut as u64), "cut {cut}");
                assert_eq!(fs::read(&aside).unwrap(), &last_line[..cut], "cut {cut}: fragment preserved");
                fs::remove_file(aside).unwrap();
                complete
            }
        };
        assert!(after.starts_with(kept), "cut {cut}: complete lines intact");
        assert_eq!(&after[kept.len()..], format!("{}\n", next.raw()).as_bytes(), "cut {cut}: fresh line");
        fs::remove_file(&path).unwrap();
    }
}
