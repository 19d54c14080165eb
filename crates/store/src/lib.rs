//! A state folder on disk, and every write to it, as library calls.
//!
//! The CLI and the live loop call the same functions here; they only map
//! arguments and print. Everything is synchronous `std::io` (a tokio loop
//! calls it from `spawn_blocking`); the decisions themselves are pure
//! functions of `sessionlog-sessions`, `-compaction` and `-context`.
//!
//! * [`discover`], [`Layout`] — the agents of a state folder and where their
//!   sessions live (JSONL files, or OpenClaw's SQLite database, read-only).
//! * [`AgentStore`] — one agent's store: its log `events.jsonl` (read
//!   strictly, a torn tail left out), the projection `sessions.json`, and
//!   [`StoreWriter`] — the one path every store event takes: lock, fold,
//!   append, project atomically, publish on the lifecycle bus. The writes:
//!   [`AgentStore::patch`], [`AgentStore::turn`], [`AgentStore::cleanup`],
//!   [`AgentStore::record_usage`], [`AgentStore::append`], [`import`];
//!   [`export`] writes an event store as OpenClaw's SQLite layout.
//! * [`load_transcript`] — a FILE argument as a transcript (JSONL, a
//!   MessagePack segment, `<db>#<sessionId>` in OpenClaw's SQLite store;
//!   other agents' formats named).
//! * [`TranscriptWriter`] — appends under the transcript's lock, folding each
//!   entry into the transcript and its token counters; [`SessionWriter`]
//!   adds the store (borrowed, or shared by an [`OwnedSessionWriter`]):
//!   changed counters recorded with the append.
//! * [`path_counters`], [`usage_event`] — the counters as a projection of a
//!   transcript, and the event that records them.
//! * [`pack`], [`unpack`], [`append_jsonl`] (and [`append_jsonl_acked`]) — segments and raw appends.

mod agent;
mod counters;
mod error;
mod exclusive;
mod layout;
mod ops;
mod session;
mod transcript;

pub use agent::{render, AgentStore, StoreWriter, STORE_LOCK_TIMEOUT};
pub use counters::{path_counters, usage_event};
pub use error::StoreError;
#[doc(hidden)]
pub use exclusive::waiting_for;
pub use layout::{
    archive_transcript, discover, discover_agent, sessions_dir, transcripts_in, transcripts_under, Agent,
    Layout, SQLITE_DATABASE,
};
pub use ops::{export, import, Cleaned, Exported, Imported, TurnOutcome};
pub use session::{OwnedSessionWriter, SessionOptions, SessionWriter};
pub use transcript::{
    append_jsonl, append_jsonl_acked, database_transcript, is_segment, load_transcript, open_as_pi, pack,
    read_jsonl, unpack, visible_window_bytes, AppendReport, Format, Opened, OpenedAsPi, Packed,
    TranscriptWriter, WriteOptions,
};
