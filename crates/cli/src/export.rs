//! `sessionlog export`: an event store as OpenClaw's current layout.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::now_or_clock;

/// Write an event store as OpenClaw's current layout (one SQLite database per agent), which
/// OpenClaw lists and validates.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The event store (a state directory with agents/<id>/sessions/events.jsonl).
    #[arg(long)]
    store: PathBuf,
    /// The OpenClaw state directory to write agents/<id>/agent/openclaw-agent.sqlite into
    /// (an existing database is never replaced).
    #[arg(long)]
    to: PathBuf,
    /// The time recorded as the databases' creation, ISO-8601 or Unix ms (default: now).
    #[arg(long)]
    now: Option<String>,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let now_ms = now_or_clock(a.now.as_deref())?;
    for done in sessionlog_store::export(&a.store, &a.to, now_ms)? {
        let w = &done.written;
        writeln!(
            out,
            "agent {}: {} sessions, {} transcript events written to {}",
            done.agent,
            w.entries,
            w.events,
            w.path.display()
        )?;
        for key in &done.without_transcript {
            writeln!(out, "  {key}: no transcript found; its entry is written without events")?;
        }
    }
    Ok(())
}
