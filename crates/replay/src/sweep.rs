//! Sweeps: a grid of policies over a corpus of transcripts.
//!
//! Each transcript is loaded and [`Prepared`] once, by a worker, and every
//! policy is replayed against it in memory (policies in parallel too);
//! transcripts are processed in parallel (rayon), so memory is bounded by the
//! transcripts in flight, not by the corpus. Rows come
//! back in (transcript, policy) order whatever the scheduling, so a sweep's
//! output is deterministic.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use rayon::prelude::*;
use serde::Serialize;
use sessionlog_compaction::{Extractive, Policy, Summarizer};
use sessionlog_events::Transcript;
use sessionlog_tokens::{Memo, Tokenizer};

use crate::joint::replay_together;
use crate::memo::CompactionMemo;
use crate::{recorded_summarizer, replay_memoized, Measure, Metrics, Prepared};

/// One policy of the grid, with how to count and measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// The policy (its name identifies the variant).
    pub policy: Policy,
    /// The token counter (reported by name).
    #[serde(rename = "tokenizerName", serialize_with = "tokenizer_name")]
    pub tokenizer: Tokenizer,
    /// How contexts are measured.
    pub measure: Measure,
}

fn tokenizer_name<S: serde::Serializer>(t: &Tokenizer, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

/// Which summariser every replay uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarizerKind {
    /// Deterministic, no model.
    Extractive,
    /// The transcript's recorded summaries where cuts match, else extractive.
    Recorded,
}

impl SummarizerKind {
    /// A fresh summariser of this kind for one replay of `transcript`.
    pub fn for_transcript(self, transcript: &Transcript) -> Box<dyn Summarizer> {
        match self {
            SummarizerKind::Extractive => Box::new(Extractive),
            SummarizerKind::Recorded => Box::new(recorded_summarizer(transcript)),
        }
    }
}

impl std::str::FromStr for SummarizerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "extractive" => Ok(SummarizerKind::Extractive),
            "recorded" => Ok(SummarizerKind::Recorded),
            other => Err(format!("unknown summarizer `{other}` (recorded, extractive)")),
        }
    }
}

/// One transcript × policy result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The transcript file.
    pub transcript: String,
    /// Its format (`pi-jsonl`, `claude-code`, `codex-rollout`, …), as the loader named it.
    pub format: String,
    /// The policy name.
    pub policy: String,
    /// The metrics.
    pub metrics: Metrics,
}

/// A transcript that could not be swept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The file.
    pub file: String,
    /// The reason (file, line and cause where known).
    pub reason: String,
}

/// Appends `row` as one line of `results.jsonl` (without the line break):
/// its fields in declaration order, numbers as JavaScript prints them —
/// what `write_js` prints of the row's `serde_json::Value`, without building
/// the value (a row is a flat record: no map whose keys JavaScript would
/// reorder).
fn write_row(out: &mut Vec<u8>, row: &Row) -> Result<(), serde_json::Error> {
    sessionlog_events::json::write_js_serialize(out, row)
}

/// Writes a sweep's result files into `dir` (created if missing):
/// `results.jsonl` (one row per transcript × policy, JSON as `replay --json`
/// prints it, so a row's metrics are byte-equal to a single replay's),
/// `summary.csv` (one line per policy, then — for a corpus of several
/// formats — per policy and format), `summary.json` (`{"policies": […]}`, and
/// `byFormat` for several formats) and, with the `chart` feature, `chart.svg`.
pub fn write_results(
    dir: &Path,
    rows: &[Row],
    summaries: &[PolicySummary],
    by_format: &[(&str, Vec<PolicySummary>)],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut jsonl = Vec::new();
    for r in rows {
        write_row(&mut jsonl, r)?;
        jsonl.push(b'\n');
    }
    std::fs::write(dir.join("results.jsonl"), jsonl)?;
    let mut csv = csv::Writer::from_path(dir.join("summary.csv"))?;
    csv.write_record([
        "policy",
        "format",
        "transcripts",
        "tokensBilled",
        "compactions",
        "compactionsBelowThreshold",
        "overflowCalls",
        "brokenToolPairs",
        "summaryTokens",
        "identifierRecall",
        "meanContextTokens",
        "worstPeakContextTokens",
        "worstIdentifierRecall",
        "pareto",
        "noopCompactions",
        "compactionLoops",
        "worstLedgerRecall",
        "sameAs",
        "maskedToolResults",
        "maskedTokens",
        "maskingBaseline",
        "maskingTokensBilledSaved",
        "maskingCompactionsAvoided",
        "fileRecall",
        "lastAskMissing",
        "toolFailureRecall",
    ])?;
    // The whole corpus per policy, then (for a corpus of several formats) each format alone.
    let per_format = by_format.iter().filter(|_| by_format.len() > 1).flat_map(|(_, s)| s);
    for s in summaries.iter().chain(per_format) {
        csv.write_record([
            s.policy.clone(),
            s.format.clone(),
            s.transcripts.to_string(),
            s.tokens_billed.to_string(),
            s.compactions.to_string(),
            s.compactions_below_threshold.to_string(),
            s.overflow_calls.to_string(),
            s.broken_tool_pairs.to_string(),
            s.summary_tokens.to_string(),
            format!("{:.6}", s.identifier_recall),
            format!("{:.1}", s.mean_context_tokens),
            s.worst_peak_context_tokens.to_string(),
            format!("{:.6}", s.worst_identifier_recall),
            s.pareto.to_string(),
            s.noop_compactions.to_string(),
            s.compaction_loops.to_string(),
            format!("{:.6}", s.worst_ledger_recall),
            s.same_as.clone().unwrap_or_default(),
            s.masked_tool_results.to_string(),
            s.masked_tokens.to_string(),
            s.masking_baseline.clone().unwrap_or_default(),
            s.masking_tokens_billed_saved.map(|n| n.to_string()).unwrap_or_default(),
            s.masking_compactions_avoided.map(|n| n.to_string()).unwrap_or_default(),
            format!("{:.6}", s.file_recall),
            s.last_ask_missing.to_string(),
            format!("{:.6}", s.tool_failure_recall),
        ])?;
    }
    csv.flush()?;
    let mut summary = serde_json::json!({"policies": summaries});
    if by_format.len() > 1 {
        let split = by_format
            .iter()
            .map(|(f, s)| Ok(((*f).to_owned(), serde_json::to_value(s)?)))
            .collect::<Result<serde_json::Map<String, serde_json::Value>, serde_json::Error>>()?;
        summary["byFormat"] = serde_json::Value::Object(split);
    }
    std::fs::write(dir.join("summary.json"), serde_json::to_vec_pretty(&summary)?)?;
    #[cfg(feature = "chart")]
    chart(&dir.join("chart.svg"), summaries)?;
    Ok(())
}

#[cfg(feature = "chart")]
/// Tokens billed vs identifier recall, one point series per policy, the
/// Pareto front joined by a line, and a legend. (Without the font feature,
/// plotters lays out no caption or legend itself, so both are drawn as plain
/// text elements here.)
fn chart(path: &Path, summaries: &[PolicySummary]) -> std::io::Result<()> {
    use plotters::prelude::*;
    let err = |e: DrawingAreaErrorKind<_>| std::io::Error::other(format!("chart: {e}"));
    let root = SVGBackend::new(path, (1100, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plot, legend) = root.split_horizontally(760);
    let title = ("sans-serif", 16).into_font();
    plot.draw(&Text::new(
        "Identifier recall (y) vs tokens billed (x); filled: Pareto front",
        (80, 8),
        title.clone(),
    ))
    .map_err(err)?;
    let label = ("sans-serif", 12).into_font();
    plot.draw(&Text::new("tokens billed, millions (sum over the corpus)", (300, 600), label.clone()))
        .map_err(err)?;
    let max_x = summaries.iter().map(|s| s.tokens_billed).max().unwrap_or(1).max(1) as f64 * 1.05;
    let min_y = summaries.iter().map(|s| s.identifier_recall).fold(1.0, f64::min).min(0.95) - 0.05;
    let mut chart = ChartBuilder::on(&plot)
        .margin_top(32)
        .margin_right(20)
        .margin_left(30)
        .margin_bottom(30)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_x, min_y.max(0.0)..1.02f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| format!("{:.1}", x / 1e6))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(err)?;
    for (i, s) in summaries.iter().enumerate() {
        let color = Palette99::pick(i).mix(0.9);
        let style = if s.pareto { color.filled() } else { color.stroke_width(2) };
        chart
            .draw_series(std::iter::once(Circle::new(
                (s.tokens_billed as f64, s.identifier_recall),
                6,
                style,
            )))
            .map_err(err)?;
        let y = 40 + 22 * i as i32;
        legend.draw(&Circle::new((12, y), 5, style)).map_err(err)?;
        legend.draw(&Text::new(s.policy.clone(), (24, y - 6), label.clone())).map_err(err)?;
    }
    let mut front: Vec<(f64, f64)> = summaries
        .iter()
        .filter(|s| s.pareto)
        .map(|s| (s.tokens_billed as f64, s.identifier_recall))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart.draw_series(LineSeries::new(front, BLACK.stroke_width(1))).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Reads one file: the transcript and the name of its format, or why not.
pub type Loader<'a> = dyn Fn(&Path) -> Result<(Transcript, &'static str), String> + Sync + 'a;

/// Makes the summariser of one replay (of the transcript given); every
/// replay of a sweep gets its own.
pub type SummarizerFactory<'a> = dyn Fn(&Transcript) -> Box<dyn Summarizer> + Sync + 'a;

/// Replays every variant over every transcript. `load` reads one file and
/// names its format; `progress` is called once per transcript × variant done.
pub fn sweep(
    files: &[PathBuf],
    load: &Loader<'_>,
    variants: &[Variant],
    summarizer: SummarizerKind,
    progress: &(dyn Fn(u64) + Sync),
) -> (Vec<Row>, Vec<Skipped>) {
    sweep_with(files, load, variants, &|t| summarizer.for_transcript(t), progress)
}

/// [`sweep`] with the summariser of each replay made by `summarizer` (a
/// model summariser per worker over one shared cache, for instance).
/// The policies of a transcript walk it together until each one first acts
/// on its own ([`crate::joint`]) and share their compactions
/// ([`crate::memo`]), and a policy that acts as an earlier one does
/// ([`crate::grid::same_as`]) takes that one's rows instead of being
/// replayed, unless `SESSIONLOG_SWEEP_MEMO=0`.
pub fn sweep_with(
    files: &[PathBuf],
    load: &Loader<'_>,
    variants: &[Variant],
    summarizer: &SummarizerFactory<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> (Vec<Row>, Vec<Skipped>) {
    let (rows, skipped, _) =
        sweep_counted(files, load, variants, summarizer, progress, crate::memo::enabled_by_env());
    (rows, skipped)
}

/// How many compactions a sweep summarised and how many it took from the memo.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Compactions answered from the memo.
    pub hits: u64,
    /// Compactions summarised.
    pub misses: u64,
    /// Distinct outcomes among them (summarisations that gave an outcome
    /// made before under another key are misses, not distinct).
    pub distinct: u64,
    /// Path entries policies took from a walk shared with others
    /// ([`crate::joint`]) instead of walking them alone, summed.
    pub shared_entries: u64,
    /// Summariser requests answered from the memo (sent before by another
    /// compaction of the same transcript) instead of being summarised.
    pub answered: u64,
    /// Rows copied from an earlier policy that acts the same
    /// ([`crate::grid::same_as`]) instead of being replayed.
    pub copied: u64,
}

/// [`sweep_with`] for a process that ends after the sweep: a transcript
/// leaves its memo, preparation and transcript to the operating system
/// instead of freeing them piece by piece (as `replay` does) while the
/// transcripts left so far total at most [`LEFT_TO_OS`] bytes on disk (a
/// bound on the files, not on the memory kept, which is several times a
/// file's size), and when it finishes after every transcript has started
/// (no other starts after it, so what those hold is never more than while
/// they were in flight).
pub fn sweep_then_exit(
    files: &[PathBuf],
    load: &Loader<'_>,
    variants: &[Variant],
    summarizer: &SummarizerFactory<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> (Vec<Row>, Vec<Skipped>) {
    let memoize = crate::memo::enabled_by_env();
    let (rows, skipped, _) = sweep_inner(files, load, variants, summarizer, progress, memoize, true);
    (rows, skipped)
}

/// How many bytes of transcripts (their files' sizes) a sweep that ends the
/// process may leave to the operating system before the last ones start.
const LEFT_TO_OS: u64 = 16 << 20;

/// Whether `file`'s size still fits in [`LEFT_TO_OS`] with the bytes `left`
/// so far (counted in when it does).
fn within_budget(left: &AtomicU64, file: &Path) -> bool {
    let size = std::fs::metadata(file).map_or(u64::MAX, |m| m.len());
    left.fetch_update(Relaxed, Relaxed, |n| n.checked_add(size).filter(|&m| m <= LEFT_TO_OS)).is_ok()
}

/// [`sweep_with`] with compaction sharing on or off (`memoize`), and what
/// the memo did.
pub fn sweep_counted(
    files: &[PathBuf],
    load: &Loader<'_>,
    variants: &[Variant],
    summarizer: &SummarizerFactory<'_>,
    progress: &(dyn Fn(u64) + Sync),
    memoize: bool,
) -> (Vec<Row>, Vec<Skipped>, MemoStats) {
    sweep_inner(files, load, variants, summarizer, progress, memoize, false)
}

/// [`sweep_counted`]; with `leave_to_os`, some transcripts are not freed
/// (see [`sweep_then_exit`]).
fn sweep_inner(
    files: &[PathBuf],
    load: &Loader<'_>,
    variants: &[Variant],
    summarizer: &SummarizerFactory<'_>,
    progress: &(dyn Fn(u64) + Sync),
    memoize: bool,
    leave_to_os: bool,
) -> (Vec<Row>, Vec<Skipped>, MemoStats) {
    let stats = std::sync::Mutex::new(MemoStats::default());
    // Transcripts started, and the bytes of those left to the operating system.
    let started = AtomicUsize::new(0);
    let left = AtomicU64::new(0);
    // A policy that acts as an earlier one does is not replayed (sharing on).
    let same = if memoize { crate::grid::same_as(variants) } else { vec![None; variants.len()] };
    let per_file: Vec<Result<Vec<Row>, Skipped>> = files
        .par_iter()
        .map(|file| {
            started.fetch_add(1, Relaxed);
            let name = file.display().to_string();
            let (t, format) = match load(file) {
                Ok(loaded) => loaded,
                Err(reason) => {
                    progress(variants.len() as u64);
                    return Err(Skipped { file: name, reason });
                }
            };
            let prepared =
                Prepared::new(&t).map_err(|e| Skipped { file: name.clone(), reason: e.to_string() })?;
            // One memo per tokenizer in use: each message is counted once per tokenizer.
            let mut memos: Vec<(Tokenizer, Memo<'_>)> = Vec::new();
            for v in variants {
                if !memos.iter().any(|(t, _)| *t == v.tokenizer) {
                    let counter = sessionlog_tokens::counter(v.tokenizer)
                        .map_err(|e| Skipped { file: name.clone(), reason: e.to_string() })?;
                    memos.push((v.tokenizer, prepared.counter(counter)));
                }
            }
            let memo = memoize.then(CompactionMemo::new);
            let row = |v: &Variant, r: crate::Replay| Row {
                transcript: name.clone(),
                format: format.to_owned(),
                policy: v.policy.name.clone(),
                metrics: r.metrics,
            };
            let rows: Vec<Row> = if memoize {
                // The policies that count and measure alike walk together ([`crate::joint`]).
                let mut rows: Vec<Option<Row>> = variants.iter().map(|_| None).collect();
                for (tokenizer, counter) in &memos {
                    for measure in [Measure::Estimate, Measure::Usage] {
                        let picked: Vec<usize> = (0..variants.len())
                            .filter(|&k| {
                                same[k].is_none()
                                    && variants[k].tokenizer == *tokenizer
                                    && variants[k].measure == measure
                            })
                            .collect();
                        if picked.is_empty() {
                            continue;
                        }
                        let policies: Vec<&Policy> = picked.iter().map(|&k| &variants[k].policy).collect();
                        let together = replay_together(
                            &prepared,
                            &policies,
                            counter,
                            measure,
                            memo.as_ref(),
                            &|| summarizer(&t),
                            &|| progress(1),
                        );
                        stats.lock().unwrap_or_else(|e| e.into_inner()).shared_entries +=
                            together.shared_entries;
                        for (&k, r) in picked.iter().zip(together.replays) {
                            rows[k] = Some(row(&variants[k], r));
                        }
                    }
                }
                // Each copy's first equal comes before it and is replayed.
                for (k, j) in same.iter().enumerate() {
                    if let Some(j) = *j {
                        let copy = rows[j]
                            .as_ref()
                            .map(|r| Row { policy: variants[k].policy.name.clone(), ..r.clone() });
                        rows[k] = copy;
                        progress(1);
                        stats.lock().unwrap_or_else(|e| e.into_inner()).copied += 1;
                    }
                }
                rows.into_iter().map(|r| r.expect("every variant has a tokenizer and a measure")).collect()
            } else {
                variants
                    .par_iter()
                    .map(|v| {
                        let counter = memos.iter().find(|(t, _)| *t == v.tokenizer).map(|(_, m)| m);
                        let counter = counter.expect("a memo was made for every tokenizer in use");
                        let mut s = summarizer(&t);
                        let r = replay_memoized(&prepared, &v.policy, s.as_mut(), counter, v.measure, None);
                        progress(1);
                        row(v, r)
                    })
                    .collect()
            };
            if let Some(memo) = &memo {
                let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
                st.hits += memo.hits();
                st.misses += memo.misses();
                st.distinct += memo.distinct();
                st.answered += memo.answered();
            }
            if leave_to_os && (started.load(Relaxed) == files.len() || within_budget(&left, file)) {
                // The process's end frees these (see `sweep_then_exit`).
                std::mem::forget(memo);
                std::mem::forget(memos);
                std::mem::forget(prepared);
                std::mem::forget(t);
            }
            Ok(rows)
        })
        .collect();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for r in per_file {
        match r {
            Ok(mut rs) => rows.append(&mut rs),
            Err(s) => skipped.push(s),
        }
    }
    let stats = stats.into_inner().unwrap_or_else(|e| e.into_inner());
    (rows, skipped, stats)
}

/// Per-policy totals, means and worst cases over the corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySummary {
    /// The policy name.
    pub policy: String,
    /// The formats of the transcripts summed, `+`-joined in name order.
    pub format: String,
    /// Transcripts replayed.
    pub transcripts: u64,
    /// Sum of tokens billed.
    pub tokens_billed: u64,
    /// Sum of compactions.
    pub compactions: u64,
    /// Sum of compactions below threshold.
    pub compactions_below_threshold: u64,
    /// Sum of overflow calls.
    pub overflow_calls: u64,
    /// Sum of broken tool pairs (must be 0).
    pub broken_tool_pairs: u64,
    /// Sum of summary tokens.
    pub summary_tokens: u64,
    /// Identifier recall over all re-mentions of the corpus.
    pub identifier_recall: f64,
    /// Mean of the per-transcript mean context.
    pub mean_context_tokens: f64,
    /// Largest peak context of any transcript.
    pub worst_peak_context_tokens: u64,
    /// Lowest per-transcript recall.
    pub worst_identifier_recall: f64,
    /// On the Pareto front of (fewest tokens billed, highest recall).
    pub pareto: bool,
    /// Sum of no-op compactions.
    pub noop_compactions: u64,
    /// Sum of compaction loops.
    pub compaction_loops: u64,
    /// Lowest per-transcript ledger recall (must be 1).
    pub worst_ledger_recall: f64,
    /// The earlier policy this one acts the same as (same effective
    /// threshold and knobs): its rows are that policy's, not a distinct result.
    pub same_as: Option<String>,
    /// Sum of tool results masked.
    pub masked_tool_results: u64,
    /// Sum of tokens the masks took out of the context.
    pub masked_tokens: u64,
    /// For a masking policy: the swept policy that is the same without
    /// masking, which the two savings below compare against.
    pub masking_baseline: Option<String>,
    /// The baseline's tokens billed minus this policy's.
    pub masking_tokens_billed_saved: Option<i64>,
    /// The baseline's compactions minus this policy's.
    pub masking_compactions_avoided: Option<i64>,
    /// Quality probe: of the files the compacted ranges read or modified
    /// (over the corpus), the share the summaries or their file lists name.
    pub file_recall: f64,
    /// Quality probe: compactions after which the last user ask is gone.
    pub last_ask_missing: u64,
    /// Quality probe: of the failed tool results compacted, the share the summaries name.
    pub tool_failure_recall: f64,
}

/// The formats of `rows`, in name order.
pub fn formats(rows: &[Row]) -> Vec<&str> {
    let set: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.format.as_str()).collect();
    set.into_iter().collect()
}

/// Per format (in name order), the summaries of its rows alone.
pub fn summarize_by_format<'r>(rows: &'r [Row], variants: &[Variant]) -> Vec<(&'r str, Vec<PolicySummary>)> {
    formats(rows)
        .into_iter()
        .map(|f| {
            let mine: Vec<Row> = rows.iter().filter(|r| r.format == f).cloned().collect();
            (f, summarize(&mine, variants))
        })
        .collect()
}

/// Summaries in the order the variants were given.
pub fn summarize(rows: &[Row], variants: &[Variant]) -> Vec<PolicySummary> {
    let format = formats(rows).join("+");
    let mut out: Vec<PolicySummary> = variants
        .iter()
        .map(|v| {
            let mine: Vec<&Metrics> =
                rows.iter().filter(|r| r.policy == v.policy.name).map(|r| &r.metrics).collect();
            let sum = |f: fn(&Metrics) -> u64| mine.iter().map(|m| f(m)).sum::<u64>();
            let mentions = sum(|m| m.identifier_mentions);
            let n = mine.len() as u64;
            PolicySummary {
                policy: v.policy.name.clone(),
                format: format.clone(),
                transcripts: n,
                tokens_billed: sum(|m| m.tokens_billed),
                compactions: sum(|m| m.compactions),
                compactions_below_threshold: sum(|m| m.compactions_below_threshold),
                overflow_calls: sum(|m| m.overflow_calls),
                broken_tool_pairs: sum(|m| m.broken_tool_pairs),
                summary_tokens: sum(|m| m.summary_tokens),
                identifier_recall: if mentions == 0 {
                    1.0
                } else {
                    sum(|m| m.identifier_hits) as f64 / mentions as f64
                },
                mean_context_tokens: if n == 0 {
                    0.0
                } else {
                    mine.iter().map(|m| m.mean_context_tokens).sum::<f64>() / n as f64
                },
                worst_peak_context_tokens: mine.iter().map(|m| m.peak_context_tokens).max().unwrap_or(0),
                worst_identifier_recall: mine.iter().map(|m| m.identifier_recall).fold(1.0, f64::min),
                pareto: false,
                noop_compactions: sum(|m| m.noop_compactions),
                compaction_loops: sum(|m| m.compaction_loops),
                worst_ledger_recall: mine.iter().map(|m| m.ledger_recall).fold(1.0, f64::min),
                same_as: None,
                masked_tool_results: sum(|m| m.masked_tool_results),
                masked_tokens: sum(|m| m.masked_tokens),
                masking_baseline: None,
                masking_tokens_billed_saved: None,
                masking_compactions_avoided: None,
                file_recall: crate::share(sum(|m| m.probe_files_named), sum(|m| m.probe_files)),
                last_ask_missing: sum(|m| m.last_ask_missing),
                tool_failure_recall: crate::share(
                    sum(|m| m.probe_tool_failures_named),
                    sum(|m| m.probe_tool_failures),
                ),
            }
        })
        .collect();
    for (i, same) in crate::grid::same_as(variants).into_iter().enumerate() {
        out[i].same_as = same.map(|j| variants[j].policy.name.clone());
    }
    for (i, j) in crate::grid::masking_baselines(variants).into_iter().enumerate() {
        if let Some(j) = j {
            out[i].masking_baseline = Some(variants[j].policy.name.clone());
            out[i].masking_tokens_billed_saved =
                Some(out[j].tokens_billed as i64 - out[i].tokens_billed as i64);
            out[i].masking_compactions_avoided = Some(out[j].compactions as i64 - out[i].compactions as i64);
        }
    }
    let points: Vec<(u64, f64)> = out.iter().map(|s| (s.tokens_billed, s.identifier_recall)).collect();
    for (i, s) in out.iter_mut().enumerate() {
        let (b, r) = points[i];
        s.pareto = !points
            .iter()
            .enumerate()
            .any(|(j, &(b2, r2))| j != i && b2 <= b && r2 >= r && (b2 < b || r2 > r));
    }
    out
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// A row written straight from its fields is the row written
        /// through its `serde_json::Value` (`write_js`), for any numbers
        /// (NaN, infinities, integers beyond 2^53 and the f64 edge values
        /// included) and any strings.
        #[test]
        fn a_row_is_written_as_its_value_is(
            names in proptest::collection::vec(proptest::prelude::any::<String>(), 3),
            ints in proptest::collection::vec(
                proptest::prop_oneof![proptest::prelude::any::<u64>(), 0u64..10_000, (1u64 << 53)..(1u64 << 54)],
                25,
            ),
            floats in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<f64>(),
                    proptest::num::f64::ANY,
                    0.0f64..1.0,
                    proptest::sample::select(vec![f64::NAN, f64::INFINITY, -0.0, 1e21, 1e-7, 5e-324, 1.0])
                ],
                7,
            ),
        ) {
            let i = |k: usize| ints[k];
            let f = |k: usize| floats[k];
            let metrics = crate::Metrics {
                model_calls: i(0),
                compactions: i(1),
                compactions_below_threshold: i(2),
                recorded_compactions: i(3),
                recorded_below_threshold: i(4),
                peak_context_tokens: i(5),
                mean_context_tokens: f(0),
                tokens_billed: i(6),
                summary_tokens: i(7),
                overflow_calls: i(8),
                broken_tool_pairs: i(9),
                identifier_mentions: i(10),
                identifier_hits: i(11),
                identifier_recall: f(1),
                memory_flushes: i(12),
                degraded_summaries: i(13),
                truncated_tool_results: i(14),
                ledger_identifiers: i(15),
                ledger_recall: f(2),
                visible_identifier_recall: f(3),
                reclaimed_tokens: i(16),
                noop_compactions: i(17),
                compaction_loops: i(18),
                masked_tool_results: i(19),
                masked_tokens: i(20),
                probe_files: i(21),
                probe_files_named: i(22),
                file_recall: f(4),
                last_ask_missing: i(23),
                probe_tool_failures: i(24),
                probe_tool_failures_named: i(0),
                tool_failure_recall: f(5),
            };
            let row = super::Row {
                transcript: names[0].clone(),
                format: names[1].clone(),
                policy: names[2].clone(),
                metrics,
            };
            let mut direct = Vec::new();
            super::write_row(&mut direct, &row).unwrap();
            let mut through_value = Vec::new();
            sessionlog_events::json::write_js(&mut through_value, &serde_json::to_value(&row).unwrap()).unwrap();
            proptest::prop_assert_eq!(String::from_utf8(direct).unwrap(), String::from_utf8(through_value).unwrap());
        }
    }

    use super::*;

    fn variant(name: &str) -> Variant {
        Variant {
            policy: Policy { name: name.to_owned(), ..Policy::pi() },
            tokenizer: Tokenizer::Pi,
            measure: Measure::Estimate,
        }
    }

    fn row(policy: &str, billed: u64, hits: u64, mentions: u64) -> Row {
        Row {
            transcript: "t".to_owned(),
            format: "pi-jsonl".to_owned(),
            policy: policy.to_owned(),
            metrics: Metrics {
                tokens_billed: billed,
                identifier_hits: hits,
                identifier_mentions: mentions,
                identifier_recall: hits as f64 / mentions as f64,
                ..Metrics::default()
            },
        }
    }

    #[test]
    fn sweep_rows_with_masking_differ_from_rows_without() {
        // The grid's masking dimension over OpenClaw's base at a 200k window
        // (nothing compacts): `-m0` is masking off, `-m1` masks r1 before u2.
        let grid = crate::Grid { mask_after: vec![0, 1], ..crate::Grid::default() };
        let variants: Vec<Variant> = grid
            .variants(Vec::new(), Measure::Estimate)
            .unwrap()
            .into_iter()
            .filter(|v| v.policy.name.contains("-m"))
            .collect();
        let names: Vec<&str> = variants.iter().map(|v| v.policy.name.as_str()).collect();
        assert_eq!(
            names,
            ["w200000-r16384-k20000-cauto-threshold-pi-m0", "w200000-r16384-k20000-cauto-threshold-pi-m1"]
        );
        let load = |_: &Path| Ok((crate::tests::masking_transcript(), "pi-jsonl"));
        let (rows, skipped) =
            sweep(&[PathBuf::from("t.jsonl")], &load, &variants, SummarizerKind::Extractive, &|_| {});
        assert!(skipped.is_empty());
        // By hand (see the replay test): 330 tokens billed unmasked, 144 masked after 1 turn.
        let billed: Vec<(u64, u64)> =
            rows.iter().map(|r| (r.metrics.tokens_billed, r.metrics.masked_tool_results)).collect();
        assert_eq!(billed, [(330, 0), (144, 1)]);
        assert_ne!(rows[0].metrics, rows[1].metrics);
        let s = summarize(&rows, &variants);
        assert_eq!(s[1].masking_baseline.as_deref(), Some(names[0]));
        assert_eq!(
            (s[1].masking_tokens_billed_saved, s[1].masking_compactions_avoided),
            (Some(186), Some(0))
        );
        assert_eq!((s[0].masking_baseline.as_deref(), s[0].masked_tokens, s[1].masked_tokens), (None, 0, 93));
    }

    #[test]
    fn probes_are_aggregated_over_the_corpus() {
        let variants = [variant("a")];
        let probed = |files: u64, named: u64, missing: u64, failures: u64, failures_named: u64| Row {
            metrics: Metrics {
                probe_files: files,
                probe_files_named: named,
                last_ask_missing: missing,
                probe_tool_failures: failures,
                probe_tool_failures_named: failures_named,
                ..row("a", 0, 0, 0).metrics
            },
            ..row("a", 0, 0, 0)
        };
        // 3 of 4 and 1 of 6 files: 4 of 10 over the corpus (not the mean of
        // 0.75 and 0.17); failures 0 of 0 and 1 of 2: 1 of 2.
        let rows = [probed(4, 3, 1, 0, 0), probed(6, 1, 2, 2, 1)];
        let s = &summarize(&rows, &variants)[0];
        assert_eq!((s.file_recall, s.last_ask_missing, s.tool_failure_recall), (0.4, 3, 0.5));
        // Nothing probed: recall 1.
        let s = &summarize(&[probed(0, 0, 0, 0, 0)], &variants)[0];
        assert_eq!((s.file_recall, s.tool_failure_recall), (1.0, 1.0));
    }

    #[test]
    fn the_pareto_front_is_cheaper_or_better_recall() {
        let variants = [variant("a"), variant("b"), variant("c"), variant("d")];
        // a: cheap, low recall; b: dear, high recall; c: dominated by a; d: equal to a.
        let rows = [row("a", 100, 5, 10), row("b", 300, 9, 10), row("c", 200, 4, 10), row("d", 100, 5, 10)];
        let s = summarize(&rows, &variants);
        let front: Vec<(&str, bool)> = s.iter().map(|p| (p.policy.as_str(), p.pareto)).collect();
        assert_eq!(front, [("a", true), ("b", true), ("c", false), ("d", true)]);
        assert_eq!(s[0].identifier_recall, 0.5);
    }
}
