//! One session of a store open for writing: what a live loop holds for a
//! run. Its transcript is written under the transcript's lock, every entry
//! is folded into the token counters as it is appended, and when the
//! counters' usage changes the same call records it in the store log, so
//! `sessions.json` keeps `inputTokens`, `outputTokens`, `totalTokens`,
//! `totalTokensFresh` (and `contextTokens`, the window) current by
//! construction.
//!
//! The writer holds its store as any handle that derefs to an
//! [`AgentStore`]: borrowed (`SessionWriter<&AgentStore>`) for a command
//! that opens and closes within one call, or shared
//! ([`OwnedSessionWriter`], `SessionWriter<Arc<AgentStore>>`) for a loop
//! that keeps sessions open across tasks.

use std::ops::Deref;
use std::sync::Arc;

use serde_json::Value;
use sessionlog_events::{Entry, StoreEvent};
use sessionlog_tokens::Reported;

use crate::agent::AgentStore;
use crate::counters::usage_event;
use crate::error::StoreError;
use crate::transcript::{TranscriptWriter, WriteOptions};

/// How a session is opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionOptions<'a> {
    /// The working directory written into a new transcript's header.
    pub cwd: &'a str,
    /// The time a new transcript's header carries (Unix ms).
    pub now_ms: i64,
    /// The model's context window, recorded as `contextTokens` with the usage.
    pub context_window: Option<u64>,
    /// How the transcript is written.
    pub write: WriteOptions,
}

/// A store session open for writing, over a borrowed or shared store.
#[derive(Debug)]
pub struct SessionWriter<S: Deref<Target = AgentStore>> {
    store: S,
    key: String,
    transcript: TranscriptWriter,
    context_window: Option<u64>,
    checked: Option<Reported>,
}

/// A session writer that owns its handle on the store: it can outlive the
/// scope that opened it and move between tasks and threads.
pub type OwnedSessionWriter = SessionWriter<Arc<AgentStore>>;

impl<S: Deref<Target = AgentStore>> SessionWriter<S> {
    /// Opens the current session of `key` (which the store must hold, e.g.
    /// after [`AgentStore::turn`]): its transcript, created with a header
    /// when the file does not exist yet.
    pub fn open(store: S, key: &str, options: &SessionOptions<'_>) -> Result<Self, StoreError> {
        let key = sessionlog_sessions::normalize_key(key);
        let missing = |reason: &str| StoreError::Session { key: key.clone(), reason: reason.to_owned() };
        let projection = store.project(None)?;
        let entry =
            projection.get(&key).and_then(Value::as_object).ok_or_else(|| missing("no such session"))?;
        let session_id = entry
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("the entry has no sessionId"))?;
        let path = store.transcript_path_to_write(&key, entry)?;
        // The check above refuses a link; the open refuses one put in place since.
        let write = WriteOptions { no_follow: true, ..options.write };
        let transcript = if path.is_file() {
            TranscriptWriter::open(&path, write)?
        } else {
            let time = sessionlog_events::write::timestamp(options.now_ms)
                .ok_or(StoreError::Time(options.now_ms))?;
            let header = sessionlog_events::write::header(session_id, &time, options.cwd, None)
                .map_err(|source| StoreError::Line { path: path.clone(), line: 1, source })?;
            TranscriptWriter::create(&path, &header, write)?
        };
        Ok(SessionWriter { store, key, transcript, context_window: options.context_window, checked: None })
    }

    /// A session over a transcript already open for writing (e.g. one in an
    /// agent database), recording the usage of `key` in `store`.
    pub fn from_transcript(
        store: S,
        key: &str,
        transcript: TranscriptWriter,
        context_window: Option<u64>,
    ) -> Self {
        let key = sessionlog_sessions::normalize_key(key);
        SessionWriter { store, key, transcript, context_window, checked: None }
    }

    /// The session key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The transcript writer (the transcript, its leaf, its counters, fresh ids).
    pub fn transcript(&self) -> &TranscriptWriter {
        &self.transcript
    }

    /// The store the session belongs to.
    pub fn store(&self) -> &AgentStore {
        &self.store
    }

    /// Appends `entries` to the transcript durably; when the counters'
    /// usage changed, records it in the store (one `usage_recorded` event,
    /// appended and projected under the store's lock) and returns it.
    pub fn append(&mut self, entries: &[Entry]) -> Result<Option<StoreEvent>, StoreError> {
        self.transcript.append(entries)?;
        let now = self.transcript.counters().last_usage();
        if now.is_none() || now == self.checked.as_ref() {
            return Ok(None);
        }
        let now = now.cloned();
        let mut writer = self.store.writer()?;
        let entry = writer.store().get(&self.key).and_then(Value::as_object);
        let event = usage_event(&self.key, entry, self.transcript.counters(), self.context_window);
        if let Some(event) = &event {
            writer.append(std::slice::from_ref(event))?;
        }
        self.checked = now;
        Ok(event)
    }
}
