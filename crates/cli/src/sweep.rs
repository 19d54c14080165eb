//! `sessionlog sweep`: a policy grid over a corpus, with files, a table and a chart.

use std::fs;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::json;
use sessionlog_compaction::{Policy, Trigger};
use sessionlog_event_log::Mode;
use sessionlog_replay::sweep::{
    summarize, summarize_by_format, sweep, PolicySummary, Row, SummarizerKind, Variant,
};
use sessionlog_replay::Measure;
use sessionlog_tokens::Tokenizer;

/// The sweep's command-line arguments.
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
    /// Policy files to add to the grid (repeatable).
    #[arg(long)]
    policy: Vec<PathBuf>,
    /// Built-in presets to add to the grid: claude-code, codex (comma-separated).
    #[arg(long, value_delimiter = ',')]
    preset: Vec<String>,
    /// Summariser: extractive or recorded.
    #[arg(long, default_value = "extractive")]
    summarizer: SummarizerKind,
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

/// A sweep spec file: the grid and the corpus.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Spec {
    corpus: Vec<PathBuf>,
    context_window: Vec<u64>,
    reserve: Vec<u64>,
    keep_recent: Vec<u64>,
    chunk_ratio: Vec<String>,
    trigger: Vec<Trigger>,
    tokenizer: Vec<String>,
    preserve_turns: Vec<u32>,
    policy: Vec<PathBuf>,
    include_archived: bool,
}

fn is_transcript_name(name: &str, archived: bool) -> bool {
    if name.ends_with(".jsonl") {
        return name != "events.jsonl" && !name.ends_with(".trajectory.jsonl");
    }
    archived && sessionlog_sessions::paths::is_archived_transcript(name)
}

fn discover(path: &Path, archived: bool, out: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_dir() {
        let mut items: Vec<PathBuf> = fs::read_dir(path)
            .with_context(|| format!("{}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        items.sort();
        for item in items {
            if item.is_dir() {
                discover(&item, archived, out)?;
            } else if item
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| is_transcript_name(n, archived))
            {
                out.push(item);
            }
        }
    } else {
        // A file named explicitly is swept whatever its name.
        out.push(path.to_owned());
    }
    Ok(())
}

fn ratio_name(r: Option<f64>) -> String {
    r.map_or("auto".to_owned(), |r| r.to_string())
}

/// The grid: the product of the lists over OpenClaw's defaults, the policy
/// files, and always the OpenClaw and Pi defaults as reference rows.
fn variants(a: &SweepArgs, spec: &Spec, spec_dir: &Path) -> Result<Vec<Variant>> {
    let pick = |cli: &Vec<u64>, spec: &Vec<u64>, default: u64| -> Vec<u64> {
        if !cli.is_empty() {
            cli.clone()
        } else if !spec.is_empty() {
            spec.clone()
        } else {
            vec![default]
        }
    };
    let base = Policy::openclaw();
    let windows = pick(&a.context_window, &spec.context_window, base.context_window);
    let reserves = pick(&a.reserve, &spec.reserve, base.reserve_tokens);
    let keeps = pick(&a.keep_recent, &spec.keep_recent, base.keep_recent_tokens);
    let ratio_text = if a.chunk_ratio.is_empty() { &spec.chunk_ratio } else { &a.chunk_ratio };
    let mut ratios: Vec<Option<f64>> = Vec::new();
    for r in ratio_text {
        ratios.push(if r == "auto" {
            None
        } else {
            Some(r.parse().with_context(|| format!("--chunk-ratio {r}"))?)
        });
    }
    if ratios.is_empty() {
        ratios.push(None);
    }
    let triggers = if !a.trigger.is_empty() {
        a.trigger.clone()
    } else if !spec.trigger.is_empty() {
        spec.trigger.clone()
    } else {
        vec![Trigger::Threshold]
    };
    let spec_tokenizers: Vec<Tokenizer> = spec
        .tokenizer
        .iter()
        .map(|t| t.parse().map_err(|e: String| anyhow::anyhow!(e)))
        .collect::<Result<_>>()?;
    let tokenizers = if !a.tokenizer.is_empty() {
        a.tokenizer.clone()
    } else if !spec_tokenizers.is_empty() {
        spec_tokenizers
    } else {
        vec![Tokenizer::Pi]
    };
    // Named in the policy only when swept, so names of other grids stay as they were.
    let turns_given = !a.preserve_turns.is_empty() || !spec.preserve_turns.is_empty();
    let turns: Vec<Option<u32>> = if !a.preserve_turns.is_empty() {
        a.preserve_turns.iter().copied().map(Some).collect()
    } else if !spec.preserve_turns.is_empty() {
        spec.preserve_turns.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    let mut out: Vec<Variant> = Vec::new();
    let mut push = |policy: Policy, tokenizer: Tokenizer| {
        if !out.iter().any(|v| v.policy.name == policy.name) {
            out.push(Variant { policy, tokenizer, measure: a.measure });
        }
    };
    push(Policy::openclaw(), Tokenizer::Pi);
    push(Policy::pi(), Tokenizer::Pi);
    let files: Vec<PathBuf> =
        a.policy.iter().cloned().chain(spec.policy.iter().map(|p| spec_dir.join(p))).collect();
    for f in &files {
        push(crate::commands::load_policy(f)?, Tokenizer::Pi);
    }
    for name in &a.preset {
        let policy = Policy::preset(name).with_context(|| {
            format!("unknown preset `{name}` ({})", sessionlog_compaction::PRESETS.join(", "))
        })?;
        push(policy, Tokenizer::Pi);
    }
    let grid_given = [
        !a.context_window.is_empty() || !spec.context_window.is_empty(),
        !a.reserve.is_empty() || !spec.reserve.is_empty(),
        !a.keep_recent.is_empty() || !spec.keep_recent.is_empty(),
        !ratio_text.is_empty(),
        !a.trigger.is_empty() || !spec.trigger.is_empty(),
        !a.tokenizer.is_empty() || !spec.tokenizer.is_empty(),
        turns_given,
    ]
    .iter()
    .any(|g| *g);
    if grid_given {
        for &w in &windows {
            for &r in &reserves {
                for &k in &keeps {
                    for &c in &ratios {
                        for &t in &triggers {
                            for &z in &tokenizers {
                                for &p in &turns {
                                    let mut name =
                                        format!("w{w}-r{r}-k{k}-c{}-{t}-{}", ratio_name(c), z.name());
                                    if let Some(p) = p {
                                        name.push_str(&format!("-p{p}"));
                                    }
                                    let policy = Policy {
                                        name,
                                        context_window: w,
                                        reserve_tokens: r,
                                        keep_recent_tokens: k,
                                        chunk_ratio: c,
                                        trigger: t,
                                        recent_turns_preserve: p.unwrap_or(base.recent_turns_preserve),
                                        ..base.clone()
                                    };
                                    push(policy, z);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn write_outputs(
    dir: &Path,
    rows: &[Row],
    summaries: &[PolicySummary],
    by_format: &[(&str, Vec<PolicySummary>)],
) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    // JSON as `replay --json` prints it (JavaScript numbers), so a row's
    // metrics are byte-equal to a single replay's.
    let mut jsonl = Vec::new();
    for r in rows {
        sessionlog_events::json::write_js(&mut jsonl, &serde_json::to_value(r)?)?;
        jsonl.push(b'\n');
    }
    fs::write(dir.join("results.jsonl"), jsonl)?;
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
        ])?;
    }
    csv.flush()?;
    let mut doc = json!({"policies": summaries});
    if by_format.len() > 1 {
        let split: serde_json::Map<String, serde_json::Value> = by_format
            .iter()
            .map(|(f, s)| Ok(((*f).to_owned(), serde_json::to_value(s)?)))
            .collect::<Result<_>>()?;
        doc["byFormat"] = serde_json::Value::Object(split);
    }
    fs::write(dir.join("summary.json"), serde_json::to_vec_pretty(&doc)?)?;
    chart(&dir.join("chart.svg"), summaries)?;
    Ok(())
}

/// Tokens billed vs identifier recall, one point series per policy, the
/// Pareto front joined by a line, and a legend. (Without the font feature,
/// plotters lays out no caption or legend itself, so both are drawn as plain
/// text elements here.)
fn chart(path: &Path, summaries: &[PolicySummary]) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("chart: {e}");
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

/// Runs the sweep; returns whether every input could be swept.
pub(crate) fn run(a: &SweepArgs, out: &mut dyn Write) -> Result<bool> {
    let mut spec = Spec::default();
    let mut spec_dir = PathBuf::from(".");
    let mut corpus: Vec<PathBuf> = Vec::new();
    for p in &a.paths {
        if p.extension().is_some_and(|e| e == "toml") {
            let text = fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
            spec =
                toml::from_str(&text).with_context(|| format!("{}: not a valid sweep spec", p.display()))?;
            spec_dir = p.parent().map(Path::to_owned).unwrap_or_default();
            corpus.extend(spec.corpus.iter().map(|c| spec_dir.join(c)));
        } else {
            corpus.push(p.clone());
        }
    }
    let archived = a.include_archived || spec.include_archived;
    let mut files = Vec::new();
    for c in &corpus {
        if !c.exists() {
            bail!("{}: no such file or folder", c.display());
        }
        discover(c, archived, &mut files)?;
    }
    if files.is_empty() {
        let names: Vec<String> = corpus.iter().map(|c| c.display().to_string()).collect();
        bail!("no transcripts found under {} (archived ones need --include-archived)", names.join(", "));
    }
    let variants = variants(a, &spec, &spec_dir)?;
    let summarizer = a.summarizer;
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
        let (loaded, format) =
            crate::commands::load_any(path, Mode::Lenient).map_err(|e| format!("{e:#}"))?;
        for s in &loaded.skipped {
            tracing::warn!(file = %path.display(), line = s.line, reason = %s.reason, "line skipped");
        }
        Ok((loaded.transcript, format))
    };
    let (rows, skipped) = sweep(&files, &loader, &variants, summarizer, &|n| bar.inc(n));
    bar.finish_and_clear();
    let summaries = summarize(&rows, &variants);
    let by_format = summarize_by_format(&rows, &variants);
    if let Some(dir) = &a.out {
        write_outputs(dir, &rows, &summaries, &by_format)?;
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
            "{:<44} {:>14} {:>8.4} {:>6} {:>6} {:>6}{}",
            s.policy,
            s.tokens_billed,
            s.identifier_recall,
            s.compactions,
            s.overflow_calls,
            s.broken_tool_pairs,
            if s.pareto { "  *pareto" } else { "" }
        )?;
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
    Ok(skipped.is_empty())
}
