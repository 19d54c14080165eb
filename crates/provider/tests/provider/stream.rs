//! Whole calls against the fake server: the message Pi would persist, the
//! usage, tool calls, and the requests on the wire.

use serde_json::{json, Value};
use sessionlog_provider::{
    complete, Api, CancellationToken, ModelCost, Provider, Request, ThinkingLevel, Tool,
};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Step, Turn};

use crate::common::{client_with, model, options, request, user};

fn priced(api: Api, fake: &FakeLlm) -> sessionlog_provider::Model {
    let mut m = model(api, fake);
    m.cost = ModelCost { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 };
    m
}

#[tokio::test]
async fn an_openai_text_turn_is_written_as_pi_writes_it() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("Hello, world!").usage(12, 3).cache(100, 50)));
    let client = client_with(priced(Api::OpenAiCompletions, &fake), options());
    let message = complete(&client, &request("hi"), CancellationToken::new(), 1767225605000).await;
    // Costs as JavaScript computes and prints them:
    // (3/1e6)*12, (15/1e6)*3, (0.3/1e6)*100, and their sum.
    assert_eq!(
        message.to_json_string(),
        concat!(
            r#"{"role":"assistant","content":[{"type":"text","text":"Hello, world!"}],"#,
            r#""api":"openai-completions","provider":"fake","model":"fake-model","#,
            r#""usage":{"input":12,"output":3,"cacheRead":100,"cacheWrite":0,"totalTokens":115,"#,
            r#""cost":{"input":0.000036,"output":0.000045,"cacheRead":0.000029999999999999997,"cacheWrite":0,"total":0.000111}},"#,
            r#""stopReason":"stop","timestamp":1767225605000}"#
        )
    );
}

#[tokio::test]
async fn an_anthropic_turn_with_thinking_and_tools_is_written_as_pi_writes_it() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(
        Turn::new(vec![
            Step::Thinking { text: "Read first.".into(), signature: "c2lnLTE=".into() },
            Step::Text("Reading it.".into()),
            Step::ToolCall {
                id: "toolu_1".into(),
                name: "read".into(),
                arguments: r#"{"path":"src/range.ts"}"#.into(),
            },
        ])
        .usage(12, 3)
        .cache(100, 50),
    ));
    let client = client_with(priced(Api::AnthropicMessages, &fake), options());
    let message = complete(&client, &request("fix it"), CancellationToken::new(), 1767225605000).await;
    assert_eq!(
        message.to_json_string(),
        concat!(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"Read first.","thinkingSignature":"c2lnLTE="},"#,
            r#"{"type":"text","text":"Reading it."},"#,
            r#"{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"src/range.ts"}}],"#,
            r#""api":"anthropic-messages","provider":"fake","model":"fake-model","#,
            r#""usage":{"input":12,"output":3,"cacheRead":100,"cacheWrite":50,"totalTokens":165,"#,
            r#""cost":{"input":0.000036,"output":0.000045,"cacheRead":0.000029999999999999997,"cacheWrite":0.0001875,"total":0.0002985}},"#,
            r#""stopReason":"toolUse","timestamp":1767225605000}"#
        )
    );
}

/// Three parallel calls whose argument pieces arrive interleaved, as a
/// server may send them: each is assembled by its `index`.
#[tokio::test]
async fn openai_tool_calls_are_assembled_by_index() {
    let fake = FakeLlm::start();
    let chunk = |delta: Value| {
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]}))
    };
    let call = |index: u64, id: &str, name: &str| {
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        )
    };
    let args = |index: u64, text: &str| {
        chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]}))
    };
    let body = [
        call(0, "call_a", "read"),
        args(0, "{\"pa"),
        call(1, "call_b", "bash"),
        args(1, "{\"command\":"),
        args(0, "th\":\"a.txt\"}"),
        call(2, "call_c", "write"),
        args(1, "\"ls\"}"),
        args(2, "{}"),
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    fake.push(Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        body,
    });
    let client = client_with(model(Api::OpenAiCompletions, &fake), options());
    let message = complete(&client, &request("go"), CancellationToken::new(), 0).await;
    let calls: Vec<(String, String, Value)> =
        message.tool_calls().map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone())).collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".into(), "read".into(), json!({"path": "a.txt"})),
            ("call_b".into(), "bash".into(), json!({"command": "ls"})),
            ("call_c".into(), "write".into(), json!({})),
        ]
    );
    assert_eq!(message.stop_reason.as_str(), "toolUse");
}

/// A conversation in Pi's form with a tool round trip, sent to each API.
fn conversation() -> Request {
    Request {
        system_prompt: Some("You are terse.".into()),
        messages: vec![
            user("read a.txt"),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "toolCall", "id": "call|abc/1", "name": "read", "arguments": {"path": "a.txt"}}],
              "api": "openai-responses", "provider": "openai", "model": "gpt-5", "usage": {}, "stopReason": "toolUse", "timestamp": 2}),
            json!({"role": "toolResult", "toolCallId": "call|abc/1", "toolName": "read",
                   "content": [{"type": "text", "text": "hello"}], "isError": false, "timestamp": 3}),
            json!({"role": "assistant", "content": [], "api": "openai-completions", "provider": "fake", "model": "fake-model",
                   "usage": {}, "stopReason": "aborted", "timestamp": 4}),
            user("thanks"),
        ],
        tools: Some(vec![Tool {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }]),
        max_tokens: Some(1000),
        temperature: None,
        thinking: None,
    }
}

#[tokio::test]
async fn the_openai_request_is_the_one_pi_sends() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("ok")));
    let client = client_with(model(Api::OpenAiCompletions, &fake), options());
    complete(&client, &conversation(), CancellationToken::new(), 0).await;
    let seen = &fake.requests()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    // Pi's convertMessages: the foreign tool-call id cut at `|` and cleaned,
    // the aborted turn left out, assistant text as one string.
    assert_eq!(
        seen.json(),
        json!({
            "model": "fake-model",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "read a.txt"},
                {"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "call", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]},
                {"role": "tool", "content": "hello", "tool_call_id": "call"},
                {"role": "user", "content": "thanks"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "store": false,
            "max_completion_tokens": 1000,
            "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}, "strict": false}}],
        })
    );
    // The body is JSON.stringify's output: no spaces.
    assert!(String::from_utf8(seen.body.clone())
        .unwrap()
        .starts_with(r#"{"model":"fake-model","messages":[{"role":"system""#));
}

#[tokio::test]
async fn the_anthropic_request_is_the_one_pi_sends() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("ok")));
    let mut m = model(Api::AnthropicMessages, &fake);
    m.reasoning = true;
    m.max_tokens = 64000;
    let client = client_with(m, options());
    let mut request = conversation();
    request.thinking = Some(ThinkingLevel::Medium);
    complete(&client, &request, CancellationToken::new(), 0).await;
    let seen = &fake.requests()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.header("x-api-key"), Some("sk-test"));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        seen.header("anthropic-beta"),
        Some("fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14")
    );
    assert_eq!(
        seen.json(),
        json!({
            "model": "fake-model",
            "messages": [
                {"role": "user", "content": "read a.txt"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_abc_1", "name": "read", "input": {"path": "a.txt"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_abc_1", "content": "hello", "is_error": false}]},
                {"role": "user", "content": [{"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}]},
            ],
            // 1000 + the medium budget 8192.
            "max_tokens": 9192,
            "stream": true,
            "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read", "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}],
            "thinking": {"type": "enabled", "budget_tokens": 8192},
        })
    );
}

#[tokio::test]
async fn the_stream_yields_typed_deltas_in_order() {
    use sessionlog_provider::Delta::*;
    use sessionlog_provider::{StopReason, TokenCounts};
    let fake = FakeLlm::start();
    let mut turn = Turn::text("Hi there");
    turn.piece = 4;
    fake.push(Reply::turn(turn.usage(5, 2)));
    let client = client_with(model(Api::OpenAiCompletions, &fake), options());
    let deltas = crate::common::collect(client.stream(&request("hi"), CancellationToken::new())).await;
    let counts = TokenCounts { input: Some(5), output: Some(2), cache_read: Some(0), cache_write: Some(0) };
    assert_eq!(
        deltas,
        vec![
            Start,
            TextStart { index: 0 },
            TextDelta { index: 0, text: "Hi t".into() },
            TextDelta { index: 0, text: "here".into() },
            Usage(counts),
            TextEnd { index: 0 },
            Stop { reason: StopReason::Stop },
        ]
    );
}
