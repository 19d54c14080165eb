//! `sessionlog append`: JSONL entries from stdin, durably, under the file's lock.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use sessionlog_event_log::{AppendOptions, FsyncPolicy, LockOptions};

/// Append JSONL entries read from stdin to a transcript, durably and under its lock.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The transcript to append to (created if missing).
    file: PathBuf,
    /// When to fsync: every-entry, per-batch or never.
    #[arg(long, default_value = "per-batch")]
    fsync: FsyncPolicy,
    /// Lines written per group commit.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// How long to wait for another writer's lock, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    lock_timeout_ms: u64,
    /// After each batch is written (and synced per --fsync), print the number of lines appended so far.
    #[arg(long)]
    ack: bool,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let lock = LockOptions { timeout: Duration::from_millis(a.lock_timeout_ms), ..LockOptions::default() };
    let options = AppendOptions { fsync: a.fsync, lock, ..AppendOptions::default() };
    let mut ack = |n: usize| {
        if a.ack {
            let mut out = std::io::stdout().lock();
            // A reader that went away does not stop the append.
            let _ = writeln!(out, "{n}").and_then(|()| out.flush());
        }
    };
    let report =
        sessionlog_store::append_jsonl_acked(&a.file, std::io::stdin().lock(), options, a.batch, &mut ack)?;
    if let Some(repair) = report.repair {
        eprintln!("sessionlog: {}: repaired torn tail: {repair:?}", a.file.display());
    }
    Ok(())
}
