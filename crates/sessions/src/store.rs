//! The store stream and its projection, `sessions.json` (spec sessions §3).
//!
//! Every change to a session is a [`StoreEvent`]; the store is
//! [`fold`]ed from them and can be rebuilt from the log at any time, bit for
//! bit. Entries are kept as JSON objects, so fields this crate does not
//! model (and OpenClaw's later additions) round-trip untouched. Key order is
//! the order keys were first created, as OpenClaw's `JSON.stringify` of the
//! store object keeps it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::keys::{normalize_key, validate_session_id};

/// One store event, as a line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreEvent {
    /// An entry taken over from an existing `sessions.json`, verbatim.
    Imported {
        /// The session key (as stored).
        key: String,
        /// The entry.
        entry: Map<String, Value>,
    },
    /// A new session.
    Created {
        /// The session key.
        key: String,
        /// Its session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// When (epoch ms).
        at: i64,
        /// Why (`inbound`, `fork`, `subagent`, `cron`, …).
        reason: String,
        /// Extra fields of the new entry (chatType, channel, origin, spawnedBy, …).
        #[serde(default)]
        fields: Map<String, Value>,
    },
    /// Field changes: a present `null` clears a field, an absent one keeps it.
    Patched {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// The fields.
        patch: Map<String, Value>,
        /// Metadata and last-route updates do not count as activity (`updatedAt` kept).
        #[serde(rename = "preserveActivity", default)]
        preserve_activity: bool,
    },
    /// A reset: a new session id for the key, with what carries over (spec §3.9).
    Reset {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
        /// The new session id.
        #[serde(rename = "sessionId")]
        session_id: String,
        /// `daily`, `idle`, `new` or `reset`.
        reason: String,
    },
    /// The entry is removed.
    Deleted {
        /// The session key.
        key: String,
        /// When (epoch ms).
        at: i64,
    },
}

impl StoreEvent {
    /// The key the event is about.
    pub fn key(&self) -> &str {
        match self {
            StoreEvent::Imported { key, .. }
            | StoreEvent::Created { key, .. }
            | StoreEvent::Patched { key, .. }
            | StoreEvent::Reset { key, .. }
            | StoreEvent::Deleted { key, .. } => key,
        }
    }
}

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
    }
    Ok(())
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
    fn bad_keys_and_ids_are_refused() {
        let created = |key: &str, id: &str| StoreEvent::Created {
            key: key.into(),
            session_id: id.into(),
            at: 1,
            reason: "x".into(),
            fields: Map::new(),
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
