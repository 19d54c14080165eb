//! `sessionlog usage`: the token counters rebuilt from the transcripts.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::agent_stores;

/// Record each session's token counters from its transcript's last assistant usage.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store (a state directory).
    #[arg(long)]
    store: PathBuf,
    /// Only this agent.
    #[arg(long)]
    agent: Option<String>,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    for store in agent_stores(&a.store, a.agent.as_deref())? {
        if !store.has_log() {
            continue;
        }
        let recorded = store.record_usage()?;
        writeln!(out, "agent {}: usage recorded for {} sessions", store.id(), recorded.len())?;
    }
    Ok(())
}
