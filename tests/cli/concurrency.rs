//! Many writers, one transcript: every line whole, the count exact.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sessionlog_event_log::{AppendOptions, Appender, FsyncPolicy};
use sessionlog_events::Entry;

use crate::support::{arg, bin};

const HEADER: &str = r#"{"type":"session","version":3,"id":"c0ffee00-0000-4000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
const WRITERS: usize = 8;
const APPENDS: usize = 1000;

fn line(writer: usize, i: usize) -> String {
    // Lines of different lengths, some long, so interleaving would show.
    let pad = "x".repeat((writer * 37 + i * 11) % 3000);
    format!(
        r#"{{"type":"custom","customType":"w{writer}","data":{{"i":{i},"pad":"{pad}"}},"id":"{writer:02x}{i:06x}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}}"#
    )
}

fn check(path: &Path) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.split_terminator('\n');
    assert_eq!(lines.next(), Some(HEADER));
    let mut seen = vec![vec![false; APPENDS]; WRITERS];
    let mut count = 0;
    for (n, l) in lines.enumerate() {
        let entry = Entry::parse(l).unwrap_or_else(|e| panic!("line {}: {e}", n + 2));
        let id = entry.id.unwrap();
        let (w, i) =
            (usize::from_str_radix(&id[..2], 16).unwrap(), usize::from_str_radix(&id[2..], 16).unwrap());
        assert_eq!(l, line(w, i), "line {} is not exactly what writer {w} wrote", n + 2);
        assert!(!seen[w][i], "line {} duplicated", n + 2);
        seen[w][i] = true;
        count += 1;
    }
    assert_eq!(count, WRITERS * APPENDS);
    assert!(text.ends_with('\n'));
}

#[test]
fn eight_threads_append_a_thousand_entries_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let path = &path;
            s.spawn(move || {
                let options = AppendOptions { fsync: FsyncPolicy::PerBatch, ..AppendOptions::default() };
                let mut app = Appender::open(path, options).unwrap();
                for i in 0..APPENDS {
                    app.append(&Entry::parse(&line(w, i)).unwrap()).unwrap();
                }
            });
        }
    });
    check(&path);
}

#[test]
fn eight_processes_append_a_thousand_entries_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.jsonl");
    fs::write(&path, format!("{HEADER}\n")).unwrap();
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut child = Command::new(bin())
                .args([
                    "append",
                    arg(&path),
                    "--batch",
                    "1",
                    "--fsync",
                    "per-batch",
                    "--lock-timeout-ms",
                    "300000",
                ])
                .stdin(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut input = String::new();
            for i in 0..APPENDS {
                input.push_str(&line(w, i));
                input.push('\n');
            }
            let mut stdin = child.stdin.take().unwrap();
            std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
            child
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "writer failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    check(&path);
}
