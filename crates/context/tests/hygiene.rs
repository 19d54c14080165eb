//! After hygiene, every family's structural rules hold, whatever came in;
//! and hygiene is idempotent (a second pass repairs nothing).

use proptest::prelude::*;
use serde_json::{json, Value};
use sessionlog_context::hygiene::{hygiene, violations, FAMILIES};

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("call_1".to_owned()),
        Just("call_2".to_owned()),
        Just("toolu_01ABC|fc_9".to_owned()),
        Just("functions.exec:0".to_owned()),
        Just("".to_owned()),
        Just("x".repeat(60)),
        "[a-z0-9_:.|-]{1,12}",
    ]
}

fn block() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z ]{0,8}".prop_map(|t| json!({"type": "text", "text": t})),
        "[a-z ]{0,8}".prop_map(|t| json!({"type": "thinking", "thinking": t})),
        (id(), prop_oneof![Just("read"), Just("bash"), Just("bad name!")]).prop_map(|(id, name)| {
            json!({"type": "toolCall", "id": id, "name": name, "arguments": {"path": "a"}})
        }),
        id().prop_map(|id| json!({"type": "toolCall", "id": id, "name": "read"})),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z ]{0,10}".prop_map(|t| json!({"role": "user", "content": t})),
        (
            prop::collection::vec(block(), 0..4),
            prop_oneof![Just("stop"), Just("toolUse"), Just("error"), Just("aborted")]
        )
            .prop_map(|(content, stop)| json!({"role": "assistant", "content": content, "stopReason": stop})),
        id().prop_map(|id| json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
                                   "content": [{"type": "text", "text": "ok"}], "isError": false})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_family_gets_a_context_it_accepts(messages in prop::collection::vec(message(), 0..24)) {
        for fam in FAMILIES {
            let (fixed, _) = hygiene(messages.clone(), fam);
            let broken = violations(&fixed, fam);
            prop_assert!(broken.is_empty(), "{}: {:?}\nin: {}\nout: {}", fam.name, broken,
                serde_json::to_string(&messages).unwrap(), serde_json::to_string(&fixed).unwrap());
            let (again, repairs) = hygiene(fixed.clone(), fam);
            prop_assert!(repairs.is_empty(), "{}: second pass repaired {:?}", fam.name, repairs);
            prop_assert_eq!(again, fixed);
        }
    }
}

#[test]
fn the_spec_cases_are_repaired_and_reported() {
    let anthropic = sessionlog_context::hygiene::family("anthropic").unwrap();
    let input = vec![
        json!({"role": "user", "content": "a"}),
        json!({"role": "user", "content": "b"}),
        json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "toolu_1|x", "name": "read", "arguments": {}},
            {"type": "toolCall", "id": "toolu_2", "name": "read", "arguments": {}}]}),
        json!({"role": "user", "content": "interjection"}),
        json!({"role": "toolResult", "toolCallId": "toolu_1|x", "toolName": "read", "content": [], "isError": false}),
        json!({"role": "toolResult", "toolCallId": "toolu_1|x", "toolName": "read", "content": [], "isError": false}),
        json!({"role": "toolResult", "toolCallId": "nobody", "toolName": "read", "content": [], "isError": false}),
    ];
    let (out, repairs) = hygiene(input, anthropic);
    let names: Vec<String> = repairs
        .iter()
        .map(|r| serde_json::to_value(r).unwrap()["repair"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "movedResult",
            "insertedSyntheticResult",
            "droppedDuplicateResult",
            "droppedOrphanResult",
            "renamedToolCallId",
            "renamedToolCallId",
            "mergedMessages"
        ]
    );
    let roles: Vec<&str> = out.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "toolResult", "user"]);
    assert_eq!(out[1]["content"][0]["id"], "toolu1x");
    assert_eq!(out[2]["toolCallId"], "toolu1x");
    assert_eq!(out[3]["isError"], true);
    assert_eq!(out[3]["toolCallId"], "toolu2", "strict ids keep only letters and digits");
    assert!(violations(&out, anthropic).is_empty());
}

/// Entries for a role sequence: `u` user, `a` assistant, `c` a custom
/// message (which is no user turn).
fn session(roles: &str) -> Vec<sessionlog_events::Entry> {
    roles
        .chars()
        .enumerate()
        .map(|(i, r)| {
            let line = match r {
                'u' => format!(r#"{{"type":"message","id":"e{i}","message":{{"role":"user","content":"q{i}"}}}}"#),
                'a' => format!(
                    r#"{{"type":"message","id":"e{i}","message":{{"role":"assistant","content":[{{"type":"text","text":"r{i}"}}]}}}}"#
                ),
                'c' => format!(r#"{{"type":"custom_message","id":"e{i}","customType":"note","content":"n{i}"}}"#),
                other => panic!("unknown role {other}"),
            };
            sessionlog_events::Entry::parse(&line).unwrap()
        })
        .collect()
}

#[test]
fn the_history_limit_keeps_the_last_user_turns() {
    use sessionlog_context::assemble::context_message;
    use sessionlog_context::hygiene::history_limit_start;
    let entries = session("cuauaau");
    let messages: Vec<_> = entries.iter().filter_map(context_message).collect();
    assert_eq!(messages.len(), 7);
    // Two turns: from the second-last user message (index 3) on.
    assert_eq!(history_limit_start(&messages, 2), 3);
    assert_eq!(history_limit_start(&messages, 1), 6);
    // As many turns as there are, more, or no limit: everything (the custom message included).
    assert_eq!(history_limit_start(&messages, 3), 0);
    assert_eq!(history_limit_start(&messages, 9), 0);
    assert_eq!(history_limit_start(&messages, 0), 0);
    assert_eq!(history_limit_start(&[], 2), 0);
}
