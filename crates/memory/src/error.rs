//! The memory crate's errors; each names the file it is about.

use std::path::PathBuf;

use crate::embed::EmbedError;

/// Errors of indexing, searching and reading memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The index database failed.
    #[error("{path}: index database: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite failure.
        source: rusqlite::Error,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// A transcript could not be read.
    #[error(transparent)]
    Transcript(#[from] sessionlog_event_log::ReadError),
    /// The embedding provider failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// A path that memory may not read.
    #[error("{path}: {reason}")]
    Path {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: String,
    },
}
