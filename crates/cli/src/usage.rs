//! `sessionlog usage`: the token counters rebuilt from the transcripts.

use std::io::Write;

use anyhow::Result;

use crate::common::StoreArgs;

/// Record each session's token counters from its transcript's last assistant usage.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store (a state directory) and, optionally, one agent.
    #[command(flatten)]
    stores: StoreArgs,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    for store in a.stores.open()? {
        if !store.has_log() {
            continue;
        }
        let recorded = store.record_usage()?;
        writeln!(out, "agent {}: usage recorded for {} sessions", store.id(), recorded.len())?;
    }
    Ok(())
}
