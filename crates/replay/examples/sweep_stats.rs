//! What a sweep shares, for `scripts/bench-sweep.sh`: sweeps the Pi JSONL
//! transcripts given as arguments under the benchmark's grid (windows
//! 32k–400k × tails 2k–40k × chunk ratios auto, 0.3 × triggers threshold,
//! ratio:0.8, plus the two presets; extractive summariser, usage measure, as
//! `sessionlog sweep` by default) on one thread, and prints the rows'
//! compactions and what the sharing did.
//!
//! `cargo run --release -p sessionlog-replay --example sweep_stats -- FILE...`

#![allow(clippy::print_stdout)] // a benchmark's report

use std::path::{Path, PathBuf};

use sessionlog_compaction::Trigger;
use sessionlog_events::{Entry, Transcript};
use sessionlog_replay::sweep::{sweep_counted, SummarizerKind};
use sessionlog_replay::{Grid, Measure};

fn load(path: &Path) -> Result<(Transcript, &'static str), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).map(Entry::parse);
    let header = lines.next().ok_or("empty")?.map_err(|e| e.to_string())?;
    let entries: Vec<Entry> = lines.filter_map(Result::ok).collect();
    Ok((Transcript::from_objects(header, entries).map_err(|e| e.to_string())?, "pi-jsonl"))
}

fn main() -> Result<(), String> {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let grid = Grid {
        context_window: vec![32_000, 64_000, 128_000, 200_000, 400_000],
        keep_recent: vec![2_000, 4_000, 8_000, 20_000, 40_000],
        chunk_ratio: vec!["auto".to_owned(), "0.3".to_owned()],
        trigger: vec![Trigger::Threshold, Trigger::Ratio(0.8)],
        ..Grid::default()
    };
    let variants = grid.variants(Vec::new(), Measure::Usage).map_err(|e| e.to_string())?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().map_err(|e| e.to_string())?;
    let kind = SummarizerKind::Extractive;
    for memoize in [false, true] {
        let (rows, skipped, stats) = pool.install(|| {
            sweep_counted(&files, &load, &variants, &|t| kind.for_transcript(t), &|_| {}, memoize)
        });
        let compactions: u64 = rows.iter().map(|r| r.metrics.compactions).sum();
        let entries: u64 = files.iter().map(|f| load(f).map_or(0, |(t, _)| t.entries.len() as u64)).sum();
        println!(
            "sharing {}: {} policies, {} rows, {} skipped, {compactions} compactions; memo: {} hits, {} summarised, {} distinct outcomes, {} summariser requests answered from it; {} rows copied from a policy that acts the same; {} of {} entry walks shared",
            if memoize { "on" } else { "off" },
            variants.len(),
            rows.len(),
            skipped.len(),
            stats.hits,
            stats.misses,
            stats.distinct,
            stats.answered,
            stats.copied,
            stats.shared_entries,
            entries * variants.len() as u64,
        );
    }
    Ok(())
}
