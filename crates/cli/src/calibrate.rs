//! `sessionlog calibrate`: which policy reproduces the compactions a session recorded.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use sessionlog_event_log::Mode;
use sessionlog_replay::calibrate::{calibrate, candidates, preset_for_format};
use sessionlog_replay::Prepared;

/// Infer the compaction policy a session ran with from its recorded compactions.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Transcripts or folders (searched recursively): Pi, OpenClaw, Claude Code, Codex.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// One JSON object per file: file, recorded, reproduced, anomalies, manual, matchRate, policy.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let files = sessionlog_store::transcripts_in(&a.paths, false)?;
    let grid = candidates();
    for file in &files {
        let opened = sessionlog_store::load_transcript(file, Mode::Lenient)?;
        let t = &opened.loaded.transcript;
        let prepared = Prepared::new(t).with_context(|| format!("{}", file.display()))?;
        let counter = prepared.counter(&sessionlog_tokens::PiEstimator);
        let found = calibrate(&prepared, &counter, &grid, preset_for_format(opened.format.name()));
        let name = file.display().to_string();
        if a.json {
            let value = match &found {
                Some(c) => {
                    let mut v = serde_json::to_value(c)?;
                    if let Some(obj) = v.as_object_mut() {
                        obj.shift_insert(0, "file".to_owned(), Value::from(name));
                        obj.insert("format".to_owned(), Value::from(opened.format.name()));
                    }
                    v
                }
                None => json!({
                    "file": name, "recorded": 0, "reproduced": 0, "matchRate": null, "anomalies": [],
                    "manual": [], "policy": null, "candidates": grid.len(), "format": opened.format.name()
                }),
            };
            writeln!(out, "{}", serde_json::to_string(&value)?)?;
            continue;
        }
        match found {
            None => writeln!(out, "{name}: no recorded compaction")?,
            Some(c) => {
                let p = &c.policy;
                // The cap on the reserve (OpenClaw 2026.9's quarter of the
                // window) only when the policy has one, and the reserve in force.
                let share = if p.max_reserve_share > 0.0 {
                    format!(", cap {} of the window", p.max_reserve_share)
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "{name}: {}/{} recorded compactions reproduced (match rate {:.2}) by {} (window {}, reserve {}, floor {}{share}: {} in force, keep {}, trigger {})",
                    c.reproduced,
                    c.recorded,
                    c.match_rate,
                    p.name,
                    p.context_window,
                    p.reserve_tokens,
                    p.reserve_tokens_floor,
                    p.effective_reserve(),
                    p.keep_recent_tokens,
                    p.trigger
                )?;
                if !c.anomalies.is_empty() {
                    writeln!(
                        out,
                        "  anomalies (far below the threshold, not fitted): {}",
                        c.anomalies.join(", ")
                    )?;
                }
                if !c.manual.is_empty() {
                    writeln!(out, "  manual (no threshold to fit): {}", c.manual.join(", "))?;
                }
            }
        }
    }
    Ok(())
}
