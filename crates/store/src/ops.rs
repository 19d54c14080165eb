//! Every write a front end makes to a store, as one call each: it takes the
//! log's lock, asks `sessionlog-sessions` what to append, appends and
//! projects it through [`StoreWriter`], carries out the file work that
//! follows (archiving transcripts), and returns what it did.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sessionlog_event_log::Mode;
use sessionlog_events::PiRules;
use sessionlog_sessions::maintenance::{missing_transcript_keys, plan_without_missing, Plan, Settings};
use sessionlog_sessions::paths::is_transcript_name;
use sessionlog_sessions::store::{import_events, StoreEvent};
use sessionlog_sessions::turn::{plan as turn_plan, Turn, TurnPlan};
use sessionlog_tokens::PiEstimator;

use crate::agent::AgentStore;
use crate::counters::{path_counters, usage_event};
use crate::error::{io_at, StoreError};
use crate::layout::{archive_transcript, discover, Layout};
use sessionlog_sqlite_store::{AgentDatabase, Error as DbError, Export, Written};

/// What [`import`] did for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The agent.
    pub agent: String,
    /// Sessions imported (one `imported` event each).
    pub sessions: usize,
    /// Transcripts copied.
    pub copied: usize,
    /// The sessions folder written.
    pub target: PathBuf,
}

/// Imports an OpenClaw state folder (or one sessions folder) as an
/// event-sourced store under `into`: one `imported` event per entry of each
/// agent's `sessions.json` (or of its SQLite store's `session_nodes`), its
/// transcripts copied (from the database: each one's rows as its JSONL file), `sessions.json` projected
/// (byte-identical to the original). Everything is read and checked before
/// anything is written; a target that already holds a log is refused.
pub fn import(from: &Path, into: &Path) -> Result<Vec<Imported>, StoreError> {
    let mut plans = Vec::new();
    for agent in discover(from)? {
        let source = AgentStore::open(agent.clone());
        let index = source.read_index()?;
        let events = import_events(&index)
            .map_err(|source| StoreError::Fold { path: source_index(&agent.layout), source })?;
        let target = AgentStore::jsonl(into, &agent.id);
        let log = target.log_path();
        if log.metadata().is_ok_and(|m| m.len() > 0) {
            return Err(StoreError::AlreadyImported { path: log });
        }
        plans.push((agent.layout, target, events));
    }
    let mut out = Vec::new();
    for (layout, target, events) in plans {
        fs::create_dir_all(target.dir()).map_err(io_at(target.dir()))?;
        let copied = match &layout {
            Layout::Jsonl { sessions_dir } => copy_transcript_files(sessions_dir, target.dir())?,
            Layout::Sqlite { database } => copy_database_transcripts(database, target.dir())?,
        };
        target.writer()?.append(&events)?;
        out.push(Imported {
            agent: target.id().to_owned(),
            sessions: events.len(),
            copied,
            target: target.dir().to_owned(),
        });
    }
    Ok(out)
}

/// Copies the transcript files of a sessions folder (archives included)
/// into `to_dir`; a file already there must hold the same bytes.
fn copy_transcript_files(dir: &Path, to_dir: &Path) -> Result<usize, StoreError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(io_at(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_transcript_name(n, true))
        .collect();
    names.sort();
    let mut copied = 0;
    for name in names {
        let (from, to) = (dir.join(&name), to_dir.join(&name));
        if from == to {
            continue;
        }
        if to.exists() {
            if fs::read(&from).map_err(io_at(&from))? != fs::read(&to).map_err(io_at(&to))? {
                return Err(StoreError::Conflict { path: to });
            }
            continue;
        }
        fs::copy(&from, &to).map_err(io_at(&to))?;
        copied += 1;
    }
    Ok(copied)
}

/// Writes every transcript of an agent database into `to_dir` as
/// `<sessionId>.jsonl`, the bytes its rows hold (each streamed into a
/// temporary file, synced, then renamed); a file already there must hold
/// the same bytes.
fn copy_database_transcripts(database: &Path, to_dir: &Path) -> Result<usize, StoreError> {
    let db = AgentDatabase::open(database)?;
    let mut copied = 0;
    for id in db.transcript_ids()? {
        let to = to_dir.join(format!("{id}.jsonl"));
        if to.exists() {
            if db.transcript_bytes(&id)? != fs::read(&to).map_err(io_at(&to))? {
                return Err(StoreError::Conflict { path: to });
            }
            continue;
        }
        let (tmp, mut file) = sessionlog_event_log::create_temp_beside(&to, "tmp").map_err(io_at(&to))?;
        let written: Result<(), StoreError> = (|| {
            let mut rows = db.transcript(&id)?;
            std::io::copy(&mut rows, &mut file).map_err(|e| match e.downcast::<DbError>() {
                Ok(inner) => StoreError::Database(inner),
                Err(e) => StoreError::Io { path: tmp.clone(), source: e },
            })?;
            file.sync_all().map_err(io_at(&tmp))?;
            fs::rename(&tmp, &to).map_err(io_at(&to))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        copied += 1;
    }
    Ok(copied)
}

/// What [`export`] wrote for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The agent.
    pub agent: String,
    /// The database written and its row counts.
    pub written: Written,
    /// Session keys whose transcript was not found (their entries are
    /// written, without events).
    pub without_transcript: Vec<String>,
}

/// Writes the event store `from` (each agent with a store log) as OpenClaw's
/// current layout under the state folder `to`: per agent one
/// `agents/<id>/agent/openclaw-agent.sqlite` (`sqlite-store`'s writer:
/// OpenClaw's schema, short transactions) holding the projection's entries
/// in order and each entry's transcript, line for line. Every agent is read
/// before anything is written; an existing database is never replaced and
/// nothing under `from` is written. An entry whose `sessionId` cannot name a
/// transcript file (OpenClaw's "Invalid session ID", as `import` refuses it)
/// is refused, naming its key, and nothing is written.
pub fn export(from: &Path, to: &Path, now_ms: i64) -> Result<Vec<Exported>, StoreError> {
    type Lines = Vec<(String, Vec<String>)>;
    let mut plans: Vec<(String, sessionlog_sessions::store::Store, Lines, Vec<String>)> = Vec::new();
    for agent in discover(from)? {
        let store = AgentStore::open(agent);
        if store.is_read_only() || !store.has_log() {
            continue;
        }
        let entries = store.project(None)?;
        let (mut transcripts, mut seen, mut without) = (Vec::new(), HashSet::new(), Vec::new());
        for (key, entry) in &entries {
            let Some(object) = entry.as_object() else { continue };
            let Some(id) = object.get("sessionId").and_then(Value::as_str) else { continue };
            // OpenClaw (and `import`) refuse an id that cannot name a
            // transcript file: refused here too, before anything is written.
            if let Err(e) = sessionlog_sessions::keys::validate_session_id(id) {
                return Err(StoreError::Session {
                    key: key.clone(),
                    reason: format!(
                        "{e}; OpenClaw refuses it (patch the entry's sessionId or remove the entry first)"
                    ),
                });
            }
            if !seen.insert(id.to_owned()) {
                continue;
            }
            match store.transcript_path(object).filter(|p| p.is_file()) {
                Some(path) => {
                    let text = fs::read_to_string(&path).map_err(io_at(&path))?;
                    let lines = text.lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
                    transcripts.push((id.to_owned(), lines));
                }
                None => without.push(key.clone()),
            }
        }
        let database = sessionlog_sqlite_store::database_path(to, store.id());
        if database.exists() {
            return Err(DbError::Exists { path: database }.into());
        }
        plans.push((store.id().to_owned(), entries, transcripts, without));
    }
    let mut out = Vec::new();
    for (agent, entries, transcripts, without_transcript) in plans {
        let database = sessionlog_sqlite_store::database_path(to, &agent);
        if let Some(dir) = database.parent() {
            fs::create_dir_all(dir).map_err(io_at(dir))?;
        }
        let export = Export { agent_id: &agent, entries: &entries, transcripts: &transcripts, now_ms };
        let written = sessionlog_sqlite_store::create(&database, &export)?;
        out.push(Exported { agent, written, without_transcript });
    }
    Ok(out)
}

fn source_index(layout: &Layout) -> PathBuf {
    layout.dir().join(sessionlog_sessions::paths::SESSIONS_JSON)
}

/// What [`AgentStore::cleanup`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    /// The plan (what goes, why, what stays).
    pub plan: Plan,
    /// The events appended (none unless enforced).
    pub events: Vec<StoreEvent>,
    /// Transcripts renamed to `<file>.deleted.<time>`.
    pub archived_files: Vec<String>,
}

/// What [`AgentStore::turn`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The decision and the event that records it.
    pub plan: TurnPlan,
    /// Whether the event was appended.
    pub applied: bool,
    /// The replaced generation's transcript, renamed to `<file>.reset.<time>`.
    pub archived: Option<String>,
}

impl TurnOutcome {
    /// The document `sessionlog turn` prints: key, decision, trigger, prompt,
    /// session ids, whether it was applied, the archived transcript.
    pub fn to_json(&self) -> Value {
        let plan = &self.plan;
        serde_json::json!({
            "key": plan.key,
            "decision": plan.decision,
            "trigger": plan.trigger,
            "prompt": plan.prompt,
            "sessionId": plan.session_id,
            "previousSessionId": plan.previous_session_id,
            "applied": self.applied,
            "archivedTranscript": self.archived,
        })
    }
}

impl AgentStore {
    /// Appends one `patched` event for `key` (a present `null` clears a
    /// field) and re-projects; returns the number of events in the log.
    pub fn patch(
        &self,
        key: &str,
        patch: Map<String, Value>,
        at_ms: i64,
        preserve_activity: bool,
    ) -> Result<usize, StoreError> {
        self.require_log()?;
        let mut writer = self.writer()?;
        let event = StoreEvent::Patched { key: key.to_owned(), at: at_ms, patch, preserve_activity };
        writer.append(std::slice::from_ref(&event))?;
        Ok(writer.events())
    }

    /// Rebuilds every session's token counters from its transcript (the fold
    /// along the current path, as a live session keeps them): one
    /// `usage_recorded` event per session whose counters differ; returns them.
    pub fn record_usage(&self) -> Result<Vec<StoreEvent>, StoreError> {
        self.require_log()?;
        let mut writer = self.writer()?;
        let mut new = Vec::new();
        for (key, entry) in writer.store() {
            let Some(entry) = entry.as_object() else { continue };
            let Some(path) = self.transcript_path(entry).filter(|p| p.is_file()) else { continue };
            let transcript = match sessionlog_event_log::load(&path, Mode::Lenient) {
                Ok(loaded) => loaded.transcript,
                Err(e) => {
                    tracing::warn!(key = %key, "{e}");
                    continue;
                }
            };
            let size = path_counters(&transcript, PiRules::V0_58, &PiEstimator)
                .map_err(|source| StoreError::Cycle { path: path.clone(), source })?;
            new.extend(usage_event(key, Some(entry), &size, None));
        }
        writer.append(&new)?;
        Ok(new)
    }

    /// OpenClaw's store maintenance at `now_ms`: the plan, and with `enforce`
    /// its events appended under the lock, then each transcript that lost
    /// its last entry renamed to `<file>.deleted.<time>` (the log says
    /// archived first: a failure after it leaves a file in place, never a loss).
    /// A store without a log (OpenClaw's `sessions.json`, or its SQLite
    /// store) is planned from OpenClaw's own entries, report only. With
    /// `fix_missing`, entries whose transcript holds no message go first
    /// (OpenClaw's `--fix-missing`, see [`missing_transcript_keys`]).
    pub fn cleanup(
        &self,
        now_ms: i64,
        settings: &Settings,
        active_key: Option<&str>,
        fix_missing: bool,
        enforce: bool,
    ) -> Result<Cleaned, StoreError> {
        let maintenance_plan = |store: &Map<String, Value>| -> Result<Plan, StoreError> {
            let missing = if fix_missing {
                missing_transcript_keys(store, |_, entry| self.transcript_check(entry))?
            } else {
                Vec::new()
            };
            Ok(plan_without_missing(store, &missing, now_ms, settings, active_key))
        };
        if !enforce && (self.is_read_only() || !self.has_log()) {
            let store = self.read_index()?;
            let plan = maintenance_plan(&store)?;
            return Ok(Cleaned { plan, events: Vec::new(), archived_files: Vec::new() });
        }
        self.require_log()?;
        if !enforce {
            let store = self.project(None)?;
            let plan = maintenance_plan(&store)?;
            return Ok(Cleaned { plan, events: Vec::new(), archived_files: Vec::new() });
        }
        let mut writer = self.writer()?;
        let before = writer.store().clone();
        let plan = maintenance_plan(&before)?;
        let events = plan.events(now_ms);
        let mut archived_files = Vec::new();
        if !events.is_empty() {
            writer.append(&events)?;
            for removed in &plan.removed {
                let Some(session_id) = &removed.archive_session_id else { continue };
                let file =
                    before.get(&removed.key).and_then(|e| e.get("sessionFile")).and_then(Value::as_str);
                if let Some(name) = archive_transcript(self.dir(), session_id, file, "deleted", now_ms)? {
                    archived_files.push(name);
                }
            }
        }
        Ok(Cleaned { plan, events, archived_files })
    }

    /// One inbound turn (OpenClaw's `initSessionState` decision): planned
    /// against the store, and with `apply` recorded under the lock — activity,
    /// a first session, or a reset whose old transcript is then archived as
    /// `<file>.reset.<time>`.
    pub fn turn(&self, turn: &Turn<'_>, apply: bool) -> Result<TurnOutcome, StoreError> {
        self.require_log()?;
        if !apply {
            let events = self.events()?;
            let log = self.log_path();
            let mut store = sessionlog_sessions::store::fold(&events)
                .map_err(|source| StoreError::Fold { path: log.clone(), source })?;
            let plan = turn_plan(turn, &store, events.len());
            // The dry run refuses what applying would refuse (a key that is not one).
            sessionlog_sessions::store::apply(&mut store, &plan.event)
                .map_err(|source| StoreError::Fold { path: log, source })?;
            return Ok(TurnOutcome { plan, applied: false, archived: None });
        }
        let mut writer = self.writer()?;
        let plan = turn_plan(turn, writer.store(), writer.events());
        writer.append(std::slice::from_ref(&plan.event))?;
        let archived = match &plan.archive {
            Some((old, file)) => archive_transcript(self.dir(), old, file.as_deref(), "reset", turn.now_ms)?,
            None => None,
        };
        Ok(TurnOutcome { plan, applied: true, archived })
    }

    /// Appends `events` as they are (the live loop's compaction counts,
    /// memory flushes, overrides, …) and re-projects.
    pub fn append(&self, events: &[StoreEvent]) -> Result<(), StoreError> {
        self.writer()?.append(events)
    }
}
