//! `sessionlog compact`: `/compact` for a live session, appended under the transcript's lock.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde_json::json;
use sessionlog_compaction::{compact_transcript, ManualCompaction, PolicyOverrides};
use sessionlog_event_log::LockOptions;
use sessionlog_store::{TranscriptWriter, WriteOptions};
use sessionlog_tokens::Tokenizer;

use crate::common::{now_or_clock, print_pretty, PolicyChoice, SummarizerArgs};

/// Compact a session now (Pi's and OpenClaw's `/compact`): summarise up to the cut and append
/// the `compaction` entry to the transcript, under its lock.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The transcript (Pi/OpenClaw JSONL) to compact.
    file: PathBuf,
    /// The policy.
    #[command(flatten)]
    policy: PolicyChoice,
    /// What the summary should focus on (`/compact <text>`).
    #[arg(long)]
    instructions: Option<String>,
    /// The summariser.
    #[command(flatten)]
    summarizer: SummarizerArgs,
    /// The entry's time, ISO-8601 or Unix ms (default: now).
    #[arg(long)]
    now: Option<String>,
    /// Print the entry without writing it.
    #[arg(long)]
    dry_run: bool,
    /// How long to wait for another writer's lock, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    lock_timeout_ms: u64,
    /// Whose cut decides, and whether the entry records the current system message (Pi 1.6):
    /// 0.58 or 1.6 (default: the policy's `piRules`).
    #[arg(long, value_name = "0.58|1.6")]
    pi_rules: Option<sessionlog_events::PiRules>,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let policy = PolicyOverrides { pi_rules: a.pi_rules, ..Default::default() }.apply(a.policy.resolve()?);
    let summarizers = a.summarizer.build(false, policy.summarizer)?;
    let now_ms = now_or_clock(a.now.as_deref())?;
    let file = &a.file;
    // The lock is taken before the transcript is read again, so no other
    // writer can move the leaf between the cut and the append.
    let mut writer = if a.dry_run {
        None
    } else {
        let lock =
            LockOptions { timeout: Duration::from_millis(a.lock_timeout_ms), ..LockOptions::default() };
        let w = TranscriptWriter::open(file, WriteOptions { lock, ..WriteOptions::default() })?;
        if let Some(repair) = w.tail_repair() {
            eprintln!("sessionlog: {}: repaired torn tail: {repair:?}", file.display());
        }
        Some(w)
    };
    let peeked;
    let transcript = match &writer {
        Some(w) => w.transcript(),
        None => {
            peeked = TranscriptWriter::peek(file)?;
            &peeked
        }
    };
    let mut summarizer = summarizers.for_transcript(transcript);
    let request = ManualCompaction {
        policy: &policy,
        instructions: a.instructions.as_deref(),
        summarizer: summarizer.as_mut(),
        counter: sessionlog_tokens::counter(Tokenizer::Pi)?,
        now_ms,
    };
    let done = compact_transcript(transcript, request).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    // A cache-only run that missed writes nothing.
    summarizers.finish()?;
    if let Some(writer) = writer.as_mut() {
        writer.append(std::slice::from_ref(&done.entry))?;
    }
    let doc = json!({
        "file": file.display().to_string(),
        "written": writer.is_some(),
        "summarizedMessages": done.summarized_messages,
        "fallback": done.outcome.fallback,
        "entry": done.entry.to_value(),
    });
    print_pretty(out, &doc)
}
