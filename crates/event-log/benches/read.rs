//! Typed transcript read vs the serde_json floor, over the same bytes.
//!
//! `cargo bench -p sessionlog-event-log --bench read` generates a ≥ 40 MB v3
//! transcript in memory (deterministic) and times, per pass over it:
//! * `ignored_any` — serde_json validating each line into `IgnoredAny` (the floor);
//! * `serde_value` — serde_json building a `Value` per line (a common baseline);
//! * `event_log_typed` — sessionlog's streaming reader: lines, JS trimming
//!   rules, typed lenient entries with their raw text.
//!
//! `docs/PERFORMANCE.md` reports the ratio of the medians.

#![allow(clippy::print_stderr)]

use std::path::Path;
use std::sync::LazyLock;

use serde::de::IgnoredAny;
use sessionlog_event_log::{Mode, Reader};
use sessionlog_test_support::{generate, GenOptions};

static DATA: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let options =
        GenOptions { seed: 1, entries: 44_000, branches: 3, compactions: 5, tool_output_chars: 1200 };
    let mut bytes = Vec::new();
    for line in generate(options) {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    assert!(bytes.len() >= 40 << 20, "bench transcript is {} bytes, want >= 40 MiB", bytes.len());
    bytes
});

fn main() {
    eprintln!("bench transcript: {} bytes", DATA.len());
    divan::main();
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn ignored_any() -> usize {
    let mut n = 0;
    for line in DATA.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<IgnoredAny>(line).expect("valid line");
        n += 1;
    }
    n
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn serde_value() -> usize {
    let mut n = 0;
    for line in DATA.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: serde_json::Value = serde_json::from_slice(line).expect("valid line");
        n += usize::from(value.is_object());
    }
    n
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn event_log_typed() -> usize {
    let mut n = 0;
    for record in Reader::new(DATA.as_slice(), Path::new("bench"), Mode::Lenient) {
        record.expect("valid line");
        n += 1;
    }
    n
}
