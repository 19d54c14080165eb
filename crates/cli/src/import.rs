//! `sessionlog import`: an OpenClaw state folder as an event-sourced store.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

/// Import an OpenClaw state directory (or one sessions folder) as an event-sourced store.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A state directory holding agents/<id>/sessions/, or a sessions folder.
    path: PathBuf,
    /// The store to create (its agents/<id>/sessions/ get events.jsonl, sessions.json and the transcripts).
    #[arg(long)]
    into: PathBuf,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    for done in sessionlog_store::import(&a.path, &a.into)? {
        writeln!(
            out,
            "agent {}: {} sessions imported, {} transcripts copied into {}",
            done.agent,
            done.sessions,
            done.copied,
            done.target.display()
        )?;
    }
    Ok(())
}
