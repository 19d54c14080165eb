//! The event vocabulary of sessionlog: both streams, and how they are written.
//!
//! * [`Entry`] — one line of a transcript (the transcript stream, Pi's v3
//!   entries): its exact text plus a lenient typed view ([`EntryKind`],
//!   [`Message`], [`Block`], [`Usage`]). Writing an entry back is lossless by
//!   construction.
//! * [`StoreEvent`] — one line of an agent's store log (the store stream):
//!   session lifecycle and metadata keyed by session key.
//! * [`mod@write`] — typed constructors for every entry we write, in Pi's key
//!   orders; [`ids`] — entry ids and session ids, deterministic.
//! * [`migrate`] — Pi's version 1 → 2 → 3 migration with deterministic ids.
//! * [`Transcript`] and [`Tree`] — a loaded file and the forest its
//!   `parentId` links form; [`Stats`] for `inspect`.
//! * [`json`] — JSON text as JavaScript writes (`JSON.stringify`) and trims it.
//! * [`PiRules`] — which Pi release's context and compaction rules apply
//!   (0.58.3 or 1.6.0); [`CURRENT_VERSION`], the newest file version.
//! * [`provenance`] — where a user message came from (`message.provenance`).
//! * [`gen`] — a deterministic generator of realistic transcripts.
//!
//! No I/O happens here: the files live in `sessionlog-event-log`.

mod entry;
pub mod gen;
pub mod ids;
pub mod json;
mod lenient;
pub mod migrate;
pub mod provenance;
mod rules;
mod scan;
mod store;
mod transcript;
pub mod write;

pub use entry::{
    Block, BranchSummary, Compaction, Content, ContextEdit, Cost, CustomMessage, Entry, EntryKind, Header,
    LineError, Message, Name, NestedCall, NestedCalls, Replacement, Role, Usage, UsageEntry,
};
pub use rules::{PiRules, CURRENT_VERSION};
pub use store::StoreEvent;
pub use transcript::{CycleError, Stats, Transcript, Tree};
