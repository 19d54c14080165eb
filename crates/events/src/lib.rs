//! The transcript vocabulary of sessionlog: Pi's v3 session entries.
//!
//! * [`Entry`] — one line of a transcript: its exact text plus a lenient typed
//!   view ([`EntryKind`], [`Message`], [`Block`], [`Usage`]). Writing an entry
//!   back is lossless by construction.
//! * [`migrate`] — Pi's version 1 → 2 → 3 migration with deterministic ids.
//! * [`Transcript`] and [`Tree`] — a loaded file and the forest its
//!   `parentId` links form; [`Stats`] for `inspect`.
//! * [`json`] — JSON text as JavaScript writes (`JSON.stringify`) and trims it.
//!
//! No I/O happens here: the file log lives in `sessionlog-event-log`.

mod entry;
pub mod json;
mod lenient;
pub mod migrate;
mod transcript;

pub use entry::{
    Block, BranchSummary, Compaction, Content, Cost, CustomMessage, Entry, EntryKind, Header, LineError,
    Message, Role, Usage,
};
pub use transcript::{CycleError, Stats, Transcript, Tree};
