//! `sessionlog replay`: a transcript under a compaction policy — virtual compactions and metrics.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use sessionlog_compaction::PolicyOverrides;
use sessionlog_event_log::Mode;
use sessionlog_replay::Measure;
use sessionlog_tokens::Tokenizer;

use crate::common::{check_output, write_output, PolicyChoice, SummarizerArgs};

/// Replay a transcript under a compaction policy: virtual compactions and metrics.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A Pi/OpenClaw transcript (or MessagePack segment).
    file: PathBuf,
    /// The policy (the flags below override it).
    #[command(flatten)]
    policy: PolicyChoice,
    /// Context window in tokens.
    #[arg(long)]
    context_window: Option<u64>,
    /// Reserve tokens (Pi's reserveTokens). In force: max(reserve, floor), capped at the policy's
    /// maxReserveShare of the window (the openclaw preset: 0.25, a quarter; pi: no cap).
    #[arg(long)]
    reserve: Option<u64>,
    /// OpenClaw's reserve floor (20000); 0 for no floor (the maxReserveShare cap still applies).
    #[arg(long)]
    reserve_floor: Option<String>,
    /// Recent tokens kept verbatim.
    #[arg(long)]
    keep_recent: Option<u64>,
    /// Chunk size as a share of the window (default: OpenClaw's adaptive ratio).
    #[arg(long)]
    chunk_ratio: Option<f64>,
    /// When to compact: threshold or ratio:R (e.g. ratio:0.9).
    #[arg(long)]
    trigger: Option<sessionlog_compaction::Trigger>,
    /// User turns kept verbatim in each summary (OpenClaw's recentTurnsPreserve; 0 = off, at most 12).
    #[arg(long)]
    preserve_turns: Option<u32>,
    /// The summariser.
    #[command(flatten)]
    summarizer: SummarizerArgs,
    /// Token counter: pi, o200k or cl100k.
    #[arg(long, default_value = "pi")]
    tokenizer: Tokenizer,
    /// How to measure a context: usage (estimates calibrated by the recorded provider usage) or estimate.
    #[arg(long, default_value = "usage")]
    measure: Measure,
    /// Print the JSON report (the default prints a short summary).
    #[arg(long)]
    json: bool,
    /// Write the virtual compaction (and memory-flush) entries as Pi JSONL here.
    #[arg(long)]
    events_out: Option<PathBuf>,
    /// Replace an existing `--events-out` file (by default it is refused, left as it was).
    #[arg(long)]
    force: bool,
    /// OpenClaw's fix for compaction loops: a compaction that reclaims nothing is not repeated.
    #[arg(long)]
    skip_noop_compactions: bool,
    /// Whose cut prepares each compaction: Pi 0.58 or 1.6 (default: the policy's `piRules`).
    #[arg(long, value_name = "0.58|1.6")]
    pi_rules: Option<sessionlog_events::PiRules>,
    /// Observation masking: tool results this many user turns old are replaced by a placeholder
    /// (0 = off); the report says what masking saved against the same policy without it.
    #[arg(long, value_name = "TURNS")]
    mask_after_turns: Option<u32>,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    // Refused before the replay runs, not after it.
    if let Some(path) = &a.events_out {
        check_output(path, a.force)?;
    }
    let overrides = PolicyOverrides {
        context_window: a.context_window,
        reserve_tokens: a.reserve,
        reserve_tokens_floor: a
            .reserve_floor
            .as_deref()
            .map(str::parse)
            .transpose()
            .context("--reserve-floor")?,
        keep_recent_tokens: a.keep_recent,
        chunk_ratio: a.chunk_ratio,
        trigger: a.trigger,
        recent_turns_preserve: a.preserve_turns,
        pi_rules: a.pi_rules,
        skip_noop_compactions: a.skip_noop_compactions.then_some(true),
        mask_tool_results_after_turns: a.mask_after_turns,
        ..PolicyOverrides::default()
    };
    let policy = overrides.apply(a.policy.resolve()?);
    let opened = sessionlog_store::load_transcript(&a.file, Mode::Lenient)?;
    let t = &opened.loaded.transcript;
    let counter = sessionlog_tokens::counter(a.tokenizer)?;
    let summarizers = a.summarizer.build(false, policy.summarizer)?;
    let prepared = sessionlog_replay::Prepared::new(t).with_context(|| format!("{}", a.file.display()))?;
    let counter = prepared.counter(counter);
    let mut summarizer = summarizers.for_transcript(t);
    let report =
        sessionlog_replay::replay_prepared(&prepared, &policy, summarizer.as_mut(), &counter, a.measure);
    // What masking saved: the same policy without it.
    let savings = match policy.mask_tool_results_after_turns.filter(|&n| n > 0) {
        Some(_) => {
            let unmasked =
                sessionlog_compaction::Policy { mask_tool_results_after_turns: None, ..policy.clone() };
            let mut summarizer = summarizers.for_transcript(t);
            let baseline = sessionlog_replay::replay_prepared(
                &prepared,
                &unmasked,
                summarizer.as_mut(),
                &counter,
                a.measure,
            );
            Some(sessionlog_replay::MaskingSavings::of(&report.metrics, &baseline.metrics))
        }
        None => None,
    };
    summarizers.finish()?;
    if let Some(path) = &a.events_out {
        let mut buf = Vec::new();
        for line in report.event_lines()? {
            buf.extend_from_slice(line.raw().as_bytes());
            buf.push(b'\n');
        }
        write_output(Some(path), &buf, a.force, out)?;
    }
    let printed = print_report(a, &report, savings.as_ref(), out);
    // The process ends after this command: what the transcript, its
    // preparation and the report hold is left to the operating system
    // rather than freed piece by piece (3% of a long replay's instructions).
    std::mem::forget(report);
    std::mem::forget(prepared);
    std::mem::forget(opened);
    printed
}

/// Prints the report: JSON with `--json`, else the short summary.
fn print_report(
    a: &Args,
    report: &sessionlog_replay::Replay,
    savings: Option<&sessionlog_replay::MaskingSavings>,
    out: &mut dyn Write,
) -> Result<()> {
    if a.json {
        let mut buf = Vec::new();
        report.write_json(&mut buf, &a.file.display().to_string(), savings)?;
        buf.push(b'\n');
        out.write_all(&buf)?;
        // Left to the operating system too (see `run`).
        std::mem::forget(buf);
        return Ok(());
    }
    let m = &report.metrics;
    writeln!(out, "policy            {} (threshold {} tokens)", report.policy.name, report.threshold)?;
    writeln!(
        out,
        "summariser        {} / tokenizer {} / measure {:?}",
        report.summarizer, report.tokenizer, report.measure
    )?;
    writeln!(out, "model calls       {}", m.model_calls)?;
    writeln!(
        out,
        "compactions       {} ({} below threshold, {} degraded)",
        m.compactions, m.compactions_below_threshold, m.degraded_summaries
    )?;
    writeln!(
        out,
        "recorded          {} ({} below this policy's threshold, {} reproduced)",
        m.recorded_compactions, m.recorded_below_threshold, report.recorded_reproduced
    )?;
    for r in &report.recorded {
        let tokens = r.tokens_before.map_or_else(|| "-".to_owned(), |t| t.to_string());
        writeln!(
            out,
            "  {} tokensBefore {tokens} trigger {}{}",
            r.entry_id.as_deref().unwrap_or("-"),
            r.trigger.as_deref().unwrap_or("-"),
            if r.below_threshold { " (below threshold)" } else { "" }
        )?;
    }
    writeln!(out, "context           peak {} / mean {:.0}", m.peak_context_tokens, m.mean_context_tokens)?;
    writeln!(out, "tokens billed     {}", m.tokens_billed)?;
    writeln!(out, "summary tokens    {}", m.summary_tokens)?;
    writeln!(out, "overflow calls    {}", m.overflow_calls)?;
    writeln!(out, "broken tool pairs {}", m.broken_tool_pairs)?;
    writeln!(
        out,
        "identifier recall {:.4} ({}/{})",
        m.identifier_recall, m.identifier_hits, m.identifier_mentions
    )?;
    writeln!(out, "memory flushes    {}", m.memory_flushes)?;
    writeln!(
        out,
        "ledger recall     {:.4} ({} identifiers; visible in the summaries {:.4})",
        m.ledger_recall, m.ledger_identifiers, m.visible_identifier_recall
    )?;
    writeln!(
        out,
        "reclaimed         {} tokens; {} no-op compactions; {} compaction loops",
        m.reclaimed_tokens, m.noop_compactions, m.compaction_loops
    )?;
    writeln!(
        out,
        "probes            files named {:.4} ({}/{}); last user ask missing after {} of {} compactions; tool failures named {:.4} ({}/{})",
        m.file_recall,
        m.probe_files_named,
        m.probe_files,
        m.last_ask_missing,
        m.compactions,
        m.tool_failure_recall,
        m.probe_tool_failures_named,
        m.probe_tool_failures
    )?;
    if let Some(s) = savings {
        writeln!(
            out,
            "masking           {} tool results masked ({} tokens); saved {} tokens billed ({:.1}% of {}) and {} compactions ({} without masking)",
            m.masked_tool_results,
            m.masked_tokens,
            s.tokens_billed_saved,
            100.0 * s.tokens_billed_saved_share,
            s.baseline_tokens_billed,
            s.compactions_avoided,
            s.baseline_compactions
        )?;
    }
    Ok(())
}
