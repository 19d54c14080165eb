//! Writing an agent database while it is in use: the live loop's storage.
//!
//! [`LiveDatabase`] writes session entries and transcript events into an
//! `openclaw-agent.sqlite` as OpenClaw's own writer does, so sessionlog and
//! an OpenClaw gateway can use one database:
//!
//! * the connection: WAL journal, `synchronous = NORMAL`, foreign keys on,
//!   a busy timeout of [`BUSY_TIMEOUT_MS`] (a writer waits for the other's
//!   transaction instead of failing);
//! * every write is one short `BEGIN IMMEDIATE` transaction: the write lock
//!   is taken before anything is read, so no two writers compute the same
//!   `seq`, and a failed statement rolls the whole write back — a batch of
//!   events (one turn's step) is in the database whole or not at all;
//! * transcript events are numbered inside that transaction,
//!   `seq = MAX(seq) + 1` of the session (0 for its first event), as
//!   OpenClaw's `appendSqliteSessionTranscriptEvent` numbers them; each
//!   event's `transcript_event_identities` row is inserted or brought up to
//!   date with it;
//! * a session entry is upserted into `session_nodes` (entry text as given,
//!   the query columns OpenClaw projects from it, marked valid) and its
//!   session id's `session_windows` row inserted or brought up to date, as
//!   OpenClaw 2026.9's entry writer leaves it: `reason` NULL,
//!   `previous_session_id` from the entry's `previousSessionId`. A new
//!   session id for the key (`/new`, `/reset`, a daily or idle reset) is a
//!   new window, a new transcript generation; the old window and its events
//!   stay. A compaction appends its entry to the same transcript, so its
//!   window stays.
//!
//! Two writers of one session (two sessionlog processes, or sessionlog and
//! OpenClaw), as OpenClaw treats them: transcript appends are serialised —
//! each batch gets the next `seq`s after whatever the other committed, never
//! interleaved; an entry write that says what it expects the row to hold
//! ([`LiveDatabase::replace_entry`]) is refused when another writer changed
//! it meanwhile, as OpenClaw refuses a lifecycle upsert over a changed entry.
//! [`LiveDatabase::append`] reports the other writer's events that landed
//! since the caller's last append, so an in-memory transcript can take
//! them in. A new transcript is begun with [`LiveDatabase::start`], which
//! writes the header only when the transcript is still empty inside its
//! transaction, so two writers starting it at once leave one header.
//!
//! A database that does not exist is created first (the whole schema, as
//! [`crate::create`] writes it, linked into place atomically); one with
//! another schema version is refused, never migrated.

use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Map, Value};

use crate::read::AgentDatabase;
use crate::write::{
    event_row, insert_event_row, insert_node, insert_window, integer, node_row, window_row, EventRow,
};
use crate::{Error, Result, BUSY_TIMEOUT_MS, SCHEMA_VERSION};

/// An agent database open for writing.
#[derive(Debug)]
pub struct LiveDatabase {
    db: AgentDatabase,
}

/// What [`LiveDatabase::append`] wrote and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The `seq` of the first event written (the rest follow it).
    pub first_seq: i64,
    /// The `seq` the next event will get.
    pub next_seq: i64,
    /// Events another writer committed between the caller's expected `seq`
    /// and ours, as (`seq`, event text), in order.
    pub foreign: Vec<(i64, String)>,
}

impl LiveDatabase {
    /// Opens the database at `path` for writing, creating it (for
    /// `agent_id`, dated `now_ms`) when there is no file.
    pub fn open(path: &Path, agent_id: &str, now_ms: i64) -> Result<LiveDatabase> {
        if !path.exists() {
            let empty = Map::new();
            let export = crate::Export { agent_id, entries: &empty, transcripts: &[], now_ms };
            match crate::create(path, &export) {
                Ok(_) | Err(Error::Exists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let sqlite = |source| Error::Sqlite { path: path.to_owned(), source };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(sqlite)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(sqlite)?;
        if version != SCHEMA_VERSION {
            return Err(Error::NotAgentDatabase {
                path: path.to_owned(),
                reason: format!("schema version {version}; sessionlog writes version {SCHEMA_VERSION} only"),
            });
        }
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(sqlite)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::NotAgentDatabase {
                path: path.to_owned(),
                reason: format!("journal mode {mode}, not WAL"),
            });
        }
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sqlite)?;
        conn.pragma_update(None, "foreign_keys", true).map_err(sqlite)?;
        Ok(LiveDatabase { db: AgentDatabase::with_connection(conn, path)? })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// The database for reading, through this connection.
    pub fn reader(&self) -> &AgentDatabase {
        &self.db
    }

    fn bad(&self, what: String, reason: String) -> Error {
        Error::BadInput { path: self.db.path().to_owned(), what, reason }
    }

    /// Writes the entry of `key` (a JSON object with a string `sessionId`
    /// and an integer `updatedAt`) in one immediate transaction, with the
    /// window of its session id when that is new (see the module docs),
    /// whatever the row held.
    pub fn put_entry(&mut self, key: &str, entry: &Map<String, Value>) -> Result<()> {
        self.write_entry(key, entry, None)
    }

    /// [`Self::put_entry`] when the row still holds `expected` (`None`: no
    /// row), compared as JSON values inside the transaction; otherwise
    /// nothing is written and the answer is [`Error::Conflict`] — another
    /// writer changed the entry since the caller read it (OpenClaw refuses a
    /// lifecycle upsert over a changed entry the same way).
    pub fn replace_entry(
        &mut self,
        key: &str,
        entry: &Map<String, Value>,
        expected: Option<&Map<String, Value>>,
    ) -> Result<()> {
        self.write_entry(key, entry, Some(expected))
    }

    fn write_entry(
        &mut self,
        key: &str,
        entry: &Map<String, Value>,
        expected: Option<Option<&Map<String, Value>>>,
    ) -> Result<()> {
        let tx = self.entries()?;
        if let Some(expected) = expected {
            let same = match (tx.entry(key)?, expected) {
                (None, None) => true,
                (Some(Value::Object(current)), Some(expected)) => current == *expected,
                _ => false,
            };
            if !same {
                return Err(Error::Conflict { path: tx.path.clone(), key: key.to_owned() });
            }
        }
        tx.put(key, entry)?;
        tx.commit()
    }

    /// Begins one immediate transaction over the session entries: the
    /// write lock is taken first, so what [`EntryTransaction::entry`] reads
    /// stays true until [`EntryTransaction::commit`]; dropped uncommitted,
    /// it writes nothing. A caller can do other work (append to its own
    /// log) between reading the rows and committing.
    pub fn entries(&mut self) -> Result<EntryTransaction<'_>> {
        let path = self.db.path().to_owned();
        let tx = self
            .db
            .connection()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| Error::Sqlite { path: path.clone(), source })?;
        Ok(EntryTransaction { tx, path })
    }

    /// Appends `lines` (transcript entries, each one JSON object on one
    /// line) to the transcript of `session_id` in one immediate transaction:
    /// all of them or, on any failure, none. `expected_next` is the `seq`
    /// the caller expects the first to get (its last append's
    /// [`Appended::next_seq`]); events another writer committed from there
    /// on come back in [`Appended::foreign`]. The session must have a window
    /// (its entry is written first); lines are checked before anything is
    /// written. `now_ms` dates events without a readable `timestamp`.
    pub fn append(
        &mut self,
        session_id: &str,
        lines: &[&str],
        expected_next: Option<i64>,
        now_ms: i64,
    ) -> Result<Appended> {
        let appended = self.append_rows(session_id, lines, expected_next, now_ms, false)?;
        // Only a start is ever skipped.
        appended.ok_or_else(|| self.bad(format!("transcript {session_id}"), "nothing appended".into()))
    }

    /// Starts the transcript of `session_id` with `header` (its first line)
    /// when it has no events yet, in one immediate transaction: `Ok(true)`
    /// when the header was written, `Ok(false)` when the transcript already
    /// had events — another writer started it first, and nothing is written.
    /// Two writers starting one new transcript at once leave exactly one
    /// header.
    pub fn start(&mut self, session_id: &str, header: &str, now_ms: i64) -> Result<bool> {
        Ok(self.append_rows(session_id, &[header], Some(0), now_ms, true)?.is_some())
    }

    fn append_rows(
        &mut self,
        session_id: &str,
        lines: &[&str],
        expected_next: Option<i64>,
        now_ms: i64,
        only_if_empty: bool,
    ) -> Result<Option<Appended>> {
        let rows = lines
            .iter()
            .enumerate()
            .map(|(n, line)| {
                event_row(line, now_ms).map_err(|r| self.bad(format!("transcript {session_id} event {n}"), r))
            })
            .collect::<Result<Vec<EventRow<'_>>>>()?;
        let path = self.db.path().to_owned();
        let sqlite = |source| Error::Sqlite { path: path.clone(), source };
        let tx =
            self.db.connection().transaction_with_behavior(TransactionBehavior::Immediate).map_err(sqlite)?;
        let has_window = tx
            .query_row("SELECT 1 FROM session_windows WHERE session_id = ?1", [session_id], |_| Ok(()))
            .optional()
            .map_err(sqlite)?
            .is_some();
        if !has_window {
            return Err(Error::BadInput {
                path: path.clone(),
                what: format!("transcript {session_id}"),
                reason: "no session window for this session id (write its entry first)".into(),
            });
        }
        let first_seq: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM transcript_events WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .map_err(sqlite)?;
        if only_if_empty && first_seq > 0 {
            return Ok(None); // the transaction rolls back: nothing was written
        }
        let mut foreign = Vec::new();
        if let Some(from) = expected_next.filter(|&e| e < first_seq) {
            let mut stmt = tx
                .prepare(
                    "SELECT seq, event_json FROM transcript_events \
                     WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq",
                )
                .map_err(sqlite)?;
            let found = stmt
                .query_map(params![session_id, from], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
                })
                .map_err(sqlite)?;
            for row in found {
                let (seq, text) = row.map_err(sqlite)?;
                let text = text.ok_or_else(|| Error::BadEvent {
                    path: path.clone(),
                    session_id: session_id.to_owned(),
                    seq,
                    reason: "another writer's event is stored compressed".into(),
                })?;
                foreign.push((seq, text));
            }
        }
        for (i, row) in rows.iter().enumerate() {
            insert_live_event(&tx, session_id, first_seq + i as i64, row).map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        Ok(Some(Appended { first_seq, next_seq: first_seq + rows.len() as i64, foreign }))
    }
}

/// Session entry reads and writes inside one immediate transaction
/// ([`LiveDatabase::entries`]).
pub struct EntryTransaction<'a> {
    tx: rusqlite::Transaction<'a>,
    path: std::path::PathBuf,
}

impl std::fmt::Debug for EntryTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryTransaction").field("path", &self.path).finish()
    }
}

impl EntryTransaction<'_> {
    fn sqlite(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        |source| Error::Sqlite { path: self.path.clone(), source }
    }

    /// The entry the row of `key` holds (`None` without a row); a row whose
    /// `entry_json` is not a JSON object is an error naming the key, so it
    /// is neither taken for another writer's entry nor written over.
    pub fn entry(&self, key: &str) -> Result<Option<Value>> {
        let row: Option<String> = self
            .tx
            .query_row("SELECT entry_json FROM session_nodes WHERE session_key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(self.sqlite())?;
        let Some(text) = row else { return Ok(None) };
        let bad = |reason: String| Error::BadInput {
            path: self.path.clone(),
            what: format!("session {key}"),
            reason: format!("{reason}; repair or delete the row before writing this session"),
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(entry @ Value::Object(_)) => Ok(Some(entry)),
            Ok(_) => Err(bad("the row's entry_json is not a JSON object".into())),
            Err(e) => Err(bad(format!("the row's entry_json is not JSON ({e})"))),
        }
    }

    /// Writes the entry of `key` (a JSON object with a string `sessionId`
    /// and an integer `updatedAt`) with the window of its session id when
    /// that is new, whatever the row held (see the module docs).
    pub fn put(&self, key: &str, entry: &Map<String, Value>) -> Result<()> {
        let bad = |reason: String| Error::BadInput { path: self.path.clone(), what: key.to_owned(), reason };
        let session_id = entry
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("entry has no string sessionId".into()))?
            .to_owned();
        let updated_at =
            integer(entry.get("updatedAt")).ok_or_else(|| bad("entry has no integer updatedAt".into()))?;
        let entry_json = sessionlog_events::json::to_js_string(&Value::Object(entry.clone()))
            .map_err(|e| bad(e.to_string()))?;
        let node = node_row(entry, session_id.clone(), updated_at);
        let window = window_row(entry, key, updated_at);
        insert_node(&self.tx, key, &entry_json, &node).map_err(self.sqlite())?;
        insert_window(&self.tx, key, &session_id, updated_at, &window, None).map_err(self.sqlite())
    }

    /// Commits what was put.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        self.tx.commit().map_err(|source| Error::Sqlite { path, source })
    }
}

/// One event and its identity row, the identity inserted or brought up to
/// date (OpenClaw's append rule).
fn insert_live_event(
    tx: &rusqlite::Transaction<'_>,
    session_id: &str,
    seq: i64,
    row: &EventRow<'_>,
) -> rusqlite::Result<()> {
    insert_event_row(tx, session_id, seq, row)?;
    if let Some(id) = row.id.as_deref() {
        tx.execute(
            "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, parent_id, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id, event_id) DO UPDATE SET \
             seq = excluded.seq, event_type = excluded.event_type, parent_id = excluded.parent_id, \
             created_at = excluded.created_at",
            params![session_id, id, seq, row.kind, row.parent_id, row.created_at],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(session_id: &str, updated_at: i64) -> Map<String, Value> {
        json!({"sessionId": session_id, "updatedAt": updated_at}).as_object().unwrap().clone()
    }

    fn line(id: &str, parent: Option<&str>, text: &str) -> String {
        json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-12-01T00:00:00.000Z",
               "message": {"role": "user", "content": text}})
        .to_string()
    }

    /// (seq, event_json) of a session, read with a connection of its own.
    fn rows(path: &Path, session_id: &str) -> Vec<(i64, String)> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, event_json FROM transcript_events WHERE session_id = ?1 ORDER BY seq")
            .unwrap();
        let out = stmt.query_map([session_id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        out.map(Result::unwrap).collect()
    }

    #[test]
    fn entries_windows_and_events_land_as_openclaw_numbers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agents/main/agent/openclaw-agent.sqlite");
        let mut db = LiveDatabase::open(&path, "main", 1_000).unwrap();
        assert!(db.append("s1", &[&line("a", None, "x")], None, 0).is_err(), "no window yet");
        db.put_entry("agent:main:main", &entry("s1", 10)).unwrap();
        let a = line("a", None, "one");
        let b = line("b", Some("a"), "two");
        let c = line("c", Some("b"), "three");
        let first = db.append("s1", &[&a, &b], None, 0).unwrap();
        assert_eq!((first.first_seq, first.next_seq, first.foreign.len()), (0, 2, 0));
        let second = db.append("s1", &[&c], Some(2), 0).unwrap();
        assert_eq!((second.first_seq, second.next_seq), (2, 3));
        assert_eq!(rows(&path, "s1"), vec![(0, a.clone()), (1, b.clone()), (2, c.clone())]);
        // A new transcript generation for the key: a window of its own, as
        // OpenClaw's entry writer leaves it (no reason; the predecessor only
        // when the entry names one).
        db.put_entry(
            "agent:main:main",
            json!({"sessionId": "s2", "updatedAt": 20, "previousSessionId": "s1"}).as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(db.reader().windows().unwrap()[1].previous_session_id.as_deref(), Some("s1"));
        db.put_entry(
            "agent:main:main",
            &json!({"sessionId": "s2", "updatedAt": 30, "label": "x"}).as_object().unwrap().clone(),
        )
        .unwrap();
        let windows = db.reader().windows().unwrap();
        let got: Vec<_> = windows
            .iter()
            .map(|w| {
                (w.session_id.as_str(), w.reason.as_deref(), w.previous_session_id.as_deref(), w.updated_at)
            })
            .collect();
        assert_eq!(got, [("s1", None, None, 10), ("s2", None, None, 30)]);
        let nodes = db.reader().nodes().unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            (nodes[0].current_session_id.as_str(), nodes[0].entry_valid, nodes[0].updated_at),
            ("s2", 1, 30)
        );
        assert_eq!(nodes[0].entry_json, r#"{"sessionId":"s2","updatedAt":30,"label":"x"}"#);
        // The old generation's events stay.
        assert_eq!(rows(&path, "s1").len(), 3);
        // Reopening continues the numbering.
        drop(db);
        let mut db = LiveDatabase::open(&path, "main", 2_000).unwrap();
        assert_eq!(db.append("s1", &[&line("d", Some("c"), "four")], Some(3), 0).unwrap().first_seq, 3);
    }

    #[test]
    fn an_entry_another_writer_changed_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let mut ours = LiveDatabase::open(&path, "main", 1_000).unwrap();
        let first = entry("s1", 10);
        ours.replace_entry("k", &first, None).unwrap();
        assert!(
            matches!(ours.replace_entry("k", &first, None), Err(Error::Conflict { .. })),
            "the row exists"
        );
        // Another writer (OpenClaw, say) changes the entry.
        let theirs =
            json!({"sessionId": "s1", "updatedAt": 15, "label": "theirs"}).as_object().unwrap().clone();
        LiveDatabase::open(&path, "main", 1_000).unwrap().put_entry("k", &theirs).unwrap();
        let err = ours.replace_entry("k", &entry("s1", 20), Some(&first)).unwrap_err();
        assert!(err.to_string().contains("session k was changed by another writer"), "{err}");
        let nodes = ours.reader().nodes().unwrap();
        assert_eq!((nodes[0].updated_at, nodes[0].entry_json.contains("theirs")), (15, true));
        // Expecting what is there now succeeds.
        ours.replace_entry("k", &entry("s1", 20), Some(&theirs)).unwrap();
        assert_eq!(ours.reader().nodes().unwrap()[0].updated_at, 20);
    }

    #[test]
    fn a_failing_event_leaves_none_of_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let mut db = LiveDatabase::open(&path, "main", 1_000).unwrap();
        db.put_entry("k", &entry("s1", 10)).unwrap();
        // The database refuses the second event of the batch (a crash or a
        // full disk between two inserts looks the same to the rows).
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON transcript_events WHEN NEW.event_json LIKE '%boom%' \
                 BEGIN SELECT RAISE(ABORT, 'injected'); END;",
            )
            .unwrap();
        let ok = line("a", None, "fine");
        let boom = line("b", Some("a"), "boom");
        assert!(db.append("s1", &[&ok, &boom], None, 0).is_err());
        assert_eq!(rows(&path, "s1"), vec![], "a half-written batch");
        assert_eq!(db.append("s1", &[&ok], None, 0).unwrap().first_seq, 0);
        // Lines that are not JSON objects are refused before anything is written.
        assert!(matches!(db.append("s1", &["[1]"], None, 0), Err(Error::BadInput { .. })));
        assert_eq!(rows(&path, "s1").len(), 1);
    }

    #[test]
    fn two_writers_of_one_session_are_serialised_batch_by_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        LiveDatabase::open(&path, "main", 1_000).unwrap().put_entry("k", &entry("s1", 10)).unwrap();
        let batches = 40;
        let writers: Vec<_> = ["p", "q"]
            .into_iter()
            .map(|who| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut db = LiveDatabase::open(&path, "main", 1_000).unwrap();
                    for n in 0..batches {
                        let lines: Vec<String> =
                            (0..3).map(|k| line(&format!("{who}{n}-{k}"), None, who)).collect();
                        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
                        db.append("s1", &refs, None, 0).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let got = rows(&path, "s1");
        assert_eq!(got.len(), 2 * batches * 3);
        // Dense seqs from 0, and each batch's three events next to each other.
        for (i, chunk) in got.chunks(3).enumerate() {
            let ids: Vec<String> = chunk
                .iter()
                .map(|(_, text)| {
                    serde_json::from_str::<Value>(text).unwrap()["id"].as_str().unwrap().to_owned()
                })
                .collect();
            let stem = ids[0].trim_end_matches("-0");
            assert_eq!(ids, [0, 1, 2].map(|k| format!("{stem}-{k}")), "batch {i} interleaved");
            for (k, (seq, _)) in chunk.iter().enumerate() {
                assert_eq!(*seq, (i * 3 + k) as i64);
            }
        }
    }

    #[test]
    fn another_writers_events_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let mut ours = LiveDatabase::open(&path, "main", 1_000).unwrap();
        let mut theirs = LiveDatabase::open(&path, "main", 1_000).unwrap();
        ours.put_entry("k", &entry("s1", 10)).unwrap();
        let first = ours.append("s1", &[&line("a", None, "ours")], None, 0).unwrap();
        let other = line("z", Some("a"), "theirs");
        theirs.append("s1", &[&other], None, 0).unwrap();
        let next = ours.append("s1", &[&line("b", Some("a"), "ours")], Some(first.next_seq), 0).unwrap();
        assert_eq!((next.first_seq, next.foreign), (2, vec![(1, other)]));
    }

    #[test]
    fn two_writers_starting_one_new_transcript_leave_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let rounds = 20;
        let mut db = LiveDatabase::open(&path, "main", 1_000).unwrap();
        for n in 0..rounds {
            db.put_entry(&format!("k{n}"), &entry(&format!("s{n}"), 10)).unwrap();
        }
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let starters: Vec<_> = ["p", "q"]
            .into_iter()
            .map(|who| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut db = LiveDatabase::open(&path, "main", 1_000).unwrap();
                    let mut won = Vec::new();
                    for n in 0..rounds {
                        let header = json!({"type": "session", "version": 3, "id": format!("s{n}"),
                                            "timestamp": "2026-12-01T00:00:00.000Z", "cwd": who})
                        .to_string();
                        barrier.wait();
                        won.push(db.start(&format!("s{n}"), &header, 0).unwrap());
                    }
                    won
                })
            })
            .collect();
        let won: Vec<Vec<bool>> = starters.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(won[0].len(), rounds);
        for (n, (&p_won, &q_won)) in won[0].iter().zip(&won[1]).enumerate() {
            let got = rows(&path, &format!("s{n}"));
            assert_eq!(got.len(), 1, "round {n}: {got:?}");
            let cwd = serde_json::from_str::<Value>(&got[0].1).unwrap()["cwd"].as_str().unwrap().to_owned();
            // The one that says it wrote the header is the one whose header is there.
            assert_eq!((p_won, q_won), (cwd == "p", cwd == "q"), "round {n}");
        }
        // A started transcript is not started again.
        let again = json!({"type": "session", "id": "s0"}).to_string();
        assert!(!db.start("s0", &again, 0).unwrap());
        assert_eq!(rows(&path, "s0").len(), 1);
    }

    #[test]
    fn another_schema_is_refused_not_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        LiveDatabase::open(&path, "main", 1_000).unwrap();
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 24).unwrap();
        let err = LiveDatabase::open(&path, "main", 1_000).unwrap_err().to_string();
        assert!(err.contains("schema version 24; sessionlog writes version 23 only"), "{err}");
    }
}
