//! One writer per transcript, across threads and processes: a held lock
//! refuses a second writer, a dead holder's lock is taken over by exactly one
//! process, and a compaction racing an append chains from the true last entry.
//!
//! Each process test here fails with the lock file disabled (checked by
//! making `FileLock::acquire` return without creating the file).

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use sessionlog_event_log::{AppendOptions, Appender, FsyncPolicy};
use sessionlog_events::Entry;

use crate::support::{arg, bin, fixtures};

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
    let text = fs::read_to_string(&path).unwrap();
    let mut lines = text.split_terminator('\n');
    assert_eq!(lines.next(), Some(HEADER));
    let mut seen: Vec<&str> = lines.collect();
    assert_eq!(seen.len(), WRITERS * APPENDS);
    seen.sort_unstable();
    let mut expected: Vec<String> =
        (0..WRITERS).flat_map(|w| (0..APPENDS).map(move |i| line(w, i))).collect();
    expected.sort_unstable();
    assert!(seen.iter().zip(&expected).all(|(a, b)| a == b), "every line exactly as written, once");
}

/// `sessionlog append FILE` with its stdin kept open: it holds the lock
/// until stdin closes.
fn holder(file: &Path, extra: &[&str]) -> (Child, ChildStdin) {
    let mut child = Command::new(bin())
        .args(["append", arg(file), "--fsync", "every-entry"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

/// Waits until `file` ends with `text` (the holder wrote it, so it holds the lock).
fn wait_for_tail(file: &Path, text: &str) {
    let started = Instant::now();
    while !fs::read_to_string(file).unwrap_or_default().ends_with(text) {
        assert!(started.elapsed() < Duration::from_secs(120), "the holder never wrote its line");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn append_once(file: &Path, timeout_ms: &str, text: &str) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(["append", arg(file), "--lock-timeout-ms", timeout_ms])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_held_lock_refuses_a_second_writer_and_a_dead_holders_lock_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("held.jsonl");
    fs::write(&file, format!("{HEADER}\n")).unwrap();
    let (mut a, mut a_in) = holder(&file, &[]);
    let first = format!("{}\n", line(0, 0));
    a_in.write_all(first.as_bytes()).unwrap();
    a_in.flush().unwrap();
    wait_for_tail(&file, &first);
    let before = fs::read(&file).unwrap();

    // B waits its timeout, names the holder, and writes nothing.
    let b_line = format!("{}\n", line(1, 0));
    let out = append_once(&file, "300", &b_line);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("session file locked (timeout 300ms): pid={}", a.id())), "{stderr}");
    assert_eq!(fs::read(&file).unwrap(), before, "the refused writer wrote nothing");

    // A dies without releasing the lock; B takes the stale lock over.
    a.kill().unwrap();
    a.wait().unwrap();
    let lock = dir.path().join("held.jsonl.lock");
    let left: serde_json::Value = serde_json::from_slice(&fs::read(&lock).unwrap()).unwrap();
    assert_eq!(left["pid"], a.id(), "the dead holder's lock is still there");
    let out = append_once(&file, "5000", &b_line);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let mut expected = before.clone();
    expected.extend_from_slice(b_line.as_bytes());
    assert_eq!(fs::read(&file).unwrap(), expected);
    assert!(!lock.exists(), "released after the append");
}

#[test]
fn of_two_processes_taking_over_one_stale_lock_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stale.jsonl");
    fs::write(&file, format!("{HEADER}\n")).unwrap();
    // A holder whose pid cannot exist: stale for everyone.
    let lock = dir.path().join("stale.jsonl.lock");
    fs::write(&lock, "{\n  \"pid\": 4294967295,\n  \"createdAt\": \"2026-01-01T00:00:00.000Z\"\n}\n")
        .unwrap();
    // Both judge the lock stale at once, then pause before taking it over:
    // the first for 0.3 s, the second for 2.3 s, so the second acts on its
    // old judgement after the first has taken the lock (the race the folder
    // guard closes: without it the second removes the first's lock).
    let racers: Vec<(Child, ChildStdin)> = (0..2)
        .map(|n| {
            let mut child = Command::new(bin())
                .args(["append", arg(&file), "--fsync", "every-entry", "--lock-timeout-ms", "6000"])
                .env("SESSIONLOG_TEST_TAKEOVER_PAUSE_MS", (300 + 2000 * n).to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            (child, stdin)
        })
        .collect();
    // Each writes one line as soon as it holds the lock; the loser gives up
    // after its timeout. Keep both stdins open until one has given up, so
    // the winner still holds the lock while the loser tries.
    let mut stdins = Vec::new();
    let mut children = Vec::new();
    for (n, (child, mut stdin)) in racers.into_iter().enumerate() {
        stdin.write_all(format!("{}\n", line(n, 0)).as_bytes()).unwrap();
        stdin.flush().unwrap();
        stdins.push(Some(stdin));
        children.push(child);
    }
    let started = Instant::now();
    let loser = loop {
        if let Some(n) = children.iter_mut().position(|c| c.try_wait().unwrap().is_some()) {
            break n;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "neither racer gave up: both hold the lock");
        std::thread::sleep(Duration::from_millis(50));
    };
    stdins.iter_mut().for_each(|s| drop(s.take()));
    let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    let loser_err = String::from_utf8_lossy(&outputs[loser].stderr);
    assert_eq!(codes[loser], Some(1), "the first to finish lost: {loser_err}");
    assert!(loser_err.contains("session file locked (timeout 6000ms)"), "{loser_err}");
    assert_eq!(codes[1 - loser], Some(0), "{}", String::from_utf8_lossy(&outputs[1 - loser].stderr));
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        format!("{HEADER}\n{}\n", line(1 - loser, 0)),
        "only the winner wrote"
    );
}

fn fixture_copy(dir: &Path, name: &str, fixture: &str) -> std::path::PathBuf {
    let source = fixtures::shared_dir().join("fixtures/openclaw/agents/build/sessions").join(fixture);
    let file = dir.join(name);
    fs::write(&file, fs::read(source).unwrap()).unwrap();
    file
}

fn compact(file: &Path) -> Child {
    Command::new(bin())
        .args(["compact", arg(file), "--now", "2026-11-22T00:00:00Z", "--lock-timeout-ms", "120000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn last_id(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    let last = text.lines().last().unwrap();
    Entry::parse(last).unwrap().id.unwrap()
}

#[test]
fn a_compaction_racing_an_append_chains_from_the_true_last_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture_copy(dir.path(), "race.jsonl", "678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl");
    // The appender holds the lock and writes entries chained on the leaf.
    let (mut a, mut a_in) = holder(&file, &[]);
    let mut parent = last_id(&file);
    let chained = |i: usize, parent: &mut String| {
        let id = format!("ab{i:06x}");
        let text = format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-11-21T00:00:0{i}.000Z","message":{{"role":"user","content":"entry {i}","timestamp":1}}}}"#
        ) + "\n";
        *parent = id;
        text
    };
    let first = chained(0, &mut parent);
    a_in.write_all(first.as_bytes()).unwrap();
    a_in.flush().unwrap();
    wait_for_tail(&file, &first);
    // The compaction starts while the append still runs, and must wait.
    let c = compact(&file);
    std::thread::sleep(Duration::from_millis(500));
    for i in 1..5 {
        a_in.write_all(chained(i, &mut parent).as_bytes()).unwrap();
    }
    drop(a_in);
    assert!(a.wait().unwrap().success());
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(&file).unwrap();
    let compaction = Entry::parse(text.lines().last().unwrap()).unwrap();
    assert!(compaction.raw().contains(r#""type":"compaction""#));
    assert_eq!(compaction.parent_id.as_deref(), Some("ab000004"), "chained from the appender's last entry");
}

#[test]
fn of_four_concurrent_compactions_one_writes_and_the_others_see_it() {
    let dir = tempfile::tempdir().unwrap();
    // A large transcript, so the compactions' reads and summaries overlap in time.
    let file = fixture_copy(dir.path(), "four.jsonl", "684637ff-e673-46e4-a1a9-0de622f22f21.jsonl");
    let leaf = last_id(&file);
    let before = fs::read(&file).unwrap();
    let outputs: Vec<_> = (0..4)
        .map(|_| compact(&file))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let written = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(written, 1, "exactly one compaction");
    for o in outputs.iter().filter(|o| !o.status.success()) {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("nothing to compact (last entry on path is a compaction)"), "{stderr}");
    }
    let after = fs::read(&file).unwrap();
    assert!(after.starts_with(&before));
    let added: Vec<&str> = std::str::from_utf8(&after[before.len()..]).unwrap().lines().collect();
    assert_eq!(added.len(), 1);
    assert_eq!(Entry::parse(added[0]).unwrap().parent_id.as_deref(), Some(leaf.as_str()));
}
