//! The compaction engine: what happens once the context must shrink.
//!
//! * [`Policy`] — the knobs (window, reserve with OpenClaw's floor, keep-recent,
//!   trigger, chunk ratio, history share, memory flush) and presets.
//! * [`Summarizer`] — the only door to a model; [`Extractive`], [`Recorded`]
//!   and [`Scripted`] need none.
//! * [`compact`] — OpenClaw's staged summarisation with its three-level
//!   fallback over a Pi preparation, then file lists and the identifier ledger.
//! * [`ids`] — the identifier grammar the ledger preserves.
//! * [`ledger`] — the ledger as a chain of changes, one per compaction, and
//!   its resolution over a path ([`ledger_of`]).
//! * [`Facts`] — per-message text, identifiers and serialised form, derived
//!   once and shared by every compaction (and every policy of a sweep).
//! * [`safeguard`] — OpenClaw's sections around the summary: recent turns
//!   verbatim, tool failures, the structured fallback.
//! * [`truncate`] — oversized tool results cut for overflow recovery.
//! * `manual` — `/compact` on a transcript: the `compaction` entry to
//!   append ([`compact_transcript`]).
//!
//! Pure and deterministic: time, ids and model output come in as data.

mod facts;
pub mod ids;
pub mod ledger;
mod manual;
pub mod pipeline;
pub mod policy;
pub mod safeguard;
mod summarizer;
pub mod truncate;

pub use facts::Facts;
pub use ledger::{ledger_of, Ledger, LedgerDelta};
pub use manual::{compact_transcript, Compacted, ManualCompaction, ManualError};
pub use pipeline::{
    compact, compact_carrying, compact_over, compact_with, Exchange, FallbackLevel, Outcome,
    PipelineCompactor,
};
pub use policy::{
    claude_code_reserve, ByteSize, MemoryFlush, MemoryFlushOverrides, Policy, PolicyOverrides,
    RetiredFlushPrompt, SummarizerChoice, Trigger, MASK_PLACEHOLDER, PRESETS,
};
pub use summarizer::{
    Extractive, Recorded, RequestKind, Scripted, Summarizer, SummarizerError, SummaryMessage, SummaryRequest,
};
