//! The loop: one worker per session key runs its turns one at a time, in
//! the order they arrived; different keys run in parallel.
//!
//! One turn: the store's turn decision (`/new`, `/reset`, daily/idle) →
//! the memory flush when the context is inside its soft threshold (a
//! silent run of its own, before the reply run, as OpenClaw) → the user
//! entry → engine `ingest` → provider context (assemble, history
//! limit, hygiene) → the model's stream → the assistant entry with its
//! usage → tool calls run and their results appended → again until the
//! model calls no tool (bounded) → engine `afterTurn` → threshold
//! compaction. A context overflow from the provider compacts and retries
//! (at most the policy's `maxOverflowAttempts`, 3 as OpenClaw), then cuts
//! oversized tool results once and retries, then ends the turn with
//! OpenClaw's advice. Every step is an appended entry or
//! store event; the transcript, its counters and the provider context
//! (`context::live::LiveContext`) stay in memory between turns and each
//! entry is folded into them as it is written, so a turn's cost does not
//! grow with the session. The transcript is read once, when the session is
//! opened, and again only when its file's length or modification time is
//! not what this writer's last append left (something else wrote it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use sessionlog_compaction::{compact_transcript, ManualCompaction, ManualError, Policy, Summarizer};
use sessionlog_context::engine::{ContextEngine, Legacy, SessionRef};
use sessionlog_context::live::LiveContext;
use sessionlog_context::ProviderRequest;
use sessionlog_events::write::Head;
use sessionlog_events::{Entry, StoreEvent};
use sessionlog_provider::{
    Accumulator, Api, CancellationToken, Delta, ErrorClass, Provider, Request, StopReason,
};
use sessionlog_sessions::policy::{resolve_reset, ResetConfig};
use sessionlog_sessions::turn::{Decision, Inbound as TurnInbound, Turn, DEFAULT_RESET_TRIGGERS};
use sessionlog_store::{
    AgentStore, OwnedSessionWriter, SessionWriter, StoreError, TranscriptWriter, WriteOptions,
};
use sessionlog_tokens::PiEstimator;
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::flush::{flush_prompts, utc_offset_minutes, UserTime};
use crate::storage::Storage;
use crate::tools::{self, Tool};

/// OpenClaw's answer when overflow recovery is exhausted.
pub const OVERFLOW_ADVICE: &str =
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session.";

/// The reply that is never delivered.
pub const SILENT_REPLY: &str = "NO_REPLY";

/// Why a turn could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The state folder refused a read or write.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The provider context could not be built.
    #[error(transparent)]
    Context(#[from] sessionlog_context::ProviderError),
    /// An entry could not be built.
    #[error(transparent)]
    Line(#[from] sessionlog_events::LineError),
    /// A compaction failed.
    #[error("compaction: {0}")]
    Compaction(#[from] ManualError),
    /// The workspace is unusable.
    #[error("workspace {path}: {reason}")]
    Workspace {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// The session's worker stopped.
    #[error("the session's worker stopped")]
    Stopped,
}

/// What the loop reports while it works (the CLI prints these; `--json`
/// prints [`AgentEvent::to_json`] one per line).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The turn's session: key, id, and whether it is new and why.
    Session {
        /// The session key.
        key: String,
        /// The session id the turn runs in.
        session_id: String,
        /// `reuse`, or why a new session started (`first`, `new`, `reset`, `daily`, `idle`).
        decision: String,
    },
    /// One streamed delta of a model call.
    Delta(Delta),
    /// The model called a tool.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// A tool finished.
    ToolResult {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// What the model receives.
        content: Vec<Value>,
    },
    /// A silent memory-flush turn ran before compaction.
    MemoryFlush {
        /// Its reply, unless it was `NO_REPLY` (suppressed).
        reply: Option<String>,
    },
    /// A compaction entry was appended.
    Compaction {
        /// `threshold`, `overflow` or `manual`.
        reason: String,
        /// Context tokens before.
        tokens_before: f64,
        /// The first entry kept.
        first_kept_entry_id: String,
        /// The summary's length in characters.
        summary_chars: usize,
    },
}

impl AgentEvent {
    /// The event as one JSON object, tagged by `type`.
    pub fn to_json(&self) -> Value {
        match self {
            AgentEvent::Session { key, session_id, decision } => {
                json!({"type": "session", "key": key, "sessionId": session_id, "decision": decision})
            }
            AgentEvent::Delta(d) => json!({"type": "delta", "delta": d}),
            AgentEvent::ToolCall { id, name, arguments } => {
                json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments})
            }
            AgentEvent::ToolResult { id, name, is_error, content } => {
                json!({"type": "toolResult", "id": id, "name": name, "isError": is_error, "content": content})
            }
            AgentEvent::MemoryFlush { reply } => json!({"type": "memoryFlush", "reply": reply}),
            AgentEvent::Compaction { reason, tokens_before, first_kept_entry_id, summary_chars } => json!({
                "type": "compaction", "reason": reason, "tokensBefore": tokens_before,
                "firstKeptEntryId": first_kept_entry_id, "summaryChars": summary_chars,
            }),
        }
    }
}

/// What a turn did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnOutcome {
    /// The session key.
    pub key: String,
    /// The session the turn ran in.
    pub session_id: String,
    /// The last assistant message's visible text.
    pub reply: String,
    /// Why the last model call stopped (`None` when no call was made).
    pub stop_reason: Option<StopReason>,
    /// Model calls made.
    pub model_calls: usize,
    /// Compactions appended during the turn.
    pub compactions: usize,
    /// Oversized tool results cut by overflow recovery during the turn.
    pub truncated_tool_results: usize,
    /// A memory-flush turn ran after this turn.
    pub memory_flushed: bool,
    /// Usage of the last model call: input, output, cache read, cache write, total.
    pub usage: [u64; 5],
    /// What went wrong, when the turn ended in an error or was aborted.
    pub error: Option<String>,
}

impl TurnOutcome {
    /// The outcome as the JSON object `run --json` prints last.
    pub fn to_json(&self) -> Value {
        let [input, output, cache_read, cache_write, total] = self.usage;
        json!({
            "type": "done", "key": self.key, "sessionId": self.session_id, "reply": self.reply,
            "stopReason": self.stop_reason.map(StopReason::as_str), "modelCalls": self.model_calls,
            "compactions": self.compactions, "memoryFlushed": self.memory_flushed,
            "usage": {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write, "totalTokens": total},
            "error": self.error,
        })
    }
}

/// What `/status` shows for a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The session key.
    pub key: String,
    /// The current session id (none before the first turn).
    pub session_id: Option<String>,
    /// `provider/model`.
    pub model: String,
    /// Context tokens now (last usage plus estimates after it).
    pub context_tokens: u64,
    /// The model's context window.
    pub context_window: u64,
    /// Input and output tokens of the last call.
    pub last_input: u64,
    /// Output tokens of the last call.
    pub last_output: u64,
    /// Compactions of this session.
    pub compactions: u64,
}

/// How a message is queued when its session is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// Waits for the running turn (the default).
    #[default]
    Queue,
    /// Aborts the running turn, then runs.
    Interrupt,
}

/// One inbound message.
#[derive(Debug, Default)]
pub struct Message {
    /// The session key (default: the agent's main key).
    pub key: Option<String>,
    /// The text.
    pub text: String,
    /// Where to report progress.
    pub events: Option<mpsc::UnboundedSender<AgentEvent>>,
    /// Queue or interrupt.
    pub mode: QueueMode,
    /// Cancels this turn (an abort: the assistant entry says `aborted`).
    pub cancel: Option<CancellationToken>,
}

type SummarizerFactory = Arc<dyn Fn() -> Box<dyn Summarizer + Send> + Send + Sync>;
type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// What an [`Agent`] is made of.
pub struct AgentParts {
    /// The configuration.
    pub config: Config,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// A fresh summariser for each compaction.
    pub summarizer: SummarizerFactory,
    /// The clock (Unix ms).
    pub clock: Clock,
    /// The tools (default: Pi's built-ins rooted at the workspace).
    pub tools: Option<Vec<Arc<dyn Tool>>>,
}

/// The live loop over one agent's store.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    policy: Policy,
    store: Arc<AgentStore>,
    provider: Arc<dyn Provider>,
    tools: Vec<Arc<dyn Tool>>,
    read_only: bool,
    user_time: UserTime,
    summarizer: SummarizerFactory,
    clock: Clock,
    lanes: Mutex<HashMap<String, Lane>>,
}

struct Lane {
    jobs: mpsc::UnboundedSender<Job>,
    current: Arc<Mutex<Option<CancellationToken>>>,
    worker: tokio::task::JoinHandle<()>,
}

enum Job {
    Turn(Message, oneshot::Sender<Result<TurnOutcome, AgentError>>),
    Compact(Option<String>, oneshot::Sender<Result<Option<AgentEvent>, AgentError>>),
    Status(oneshot::Sender<Result<Status, AgentError>>),
}

/// A session's transcript open for writing, with what the loop keeps of it.
struct Session {
    id: String,
    /// The transcript under its lock; changed counters recorded in the store.
    writer: OwnedSessionWriter,
    aborted_last: bool,
    /// The counters rest on a usage reported after the last compaction
    /// (OpenClaw's `totalTokensFresh`); a compaction makes them stale until
    /// the next reply reports one, and the memory flush waits for it.
    usage_fresh: bool,
    /// The provider context, folded entry by entry as they are appended.
    live: LiveContext,
    /// The file as this writer left it: a different length or modification
    /// time at the start of a turn means something else wrote it.
    stamp: Option<FileStamp>,
}

/// A transcript file's length and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Session {
    /// The transcript writer (transcript, leaf, counters, fresh ids).
    fn transcript(&self) -> &TranscriptWriter {
        self.writer.transcript()
    }
}

impl FileStamp {
    fn of(path: &std::path::Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp { len: meta.len(), modified: meta.modified().ok() })
    }
}

/// What one model run works on: the session and its engine, where its
/// progress is reported, and what cancels it.
struct Run<'a> {
    key: &'a str,
    session: &'a mut Session,
    engine: &'a mut (dyn ContextEngine + Send),
    events: &'a Option<mpsc::UnboundedSender<AgentEvent>>,
    cancel: &'a CancellationToken,
}

struct LaneState {
    session: Option<Session>,
    engine: Box<dyn ContextEngine + Send>,
}

/// Runs `f` off the async workers when the runtime has others (the store
/// and compaction calls are synchronous).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Agent {
    /// An agent over `parts.config`'s state folder; the workspace must exist.
    pub fn new(parts: AgentParts) -> Result<Agent, AgentError> {
        let config = parts.config;
        let workspace = tools::Workspace::new(&config.workspace)
            .map_err(|e| AgentError::Workspace { path: config.workspace.clone(), reason: e.to_string() })?
            .read_only(config.read_only_workspace);
        let tools = parts.tools.unwrap_or_else(|| tools::configured(&workspace, &config));
        let store = Arc::new(config.storage.agent_store(&config.state_dir, &config.agent));
        let policy = config.policy();
        let user_time = UserTime::resolve(config.user_timezone.as_deref(), config.time_format_24h)
            .map_err(AgentError::Config)?;
        for warning in config.warnings() {
            tracing::warn!("{warning}");
        }
        Ok(Agent {
            inner: Arc::new(Inner {
                config,
                policy,
                store,
                provider: parts.provider,
                tools,
                read_only: workspace.is_read_only(),
                user_time,
                summarizer: parts.summarizer,
                clock: parts.clock,
                lanes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The compaction policy in force.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    fn key(&self, key: Option<&str>) -> String {
        sessionlog_sessions::normalize_key(
            key.map_or_else(|| self.inner.config.main_key(), str::to_owned).as_str(),
        )
    }

    fn lane(&self, key: &str) -> (mpsc::UnboundedSender<Job>, Arc<Mutex<Option<CancellationToken>>>) {
        let mut lanes = lock(&self.inner.lanes);
        if let Some(lane) = lanes.get(key).filter(|l| !l.jobs.is_closed()) {
            return (lane.jobs.clone(), lane.current.clone());
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let current = Arc::new(Mutex::new(None));
        // The worker holds the agent weakly: dropping the agent closes every
        // lane, so each worker ends and releases its transcript.
        let worker = tokio::spawn(worker(Arc::downgrade(&self.inner), key.to_owned(), rx, current.clone()));
        lanes.insert(key.to_owned(), Lane { jobs: tx.clone(), current: current.clone(), worker });
        (tx, current)
    }

    /// Queues `message` on its session (in arrival order; with
    /// [`QueueMode::Interrupt`] the running turn is aborted first) and
    /// returns where its outcome arrives. Must be called inside a tokio runtime.
    pub fn submit(&self, message: Message) -> oneshot::Receiver<Result<TurnOutcome, AgentError>> {
        let key = self.key(message.key.as_deref());
        let (jobs, current) = self.lane(&key);
        if message.mode == QueueMode::Interrupt {
            if let Some(running) = lock(&current).as_ref() {
                running.cancel();
            }
        }
        let (tx, rx) = oneshot::channel();
        let message = Message { key: Some(key), ..message };
        if let Err(mpsc::error::SendError(Job::Turn(_, tx))) = jobs.send(Job::Turn(message, tx)) {
            let _ = tx.send(Err(AgentError::Stopped));
        }
        rx
    }

    /// Runs one message to the end of its turn.
    pub async fn run(&self, message: Message) -> Result<TurnOutcome, AgentError> {
        self.submit(message).await.map_err(|_| AgentError::Stopped)?
    }

    /// Closes every session: queued messages still run, then each worker
    /// ends and releases its transcript's lock.
    pub async fn close(&self) {
        let lanes: Vec<Lane> = lock(&self.inner.lanes).drain().map(|(_, lane)| lane).collect();
        for lane in lanes {
            drop(lane.jobs);
            let _ = lane.worker.await;
        }
    }

    /// Aborts the running turn of `key`, if any.
    pub fn abort(&self, key: Option<&str>) {
        let key = self.key(key);
        if let Some(lane) = lock(&self.inner.lanes).get(&key) {
            if let Some(running) = lock(&lane.current).as_ref() {
                running.cancel();
            }
        }
    }

    /// `/compact [instructions]` on `key`'s session, between turns.
    pub async fn compact(
        &self,
        key: Option<&str>,
        instructions: Option<String>,
    ) -> Result<Option<AgentEvent>, AgentError> {
        let key = self.key(key);
        let (jobs, _) = self.lane(&key);
        let (tx, rx) = oneshot::channel();
        jobs.send(Job::Compact(instructions, tx)).map_err(|_| AgentError::Stopped)?;
        rx.await.map_err(|_| AgentError::Stopped)?
    }

    /// `/status` of `key`'s session.
    pub async fn status(&self, key: Option<&str>) -> Result<Status, AgentError> {
        let key = self.key(key);
        let (jobs, _) = self.lane(&key);
        let (tx, rx) = oneshot::channel();
        jobs.send(Job::Status(tx)).map_err(|_| AgentError::Stopped)?;
        rx.await.map_err(|_| AgentError::Stopped)?
    }
}

async fn worker(
    inner: std::sync::Weak<Inner>,
    key: String,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    current: Arc<Mutex<Option<CancellationToken>>>,
) {
    let mut state = LaneState { session: None, engine: Box::new(Legacy) };
    while let Some(job) = jobs.recv().await {
        let Some(inner) = inner.upgrade() else { break };
        match job {
            Job::Turn(message, reply) => {
                let cancel = message.cancel.clone().unwrap_or_default();
                *lock(&current) = Some(cancel.clone());
                let outcome = inner.turn(&mut state, &key, message, cancel).await;
                *lock(&current) = None;
                let _ = reply.send(outcome);
            }
            Job::Compact(instructions, reply) => {
                let _ = reply.send(inner.manual_compact(&mut state, &key, instructions.as_deref()));
            }
            Job::Status(reply) => {
                let _ = reply.send(inner.status(&mut state, &key));
            }
        }
    }
}

fn emit(events: &Option<mpsc::UnboundedSender<AgentEvent>>, event: AgentEvent) {
    if let Some(tx) = events {
        let _ = tx.send(event);
    }
}

impl Inner {
    fn now(&self) -> i64 {
        (self.clock)()
    }

    fn write_options(&self) -> WriteOptions {
        WriteOptions { rules: self.policy.pi_rules, ..WriteOptions::default() }
    }

    /// The hygiene family for the configured provider (OpenAI itself gets none).
    fn family(&self) -> Option<&'static str> {
        let model = self.provider.model();
        match model.api {
            Api::AnthropicMessages => Some("anthropic"),
            Api::OpenAiCompletions if model.provider == "openai" => None,
            Api::OpenAiCompletions => Some("openai-completions"),
        }
    }

    fn stored_entry(&self, key: &str) -> Result<Option<Map<String, Value>>, AgentError> {
        let writer = self.store.writer()?;
        Ok(writer.store().get(key).and_then(Value::as_object).cloned())
    }

    /// Opens (or creates) the transcript of `key`'s current session.
    fn open_session(&self, key: &str, now: i64) -> Result<Option<Session>, AgentError> {
        let Some(entry) = self.stored_entry(key)? else { return Ok(None) };
        let Some(id) = entry.get("sessionId").and_then(Value::as_str).map(str::to_owned) else {
            return Ok(None);
        };
        let cwd = self.config.workspace.canonicalize().unwrap_or_else(|_| self.config.workspace.clone());
        let header = || {
            let time = sessionlog_events::write::timestamp(now).ok_or(StoreError::Time(now))?;
            sessionlog_events::write::header(&id, &time, &cwd.to_string_lossy(), None)
                .map_err(|source| StoreError::Line { path: cwd.clone(), line: 1, source })
        };
        let transcript =
            Storage::open_transcript(&self.store, key, &entry, header, self.write_options(), now)?;
        let window = Some(self.provider.model().context_window);
        let writer = SessionWriter::from_transcript(self.store.clone(), key, transcript, window);
        let aborted_last = entry.get("abortedLastRun").and_then(Value::as_bool).unwrap_or(false);
        let live = LiveContext::new(writer.transcript().transcript(), self.policy.pi_rules);
        let stamp = FileStamp::of(writer.transcript().path());
        Ok(Some(Session { id, writer, aborted_last, usage_fresh: true, live, stamp }))
    }

    /// The session of `key`, reopened when the store names another one or
    /// when its file changed behind the writer's back (another length or
    /// modification time than its last append left): then the transcript is
    /// read again and the projection rebuilt from it.
    fn session<'a>(
        &self,
        slot: &'a mut Option<Session>,
        key: &str,
        now: i64,
    ) -> Result<Option<&'a mut Session>, AgentError> {
        let stored = self.stored_entry(key)?;
        let id = stored.as_ref().and_then(|e| e.get("sessionId")).and_then(Value::as_str);
        if id.is_none() {
            *slot = None;
        } else if slot.as_ref().map(|s| s.id.as_str()) != id
            || slot.as_ref().is_some_and(|s| FileStamp::of(s.transcript().path()) != s.stamp)
        {
            if slot.is_some() && slot.as_ref().map(|s| s.id.as_str()) == id {
                tracing::info!(key, "the transcript changed outside this writer: read again");
            }
            *slot = None;
            *slot = self.open_session(key, now)?;
        }
        Ok(slot.as_mut())
    }

    /// Appends `entry` (changed counters recorded in the store by the
    /// session writer) and folds it into the provider context.
    fn append(&self, session: &mut Session, entry: Entry) -> Result<(), AgentError> {
        blocking(|| -> Result<(), AgentError> {
            session.writer.append(std::slice::from_ref(&entry))?;
            session.live.sync(session.writer.transcript().transcript());
            session.stamp = FileStamp::of(session.transcript().path());
            Ok(())
        })
    }

    fn append_message(&self, session: &mut Session, message: &Value, now: i64) -> Result<String, AgentError> {
        let time = sessionlog_events::write::timestamp(now).ok_or(StoreError::Time(now))?;
        let parent = session.transcript().leaf_id().map(str::to_owned);
        let seed = format!(
            "{}\n{}\n{now}\n{}",
            session.id,
            parent.as_deref().unwrap_or(""),
            session.transcript().transcript().entries.len()
        );
        let id = session.transcript().fresh_id(&seed);
        let entry = sessionlog_events::write::message(
            &Head { id: &id, parent_id: parent.as_deref(), timestamp: &time },
            message,
        )?;
        self.append(session, entry)?;
        Ok(id)
    }

    /// Compacts the session at its leaf and records it; `None` when there
    /// is nothing to compact.
    fn compact_session(
        &self,
        key: &str,
        session: &mut Session,
        instructions: Option<&str>,
        reason: &str,
    ) -> Result<Option<AgentEvent>, AgentError> {
        let now = self.now();
        let mut summarizer = (self.summarizer)();
        let compacted = blocking(|| {
            compact_transcript(
                session.transcript().transcript(),
                ManualCompaction {
                    policy: &self.policy,
                    instructions,
                    summarizer: summarizer.as_mut(),
                    counter: &PiEstimator,
                    now_ms: now,
                },
            )
        });
        let compacted = match compacted {
            Ok(c) => c,
            Err(ManualError::Nothing(why)) => {
                tracing::info!(key, why, "nothing to compact");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        self.append(session, compacted.entry.clone())?;
        session.usage_fresh = false;
        blocking(|| self.store.append(&[StoreEvent::CompactionCounted { key: key.to_owned(), at: now }]))?;
        Ok(Some(AgentEvent::Compaction {
            reason: reason.to_owned(),
            tokens_before: compacted.outcome.tokens_before,
            first_kept_entry_id: compacted.outcome.first_kept_entry_id.clone(),
            summary_chars: compacted.outcome.summary.chars().count(),
        }))
    }

    /// OpenClaw's overflow-recovery truncation (spec compaction §3.9): the
    /// tool results on the current path longer than the window allows are
    /// cut, by branching before the first of them and re-appending the rest
    /// of the path (the log stays append-only); returns how many were cut.
    fn truncate_tool_results(&self, key: &str, session: &mut Session) -> Result<usize, AgentError> {
        use sessionlog_compaction::truncate::{max_tool_result_chars, truncate_tool_result};
        use sessionlog_events::Role;
        let max = max_tool_result_chars(self.provider.model().context_window);
        let transcript = session.transcript().transcript();
        let Ok(path) = transcript.default_path() else { return Ok(0) };
        // The new text of each oversized tool result, by path position.
        let mut cuts: Vec<(usize, String)> = Vec::new();
        for (at, &i) in path.iter().enumerate() {
            if transcript.entries[i].message().is_none_or(|m| m.role() != Role::ToolResult) {
                continue;
            }
            let value = transcript.entries[i].to_value();
            let text: String = value["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect();
            if let Some(short) = truncate_tool_result(&text, max) {
                cuts.push((at, short));
            }
        }
        let Some(&(first, _)) = cuts.first() else { return Ok(0) };
        let mut parent = first.checked_sub(1).and_then(|p| transcript.entries[path[p]].id.clone());
        let mut renamed: HashMap<String, String> = HashMap::new();
        let mut entries = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        for (at, &i) in path.iter().enumerate().skip(first) {
            let mut value = transcript.entries[i].to_value();
            if let Some((_, short)) = cuts.iter().find(|(c, _)| *c == at) {
                // The text becomes one cut block; other blocks (images) stay.
                let others: Vec<Value> = value["message"]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] != "text")
                    .cloned()
                    .collect();
                let mut content = vec![json!({"type": "text", "text": short})];
                content.extend(others);
                value["message"]["content"] = Value::Array(content);
            }
            let old = transcript.entries[i].id.clone().unwrap_or_default();
            let seed = format!("{}\ntruncate\n{old}\n{}", session.id, transcript.entries.len() + at);
            let mut id = session.transcript().fresh_id(&seed);
            while ids.contains(&id) {
                id = session.transcript().fresh_id(&format!("{seed}\n{}", ids.len()));
            }
            if let Some(kept) = value.get("firstKeptEntryId").and_then(Value::as_str) {
                if let Some(new) = renamed.get(kept) {
                    value["firstKeptEntryId"] = Value::from(new.clone());
                }
            }
            value["id"] = Value::from(id.clone());
            value["parentId"] = parent.clone().map_or(Value::Null, Value::from);
            entries.push(Entry::from_value(&value)?);
            renamed.insert(old, id.clone());
            ids.push(id.clone());
            parent = Some(id);
        }
        tracing::info!(key, cut = cuts.len(), max, "oversized tool results truncated");
        let count = cuts.len();
        for entry in entries {
            self.append(session, entry)?;
        }
        Ok(count)
    }

    fn manual_compact(
        &self,
        state: &mut LaneState,
        key: &str,
        instructions: Option<&str>,
    ) -> Result<Option<AgentEvent>, AgentError> {
        let now = self.now();
        let Some(session) = self.session(&mut state.session, key, now)? else { return Ok(None) };
        self.compact_session(key, session, instructions, "manual")
    }

    fn status(&self, state: &mut LaneState, key: &str) -> Result<Status, AgentError> {
        let model = self.provider.model();
        let stored = self.stored_entry(key)?;
        let number = |k: &str| stored.as_ref().and_then(|e| e.get(k)).and_then(Value::as_u64).unwrap_or(0);
        let session = self.session(&mut state.session, key, self.now())?;
        Ok(Status {
            key: key.to_owned(),
            session_id: session.as_ref().map(|s| s.id.clone()),
            model: format!("{}/{}", model.provider, model.id),
            context_tokens: session
                .as_ref()
                .map_or(0, |s| s.transcript().counters().tokens().max(0.0) as u64),
            context_window: model.context_window,
            last_input: number("inputTokens"),
            last_output: number("outputTokens"),
            compactions: number("compactionCount"),
        })
    }

    /// Model calls and tool rounds until the model calls no tool (bounded),
    /// an error, an abort, or an overflow that compaction cannot cure.
    async fn model_loop(
        &self,
        run: &mut Run<'_>,
        outcome: &mut TurnOutcome,
        snapshot: &mut Vec<Value>,
        extra_system: Option<&str>,
    ) -> Result<(), AgentError> {
        let (key, events, cancel) = (run.key, run.events, run.cancel);
        let session = &mut *run.session;
        let engine = &mut *run.engine;
        let tool_defs: Vec<_> = self.tools.iter().map(|t| tools::definition(t.as_ref())).collect();
        let mut overflow_attempts = 0u32;
        let mut truncated = false;
        loop {
            if outcome.model_calls >= self.config.max_tool_rounds {
                outcome.error =
                    Some(format!("stopped after {} model calls in one turn", outcome.model_calls));
                break;
            }
            let ctx = blocking(|| {
                session.live.provider_context(
                    session.transcript().transcript(),
                    &ProviderRequest {
                        session_key: Some(key.to_owned()),
                        history_limit: self.config.history_limit,
                        token_budget: Some(self.provider.model().context_window),
                        provider: self.family(),
                        rules: self.policy.pi_rules,
                        ..ProviderRequest::default()
                    },
                    engine,
                    &PiEstimator,
                )
            })?;
            let parts: Vec<&str> =
                [ctx.system_prompt_addition.as_deref(), self.config.system_prompt.as_deref(), extra_system]
                    .into_iter()
                    .flatten()
                    .collect();
            let system_prompt = (!parts.is_empty()).then(|| parts.join("\n\n"));
            let request = Request {
                system_prompt,
                messages: ctx.messages,
                tools: Some(tool_defs.clone()),
                ..Request::default()
            };
            let started = self.now();
            let mut acc = Accumulator::new(self.provider.model(), started);
            let mut stream = self.provider.stream(&request, cancel.clone());
            while let Some(delta) = stream.next().await {
                acc.push(&delta);
                emit(events, AgentEvent::Delta(delta));
            }
            drop(stream);
            outcome.model_calls += 1;
            let assistant = acc.finish();
            let json = assistant.to_json();
            self.append_message(session, &json, started)?;
            snapshot.push(json);
            outcome.stop_reason = Some(assistant.stop_reason);
            outcome.reply = assistant.text();
            let u = assistant.usage;
            outcome.usage = [u.input, u.output, u.cache_read, u.cache_write, u.total_tokens];
            if u.input + u.output + u.cache_read + u.cache_write > 0 {
                session.usage_fresh = true;
            }
            let overflow = assistant.error.as_ref().is_some_and(|e| e.class == ErrorClass::ContextOverflow);
            if overflow {
                if overflow_attempts < self.policy.max_overflow_attempts {
                    overflow_attempts += 1;
                    if let Some(event) = self.compact_session(key, session, None, "overflow")? {
                        outcome.compactions += 1;
                        emit(events, event);
                        continue;
                    }
                }
                // Once per run, after compaction: cut oversized tool results
                // in the transcript and retry.
                if !truncated {
                    truncated = true;
                    let cut = self.truncate_tool_results(key, session)?;
                    if cut > 0 {
                        outcome.truncated_tool_results += cut;
                        continue;
                    }
                }
                outcome.error = Some(OVERFLOW_ADVICE.to_owned());
                break;
            }
            match assistant.stop_reason {
                StopReason::Aborted | StopReason::Error => {
                    outcome.error = assistant.error_message.clone();
                    break;
                }
                _ => {}
            }
            let calls: Vec<(String, String, Value)> = assistant
                .tool_calls()
                .map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone()))
                .collect();
            if calls.is_empty() {
                break;
            }
            for (id, name, arguments) in calls {
                emit(
                    events,
                    AgentEvent::ToolCall { id: id.clone(), name: name.clone(), arguments: arguments.clone() },
                );
                let (output, is_error) = tools::execute(&self.tools, &name, &arguments, cancel.clone()).await;
                let at = self.now();
                let result = tools::result_message(&id, &name, &output, is_error, at);
                self.append_message(session, &result, at)?;
                snapshot.push(result);
                emit(events, AgentEvent::ToolResult { id, name, is_error, content: output.content });
            }
        }
        Ok(())
    }

    /// OpenClaw's pre-compaction memory flush, before the reply run: a
    /// silent turn when the context is inside the soft threshold or the
    /// transcript reached `forceFlushTranscriptBytes`, once per compaction
    /// cycle, never for a read-only workspace; its prompt dated in the
    /// user's time zone with a current-time line; nothing of it is streamed
    /// to the caller; recorded as `memoryFlushAt`.
    async fn memory_flush(&self, run: &mut Run<'_>) -> Result<bool, AgentError> {
        let key = run.key;
        let Some(flush) = self.policy.memory_flush else { return Ok(false) };
        if self.read_only {
            return Ok(false);
        }
        let stored = blocking(|| self.stored_entry(key))?;
        let count =
            |k: &str| stored.as_ref().and_then(|e| e.get(k)).and_then(Value::as_u64).map(|n| n as u32);
        let (compactions, flushed_at) =
            (count("compactionCount").unwrap_or(0), count("memoryFlushCompactionCount"));
        // The token trigger waits for counters a compaction made stale
        // (OpenClaw's `totalTokensFresh`); the size trigger does not.
        let tokens = run.session.transcript().counters().tokens();
        let by_tokens =
            run.session.usage_fresh && self.policy.memory_flush_due(tokens, compactions, flushed_at);
        // The size is only read when the size trigger is on (in a database
        // it is a walk of the current path).
        let by_size = !by_tokens
            && flush.force_flush_transcript_bytes.0 > 0
            && flush.forced_by_size(run.session.transcript().jsonl_bytes(), compactions, flushed_at);
        if !by_tokens && !by_size {
            return Ok(false);
        }
        let now = self.now();
        let (prompt, system) = flush_prompts(now, &self.user_time);
        let user = json!({"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": now});
        self.append_message(run.session, &user, now)?;
        let mut flush = TurnOutcome::default();
        let mut snapshot = vec![user];
        let mut silent = Run {
            key,
            session: &mut *run.session,
            engine: &mut *run.engine,
            events: &None,
            cancel: run.cancel,
        };
        self.model_loop(&mut silent, &mut flush, &mut snapshot, Some(&system)).await?;
        if let Some(error) = &flush.error {
            tracing::warn!(key, "memory flush: {error}");
        }
        blocking(|| self.store.append(&[StoreEvent::MemoryFlushRecorded { key: key.to_owned(), at: now }]))?;
        let reply = flush.reply.trim();
        let reply = (!reply.eq_ignore_ascii_case(SILENT_REPLY)).then(|| reply.to_owned());
        emit(run.events, AgentEvent::MemoryFlush { reply });
        Ok(true)
    }

    async fn turn(
        &self,
        state: &mut LaneState,
        key: &str,
        message: Message,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let events = message.events;
        let now = self.now();
        // The turn decision, recorded in the store (created / reset / activity).
        let triggers = DEFAULT_RESET_TRIGGERS;
        let plan = blocking(|| -> Result<_, AgentError> {
            if !self.store.has_log() {
                drop(self.store.writer()?);
            }
            let turn = Turn {
                key,
                inbound: TurnInbound {
                    body: &message.text,
                    command_authorized: true,
                    ..TurnInbound::default()
                },
                triggers: &triggers,
                rule: resolve_reset(&ResetConfig::default(), key, None),
                now_ms: now,
                // OpenClaw's daily reset falls at `atHour` in the gateway host's local time.
                utc_offset_minutes: utc_offset_minutes(&jiff::tz::TimeZone::system(), now),
            };
            // Nothing is recorded for a turn whose transcript is refused: the
            // transcript it would write is opened (the session it reuses) or
            // checked (a new one) before the decision is applied.
            let planned = self.store.turn(&turn, false)?.plan;
            if planned.decision == Decision::Reuse {
                self.session(&mut state.session, key, now)?;
            } else if self.store.database().is_none() {
                let entry = Map::from_iter([("sessionId".to_owned(), Value::from(planned.session_id))]);
                self.store.transcript_path_to_write(key, &entry)?;
            }
            Ok(self.store.turn(&turn, true)?.plan)
        })?;
        if plan.decision != Decision::Reuse {
            state.session = None;
        }
        let decision = match &plan.decision {
            Decision::Reuse => "reuse".to_owned(),
            Decision::New { reason } => (*reason).to_owned(),
        };
        emit(
            &events,
            AgentEvent::Session { key: key.to_owned(), session_id: plan.session_id.clone(), decision },
        );
        let mut outcome = TurnOutcome {
            key: key.to_owned(),
            session_id: plan.session_id.clone(),
            ..TurnOutcome::default()
        };
        let session_id = plan.session_id.clone();
        let session = blocking(|| self.session(&mut state.session, key, now))?;
        let Some(session) = session else {
            return Err(AgentError::Store(StoreError::Session {
                key: key.to_owned(),
                reason: "no session after the turn".into(),
            }));
        };
        if plan.prompt.trim().is_empty() {
            return Ok(outcome); // a bare `/new` or `/reset`: the new session waits for a message
        }
        let mut run = Run { key, session, engine: state.engine.as_mut(), events: &events, cancel: &cancel };
        // OpenClaw flushes before the reply run, on the context as it stands.
        outcome.memory_flushed = self.memory_flush(&mut run).await?;
        let now = self.now();
        let sref = SessionRef { session_id, session_key: Some(key.to_owned()) };
        let user =
            json!({"role": "user", "content": [{"type": "text", "text": plan.prompt}], "timestamp": now});
        self.append_message(run.session, &user, now)?;
        let mut snapshot = vec![user.clone()];
        if let Err(e) = run.engine.ingest(&sref, &user) {
            tracing::warn!("engine ingest: {e}");
        }
        self.model_loop(&mut run, &mut outcome, &mut snapshot, None).await?;
        if let Err(e) = run.engine.after_turn(&sref, &snapshot) {
            tracing::warn!("engine afterTurn: {e}");
        }
        let session = run.session;
        let aborted = outcome.stop_reason == Some(StopReason::Aborted);
        if aborted != session.aborted_last {
            let mut patch = Map::new();
            patch.insert("abortedLastRun".into(), json!(aborted));
            blocking(|| self.store.patch(key, patch, self.now(), true))?;
            session.aborted_last = aborted;
        }
        if outcome.error.is_none() {
            let tokens = session.transcript().counters().tokens();
            if self.policy.should_compact(tokens) {
                if let Some(event) = self.compact_session(key, session, None, "threshold")? {
                    outcome.compactions += 1;
                    emit(&events, event);
                }
            }
        }
        Ok(outcome)
    }
}
