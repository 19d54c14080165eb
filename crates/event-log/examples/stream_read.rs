//! Streams a transcript through the typed reader and reports entries, time
//! and peak resident memory (Linux `VmHWM`), to show memory is bounded by the
//! longest line rather than the file: `cargo run --release -p
//! sessionlog-event-log --example stream_read -- FILE`.

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::time::Instant;

use sessionlog_event_log::{Mode, Reader};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = std::env::args_os().nth(1).ok_or("usage: stream_read FILE")?.into();
    let bytes = std::fs::metadata(&path)?.len();
    let started = Instant::now();
    let mut entries = 0u64;
    let mut longest = 0usize;
    for record in Reader::open(&path, Mode::Lenient)? {
        let record = record?;
        longest = longest.max(record.entry.raw().len());
        entries += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{{\"file\":{:?},\"bytes\":{bytes},\"entries\":{entries},\"longestLine\":{longest},\"seconds\":{secs:.3},\"peakRssKiB\":{}}}",
        path.display().to_string(),
        peak_rss_kib().map_or("null".to_owned(), |k| k.to_string())
    );
    Ok(())
}
