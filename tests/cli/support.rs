//! Helpers: run the binary, list fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use sessionlog_test_support::fixtures;
pub use sessionlog_test_support::oracle;

/// Path of the built `sessionlog` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sessionlog")
}

/// Runs `sessionlog args…`, returning its output (any exit status).
pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).stdin(Stdio::null()).output().expect("run sessionlog")
}

/// Runs `sessionlog args…` and returns stdout, failing the test on a non-zero exit.
pub fn run_ok(args: &[&str]) -> Vec<u8> {
    let out = run(args);
    assert!(
        out.status.success(),
        "sessionlog {args:?} exited {}:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every Pi and OpenClaw fixture transcript.
pub fn all_transcripts() -> Vec<PathBuf> {
    let mut all = fixtures::pi_transcripts();
    all.extend(fixtures::openclaw_transcripts());
    assert!(all.len() >= 11, "shared fixtures not found under {}", fixtures::shared_dir().display());
    all
}

/// A path as a `&str` argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Parses JSON output into a value.
pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("valid JSON output")
}

/// Describes the first difference between two JSON values, by path.
pub fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    None => return Some(format!("{at}.{k}: only in ours")),
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &format!("{at}.{k}")) {
                            return Some(d);
                        }
                    }
                }
            }
            y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("{at}.{k}: only in the oracle's"))
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(v, w, &format!("{at}[{i}]")) {
                    return Some(d);
                }
            }
            (x.len() != y.len()).then(|| format!("{at}: length {} vs {}", x.len(), y.len()))
        }
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(format!("{at}: ours {a} vs oracle {b}")),
    }
}

/// Runs `work` over `items` on three threads (each oracle call costs ~1.5 s of node start-up).
pub fn par_map<I: Sync, T: Send>(items: &[I], work: impl Fn(&I) -> T + Sync) -> Vec<T> {
    let chunk = items.len().div_ceil(3).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(chunk).map(|part| s.spawn(|| part.iter().map(&work).collect::<Vec<T>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
    })
}

/// Compares our JSON document with the oracle's (minus `piVersion`): first
/// as values when both read as values (the first difference by path), then as text — the oracle prints
/// `JSON.stringify(doc, null, 2)`, so key order, repeated keys and number
/// forms must match byte for byte too.
pub fn oracle_difference(ours: &[u8], theirs: &[u8]) -> Option<String> {
    // A lone surrogate (which `JSON.stringify` prints as an escape) is no
    // `serde_json::Value`: such documents are compared as text only.
    let values = serde_json::from_slice::<serde_json::Value>(ours)
        .ok()
        .zip(serde_json::from_slice::<serde_json::Value>(theirs).ok());
    if let Some((ours_value, mut theirs_value)) = values {
        theirs_value.as_object_mut().map(|o| o.remove("piVersion"));
        if let Some(d) = first_difference(&ours_value, &theirs_value, "$") {
            return Some(d);
        }
    }
    let theirs = String::from_utf8_lossy(theirs);
    let theirs: String =
        theirs.split_inclusive('\n').filter(|l| !l.starts_with("  \"piVersion\": ")).collect();
    let ours = String::from_utf8_lossy(ours);
    let line = ours.lines().zip(theirs.lines()).position(|(a, b)| a != b);
    match line {
        None if ours == theirs => None,
        None => Some(format!("same values, texts of {} and {} bytes", ours.len(), theirs.len())),
        Some(i) => Some(format!(
            "same values, different text at line {}: ours {:?}, Pi's {:?}",
            i + 1,
            ours.lines().nth(i).unwrap_or_default(),
            theirs.lines().nth(i).unwrap_or_default()
        )),
    }
}
