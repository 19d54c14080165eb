//! The store stream and its projection, `sessions.json` (spec sessions §3).
//!
//! Every change to a session is a [`StoreEvent`] (the vocabulary lives in
//! `sessionlog-events`, beside the transcript entries); the store is
//! [`fold`]ed from them and can be rebuilt from the log at any time, bit for
//! bit. Entries are kept as JSON objects, so fields this crate does not
//! model (and OpenClaw's later additions) round-trip untouched. Key order is
//! the order keys were first created, as OpenClaw's `JSON.stringify` of the
//! store object keeps it.

use serde_json::{Map, Value};

use crate::keys::{normalize_key, validate_session_id};
pub use sessionlog_events::StoreEvent;

/// Why an event cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The key is empty or holds a path-like `..` segment or control characters.
    #[error("invalid session key {0:?}")]
    InvalidKey(String),
    /// The session id cannot name a transcript file.
    #[error("{0}")]
    InvalidSessionId(String),
    /// A patch, reset or delete names a key that does not exist.
    #[error("no session {0:?}")]
    Missing(String),
    /// A level or value outside its vocabulary.
    #[error("invalid value: {0}")]
    InvalidValue(String),
}

/// Fields a reset carries over (spec sessions §3.9 `sessions.reset`).
pub const RESET_CARRIES: &[&str] = &[
    "thinkingLevel",
    "verboseLevel",
    "reasoningLevel",
    "responseUsage",
    "model",
    "contextTokens",
    "sendPolicy",
    "label",
    "origin",
    "lastChannel",
    "lastTo",
    "skillsSnapshot",
];

/// The projection: entries by key, in creation order.
pub type Store = Map<String, Value>;

fn check_key(key: &str) -> Result<(), StoreError> {
    let bad = key.trim().is_empty()
        || key.split([':', '/', '\\']).any(|seg| seg == "..")
        || key.chars().any(char::is_control);
    if bad {
        Err(StoreError::InvalidKey(key.to_owned()))
    } else {
        Ok(())
    }
}

fn check_id(id: &str) -> Result<(), StoreError> {
    validate_session_id(id).map(|_| ()).map_err(|e| StoreError::InvalidSessionId(e.to_string()))
}

fn updated_at(entry: &Map<String, Value>) -> i64 {
    entry.get("updatedAt").and_then(Value::as_f64).map_or(0, |t| t as i64)
}

/// Applies one event.
pub fn apply(store: &mut Store, event: &StoreEvent) -> Result<(), StoreError> {
    check_key(event.key())?;
    match event {
        StoreEvent::Imported { key, entry } => {
            store.insert(key.clone(), Value::Object(entry.clone()));
        }
        StoreEvent::Created { key, session_id, at, fields, .. } => {
            check_id(session_id)?;
            let mut entry = Map::new();
            entry.insert("sessionId".to_owned(), Value::from(session_id.clone()));
            entry.insert("updatedAt".to_owned(), Value::from(*at));
            for (k, v) in fields {
                if !v.is_null() {
                    entry.insert(k.clone(), v.clone());
                }
            }
            store.insert(normalize_key(key), Value::Object(entry));
        }
        StoreEvent::Patched { key, at, patch, preserve_activity } => {
            let Some(Value::Object(entry)) = store.get_mut(key.as_str()) else {
                return Err(StoreError::Missing(key.clone()));
            };
            if let Some(Value::String(id)) = patch.get("sessionId") {
                check_id(id)?;
            }
            let before = updated_at(entry);
            for (k, v) in patch {
                if v.is_null() {
                    entry.shift_remove(k);
                } else {
                    entry.insert(k.clone(), v.clone());
                }
            }
            let next = if *preserve_activity { before } else { before.max(*at) };
            entry.insert("updatedAt".to_owned(), Value::from(next));
            // A model switch without a provider drops the observed provider (spec §3.6).
            if patch.contains_key("model") && !patch.contains_key("modelProvider") {
                entry.shift_remove("modelProvider");
            }
        }
        StoreEvent::Reset { key, at, session_id, .. } => {
            check_id(session_id)?;
            let Some(Value::Object(old)) = store.get(key.as_str()) else {
                return Err(StoreError::Missing(key.clone()));
            };
            let mut entry = Map::new();
            entry.insert("sessionId".to_owned(), Value::from(session_id.clone()));
            entry.insert("updatedAt".to_owned(), Value::from(*at));
            entry.insert("systemSent".to_owned(), Value::from(false));
            entry.insert("abortedLastRun".to_owned(), Value::from(false));
            for field in RESET_CARRIES {
                if let Some(v) = old.get(*field) {
                    entry.insert((*field).to_owned(), v.clone());
                }
            }
            store.insert(key.clone(), Value::Object(entry));
        }
        StoreEvent::Deleted { key, .. } => {
            if store.shift_remove(key.as_str()).is_none() {
                return Err(StoreError::Missing(key.clone()));
            }
        }
        StoreEvent::ModelOverride { key, at, provider, model, auth_profile } => {
            let entry = existing(store, key)?;
            let before = (entry.get("providerOverride").cloned(), entry.get("modelOverride").cloned());
            match (provider, model) {
                (None, None) => {
                    for f in ["providerOverride", "modelOverride", "modelOverrideSource"] {
                        entry.shift_remove(f);
                    }
                }
                _ => {
                    set_opt(entry, "providerOverride", provider);
                    set_opt(entry, "modelOverride", model);
                    entry.insert("modelOverrideSource".to_owned(), Value::from("user"));
                }
            }
            let after = (entry.get("providerOverride").cloned(), entry.get("modelOverride").cloned());
            if before != after {
                for f in ["model", "modelProvider", "contextTokens"] {
                    entry.shift_remove(f);
                }
            }
            match auth_profile {
                Some(p) => {
                    entry.insert("authProfileOverride".to_owned(), Value::from(p.clone()));
                    entry.insert("authProfileOverrideSource".to_owned(), Value::from("user"));
                }
                None => {
                    entry.shift_remove("authProfileOverride");
                    entry.shift_remove("authProfileOverrideSource");
                }
            }
            entry.shift_remove("authProfileOverrideCompactionCount");
            touch(entry, *at);
        }
        StoreEvent::LevelOverride { key, at, level, value } => {
            let entry = existing(store, key)?;
            let allowed: &[&str] = match level.as_str() {
                "thinking" => &["off", "minimal", "low", "medium", "high", "xhigh"],
                "verbose" => &["on", "off"],
                "reasoning" => &["on", "off", "stream"],
                "elevated" => &["on", "off", "ask", "full"],
                "fast" => &["on", "off"],
                other => return Err(StoreError::InvalidValue(format!("unknown level {other:?}"))),
            };
            let field = format!("{level}Level");
            match value.as_deref() {
                None => {
                    entry.shift_remove(&field);
                }
                Some(v) if !allowed.contains(&v) => {
                    return Err(StoreError::InvalidValue(format!("{level} level {v:?}")));
                }
                // Reasoning `off` is stored as absence; elevated `off` explicitly (spec §6.4).
                Some("off") if level == "reasoning" => {
                    entry.shift_remove(&field);
                }
                Some(v) => {
                    entry.insert(field, Value::from(v));
                }
            }
            touch(entry, *at);
        }
        StoreEvent::CompactionCounted { key, at } => {
            let entry = existing(store, key)?;
            let n = entry.get("compactionCount").and_then(Value::as_u64).unwrap_or(0);
            entry.insert("compactionCount".to_owned(), Value::from(n + 1));
            touch(entry, *at);
        }
        StoreEvent::MemoryFlushRecorded { key, at } => {
            let entry = existing(store, key)?;
            let n = entry.get("compactionCount").and_then(Value::as_u64).unwrap_or(0);
            entry.insert("memoryFlushAt".to_owned(), Value::from(*at));
            entry.insert("memoryFlushCompactionCount".to_owned(), Value::from(n));
        }
        StoreEvent::SubagentSpawned { key, at, session_id, spawned_by, depth } => {
            check_id(session_id)?;
            let mut entry = new_entry(session_id, *at);
            entry.insert("spawnedBy".to_owned(), Value::from(spawned_by.clone()));
            entry.insert("spawnDepth".to_owned(), Value::from(*depth));
            store.insert(normalize_key(key), Value::Object(entry));
        }
        StoreEvent::SubagentEnded { key, at, status } => {
            let entry = existing(store, key)?;
            entry.insert("status".to_owned(), Value::from(status.clone()));
            entry.insert("endedAt".to_owned(), Value::from(*at));
            if let Some(started) = entry.get("startedAt").and_then(Value::as_i64) {
                entry.insert("runtimeMs".to_owned(), Value::from((*at - started).max(0)));
            }
            touch(entry, *at);
        }
        StoreEvent::Archived { key, reason, .. } => {
            if !matches!(reason.as_str(), "reset" | "deleted" | "bak") {
                return Err(StoreError::InvalidValue(format!("archive reason {reason:?}")));
            }
            if store.shift_remove(key.as_str()).is_none() {
                return Err(StoreError::Missing(key.clone()));
            }
        }
        StoreEvent::Forked { key, at, session_id, parent_key } => {
            check_id(session_id)?;
            let mut entry = new_entry(session_id, *at);
            entry.insert("parentSessionKey".to_owned(), Value::from(parent_key.clone()));
            entry.insert("forkedFromParent".to_owned(), Value::from(true));
            store.insert(normalize_key(key), Value::Object(entry));
        }
        StoreEvent::RouteUpdated { key, channel, to, account_id, thread_id, .. } => {
            let entry = existing(store, key)?;
            let mut ctx = Map::new();
            for (k, v) in
                [("channel", channel), ("to", to), ("accountId", account_id), ("threadId", thread_id)]
            {
                if let Some(v) = v {
                    ctx.insert(k.to_owned(), Value::from(v.clone()));
                }
            }
            set_opt(entry, "lastChannel", channel);
            set_opt(entry, "lastTo", to);
            set_opt(entry, "lastAccountId", account_id);
            match thread_id {
                Some(t) => {
                    entry.insert("lastThreadId".to_owned(), Value::from(t.clone()));
                }
                None => {
                    entry.shift_remove("lastThreadId");
                }
            }
            entry.insert("deliveryContext".to_owned(), Value::Object(ctx));
            // Metadata: `updatedAt` is not touched (preserve activity).
        }
        StoreEvent::UsageRecorded {
            key,
            at,
            input,
            output,
            cache_read,
            cache_write,
            total,
            context_tokens,
        } => {
            let entry = existing(store, key)?;
            for (k, v) in [
                ("inputTokens", input),
                ("outputTokens", output),
                ("cacheRead", cache_read),
                ("cacheWrite", cache_write),
                ("totalTokens", total),
            ] {
                entry.insert(k.to_owned(), Value::from(*v));
            }
            entry.insert("totalTokensFresh".to_owned(), Value::from(true));
            if let Some(window) = context_tokens {
                entry.insert("contextTokens".to_owned(), Value::from(*window));
            }
            touch(entry, *at);
        }
    }
    Ok(())
}

fn existing<'s>(store: &'s mut Store, key: &str) -> Result<&'s mut Map<String, Value>, StoreError> {
    match store.get_mut(key) {
        Some(Value::Object(entry)) => Ok(entry),
        _ => Err(StoreError::Missing(key.to_owned())),
    }
}

fn set_opt(entry: &mut Map<String, Value>, field: &str, value: &Option<String>) {
    if let Some(v) = value {
        entry.insert(field.to_owned(), Value::from(v.clone()));
    }
}

fn touch(entry: &mut Map<String, Value>, at: i64) {
    let next = updated_at(entry).max(at);
    entry.insert("updatedAt".to_owned(), Value::from(next));
}

fn new_entry(session_id: &str, at: i64) -> Map<String, Value> {
    let mut entry = Map::new();
    entry.insert("sessionId".to_owned(), Value::from(session_id));
    entry.insert("updatedAt".to_owned(), Value::from(at));
    entry
}

/// Folds events into a store, starting from `store`.
pub fn fold_from(mut store: Store, events: &[StoreEvent]) -> Result<Store, StoreError> {
    for e in events {
        apply(&mut store, e)?;
    }
    Ok(store)
}

/// Folds events into an empty store.
pub fn fold(events: &[StoreEvent]) -> Result<Store, StoreError> {
    fold_from(Store::new(), events)
}

/// One `Imported` event per entry of an existing store object, in its order.
pub fn import_events(store: &Map<String, Value>) -> Result<Vec<StoreEvent>, StoreError> {
    store
        .iter()
        .map(|(key, entry)| {
            check_key(key)?;
            let entry = entry.as_object().cloned().ok_or_else(|| StoreError::InvalidKey(key.clone()))?;
            if let Some(Value::String(id)) = entry.get("sessionId") {
                check_id(id)?;
            }
            Ok(StoreEvent::Imported { key: key.clone(), entry })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn patch_reset_and_delete_follow_the_spec() {
        let events = vec![
            StoreEvent::Created {
                key: "Agent:Main:Main".into(),
                session_id: "s1".into(),
                at: 10,
                reason: "inbound".into(),
                fields: Map::new(),
                provenance: None,
            },
            StoreEvent::Patched {
                key: "agent:main:main".into(),
                at: 20,
                patch: obj(
                    json!({"label": "x", "model": "m", "modelProvider": "p", "thinkingLevel": "high"}),
                ),
                preserve_activity: false,
            },
            StoreEvent::Patched {
                key: "agent:main:main".into(),
                at: 30,
                patch: obj(json!({"label": null, "model": "m2", "lastTo": "chan"})),
                preserve_activity: true,
            },
        ];
        let s = fold(&events).unwrap();
        assert_eq!(
            s["agent:main:main"],
            json!({"sessionId": "s1", "updatedAt": 20, "model": "m2", "thinkingLevel": "high", "lastTo": "chan"})
        );
        let s = fold_from(
            s,
            &[StoreEvent::Reset {
                key: "agent:main:main".into(),
                at: 40,
                session_id: "s2".into(),
                reason: "daily".into(),
            }],
        )
        .unwrap();
        assert_eq!(
            s["agent:main:main"],
            json!({"sessionId": "s2", "updatedAt": 40, "systemSent": false, "abortedLastRun": false, "thinkingLevel": "high", "model": "m2", "lastTo": "chan"})
        );
        let s = fold_from(s, &[StoreEvent::Deleted { key: "agent:main:main".into(), at: 50 }]).unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn typed_events_apply_their_spec_rules() {
        let k = || "agent:main:main".to_owned();
        let mut events = vec![
            StoreEvent::Created {
                key: k(),
                session_id: "s1".into(),
                at: 10,
                reason: "inbound".into(),
                fields: obj(
                    json!({"model": "old", "modelProvider": "p", "contextTokens": 200000, "authProfileOverrideCompactionCount": 2}),
                ),
                provenance: None,
            },
            StoreEvent::ModelOverride {
                key: k(),
                at: 20,
                provider: Some("anthropic".into()),
                model: Some("claude".into()),
                auth_profile: Some("work".into()),
            },
        ];
        let s = fold(&events).unwrap();
        assert_eq!(
            s["agent:main:main"],
            json!({"sessionId": "s1", "updatedAt": 20, "providerOverride": "anthropic", "modelOverride": "claude", "modelOverrideSource": "user", "authProfileOverride": "work", "authProfileOverrideSource": "user"})
        );
        events.push(StoreEvent::LevelOverride {
            key: k(),
            at: 21,
            level: "reasoning".into(),
            value: Some("off".into()),
        });
        events.push(StoreEvent::LevelOverride {
            key: k(),
            at: 22,
            level: "elevated".into(),
            value: Some("off".into()),
        });
        events.push(StoreEvent::CompactionCounted { key: k(), at: 23 });
        events.push(StoreEvent::MemoryFlushRecorded { key: k(), at: 24 });
        events.push(StoreEvent::RouteUpdated {
            key: k(),
            at: 99,
            channel: Some("discord".into()),
            to: Some("u1".into()),
            account_id: None,
            thread_id: None,
        });
        events.push(StoreEvent::UsageRecorded {
            key: k(),
            at: 25,
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
            total: 10,
            context_tokens: Some(128_000),
        });
        events.push(StoreEvent::ModelOverride {
            key: k(),
            at: 26,
            provider: None,
            model: None,
            auth_profile: None,
        });
        let e = &fold(&events).unwrap()["agent:main:main"];
        assert_eq!(e["elevatedLevel"], "off");
        assert!(e.get("reasoningLevel").is_none());
        assert_eq!(
            (
                e["compactionCount"].as_u64(),
                e["memoryFlushCompactionCount"].as_u64(),
                e["memoryFlushAt"].as_i64()
            ),
            (Some(1), Some(1), Some(24))
        );
        assert_eq!(e["deliveryContext"], json!({"channel": "discord", "to": "u1"}));
        assert_eq!(e["updatedAt"], 26, "the route update did not count as activity");
        assert_eq!((e["totalTokens"].as_u64(), e["totalTokensFresh"].as_bool()), (Some(10), Some(true)));
        // The window was recorded, then the model override dropped it with the cached model.
        assert!(e.get("contextTokens").is_none());
        assert!(e.get("modelOverride").is_none() && e.get("authProfileOverride").is_none());
        let bad = StoreEvent::LevelOverride {
            key: k(),
            at: 1,
            level: "verbose".into(),
            value: Some("loud".into()),
        };
        assert!(matches!(fold_from(fold(&events).unwrap(), &[bad]), Err(StoreError::InvalidValue(_))));
        let child = StoreEvent::SubagentSpawned {
            key: "agent:main:subagent:x".into(),
            at: 5,
            session_id: "s9".into(),
            spawned_by: k(),
            depth: 1,
        };
        let fork = StoreEvent::Forked {
            key: "agent:main:discord:channel:1:thread:2".into(),
            at: 6,
            session_id: "s8".into(),
            parent_key: "agent:main:discord:channel:1".into(),
        };
        let ended = StoreEvent::SubagentEnded {
            key: "agent:main:subagent:x".into(),
            at: 9,
            status: "completed".into(),
        };
        let s = fold(&[child, fork, ended]).unwrap();
        assert_eq!(s["agent:main:subagent:x"]["spawnDepth"], 1);
        assert_eq!(
            (s["agent:main:subagent:x"]["status"].as_str(), s["agent:main:subagent:x"]["endedAt"].as_i64()),
            (Some("completed"), Some(9))
        );
        let archived =
            StoreEvent::Archived { key: "agent:main:subagent:x".into(), at: 10, reason: "deleted".into() };
        assert!(!fold_from(s.clone(), &[archived]).unwrap().contains_key("agent:main:subagent:x"));
        let odd = StoreEvent::Archived { key: "agent:main:subagent:x".into(), at: 10, reason: "lost".into() };
        assert_eq!(s["agent:main:discord:channel:1:thread:2"]["forkedFromParent"], true);
        assert!(matches!(fold_from(s, &[odd]), Err(StoreError::InvalidValue(_))));
    }

    #[test]
    fn recorded_usage_sets_the_counters_and_the_window_when_known() {
        let created = StoreEvent::Created {
            key: "agent:main:main".into(),
            session_id: "s1".into(),
            at: 1,
            reason: "inbound".into(),
            fields: Map::new(),
            provenance: None,
        };
        let usage = |window| StoreEvent::UsageRecorded {
            key: "agent:main:main".into(),
            at: 2,
            input: 5,
            output: 6,
            cache_read: 7,
            cache_write: 8,
            total: 26,
            context_tokens: window,
        };
        let s = fold(&[created.clone(), usage(Some(200_000))]).unwrap();
        assert_eq!(
            s["agent:main:main"],
            json!({"sessionId": "s1", "updatedAt": 2, "inputTokens": 5, "outputTokens": 6, "cacheRead": 7, "cacheWrite": 8, "totalTokens": 26, "totalTokensFresh": true, "contextTokens": 200000})
        );
        // Without a window the recorded one stays.
        let s = fold(&[created, usage(Some(200_000)), usage(None)]).unwrap();
        assert_eq!(s["agent:main:main"]["contextTokens"], 200_000);
    }

    #[test]
    fn bad_keys_and_ids_are_refused() {
        let created = |key: &str, id: &str| StoreEvent::Created {
            key: key.into(),
            session_id: id.into(),
            at: 1,
            reason: "x".into(),
            fields: Map::new(),
            provenance: None,
        };
        assert_eq!(
            fold(&[created("agent:main:../../etc", "s")]),
            Err(StoreError::InvalidKey("agent:main:../../etc".into()))
        );
        assert!(matches!(fold(&[created("agent:main:main", "../x")]), Err(StoreError::InvalidSessionId(_))));
        assert_eq!(
            fold(&[StoreEvent::Deleted { key: "agent:main:main".into(), at: 1 }]),
            Err(StoreError::Missing("agent:main:main".into()))
        );
    }
}
