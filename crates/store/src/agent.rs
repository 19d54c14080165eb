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
    /// Every entry of the log is in the database as far as this process
    /// knows (false until the first write of this process, and again after
    /// a write whose database half failed): until then every key is checked.
    synced: AtomicBool,
}

impl Mirror {
    /// The database, opened (created for `agent` if missing) on first use.
    fn open<'m>(
        &self,
        slot: &'m mut Option<LiveDatabase>,
        agent: &str,
    ) -> Result<&'m mut LiveDatabase, StoreError> {
        if slot.is_none() {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            *slot = Some(LiveDatabase::open(&self.path, agent, now_ms)?);
        }
        Ok(slot.as_mut().expect("opened above"))
    }
}

/// What a store write does with one key's database row.
#[derive(Debug, PartialEq)]
enum RowPlan {
    /// Nothing: the row holds the entry already, or the key is not ours to write.
    Keep,
    /// Write the entry: the row is missing, is what the log held before
    /// this write, or is an older entry of the log (the database lagging
    /// after a failed write of ours).
    Write,
    /// Another writer changed the row: never overwritten; its entry is taken
    /// into the log.
    Theirs(Map<String, Value>),
}

/// Every value `key`'s entry took in the log `events`, oldest first.
fn past_entries(events: &[StoreEvent], key: &str) -> Vec<Value> {
    let mut store = Store::new();
    let mut out: Vec<Value> = Vec::new();
    for event in events {
        if apply(&mut store, event).is_err() {
            continue;
        }
        if let Some(v) = store.get(key) {
            if out.last() != Some(v) {
                out.push(v.clone());
            }
        }
    }
    out
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
    /// `session_windows` row for a new session id). One immediate
    /// transaction holds the database's write lock across the whole store
    /// write, so the log and the database do not drift apart:
    ///
    /// 1. the rows of the changed keys are read and checked first: a row is
    ///    written only when it is missing, holds what the log held before
    ///    this write, or holds an older entry of the log (the database
    ///    lagging after a failed write of ours — caught up, not a conflict);
    /// 2. a row another writer (OpenClaw) changed is never overwritten: the
    ///    write is refused before anything is appended —
    ///    `session <key> was changed by another writer` — and the other
    ///    writer's entry is taken into the log instead (an `imported`
    ///    event), so log and database agree on that key and the next write
    ///    builds on it;
    /// 3. the events are appended to the log, then the rows written and the
    ///    transaction committed. Should that last step fail, the log is
    ///    ahead; the next write finds the rows lagging and catches them up.
    ///
    /// The first write of a process (and the one after a failed one) checks
    /// every key so: missing or lagging rows are written, rows another
    /// writer changed are taken into the log. Keys the store removes are
    /// left in the database.
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
    ///
    /// With an agent database ([`AgentStore::with_database`]) the database's
    /// rows are checked before the log is touched, and written after it,
    /// under one database transaction.
    pub fn append(&mut self, events: &[StoreEvent]) -> Result<(), StoreError> {
        let store: &AgentStore = self.store;
        let next = self.fold_onto(events)?;
        let Some(mirror) = &store.database else {
            self.commit(events, next)?;
            self.publish(events);
            return Ok(());
        };
        let mut slot = mirror.db.lock().unwrap_or_else(|e| e.into_inner());
        let db = mirror.open(&mut slot, &store.agent.id)?;
        let all = !mirror.synced.load(Ordering::SeqCst);
        let tx = db.entries()?;
        let mut log_events: Option<Vec<StoreEvent>> = None;
        let (mut writes, mut adopted, mut refused) = (Vec::new(), Vec::new(), None);
        for (key, value) in &next {
            let Some(entry) = value.as_object() else { continue };
            let before = self.folded.store.get(key);
            let unchanged = before == Some(value);
            if unchanged && !all {
                continue;
            }
            let plan = match tx.entry(key)? {
                None => RowPlan::Write,
                Some(row) if row == *value => RowPlan::Keep,
                Some(row) if before == Some(&row) => RowPlan::Write,
                Some(row) => {
                    let history = match &log_events {
                        Some(events) => events,
                        None => log_events.insert(store.events()?),
                    };
                    if past_entries(history, key).contains(&row) {
                        tracing::info!(key, database = %mirror.path.display(), "the database lagged behind the log: caught up");
                        RowPlan::Write
                    } else {
                        RowPlan::Theirs(match row {
                            Value::Object(theirs) => theirs,
                            _ => Map::new(),
                        })
                    }
                }
            };
            match plan {
                RowPlan::Keep => {}
                RowPlan::Write => writes.push((key.clone(), entry.clone())),
                RowPlan::Theirs(theirs) => {
                    if !unchanged {
                        refused.get_or_insert_with(|| key.clone());
                    }
                    if !theirs.is_empty() {
                        adopted.push(StoreEvent::Imported { key: key.clone(), entry: theirs });
                    }
                }
            }
        }
        if let Some(key) = refused {
            // Nothing of this write is appended or written; the other
            // writer's entries are taken into the log, so log and database
            // agree again and the next write builds on them.
            drop(tx);
            if !adopted.is_empty() {
                let taken = self.fold_onto(&adopted)?;
                self.commit(&adopted, taken)?;
                self.publish(&adopted);
            }
            return Err(DbError::Conflict { path: mirror.path.clone(), key }.into());
        }
        let (appended, next) = if adopted.is_empty() {
            (events.to_vec(), next)
        } else {
            // Keys another writer changed that this write does not touch:
            // taken in first, then this write's events.
            adopted.extend_from_slice(events);
            let next = self.fold_onto(&adopted)?;
            (adopted, next)
        };
        self.commit(&appended, next)?;
        let written =
            writes.iter().try_for_each(|(key, entry)| tx.put(key, entry)).and_then(|()| tx.commit());
        // A failed database half leaves the log ahead: the next write checks
        // every key and catches the lagging rows up.
        mirror.synced.store(written.is_ok(), Ordering::SeqCst);
        self.publish(&appended);
        Ok(written?)
    }

    /// The projection with `events` folded onto it (refused, nothing
    /// changed, if one does not apply).
    fn fold_onto(&self, events: &[StoreEvent]) -> Result<Store, StoreError> {
        let mut next = self.folded.store.clone();
        for event in events {
            apply(&mut next, event)
                .map_err(|source| StoreError::Fold { path: self.store.log_path(), source })?;
        }
        Ok(next)
    }

    /// Appends `events` in one durable batch and makes `next` (their fold)
    /// the projection, `sessions.json` replaced with it.
    fn commit(&mut self, events: &[StoreEvent], next: Store) -> Result<(), StoreError> {
        self.log.append_batch(events)?;
        let end = self.log.end()?;
        let folded = &mut self.folded;
        folded.lines += events.len() as u64;
        folded.offset = end;
        folded.events += events.len();
        folded.store = next;
        self.write_projection()
    }

    fn publish(&self, events: &[StoreEvent]) {
        if let Some(bus) = &self.store.bus {
            for event in events {
                bus.emit(&lifecycle(&self.store.agent.id, event, self.store()));
            }
        }
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

#[cfg(test)]
mod database_tests {
    use serde_json::json;

    use super::*;

    const KEY: &str = "agent:main:main";
    const SID: &str = "11111111-1111-4111-8111-111111111111";

    fn setup() -> (tempfile::TempDir, PathBuf, AgentStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agents/main/agent/openclaw-agent.sqlite");
        let store = open(dir.path(), &db);
        (dir, db, store)
    }

    /// A store over the state folder `root` and the database `db` (a
    /// process of its own: nothing shared with another `AgentStore`).
    fn open(root: &Path, db: &Path) -> AgentStore {
        AgentStore::jsonl(root, "main").with_database(db.to_owned()).with_fsync(FsyncPolicy::Never)
    }

    fn label(at: i64, label: &str) -> StoreEvent {
        StoreEvent::Patched {
            key: KEY.to_owned(),
            at,
            patch: json!({ "label": label }).as_object().unwrap().clone(),
            preserve_activity: false,
        }
    }

    /// The row of `KEY`, read with SQL of this test.
    fn row(db: &Path) -> Value {
        let conn = rusqlite::Connection::open(db).unwrap();
        let text: String = conn
            .query_row("SELECT entry_json FROM session_nodes WHERE session_key = ?1", [KEY], |r| r.get(0))
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn sql(db: &Path, statement: &str) {
        rusqlite::Connection::open(db).unwrap().execute_batch(statement).unwrap();
    }

    fn ours(store: &AgentStore) -> Value {
        store.writer().unwrap().store()[KEY].clone()
    }

    fn created() -> StoreEvent {
        StoreEvent::Created {
            key: KEY.to_owned(),
            session_id: SID.to_owned(),
            at: 1_000,
            reason: "inbound".to_owned(),
            fields: Map::new(),
            provenance: None,
        }
    }

    #[test]
    fn a_database_lagging_after_a_failed_write_of_ours_is_caught_up_not_refused() {
        let (dir, db, store) = setup();
        store.writer().unwrap().append(&[created()]).unwrap();
        assert_eq!(row(&db), ours(&store));
        // Our next database write fails after the event is in the log.
        sql(&db, "CREATE TRIGGER refuse BEFORE UPDATE ON session_nodes BEGIN SELECT RAISE(ABORT, 'injected'); END;");
        let err = store.writer().unwrap().append(&[label(2_000, "a")]).unwrap_err().to_string();
        assert!(err.contains("injected"), "{err}");
        assert_eq!(ours(&store)["label"], "a", "the log has it");
        assert!(row(&db).get("label").is_none(), "the database lags");
        sql(&db, "DROP TRIGGER refuse;");
        // The next write finds an older entry of ours there: caught up.
        store.writer().unwrap().append(&[label(3_000, "b")]).unwrap();
        assert_eq!(row(&db), ours(&store));
        assert_eq!(row(&db)["label"], "b");
        // A restarted process after a failed write catches up too.
        sql(&db, "CREATE TRIGGER refuse BEFORE UPDATE ON session_nodes BEGIN SELECT RAISE(ABORT, 'injected'); END;");
        assert!(store.writer().unwrap().append(&[label(4_000, "c")]).is_err());
        sql(&db, "DROP TRIGGER refuse;");
        drop(store);
        let restarted = open(dir.path(), &db);
        restarted.writer().unwrap().append(&[label(5_000, "d")]).unwrap();
        assert_eq!(row(&db), ours(&restarted));
        assert_eq!(row(&db)["label"], "d");
    }

    #[test]
    fn a_refused_write_leaves_log_and_database_in_agreement() {
        let (_dir, db, store) = setup();
        store.writer().unwrap().append(&[created(), label(2_000, "ours")]).unwrap();
        let events = store.events().unwrap().len();
        // Another writer changes the entry.
        sql(&db, "UPDATE session_nodes SET entry_json = json_set(entry_json, '$.label', 'theirs', '$.updatedAt', 2500)");
        let theirs = row(&db);
        let err = store.writer().unwrap().append(&[label(3_000, "mine")]).unwrap_err().to_string();
        assert!(err.contains("session agent:main:main was changed by another writer"), "{err}");
        // Not overwritten; our event not in the log; their entry taken in.
        assert_eq!(row(&db), theirs);
        let log = store.events().unwrap();
        assert_eq!(log.len(), events + 1);
        assert!(
            matches!(&log[events], StoreEvent::Imported { key, entry } if key == KEY && Value::Object(entry.clone()) == theirs)
        );
        assert_eq!(ours(&store), theirs);
        // The next write builds on their entry.
        store.writer().unwrap().append(&[label(4_000, "again")]).unwrap();
        assert_eq!(row(&db), ours(&store));
        assert_eq!(row(&db)["updatedAt"], 4_000);
    }

    #[test]
    fn an_unreadable_row_is_an_error_naming_it_and_nothing_is_recorded() {
        let (_dir, db, store) = setup();
        store.writer().unwrap().append(&[created()]).unwrap();
        let events = store.events().unwrap().len();
        sql(&db, "UPDATE session_nodes SET entry_json = 'not json'");
        for at in [2_000, 3_000] {
            let err = store.writer().unwrap().append(&[label(at, "x")]).unwrap_err().to_string();
            assert!(err.contains("session agent:main:main: the row's entry_json is not JSON"), "{err}");
            assert!(!err.contains("another writer"), "{err}");
        }
        // Nothing appended, nothing taken in, the row left as it was.
        assert_eq!(store.events().unwrap().len(), events);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let text: String = conn
            .query_row("SELECT entry_json FROM session_nodes WHERE session_key = ?1", [KEY], |r| r.get(0))
            .unwrap();
        assert_eq!(text, "not json");
        // Repaired, writes go on.
        drop(conn);
        sql(&db, &format!("UPDATE session_nodes SET entry_json = '{}'", ours(&store)));
        store.writer().unwrap().append(&[label(4_000, "y")]).unwrap();
        assert_eq!(row(&db)["label"], "y");
    }
}
