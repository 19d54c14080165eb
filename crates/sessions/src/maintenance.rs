//! Store maintenance (spec sessions §3.8): which entries a save would prune
//! as stale or cap away, and which transcripts lose their last entry. A pure
//! plan over the projection and a clock; the caller turns it into store
//! events (`deleted`, or `archived` when the transcript goes with the entry)
//! and archives the files.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};

/// OpenClaw's default `pruneAfter`: 30 days.
pub const DEFAULT_PRUNE_AFTER_MS: i64 = 30 * DAY_MS;
/// OpenClaw's default `maxEntries`.
pub const DEFAULT_MAX_ENTRIES: usize = 500;
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

/// Why an entry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Removal {
    /// Not updated within `pruneAfter`.
    Stale,
    /// Beyond `maxEntries` (the oldest, or without `updatedAt`).
    OverCap,
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

/// What maintenance would do to a store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Entries removed, in store order within each step (stale first, then over the cap).
    pub removed: Vec<Removed>,
    /// Entries left.
    pub kept: usize,
    /// True when the active key would have been removed but is exempt.
    pub active_exempted: bool,
}

fn updated_at(entry: &Value) -> Option<f64> {
    entry.get("updatedAt").and_then(Value::as_f64).filter(|t| t.is_finite())
}

/// Plans maintenance of `store` at `now_ms`: prune stale entries (those
/// without `updatedAt` are kept), then cap to the newest `max_entries` by
/// `updatedAt` (entries without it go first; ties keep store order). The
/// caller's `active_key` is never removed.
pub fn plan(store: &Map<String, Value>, now_ms: i64, settings: &Settings, active_key: Option<&str>) -> Plan {
    let mut out = Plan::default();
    let is_active = |k: &str| active_key == Some(k);
    let mut left: Vec<(&String, &Value)> = Vec::with_capacity(store.len());
    let mut gone: Vec<(&String, Removal)> = Vec::new();
    for (key, entry) in store {
        let stale = settings
            .prune_after_ms
            .is_some_and(|after| updated_at(entry).is_some_and(|t| t < now_ms as f64 - after as f64));
        if stale && is_active(key) {
            out.active_exempted = true;
        }
        if stale && !is_active(key) {
            gone.push((key, Removal::Stale));
        } else {
            left.push((key, entry));
        }
    }
    if let Some(max) = settings.max_entries.filter(|max| left.len() > *max) {
        let mut order: Vec<usize> = (0..left.len()).collect();
        // Newest first; no `updatedAt` sorts last; a stable sort keeps store order on ties.
        order.sort_by(|&a, &b| {
            let (ta, tb) = (updated_at(left[a].1), updated_at(left[b].1));
            tb.partial_cmp(&ta).unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut drop: HashSet<usize> = order[max..].iter().copied().collect();
        if let Some(i) = (0..left.len()).find(|&i| drop.contains(&i) && is_active(left[i].0)) {
            drop.remove(&i);
            out.active_exempted = true;
        }
        let mut kept = Vec::with_capacity(left.len() - drop.len());
        for (i, item) in left.into_iter().enumerate() {
            if drop.contains(&i) {
                gone.push((item.0, Removal::OverCap));
            } else {
                kept.push(item);
            }
        }
        left = kept;
    }
    let remaining: HashSet<&str> =
        left.iter().filter_map(|(_, e)| e.get("sessionId").and_then(Value::as_str)).collect();
    let mut archived: HashSet<&str> = HashSet::new();
    for (key, why) in gone {
        let id = store[key.as_str()].get("sessionId").and_then(Value::as_str);
        // A transcript is archived once, and only when no remaining entry uses it.
        let archive = id.filter(|id| !remaining.contains(id) && archived.insert(id)).map(str::to_owned);
        out.removed.push(Removed { key: key.clone(), why, archive_session_id: archive });
    }
    out.kept = left.len();
    out
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

    fn keys(p: &Plan, why: Removal) -> Vec<&str> {
        p.removed.iter().filter(|r| r.why == why).map(|r| r.key.as_str()).collect()
    }

    #[test]
    fn stale_entries_go_and_entries_without_a_time_stay() {
        let s =
            store(&[("a", Some(31), "s1"), ("b", Some(29), "s2"), ("c", None, "s3"), ("d", Some(45), "s4")]);
        let p = plan(&s, NOW, &Settings::default(), None);
        assert_eq!(keys(&p, Removal::Stale), ["a", "d"]);
        assert_eq!(p.kept, 2);
        // Exactly 30 days is not older than 30 days.
        let s = store(&[("edge", Some(30), "s1")]);
        assert!(plan(&s, NOW, &Settings::default(), None).removed.is_empty());
        // No pruning when pruneAfter is off.
        let off = Settings { prune_after_ms: None, ..Settings::default() };
        assert!(plan(&store(&[("a", Some(400), "s1")]), NOW, &off, None).removed.is_empty());
    }

    #[test]
    fn the_cap_keeps_the_newest_and_drops_timeless_entries_first() {
        let s = store(&[
            ("old", Some(5), "s1"),
            ("none", None, "s2"),
            ("new", Some(1), "s3"),
            ("mid", Some(3), "s4"),
        ]);
        let cap = |n| Settings { prune_after_ms: None, max_entries: Some(n) };
        assert_eq!(keys(&plan(&s, NOW, &cap(3), None), Removal::OverCap), ["none"]);
        // Over-cap removals are listed in store order.
        assert_eq!(keys(&plan(&s, NOW, &cap(2), None), Removal::OverCap), ["old", "none"]);
        assert_eq!(plan(&s, NOW, &cap(2), None).kept, 2);
        assert!(plan(&s, NOW, &cap(4), None).removed.is_empty());
    }

    #[test]
    fn the_active_key_is_exempt() {
        let s = store(&[("a", Some(90), "s1"), ("b", Some(1), "s2")]);
        let p = plan(&s, NOW, &Settings::default(), Some("a"));
        assert!(p.removed.is_empty() && p.active_exempted && p.kept == 2);
        let cap = Settings { prune_after_ms: None, max_entries: Some(1) };
        let p = plan(&s, NOW, &cap, Some("a"));
        assert!(p.removed.is_empty() && p.active_exempted);
    }

    #[test]
    fn a_transcript_is_archived_only_when_no_entry_keeps_it() {
        // "b" shares s1 with the surviving "c"; "a" and "d" share s2, both removed.
        let s = store(&[
            ("a", Some(60), "s2"),
            ("b", Some(60), "s1"),
            ("c", Some(1), "s1"),
            ("d", Some(61), "s2"),
        ]);
        let p = plan(&s, NOW, &Settings::default(), None);
        let archives: Vec<(&str, Option<&str>)> =
            p.removed.iter().map(|r| (r.key.as_str(), r.archive_session_id.as_deref())).collect();
        assert_eq!(archives, [("a", Some("s2")), ("b", None), ("d", None)]);
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
