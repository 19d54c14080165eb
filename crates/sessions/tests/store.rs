//! Laws of the store projection: folding is associative over concatenation,
//! a reset carries only what the spec lets it carry.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sessionlog_sessions::store::{fold, fold_from, StoreEvent, RESET_CARRIES};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("agent:main:main".to_owned()),
        Just("agent:main:direct:bob".to_owned()),
        Just("agent:ops:cron:j1".to_owned())
    ]
}

fn field() -> impl Strategy<Value = (String, Value)> {
    (
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
            Just("custom.plugin")
        ],
        prop_oneof![
            Just(Value::Null),
            "[a-z]{1,4}".prop_map(Value::from),
            (0u32..1000).prop_map(Value::from),
            Just(json!({"a": 1}))
        ],
    )
        .prop_map(|(k, v)| (k.to_owned(), v))
}

fn event() -> impl Strategy<Value = StoreEvent> {
    prop_oneof![
        (key(), 0i64..100, "[a-z0-9]{1,6}").prop_map(|(key, at, id)| StoreEvent::Created {
            key,
            session_id: id,
            at,
            reason: "inbound".into(),
            fields: Map::new(),
            provenance: None,
        }),
        (key(), 0i64..100, prop::collection::vec(field(), 0..4), any::<bool>()).prop_map(
            |(key, at, f, p)| {
                StoreEvent::Patched { key, at, patch: f.into_iter().collect(), preserve_activity: p }
            }
        ),
        (key(), 0i64..100, "[a-z0-9]{1,6}").prop_map(|(key, at, id)| StoreEvent::Reset {
            key,
            at,
            session_id: id,
            reason: "daily".into()
        }),
        (key(), 0i64..100).prop_map(|(key, at)| StoreEvent::Deleted { key, at }),
        (key(), 0i64..100, prop::option::of("[a-z]{1,4}"), prop::option::of("[a-z]{1,4}")).prop_map(
            |(key, at, provider, model)| StoreEvent::ModelOverride {
                key,
                at,
                provider,
                model,
                auth_profile: None
            }
        ),
        (key(), 0i64..100).prop_map(|(key, at)| StoreEvent::CompactionCounted { key, at }),
        (key(), 0i64..100, prop::option::of("[a-z]{1,4}")).prop_map(|(key, at, to)| {
            StoreEvent::RouteUpdated { key, at, channel: None, to, account_id: None, thread_id: None }
        }),
    ]
}

proptest! {
    #[test]
    fn fold_of_a_concatenation_is_fold_from_the_first_part(
        a in prop::collection::vec(event(), 0..12), b in prop::collection::vec(event(), 0..12),
    ) {
        let all: Vec<StoreEvent> = a.iter().chain(&b).cloned().collect();
        match fold(&a) {
            Ok(first) => prop_assert_eq!(fold_from(first, &b), fold(&all)),
            Err(e) => prop_assert_eq!(fold(&all), Err(e)),
        }
    }

    #[test]
    fn a_reset_carries_only_what_the_spec_allows(events in prop::collection::vec(event(), 1..16), at in 0i64..100) {
        let Ok(store) = fold(&events) else { return Ok(()) };
        for key in store.keys().cloned().collect::<Vec<_>>() {
            let reset = StoreEvent::Reset { key: key.clone(), at, session_id: "fresh".into(), reason: "idle".into() };
            let after = fold_from(store.clone(), &[reset]).unwrap();
            let entry = after[&key].as_object().unwrap();
            for field in entry.keys() {
                let allowed = ["sessionId", "updatedAt", "systemSent", "abortedLastRun"].contains(&field.as_str())
                    || RESET_CARRIES.contains(&field.as_str());
                prop_assert!(allowed, "reset carried {}", field);
            }
            prop_assert_eq!(&entry["sessionId"], "fresh");
        }
    }
}
