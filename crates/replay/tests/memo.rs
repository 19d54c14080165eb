//! Sweeps share compactions between policies ([`sessionlog_replay::memo`])
//! and walk the policies of a transcript together until each first acts on
//! its own ([`sessionlog_replay::joint`]): the rows are byte-identical with
//! and without sharing, the memo answers compactions and summariser requests,
//! and the policies share walked entries (so removing any of these fails
//! here).

use std::path::{Path, PathBuf};

use sessionlog_compaction::Trigger;
use sessionlog_events::{Entry, Transcript};
use sessionlog_replay::sweep::{sweep_counted, sweep_then_exit, MemoStats, Row, SummarizerKind};
use sessionlog_replay::{Grid, Measure};
use sessionlog_test_support::fixtures;

fn load(path: &Path) -> Result<(Transcript, &'static str), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).map(Entry::parse);
    let header = lines.next().ok_or("empty")?.map_err(|e| e.to_string())?;
    let entries: Vec<Entry> = lines.filter_map(Result::ok).collect();
    Ok((Transcript::from_objects(header, entries).map_err(|e| e.to_string())?, "pi-jsonl"))
}

/// Windows small enough that the shared OpenClaw transcripts compact many
/// times, cuts that coincide for some knobs and not others.
fn grid() -> Grid {
    Grid {
        context_window: vec![32_000, 64_000, 200_000],
        keep_recent: vec![2_000, 20_000],
        chunk_ratio: vec!["auto".to_owned(), "0.3".to_owned()],
        trigger: vec![Trigger::Threshold, Trigger::Ratio(0.8)],
        ..Grid::default()
    }
}

fn run(files: &[PathBuf], memoize: bool) -> (Vec<Row>, MemoStats) {
    run_grid(&grid(), files, memoize)
}

fn run_grid(grid: &Grid, files: &[PathBuf], memoize: bool) -> (Vec<Row>, MemoStats) {
    let variants = grid.variants(Vec::new(), Measure::Usage).unwrap();
    // One thread: the hit count does not depend on scheduling.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let kind = SummarizerKind::Recorded;
    let (rows, skipped, stats) = pool
        .install(|| sweep_counted(files, &load, &variants, &|t| kind.for_transcript(t), &|_| {}, memoize));
    assert!(skipped.is_empty(), "{skipped:?}");
    (rows, stats)
}

/// The shared OpenClaw store's three live transcripts.
fn openclaw_files() -> Vec<PathBuf> {
    let files: Vec<PathBuf> = fixtures::openclaw_transcripts()
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    files
}

/// A policy that acts as an earlier one does (`grid::same_as`) is not
/// replayed with sharing on: it takes that policy's rows, which are the rows
/// it gets replayed alone (sharing off replays every policy).
#[test]
fn a_policy_that_acts_as_an_earlier_one_takes_its_rows() {
    let files = openclaw_files();
    // Under OpenClaw's 20000 floor, reserves 4000 and 16384 are the OpenClaw
    // default's 20000 at a 200k window, so both variants act as that preset
    // does; 30000 acts apart. At 32k the quarter-window cap makes every
    // reserve 8000: 16384 and 30000 act as 4000.
    let grid = Grid {
        context_window: vec![32_000, 200_000],
        reserve: vec![4_000, 16_384, 30_000],
        ..Grid::default()
    };
    let (plain, plain_stats) = run_grid(&grid, &files, false);
    let (shared, stats) = run_grid(&grid, &files, true);
    assert_eq!(plain_stats.copied, 0);
    let text = |r: &Row| serde_json::to_string(r).unwrap();
    assert_eq!(plain.iter().map(text).collect::<Vec<_>>(), shared.iter().map(text).collect::<Vec<_>>());
    // 2 presets + 6 variants per transcript, of which 4 act as an earlier
    // policy: w32000-r16384 and w32000-r30000, w200000-r4000 and w200000-r16384.
    assert_eq!(plain.len(), 3 * 8);
    assert_eq!(stats.copied, 3 * 4, "{stats:?}");
    assert!(plain.iter().any(|r| r.metrics.compactions > 0), "the grid must compact");
}

#[test]
fn memoised_sweep_rows_are_byte_identical_and_the_memo_hits() {
    let files = openclaw_files();
    let (plain, plain_stats) = run(&files, false);
    let (memoised, stats) = run(&files, true);
    assert_eq!(plain_stats, MemoStats::default());
    // 3 windows × 2 tails × 2 ratios × 2 triggers + the two presets, per transcript.
    assert_eq!(plain.len(), 3 * 26);
    let compactions: u64 = plain.iter().map(|r| r.metrics.compactions).sum();
    assert!(compactions > 100, "the grid must compact: {compactions}");
    let text = |r: &Row| serde_json::to_string(r).unwrap();
    let differ = plain.iter().zip(&memoised).find(|(a, b)| text(a) != text(b));
    assert!(differ.is_none(), "rows differ with the memo: {differ:?}");
    assert_eq!(memoised.len(), plain.len());
    // One variant acts as the OpenClaw preset does: its rows are copied, not replayed.
    assert_eq!(stats.copied, 3, "{stats:?}");
    let copied: u64 = plain
        .iter()
        .filter(|r| r.policy == "w200000-r16384-k20000-cauto-threshold-pi")
        .map(|r| r.metrics.compactions)
        .sum();
    let replayed = compactions - copied;
    // Every compaction made went through the memo, and many were shared.
    assert!(stats.hits + stats.misses >= replayed, "{stats:?} for {replayed} compactions");
    // Compactions that summarise nothing are shared across windows and chunk
    // ratios too: more than half are hits (a quarter without that).
    assert!(stats.hits * 2 >= replayed, "{stats:?} for {replayed} compactions");
    assert!(stats.distinct <= stats.misses && stats.distinct > 0, "{stats:?}");
    // Summarisations under different keys send some of the same requests
    // (a chunk of history under two cuts or two chunk sizes): each is
    // answered once.
    assert!(stats.answered > 0, "{stats:?}");
    // The policies walk at least a quarter of their entries together (each
    // up to its first possible decision).
    let entries: u64 = files.iter().map(|f| std::fs::read_to_string(f).unwrap().lines().count() as u64).sum();
    assert!(stats.shared_entries * 4 >= entries * 26, "{stats:?} for {entries} entries × 26 policies");
}

/// A sweep for a process that ends after it (`sweep_then_exit`: transcripts
/// left to the operating system, not freed — here every one, as the store's
/// files total less than the budget) gives the rows of every policy replayed
/// alone (sharing off), on one thread and on two.
#[test]
fn a_sweep_that_leaves_its_last_transcripts_to_the_os_gives_the_same_rows() {
    let files = openclaw_files();
    let (plain, _) = run(&files, false);
    let variants = grid().variants(Vec::new(), Measure::Usage).unwrap();
    let kind = SummarizerKind::Recorded;
    let text = |r: &Row| serde_json::to_string(r).unwrap();
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let (rows, skipped) =
            pool.install(|| sweep_then_exit(&files, &load, &variants, &|t| kind.for_transcript(t), &|_| {}));
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(rows.iter().map(text).collect::<Vec<_>>(), plain.iter().map(text).collect::<Vec<_>>());
    }
}
