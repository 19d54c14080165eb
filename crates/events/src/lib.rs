//! The transcript vocabulary of sessionlog: Pi's v3 session entries.
//!
//! * [`Entry`] — one line of a transcript: its exact text plus a lenient typed
//!   view ([`EntryKind`], [`Message`], [`Block`], [`Usage`]). Writing an entry
//!   back is lossless by construction.
//! * [`migrate`] — Pi's version 1 → 2 → 3 migration with deterministic ids.
//! * [`Transcript`] and [`Tree`] — a loaded file and the forest its
//!   `parentId` links form; [`Stats`] for `inspect`.
//! * [`json`] — JSON text as JavaScript writes (`JSON.stringify`) and trims it.
//! * [`PiRules`] — which Pi release's context and compaction rules apply
//!   (0.58.3 or 1.6.0); [`CURRENT_VERSION`], the newest file version.
//!
//! No I/O happens here: the file log lives in `sessionlog-event-log`.

mod entry;
pub mod json;
mod lenient;
pub mod migrate;
mod rules;
mod transcript;

pub use entry::{
    Block, BranchSummary, Compaction, Content, ContextEdit, Cost, CustomMessage, Entry, EntryKind, Header,
    LineError, Message, NestedCall, NestedCalls, Replacement, Role, Usage, UsageEntry,
};
pub use rules::{PiRules, CURRENT_VERSION};
pub use transcript::{CycleError, Stats, Transcript, Tree};
