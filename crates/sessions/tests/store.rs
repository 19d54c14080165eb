//! The store projection against a model written out from the spec (sessions
//! §3.6, §3.9): generated sequences are valid by construction (patches,
//! resets, deletes and counters name live keys), so every case folds and is
//! compared field by field; folding is associative over concatenation.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sessionlog_sessions::store::{fold, fold_from, StoreEvent};

const KEYS: [&str; 4] =
    ["agent:main:main", "agent:main:direct:bob", "agent:ops:cron:j1", "agent:main:telegram:group:7"];

/// `sessions.reset` carries these (spec sessions §3.9), written out here.
const CARRIED: [&str; 12] = [
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

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        "[a-z]{1,4}".prop_map(Value::from),
        (0u32..1000).prop_map(Value::from),
        Just(json!({"a": 1}))
    ]
}

fn field_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("label"),
        Just("model"),
        Just("modelProvider"),
        Just("thinkingLevel"),
        Just("inputTokens"),
        Just("lastTo"),
        Just("origin"),
        Just("systemSent"),
        Just("skillsSnapshot"),
        Just("custom.plugin"),
        Just("abortedLastRun")
    ]
}

/// One step: which operation, which key (an index into the live or all keys),
/// a time step, a session-id seed, fields and a flag.
type Step = (u8, usize, i64, u32, Vec<(&'static str, Value)>, bool);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0u8..6,
            0usize..8,
            0i64..50,
            0u32..1000,
            prop::collection::vec((field_name(), value()), 0..4),
            any::<bool>(),
        ),
        1..40,
    )
}

/// Turns steps into a valid event sequence: the first event for a key creates
/// it; later ones patch, reset, delete or count on keys that exist.
fn events(steps: &[Step]) -> Vec<StoreEvent> {
    let mut live: Vec<&str> = Vec::new();
    let mut at = 0i64;
    let mut out = Vec::new();
    for (op, k, dt, seed, fields, flag) in steps {
        // Times move back as well as forward: updatedAt never goes back.
        at = (at + dt - 10).max(0);
        let key = if live.is_empty() || *op == 0 { KEYS[k % KEYS.len()] } else { live[k % live.len()] };
        let exists = live.contains(&key);
        let event = match (*op, exists) {
            (0, _) | (_, false) => {
                live.retain(|x| *x != key);
                live.push(key);
                StoreEvent::Created {
                    key: key.to_owned(),
                    session_id: format!("s{seed}"),
                    at,
                    reason: "inbound".into(),
                    fields: fields.iter().map(|(f, v)| ((*f).to_owned(), v.clone())).collect(),
                    provenance: None,
                }
            }
            (1, _) => StoreEvent::Patched {
                key: key.to_owned(),
                at,
                patch: fields.iter().map(|(f, v)| ((*f).to_owned(), v.clone())).collect(),
                preserve_activity: *flag,
            },
            (2, _) => StoreEvent::Reset {
                key: key.to_owned(),
                at,
                session_id: format!("r{seed}"),
                reason: "daily".into(),
            },
            (3, _) => {
                live.retain(|x| *x != key);
                StoreEvent::Deleted { key: key.to_owned(), at }
            }
            _ => StoreEvent::CompactionCounted { key: key.to_owned(), at },
        };
        out.push(event);
    }
    out
}

/// The spec's semantics, one event at a time, over plain maps.
fn model(events: &[StoreEvent]) -> Vec<(String, Map<String, Value>)> {
    let mut store: Vec<(String, Map<String, Value>)> = Vec::new();
    let updated = |e: &Map<String, Value>| e["updatedAt"].as_i64().unwrap();
    for event in events {
        match event {
            StoreEvent::Created { key, session_id, at, fields, .. } => {
                let mut entry = Map::new();
                entry.insert("sessionId".into(), json!(session_id));
                entry.insert("updatedAt".into(), json!(at));
                for (f, v) in fields {
                    if !v.is_null() {
                        entry.insert(f.clone(), v.clone());
                    }
                }
                // A created key replaces the entry in place, or joins at the end.
                match store.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1 = entry,
                    None => store.push((key.clone(), entry)),
                }
            }
            StoreEvent::Patched { key, at, patch, preserve_activity } => {
                let entry = &mut store.iter_mut().find(|(k, _)| k == key).unwrap().1;
                let before = updated(entry);
                for (f, v) in patch {
                    // null clears, anything else sets (§3.9).
                    if v.is_null() {
                        entry.shift_remove(f);
                    } else {
                        entry.insert(f.clone(), v.clone());
                    }
                }
                // updatedAt never goes back, and stays put for metadata-only writes (§3.6).
                let next = if *preserve_activity { before } else { before.max(*at) };
                entry.insert("updatedAt".into(), json!(next));
                // A model without a provider drops the observed provider (§3.6).
                if patch.contains_key("model") && !patch.contains_key("modelProvider") {
                    entry.shift_remove("modelProvider");
                }
            }
            StoreEvent::Reset { key, at, session_id, .. } => {
                let slot = store.iter_mut().find(|(k, _)| k == key).unwrap();
                let mut entry = Map::new();
                entry.insert("sessionId".into(), json!(session_id));
                entry.insert("updatedAt".into(), json!(at));
                entry.insert("systemSent".into(), json!(false));
                entry.insert("abortedLastRun".into(), json!(false));
                for f in CARRIED {
                    if let Some(v) = slot.1.get(f) {
                        entry.insert(f.into(), v.clone());
                    }
                }
                slot.1 = entry;
            }
            StoreEvent::Deleted { key, .. } => store.retain(|(k, _)| k != key),
            StoreEvent::CompactionCounted { key, at } => {
                let entry = &mut store.iter_mut().find(|(k, _)| k == key).unwrap().1;
                let n = entry.get("compactionCount").and_then(Value::as_u64).unwrap_or(0);
                entry.insert("compactionCount".into(), json!(n + 1));
                let next = updated(entry).max(*at);
                entry.insert("updatedAt".into(), json!(next));
            }
            other => unreachable!("not generated: {other:?}"),
        }
    }
    store
}

fn as_pairs(store: &Map<String, Value>) -> Vec<(String, Map<String, Value>)> {
    store.iter().map(|(k, v)| (k.clone(), v.as_object().unwrap().clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_fold_is_the_spec_model(steps in steps()) {
        let events = events(&steps);
        let folded = fold(&events).unwrap();
        let expected = model(&events);
        // Same keys in creation order, and the same fields with the same values.
        let keys: Vec<&String> = folded.keys().collect();
        let model_keys: Vec<&String> = expected.iter().map(|(k, _)| k).collect();
        prop_assert_eq!(keys, model_keys);
        for ((key, got), (_, want)) in as_pairs(&folded).iter().zip(&expected) {
            prop_assert_eq!(got, want, "{}", key);
            // sessionId and updatedAt are always there (spec §3.1).
            prop_assert!(got["sessionId"].is_string() && got["updatedAt"].is_i64());
        }
    }

    #[test]
    fn fold_of_a_concatenation_is_fold_from_the_first_part(steps in steps(), split in 0usize..40) {
        let events = events(&steps);
        let (a, b) = events.split_at(split.min(events.len()));
        let first = fold(a).unwrap();
        prop_assert_eq!(fold_from(first, b).unwrap(), fold(&events).unwrap());
    }
}
