//! Requests built from real Pi transcripts (context → `convertToLlm` →
//! request) keep what each API demands of a tool call: its result comes
//! right after it, under the same id.

use serde_json::Value;
use sessionlog_context::llm::convert_to_llm;
use sessionlog_event_log::read::{load, Mode};
use sessionlog_provider::{build_request, Api, Model, Request};
use sessionlog_test_support::fixtures::pi_transcripts;

fn body(api: Api, messages: Vec<Value>) -> Value {
    let mut model = Model::new(api, "anthropic", "claude-sonnet-4-5", "http://127.0.0.1:9");
    model.images = true;
    let request = Request { system_prompt: Some("sys".into()), messages, ..Request::default() };
    serde_json::from_slice(&build_request(&model, None, &request).body).expect("the body is JSON")
}

/// Anthropic: every `tool_use` is answered by a `tool_result` with its id
/// in the next message (a trailing unanswered call at the very end aside).
fn anthropic_pairs(body: &Value) -> Result<usize, String> {
    let messages = body["messages"].as_array().unwrap();
    let mut calls = 0;
    for (i, m) in messages.iter().enumerate() {
        let ids: Vec<&str> = m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        if ids.is_empty() || i + 1 == messages.len() {
            continue;
        }
        let next = &messages[i + 1];
        let answered: Vec<&str> = next["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        for id in ids {
            calls += 1;
            if next["role"] != "user" || !answered.contains(&id) {
                return Err(format!("message {i}: tool_use {id} is not answered by message {}", i + 1));
            }
        }
    }
    Ok(calls)
}

/// OpenAI: every `tool_calls` id has a `tool` message right after the
/// assistant message, before anything else.
fn openai_pairs(body: &Value) -> Result<usize, String> {
    let messages = body["messages"].as_array().unwrap();
    let mut calls = 0;
    for (i, m) in messages.iter().enumerate() {
        let Some(tool_calls) = m["tool_calls"].as_array() else { continue };
        let answered: Vec<&str> = messages[i + 1..]
            .iter()
            .take_while(|n| n["role"] == "tool")
            .map(|n| n["tool_call_id"].as_str().unwrap())
            .collect();
        if i + 1 == messages.len() {
            continue;
        }
        for call in tool_calls {
            calls += 1;
            let id = call["id"].as_str().unwrap();
            if !answered.contains(&id) {
                return Err(format!("message {i}: tool call {id} has no tool message after it"));
            }
            let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap())
                .map_err(|e| format!("message {i}: arguments are not JSON: {e}"))?;
            if !args.is_object() {
                return Err(format!("message {i}: arguments are not an object"));
            }
        }
    }
    Ok(calls)
}

#[test]
fn real_transcripts_become_well_paired_requests() {
    let mut total = 0;
    for path in pi_transcripts() {
        let Ok(loaded) = load(&path, Mode::Lenient) else { continue };
        let transcript = loaded.transcript;
        let tree = transcript.tree();
        let leaf =
            sessionlog_context::resolve_leaf(&transcript, &tree, sessionlog_context::Leaf::Default).unwrap();
        let Ok(ctx) = sessionlog_context::build(&transcript, &tree, leaf) else { continue };
        let messages: Vec<Value> = convert_to_llm(&ctx.messages).iter().map(|m| m.to_json()).collect();
        if messages.is_empty() {
            continue;
        }
        let a = anthropic_pairs(&body(Api::AnthropicMessages, messages.clone()))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let o = openai_pairs(&body(Api::OpenAiCompletions, messages))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(a, o, "{}: both APIs carry the same calls", path.display());
        total += a;
    }
    assert!(total > 100, "the fixtures hold tool calls ({total})");
}
