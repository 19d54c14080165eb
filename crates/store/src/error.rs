//! What can go wrong with a state folder; every error names the file (and,
//! for content, the line and reason).

use std::io;
use std::path::PathBuf;

use sessionlog_event_log::{AppendError, LockError, PackError, ReadError};

/// Errors from the store's files.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read, written or renamed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// A log (transcript or store log) could not be read: file, line, reason.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A log could not be appended to.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// Another writer holds the lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A MessagePack segment could not be read or written.
    #[error("{}: {source}", path.display())]
    Pack {
        /// The segment.
        path: PathBuf,
        /// The failure.
        source: PackError,
    },
    /// An event does not apply to the store the log folds to.
    #[error("{}: {source}", path.display())]
    Fold {
        /// The store log.
        path: PathBuf,
        /// Why.
        source: sessionlog_sessions::store::StoreError,
    },
    /// `sessions.json` is not a session store.
    #[error("{}{}: not a session store: {reason}", path.display(), at.map_or(String::new(), |(l, c)| format!(":{l}:{c}")))]
    BadIndex {
        /// The file.
        path: PathBuf,
        /// Line and column, when the JSON is malformed.
        at: Option<(usize, usize)>,
        /// What is wrong.
        reason: String,
    },
    /// A path named as input does not exist.
    #[error("{}: no such file or folder", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// A corpus holds no transcript.
    #[error("no transcripts found under {under} (archived ones need --include-archived)")]
    NoTranscripts {
        /// The paths searched, comma-separated.
        under: String,
    },
    /// Neither a state folder nor a sessions folder.
    #[error("{}: neither an OpenClaw state directory (agents/<id>/sessions/) nor a sessions folder", path.display())]
    NotAStore {
        /// The path given.
        path: PathBuf,
    },
    /// The store has no log yet.
    #[error("{}: no store log (import a store first)", path.display())]
    NoLog {
        /// The missing log.
        path: PathBuf,
    },
    /// An import target already holds a store log.
    #[error("{}: already holds a store log; import into an empty folder", path.display())]
    AlreadyImported {
        /// The target log.
        path: PathBuf,
    },
    /// A file exists with other content and is not overwritten.
    #[error("{}: exists with other content; not overwritten", path.display())]
    Conflict {
        /// The file.
        path: PathBuf,
    },
    /// A transcript to write does not exist.
    #[error("{}: no such transcript", path.display())]
    NoTranscript {
        /// The file.
        path: PathBuf,
    },
    /// A transcript to create exists already.
    #[error("{}: exists already; a new session needs a new file", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The file is a MessagePack segment where JSONL is written.
    #[error("{}: a MessagePack segment; {what} (unpack it first)", path.display())]
    Segment {
        /// The file.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
    },
    /// Another agent's session, which sessionlog reads but never writes.
    #[error("{}: a {format} session, which sessionlog reads but never writes (a dry run shows what it would append)", path.display())]
    ReadOnly {
        /// The file.
        path: PathBuf,
        /// Its format (`claude-code`, `codex-rollout`).
        format: &'static str,
    },
    /// OpenClaw's SQLite database could not be read (names the database,
    /// and the session and row where it applies).
    #[error(transparent)]
    Database(#[from] sessionlog_sqlite_store::Error),
    /// A write aimed at OpenClaw's SQLite store, which sessionlog opens
    /// read-only.
    #[error("{name}: {what} in OpenClaw's SQLite store, which sessionlog reads but never writes ({hint})")]
    InDatabase {
        /// The transcript name (`<db>#<sessionId>`) or the database.
        name: String,
        /// What it is (`a transcript`, `the session store`).
        what: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// A transcript's `parentId` chain loops.
    #[error("{}: {source}", path.display())]
    Cycle {
        /// The transcript.
        path: PathBuf,
        /// Where.
        source: sessionlog_events::CycleError,
    },
    /// A time that cannot be written (archive names, timestamps).
    #[error("time {0} ms is out of range")]
    Time(i64),
    /// A store session has no usable session id.
    #[error("{key}: {reason}")]
    Session {
        /// The session key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A line could not be built or parsed.
    #[error("{}:{line}: {source}", path.display())]
    Line {
        /// The file (or `<stdin>`).
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Why.
        source: sessionlog_events::LineError,
    },
}

/// `io::Error` with the path it concerns.
pub(crate) fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { path, source }
}
