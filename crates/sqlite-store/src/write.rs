//! Creating an agent database in OpenClaw's current layout.
//!
//! [`create`] writes a new `openclaw-agent.sqlite` from session entries and
//! transcripts, as OpenClaw's own writer leaves one:
//!
//! * the whole agent schema of OpenClaw 2026.9 (`schema-v23.sql`, the
//!   statements an OpenClaw-made database lists in `sqlite_master`; OpenClaw
//!   compares every table, index and trigger with its own, text for text, and
//!   refuses a database that lacks one), incremental auto-vacuum set before
//!   the first table, WAL journal, `user_version` 23, the `schema_meta` row
//!   naming the agent, and the `session_key_contract` row;
//! * per session key a `session_nodes` row — the entry text exactly as given,
//!   marked valid, with the query columns OpenClaw projects from it — and a
//!   `session_windows` row for its session id (a later key with the same id
//!   takes the window over, as in OpenClaw);
//! * per transcript one `transcript_events` row per line, `seq` from 0, the
//!   line verbatim (never recompressed), `created_at` from the line's
//!   `timestamp`, plus its `transcript_event_identities` row.
//!
//! Search indexes and other derived tables are left for OpenClaw to build.
//! Writes follow OpenClaw's rules: short transactions (the schema, then one
//! per session, then at most [`EVENTS_PER_TRANSACTION`] events each), foreign
//! keys on. The file is built under a temporary name in the target folder,
//! checkpointed into one file, synced, and only then linked to its name, so
//! no reader ever sees half a database; an existing database is never
//! replaced. Input is checked before anything is written.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, Transaction};
use serde_json::{Map, Value};

use crate::{Error, Result, BUSY_TIMEOUT_MS, SCHEMA_VERSION};

/// OpenClaw 2026.9's agent schema, as an OpenClaw-made database lists it.
const SCHEMA_SQL: &str = include_str!("schema-v23.sql");

/// Events written per transaction.
pub const EVENTS_PER_TRANSACTION: usize = 1_000;

/// What to write.
#[derive(Debug, Clone, Copy)]
pub struct Export<'a> {
    /// The agent the database belongs to.
    pub agent_id: &'a str,
    /// Session entries by key, in the order to store them (`sessions.json`'s).
    /// Each needs a string `sessionId` and an integer `updatedAt`.
    pub entries: &'a Map<String, Value>,
    /// Transcripts as (session id, JSONL lines without `\n`); every session id
    /// must be some entry's `sessionId`, every line a JSON object.
    pub transcripts: &'a [(String, Vec<String>)],
    /// Unix ms recorded as the database's creation time (and for events
    /// without a readable `timestamp`).
    pub now_ms: i64,
}

/// What [`create`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The database file.
    pub path: PathBuf,
    /// Session rows.
    pub entries: usize,
    /// Transcript generations (windows).
    pub windows: usize,
    /// Transcript events.
    pub events: usize,
}

fn text(entry: &Map<String, Value>, field: &str) -> Option<String> {
    entry.get(field).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

fn nested_text(entry: &Map<String, Value>, field: &str, inner: &str) -> Option<String> {
    entry.get(field).and_then(Value::as_object).and_then(|o| text(o, inner))
}

/// A finite number that fits an `INTEGER` column (OpenClaw's STRICT tables).
pub(crate) fn integer(value: Option<&Value>) -> Option<i64> {
    let v = value?;
    v.as_i64().or_else(|| {
        v.as_f64().filter(|f| f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)
    })
}

fn one_of(value: Option<String>, allowed: &[&str]) -> Option<String> {
    value.filter(|v| allowed.contains(&v.as_str()))
}

const STATUSES: &[&str] = &["running", "done", "failed", "killed", "timeout"];

/// The `session_nodes` query columns OpenClaw projects from an entry.
pub(crate) struct NodeRow {
    session_id: String,
    updated_at: i64,
    status: Option<String>,
    created_at: Option<i64>,
    created_via: Option<String>,
    created_actor_type: Option<String>,
    created_actor_id: Option<String>,
    project_id: Option<String>,
    parent_session_key: Option<String>,
    spawned_by: Option<String>,
    fork_source_session_key: Option<String>,
    fork_source_session_id: Option<String>,
    fork_source_entry_id: Option<String>,
    label: Option<String>,
    display_name: Option<String>,
    category: Option<String>,
    icon: Option<String>,
    pinned_at: Option<i64>,
    archived_at: Option<i64>,
    last_read_at: Option<i64>,
    last_interaction_at: Option<i64>,
    last_activity_at: Option<i64>,
}

/// The `session_windows` columns OpenClaw projects from an entry.
pub(crate) struct WindowRow {
    pub(crate) created_at: i64,
    pub(crate) acp_owned: i64,
    pub(crate) plugin_owner_id: Option<String>,
    pub(crate) hook_external_content_source: Option<String>,
    pub(crate) previous_session_id: Option<String>,
    pub(crate) session_scope: &'static str,
    pub(crate) started_at: Option<i64>,
    pub(crate) ended_at: Option<i64>,
    pub(crate) chat_type: Option<String>,
    pub(crate) channel: Option<String>,
    pub(crate) account_id: Option<String>,
    pub(crate) model_provider: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) agent_harness_id: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) parent_session_key: Option<String>,
    pub(crate) spawned_by: Option<String>,
    pub(crate) display_name: Option<String>,
}

pub(crate) fn node_row(e: &Map<String, Value>, session_id: String, updated_at: i64) -> NodeRow {
    let spawned_by = text(e, "spawnedBy");
    NodeRow {
        session_id,
        updated_at,
        status: one_of(text(e, "status"), STATUSES),
        created_at: integer(e.get("createdAt")),
        created_via: one_of(
            e.get("createdVia").and_then(Value::as_str).map(str::to_owned),
            &["operator", "spawn", "channel", "cron", "talk", "run", "plugin", "internal"],
        ),
        created_actor_type: one_of(
            e.get("createdActor").and_then(|a| a.get("type")).and_then(Value::as_str).map(str::to_owned),
            &["human", "agent", "system"],
        ),
        created_actor_id: nested_text(e, "createdActor", "id"),
        project_id: text(e, "projectId"),
        parent_session_key: text(e, "parentSessionKey").or_else(|| spawned_by.clone()),
        spawned_by,
        fork_source_session_key: nested_text(e, "forkSource", "sessionKey"),
        fork_source_session_id: nested_text(e, "forkSource", "sessionId"),
        fork_source_entry_id: nested_text(e, "forkSource", "entryId"),
        label: text(e, "label"),
        display_name: text(e, "displayName"),
        category: text(e, "category"),
        icon: text(e, "icon"),
        pinned_at: integer(e.get("pinnedAt")),
        archived_at: integer(e.get("archivedAt")),
        last_read_at: integer(e.get("lastReadAt")),
        last_interaction_at: integer(e.get("lastInteractionAt")),
        last_activity_at: integer(e.get("lastActivityAt")),
    }
}

pub(crate) fn window_row(e: &Map<String, Value>, key: &str, updated_at: i64) -> WindowRow {
    let chat_type = one_of(text(e, "chatType"), &["direct", "group", "channel"]);
    let lower = key.trim().to_lowercase();
    let session_scope = match chat_type.as_deref() {
        Some("direct") if lower == "main" || lower.ends_with(":main") => "shared-main",
        Some("group") => "group",
        Some("channel") => "channel",
        _ => "conversation",
    };
    // Channel and account come only from the canonical `delivery` record.
    let external =
        e.get("delivery").and_then(Value::as_object).filter(|d| d.get("kind") == Some(&"external".into()));
    let context = external.and_then(|d| d.get("context")).and_then(Value::as_object);
    let channel = context.and_then(|c| text(c, "channel")).or_else(|| {
        external.and_then(|d| d.get("origin")).and_then(Value::as_object).and_then(|o| text(o, "provider"))
    });
    let created_at = ["sessionStartedAt", "startedAt", "updatedAt"]
        .iter()
        .filter_map(|f| integer(e.get(*f)))
        .find(|t| *t >= 0)
        .unwrap_or(updated_at);
    let hook = match e.get("hookExternalContentSource").and_then(Value::as_str) {
        Some("email") | Some("webhook") => Some("webhook".to_owned()),
        Some("gmail") => Some("gmail".to_owned()),
        _ => None,
    };
    let acp = e.get("acp").is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false)));
    WindowRow {
        created_at,
        acp_owned: i64::from(acp),
        plugin_owner_id: text(e, "pluginOwnerId"),
        hook_external_content_source: hook,
        previous_session_id: text(e, "previousSessionId"),
        session_scope,
        started_at: integer(e.get("startedAt")),
        ended_at: integer(e.get("endedAt")),
        chat_type,
        channel,
        account_id: context.and_then(|c| text(c, "accountId")),
        model_provider: text(e, "modelProvider"),
        model: text(e, "model"),
        agent_harness_id: text(e, "agentHarnessId"),
        status: one_of(text(e, "status"), STATUSES),
        parent_session_key: text(e, "parentSessionKey"),
        spawned_by: text(e, "spawnedBy"),
        display_name: text(e, "displayName")
            .or_else(|| text(e, "label"))
            .or_else(|| text(e, "subject"))
            .or_else(|| text(e, "groupId")),
    }
}

/// One transcript line, checked and with the facts its rows need.
pub(crate) struct EventRow<'a> {
    pub(crate) line: &'a str,
    pub(crate) created_at: i64,
    pub(crate) id: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) parent_id: Option<String>,
}

pub(crate) fn event_row<'a>(line: &'a str, now_ms: i64) -> Result<EventRow<'a>, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    if line.contains(['\n', '\r']) {
        return Err("contains a line break".into());
    }
    let created_at = object
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_millisecond())
        .unwrap_or(now_ms);
    let field = |name: &str| object.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok(EventRow { line, created_at, id: field("id"), kind: field("type"), parent_id: field("parentId") })
}

/// Creates the database at `path` (normally [`crate::database_path`]) from
/// `export`. Fails with [`Error::Exists`] if the file is there, and with
/// [`Error::BadInput`] — before writing anything — on an entry without a
/// string `sessionId` and integer `updatedAt`, a transcript no entry points
/// at, or a line that is not a JSON object.
pub fn create(path: &Path, export: &Export<'_>) -> Result<Written> {
    let bad = |what: String, reason: String| Error::BadInput { path: path.to_owned(), what, reason };
    if path.exists() {
        return Err(Error::Exists { path: path.to_owned() });
    }
    // Check everything first.
    let mut nodes = Vec::with_capacity(export.entries.len());
    let mut window_owner: HashMap<&str, usize> = HashMap::new();
    for (i, (key, value)) in export.entries.iter().enumerate() {
        let entry = value.as_object().ok_or_else(|| bad(key.clone(), "entry is not a JSON object".into()))?;
        let session_id = entry
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad(key.clone(), "entry has no string sessionId".into()))?;
        let updated_at = integer(entry.get("updatedAt"))
            .ok_or_else(|| bad(key.clone(), "entry has no integer updatedAt".into()))?;
        let entry_json =
            sessionlog_events::json::to_js_string(value).map_err(|e| bad(key.clone(), e.to_string()))?;
        window_owner.insert(session_id, i);
        nodes.push((key, entry, entry_json, node_row(entry, session_id.to_owned(), updated_at)));
    }
    let mut seen = HashSet::new();
    let mut transcripts = Vec::with_capacity(export.transcripts.len());
    for (session_id, lines) in export.transcripts {
        if !window_owner.contains_key(session_id.as_str()) {
            return Err(bad(
                format!("transcript {session_id}"),
                "no session entry has this sessionId".into(),
            ));
        }
        if !seen.insert(session_id.as_str()) {
            return Err(bad(format!("transcript {session_id}"), "given twice".into()));
        }
        let rows = lines
            .iter()
            .enumerate()
            .map(|(n, line)| {
                event_row(line, export.now_ms)
                    .map_err(|r| bad(format!("transcript {session_id} line {}", n + 1), r))
            })
            .collect::<Result<Vec<_>>>()?;
        transcripts.push((session_id.as_str(), rows));
    }

    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_owned(), source })?;
    // A fresh, empty file under a random name (created with `O_EXCL`), so
    // nothing already there — a file or a link planted at a guessed name —
    // is opened or removed; SQLite takes an empty file as a new database.
    let (tmp, created) = sessionlog_event_log::create_temp_beside(path, "tmp")
        .map_err(|source| Error::Io { path: dir.to_owned(), source })?;
    drop(created);
    let cleanup = |tmp: &Path| {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = tmp.as_os_str().to_owned();
            p.push(suffix);
            let _ = fs::remove_file(PathBuf::from(p));
        }
    };
    let result = (|| -> Result<Written> {
        let sqlite = |source| Error::Sqlite { path: path.to_owned(), source };
        let mut conn = Connection::open(&tmp).map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(sqlite)?;
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL").map_err(sqlite)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sqlite)?;
        conn.pragma_update(None, "foreign_keys", true).map_err(sqlite)?;

        let tx = conn.transaction().map_err(sqlite)?;
        tx.execute_batch(SCHEMA_SQL).map_err(sqlite)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(sqlite)?;
        tx.execute(
            "INSERT INTO schema_meta (meta_key, role, schema_version, agent_id, app_version, created_at, updated_at) \
             VALUES ('primary', 'agent', ?1, ?2, ?3, ?4, ?4)",
            params![SCHEMA_VERSION, export.agent_id, concat!("sessionlog ", env!("CARGO_PKG_VERSION")), export.now_ms],
        )
        .map_err(sqlite)?;
        tx.execute(
            "INSERT INTO session_key_contract (id, main_key, canonical_ready, updated_at) VALUES (1, 'main', NULL, 0)",
            [],
        )
        .map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;

        for (i, (key, entry, entry_json, node)) in nodes.iter().enumerate() {
            let tx = conn.transaction().map_err(sqlite)?;
            insert_node(&tx, key, entry_json, node).map_err(sqlite)?;
            // The last key holding a session id owns its window.
            if window_owner.get(node.session_id.as_str()) == Some(&i) {
                insert_window(
                    &tx,
                    key,
                    &node.session_id,
                    node.updated_at,
                    &window_row(entry, key, node.updated_at),
                    None,
                )
                .map_err(sqlite)?;
            }
            tx.commit().map_err(sqlite)?;
        }
        let mut events = 0;
        for (session_id, rows) in &transcripts {
            let mut ids = HashSet::new();
            for (chunk_no, chunk) in rows.chunks(EVENTS_PER_TRANSACTION).enumerate() {
                let tx = conn.transaction().map_err(sqlite)?;
                for (j, row) in chunk.iter().enumerate() {
                    let seq = (chunk_no * EVENTS_PER_TRANSACTION + j) as i64;
                    insert_event(&tx, session_id, seq, row, &mut ids).map_err(sqlite)?;
                }
                tx.commit().map_err(sqlite)?;
                events += chunk.len();
            }
        }
        // One self-contained file before it gets its name.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(sqlite)?;
        conn.close().map_err(|(_, e)| sqlite(e))?;
        let io = |source| Error::Io { path: tmp.clone(), source };
        fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        // A link fails if the name exists: never replaces a database that appeared meanwhile.
        fs::hard_link(&tmp, path).map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => Error::Exists { path: path.to_owned() },
            _ => Error::Io { path: path.to_owned(), source },
        })?;
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| Error::Io { path: dir.to_owned(), source })?;
        Ok(Written { path: path.to_owned(), entries: nodes.len(), windows: window_owner.len(), events })
    })();
    cleanup(&tmp);
    result
}

/// Inserts or replaces the row of `key` (an existing row keeps its rowid,
/// so its windows and transcripts stay).
pub(crate) fn insert_node(
    tx: &Transaction<'_>,
    key: &str,
    entry_json: &str,
    n: &NodeRow,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at, status, created_at, \
         created_via, created_actor_type, created_actor_id, project_id, parent_session_key, spawned_by, \
         fork_source_session_key, fork_source_session_id, fork_source_entry_id, label, display_name, category, icon, \
         pinned_at, archived_at, last_read_at, last_interaction_at, last_activity_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, \
         ?23, ?24) ON CONFLICT (session_key) DO UPDATE SET current_session_id = excluded.current_session_id, entry_json = excluded.entry_json, updated_at = excluded.updated_at, status = excluded.status, \
         created_at = excluded.created_at, created_via = excluded.created_via, created_actor_type = excluded.created_actor_type, created_actor_id = excluded.created_actor_id, project_id = excluded.project_id, parent_session_key = excluded.parent_session_key, spawned_by = excluded.spawned_by, fork_source_session_key = excluded.fork_source_session_key, \
         fork_source_session_id = excluded.fork_source_session_id, fork_source_entry_id = excluded.fork_source_entry_id, label = excluded.label, display_name = excluded.display_name, category = excluded.category, icon = excluded.icon, pinned_at = excluded.pinned_at, archived_at = excluded.archived_at, last_read_at = excluded.last_read_at, last_interaction_at = excluded.last_interaction_at, last_activity_at = excluded.last_activity_at",
        params![
            key,
            n.session_id,
            entry_json,
            n.updated_at,
            n.status,
            n.created_at,
            n.created_via,
            n.created_actor_type,
            n.created_actor_id,
            n.project_id,
            n.parent_session_key,
            n.spawned_by,
            n.fork_source_session_key,
            n.fork_source_session_id,
            n.fork_source_entry_id,
            n.label,
            n.display_name,
            n.category,
            n.icon,
            n.pinned_at,
            n.archived_at,
            n.last_read_at,
            n.last_interaction_at,
            n.last_activity_at,
        ],
    )?;
    // The insert trigger marks the row unchecked; the entry was checked above
    // (object, sessionId, updatedAt equal to the columns), as OpenClaw's writer does.
    tx.execute("UPDATE session_nodes SET entry_valid = 1 WHERE session_key = ?1", [key])?;
    Ok(())
}

/// Inserts the window of `session_id`, or brings an existing one's
/// columns up to date as OpenClaw's upsert does (its start stays).
pub(crate) fn insert_window(
    tx: &Transaction<'_>,
    key: &str,
    session_id: &str,
    updated_at: i64,
    w: &WindowRow,
    reason: Option<&str>,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO session_windows (session_id, session_key, previous_session_id, reason, session_scope, \
         created_at, updated_at, session_entry_provenance, acp_owned, plugin_owner_id, hook_external_content_source, \
         started_at, ended_at, status, chat_type, channel, account_id, model_provider, model, agent_harness_id, \
         parent_session_key, spawned_by, display_name) \
         VALUES (?1, ?2, ?3, ?22, ?4, ?5, ?6, 1, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, \
         ?20, ?21) ON CONFLICT (session_id) DO UPDATE SET previous_session_id = excluded.previous_session_id, \
         reason = excluded.reason, session_scope = excluded.session_scope, updated_at = excluded.updated_at, session_entry_provenance = excluded.session_entry_provenance, acp_owned = excluded.acp_owned, plugin_owner_id = excluded.plugin_owner_id, hook_external_content_source = excluded.hook_external_content_source, \
         started_at = excluded.started_at, ended_at = excluded.ended_at, status = excluded.status, chat_type = excluded.chat_type, channel = excluded.channel, account_id = excluded.account_id, \
         model_provider = excluded.model_provider, model = excluded.model, agent_harness_id = excluded.agent_harness_id, parent_session_key = excluded.parent_session_key, spawned_by = excluded.spawned_by, display_name = excluded.display_name",
        params![
            session_id,
            key,
            w.previous_session_id,
            w.session_scope,
            w.created_at,
            updated_at,
            w.acp_owned,
            w.plugin_owner_id,
            w.hook_external_content_source,
            w.started_at,
            w.ended_at,
            w.status,
            w.chat_type,
            w.channel,
            w.account_id,
            w.model_provider,
            w.model,
            w.agent_harness_id,
            w.parent_session_key,
            w.spawned_by,
            w.display_name,
            reason,
        ],
    )?;
    Ok(())
}

/// The `transcript_events` row of one event, the line verbatim.
pub(crate) fn insert_event_row(
    tx: &Transaction<'_>,
    session_id: &str,
    seq: i64,
    row: &EventRow<'_>,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_utf8_bytes) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![session_id, seq, row.line, row.created_at, row.line.len() as i64],
    )?;
    Ok(())
}

fn insert_event<'a>(
    tx: &Transaction<'_>,
    session_id: &str,
    seq: i64,
    row: &'a EventRow<'_>,
    ids: &mut HashSet<&'a str>,
) -> rusqlite::Result<()> {
    insert_event_row(tx, session_id, seq, row)?;
    // One identity per event id; a repeated id keeps its first event.
    if let Some(id) = row.id.as_deref().filter(|id| ids.insert(id)) {
        tx.execute(
            "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, parent_id, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![session_id, id, seq, row.kind, row.parent_id, row.created_at],
        )?;
    }
    Ok(())
}
