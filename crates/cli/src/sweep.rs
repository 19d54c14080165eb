//! `sessionlog sweep`: a policy grid over a corpus, with files, a table and a chart.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sessionlog_compaction::Trigger;
use sessionlog_event_log::Mode;
use sessionlog_replay::sweep::{
    summarize, summarize_by_format, sweep_then_exit, write_results, PolicySummary,
};
use sessionlog_replay::{load_policy, Grid, Inputs, Measure};
use sessionlog_tokens::Tokenizer;

/// Sweep a grid of compaction policies over a corpus: metrics table, files and a chart.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SweepArgs {
    /// Transcripts, folders (searched recursively) or a sweep spec (`*.toml`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Context windows (comma-separated).
    #[arg(long, value_delimiter = ',')]
    context_window: Vec<u64>,
    /// Reserve tokens (comma-separated).
    #[arg(long, value_delimiter = ',')]
    reserve: Vec<u64>,
    /// Recent tokens kept (comma-separated).
    #[arg(long, value_delimiter = ',')]
    keep_recent: Vec<u64>,
    /// Chunk ratios, or `auto` for OpenClaw's adaptive ratio (comma-separated).
    #[arg(long, value_delimiter = ',')]
    chunk_ratio: Vec<String>,
    /// Triggers: threshold or ratio:R (comma-separated).
    #[arg(long, value_delimiter = ',')]
    trigger: Vec<Trigger>,
    /// Token counters: pi, o200k, cl100k (comma-separated).
    #[arg(long, value_delimiter = ',')]
    tokenizer: Vec<Tokenizer>,
    /// User turns kept verbatim in each summary (comma-separated; OpenClaw: 3).
    #[arg(long, value_delimiter = ',')]
    preserve_turns: Vec<u32>,
    /// Reserve floors (comma-separated; OpenClaw: 20000, 0 = Pi's behaviour).
    #[arg(long, value_delimiter = ',')]
    reserve_floor: Vec<u64>,
    /// OpenClaw's fix for compaction loops off and/or on (comma-separated: false,true).
    #[arg(long, value_delimiter = ',')]
    skip_noop_compactions: Vec<bool>,
    /// Observation masking after this many user turns (comma-separated; 0 = off, e.g. 0,2,4).
    #[arg(long, value_delimiter = ',', value_name = "TURNS")]
    mask_after_turns: Vec<u32>,
    /// Policy files to add to the grid (repeatable).
    #[arg(long)]
    policy: Vec<PathBuf>,
    /// Built-in presets to add to the grid: claude-code, codex (comma-separated).
    #[arg(long, value_delimiter = ',')]
    preset: Vec<String>,
    /// The summariser (each worker gets its own; a model's share one cache).
    #[command(flatten)]
    summarizer: crate::common::SummarizerArgs,
    /// How to measure a context: usage or estimate.
    #[arg(long, default_value = "usage")]
    measure: Measure,
    /// Also sweep archived transcripts (`*.jsonl.deleted.*`, `*.jsonl.reset.*`, `*.jsonl.bak.*`).
    #[arg(long)]
    include_archived: bool,
    /// Where to write results.jsonl, summary.csv, summary.json and chart.svg.
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs the sweep; an input that could not be swept fails it (after the results).
pub(crate) fn run(a: &SweepArgs, out: &mut dyn Write) -> Result<()> {
    let inputs = Inputs::read(&a.paths)?;
    let spec = &inputs.spec;
    let files =
        sessionlog_store::transcripts_in(&inputs.corpus, a.include_archived || spec.include_archived)?;
    let flags = Grid {
        context_window: a.context_window.clone(),
        reserve: a.reserve.clone(),
        keep_recent: a.keep_recent.clone(),
        chunk_ratio: a.chunk_ratio.clone(),
        trigger: a.trigger.clone(),
        tokenizer: a.tokenizer.clone(),
        preserve_turns: a.preserve_turns.clone(),
        reserve_floor: a.reserve_floor.clone(),
        skip_noop_compactions: a.skip_noop_compactions.clone(),
        mask_after: a.mask_after_turns.clone(),
    };
    let grid = flags.or(spec.grid()?);
    let policy_files = a.policy.iter().cloned().chain(inputs.policy_files());
    let mut policies = policy_files.map(|f| load_policy(&f)).collect::<Result<Vec<_>, _>>()?;
    for name in &a.preset {
        policies.push(crate::common::preset(name)?);
    }
    let variants = grid.variants(policies, a.measure)?;
    // The policies' own summariser, when they name one (and agree).
    let mut named = Vec::new();
    for choice in variants.iter().filter_map(|v| v.policy.summarizer) {
        if !named.contains(&choice) {
            named.push(choice);
        }
    }
    if named.len() > 1 && !a.summarizer.is_given() {
        bail!("the policies name different summarisers ({named:?}); choose one with --summarizer");
    }
    let summarizers = a.summarizer.build(true, named.first().copied())?;
    let total = (files.len() * variants.len()) as u64;
    let bar = if a.quiet || !std::io::stdout().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(total)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} replays {elapsed_precise} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let loader = |path: &Path| -> Result<(sessionlog_events::Transcript, &'static str), String> {
        let opened = sessionlog_store::load_transcript(path, Mode::Lenient).map_err(|e| e.to_string())?;
        for s in &opened.loaded.skipped {
            tracing::warn!(file = %path.display(), line = s.line, reason = %s.reason, "line skipped");
        }
        Ok((opened.loaded.transcript, opened.format.name()))
    };
    let make = |t: &sessionlog_events::Transcript| summarizers.for_transcript(t);
    let (rows, skipped) = sweep_then_exit(&files, &loader, &variants, &make, &|n| bar.inc(n));
    bar.finish_and_clear();
    summarizers.finish()?;
    let summaries = summarize(&rows, &variants);
    let by_format = summarize_by_format(&rows, &variants);
    if let Some(dir) = &a.out {
        write_results(dir, &rows, &summaries, &by_format).with_context(|| format!("{}", dir.display()))?;
    }
    writeln!(
        out,
        "{} transcripts × {} policies = {} replays",
        files.len() - skipped.len(),
        variants.len(),
        rows.len()
    )?;
    if by_format.len() > 1 {
        let counts: Vec<String> = by_format
            .iter()
            .map(|(f, s)| format!("{f} {}", s.first().map_or(0, |s| s.transcripts)))
            .collect();
        writeln!(out, "formats: {}", counts.join(", "))?;
    }
    writeln!(
        out,
        "{:<44} {:>14} {:>8} {:>6} {:>6} {:>6}",
        "policy", "tokens billed", "recall", "compact", "overfl", "broken"
    )?;
    for s in &summaries {
        writeln!(
            out,
            "{:<44} {:>14} {:>8.4} {:>6} {:>6} {:>6}{}{}",
            s.policy,
            s.tokens_billed,
            s.identifier_recall,
            s.compactions,
            s.overflow_calls,
            s.broken_tool_pairs,
            if s.pareto { "  *pareto" } else { "" },
            s.same_as.as_ref().map_or(String::new(), |o| format!("  (= {o}: same effective policy)"))
        )?;
        if let (Some(base), Some(saved), Some(avoided)) =
            (&s.masking_baseline, s.masking_tokens_billed_saved, s.masking_compactions_avoided)
        {
            writeln!(
                out,
                "  masking saved {saved} tokens billed and {avoided} compactions against {base} ({} results masked)",
                s.masked_tool_results
            )?;
        }
    }
    let mut best = |name: &str, pick: &dyn Fn(&PolicySummary, &PolicySummary) -> bool| -> Result<()> {
        if let Some(b) = summaries.iter().reduce(|acc, s| if pick(s, acc) { s } else { acc }) {
            writeln!(out, "best {name:<26} {}", b.policy)?;
        }
        Ok(())
    };
    best("fewest tokens billed", &|s, acc| s.tokens_billed < acc.tokens_billed)?;
    best("highest identifier recall", &|s, acc| s.identifier_recall > acc.identifier_recall)?;
    best("fewest overflow calls", &|s, acc| s.overflow_calls < acc.overflow_calls)?;
    best("fewest compactions", &|s, acc| s.compactions < acc.compactions)?;
    for s in &skipped {
        eprintln!("sessionlog: skipped {}: {}", s.file, s.reason);
    }
    if let Some(dir) = &a.out {
        writeln!(out, "wrote {}", dir.display())?;
    }
    if !skipped.is_empty() {
        bail!("some inputs were skipped (listed above)");
    }
    Ok(())
}
