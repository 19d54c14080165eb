//! `sessionlog gen`: a deterministic, realistic v3 transcript.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use sessionlog_events::gen::{generate, GenOptions};

use crate::common::{check_output, write_output};

/// Generate a deterministic, realistic v3 transcript.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Entries after the header (a turn is never cut, so a few more may appear).
    #[arg(long, default_value_t = 200)]
    entries: usize,
    /// Times the conversation goes back to an earlier entry and continues there.
    #[arg(long, default_value_t = 0)]
    branches: usize,
    /// Compaction entries spread over the conversation.
    #[arg(long, default_value_t = 0)]
    compactions: usize,
    /// Mean length of a tool result's text, in characters.
    #[arg(long, default_value_t = 1200)]
    tool_output_chars: usize,
    /// Where to write (default: stdout); an existing file is refused.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace an existing output file.
    #[arg(long)]
    force: bool,
}

/// The most entries one run generates (the transcript is built in memory).
const MAX_ENTRIES: usize = 1_000_000;
/// The largest mean tool result, in characters.
const MAX_TOOL_OUTPUT_CHARS: usize = 1_000_000;

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    if a.entries > MAX_ENTRIES {
        bail!("--entries {}: at most {MAX_ENTRIES} entries per transcript", a.entries);
    }
    if a.tool_output_chars > MAX_TOOL_OUTPUT_CHARS {
        bail!("--tool-output-chars {}: at most {MAX_TOOL_OUTPUT_CHARS}", a.tool_output_chars);
    }
    if let Some(output) = &a.output {
        check_output(output, a.force)?;
    }
    let options = GenOptions {
        seed: a.seed,
        entries: a.entries,
        branches: a.branches,
        compactions: a.compactions,
        tool_output_chars: a.tool_output_chars,
    };
    let mut buf = Vec::new();
    for line in generate(options) {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    write_output(a.output.as_deref(), &buf, a.force, out)
}
