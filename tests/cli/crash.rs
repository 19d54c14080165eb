//! Crash trials (DESIGN §8): `sessionlog append --fsync every-entry --ack`
//! in a child process, killed with SIGKILL at seeded random moments. After
//! each kill every line acknowledged as durable is in the file, whole and in
//! order; a torn last line is moved aside (its bytes kept) by the next append,
//! or terminated when only its newline was missing; the file reads back.
//!
//! `SESSIONLOG_CRASH_TRIALS` sets the number of trials (default 200);
//! docs/RELIABILITY.md reports a longer run.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{arg, bin};

const HEADER: &str = r#"{"type":"session","version":3,"id":"c0ffee00-0000-4000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

/// xorshift64*: the same kill points on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn line(trial: u64, i: u64, pad: usize) -> String {
    format!(
        r#"{{"type":"custom","customType":"crash","data":{{"trial":{trial},"i":{i},"pad":"{}"}},"id":"{trial:04x}{i:04x}","parentId":null}}"#,
        "p".repeat(pad)
    )
}

/// The torn fragment after the last newline, if any.
fn fragment(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    &bytes[start..]
}

/// Side files holding moved-aside fragments, removed once read.
fn take_asides(dir: &Path) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("crash.jsonl.torn.") {
            found.push(fs::read(&path).unwrap());
            fs::remove_file(path).unwrap();
        }
    }
    found
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_line() {
    let trials: u64 =
        std::env::var("SESSIONLOG_CRASH_TRIALS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("crash.jsonl");
    let mut rng = Rng(0xc4a5_11ed_5eed);
    let mut acknowledged: Vec<String> = Vec::new();
    let (mut torn_seen, mut moved_aside, mut terminated, mut simulated) = (0, 0, 0, 0);
    let (mut total_acknowledged, mut lost) = (0, 0);
    for trial in 0..trials {
        // A fresh file every 100 trials keeps the files small.
        if trial % 100 == 0 {
            if trial > 0 {
                lost += verify(&file, &mut acknowledged);
            }
            fs::write(&file, format!("{HEADER}\n")).unwrap();
        }
        let before = fs::read(&file).unwrap();
        let pending = fragment(&before).to_vec();
        let good = &before[..before.len() - pending.len()];
        let count = 1 + rng.below(30);
        let lines: Vec<String> = (0..count)
            .map(|i| {
                let pad = match rng.below(20) {
                    0 => 64_000 + rng.below(200_000) as usize,
                    1..=5 => rng.below(20_000) as usize,
                    _ => rng.below(300) as usize,
                };
                line(trial, i, pad)
            })
            .collect();
        let mut child = Command::new(bin())
            .args(["append", arg(&file), "--fsync", "every-entry", "--ack", "--lock-timeout-ms", "60000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let mut acks = BufReader::new(child.stdout.take().unwrap());
        // Kill after k acknowledgements, or after a pause that may fall
        // before the file is even open.
        let mut acked = 0u64;
        if rng.below(3) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        } else {
            let k = rng.below(count + 1);
            let mut ack = String::new();
            while acked < k {
                ack.clear();
                if acks.read_line(&mut ack).unwrap() == 0 {
                    break;
                }
                acked = ack.trim().parse().unwrap();
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        feeder.join().unwrap();
        // Acknowledgements already in the pipe count too.
        for ack in acks.lines() {
            acked = ack.unwrap().trim().parse().unwrap();
        }
        acknowledged.extend(lines[..acked as usize].iter().cloned());
        total_acknowledged += acked;

        let after = fs::read(&file).unwrap();
        assert!(after.starts_with(good), "trial {trial}: complete lines before the trial changed");
        let mut rest = &after[good.len()..];
        let asides = take_asides(dir.path());
        if !pending.is_empty() {
            if rest.starts_with(&pending) && rest.get(pending.len()) == Some(&b'\n') {
                terminated += 1;
                rest = &rest[pending.len() + 1..];
            } else if rest.starts_with(&pending) && acked == 0 {
                // Killed before the open repaired the tail: still there, retried next trial.
            } else {
                assert!(asides.contains(&pending), "trial {trial}: torn fragment not kept aside");
                moved_aside += 1;
            }
        }
        // What follows is lines[..w] whole, then a prefix of lines[w], with w ≥ acked.
        let mut written = 0;
        for l in &lines {
            let whole = format!("{l}\n");
            if rest.starts_with(whole.as_bytes()) {
                rest = &rest[whole.len()..];
                written += 1;
            } else {
                break;
            }
        }
        // (A fragment the killed child never got to repair stays as it was.)
        let unrepaired = !pending.is_empty() && acked == 0 && rest == &pending[..];
        if !rest.is_empty() && !unrepaired {
            let next = lines.get(written).map(|l| format!("{l}\n")).unwrap_or_default();
            assert!(
                next.as_bytes().starts_with(rest),
                "trial {trial}: bytes after line {written} are not a prefix of it"
            );
        }
        assert!(written as u64 >= acked, "trial {trial}: {acked} acknowledged, {written} in the file");
        if !fragment(&after).is_empty() {
            torn_seen += 1;
        } else if trial % 5 == 4 {
            // Simulate the other way a tail tears (a power cut losing the
            // unsynced end of a write): a seeded prefix of an unacknowledged line.
            let torn = line(trial, 9999, rng.below(500) as usize);
            let cut = 1 + rng.below(torn.len() as u64 - 1) as usize;
            let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
            f.write_all(&torn.as_bytes()[..cut]).unwrap();
            simulated += 1;
        }
    }
    lost += verify(&file, &mut acknowledged);
    eprintln!(
        "crash trials: {trials}, acknowledged lines: {total_acknowledged}, lost: {lost}, torn tails left by a kill: \
         {torn_seen}, simulated torn tails: {simulated}, moved aside: {moved_aside}, terminated: {terminated}"
    );
    assert_eq!(lost, 0, "acknowledged lines lost");
    assert!(moved_aside + terminated > 0, "no torn tail was repaired");
}

/// The file reads back, and every acknowledged line is in it as a whole
/// line: returns how many are missing, and forgets them.
fn verify(file: &Path, acknowledged: &mut Vec<String>) -> usize {
    let out = crate::support::run(&["inspect", arg(file), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(file).unwrap();
    let present: std::collections::HashSet<&str> = text.lines().collect();
    let lost = acknowledged.iter().filter(|l| !present.contains(l.as_str())).count();
    acknowledged.clear();
    lost
}

/// The store's writer (`sessionlog patch`: one `patched` event appended to
/// `events.jsonl` under its lock, then `sessions.json` replaced), killed at
/// seeded moments: every patch that exited 0 is in the log and in the
/// projection, the next writer repairs what the kill left, and a rebuild
/// from the log gives the same `sessions.json`.
#[test]
fn sigkill_during_store_writes_loses_no_acknowledged_event() {
    let trials: u64 = std::env::var("SESSIONLOG_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(60, |n| n / 4);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state/agents/main/sessions");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("sessions.json"), r#"{"agent:main:main":{"sessionId":"s1","updatedAt":1}}"#)
        .unwrap();
    let store = dir.path().join("store");
    crate::support::run_ok(&["import", arg(&dir.path().join("state")), "--into", arg(&store)]);
    let mut rng = Rng(0x0057_07e5_eed5);
    let mut acknowledged = Vec::new();
    let mut killed = 0;
    // Kill points spread over the time one patch takes on this machine.
    let started = std::time::Instant::now();
    crate::support::run_ok(&["patch", "--store", arg(&store), "agent:main:main", "--set", "first=1"]);
    // The span then follows the machine's load: it grows after a kill and
    // shrinks after a patch that finished, so kills and finished patches mix
    // however busy the machine is.
    let mut span = (started.elapsed().as_millis() as u64 * 3 / 2).max(4);
    for trial in 0..trials {
        let field = format!("f{trial}");
        let mut child = Command::new(bin())
            .args(["patch", "--store", arg(&store), "agent:main:main", "--set", &format!("{field}={trial}")])
            .args(["--at", &(1000 + trial).to_string(), "--lock-timeout-ms", "60000"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(span)));
        let done = child.try_wait().unwrap();
        if done.is_none() {
            child.kill().unwrap();
            killed += 1;
            span += span / 8 + 1;
        } else {
            span = (span - span / 16).max(4);
        }
        let status = child.wait().unwrap();
        if status.success() {
            acknowledged.push(field);
        } else if done.is_some() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("trial {trial}: patch failed without a kill: {err}");
        }
    }
    // A last write repairs whatever the last kill left, then the projection
    // holds every acknowledged field, as does a rebuild from the log.
    crate::support::run_ok(&["patch", "--store", arg(&store), "agent:main:main", "--set", "last=1"]);
    let projected =
        crate::support::json(&fs::read(store.join("agents/main/sessions/sessions.json")).unwrap());
    let entry = &projected["agent:main:main"];
    let lost: Vec<&String> = acknowledged.iter().filter(|f| entry.get(f.as_str()).is_none()).collect();
    crate::support::run_ok(&["sessions", "--store", arg(&store), "--rebuild"]);
    let rebuilt = crate::support::json(&fs::read(store.join("agents/main/sessions/sessions.json")).unwrap());
    eprintln!(
        "store crash trials: {trials}, killed: {killed}, acknowledged events: {}, lost: {}",
        acknowledged.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "acknowledged patches lost: {lost:?}");
    assert_eq!(rebuilt, projected, "sessions.json is the fold of the log");
    assert!(killed > 0 && !acknowledged.is_empty());
}

/// Runs `mount args…`; false where the machine does not allow it.
fn mount(args: &[&str]) -> bool {
    Command::new("mount").args(args).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Unmounts its folder when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A small tmpfs at `dir/name`, or `None` (with a message) where mounting
/// needs privileges this run does not have (CI runs as root).
fn small_tmpfs(dir: &Path, name: &str, size: &str) -> Option<Mounted> {
    let mnt = dir.join(name);
    fs::create_dir(&mnt).unwrap();
    if mount(&["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", arg(&mnt)]) {
        Some(Mounted(mnt))
    } else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        None
    }
}

fn append_acked(file: &Path, input: &str) -> (std::process::Output, u64) {
    let mut child = Command::new(bin())
        .args(["append", arg(file), "--fsync", "every-entry", "--ack"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let acked = String::from_utf8_lossy(&out.stdout).lines().last().map_or(0, |l| l.trim().parse().unwrap());
    (out, acked)
}

#[test]
fn a_full_disk_fails_the_append_clearly_and_acknowledges_only_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mnt) = small_tmpfs(dir.path(), "small", "64k") else { return };
    let file = mnt.0.join("full.jsonl");
    fs::write(&file, format!("{HEADER}\n")).unwrap();
    // Room the repair will need later.
    let filler = mnt.0.join("filler");
    fs::write(&filler, vec![b'f'; 8192]).unwrap();
    let lines: Vec<String> = (0..200).map(|i| line(0, i, 1000)).collect();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let (out, acked) = append_acked(&file, &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("full.jsonl: No space left on device (os error 28)"), "{stderr}");
    assert!(acked > 0 && acked < 200, "{acked} acknowledged");
    // Every acknowledged line whole; what follows is at most part of the next.
    let text = fs::read(&file).unwrap();
    let mut expected = format!("{HEADER}\n");
    for l in &lines[..acked as usize] {
        expected.push_str(l);
        expected.push('\n');
    }
    assert!(text.starts_with(expected.as_bytes()), "acknowledged lines intact");
    let rest = &text[expected.len()..];
    assert!(
        format!("{}\n", lines[acked as usize]).as_bytes().starts_with(rest),
        "only part of the next line"
    );
    // With room again, the next append keeps the fragment aside and goes on.
    fs::remove_file(&filler).unwrap();
    let next = format!("{}\n", line(1, 0, 10));
    let (out, acked_after) = append_acked(&file, &next);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(acked_after, 1);
    let mut expected = expected.into_bytes();
    expected.extend_from_slice(next.as_bytes());
    assert_eq!(fs::read(&file).unwrap(), expected);
    if !rest.is_empty() {
        let asides: Vec<Vec<u8>> = fs::read_dir(&mnt.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("full.jsonl.torn."))
            .map(|p| fs::read(p).unwrap())
            .collect();
        assert_eq!(asides, vec![rest.to_vec()], "the fragment is kept");
    }
}

#[test]
fn a_read_only_folder_is_a_clear_error_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mnt) = small_tmpfs(dir.path(), "ro", "64k") else { return };
    let file = mnt.0.join("ro.jsonl");
    fs::write(&file, format!("{HEADER}\n")).unwrap();
    assert!(mount(&["-o", "remount,ro", arg(&mnt.0)]), "remount read-only");
    let (out, acked) = append_acked(&file, &format!("{}\n", line(0, 0, 10)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), acked), (Some(1), 0), "{stderr}");
    assert!(stderr.contains("ro.jsonl.lock: Read-only file system (os error 30)"), "{stderr}");
    assert_eq!(fs::read_to_string(&file).unwrap(), format!("{HEADER}\n"));
    let out = crate::support::run(&["compact", arg(&file)]);
    assert_eq!(out.status.code(), Some(1));
}
