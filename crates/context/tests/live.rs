//! The incremental provider context ([`LiveContext`]) against the full build
//! ([`provider_context`]) after every append of random entry sequences.

use proptest::prelude::*;
use serde_json::{json, Value};
use sessionlog_context::engine::Legacy;
use sessionlog_context::hygiene::FAMILIES;
use sessionlog_context::live::LiveContext;
use sessionlog_context::{provider_context, PiRules, ProviderRequest};
use sessionlog_events::{Entry, Transcript};
use sessionlog_tokens::PiEstimator;

/// One generated entry: its kind and the random choices it is built from.
#[derive(Debug, Clone)]
struct Op {
    kind: u8,
    /// Which earlier entry it refers to (branch parent, kept entry, target, …).
    pick: usize,
    /// 0–84: child of the leaf; 85–94: child of an earlier entry; 95–99: a root.
    parent: u8,
    /// A reused id (an earlier entry's) instead of a fresh one.
    reuse_id: bool,
    /// A small number for sizes, flags and texts.
    n: u8,
}

fn op() -> impl Strategy<Value = Op> {
    (0u8..16, any::<usize>(), 0u8..100, prop::bool::weighted(0.03), any::<u8>())
        .prop_map(|(kind, pick, parent, reuse_id, n)| Op { kind, pick, parent, reuse_id, n })
}

fn timestamp(i: usize) -> String {
    sessionlog_events::write::timestamp(1_767_225_600_000 + i as i64 * 1000).unwrap()
}

/// The JSON body (without `type`, `id`, `parentId`, `timestamp`) of `op`.
fn body(op: &Op, ids: &[String], i: usize) -> Value {
    let earlier = |k: usize| -> Value {
        if ids.is_empty() || op.n % 11 == 0 {
            Value::from("missing")
        } else {
            Value::from(ids[k % ids.len()].clone())
        }
    };
    let ms = 1_767_225_600_000i64 + i as i64 * 1000;
    let text = format!("text {i} {}", "x".repeat(op.n as usize % 40));
    match op.kind {
        0 | 1 => {
            json!({"type": "message", "message": {"role": "user", "content": if op.n % 2 == 0 { json!(text) } else { json!([{"type": "text", "text": text}]) }, "timestamp": ms}})
        }
        2 | 3 => {
            let mut content = vec![json!({"type": "text", "text": text})];
            if op.n % 3 == 0 {
                content.push(json!({"type": "toolCall", "id": format!("call{}", op.n % 5), "name": "read", "arguments": {"path": "a"}}));
            }
            if op.n % 7 == 0 {
                content.insert(0, json!({"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"}));
            }
            json!({"type": "message", "message": {"role": "assistant", "content": content, "api": "openai-completions", "provider": format!("p{}", op.n % 2), "model": "m", "usage": {"input": 100 + op.n as u64, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110 + op.n as u64, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "stopReason": if op.n % 3 == 0 { "toolUse" } else { "stop" }, "timestamp": ms}})
        }
        4 => {
            // Some results long enough for pruning to trim.
            let text = if op.n % 4 == 1 { text.repeat(150) } else { text };
            json!({"type": "message", "message": {"role": "toolResult", "toolCallId": format!("call{}", op.n % 5), "toolName": "read", "content": [{"type": "text", "text": text}], "isError": op.n % 4 == 0, "timestamp": ms}})
        }
        5 => {
            json!({"type": "compaction", "summary": format!("summary {i}"), "firstKeptEntryId": earlier(op.pick), "tokensBefore": 1234, "details": {}})
        }
        6 => {
            let mut v = json!({"type": "compaction", "summary": format!("summary {i}"), "firstKeptEntryId": earlier(op.pick), "tokensBefore": 99});
            if op.n % 2 == 0 {
                v["systemMessage"] = json!({"role": "system", "content": "you are", "timestamp": ms});
            }
            v
        }
        7 => {
            json!({"type": "branch_summary", "fromId": earlier(op.pick), "summary": if op.n % 4 == 0 { "" } else { "went elsewhere" }})
        }
        8 => {
            json!({"type": "model_change", "provider": "anthropic", "modelId": format!("claude-{}", op.n % 3)})
        }
        9 => json!({"type": "thinking_level_change", "thinkingLevel": "high"}),
        10 => {
            let mut v = json!({"type": "custom_message", "customType": "note", "display": true});
            if op.n % 3 != 0 {
                v["content"] = json!(text);
            }
            v
        }
        // Warm or cold at the pruning time of `requests`, depending on `n`.
        11 => {
            json!({"type": "custom", "customType": "openclaw.cache-ttl", "data": {"timestamp": ms - 200_000 * (op.n as i64 % 3)}})
        }
        12 => json!({"type": "label", "targetId": earlier(op.pick), "label": "here"}),
        13 => {
            json!({"type": "context_edit", "targetId": earlier(op.pick), "replacement": if op.n % 3 == 0 { Value::Null } else { json!({"content": "edited"}) }})
        }
        14 => {
            json!({"type": "message", "message": {"role": "system", "content": "be brief", "sections": {"a": "b"}, "timestamp": ms}})
        }
        _ => {
            json!({"type": "message", "message": {"role": "bashExecution", "command": "ls", "output": "a b", "exitCode": 0, "cancelled": false, "truncated": false, "excludeFromContext": op.n % 2 == 0, "timestamp": ms}})
        }
    }
}

fn header() -> Entry {
    Entry::parse(
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    )
    .unwrap()
}

/// The entries of `ops` in order, ids and parents as the ops choose.
fn entries(ops: &[Op]) -> Vec<Entry> {
    let mut ids: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let id = if op.reuse_id && !ids.is_empty() {
            ids[op.pick % ids.len()].clone()
        } else {
            format!("e{i:07x}")
        };
        let parent = match op.parent {
            _ if ids.is_empty() => Value::Null,
            0..=84 => Value::from(ids.last().cloned().unwrap()),
            85..=94 => Value::from(ids[op.pick % ids.len()].clone()),
            _ => Value::Null,
        };
        let mut v = body(op, &ids, i);
        let map = v.as_object_mut().unwrap();
        let kind = map.shift_remove("type").unwrap();
        let mut line = serde_json::Map::new();
        line.insert("type".into(), kind);
        line.insert("id".into(), Value::from(id.clone()));
        line.insert("parentId".into(), parent);
        line.insert("timestamp".into(), Value::from(timestamp(i)));
        line.extend(std::mem::take(map));
        out.push(Entry::parse(&Value::Object(line).to_string()).unwrap());
        ids.push(id);
    }
    out
}

fn requests(n: usize) -> Vec<ProviderRequest<'static>> {
    vec![
        ProviderRequest::default(),
        ProviderRequest {
            history_limit: Some(n % 4),
            provider: Some(FAMILIES[n % FAMILIES.len()].name),
            ..ProviderRequest::default()
        },
        ProviderRequest {
            prune_at_ms: Some(1_767_225_600_000 + n as i64 * 1000 + 200_000),
            token_budget: Some(2_000),
            provider: Some("anthropic"),
            ..ProviderRequest::default()
        },
    ]
}

/// Appends every entry, checking the projection after each against the full build.
fn check(ops: &[Op], rules: PiRules) -> Result<LiveContext, TestCaseError> {
    let mut t = Transcript::from_objects(header(), Vec::new()).unwrap();
    let mut live = LiveContext::new(&t, rules);
    for (i, entry) in entries(ops).into_iter().enumerate() {
        t.entries.push(entry);
        live.sync(&t);
        for mut request in requests(i) {
            request.rules = rules;
            let full = provider_context(&t, &request, &mut Legacy, &PiEstimator);
            let ours = live.provider_context(&t, &request, &mut Legacy, &PiEstimator);
            prop_assert_eq!(&ours, &full, "after entry {} ({:?}), request {:?}", i, ops[i], request);
        }
    }
    Ok(live)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// After every append, the folded projection is the full build, under
    /// both Pi releases' rules.
    #[test]
    fn the_fold_equals_the_full_build_after_every_append(ops in prop::collection::vec(op(), 1..60), v1 in any::<bool>()) {
        check(&ops, if v1 { PiRules::V1_6 } else { PiRules::V0_58 })?;
    }

    /// A session that only grows at its leaf with new ids (what the live
    /// loop writes: messages, tool results, compactions) is folded without
    /// a single rebuild after the first.
    #[test]
    fn appends_at_the_leaf_never_rebuild(ops in prop::collection::vec(op(), 1..60), v1 in any::<bool>()) {
        let ops: Vec<Op> = ops.into_iter().map(|o| Op { parent: 0, reuse_id: false, ..o }).collect();
        let live = check(&ops, if v1 { PiRules::V1_6 } else { PiRules::V0_58 })?;
        prop_assert_eq!(live.rebuilds(), 1);
    }
}

/// A compaction keeps its summary and the entries from `firstKeptEntryId`
/// on, and what follows it; by hand on a short session.
#[test]
fn a_compaction_resets_to_its_summary_and_kept_entries() {
    let line = |s: &str| Entry::parse(s).unwrap();
    let mut t = Transcript::from_objects(header(), Vec::new()).unwrap();
    let mut live = LiveContext::new(&t, PiRules::V0_58);
    let lines = [
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"r1"}],"stopReason":"stop","timestamp":2}}"#,
        r#"{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"two","timestamp":3}}"#,
        r#"{"type":"message","id":"a2","parentId":"u2","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"r2"}],"stopReason":"stop","timestamp":4}}"#,
        r#"{"type":"compaction","id":"c1","parentId":"a2","timestamp":"2026-01-01T00:00:05.000Z","summary":"S","firstKeptEntryId":"u2","tokensBefore":10}"#,
        r#"{"type":"message","id":"u3","parentId":"c1","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"user","content":"three","timestamp":6}}"#,
    ];
    for l in lines {
        t.entries.push(line(l));
        live.sync(&t);
    }
    let ctx = live.provider_context(&t, &ProviderRequest::default(), &mut Legacy, &PiEstimator).unwrap();
    let texts: Vec<String> = ctx
        .messages
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            blocks => blocks[0]["text"].as_str().unwrap().to_owned(),
        })
        .collect();
    let summary = "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>";
    assert_eq!(texts, [summary, "two", "r2", "three"]);
    assert_eq!(live.rebuilds(), 1);
}
