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
