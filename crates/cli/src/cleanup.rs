//! `sessionlog cleanup`: OpenClaw's store maintenance.

use std::io::Write;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use sessionlog_sessions::maintenance::{parse_duration_ms, Settings};

use crate::common::{now_or_clock, print_pretty, StoreArgs};

/// Store maintenance (OpenClaw `sessions cleanup`): prune stale entries, cap the store, archive
/// the transcripts they leave behind; with --fix-missing, first drop entries without a transcript.
/// Reports only, unless --enforce.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store (a state directory) and, optionally, one agent.
    #[command(flatten)]
    stores: StoreArgs,
    /// Apply the plan (default: report what would go, as OpenClaw's warn mode).
    #[arg(long)]
    enforce: bool,
    /// The time maintenance runs at, ISO-8601 or Unix ms (default: now).
    #[arg(long)]
    now: Option<String>,
    /// The caller's session key, never pruned or capped (`--fix-missing` still removes it).
    #[arg(long)]
    active_key: Option<String>,
    /// First remove entries whose transcript is missing or holds no message
    /// (OpenClaw's `--fix-missing`; before, and regardless of, age and cap).
    #[arg(long)]
    fix_missing: bool,
    /// Entries not updated for this long go (30d; units ms, s, m, h, d, w; `off` keeps them).
    #[arg(long, default_value = "30d")]
    prune_after: String,
    /// Keep at most this many entries, the most recently active first (`off` for no cap).
    #[arg(long, default_value = "5000")]
    max_entries: String,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let prune_after_ms = match a.prune_after.as_str() {
        "off" => None,
        text => Some(parse_duration_ms(text).map_err(|e| anyhow!("--prune-after {e}"))?),
    };
    let max_entries = match a.max_entries.as_str() {
        "off" => None,
        text => Some(text.parse().with_context(|| format!("--max-entries {text}"))?),
    };
    let settings = Settings { prune_after_ms, max_entries };
    let now_ms = now_or_clock(a.now.as_deref())?;
    let mut reports = Vec::new();
    for store in a.stores.open()? {
        let done = store.cleanup(now_ms, &settings, a.active_key.as_deref(), a.fix_missing, a.enforce)?;
        reports.push(json!({
            "agent": store.id(),
            "mode": if a.enforce { "enforce" } else { "warn" },
            "settings": settings,
            "removed": done.plan.removed,
            "archived": done.plan.archived,
            "kept": done.plan.kept,
            "activeExempted": done.plan.active_exempted,
            "archivedFiles": done.archived_files,
        }));
    }
    print_pretty(out, &Value::Array(reports))
}
