//! The live agent loop of sessionlog.
//!
//! * [`Agent`] — one worker per session key: turns run one at a time in
//!   arrival order (or interrupt the running one), keys in parallel; each
//!   turn is recorded as transcript entries and store events through the
//!   `store` crate, its context kept by `context::live::LiveContext`, its
//!   compactions by `compaction::compact_transcript`.
//! * [`flush`] — the pre-compaction memory flush's prompts, dated in the
//!   user's time zone.
//! * [`Config`] — the TOML file of `sessionlog run` and `chat`.
//! * [`Storage`] — where sessions are kept: JSONL files, or OpenClaw's
//!   SQLite agent database (`storage = "sqlite"`).
//! * [`tools`] — the [`tools::Tool`] trait and Pi's built-ins `read`,
//!   `write`, `edit`, `bash`, rooted at a [`tools::Workspace`]; results
//!   written as Pi's agent loop writes them.
//!
//! This crate may use tokio; the store, context and compaction calls it
//! makes are the synchronous library functions the CLI uses too.

mod agent;
mod config;
pub mod flush;
mod storage;
pub mod tools;

pub use agent::{
    Agent, AgentError, AgentEvent, AgentParts, Message, QueueMode, Status, TurnOutcome, OVERFLOW_ADVICE,
    SILENT_REPLY,
};
pub use config::{CompactionConfig, Config, ConfigError, MemoryConfig, SummarizerChoice};
pub use flush::{MEMORY_FLUSH_PROMPT, MEMORY_FLUSH_SYSTEM_PROMPT};
pub use storage::Storage;
