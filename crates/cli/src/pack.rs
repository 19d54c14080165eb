//! `sessionlog pack` and `unpack`: JSONL ⇄ MessagePack segments.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::{check_output, exists_or, mode, write_output};

/// Write a transcript as a MessagePack segment (length-prefixed, CRC-32 per record).
#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    /// The JSONL transcript to pack.
    file: PathBuf,
    /// Where to write the segment; an existing file is refused.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file.
    #[arg(long)]
    force: bool,
    /// Skip (and report) lines Pi would drop instead of refusing the file.
    #[arg(long)]
    lenient: bool,
}

/// Write a MessagePack segment back as JSONL.
#[derive(Debug, clap::Args)]
pub(crate) struct UnpackArgs {
    /// The segment to read.
    file: PathBuf,
    /// Where to write the JSONL (default: stdout); an existing file is refused.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace an existing output file.
    #[arg(long)]
    force: bool,
}

pub(crate) fn pack(a: &PackArgs) -> Result<()> {
    check_output(&a.output, a.force)?;
    let packed = if a.force {
        sessionlog_store::pack(&a.file, &a.output, mode(!a.lenient))?
    } else {
        // Packed beside the output, then linked into place only if the name is still free.
        let tmp =
            sessionlog_event_log::temp_beside(&a.output, "pack").map_err(|e| exists_or(&a.output, e))?;
        let packed = sessionlog_store::pack(&a.file, &tmp, mode(!a.lenient))?;
        sessionlog_event_log::link_into_place(&tmp, &a.output).map_err(|e| exists_or(&a.output, e))?;
        packed
    };
    for s in &packed.skipped {
        eprintln!("sessionlog: {}:{}: skipped: {}", a.file.display(), s.line, s.reason);
    }
    eprintln!("packed {} records into {}", packed.records, a.output.display());
    Ok(())
}

pub(crate) fn unpack(a: &UnpackArgs, out: &mut dyn Write) -> Result<()> {
    if let Some(output) = &a.output {
        check_output(output, a.force)?;
    }
    write_output(a.output.as_deref(), &sessionlog_store::unpack(&a.file)?, a.force, out)
}
