//! `sessionlog pack` and `unpack`: JSONL ⇄ MessagePack segments.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::{mode, write_to};

/// Write a transcript as a MessagePack segment (length-prefixed, CRC-32 per record).
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    /// The JSONL transcript to pack.
    file: PathBuf,
    /// Where to write the segment.
    #[arg(short, long)]
    output: PathBuf,
    /// Skip (and report) lines Pi would drop instead of refusing the file.
    #[arg(long)]
    lenient: bool,
}

/// Write a MessagePack segment back as JSONL.
#[derive(Debug, clap::Args)]
pub(crate) struct UnpackArgs {
    /// The segment to read.
    file: PathBuf,
    /// Where to write the JSONL (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub(crate) fn pack(a: &PackArgs) -> Result<()> {
    let packed = sessionlog_store::pack(&a.file, &a.output, mode(!a.lenient))?;
    for s in &packed.skipped {
        eprintln!("sessionlog: {}:{}: skipped: {}", a.file.display(), s.line, s.reason);
    }
    eprintln!("packed {} records into {}", packed.records, a.output.display());
    Ok(())
}

pub(crate) fn unpack(a: &UnpackArgs, out: &mut dyn Write) -> Result<()> {
    write_to(a.output.as_deref(), &sessionlog_store::unpack(&a.file)?, out)
}
