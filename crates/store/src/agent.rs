//! One agent's store: its log (`events.jsonl`), the projection
//! (`sessions.json`), and the writer every store write goes through.
//!
//! The path of one store event: a decision in `sessionlog-sessions` returns
//! the event → [`StoreWriter::append`] folds it onto the projection (refused,
//! nothing written, if it does not apply) → appends it to the log under the
//! log's lock (fsync'd) → replaces `sessions.json` atomically with the new
//! fold → publishes the lifecycle event on the bus.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};
use sessionlog_event_log::{
    replace, AppendOptions, FsyncPolicy, LockOptions, LogKind, Mode, StoreAppender, StoreLog, StoreReader,
};
use sessionlog_events::json::write_js_pretty;
use sessionlog_sessions::bus::{lifecycle, Bus};
use sessionlog_sessions::maintenance::{is_message_line, TranscriptCheck};
use sessionlog_sessions::paths::{transcript_path, PathError, SESSIONS_JSON, STORE_LOG};
use sessionlog_sessions::store::{apply, Store, StoreEvent};
use sessionlog_sqlite_store::{AgentDatabase, Error as DbError, LiveDatabase, TranscriptName};

use crate::error::{io_at, StoreError};
use crate::exclusive::Exclusive;
use crate::layout::{sessions_dir, Agent, Layout};

/// How long a store write waits for another writer (OpenClaw waits 10 s for
/// `sessions.json`; a store log write is short, a queue of them is not).
pub const STORE_LOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// The fold of the log up to a byte offset, kept between writers.
#[derive(Debug, Clone)]
struct Folded {
    offset: u64,
    lines: u64,
    events: usize,
    store: Store,
}

impl Folded {
    fn empty() -> Folded {
        Folded { offset: 0, lines: 0, events: 0, store: Store::new() }
    }
}

/// OpenClaw's agent database the session entries are also written to.
struct Mirror {
    path: PathBuf,
    db: Mutex<Option<LiveDatabase>>,
    /// Every entry is in the database (false until the first write of this
    /// process, and again after a failed one).
    synced: AtomicBool,
}

impl Mirror {
    /// Upserts the entries `after` holds that differ from `before`, each
    /// only over the row `before` holds (another writer's change is refused,
    /// not overwritten). When not yet synced (the first write of this
    /// process, or after a failed one) the database may lag behind the log:
    /// an unchanged entry is added only where the database has no row, and
    /// a changed one also where its row is missing — a row another writer
    /// holds is never overwritten. One short transaction each; a refused
    /// key does not stop the others, the first refusal is the answer.
    fn sync(&self, agent: &str, before: &Store, after: &Store) -> Result<(), StoreError> {
        let mut slot = self.db.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            *slot = Some(LiveDatabase::open(&self.path, agent, now_ms)?);
        }
        let Some(db) = slot.as_mut() else { return Ok(()) };
        let all = !self.synced.swap(false, Ordering::SeqCst);
        let mut written = || -> Result<(), DbError> {
            let mut refused = None;
            for (key, value) in after {
                let Some(entry) = value.as_object() else { continue };
                let unchanged = before.get(key) == Some(value);
                if unchanged && !all {
                    continue;
                }
                let result = if unchanged {
                    // Catch-up: added where missing; any row there is left as it is.
                    match db.replace_entry(key, entry, None) {
                        Err(DbError::Conflict { .. }) => Ok(()),
                        other => other,
                    }
                } else {
                    // The row must still be what this store wrote last (or,
                    // catching up, be missing).
                    match db.replace_entry(key, entry, before.get(key).and_then(Value::as_object)) {
                        Err(DbError::Conflict { .. }) if all => db.replace_entry(key, entry, None),
                        other => other,
                    }
                };
                match result {
                    Err(e @ DbError::Conflict { .. }) => {
                        refused.get_or_insert(e);
                    }
                    other => other?,
                }
            }
            refused.map_or(Ok(()), Err)
        };
        let result = written();
        // A refused entry stays refused (no unconditional catch-up write
        // over the other writer's change); any other failure is caught up.
        if matches!(result, Ok(()) | Err(DbError::Conflict { .. })) {
            self.synced.store(true, Ordering::SeqCst);
        }
        Ok(result?)
    }
}

/// One agent's store in a state folder.
pub struct AgentStore {
    agent: Agent,
    bus: Option<Bus>,
    database: Option<Mirror>,
    append: AppendOptions,
    folded: Mutex<Option<Folded>>,
}

impl std::fmt::Debug for AgentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentStore")
            .field("agent", &self.agent)
            .field("bus", &self.bus.is_some())
            .field("database", &self.database())
            .finish()
    }
}

/// `JSON.stringify(store, null, 2)`, as OpenClaw writes `sessions.json`.
pub fn render(store: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    // A store holds JSON values only: writing them into memory cannot fail.
    let _ = write_js_pretty(&mut out, &Value::Object(store.clone()));
    out
}

/// The end of the complete lines of a log's bytes: a last line without its
/// `\n` counts only when it is whole (a torn fragment is left out; the next
/// writer moves it aside).
fn complete_end(path: &Path, bytes: &[u8]) -> usize {
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return bytes.len();
    }
    let start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if StoreLog::is_whole(&String::from_utf8_lossy(&bytes[start..])) {
        return bytes.len();
    }
    tracing::warn!(file = %path.display(), offset = start, "torn last line left out (the next write moves it aside)");
    start
}

fn read_events(path: &Path, bytes: &[u8], line: u64, offset: u64) -> Result<Vec<StoreEvent>, StoreError> {
    let reader = StoreReader::new(bytes, path, Mode::Strict).resume_at(line, offset);
    reader.map(|r| r.map(|r| r.entry).map_err(StoreError::from)).collect()
}

impl AgentStore {
    /// The store of a discovered agent.
    pub fn open(agent: Agent) -> AgentStore {
        let lock = LockOptions { timeout: STORE_LOCK_TIMEOUT, ..LockOptions::default() };
        AgentStore {
            agent,
            bus: None,
            database: None,
            append: AppendOptions { fsync: FsyncPolicy::PerBatch, lock, ..AppendOptions::default() },
            folded: Mutex::new(None),
        }
    }

    /// The store of `agent` in the state folder `state` (`agents/<id>/sessions`).
    pub fn jsonl(state: &Path, agent: &str) -> AgentStore {
        let id = sessionlog_sessions::keys::normalize_agent_id(agent);
        AgentStore::open(Agent { id, layout: Layout::Jsonl { sessions_dir: sessions_dir(state, agent) } })
    }

    /// Publishes every appended event on `bus` as a lifecycle event.
    pub fn with_bus(mut self, bus: Bus) -> AgentStore {
        self.bus = Some(bus);
        self
    }

    /// Also writes every session entry into OpenClaw's agent database at
    /// `database` (created if missing), as OpenClaw's writer does: each
    /// entry a store write changes is upserted into `session_nodes` (with a
    /// `session_windows` row for a new session id), one immediate
    /// transaction per entry, after the event is in the log, and only over
    /// the row this store wrote last — an entry another writer (OpenClaw)
    /// changed meanwhile is not overwritten: the write fails with
    /// `session <key> was changed by another writer`. The first write of a
    /// process (and the one after a failed write) upserts every entry
    /// unconditionally. Keys the store removes are left in the database.
    pub fn with_database(mut self, database: PathBuf) -> AgentStore {
        self.database = Some(Mirror { path: database, db: Mutex::new(None), synced: AtomicBool::new(false) });
        self
    }

    /// The agent database session entries are written to, if any.
    pub fn database(&self) -> Option<&Path> {
        self.database.as_ref().map(|m| m.path.as_path())
    }

    /// When appends (and the projection) are synced: every batch by default;
    /// [`FsyncPolicy::Never`] for scratch stores and tests.
    pub fn with_fsync(mut self, fsync: FsyncPolicy) -> AgentStore {
        self.append.fsync = fsync;
        self
    }

    /// How long writers wait for another writer's lock.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> AgentStore {
        self.append.lock.timeout = timeout;
        self
    }

    /// The agent id.
    pub fn id(&self) -> &str {
        &self.agent.id
    }

    /// Where the agent's sessions live.
    pub fn layout(&self) -> &Layout {
        &self.agent.layout
    }

    /// The folder of the store log and its projection.
    pub fn dir(&self) -> &Path {
        self.agent.layout.dir()
    }

    /// The store log, `events.jsonl`.
    pub fn log_path(&self) -> PathBuf {
        self.dir().join(STORE_LOG)
    }

    /// The projection, `sessions.json`.
    pub fn projection_path(&self) -> PathBuf {
        self.dir().join(SESSIONS_JSON)
    }

    /// Whether the store has a log yet.
    pub fn has_log(&self) -> bool {
        self.log_path().is_file()
    }

    pub(crate) fn require_log(&self) -> Result<PathBuf, StoreError> {
        if self.is_read_only() {
            return Err(self.read_only());
        }
        let log = self.log_path();
        if log.is_file() {
            Ok(log)
        } else {
            Err(StoreError::NoLog { path: log })
        }
    }

    /// Every event of the log, in order (strict: a bad line is an error
    /// naming file, line and reason; a torn last line is left out).
    pub fn events(&self) -> Result<Vec<StoreEvent>, StoreError> {
        let log = self.require_log()?;
        let bytes = fs::read(&log).map_err(io_at(&log))?;
        let end = complete_end(&log, &bytes);
        read_events(&log, &bytes[..end], 0, 0)
    }

    /// The projection after the first `at` events (all of them by default).
    pub fn project(&self, at: Option<usize>) -> Result<Store, StoreError> {
        let mut events = self.events()?;
        if let Some(n) = at {
            events.truncate(n);
        }
        let log = self.log_path();
        sessionlog_sessions::store::fold(&events).map_err(|source| StoreError::Fold { path: log, source })
    }

    /// The session index the agent's files hold as OpenClaw wrote it
    /// (`sessions.json`; empty when there is none).
    /// For OpenClaw's SQLite store: `session_nodes.entry_json` of every key,
    /// in stored order, the database opened read-only.
    pub fn read_index(&self) -> Result<Store, StoreError> {
        let sessions_dir = match &self.agent.layout {
            Layout::Jsonl { sessions_dir } => sessions_dir,
            Layout::Sqlite { database } => return Ok(AgentDatabase::open(database)?.entries()?),
        };
        let path = sessions_dir.join(SESSIONS_JSON);
        if !path.exists() {
            return Ok(Map::new());
        }
        let text = fs::read_to_string(&path).map_err(io_at(&path))?;
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(StoreError::BadIndex {
                path,
                at: None,
                reason: format!("expected a JSON object, found {}", kind(&other)),
            }),
            Err(e) => {
                let reason = e.to_string();
                let reason = reason.rfind(" at line ").map_or(reason.clone(), |i| reason[..i].to_owned());
                Err(StoreError::BadIndex { path, at: Some((e.line(), e.column())), reason })
            }
        }
    }

    /// Whether the agent's sessions are in OpenClaw's SQLite store, which
    /// sessionlog reads but never writes.
    pub fn is_read_only(&self) -> bool {
        matches!(self.agent.layout, Layout::Sqlite { .. })
    }

    fn read_only(&self) -> StoreError {
        StoreError::InDatabase {
            name: self.agent.layout.dir().join(sessionlog_sqlite_store::DATABASE_FILE).display().to_string(),
            what: "the session store",
            hint: "`sessionlog import` makes an event store sessionlog can write",
        }
    }

    /// [`AgentStore::transcript_path`] for writing `key`'s session: refused
    /// when the transcript, or a folder between it and the sessions folder,
    /// is a symbolic link (a writer never writes through one, wherever it points).
    pub fn transcript_path_to_write(
        &self,
        key: &str,
        entry: &Map<String, Value>,
    ) -> Result<PathBuf, StoreError> {
        let refuse = |reason: String| StoreError::Session { key: key.to_owned(), reason };
        let path = self
            .transcript_path(entry)
            .ok_or_else(|| refuse("no transcript path for its sessionId".to_owned()))?;
        if let Layout::Jsonl { sessions_dir } = &self.agent.layout {
            let mut at = sessions_dir.clone();
            for part in path.strip_prefix(sessions_dir).unwrap_or(&path).components() {
                at.push(part);
                if at.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(refuse(format!("{} is a symbolic link; not written through", at.display())));
                }
            }
        }
        Ok(path)
    }

    /// Where the transcript of a stored entry is: its `sessionFile` when it
    /// stays inside the sessions folder, else `<sessionId>.jsonl` (a stored
    /// path outside the folder falls back to the default name, spec §4.2);
    /// in OpenClaw's SQLite store, the name `<database>#<sessionId>`.
    pub fn transcript_path(&self, entry: &Map<String, Value>) -> Option<PathBuf> {
        let session_id = entry.get("sessionId").and_then(Value::as_str)?;
        let sessions_dir = match &self.agent.layout {
            Layout::Jsonl { sessions_dir } => sessions_dir,
            Layout::Sqlite { database } => {
                let name = TranscriptName { database: database.clone(), session_id: session_id.to_owned() };
                return sessionlog_sqlite_store::is_session_id(session_id)
                    .then(|| PathBuf::from(name.to_string()));
            }
        };
        let file = entry.get("sessionFile").and_then(Value::as_str);
        match transcript_path(sessions_dir, session_id, file) {
            Ok(p) => Some(p),
            Err(PathError::Escapes(_)) => Some(sessions_dir.join(format!("{session_id}.jsonl"))),
            Err(e) => {
                tracing::warn!(agent = %self.agent.id, "{e}");
                None
            }
        }
    }

    /// Whether the transcript of a stored entry holds a message, as
    /// OpenClaw's `sessions cleanup --fix-missing` asks it: a transcript that
    /// does not exist (no file; in the SQLite store, no events and no window)
    /// holds none. A transcript that exists but cannot be read is an error.
    pub fn transcript_check(&self, entry: &Value) -> Result<TranscriptCheck, StoreError> {
        let Some(session_id) = entry.get("sessionId").and_then(Value::as_str) else {
            return Ok(TranscriptCheck::NoMessages);
        };
        let bytes = match &self.agent.layout {
            Layout::Sqlite { database } => {
                match AgentDatabase::open(database)?.transcript_bytes(session_id) {
                    Ok(bytes) => bytes,
                    Err(DbError::NoTranscript { .. }) => return Ok(TranscriptCheck::NoMessages),
                    Err(e) => return Err(e.into()),
                }
            }
            Layout::Jsonl { .. } => {
                let Some(path) = entry.as_object().and_then(|e| self.transcript_path(e)) else {
                    return Ok(TranscriptCheck::NoMessages);
                };
                match fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Ok(TranscriptCheck::NoMessages)
                    }
                    Err(e) => return Err(io_at(&path)(e)),
                }
            }
        };
        Ok(if bytes.split(|b| *b == b'\n').any(is_message_line) {
            TranscriptCheck::HasMessages
        } else {
            TranscriptCheck::NoMessages
        })
    }

    /// Rewrites `sessions.json` from the log, under the log's lock; returns
    /// the number of sessions.
    pub fn rebuild(&self) -> Result<usize, StoreError> {
        self.require_log()?;
        let writer = self.writer()?;
        writer.write_projection()?;
        Ok(writer.store().len())
    }

    /// The writer: takes the log's lock (another process's writer is waited
    /// for, then refused with `session file locked`), repairs a torn tail,
    /// and folds the log (only what was appended since this store last saw it).
    pub fn writer(&self) -> Result<StoreWriter<'_>, StoreError> {
        if self.is_read_only() {
            return Err(self.read_only());
        }
        let path = self.log_path();
        // The folder first, so the claim names the file by its canonical path.
        fs::create_dir_all(self.dir()).map_err(io_at(self.dir()))?;
        let claim = Exclusive::acquire(&path, self.append.lock.timeout)?;
        let log = StoreAppender::open(&path, self.append)?;
        let end = log.end()?;
        let cached = self.folded.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut folded = match cached {
            Some(f) if f.offset <= end => f,
            _ => Folded::empty(),
        };
        if folded.offset < end {
            let mut file = File::open(&path).map_err(io_at(&path))?;
            file.seek(SeekFrom::Start(folded.offset)).map_err(io_at(&path))?;
            let mut bytes = Vec::new();
            file.take(end - folded.offset).read_to_end(&mut bytes).map_err(io_at(&path))?;
            for event in read_events(&path, &bytes, folded.lines, folded.offset)? {
                apply(&mut folded.store, &event)
                    .map_err(|source| StoreError::Fold { path: path.clone(), source })?;
                folded.events += 1;
            }
            folded.lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
            folded.offset = end;
        }
        Ok(StoreWriter { store: self, log, folded, _claim: claim })
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A store open for writing: holds the log's lock and the fold of the log.
pub struct StoreWriter<'s> {
    store: &'s AgentStore,
    log: StoreAppender,
    folded: Folded,
    _claim: Exclusive,
}

impl std::fmt::Debug for StoreWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter")
            .field("agent", &self.store.agent.id)
            .field("events", &self.events())
            .finish()
    }
}

impl StoreWriter<'_> {
    /// The projection as of the log.
    pub fn store(&self) -> &Store {
        &self.folded.store
    }

    /// The number of events in the log.
    pub fn events(&self) -> usize {
        self.folded.events
    }

    /// What opening did to a torn tail of the log, if anything.
    pub fn tail_repair(&self) -> Option<&sessionlog_event_log::TailRepair> {
        self.log.tail_repair()
    }

    /// Appends `events` and re-projects: they are folded first (if one does
    /// not apply, nothing is written), appended in one durable batch, then
    /// `sessions.json` is replaced with the fold and each event is published
    /// on the bus.
    pub fn append(&mut self, events: &[StoreEvent]) -> Result<(), StoreError> {
        let path = self.store.log_path();
        let mut next = self.folded.store.clone();
        for event in events {
            apply(&mut next, event).map_err(|source| StoreError::Fold { path: path.clone(), source })?;
        }
        self.log.append_batch(events)?;
        let end = self.log.end()?;
        let folded = &mut self.folded;
        folded.lines += events.len() as u64;
        folded.offset = end;
        folded.events += events.len();
        let before = std::mem::replace(&mut folded.store, next);
        self.write_projection()?;
        if let Some(mirror) = &self.store.database {
            mirror.sync(&self.store.agent.id, &before, self.store())?;
        }
        if let Some(bus) = &self.store.bus {
            for event in events {
                bus.emit(&lifecycle(&self.store.agent.id, event, self.store()));
            }
        }
        Ok(())
    }

    /// Replaces `sessions.json` with the fold, atomically.
    pub fn write_projection(&self) -> Result<(), StoreError> {
        let target = self.store.projection_path();
        let durable = self.store.append.fsync != FsyncPolicy::Never;
        replace(&target, &render(self.store()), durable).map_err(io_at(&target))
    }
}

impl Drop for StoreWriter<'_> {
    fn drop(&mut self) {
        // The next writer of this store only reads what is appended after this.
        let folded = std::mem::replace(&mut self.folded, Folded::empty());
        *self.store.folded.lock().unwrap_or_else(|e| e.into_inner()) = Some(folded);
    }
}
