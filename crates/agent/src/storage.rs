//! Where the loop keeps its sessions (`storage` in the configuration).
//!
//! * [`Storage::Jsonl`] (the default): OpenClaw's file layout before
//!   2026.8.1 — `agents/<agent>/sessions/` with `sessions.json`, one
//!   `<sessionId>.jsonl` per transcript, and sessionlog's store log
//!   `events.jsonl`.
//! * [`Storage::Sqlite`]: OpenClaw's current layout, one database per agent,
//!   `agents/<agent>/agent/openclaw-agent.sqlite`, written as OpenClaw
//!   writes it (`sessionlog-sqlite-store`'s `LiveDatabase`: WAL, busy
//!   timeout, one short `BEGIN IMMEDIATE` transaction per write, `seq`
//!   numbered inside it), so sessionlog runs beside or instead of an
//!   OpenClaw gateway on the same files. Session entries go to
//!   `session_nodes` (a `session_windows` row per transcript generation),
//!   transcript entries to `transcript_events`; a transcript is named
//!   `<database>#<sessionId>` like every transcript in a database.
//!   sessionlog's store log, from which the loop's session decisions are
//!   folded, lives in `agents/<agent>/sessionlog/` (with its
//!   `sessions.json` projection), a folder OpenClaw does not read.
//!
//! Writers, as OpenClaw treats them: within this process one writer per
//! transcript (a second waits, then is refused); across processes SQLite
//! serialises transcript appends — each batch numbered after what the other
//! committed, never interleaved, the other writer's entries folded into the
//! in-memory transcript before ours. A session entry is written only over
//! the row this store wrote last (or an older one of its own, when the
//! database lagged after a failed write): one another writer changed
//! meanwhile is refused (`session <key> was changed by another writer`),
//! never overwritten, and the turn ends with that error before anything of
//! it is recorded; the other writer's entry is taken into the store log, so
//! the next turn builds on it.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use sessionlog_events::Entry;
use sessionlog_store::{AgentStore, Layout, StoreError, TranscriptWriter, WriteOptions};

/// How the loop stores its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    /// `sessions.json` and JSONL transcripts (the default).
    #[default]
    Jsonl,
    /// OpenClaw's SQLite agent database.
    Sqlite,
}

impl Storage {
    /// The agent's store in the state folder `state`.
    pub(crate) fn agent_store(self, state: &Path, agent: &str) -> AgentStore {
        match self {
            Storage::Jsonl => AgentStore::jsonl(state, agent),
            Storage::Sqlite => {
                let id = sessionlog_sessions::keys::normalize_agent_id(agent);
                let log = state.join("agents").join(&id).join("sessionlog");
                let database = sessionlog_sqlite_store::database_path(state, &id);
                AgentStore::open(sessionlog_store::Agent { id, layout: Layout::Jsonl { sessions_dir: log } })
                    .with_database(database)
            }
        }
    }

    /// Opens the transcript of a stored session `entry` for writing,
    /// started with `header()` when it does not exist yet; `Ok(None)` when
    /// the entry names no transcript.
    pub(crate) fn open_transcript(
        store: &AgentStore,
        key: &str,
        entry: &Map<String, Value>,
        header: impl FnOnce() -> Result<Entry, StoreError>,
        options: WriteOptions,
        now_ms: i64,
    ) -> Result<TranscriptWriter, StoreError> {
        let missing = |reason: &str| StoreError::Session { key: key.to_owned(), reason: reason.to_owned() };
        let session_id = entry
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("the entry has no sessionId"))?;
        if let Some(database) = store.database() {
            if !sessionlog_sqlite_store::is_session_id(session_id) {
                return Err(missing("its sessionId cannot name a transcript in the database"));
            }
            let name = sessionlog_sqlite_store::TranscriptName {
                database: database.to_owned(),
                session_id: session_id.to_owned(),
            };
            return TranscriptWriter::open_in_database(&name, store.id(), &header()?, options, now_ms);
        }
        let path = store.transcript_path_to_write(key, entry)?;
        // The check above refuses a link; the open refuses one put in place since.
        let options = WriteOptions { no_follow: true, ..options };
        if path.is_file() {
            TranscriptWriter::open(&path, options)
        } else {
            TranscriptWriter::create(&path, &header()?, options)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sqlite_store_keeps_its_log_apart_and_names_the_database() {
        let store = Storage::Sqlite.agent_store(Path::new("/st"), "Main");
        assert_eq!(store.log_path(), Path::new("/st/agents/main/sessionlog/events.jsonl"));
        assert_eq!(store.database(), Some(Path::new("/st/agents/main/agent/openclaw-agent.sqlite")));
        let store = Storage::Jsonl.agent_store(Path::new("/st"), "main");
        assert_eq!(
            (store.log_path().as_path(), store.database()),
            (Path::new("/st/agents/main/sessions/events.jsonl"), None)
        );
    }
}
