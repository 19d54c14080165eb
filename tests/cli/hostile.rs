//! Hostile input never aborts: deeply nested JSON, huge numbers and seeded
//! mutations of a real transcript through the reading commands end in exit 0
//! or a clear error (exit 1) naming the file, and the file is left as it was.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::support::{arg, fixtures, run};

const HEADER: &str = r#"{"type":"session","version":3,"id":"c0ffee00-0000-4000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

/// The commands that read a transcript, as a user runs them.
const READERS: [&[&str]; 5] = [
    &["inspect", "--json"],
    &["entries", "--jsonl"],
    &["context", "--json"],
    &["cut", "--json"],
    &["replay", "--json"],
];

fn run_on(command: &[&str], file: &Path) -> Output {
    let mut args = vec![command[0], arg(file)];
    args.extend_from_slice(&command[1..]);
    run(&args)
}

/// Exit 0, or exit 1 with a message naming the file; never a panic (101) or a signal.
fn assert_clean_exit(command: &[&str], file: &Path, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = file.file_name().unwrap().to_string_lossy();
    match out.status.code() {
        Some(0) => {}
        Some(1) => {
            assert!(stderr.contains(&*name), "{command:?} on {name}: error does not name the file: {stderr}")
        }
        other => panic!("{command:?} on {name}: exit {other:?} ({}): {stderr}", out.status),
    }
}

fn message(id: &str, parent: Option<&str>, message: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{message}}}"#
    )
}

#[test]
fn a_line_of_a_hundred_thousand_nested_arrays_is_refused_not_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.jsonl");
    let depth = 100_000;
    let content = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let text = format!(
        "{HEADER}\n{}\n",
        message("00000001", None, &format!(r#"{{"role":"user","content":{content},"timestamp":1}}"#))
    );
    fs::write(&file, &text).unwrap();
    for command in READERS {
        let out = run_on(command, &file);
        assert_clean_exit(command, &file, &out);
        assert_eq!(fs::read_to_string(&file).unwrap(), text, "{command:?} changed the file");
    }
    // Pi reads the line and fails when it prints the context (a RangeError);
    // so does `context`, with the file, the message and the reason.
    let out = run_on(&["context", "--json"], &file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("deep.jsonl: messages[0]: JSON nested deeper than 1000 levels"), "{stderr}");
}

#[test]
fn usage_numbers_beyond_any_integer_do_not_overflow_replay() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("usage.jsonl");
    let huge = r#"{"input":1e308,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":1e308}"#;
    let lines = [
        HEADER.to_owned(),
        message("00000001", None, r#"{"role":"user","content":"hello","timestamp":1}"#),
        message(
            "00000002",
            Some("00000001"),
            &format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"hi"}}],"usage":{huge},"stopReason":"stop","timestamp":2}}"#
            ),
        ),
        message("00000003", Some("00000002"), r#"{"role":"user","content":"again","timestamp":3}"#),
        message(
            "00000004",
            Some("00000003"),
            r#"{"role":"assistant","content":[{"type":"text","text":"yes"}],"usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":6},"stopReason":"stop","timestamp":4}"#,
        ),
    ];
    fs::write(&file, lines.join("\n") + "\n").unwrap();
    for command in READERS {
        assert_clean_exit(command, &file, &run_on(command, &file));
    }
    let out = run_on(&["replay", "--json"], &file);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = crate::support::json(&out.stdout);
    // Two model calls, the first measured at a usage of 1e308 tokens: the
    // sum saturates at the largest count rather than wrapping or aborting.
    assert_eq!(report["metrics"]["modelCalls"], 2);
    // (printed as JavaScript prints it: 18446744073709552000).
    assert_eq!(report["metrics"]["tokensBilled"].as_f64(), Some(u64::MAX as f64));
}

/// A small deterministic generator (xorshift64*), so the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Numbers no transcript should hold, in JSON text.
const ODD_NUMBERS: [&str; 10] = [
    "1e308",
    "-1e308",
    "1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "99999999999999999999999999999",
    "-1",
    "-0.0",
    "1e-320",
    "4294967296",
];

/// One seeded mutation of `bytes`: the name of the mutation and the result.
fn mutate(rng: &mut Rng, bytes: &[u8]) -> (&'static str, Vec<u8>) {
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let join = |lines: Vec<Vec<u8>>| lines.join(&b'\n');
    let mut owned: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
    match rng.below(9) {
        0 => ("cut", bytes[..rng.below(bytes.len())].to_vec()),
        1 => {
            let mut b = bytes.to_vec();
            for _ in 0..1 + rng.below(20) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            ("flipped bytes", b)
        }
        2 => {
            let rest = &mut owned[1..];
            for i in (1..rest.len()).rev() {
                rest.swap(i, rng.below(i + 1));
            }
            ("shuffled lines", join(owned))
        }
        3 => {
            // Replace the first `"content":` value's opening with deep nesting.
            let i = 1 + rng.below(owned.len() - 1);
            let depth = [1_000, 100_000][rng.below(2)];
            let (open, close) = [("[", "]"), ("{\"a\":", "}")][rng.below(2)];
            let nest = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            let line = String::from_utf8_lossy(&owned[i]).into_owned();
            owned[i] = match line.find("\"content\":") {
                Some(at) => {
                    format!("{}\"content\":{nest},\"was\":{}", &line[..at], &line[at + 10..]).into_bytes()
                }
                None => nest.into_bytes(),
            };
            ("deep nesting", join(owned))
        }
        4 => {
            // Every number after a usage or timestamp key becomes an odd one.
            let text = String::from_utf8_lossy(bytes).into_owned();
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find("\":") {
                let (head, tail) = rest.split_at(at + 2);
                out.push_str(head);
                let digits = tail.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(0);
                if digits > 0 && rng.below(3) == 0 {
                    out.push_str(ODD_NUMBERS[rng.below(ODD_NUMBERS.len())]);
                    rest = &tail[digits..];
                } else {
                    rest = tail;
                }
            }
            out.push_str(rest);
            ("odd numbers", out.into_bytes())
        }
        5 => {
            let mut b = bytes.to_vec();
            for _ in 0..1 + rng.below(10) {
                let bad: &[u8] = [&b"\xff"[..], b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f", b"\x80"][rng.below(5)];
                let i = rng.below(b.len());
                b.splice(i..i, bad.iter().copied());
            }
            ("invalid UTF-8", b)
        }
        6 => {
            // parentIds pointing at later entries and at themselves.
            let ids: Vec<String> = owned
                .iter()
                .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
                .filter_map(|v| v["id"].as_str().map(str::to_owned))
                .collect();
            for line in owned.iter_mut().skip(1) {
                let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
                if v.get("parentId").is_some() && !ids.is_empty() && rng.below(3) == 0 {
                    v["parentId"] = ids[rng.below(ids.len())].clone().into();
                    *line = serde_json::to_vec(&v).unwrap();
                }
            }
            ("cycles", join(owned))
        }
        7 => {
            let wrong = ["null", "1", "\"s\"", "[]", "{}", "[1,\"x\"]", "{\"k\":1}", "true", "1e308"];
            for line in owned.iter_mut() {
                let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
                retype(&mut v, rng, &wrong);
                *line = serde_json::to_vec(&v).unwrap();
            }
            ("wrong types", join(owned))
        }
        _ => {
            let at = 1 + rng.below(owned.len());
            let garbage: Vec<u8> = (0..5_000_000).map(|_| (rng.next() >> 56) as u8).collect();
            owned.insert(at.min(owned.len()), garbage);
            ("5 MB garbage line", join(owned))
        }
    }
}

fn retype(v: &mut serde_json::Value, rng: &mut Rng, wrong: &[&str]) {
    match v {
        serde_json::Value::Object(map) => map.values_mut().for_each(|x| {
            if rng.below(8) == 0 {
                *x = serde_json::from_str(wrong[rng.below(wrong.len())]).unwrap();
            } else {
                retype(x, rng, wrong);
            }
        }),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|x| retype(x, rng, wrong)),
        _ => {}
    }
}

/// Seeded mutations of a real transcript through every reading command.
/// (A longer run of the same generator is described in docs/RELIABILITY.md.)
#[test]
fn seeded_mutations_of_a_real_transcript_never_abort_a_reader() {
    let source = fixtures::shared_dir()
        .join("fixtures/openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl");
    let bytes = fs::read(source).unwrap();
    let trials: u64 =
        std::env::var("SESSIONLOG_MUTATION_TRIALS").ok().and_then(|n| n.parse().ok()).unwrap_or(18);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5e55_10c0_ffee);
    for trial in 0..trials {
        let (what, mutated) = mutate(&mut rng, &bytes);
        let file = dir.path().join(format!("mutation-{trial}.jsonl"));
        fs::write(&file, &mutated).unwrap();
        for command in READERS {
            let out = run_on(command, &file);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "trial {trial} ({what}), {command:?}: exit {}: {stderr}",
                out.status
            );
            assert!(
                fs::read(&file).unwrap() == mutated,
                "trial {trial} ({what}), {command:?} changed the file"
            );
        }
        fs::remove_file(&file).unwrap();
    }
}

#[test]
fn generator_counts_beyond_any_entry_count_do_not_overflow() {
    // `--branches`/`--compactions` of u64::MAX: spread over the entries as
    // "never" rather than an overflow in the spacing.
    for flag in ["--branches", "--compactions"] {
        let out = run(&["gen", "--seed", "1", "--entries", "20", flag, "18446744073709551615"]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.starts_with(br#"{"type":"session","version":3,"#));
    }
}
