//! OpenClaw's SQLite session store: one database per agent,
//! `agents/<agentId>/agent/openclaw-agent.sqlite`, used by OpenClaw 2026.8.1
//! and later instead of `sessions/sessions.json` plus `<sessionId>.jsonl`.
//!
//! * [`AgentDatabase`] — a database opened read-only (never written, safe
//!   beside a running OpenClaw): the session entries
//!   (`session_nodes.entry_json`, the objects `sessions.json` held), the
//!   transcript generations (`session_windows`) and each transcript
//!   (`transcript_events`, one JSONL line per row, in `seq` order) as the bytes
//!   of a JSONL file ([`TranscriptReader`]), so the JSONL reader of
//!   `sessionlog-event-log` parses it like a file.
//! * [`TranscriptName`] — the name `<path>/openclaw-agent.sqlite#<sessionId>`
//!   that stands for one transcript inside a database wherever a file is
//!   accepted.
//! * [`write`] — a new database in OpenClaw's current layout (schema
//!   [`SCHEMA_VERSION`]) from session entries and transcripts.
//! * [`live`] — [`LiveDatabase`]: a database written while in use, as
//!   OpenClaw writes it (session entries upserted, transcript events
//!   appended in short immediate transactions), for the live loop.
//!
//! Everything here is synchronous; rusqlite with SQLite bundled.

pub mod live;
mod read;
pub mod write;

use std::fmt;
use std::path::{Path, PathBuf};

pub use live::{Appended, EntryTransaction, LiveDatabase};
pub use read::{AgentDatabase, OpenMode, SessionNode, SessionWindow, TranscriptReader};
pub use write::{create, Export, Written};

/// The file name of an agent database.
pub const DATABASE_FILE: &str = "openclaw-agent.sqlite";

/// The agent schema this crate writes (OpenClaw's `PRAGMA user_version` and
/// `schema_meta.schema_version`; 23 since OpenClaw 2026.9).
pub const SCHEMA_VERSION: i64 = 23;

/// How long a read or write waits for OpenClaw's lock before failing
/// (OpenClaw's own busy timeout).
pub const BUSY_TIMEOUT_MS: u64 = 5_000;

/// `<state_dir>/agents/<agent_id>/agent/openclaw-agent.sqlite`.
pub fn database_path(state_dir: &Path, agent_id: &str) -> PathBuf {
    state_dir.join("agents").join(agent_id).join("agent").join(DATABASE_FILE)
}

/// One transcript inside an agent database, named
/// `<path to the database>#<sessionId>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptName {
    /// The database file.
    pub database: PathBuf,
    /// The transcript's session id.
    pub session_id: String,
}

impl TranscriptName {
    /// Reads `<path>.sqlite#<sessionId>`; `None` when `arg` is not of that form
    /// (the part before the last `#` must name a `.sqlite` file and the id must
    /// be one OpenClaw accepts: `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`).
    pub fn parse(arg: &str) -> Option<TranscriptName> {
        let (database, session_id) = arg.rsplit_once('#')?;
        let file = Path::new(database).file_name()?.to_str()?;
        if !file.ends_with(".sqlite") || !is_session_id(session_id) {
            return None;
        }
        Some(TranscriptName { database: PathBuf::from(database), session_id: session_id.to_owned() })
    }
}

impl fmt::Display for TranscriptName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.database.display(), self.session_id)
    }
}

/// True for an id OpenClaw stores transcripts under.
pub fn is_session_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Errors from reading or writing an agent database; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite refused an operation.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A file operation beside the database failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The file is not an OpenClaw agent database this crate can read.
    #[error("{path}: not an OpenClaw agent database: {reason}")]
    NotAgentDatabase {
        /// The database.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A session row whose entry cannot be read.
    #[error("{path}: session {key}: {reason}")]
    BadEntry {
        /// The database.
        path: PathBuf,
        /// The session key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// No transcript with that session id.
    #[error("{path}#{session_id}: no such transcript in the database")]
    NoTranscript {
        /// The database.
        path: PathBuf,
        /// The session id asked for.
        session_id: String,
    },
    /// A transcript row whose event cannot be read.
    #[error("{path}#{session_id}: event seq {seq}: {reason}")]
    BadEvent {
        /// The database.
        path: PathBuf,
        /// The transcript.
        session_id: String,
        /// The row's `seq`.
        seq: i64,
        /// What is wrong.
        reason: String,
    },
    /// Input the writer refuses (named by session key or id and line).
    #[error("{path}: {what}: {reason}")]
    BadInput {
        /// The database being written.
        path: PathBuf,
        /// The session key, or the session id and line.
        what: String,
        /// Why.
        reason: String,
    },
    /// An entry write refused: another writer changed the row since it was read.
    #[error("{path}: session {key} was changed by another writer; not overwritten")]
    Conflict {
        /// The database.
        path: PathBuf,
        /// The session key.
        key: String,
    },
    /// The writer never replaces an existing database.
    #[error("{path}: already exists; an agent database is never overwritten")]
    Exists {
        /// The database.
        path: PathBuf,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_names_read_as_the_interface_writes_them() {
        let n =
            TranscriptName::parse("st/agents/build/agent/openclaw-agent.sqlite#678366ea-e225-4877").unwrap();
        assert_eq!(n.database, Path::new("st/agents/build/agent/openclaw-agent.sqlite"));
        assert_eq!(n.session_id, "678366ea-e225-4877");
        assert_eq!(n.to_string(), "st/agents/build/agent/openclaw-agent.sqlite#678366ea-e225-4877");
        // The last `#` separates: a folder may contain one.
        let n = TranscriptName::parse("a#b/openclaw-agent.sqlite#sess-1").unwrap();
        assert_eq!(
            (n.database.to_str().unwrap(), n.session_id.as_str()),
            ("a#b/openclaw-agent.sqlite", "sess-1")
        );
        for not in [
            "x.jsonl",
            "x.jsonl#abc",
            "openclaw-agent.sqlite",
            "openclaw-agent.sqlite#",
            "openclaw-agent.sqlite#../x",
            "openclaw-agent.sqlite#-x",
            "#abc",
        ] {
            assert_eq!(TranscriptName::parse(not), None, "{not}");
        }
        assert!(TranscriptName::parse(&format!("db.sqlite#{}", "a".repeat(128))).is_some());
        assert!(TranscriptName::parse(&format!("db.sqlite#{}", "a".repeat(129))).is_none());
    }

    #[test]
    fn the_database_lives_in_the_agent_folder() {
        assert_eq!(
            database_path(Path::new("/s"), "build"),
            Path::new("/s/agents/build/agent/openclaw-agent.sqlite")
        );
    }
}
