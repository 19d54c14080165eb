//! `sessionlog import` and `sessionlog sessions`: an OpenClaw state directory
//! (`agents/<agentId>/sessions/`) as an event-sourced store — `events.jsonl`
//! is the log, `sessions.json` its projection.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use sessionlog_event_log::{replace_atomically, AppendOptions, Appender};
use sessionlog_events::json::{to_js_string, write_js_pretty};
use sessionlog_events::Entry;
use sessionlog_sessions::store::{fold, import_events, StoreEvent};

/// The store's log file in a sessions folder.
const EVENTS: &str = "events.jsonl";
/// The projection file.
const SESSIONS: &str = "sessions.json";

/// `(agent id, sessions folder)` pairs of a state directory or a single sessions folder.
fn sessions_dirs(path: &Path) -> Result<Vec<(String, PathBuf)>> {
    let agents = path.join("agents");
    if agents.is_dir() {
        let mut out = Vec::new();
        let mut items: Vec<PathBuf> = fs::read_dir(&agents)
            .with_context(|| format!("{}", agents.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        items.sort();
        for agent in items {
            let dir = agent.join("sessions");
            if dir.is_dir() {
                let id = agent.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                out.push((sessionlog_sessions::keys::normalize_agent_id(&id), dir));
            }
        }
        return Ok(out);
    }
    if path.join(SESSIONS).is_file() || path.join(EVENTS).is_file() {
        // A bare sessions folder: agents/<id>/sessions, or "main".
        let id = path
            .parent()
            .filter(|p| p.parent().and_then(|pp| pp.file_name()).is_some_and(|n| n == "agents"))
            .and_then(|p| p.file_name())
            .map_or("main".to_owned(), |n| n.to_string_lossy().into_owned());
        return Ok(vec![(sessionlog_sessions::keys::normalize_agent_id(&id), path.to_owned())]);
    }
    bail!(
        "{}: neither an OpenClaw state directory (agents/<id>/sessions/) nor a sessions folder",
        path.display()
    )
}

fn read_store(path: &Path) -> Result<Map<String, Value>> {
    let text = fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("{}:{}:{}: not a session store: {e}", path.display(), e.line(), e.column())
    })?;
    match value {
        Value::Object(map) => Ok(map),
        other => {
            bail!("{}: not a session store: expected a JSON object, found {}", path.display(), kind(&other))
        }
    }
}

/// The sessions folders of `store`, only `agent`'s when one is named.
fn agent_dirs(store: &Path, agent: Option<&str>) -> Result<Vec<(String, PathBuf)>> {
    let wanted = agent.map(sessionlog_sessions::keys::normalize_agent_id);
    let mut dirs = sessions_dirs(store)?;
    dirs.retain(|(id, _)| wanted.as_ref().is_none_or(|w| w == id));
    Ok(dirs)
}

/// The sessions folder of one agent in a state directory.
fn agent_dir(store: &Path, agent: &str) -> PathBuf {
    store.join("agents").join(sessionlog_sessions::keys::normalize_agent_id(agent)).join("sessions")
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

fn is_transcript_file(name: &str) -> bool {
    name != EVENTS && (name.ends_with(".jsonl") || sessionlog_sessions::paths::is_archived_transcript(name))
}

/// `JSON.stringify(store, null, 2)`, as OpenClaw writes `sessions.json`.
fn render(store: &Map<String, Value>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write_js_pretty(&mut out, &Value::Object(store.clone()))?;
    Ok(out)
}

/// Reads a store log; an unreadable line is an error naming file and line.
fn read_events(path: &Path) -> Result<Vec<StoreEvent>> {
    let text = fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| anyhow::anyhow!("{}:{}:{}: {e}", path.display(), i + 1, e.column()))
        })
        .collect()
}

/// Folds `events` (the log so far with `new` at its end), and only if that
/// succeeds appends `new` to the log and rewrites `sessions.json` from the
/// fold, so the projection always matches the log.
fn append_and_project(
    appender: &mut Appender,
    dir: &Path,
    events: &[StoreEvent],
    new: &[StoreEvent],
) -> Result<()> {
    let store = fold(events).with_context(|| format!("{}", dir.join(EVENTS).display()))?;
    let lines: Vec<Entry> = new
        .iter()
        .map(|e| Entry::parse(&to_js_string(&serde_json::to_value(e)?)?).map_err(|e| anyhow::anyhow!("{e}")))
        .collect::<Result<_>>()?;
    appender.append_batch(&lines)?;
    write_projection(dir, &store)
}

/// Replaces `sessions.json` in `dir` with `store`, atomically.
fn write_projection(dir: &Path, store: &Map<String, Value>) -> Result<()> {
    replace_atomically(&dir.join(SESSIONS), &render(store)?).with_context(|| format!("{}", dir.display()))
}

/// `sessionlog import PATH --into DIR`.
pub(crate) fn import(path: &Path, into: &Path, out: &mut dyn Write) -> Result<()> {
    let dirs = sessions_dirs(path)?;
    // Read and check everything before writing anything.
    let mut plans = Vec::new();
    for (agent, dir) in &dirs {
        let store_path = dir.join(SESSIONS);
        let store = if store_path.exists() { read_store(&store_path)? } else { Map::new() };
        let events = import_events(&store).with_context(|| format!("{}", store_path.display()))?;
        let target = into.join("agents").join(agent).join("sessions");
        if target.join(EVENTS).metadata().is_ok_and(|m| m.len() > 0) {
            bail!(
                "{}: already holds a store log; import into an empty folder",
                target.join(EVENTS).display()
            );
        }
        plans.push((agent.clone(), dir.clone(), target, events));
    }
    for (agent, dir, target, events) in plans {
        fs::create_dir_all(&target).with_context(|| format!("{}", target.display()))?;
        let mut copied = 0;
        let mut names: Vec<String> = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names.into_iter().filter(|n| is_transcript_file(n)) {
            let (from, to) = (dir.join(&name), target.join(&name));
            if from == to {
                continue;
            }
            if to.exists() {
                if fs::read(&from)? != fs::read(&to)? {
                    bail!("{}: exists with other content; not overwritten", to.display());
                }
                continue;
            }
            fs::copy(&from, &to).with_context(|| format!("{}", to.display()))?;
            copied += 1;
        }
        let mut appender = Appender::open(&target.join(EVENTS), AppendOptions::default())?;
        append_and_project(&mut appender, &target, &events, &events)?;
        drop(appender);
        writeln!(
            out,
            "agent {agent}: {} sessions imported, {copied} transcripts copied into {}",
            events.len(),
            target.display()
        )?;
    }
    Ok(())
}

/// `sessionlog sessions --store DIR [--agent ID] [--at N] [--rebuild]`.
pub(crate) fn sessions(
    store_dir: &Path,
    agent: Option<&str>,
    at: Option<usize>,
    rebuild: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut merged = Map::new();
    for (id, dir) in agent_dirs(store_dir, agent)? {
        let log = dir.join(EVENTS);
        if !log.exists() {
            continue;
        }
        let mut events = read_events(&log)?;
        if let Some(n) = at {
            events.truncate(n);
        }
        let store = fold(&events).with_context(|| format!("{}", log.display()))?;
        if rebuild {
            if at.is_some() {
                bail!("--rebuild writes the projection of the whole log; it does not take --at");
            }
            write_projection(&dir, &store)?;
            writeln!(out, "rebuilt {} ({} sessions)", dir.join(SESSIONS).display(), store.len())?;
            continue;
        }
        for (key, entry) in store {
            // Keys carry their agent id already; a legacy key gets it prefixed.
            let key = if sessionlog_sessions::parse_agent_key(&key).is_some() {
                key
            } else {
                format!("agent:{id}:{key}")
            };
            merged.insert(key, entry);
        }
    }
    if !rebuild {
        crate::commands::print_pretty(out, &Value::Object(merged))?;
    }
    Ok(())
}

/// `sessionlog patch`: one `patched` event, appended and projected under the
/// store's lock, so concurrent writers (threads or processes) serialise and
/// no update is lost: each re-reads the log after taking the lock.
pub(crate) struct PatchArgs<'a> {
    pub(crate) store: &'a Path,
    pub(crate) agent: &'a str,
    pub(crate) key: &'a str,
    pub(crate) set: &'a [String],
    pub(crate) clear: &'a [String],
    pub(crate) preserve_activity: bool,
    pub(crate) at: Option<i64>,
}

pub(crate) fn patch(a: &PatchArgs<'_>, out: &mut dyn Write) -> Result<()> {
    let dir = agent_dir(a.store, a.agent);
    let log = dir.join(EVENTS);
    if !log.is_file() {
        bail!("{}: no store log (import a store first)", log.display());
    }
    let mut fields = Map::new();
    for item in a.set {
        let (k, v) =
            item.split_once('=').ok_or_else(|| anyhow::anyhow!("--set {item}: expected FIELD=JSON"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::from(v));
        fields.insert(k.to_owned(), value);
    }
    for k in a.clear {
        fields.insert(k.clone(), Value::Null);
    }
    let at = a.at.unwrap_or_else(|| jiff::Timestamp::now().as_millisecond());
    let mut appender = lock_log(&log, true)?.context("the store log's lock")?;
    let mut events = read_events(&log)?;
    let event = StoreEvent::Patched {
        key: a.key.to_owned(),
        at,
        patch: fields,
        preserve_activity: a.preserve_activity,
    };
    events.push(event);
    append_and_project(&mut appender, &dir, &events, &events[events.len() - 1..])?;
    drop(appender);
    writeln!(out, "patched {} ({} events)", a.key, events.len())?;
    Ok(())
}

/// `sessionlog usage --store DIR`: token counters from each session's
/// transcript (the last valid assistant usage on its current path) as
/// `usage_recorded` events, appended and projected under the store's lock.
/// Sessions whose counters already match are left alone.
pub(crate) fn usage(store_dir: &Path, agent: Option<&str>, out: &mut dyn Write) -> Result<()> {
    use sessionlog_sessions::paths::{transcript_path, PathError};
    for (id, dir) in agent_dirs(store_dir, agent)? {
        let log = dir.join(EVENTS);
        if !log.is_file() {
            continue;
        }
        let mut appender = lock_log(&log, true)?.context("the store log's lock")?;
        let mut events = read_events(&log)?;
        let store = fold(&events).with_context(|| format!("{}", log.display()))?;
        let mut new = Vec::new();
        for (key, entry) in &store {
            let Some(session_id) = entry.get("sessionId").and_then(Value::as_str) else { continue };
            let file = entry.get("sessionFile").and_then(Value::as_str);
            let path = match transcript_path(&dir, session_id, file) {
                Ok(p) => p,
                // A stored path outside the folder falls back to the default name (spec §4.2).
                Err(PathError::Escapes(_)) => dir.join(format!("{session_id}.jsonl")),
                Err(e) => {
                    tracing::warn!(key = %key, "{e}");
                    continue;
                }
            };
            if !path.is_file() {
                continue;
            }
            let t = match sessionlog_event_log::load(&path, sessionlog_event_log::Mode::Lenient) {
                Ok(l) => l.transcript,
                Err(e) => {
                    tracing::warn!(key = %key, "{e}");
                    continue;
                }
            };
            let tree = t.tree();
            let Some(leaf) = t.default_leaf().and_then(|l| l.id.as_deref()).and_then(|l| tree.index_of(l))
            else {
                continue;
            };
            let path_entries = tree.path(leaf).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let last = path_entries.iter().rev().find_map(|&i| {
                let m = t.entries[i].message()?;
                sessionlog_tokens::valid_usage(m).map(|u| (u.clone(), m.timestamp))
            });
            let Some((u, ts)) = last else { continue };
            let n = |v: Option<f64>| v.unwrap_or(0.0).max(0.0) as u64;
            let total = sessionlog_tokens::usage_tokens(&u);
            let total = if total.is_finite() { total as u64 } else { 0 };
            let same = entry.get("inputTokens").and_then(Value::as_u64) == Some(n(u.input))
                && entry.get("outputTokens").and_then(Value::as_u64) == Some(n(u.output))
                && entry.get("totalTokens").and_then(Value::as_u64) == Some(total);
            if same {
                continue;
            }
            new.push(StoreEvent::UsageRecorded {
                key: key.clone(),
                at: ts.map_or(0, |t| t as i64),
                input: n(u.input),
                output: n(u.output),
                cache_read: n(u.cache_read),
                cache_write: n(u.cache_write),
                total,
                context_tokens: None,
            });
        }
        let recorded = new.len();
        events.extend(new);
        append_and_project(&mut appender, &dir, &events, &events[events.len() - recorded..])?;
        drop(appender);
        writeln!(out, "agent {id}: usage recorded for {recorded} sessions")?;
    }
    Ok(())
}

/// The store log's appender, holding its lock (another writer is waited for
/// up to a minute), when the run writes; `None` for a read-only run.
fn lock_log(log: &Path, write: bool) -> Result<Option<Appender>> {
    if !write {
        return Ok(None);
    }
    let lock = sessionlog_event_log::LockOptions {
        timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    Ok(Some(Appender::open(log, AppendOptions { lock, ..AppendOptions::default() })?))
}

/// Renames a session's transcript in `dir` to `<file>.<reason>.<time>` as
/// OpenClaw archives it; returns the archive's name, or `None` when there is
/// no such file inside the folder or the archive name is taken (the file stays).
fn archive_transcript(
    dir: &Path,
    session_id: &str,
    session_file: Option<&str>,
    reason: &str,
    now_ms: i64,
) -> Result<Option<String>> {
    let Ok(path) = sessionlog_sessions::paths::transcript_path(dir, session_id, session_file) else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    let stamp = sessionlog_event_log::file_stamp(now_ms).context("--now: out of range")?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let archived = format!("{name}.{reason}.{stamp}");
    let target = path.with_file_name(&archived);
    if target.exists() {
        tracing::warn!("{}: archive exists, transcript left in place", target.display());
        return Ok(None);
    }
    fs::rename(&path, &target)
        .with_context(|| format!("archiving {} to {}", path.display(), target.display()))?;
    Ok(Some(archived))
}

/// What `sessionlog cleanup` was asked to do.
pub(crate) struct CleanupArgs<'a> {
    pub(crate) store: &'a Path,
    pub(crate) agent: Option<&'a str>,
    pub(crate) enforce: bool,
    pub(crate) now_ms: i64,
    pub(crate) active_key: Option<&'a str>,
    pub(crate) settings: sessionlog_sessions::maintenance::Settings,
}

/// `sessionlog cleanup --store DIR`: OpenClaw's store maintenance. By default
/// it reports what would go (OpenClaw's `warn` mode); `--enforce` appends a
/// `deleted` event per removed entry (`archived` when its transcript goes with
/// it) and a patch per entry archived in place under the store's lock,
/// re-projects `sessions.json`, then renames each removed entry's transcript
/// to `<file>.deleted.<time>` — archived, never deleted.
pub(crate) fn cleanup(a: &CleanupArgs<'_>, out: &mut dyn Write) -> Result<()> {
    use sessionlog_sessions::maintenance::plan;
    let mut reports = Vec::new();
    for (id, dir) in agent_dirs(a.store, a.agent)? {
        let log = dir.join(EVENTS);
        if !log.is_file() {
            bail!("{}: no store log (import a store first)", log.display());
        }
        let mut appender = lock_log(&log, a.enforce)?;
        let mut events = read_events(&log)?;
        let store = fold(&events).with_context(|| format!("{}", log.display()))?;
        let planned = plan(&store, a.now_ms, &a.settings, a.active_key);
        let mut archived_files = Vec::new();
        let changes = planned.removed.len() + planned.archived.len();
        if let Some(appender) = appender.as_mut().filter(|_| changes > 0) {
            let mut new: Vec<StoreEvent> = planned
                .removed
                .iter()
                .map(|r| match r.archive_session_id {
                    Some(_) => {
                        StoreEvent::Archived { key: r.key.clone(), at: a.now_ms, reason: "deleted".into() }
                    }
                    None => StoreEvent::Deleted { key: r.key.clone(), at: a.now_ms },
                })
                .collect();
            // Sessions archived in place keep their entry, marked as OpenClaw marks it.
            new.extend(planned.archived.iter().map(|r| StoreEvent::Patched {
                key: r.key.clone(),
                at: a.now_ms,
                patch: serde_json::json!({"archivedAt": a.now_ms, "archivedBy": null, "archiveReason": r.why.archive_reason()})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                preserve_activity: true,
            }));
            let count = new.len();
            events.extend(new);
            append_and_project(appender, &dir, &events, &events[events.len() - count..])?;
            // The log says archived first: a failure below leaves a file in place, never a loss.
            for r in &planned.removed {
                let Some(session_id) = &r.archive_session_id else { continue };
                let file = store[r.key.as_str()].get("sessionFile").and_then(Value::as_str);
                if let Some(name) = archive_transcript(&dir, session_id, file, "deleted", a.now_ms)? {
                    archived_files.push(name);
                }
            }
        }
        drop(appender);
        reports.push(serde_json::json!({
            "agent": id,
            "mode": if a.enforce { "enforce" } else { "warn" },
            "settings": a.settings,
            "removed": planned.removed,
            "archived": planned.archived,
            "kept": planned.kept,
            "activeExempted": planned.active_exempted,
            "archivedFiles": archived_files,
        }));
    }
    crate::commands::print_pretty(out, &Value::Array(reports))
}

/// What `sessionlog turn` was asked to decide (and maybe apply).
pub(crate) struct TurnArgs<'a> {
    pub(crate) store: &'a Path,
    pub(crate) agent: &'a str,
    pub(crate) key: &'a str,
    pub(crate) inbound: sessionlog_sessions::turn::Inbound<'a>,
    pub(crate) triggers: Vec<&'a str>,
    pub(crate) rule: sessionlog_sessions::policy::ResolvedReset,
    pub(crate) now_ms: i64,
    pub(crate) utc_offset_minutes: i64,
    pub(crate) apply: bool,
}

/// A session id for a new generation of `key`: UUID-shaped (version 4
/// layout), derived from the key, the time and the store's history so the same
/// turn on the same store always mints the same id.
fn mint_session_id(key: &str, now_ms: i64, events: usize) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("{key}\n{now_ms}\n{events}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// `sessionlog turn`: OpenClaw's per-turn session decision for one inbound
/// message — reset trigger, freshness — printed, and with `--apply` recorded
/// under the store's lock: activity on the same session (`patched`), a
/// `created` first session, or a `reset` to a new generation whose old
/// transcript is archived as `<file>.reset.<time>`.
pub(crate) fn turn(a: &TurnArgs<'_>, out: &mut dyn Write) -> Result<()> {
    use sessionlog_sessions::turn::{decide, match_reset_trigger, Decision};
    let dir = agent_dir(a.store, a.agent);
    let log = dir.join(EVENTS);
    if !log.is_file() {
        bail!("{}: no store log (import a store first)", log.display());
    }
    let key = sessionlog_sessions::normalize_key(a.key);
    let mut appender = lock_log(&log, a.apply)?;
    let mut events = read_events(&log)?;
    let store = fold(&events).with_context(|| format!("{}", log.display()))?;
    let stored = store.get(&key).and_then(Value::as_object);
    let trigger = match_reset_trigger(&a.inbound, &a.triggers);
    let decision =
        decide(stored, trigger.as_ref(), a.inbound.is_system_event, &a.rule, a.now_ms, a.utc_offset_minutes);
    let previous = stored.and_then(|e| e.get("sessionId")).and_then(Value::as_str).map(str::to_owned);
    let (session_id, event) = match &decision {
        Decision::Reuse => {
            let id = previous.clone().unwrap_or_default();
            let activity = StoreEvent::Patched {
                key: key.clone(),
                at: a.now_ms,
                patch: Map::new(),
                preserve_activity: a.inbound.is_system_event,
            };
            (id, activity)
        }
        Decision::New { reason } => {
            let id = mint_session_id(&key, a.now_ms, events.len());
            let event = if stored.is_some() {
                StoreEvent::Reset {
                    key: key.clone(),
                    at: a.now_ms,
                    session_id: id.clone(),
                    reason: (*reason).to_owned(),
                }
            } else {
                StoreEvent::Created {
                    key: key.clone(),
                    session_id: id.clone(),
                    at: a.now_ms,
                    reason: "inbound".to_owned(),
                    fields: Map::new(),
                    provenance: None,
                }
            };
            (id, event)
        }
    };
    let mut archived = None;
    if let Some(appender) = appender.as_mut() {
        events.push(event);
        append_and_project(appender, &dir, &events, &events[events.len() - 1..])?;
        // A replaced generation's transcript is archived, never deleted.
        if let (Decision::New { .. }, Some(old), Some(entry)) = (&decision, &previous, stored) {
            let file = entry.get("sessionFile").and_then(Value::as_str);
            archived = archive_transcript(&dir, old, file, "reset", a.now_ms)?;
        }
    }
    drop(appender);
    let prompt = match &trigger {
        Some(t) => t.remainder.clone(),
        None => a.inbound.body.to_owned(),
    };
    let doc = serde_json::json!({
        "key": key,
        "decision": decision,
        "trigger": trigger,
        "prompt": prompt,
        "sessionId": session_id,
        "previousSessionId": previous,
        "applied": a.apply,
        "archivedTranscript": archived,
    });
    crate::commands::print_pretty(out, &doc)
}
