//! OpenAI Chat Completions: the request Pi's `openai-completions` provider
//! sends, and the decoder of its `data: {chunk}` … `data: [DONE]` stream.
//!
//! Tool calls are assembled by their `index` in the delta (a new index, or
//! a new id at a known index, opens a new call), which also covers servers
//! that interleave parallel calls; for servers that send no index, a new id
//! opens a new call as in Pi. Usage comes from the final chunk
//! (`stream_options.include_usage`): `input = prompt_tokens − cached`,
//! `output = completion_tokens + reasoning_tokens`, `cacheRead = cached`.

use serde_json::{json, Map, Value};

use crate::convert::{blocks, is_type, joined_text, role, sanitize_id, str_of, transform_messages};
use crate::delta::{Delta, TokenCounts};
use crate::error::{classify_text, js, ErrorClass, ProviderError};
use crate::message::StopReason;
use crate::model::{MaxTokensField, Model, Request};
use crate::sse::SseEvent;

/// The endpoint URL.
pub fn endpoint(model: &Model) -> String {
    format!("{}/chat/completions", model.base_url)
}

/// Request headers (the key last, so a recording can leave it out).
pub fn headers(model: &Model, api_key: Option<&str>) -> Vec<(String, String)> {
    let mut out = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "text/event-stream".to_owned()),
    ];
    out.extend(model.headers.iter().cloned());
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push(("authorization".to_owned(), format!("Bearer {key}")));
    }
    out
}

fn normalize_id(model: &Model, id: &str) -> String {
    if let Some((call_id, _)) = id.split_once('|') {
        return sanitize_id(call_id, 40);
    }
    if model.provider == "openai" && id.chars().count() > 40 {
        return id.chars().take(40).collect();
    }
    id.to_owned()
}

fn image_url(b: &Value) -> Value {
    json!({
        "type": "image_url",
        "image_url": {"url": format!("data:{};base64,{}", str_of(b, "mimeType").unwrap_or(""), str_of(b, "data").unwrap_or(""))},
    })
}

fn convert_messages(model: &Model, request: &Request) -> Vec<Value> {
    let mut params = Vec::new();
    let messages = transform_messages(&request.messages, model, &|id| normalize_id(model, id));
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        let role = if model.reasoning && model.compat.developer_role { "developer" } else { "system" };
        params.push(json!({"role": role, "content": system}));
    }
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        match role(msg) {
            "user" => match msg.get("content") {
                Some(Value::String(text)) => params.push(json!({"role": "user", "content": text})),
                _ => {
                    let content: Vec<Value> = blocks(msg)
                        .iter()
                        .filter_map(|b| {
                            if is_type(b, "text") {
                                Some(json!({"type": "text", "text": b.get("text").cloned().unwrap_or(Value::Null)}))
                            } else if model.images {
                                Some(image_url(b))
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
                let content = blocks(msg);
                let mut out = Map::new();
                out.insert("role".into(), json!("assistant"));
                out.insert("content".into(), Value::Null);
                let text: String = content
                    .iter()
                    .filter(|b| is_type(b, "text"))
                    .filter_map(|b| str_of(b, "text"))
                    .filter(|t| !t.trim().is_empty())
                    .collect();
                if !text.is_empty() {
                    out.insert("content".into(), json!(text));
                }
                let thinking: Vec<&Value> = content
                    .iter()
                    .filter(|b| {
                        is_type(b, "thinking") && str_of(b, "thinking").is_some_and(|t| !t.trim().is_empty())
                    })
                    .collect();
                if let Some(first) = thinking.first() {
                    if let Some(field) = str_of(first, "thinkingSignature").filter(|s| !s.is_empty()) {
                        let joined: Vec<&str> =
                            thinking.iter().filter_map(|b| str_of(b, "thinking")).collect();
                        out.insert(field.to_owned(), json!(joined.join("\n")));
                    }
                }
                let calls: Vec<&Value> = content.iter().filter(|b| is_type(b, "toolCall")).collect();
                if !calls.is_empty() {
                    let tool_calls: Vec<Value> = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.get("id").cloned().unwrap_or(Value::Null),
                                "type": "function",
                                "function": {
                                    "name": c.get("name").cloned().unwrap_or(Value::Null),
                                    "arguments": js(c.get("arguments").unwrap_or(&Value::Null)),
                                },
                            })
                        })
                        .collect();
                    out.insert("tool_calls".into(), Value::Array(tool_calls));
                    let details: Vec<Value> = calls
                        .iter()
                        .filter_map(|c| str_of(c, "thoughtSignature").filter(|s| !s.is_empty()))
                        .filter_map(|s| serde_json::from_str::<Value>(s).ok())
                        .filter(|v| !matches!(v, Value::Null | Value::Bool(false)))
                        .collect();
                    if !details.is_empty() {
                        out.insert("reasoning_details".into(), Value::Array(details));
                    }
                }
                let has_content = match out.get("content") {
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(Value::Array(a)) => !a.is_empty(),
                    _ => false,
                };
                if has_content || out.contains_key("tool_calls") {
                    params.push(Value::Object(out));
                }
            }
            "toolResult" => {
                let mut images = Vec::new();
                while i < messages.len() && role(&messages[i]) == "toolResult" {
                    let tool = &messages[i];
                    let content = blocks(tool);
                    let text = joined_text(content, "\n");
                    params.push(json!({
                        "role": "tool",
                        "content": if text.is_empty() { "(see attached image)".to_owned() } else { text },
                        "tool_call_id": tool.get("toolCallId").cloned().unwrap_or(Value::Null),
                    }));
                    if model.images {
                        images.extend(content.iter().filter(|b| is_type(b, "image")).map(image_url));
                    }
                    i += 1;
                }
                if !images.is_empty() {
                    let mut content =
                        vec![json!({"type": "text", "text": "Attached image(s) from tool result:"})];
                    content.extend(images);
                    params.push(json!({"role": "user", "content": content}));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    params
}

fn has_tool_history(messages: &[Value]) -> bool {
    messages.iter().any(|m| match role(m) {
        "toolResult" => true,
        "assistant" => blocks(m).iter().any(|b| is_type(b, "toolCall")),
        _ => false,
    })
}

/// The JSON body Pi sends, keys in Pi's order.
pub fn body(model: &Model, request: &Request) -> Value {
    let compat = &model.compat;
    let mut out = Map::new();
    out.insert("model".into(), json!(model.id));
    out.insert("messages".into(), Value::Array(convert_messages(model, request)));
    out.insert("stream".into(), json!(true));
    if compat.usage_in_streaming {
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.store {
        out.insert("store".into(), json!(false));
    }
    let max_tokens = request.effective_max_tokens(model);
    let field = match compat.max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    out.insert(field.into(), json!(max_tokens));
    if let Some(t) = request.temperature {
        out.insert("temperature".into(), json!(t));
    }
    match &request.tools {
        Some(tools) => {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let mut function = Map::new();
                    function.insert("name".into(), json!(t.name));
                    function.insert("description".into(), json!(t.description));
                    function.insert("parameters".into(), t.parameters.clone());
                    if compat.strict_mode {
                        function.insert("strict".into(), json!(false));
                    }
                    json!({"type": "function", "function": function})
                })
                .collect();
            out.insert("tools".into(), Value::Array(tools));
        }
        None if has_tool_history(&request.messages) => {
            out.insert("tools".into(), json!([]));
        }
        None => {}
    }
    if let Some(level) = request.thinking {
        if model.reasoning && compat.reasoning_effort {
            let effort = match level {
                crate::model::ThinkingLevel::XHigh => "high",
                other => other.as_str(),
            };
            out.insert("reasoning_effort".into(), json!(effort));
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
    /// The open block: its kind and content index.
    current: Option<(Kind, usize)>,
    next_index: usize,
    /// Tool calls by the server's `index`: (server index, content index, id).
    tools: Vec<(Option<u64>, usize, String)>,
    stop: Option<StopReason>,
    done: bool,
}

fn usage(raw: &Value) -> TokenCounts {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cached = n(raw.pointer("/prompt_tokens_details/cached_tokens"));
    let reasoning = n(raw.pointer("/completion_tokens_details/reasoning_tokens"));
    TokenCounts {
        input: Some(n(raw.get("prompt_tokens")).saturating_sub(cached)),
        output: Some(n(raw.get("completion_tokens")) + reasoning),
        cache_read: Some(cached),
        cache_write: Some(0),
    }
}

fn stop_reason(reason: &str) -> Result<StopReason, ProviderError> {
    Ok(match reason {
        "stop" | "end" => StopReason::Stop,
        "length" => StopReason::Length,
        "function_call" | "tool_calls" => StopReason::ToolUse,
        "content_filter" => StopReason::Error,
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

    fn close(&mut self, out: &mut Vec<Delta>) {
        if let Some((kind, index)) = self.current.take() {
            out.push(match kind {
                Kind::Text => Delta::TextEnd { index },
                Kind::Thinking => Delta::ThinkingEnd { index },
                Kind::Tool => Delta::ToolCallEnd { index },
            });
        }
    }

    fn open(&mut self, kind: Kind, out: &mut Vec<Delta>) -> usize {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.current = Some((kind, index));
        index
    }

    /// True once `[DONE]` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Decodes one event. An `Err` is the stream's error (terminal).
    pub fn event(&mut self, event: &SseEvent, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        if event.data == "[DONE]" {
            self.done = true;
            self.close(out);
            out.push(Delta::Stop { reason: self.stop.unwrap_or(StopReason::Stop) });
            return Ok(());
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&event.data) else {
            // The SDK skips data it cannot parse.
            return Ok(());
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null() && !matches!(e, Value::Bool(false))) {
            let message = match error.get("message") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => js(error),
            };
            return Err(ProviderError::new(classify_text(&message), None, message));
        }
        if event.event == "error" {
            let message = js(&chunk);
            return Err(ProviderError::new(classify_text(&message), None, message));
        }
        let chunk_usage = chunk.get("usage").filter(|u| u.is_object());
        if let Some(raw) = chunk_usage {
            out.push(Delta::Usage(usage(raw)));
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(());
        };
        if chunk_usage.is_none() {
            if let Some(raw) = choice.get("usage").filter(|u| u.is_object()) {
                out.push(Delta::Usage(usage(raw)));
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop = Some(stop_reason(reason)?);
        }
        let Some(delta) = choice.get("delta") else { return Ok(()) };
        if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            let index = match self.current {
                Some((Kind::Text, index)) => index,
                _ => {
                    let index = self.open(Kind::Text, out);
                    out.push(Delta::TextStart { index });
                    index
                }
            };
            out.push(Delta::TextDelta { index, text: text.to_owned() });
        }
        let reasoning = ["reasoning_content", "reasoning", "reasoning_text"].into_iter().find_map(|field| {
            delta.get(field).and_then(Value::as_str).filter(|t| !t.is_empty()).map(|t| (field, t))
        });
        if let Some((field, text)) = reasoning {
            let index = match self.current {
                Some((Kind::Thinking, index)) => index,
                _ => {
                    let index = self.open(Kind::Thinking, out);
                    out.push(Delta::ThinkingStart { index, signature: Some(field.to_owned()) });
                    index
                }
            };
            out.push(Delta::ThinkingDelta { index, text: text.to_owned() });
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).map_or(&[][..], Vec::as_slice) {
            self.tool_call(call, out);
        }
        if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
            for detail in details {
                let id = str_of(detail, "id").unwrap_or("");
                if str_of(detail, "type") == Some("reasoning.encrypted")
                    && !id.is_empty()
                    && detail.get("data").is_some_and(|d| !d.is_null())
                {
                    if let Some((_, index, _)) = self.tools.iter().find(|(_, _, i)| i == id) {
                        out.push(Delta::ToolCallSignature { index: *index, signature: js(detail) });
                    }
                }
            }
        }
        Ok(())
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<Delta>) {
        let wire_index = call.get("index").and_then(Value::as_u64);
        let id = str_of(call, "id").filter(|s| !s.is_empty());
        let name = call.pointer("/function/name").and_then(Value::as_str).filter(|s| !s.is_empty());
        let arguments = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("");
        let known = match wire_index {
            Some(w) => self.tools.iter().rposition(|(wi, _, _)| *wi == Some(w)),
            None => match self.current {
                Some((Kind::Tool, index)) => self.tools.iter().rposition(|(_, ci, _)| *ci == index),
                _ => None,
            },
        };
        let known = known.filter(|&k| match id {
            Some(id) => self.tools[k].2.is_empty() || self.tools[k].2 == id,
            None => true,
        });
        match known {
            Some(k) => {
                let index = self.tools[k].1;
                if let Some(id) = id {
                    self.tools[k].2 = id.to_owned();
                }
                if id.is_some() || name.is_some() || !arguments.is_empty() {
                    out.push(Delta::ToolCallDelta {
                        index,
                        id: id.map(str::to_owned),
                        name: name.map(str::to_owned),
                        arguments: arguments.to_owned(),
                    });
                }
            }
            None => {
                let index = self.open(Kind::Tool, out);
                self.tools.push((wire_index, index, id.unwrap_or("").to_owned()));
                out.push(Delta::ToolCallStart {
                    index,
                    id: id.unwrap_or("").to_owned(),
                    name: name.unwrap_or("").to_owned(),
                });
                if !arguments.is_empty() {
                    out.push(Delta::ToolCallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments: arguments.to_owned(),
                    });
                }
            }
        }
    }

    /// The body ended. Without `[DONE]` the stream counts as complete only
    /// if a finish reason arrived; otherwise it was cut off.
    pub fn finish(&mut self, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        match self.stop {
            Some(reason) => {
                self.done = true;
                self.close(out);
                out.push(Delta::Stop { reason });
                Ok(())
            }
            None => Err(ProviderError::new(
                ErrorClass::Transient,
                None,
                "OpenAI stream ended without a terminal finish reason",
            )),
        }
    }
}
