//! `/compact` on a transcript (Pi's and OpenClaw's manual compaction): Pi's
//! cut on the current branch (under the policy's `piRules`), the
//! summarisation pipeline, and the `compaction` entry to append — a child of
//! the current leaf, with a deterministic id and the time passed in; under Pi
//! 1.6 it carries the system message in force, as Pi 1.6 writes it. Writing
//! it is the caller's job (under the transcript's lock, so the leaf cannot
//! move in between).

use sessionlog_events::write::Head;
use sessionlog_events::{CycleError, Entry, LineError, Transcript};
use sessionlog_tokens::TokenCounter;

use crate::pipeline::Outcome;
use crate::policy::Policy;
use crate::summarizer::Summarizer;

/// What a manual compaction needs besides the transcript.
pub struct ManualCompaction<'a> {
    /// The policy (cut settings, pipeline knobs).
    pub policy: &'a Policy,
    /// The text after `/compact`: what the summary should focus on.
    pub instructions: Option<&'a str>,
    /// The summariser.
    pub summarizer: &'a mut dyn Summarizer,
    /// The token counter.
    pub counter: &'a dyn TokenCounter,
    /// The entry's time (Unix ms).
    pub now_ms: i64,
}

/// A compaction ready to append.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The `compaction` entry (its raw text is the line to append).
    pub entry: Entry,
    /// What the pipeline did.
    pub outcome: Outcome,
    /// Messages summarised (the history plus a split turn's prefix).
    pub summarized_messages: usize,
}

/// Why there is nothing to append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManualError {
    /// The transcript has no entries.
    #[error("nothing to compact (no entries)")]
    NoEntries,
    /// Pi's preparation refuses (already compacted, no addressable cut, …).
    #[error("nothing to compact ({0})")]
    Nothing(&'static str),
    /// The `parentId` chain loops.
    #[error(transparent)]
    Cycle(#[from] CycleError),
    /// The time cannot be written as an ISO timestamp.
    #[error("time {0} ms is out of range")]
    Time(i64),
    /// The entry could not be built (a bug, reported rather than hidden).
    #[error("the compaction entry: {0}")]
    Entry(#[from] LineError),
}

/// Compacts `transcript` at its current leaf: the entry to append.
pub fn compact_transcript(
    transcript: &Transcript,
    request: ManualCompaction<'_>,
) -> Result<Compacted, ManualError> {
    let indices = transcript.default_path()?;
    if indices.is_empty() {
        return Err(ManualError::NoEntries);
    }
    let path: Vec<&Entry> = indices.into_iter().map(|i| &transcript.entries[i]).collect();
    let rules = request.policy.pi_rules;
    let prep =
        sessionlog_context::cut::prepare_with(&path, &request.policy.cut_settings(), request.counter, rules)
            .map_err(|why| ManualError::Nothing(why.reason()))?;
    let outcome = crate::pipeline::compact_over(
        &path,
        &prep,
        request.policy,
        request.summarizer,
        request.counter,
        request.instructions,
        &crate::Facts::none(),
    );
    let parent = path.last().and_then(|e| e.id.as_deref());
    let timestamp =
        sessionlog_events::write::timestamp(request.now_ms).ok_or(ManualError::Time(request.now_ms))?;
    let seed = format!(
        "{}\n{}\n{timestamp}\n{}",
        transcript.session_id().unwrap_or(""),
        parent.unwrap_or(""),
        outcome.summary
    );
    let id = sessionlog_events::ids::fresh_entry_id(transcript, &seed);
    // Pi 1.6 keeps the system prompt and tools in force on the compaction:
    // system messages before the kept range would otherwise be lost.
    let system = rules
        .is_v1()
        .then(|| sessionlog_context::projection::compaction_system_message(&path, request.now_ms))
        .flatten();
    let entry = outcome.to_entry(&Head { id: &id, parent_id: parent, timestamp: &timestamp }, system)?;
    let summarized_messages = prep.messages_to_summarize.len() + prep.turn_prefix_messages.len();
    Ok(Compacted { entry, outcome, summarized_messages })
}
