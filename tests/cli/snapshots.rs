//! Snapshots of the provider-facing context (`context --llm`): the synthetic
//! tree at every leaf in full, and real transcripts at chosen entries as a
//! head/tail digest (long strings shortened so a reviewer can read them).

use serde_json::{json, Value};

use crate::support::{arg, fixtures, json, run_ok};

fn shorten(value: &Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > 400 => {
            let head: String = s.chars().take(400).collect();
            Value::from(format!("{head}…[{} more chars]", s.chars().count() - 400))
        }
        Value::Array(items) => Value::Array(items.iter().map(shorten).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), shorten(v))).collect()),
        other => other.clone(),
    }
}

fn context(rel: &str, extra: &[&str]) -> Value {
    let file = fixtures::shared_dir().join("fixtures").join(rel);
    let mut args = vec!["context", arg(&file), "--json", "--llm"];
    args.extend_from_slice(extra);
    json(&run_ok(&args))
}

fn digest(doc: &Value) -> Value {
    let llm = doc["llmMessages"].as_array().cloned().unwrap_or_default();
    let head: Vec<Value> = llm.iter().take(3).map(shorten).collect();
    let tail: Vec<Value> = llm.iter().skip(llm.len().saturating_sub(3).max(3)).map(shorten).collect();
    json!({
        "leafId": doc["leafId"], "model": doc["model"], "thinkingLevel": doc["thinkingLevel"],
        "messageCount": doc["messageCount"], "llmMessageCount": llm.len(), "head": head, "tail": tail,
    })
}

#[test]
fn synthetic_tree_at_every_leaf() {
    for leaf in ["00000010", "00000013", "00000014", "00000020"] {
        let doc = context("pi/synthetic/tree-v3.jsonl", &["--leaf", leaf]);
        let view = json!({"leafId": doc["leafId"], "model": doc["model"], "thinkingLevel": doc["thinkingLevel"],
                          "llmMessages": shorten(&doc["llmMessages"])});
        insta::assert_json_snapshot!(format!("tree-v3-leaf-{leaf}"), view);
    }
}

#[test]
fn real_transcripts_at_chosen_entries() {
    let cases: [(&str, &str, &[&str]); 5] = [
        // Two consecutive compactions: the context opens with the second (655-token) summary.
        (
            "openclaw-26f24350-default",
            "openclaw/agents/build/sessions/26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl",
            &[],
        ),
        // The abandoned branch: a sub-agent announcement after the branch point d8c2bacf.
        (
            "openclaw-684637ff-abandoned-leaf",
            "openclaw/agents/build/sessions/684637ff-e673-46e4-a1a9-0de622f22f21.jsonl",
            &["--leaf", "c50981a1"],
        ),
        // The first failed turn (HTTP 429) stays in context as an error assistant message.
        (
            "openclaw-678366ea-first-error",
            "openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl",
            &["--at", "5"],
        ),
        // A bash execution converted to its user-text wrapper.
        ("pi-compact-bash-execution", "pi/history/compact.jsonl", &["--at", "331"]),
        // A migrated v1 file whose context starts with a compaction summary.
        ("pi-before-compaction-default", "pi/before-compaction.jsonl", &[]),
    ];
    for (name, rel, extra) in cases {
        insta::assert_json_snapshot!(name, digest(&context(rel, extra)));
    }
}

/// Assemble (legacy) → prune (cold cache) → hygiene, per provider family: a
/// digest of the result (roles, the repairs by kind with a few examples, the prunes).
fn engine_digest(rel: &str, family: &str, extra: &[&str]) -> Value {
    let file = fixtures::shared_dir().join("fixtures").join(rel);
    let mut args = vec!["context", arg(&file), "--json", "--engine", "legacy", "--provider", family];
    args.extend_from_slice(extra);
    let doc = json(&run_ok(&args));
    let mut roles = std::collections::BTreeMap::<String, u64>::new();
    for m in doc["messages"].as_array().unwrap() {
        *roles.entry(m["role"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    let mut repairs = std::collections::BTreeMap::<String, (u64, Vec<Value>)>::new();
    for r in doc["repairs"].as_array().unwrap() {
        let slot = repairs.entry(r["repair"].as_str().unwrap().to_owned()).or_default();
        slot.0 += 1;
        if slot.1.len() < 2 {
            slot.1.push(r.clone());
        }
    }
    let first_call_ids: Vec<Value> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "toolCall")
        .take(3)
        .map(|b| b["id"].clone())
        .collect();
    json!({
        "messageCount": doc["messageCount"], "roles": roles,
        "repairs": repairs.into_iter().map(|(k, (n, ex))| (k, json!({"count": n, "examples": ex}))).collect::<serde_json::Map<_, _>>(),
        "firstCallIds": first_call_ids,
        "prune": doc["prune"],
    })
}

#[test]
fn engine_prune_hygiene_per_family() {
    let families = ["anthropic", "google", "mistral", "openai-responses", "openai-completions"];
    let cases: [(&str, &str, &[&str]); 4] = [
        ("tree-v3", "pi/synthetic/tree-v3.jsonl", &[]),
        // An Anthropic session with large tool results and cache-TTL entries:
        // the pruner trims (cache cold an hour later, 50k window).
        (
            "openclaw-d6e7ae87",
            "openclaw/agents/build/sessions/d6e7ae87-232c-44c3-a1f5-1194d5162b92.jsonl.deleted.2026-02-17T16-56-06.939Z",
            &["--prune", "--now", "2026-02-17T18:00:00Z", "--budget", "50000"],
        ),
        // Failed and aborted turns; pruning with a 50k window an hour after the last cache touch.
        (
            "openclaw-684637ff",
            "openclaw/agents/build/sessions/684637ff-e673-46e4-a1a9-0de622f22f21.jsonl",
            &["--prune", "--now", "2026-03-01T00:00:00Z", "--budget", "50000"],
        ),
        (
            "openclaw-678366ea",
            "openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl",
            &["--prune", "--now", "2026-03-01T00:00:00Z", "--budget", "50000"],
        ),
    ];
    for (name, rel, extra) in cases {
        let digest: serde_json::Map<String, Value> =
            families.iter().map(|f| ((*f).to_owned(), engine_digest(rel, f, extra))).collect();
        insta::assert_json_snapshot!(format!("engine-{name}"), digest);
    }
}

#[test]
fn the_history_limit_keeps_the_last_user_turns_of_a_real_session() {
    let file = fixtures::shared_dir()
        .join("fixtures/openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl");
    let doc = |limit: &str| {
        json(&run_ok(&["context", arg(&file), "--json", "--provider", "anthropic", "--history-limit", limit]))
    };
    let users = |d: &Value| d["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").count();
    let all = doc("0");
    assert_eq!(all["historyLimit"], serde_json::json!({"limit": 0, "droppedMessages": 0}));
    assert!(users(&all) > 2);
    // A limit above the session's turns changes nothing.
    let generous = doc("1000");
    assert_eq!(generous["messages"], all["messages"]);
    // Two turns: the context starts at a user message and holds exactly two of them.
    let two = doc("2");
    assert!(two["historyLimit"]["droppedMessages"].as_u64().unwrap() > 0);
    assert_eq!(two["messages"][0]["role"], "user");
    assert_eq!(users(&two), 2);
    assert!(two["messageCount"].as_u64().unwrap() < all["messageCount"].as_u64().unwrap());
    // The kept tail is the unlimited context's tail, message for message.
    let (a, t) = (all["messages"].as_array().unwrap(), two["messages"].as_array().unwrap());
    assert_eq!(&a[a.len() - t.len()..], t.as_slice());
}
