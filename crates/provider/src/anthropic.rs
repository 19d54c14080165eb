//! Anthropic Messages: the request Pi's `anthropic-messages` provider sends
//! (API-key auth, prompt caching on the system prompt and the last user
//! message, fine-grained tool streaming), and the decoder of its
//! `event: X` / `data: {...}` stream: `message_start`,
//! `content_block_start/delta/stop` (text, thinking with its signature,
//! redacted thinking, tool use with `input_json_delta`), `message_delta`
//! (stop reason, usage), `message_stop`, `ping` and `error`.

use serde_json::{json, Map, Value};

use crate::convert::{blocks, is_type, role, sanitize_id, str_of, transform_messages};
use crate::delta::{Delta, TokenCounts};
use crate::error::{classify_anthropic_type, classify_text, js, ErrorClass, ProviderError};
use crate::message::StopReason;
use crate::model::{Model, Request, ThinkingLevel};
use crate::sse::SseEvent;

/// The API version header Anthropic requires.
pub const VERSION: &str = "2023-06-01";

/// The endpoint URL.
pub fn endpoint(model: &Model) -> String {
    format!("{}/v1/messages", model.base_url)
}

fn adaptive(model: &Model) -> bool {
    ["opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6"].iter().any(|m| model.id.contains(m))
}

/// Request headers (the key last, so a recording can leave it out).
pub fn headers(model: &Model, api_key: Option<&str>) -> Vec<(String, String)> {
    let mut beta = "fine-grained-tool-streaming-2025-05-14".to_owned();
    if !adaptive(model) {
        beta.push_str(",interleaved-thinking-2025-05-14");
    }
    let mut out = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json".to_owned()),
        ("anthropic-version".to_owned(), VERSION.to_owned()),
        ("anthropic-beta".to_owned(), beta),
    ];
    out.extend(model.headers.iter().cloned());
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push(("x-api-key".to_owned(), key.to_owned()));
    }
    out
}

fn image(b: &Value) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": b.get("mimeType").cloned().unwrap_or(Value::Null), "data": b.get("data").cloned().unwrap_or(Value::Null)},
    })
}

/// A tool result's content: one string when it is all text, else blocks.
fn tool_result_content(content: &[Value]) -> Value {
    if !content.iter().any(|b| is_type(b, "image")) {
        let text: Vec<&str> = content.iter().map(|b| str_of(b, "text").unwrap_or("")).collect();
        return json!(text.join("\n"));
    }
    let mut out: Vec<Value> = content
        .iter()
        .map(|b| {
            if is_type(b, "text") {
                json!({"type": "text", "text": b.get("text").cloned().unwrap_or(Value::Null)})
            } else {
                image(b)
            }
        })
        .collect();
    if !out.iter().any(|b| is_type(b, "text")) {
        out.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(out)
}

fn convert_messages(model: &Model, request: &Request) -> Vec<Value> {
    let messages = transform_messages(&request.messages, model, &|id| sanitize_id(id, 64));
    let mut params: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        match role(msg) {
            "user" => match msg.get("content") {
                Some(Value::String(text)) => {
                    if !text.trim().is_empty() {
                        params.push(json!({"role": "user", "content": text}));
                    }
                }
                _ => {
                    let content: Vec<Value> = blocks(msg)
                        .iter()
                        .filter_map(|b| {
                            if is_type(b, "text") {
                                let text = str_of(b, "text").unwrap_or("");
                                (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
                            } else if model.images {
                                Some(image(b))
                            } else {
                                None
                            }
                        })
                        .collect();
                    if !content.is_empty() {
                        params.push(json!({"role": "user", "content": content}));
                    }
                }
            },
            "assistant" => {
                let mut out = Vec::new();
                for b in blocks(msg) {
                    if is_type(b, "text") {
                        let text = str_of(b, "text").unwrap_or("");
                        if !text.trim().is_empty() {
                            out.push(json!({"type": "text", "text": text}));
                        }
                    } else if is_type(b, "thinking") {
                        if b.get("redacted").is_some_and(|r| r == &Value::Bool(true)) {
                            out.push(json!({"type": "redacted_thinking", "data": b.get("thinkingSignature").cloned().unwrap_or(Value::Null)}));
                            continue;
                        }
                        let thinking = str_of(b, "thinking").unwrap_or("");
                        if thinking.trim().is_empty() {
                            continue;
                        }
                        match str_of(b, "thinkingSignature").filter(|s| !s.trim().is_empty()) {
                            Some(signature) => out.push(
                                json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                            ),
                            None => out.push(json!({"type": "text", "text": thinking})),
                        }
                    } else if is_type(b, "toolCall") {
                        let input = match b.get("arguments") {
                            Some(v) if !v.is_null() => v.clone(),
                            _ => json!({}),
                        };
                        out.push(json!({
                            "type": "tool_use",
                            "id": b.get("id").cloned().unwrap_or(Value::Null),
                            "name": b.get("name").cloned().unwrap_or(Value::Null),
                            "input": input,
                        }));
                    }
                }
                if !out.is_empty() {
                    params.push(json!({"role": "assistant", "content": out}));
                }
            }
            "toolResult" => {
                let mut results = Vec::new();
                while i < messages.len() && role(&messages[i]) == "toolResult" {
                    let tool = &messages[i];
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": tool.get("toolCallId").cloned().unwrap_or(Value::Null),
                        "content": tool_result_content(blocks(tool)),
                        "is_error": tool.get("isError").cloned().unwrap_or(Value::Null),
                    }));
                    i += 1;
                }
                params.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Cache the conversation so far: mark the last user message's last block.
    if let Some(last) = params.last_mut().filter(|m| role(m) == "user") {
        match last.get_mut("content") {
            Some(Value::Array(items)) => {
                if let Some(block) = items.last_mut() {
                    if ["text", "image", "tool_result"].iter().any(|t| is_type(block, t)) {
                        block["cache_control"] = json!({"type": "ephemeral"});
                    }
                }
            }
            Some(Value::String(text)) => {
                let text = std::mem::take(text);
                last["content"] =
                    json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
            }
            _ => {}
        }
    }
    params
}

/// Pi's thinking budgets by level (`adjustMaxTokensForThinking`).
fn thinking_budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High | ThinkingLevel::XHigh => 16384,
    }
}

/// The JSON body Pi sends, keys in Pi's order.
pub fn body(model: &Model, request: &Request) -> Value {
    let mut max_tokens = request.effective_max_tokens(model);
    let mut thinking = None;
    if let Some(level) = request.thinking {
        if adaptive(model) {
            let effort = match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::High => "high",
                ThinkingLevel::XHigh if model.id.contains("opus-4-6") || model.id.contains("opus-4.6") => {
                    "max"
                }
                ThinkingLevel::XHigh => "high",
            };
            thinking = Some((json!({"type": "adaptive"}), Some(effort)));
        } else {
            let mut budget = thinking_budget(level);
            max_tokens = (max_tokens + budget).min(model.max_tokens);
            if max_tokens <= budget {
                budget = max_tokens.saturating_sub(1024);
            }
            thinking = Some((
                json!({"type": "enabled", "budget_tokens": if budget == 0 { 1024 } else { budget }}),
                None,
            ));
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(model.id));
    out.insert("messages".into(), Value::Array(convert_messages(model, request)));
    out.insert("max_tokens".into(), json!(max_tokens));
    out.insert("stream".into(), json!(true));
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        out.insert(
            "system".into(),
            json!([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]),
        );
    }
    if let (Some(t), None) = (request.temperature, &thinking) {
        out.insert("temperature".into(), json!(t));
    }
    if let Some(tools) = &request.tools {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": {
                        "type": "object",
                        "properties": t.parameters.get("properties").filter(|v| !v.is_null()).cloned().unwrap_or(json!({})),
                        "required": t.parameters.get("required").filter(|v| !v.is_null()).cloned().unwrap_or(json!([])),
                    },
                })
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    if let (Some((config, effort)), true) = (thinking, model.reasoning) {
        out.insert("thinking".into(), config);
        if let Some(effort) = effort {
            out.insert("output_config".into(), json!({"effort": effort}));
        }
    }
    Value::Object(out)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Thinking,
    Tool,
}

/// Turns the stream's events into deltas.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Open blocks: (Anthropic's index, kind, content index, still open).
    blocks: Vec<(u64, Kind, usize, bool)>,
    next_index: usize,
    stop: Option<StopReason>,
    done: bool,
}

fn stop_reason(reason: &str) -> Result<StopReason, ProviderError> {
    Ok(match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => StopReason::Stop,
        "max_tokens" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        "refusal" | "sensitive" => StopReason::Error,
        other => {
            return Err(ProviderError::new(
                ErrorClass::Fatal,
                None,
                format!("Unhandled stop reason: {other}"),
            ));
        }
    })
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// True once `message_stop` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn find(&self, wire: u64) -> Option<(Kind, usize)> {
        self.blocks.iter().rev().find(|b| b.0 == wire && b.3).map(|b| (b.1, b.2))
    }

    /// Decodes one event. An `Err` is the stream's error (terminal).
    pub fn event(&mut self, event: &SseEvent, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            Err(_) if event.event == "error" => {
                return Err(ProviderError::new(classify_text(&event.data), None, event.data.clone()));
            }
            Err(_) => return Ok(()),
        };
        let kind =
            if event.event == "message" { str_of(&data, "type").unwrap_or("") } else { event.event.as_str() };
        let n = |v: Option<&Value>| v.and_then(Value::as_u64);
        match kind {
            "error" => {
                let message = js(&data);
                let kind = data.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
                return Err(ProviderError::new(classify_anthropic_type(kind, &message), None, message));
            }
            "message_start" => {
                let u = data.pointer("/message/usage").unwrap_or(&Value::Null);
                out.push(Delta::Usage(TokenCounts {
                    input: Some(n(u.get("input_tokens")).unwrap_or(0)),
                    output: Some(n(u.get("output_tokens")).unwrap_or(0)),
                    cache_read: Some(n(u.get("cache_read_input_tokens")).unwrap_or(0)),
                    cache_write: Some(n(u.get("cache_creation_input_tokens")).unwrap_or(0)),
                }));
            }
            "content_block_start" => {
                let wire = n(data.get("index")).unwrap_or(0);
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let kind = match str_of(block, "type") {
                    Some("text") => Kind::Text,
                    Some("thinking" | "redacted_thinking") => Kind::Thinking,
                    Some("tool_use") => Kind::Tool,
                    _ => return Ok(()),
                };
                let index = self.next_index;
                self.next_index += 1;
                self.blocks.push((wire, kind, index, true));
                out.push(match (kind, str_of(block, "type")) {
                    (Kind::Text, _) => Delta::TextStart { index },
                    (Kind::Thinking, Some("redacted_thinking")) => Delta::RedactedThinking {
                        index,
                        data: str_of(block, "data").unwrap_or("").to_owned(),
                    },
                    (Kind::Thinking, _) => Delta::ThinkingStart { index, signature: Some(String::new()) },
                    (Kind::Tool, _) => Delta::ToolCallStart {
                        index,
                        id: str_of(block, "id").unwrap_or("").to_owned(),
                        name: str_of(block, "name").unwrap_or("").to_owned(),
                    },
                });
            }
            "content_block_delta" => {
                let Some((kind, index)) = self.find(n(data.get("index")).unwrap_or(0)) else { return Ok(()) };
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let text = |k: &str| str_of(delta, k).unwrap_or("").to_owned();
                match (str_of(delta, "type"), kind) {
                    (Some("text_delta"), Kind::Text) => {
                        out.push(Delta::TextDelta { index, text: text("text") })
                    }
                    (Some("thinking_delta"), Kind::Thinking) => {
                        out.push(Delta::ThinkingDelta { index, text: text("thinking") })
                    }
                    (Some("signature_delta"), Kind::Thinking) => {
                        out.push(Delta::ThinkingSignature { index, signature: text("signature") })
                    }
                    (Some("input_json_delta"), Kind::Tool) => out.push(Delta::ToolCallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments: text("partial_json"),
                    }),
                    _ => {}
                }
            }
            "content_block_stop" => {
                let wire = n(data.get("index")).unwrap_or(0);
                if let Some(block) = self.blocks.iter_mut().rev().find(|b| b.0 == wire && b.3) {
                    block.3 = false;
                    let index = block.2;
                    out.push(match block.1 {
                        Kind::Text => Delta::TextEnd { index },
                        Kind::Thinking => Delta::ThinkingEnd { index },
                        Kind::Tool => Delta::ToolCallEnd { index },
                    });
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason)?);
                }
                let u = data.get("usage").unwrap_or(&Value::Null);
                let counts = TokenCounts {
                    input: n(u.get("input_tokens")),
                    output: n(u.get("output_tokens")),
                    cache_read: n(u.get("cache_read_input_tokens")),
                    cache_write: n(u.get("cache_creation_input_tokens")),
                };
                out.push(Delta::Usage(counts));
            }
            "message_stop" => {
                self.done = true;
                out.push(Delta::Stop { reason: self.stop.unwrap_or(StopReason::Stop) });
            }
            _ => {}
        }
        Ok(())
    }

    /// The body ended; without `message_stop` the stream was cut off.
    pub fn finish(&mut self, _out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        Err(ProviderError::new(ErrorClass::Transient, None, "Anthropic stream ended before message_stop"))
    }
}
