//! Store maintenance (spec sessions §3.8) as OpenClaw 2026.9 runs it
//! (`openclaw sessions cleanup`): which entries a save prunes as stale or caps
//! away, which it archives in place instead, and which transcripts lose their
//! last entry. A pure plan over the projection and a clock; the caller turns
//! it into store events (`deleted` or `archived` for removed entries, a patch
//! setting `archivedAt`/`archiveReason` for entries archived in place) and
//! archives the files.
//!
//! The rules: an entry that is already archived, pinned, running, locked to
//! its model, the caller's active key, or *protected* — the agent's main
//! session, a thread, an external conversation (a delivery route in its key,
//! `direct:`, `<channel>:group|channel:`, Telegram topics, an external
//! `delivery`, or a group/channel chat type) — is never touched. Of the rest,
//! a stale entry (`updatedAt` older than `pruneAfter`) is removed if its key
//! is *synthetic* (sub-agent, cron, ACP, hook, node, heartbeat, model-run
//! probes) and archived in place otherwise. Then, while more than
//! `maxEntries` entries are unarchived, the least recently active eligible
//! ones go the same way (protected entries count toward the cap but are
//! never chosen; among equally recent ones, the later in the store goes
//! first).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::keys::{is_acp, is_cron, is_subagent, normalize_key, parse_agent_key};
use crate::store::StoreEvent;

/// OpenClaw's default `pruneAfter`: 30 days.
pub const DEFAULT_PRUNE_AFTER_MS: i64 = 30 * DAY_MS;
/// OpenClaw's default `maxEntries` (5000 since the SQLite store; 500 before).
pub const DEFAULT_MAX_ENTRIES: usize = 5000;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// The maintenance settings (`session.maintenance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Entries not updated for this long are pruned; `None` keeps them.
    pub prune_after_ms: Option<i64>,
    /// At most this many entries are kept, newest first; `None` = no cap.
    pub max_entries: Option<usize>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { prune_after_ms: Some(DEFAULT_PRUNE_AFTER_MS), max_entries: Some(DEFAULT_MAX_ENTRIES) }
    }
}

/// A duration as OpenClaw's settings write it: a number with a unit
/// (`ms`, `s`, `m`, `h`, `d`, `w`), a bare number being days.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration (e.g. 30d, 12h)"))?;
    let unit_ms = match unit.trim() {
        "" | "d" => DAY_MS as f64,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "w" => 7.0 * DAY_MS as f64,
        other => return Err(format!("`{text}`: unknown unit `{other}` (ms, s, m, h, d, w)")),
    };
    let ms = value * unit_ms;
    if !ms.is_finite() || ms < 0.0 || ms > i64::MAX as f64 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(ms as i64)
}

/// Why an entry goes (or is archived).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Removal {
    /// Not updated within `pruneAfter`.
    Stale,
    /// Beyond `maxEntries` (the least recently active).
    OverCap,
    /// Its transcript holds no message (`--fix-missing`); always removed, never archived.
    Missing,
}

impl Removal {
    /// The `archiveReason` OpenClaw records on an entry archived in place.
    pub fn archive_reason(self) -> &'static str {
        match self {
            Removal::Stale => "age-retention",
            Removal::OverCap => "active-session-cap",
            Removal::Missing => "transcript-missing",
        }
    }
}

/// One entry the plan removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    /// The session key.
    pub key: String,
    /// Why.
    pub why: Removal,
    /// Its session id, when no remaining entry shares it: its transcript is to be archived.
    pub archive_session_id: Option<String>,
}

/// One entry the plan keeps but archives in place (`archivedAt` = now,
/// `archiveReason` from [`Removal::archive_reason`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Archived {
    /// The session key.
    pub key: String,
    /// Why.
    pub why: Removal,
}

/// What maintenance would do to a store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Entries removed, in store order within each step (missing transcripts
    /// first with `--fix-missing`, then stale, then over the cap).
    pub removed: Vec<Removed>,
    /// Entries archived in place, in store order within each step.
    pub archived: Vec<Archived>,
    /// Entries left in the store (archived ones included).
    pub kept: usize,
    /// True when the active key would have been pruned or capped but is exempt.
    pub active_exempted: bool,
}

fn number(entry: &Value, field: &str) -> Option<f64> {
    entry.get(field).and_then(Value::as_f64).filter(|t| t.is_finite())
}

fn is_archived(entry: &Value) -> bool {
    entry.get("archivedAt").is_some_and(|v| !v.is_null())
}

/// The last time anything happened in an entry: its latest interaction,
/// activity, generation start or update.
fn activity_at(entry: &Value) -> f64 {
    ["lastInteractionAt", "lastActivityAt", "sessionStartedAt", "updatedAt"]
        .iter()
        .filter_map(|f| number(entry, f))
        .fold(0.0, f64::max)
}

fn rest_of(key: &str) -> String {
    parse_agent_key(key).map_or_else(|| normalize_key(key), |k| k.rest)
}

fn is_model_run_probe(key: &str) -> bool {
    let Some(rest) = parse_agent_key(key).map(|k| k.rest) else { return false };
    let Some(id) = rest.strip_prefix("explicit:model-run-") else { return false };
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Runtime rows maintenance removes rather than archives.
pub fn is_synthetic(key: &str) -> bool {
    let rest = rest_of(key);
    is_model_run_probe(key)
        || is_subagent(key)
        || is_acp(key)
        || is_cron(key)
        || ["acp-bridge:", "hook:", "node:"].iter().any(|p| rest.starts_with(p))
        || rest == "heartbeat"
        || rest.ends_with(":heartbeat")
        || rest.contains(":heartbeat:")
}

/// `<channel>:<account>:direct|dm:<peer>` or `<channel>:direct|dm|group|channel:<peer>`
/// after the agent prefix (and before any `:thread:`).
fn has_delivery_route(key: &str) -> bool {
    let lower = key.to_lowercase();
    let base = lower.rfind(":thread:").map_or(key, |i| &key[..i]);
    let Some(rest) = parse_agent_key(base).map(|k| k.rest) else { return false };
    let parts: Vec<&str> = rest.split(':').collect();
    if parts[0] == "agent" || parts.len() < 3 {
        return false;
    }
    if parts.len() >= 4 && matches!(parts[2], "direct" | "dm") {
        return !parts[1].trim().is_empty() && !parts[3].trim().is_empty();
    }
    matches!(parts[1], "channel" | "direct" | "dm" | "group") && !parts[2].trim().is_empty()
}

/// Sessions people talk in, which maintenance never archives or removes.
pub fn is_protected(key: &str, entry: &Value) -> bool {
    if is_synthetic(key) {
        return false;
    }
    let rest = rest_of(key);
    if normalize_key(key) == "global" || parse_agent_key(key).is_some_and(|k| k.rest == "main") {
        return true;
    }
    let lower = key.to_lowercase();
    if lower.rfind(":thread:").is_some_and(|i| !key[i + 8..].trim().is_empty()) {
        return true;
    }
    let delivery = entry.get("delivery");
    if delivery.and_then(|d| d.get("kind")).and_then(Value::as_str) == Some("external") {
        return true;
    }
    let segments: Vec<&str> = rest.split(':').collect();
    let external_shape =
        (segments.len() >= 2 && segments[0] == "direct" && !rest["direct:".len()..].is_empty())
            || (segments.len() >= 3 && matches!(segments[1], "group" | "channel") && !segments[0].is_empty())
            || (segments.len() >= 5
                && segments[0] == "telegram"
                && matches!(segments[1], "direct" | "dm")
                && segments[segments.len() - 2] == "topic"
                && !segments[segments.len() - 1].is_empty());
    if has_delivery_route(key) || external_shape {
        return true;
    }
    let chat_type = entry
        .get("chatType")
        .and_then(Value::as_str)
        .or_else(|| delivery.and_then(|d| d.pointer("/origin/chatType")).and_then(Value::as_str))
        .map(|t| t.trim().to_lowercase());
    matches!(chat_type.as_deref(), Some("group" | "channel" | "thread"))
}

/// A pin only holds on sessions a person owns: not sub-agents, not spawned,
/// not parented elsewhere than the agent's main session.
fn is_pinnable(key: &str, entry: &Value) -> bool {
    let text = |f: &str| entry.get(f).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    if is_subagent(key) || text("spawnedBy").is_some() {
        return false;
    }
    match text("parentSessionKey") {
        None => true,
        Some(parent) => parse_agent_key(key).is_some_and(|k| parent == format!("agent:{}:main", k.agent_id)),
    }
}

/// Entries maintenance leaves alone, the active key aside.
fn is_preserved(key: &str, entry: &Value) -> bool {
    is_archived(entry)
        || (entry.get("pinnedAt").is_some_and(|v| !v.is_null()) && is_pinnable(key, entry))
        || entry.get("modelSelectionLocked") == Some(&Value::Bool(true))
        || entry.get("status").and_then(Value::as_str) == Some("running")
        || is_protected(key, entry)
}

/// What `--fix-missing` asks of an entry's transcript, when it has a session id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TranscriptCheck {
    /// The transcript holds at least one message.
    HasMessages,
    /// There is no transcript, or it holds no message.
    NoMessages,
}

/// A transcript line OpenClaw counts as a message: `type: "message"`, or
/// no `type` and a `role` (its own or its `message`'s) of `user`,
/// `assistant`, `tool`, `toolResult` or `system`.
pub fn is_message_line(line: &[u8]) -> bool {
    let Ok(record) = serde_json::from_slice::<Value>(line) else { return false };
    let Some(obj) = record.as_object() else { return false };
    let is_role = |v: Option<&Value>| {
        matches!(v.and_then(Value::as_str), Some("user" | "assistant" | "tool" | "toolResult" | "system"))
    };
    match obj.get("type") {
        Some(t) => t == "message",
        None => {
            is_role(obj.get("message").filter(|m| m.is_object()).and_then(|m| m.get("role")))
                || is_role(obj.get("role"))
        }
    }
}

/// The keys OpenClaw's `sessions cleanup --fix-missing` removes, in store
/// order, before any pruning or cap (and regardless of protection or the
/// active key): every entry not archived and not locked to its model whose
/// transcript holds no message, and every entry without a session id whose
/// key is not an agent key. Agent-keyed entries still initialising
/// (`initializationPending`), or whose session id is their key and that
/// name no `sessionFile`, are kept. `check` inspects a transcript.
pub fn missing_transcript_keys<E>(
    store: &Map<String, Value>,
    mut check: impl FnMut(&str, &Value) -> Result<TranscriptCheck, E>,
) -> Result<Vec<String>, E> {
    let mut out = Vec::new();
    for (key, entry) in store {
        if is_archived(entry) || entry.get("modelSelectionLocked") == Some(&Value::Bool(true)) {
            continue;
        }
        let agent_key = parse_agent_key(key).is_some();
        let session_id = entry.get("sessionId").and_then(Value::as_str).filter(|s| !s.is_empty());
        let names_file =
            entry.get("sessionFile").and_then(Value::as_str).is_some_and(|f| !f.trim().is_empty());
        if agent_key
            && (entry.get("initializationPending") == Some(&Value::Bool(true))
                || (session_id == Some(key.as_str()) && !names_file))
        {
            continue;
        }
        let missing = match session_id {
            None => !agent_key,
            Some(_) => check(key, entry)? == TranscriptCheck::NoMessages,
        };
        if missing {
            out.push(key.clone());
        }
    }
    Ok(out)
}

/// [`plan`] after removing the `missing` keys first (from
/// [`missing_transcript_keys`]): they lead `removed` as
/// [`Removal::Missing`] (their transcripts are not archived: there is
/// none to speak of), and neither pruning nor the cap sees them.
pub fn plan_without_missing(
    store: &Map<String, Value>,
    missing: &[String],
    now_ms: i64,
    settings: &Settings,
    active_key: Option<&str>,
) -> Plan {
    if missing.is_empty() {
        return plan(store, now_ms, settings, active_key);
    }
    let gone: HashSet<&str> = missing.iter().map(String::as_str).collect();
    let rest: Map<String, Value> = store
        .iter()
        .filter(|(k, _)| !gone.contains(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = plan(&rest, now_ms, settings, active_key);
    let mut removed: Vec<Removed> = missing
        .iter()
        .map(|key| Removed { key: key.clone(), why: Removal::Missing, archive_session_id: None })
        .collect();
    removed.append(&mut out.removed);
    out.removed = removed;
    out
}

/// Plans maintenance of `store` at `now_ms` with OpenClaw's rules (see the
/// module docs). The caller's `active_key` is never removed or archived.
pub fn plan(store: &Map<String, Value>, now_ms: i64, settings: &Settings, active_key: Option<&str>) -> Plan {
    let mut out = Plan::default();
    let is_active = |k: &str| active_key == Some(k);
    // Synthetic rows go; every other session is archived in place.
    let mut removed: Vec<(&String, Removal)> = Vec::new();
    fn settle<'a>(key: &'a String, why: Removal, removed: &mut Vec<(&'a String, Removal)>, out: &mut Plan) {
        if is_synthetic(key) {
            removed.push((key, why));
        } else {
            out.archived.push(Archived { key: key.clone(), why });
        }
    }
    if let Some(after) = settings.prune_after_ms.filter(|a| *a > 0) {
        let cutoff = now_ms as f64 - after as f64;
        for (key, entry) in store {
            if is_preserved(key, entry) || !number(entry, "updatedAt").is_some_and(|t| t < cutoff) {
                continue;
            }
            if is_active(key) {
                out.active_exempted = true;
            } else {
                settle(key, Removal::Stale, &mut removed, &mut out);
            }
        }
    }
    if let Some(max) = settings.max_entries {
        let done: HashSet<&str> = removed
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(out.archived.iter().map(|a| a.key.as_str()))
            .collect();
        let unarchived: Vec<(&String, &Value)> =
            store.iter().filter(|(k, e)| !done.contains(k.as_str()) && !is_archived(e)).collect();
        let overflow = unarchived.len().saturating_sub(max);
        let victims = |spare_active: bool| -> HashSet<&String> {
            let mut eligible: Vec<(&String, &Value)> = unarchived
                .iter()
                .copied()
                .filter(|(k, e)| !(is_preserved(k, e) || (spare_active && is_active(k))))
                .collect();
            // The least recently active first; among equals, the later in the store.
            eligible.reverse();
            eligible.sort_by(|a, b| {
                activity_at(a.1).partial_cmp(&activity_at(b.1)).unwrap_or(std::cmp::Ordering::Equal)
            });
            eligible.into_iter().take(overflow).map(|(k, _)| k).collect()
        };
        if overflow > 0 {
            let mut chosen = victims(false);
            if chosen.iter().any(|k| is_active(k)) {
                out.active_exempted = true;
                chosen = victims(true);
            }
            for (key, _) in &unarchived {
                if chosen.contains(key) {
                    settle(key, Removal::OverCap, &mut removed, &mut out);
                }
            }
        }
    }
    let removed_keys: HashSet<&str> = removed.iter().map(|(k, _)| k.as_str()).collect();
    let remaining: HashSet<&str> = store
        .iter()
        .filter(|(k, _)| !removed_keys.contains(k.as_str()))
        .filter_map(|(_, e)| e.get("sessionId").and_then(Value::as_str))
        .collect();
    let mut archived: HashSet<&str> = HashSet::new();
    for (key, why) in removed {
        let id = store[key.as_str()].get("sessionId").and_then(Value::as_str);
        // A transcript is archived once, and only when no remaining entry uses it.
        let archive = id.filter(|id| !remaining.contains(id) && archived.insert(id)).map(str::to_owned);
        out.removed.push(Removed { key: key.clone(), why, archive_session_id: archive });
    }
    out.kept = store.len() - removed_keys.len();
    out
}

impl Plan {
    /// The store events that carry the plan out at `now_ms`: `archived`
    /// (reason `deleted`) for a removed entry whose transcript goes with it,
    /// else `deleted`; then, for each entry archived in place, a patch that
    /// marks it as OpenClaw does (`archivedAt`, `archiveReason`, `archivedBy`
    /// cleared; not activity). The transcripts are renamed after these are in
    /// the log.
    pub fn events(&self, now_ms: i64) -> Vec<StoreEvent> {
        let removed = self.removed.iter().map(|r| match r.archive_session_id {
            Some(_) => StoreEvent::Archived { key: r.key.clone(), at: now_ms, reason: "deleted".into() },
            None => StoreEvent::Deleted { key: r.key.clone(), at: now_ms },
        });
        let archived = self.archived.iter().map(|r| {
            let mut patch = Map::new();
            patch.insert("archivedAt".to_owned(), Value::from(now_ms));
            patch.insert("archivedBy".to_owned(), Value::Null);
            patch.insert("archiveReason".to_owned(), Value::from(r.why.archive_reason()));
            StoreEvent::Patched { key: r.key.clone(), at: now_ms, patch, preserve_activity: true }
        });
        removed.chain(archived).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 100 * DAY_MS;

    fn store(entries: &[(&str, Option<i64>, &str)]) -> Map<String, Value> {
        entries
            .iter()
            .map(|(k, days_ago, id)| {
                let mut e = json!({"sessionId": id});
                if let Some(d) = days_ago {
                    e["updatedAt"] = json!(NOW - d * DAY_MS);
                }
                ((*k).to_owned(), e)
            })
            .collect()
    }

    fn removed(p: &Plan, why: Removal) -> Vec<&str> {
        p.removed.iter().filter(|r| r.why == why).map(|r| r.key.as_str()).collect()
    }

    fn archived(p: &Plan, why: Removal) -> Vec<&str> {
        p.archived.iter().filter(|r| r.why == why).map(|r| r.key.as_str()).collect()
    }

    #[test]
    fn stale_runtime_rows_go_sessions_are_archived_and_protected_ones_stay() {
        let s = store(&[
            ("agent:a:cron:job1", Some(31), "s1"),
            ("agent:a:subagent:x", Some(29), "s2"),
            ("agent:a:explicit:notes", Some(45), "s3"),
            ("agent:a:main", Some(90), "s4"),
            ("agent:a:discord:channel:123", Some(90), "s5"),
            ("agent:a:hook:gmail", None, "s6"),
            ("agent:a:node:n1", Some(40), "s7"),
        ]);
        let p = plan(&s, NOW, &Settings::default(), None);
        assert_eq!(removed(&p, Removal::Stale), ["agent:a:cron:job1", "agent:a:node:n1"]);
        assert_eq!(archived(&p, Removal::Stale), ["agent:a:explicit:notes"]);
        assert_eq!(p.kept, 5);
        // Exactly 30 days is not older than 30 days.
        let s = store(&[("agent:a:cron:j", Some(30), "s1")]);
        assert_eq!(plan(&s, NOW, &Settings::default(), None), Plan { kept: 1, ..Plan::default() });
        // No pruning when pruneAfter is off.
        let off = Settings { prune_after_ms: None, ..Settings::default() };
        assert!(plan(&store(&[("agent:a:cron:j", Some(400), "s1")]), NOW, &off, None).removed.is_empty());
    }

    #[test]
    fn the_cap_takes_the_least_recently_active_and_never_a_protected_entry() {
        let mut s = store(&[
            ("agent:a:main", Some(9), "s0"),
            ("agent:a:cron:old", Some(5), "s1"),
            ("agent:a:cron:none", None, "s2"),
            ("agent:a:explicit:new", Some(1), "s3"),
            ("agent:a:cron:mid", Some(3), "s4"),
            ("agent:a:cron:tie", Some(3), "s5"),
            ("agent:a:cron:gone", Some(2), "s6"),
        ]);
        // Activity is the latest of the entry's times, not only updatedAt.
        s["agent:a:cron:gone"]["lastInteractionAt"] = json!(NOW);
        // Already archived entries neither count nor go.
        s.insert(
            "agent:a:explicit:shelved".into(),
            json!({"sessionId": "s7", "updatedAt": 0, "archivedAt": 1}),
        );
        let cap = |n| Settings { prune_after_ms: None, max_entries: Some(n) };
        // 7 unarchived, cap 5: the one without a time, then the oldest (listed in store order).
        let p = plan(&s, NOW, &cap(5), None);
        assert_eq!(removed(&p, Removal::OverCap), ["agent:a:cron:old", "agent:a:cron:none"]);
        // Cap 4: then one of the two equally recent, the later in the store.
        let p = plan(&s, NOW, &cap(4), None);
        assert_eq!(
            removed(&p, Removal::OverCap),
            ["agent:a:cron:old", "agent:a:cron:none", "agent:a:cron:tie"]
        );
        // Cap 2: the main session is older than all but stays; an ordinary session is archived.
        let p = plan(&s, NOW, &cap(2), None);
        assert_eq!(
            removed(&p, Removal::OverCap),
            ["agent:a:cron:old", "agent:a:cron:none", "agent:a:cron:mid", "agent:a:cron:tie"]
        );
        assert_eq!(archived(&p, Removal::OverCap), ["agent:a:explicit:new"]);
        assert_eq!(p.kept, 4);
        // Cap 1 cannot be met: the protected main session counts but stays.
        let p = plan(&s, NOW, &cap(1), None);
        assert_eq!(p.kept, 3);
        assert!(plan(&s, NOW, &cap(7), None).removed.is_empty());
    }

    #[test]
    fn the_active_key_is_exempt() {
        let s = store(&[("agent:a:cron:a", Some(90), "s1"), ("agent:a:cron:b", Some(1), "s2")]);
        let p = plan(&s, NOW, &Settings::default(), Some("agent:a:cron:a"));
        assert!(p.removed.is_empty() && p.active_exempted && p.kept == 2);
        let cap = Settings { prune_after_ms: None, max_entries: Some(1) };
        let p = plan(&s, NOW, &cap, Some("agent:a:cron:a"));
        assert_eq!(removed(&p, Removal::OverCap), ["agent:a:cron:b"]);
        assert!(p.active_exempted);
    }

    #[test]
    fn a_transcript_is_archived_only_when_no_entry_keeps_it() {
        // "b" shares s1 with the surviving "c"; "a" and "d" share s2, both removed.
        let s = store(&[
            ("agent:x:cron:a", Some(60), "s2"),
            ("agent:x:cron:b", Some(60), "s1"),
            ("agent:x:cron:c", Some(1), "s1"),
            ("agent:x:cron:d", Some(61), "s2"),
        ]);
        let p = plan(&s, NOW, &Settings::default(), None);
        let archives: Vec<(&str, Option<&str>)> =
            p.removed.iter().map(|r| (r.key.as_str(), r.archive_session_id.as_deref())).collect();
        assert_eq!(
            archives,
            [("agent:x:cron:a", Some("s2")), ("agent:x:cron:b", None), ("agent:x:cron:d", None)]
        );
    }

    #[test]
    fn protected_and_synthetic_shapes() {
        let plain = json!({});
        for key in [
            "agent:a:main",
            "global",
            "agent:a:explicit:x:thread:42",
            "agent:a:direct:bob",
            "agent:a:discord:acct:direct:191",
            "agent:a:discord:channel:123",
            "agent:a:whatsapp:group:555",
            "agent:a:telegram:dm:77:topic:9",
        ] {
            assert!(is_protected(key, &plain), "{key}");
        }
        assert!(is_protected("agent:a:explicit:x", &json!({"chatType": "group"})));
        assert!(is_protected("agent:a:explicit:x", &json!({"delivery": {"kind": "external"}})));
        assert!(!is_protected("agent:a:explicit:x", &json!({"delivery": {"kind": "none"}})));
        for key in [
            "agent:a:cron:j",
            "agent:a:subagent:u",
            "agent:a:acp:h",
            "agent:a:hook:gmail",
            "agent:a:node:n",
            "agent:a:main:heartbeat",
            "agent:a:explicit:model-run-0a1b2c3d-0000-4000-8000-00000000abcd",
        ] {
            assert!(is_synthetic(key) && !is_protected(key, &plain), "{key}");
        }
        assert!(!is_synthetic("agent:a:explicit:model-run-x"));
        // A pin holds on a person's session, not on a sub-agent's.
        let pinned = json!({"sessionId": "s", "updatedAt": 0, "pinnedAt": 1});
        let s: Map<String, Value> =
            [("agent:a:explicit:p".to_owned(), pinned.clone()), ("agent:a:subagent:p".to_owned(), pinned)]
                .into_iter()
                .collect();
        assert_eq!(
            removed(&plan(&s, NOW, &Settings::default(), None), Removal::Stale),
            ["agent:a:subagent:p"]
        );
    }

    #[test]
    fn durations_read_as_openclaw_writes_them() {
        assert_eq!(parse_duration_ms("30d"), Ok(30 * DAY_MS));
        assert_eq!(parse_duration_ms("30"), Ok(30 * DAY_MS));
        assert_eq!(parse_duration_ms("12h"), Ok(12 * 3_600_000));
        assert_eq!(parse_duration_ms(" 90M "), Ok(90 * 60_000));
        assert_eq!(parse_duration_ms("1.5d"), Ok(DAY_MS * 3 / 2));
        assert_eq!(parse_duration_ms("2w"), Ok(14 * DAY_MS));
        assert!(parse_duration_ms("soon").is_err());
        assert!(parse_duration_ms("3y").is_err());
    }
}
