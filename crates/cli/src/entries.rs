//! `sessionlog entries`: the entries after Pi's load-time migration.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::{mode, print_pretty};

/// Print the entries after Pi's load-time migration (v1/v2 -> v3, deterministic ids).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A Pi/OpenClaw JSONL transcript.
    file: PathBuf,
    /// Print the file as Pi leaves it after opening (JSONL) instead of a JSON document.
    #[arg(long)]
    jsonl: bool,
    /// Fail on the first line Pi would drop instead of skipping it.
    #[arg(long)]
    strict: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let opened = sessionlog_store::open_as_pi(&a.file, mode(a.strict))?;
    if a.jsonl {
        // As Pi leaves the file after opening: rewritten if migrated, else untouched.
        out.write_all(&opened.bytes)?;
        return Ok(());
    }
    print_pretty(out, &sessionlog_context::entries_doc(&opened.loaded.transcript, opened.rewritten))
}
