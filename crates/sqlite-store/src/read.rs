//! Reading an agent database without ever writing to it.
//!
//! The file is opened read-only with OpenClaw's busy timeout and
//! `query_only`, so a running OpenClaw (WAL mode, short write transactions)
//! and sessionlog can use it at once: a transcript is read inside one read
//! transaction, a consistent snapshot however many rows OpenClaw appends
//! meanwhile.
//!
//! A WAL database needs its `-shm` index to be read. Where the database's
//! folder cannot be written and no `-wal` file exists, that index cannot be
//! created; then the file is opened `immutable` (no locks, no index). That is
//! safe because without a `-wal` file every committed transaction is in the
//! main file, and a writer that cannot create files there cannot start one
//! either. A folder is taken as not writable when its permission bits say so,
//! or when SQLite fails to open the index in it. Elsewhere a reader, like
//! every SQLite reader, may leave an empty `-wal` and a `-shm` beside the
//! database; the database file itself is never modified.

use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction};
use serde_json::{Map, Value};

use crate::{Error, Result, BUSY_TIMEOUT_MS};

/// How the database file was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read-only with SQLite's locks, beside any writer.
    Shared,
    /// `immutable`: a database in a folder nobody can write, without a WAL.
    Immutable,
}

/// One `session_nodes` row: a session key and its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionNode {
    /// The session key.
    pub key: String,
    /// The session id the key points at.
    pub current_session_id: String,
    /// The entry as stored (the JSON object `sessions.json` held).
    pub entry_json: String,
    /// OpenClaw's check of the entry: 1 valid, 0 not yet checked, -1 invalid.
    pub entry_valid: i64,
    /// The entry's `updatedAt`, as projected by OpenClaw.
    pub updated_at: i64,
}

/// One `session_windows` row: a transcript generation of a session key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWindow {
    /// The generation's session id.
    pub session_id: String,
    /// The session key it belongs to.
    pub session_key: String,
    /// The generation it replaced, if recorded.
    pub previous_session_id: Option<String>,
    /// Why it began (`initial`, `reset`, `rollover`, `fork`, ...), if recorded.
    pub reason: Option<String>,
    /// When it began (Unix ms).
    pub created_at: i64,
    /// When it last changed (Unix ms).
    pub updated_at: i64,
}

/// An agent database opened read-only.
#[derive(Debug)]
pub struct AgentDatabase {
    conn: Connection,
    path: PathBuf,
    mode: OpenMode,
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `file:` URI of a path, every byte outside the unreserved set escaped.
fn file_uri(path: &Path, query: &str) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

fn cannot_open_index(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly))
}

impl AgentDatabase {
    /// Opens `path` read-only (see the module docs for when it is opened
    /// `immutable`) and checks that it holds OpenClaw's session tables.
    pub fn open(path: &Path) -> Result<AgentDatabase> {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
        if !meta.is_file() {
            return Err(Error::NotAgentDatabase { path: path.to_owned(), reason: "not a file".into() });
        }
        let folder_read_only = path
            .parent()
            .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
            .and_then(|dir| std::fs::metadata(dir).ok())
            .is_some_and(|m| m.permissions().readonly());
        let has_wal = sibling(path, "-wal").exists();
        if folder_read_only && !has_wal {
            return Self::open_as(path, OpenMode::Immutable);
        }
        match Self::open_as(path, OpenMode::Shared) {
            Err(Error::Sqlite { source, .. }) if !has_wal && cannot_open_index(&source) => {
                Self::open_as(path, OpenMode::Immutable)
            }
            other => other,
        }
    }

    fn open_as(path: &Path, mode: OpenMode) -> Result<AgentDatabase> {
        let sqlite = |source| Error::Sqlite { path: path.to_owned(), source };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match mode {
            OpenMode::Shared => Connection::open_with_flags(path, flags),
            OpenMode::Immutable => {
                Connection::open_with_flags(file_uri(path, "immutable=1"), flags | OpenFlags::SQLITE_OPEN_URI)
            }
        }
        .map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(sqlite)?;
        conn.pragma_update(None, "query_only", true).map_err(sqlite)?;
        let db = AgentDatabase { conn, path: path.to_owned(), mode };
        db.check_tables()?;
        Ok(db)
    }

    /// A database opened for writing by [`crate::live`], read like any other.
    pub(crate) fn with_connection(conn: Connection, path: &Path) -> Result<AgentDatabase> {
        let db = AgentDatabase { conn, path: path.to_owned(), mode: OpenMode::Shared };
        db.check_tables()?;
        Ok(db)
    }

    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    fn sqlite(&self, source: rusqlite::Error) -> Error {
        Error::Sqlite { path: self.path.clone(), source }
    }

    fn check_tables(&self) -> Result<()> {
        let mut missing = Vec::new();
        for table in ["session_nodes", "session_windows", "transcript_events"] {
            let found: Option<i64> = self
                .conn
                .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| self.sqlite(e))?;
            if found.is_none() {
                missing.push(table);
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Error::NotAgentDatabase {
                path: self.path.clone(),
                reason: format!("no table {}", missing.join(", ")),
            })
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the file was opened.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// The schema version (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<i64> {
        self.conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(|e| self.sqlite(e))
    }

    /// The agent the database belongs to (`schema_meta`), if recorded.
    pub fn agent_id(&self) -> Result<Option<String>> {
        let has_meta: Option<i64> = self
            .conn
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.sqlite(e))?;
        if has_meta.is_none() {
            return Ok(None);
        }
        self.conn
            .query_row("SELECT agent_id FROM schema_meta WHERE meta_key = 'primary'", [], |r| r.get(0))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.sqlite(e))
    }

    /// Every `session_nodes` row, in the order they were stored (`rowid`),
    /// which for an imported store is the order of `sessions.json`.
    pub fn nodes(&self) -> Result<Vec<SessionNode>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT session_key, current_session_id, entry_json, entry_valid, updated_at \
                 FROM session_nodes ORDER BY rowid",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionNode {
                    key: r.get(0)?,
                    current_session_id: r.get(1)?,
                    entry_json: r.get(2)?,
                    entry_valid: r.get(3)?,
                    updated_at: r.get(4)?,
                })
            })
            .map_err(|e| self.sqlite(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sqlite(e))
    }

    /// The session entries keyed by session key, as `sessions.json` holds
    /// them, in stored order. Rows OpenClaw marked invalid (`entry_valid =
    /// -1`) are left out, as OpenClaw leaves them out; any other row whose
    /// entry is not a JSON object is an error naming its key.
    pub fn entries(&self) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        for node in self.nodes()? {
            if node.entry_valid == -1 {
                continue;
            }
            let bad =
                |reason: String| Error::BadEntry { path: self.path.clone(), key: node.key.clone(), reason };
            let value: Value =
                serde_json::from_str(&node.entry_json).map_err(|e| bad(format!("entry_json: {e}")))?;
            if !value.is_object() {
                return Err(bad("entry_json is not a JSON object".into()));
            }
            out.insert(node.key.clone(), value);
        }
        Ok(out)
    }

    /// Every `session_windows` row (transcript generations), oldest first.
    pub fn windows(&self) -> Result<Vec<SessionWindow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT session_id, session_key, previous_session_id, reason, created_at, updated_at \
                 FROM session_windows ORDER BY created_at, session_id",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionWindow {
                    session_id: r.get(0)?,
                    session_key: r.get(1)?,
                    previous_session_id: r.get(2)?,
                    reason: r.get(3)?,
                    created_at: r.get(4)?,
                    updated_at: r.get(5)?,
                })
            })
            .map_err(|e| self.sqlite(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sqlite(e))
    }

    /// The session ids that have transcript events, sorted.
    pub fn transcript_ids(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT session_id FROM transcript_events ORDER BY session_id")
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(|e| self.sqlite(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sqlite(e))
    }

    /// The transcript of `session_id` as the bytes of its JSONL file: each
    /// event's text and `\n`, in `seq` order, read inside one snapshot. A
    /// session with a window but no events reads as empty; an id with
    /// neither is [`Error::NoTranscript`].
    pub fn transcript(&self, session_id: &str) -> Result<TranscriptReader<'_>> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.sqlite(e))?;
        let known: Option<i64> = tx
            .query_row(
                "SELECT 1 WHERE EXISTS (SELECT 1 FROM transcript_events WHERE session_id = ?1) \
                 OR EXISTS (SELECT 1 FROM session_windows WHERE session_id = ?1)",
                [session_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        if known.is_none() {
            return Err(Error::NoTranscript { path: self.path.clone(), session_id: session_id.to_owned() });
        }
        Ok(TranscriptReader {
            tx,
            path: &self.path,
            session_id: session_id.to_owned(),
            last_seq: None,
            buf: Vec::new(),
            pos: 0,
            done: false,
        })
    }

    /// The whole transcript of `session_id` as JSONL bytes (see [`Self::transcript`]).
    pub fn transcript_bytes(&self, session_id: &str) -> Result<Vec<u8>> {
        Ok(self.transcript_snapshot(session_id)?.0)
    }

    /// The whole transcript of `session_id` as JSONL bytes and the highest
    /// `seq` among its rows (`None` when it has none), from one snapshot.
    pub fn transcript_snapshot(&self, session_id: &str) -> Result<(Vec<u8>, Option<i64>)> {
        let mut reader = self.transcript(session_id)?;
        let mut out = Vec::new();
        reader.read_to_end(&mut out).map_err(|e| reader.unwrap_error(e))?;
        Ok((out, reader.last_seq))
    }
}

/// Rows fetched per query while streaming a transcript.
const PAGE_ROWS: i64 = 256;

/// A transcript inside a database, read as the bytes of its JSONL file
/// ([`Read`] and [`BufRead`]), a page of rows at a time, all from one
/// snapshot. Errors reach the caller as `io::Error`s wrapping [`Error`].
pub struct TranscriptReader<'db> {
    tx: Transaction<'db>,
    path: &'db Path,
    session_id: String,
    last_seq: Option<i64>,
    buf: Vec<u8>,
    pos: usize,
    done: bool,
}

impl TranscriptReader<'_> {
    /// The database and session id, as a transcript name.
    pub fn name(&self) -> String {
        format!("{}#{}", self.path.display(), self.session_id)
    }

    /// The [`Error`] inside an `io::Error` this reader returned (any other
    /// `io::Error` is named after the database).
    pub fn unwrap_error(&self, e: io::Error) -> Error {
        match e.downcast::<Error>() {
            Ok(inner) => inner,
            Err(e) => Error::Io { path: self.path.to_owned(), source: e },
        }
    }

    fn bad(&self, seq: i64, reason: String) -> Error {
        Error::BadEvent { path: self.path.to_owned(), session_id: self.session_id.clone(), seq, reason }
    }

    fn fetch(&mut self) -> Result<()> {
        self.buf.clear();
        self.pos = 0;
        let sqlite = |source| Error::Sqlite { path: self.path.to_owned(), source };
        let mut stmt = self
            .tx
            .prepare_cached(
                "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events \
                 WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )
            .map_err(sqlite)?;
        type Row = (i64, Option<String>, Option<Vec<u8>>, Option<i64>);
        let rows: Vec<Row> = stmt
            .query_map(
                rusqlite::params![self.session_id, self.last_seq.unwrap_or(i64::MIN), PAGE_ROWS],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .map_err(sqlite)?
            .collect::<Result<_, _>>()
            .map_err(sqlite)?;
        drop(stmt);
        if (rows.len() as i64) < PAGE_ROWS {
            self.done = true;
        }
        for (seq, text, zstd, raw_bytes) in rows {
            let start = self.buf.len();
            match (text, zstd) {
                (Some(text), _) => self.buf.extend_from_slice(text.as_bytes()),
                (None, Some(blob)) => {
                    let mut decoder = ruzstd::decoding::StreamingDecoder::new(blob.as_slice())
                        .map_err(|e| self.bad(seq, format!("compressed event: {e}")))?;
                    decoder
                        .read_to_end(&mut self.buf)
                        .map_err(|e| self.bad(seq, format!("compressed event: {e}")))?;
                    let len = (self.buf.len() - start) as i64;
                    if raw_bytes.is_some_and(|n| n != len) {
                        return Err(
                            self.bad(seq, format!("decompressed to {len} bytes, the row says {raw_bytes:?}"))
                        );
                    }
                    if std::str::from_utf8(&self.buf[start..]).is_err() {
                        return Err(self.bad(seq, "compressed event is not UTF-8".into()));
                    }
                }
                (None, None) => return Err(self.bad(seq, "neither event_json nor event_zstd".into())),
            }
            if self.buf[start..].iter().any(|&b| b == b'\n' || b == b'\r') {
                return Err(self.bad(seq, "the event spans several lines".into()));
            }
            self.buf.push(b'\n');
            self.last_seq = Some(seq);
        }
        Ok(())
    }
}

impl Read for TranscriptReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for TranscriptReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.buf.len() && !self.done {
            self.fetch().map_err(io::Error::other)?;
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_read_as_syntax() {
        assert_eq!(
            file_uri(Path::new("/a b/x#y?.sqlite"), "immutable=1"),
            "file:/a%20b/x%23y%3F.sqlite?immutable=1"
        );
        assert_eq!(file_uri(Path::new("rel/100%.sqlite"), "q"), "file:rel/100%25.sqlite?q");
    }
}
