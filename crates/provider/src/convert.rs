//! Pi's `transformMessages`: the conversation made safe for the model it
//! is sent to, before either API's own conversion.
//!
//! * An assistant message from another model loses its thinking (turned
//!   into text, empty thinking dropped, redacted thinking dropped) and its
//!   tool calls' `thoughtSignature`; its tool-call ids pass through the
//!   API's normaliser, and the matching tool results follow the new ids.
//! * Assistant messages that ended in `error` or `aborted` are left out.
//! * A tool call left without a result (the user spoke, or another
//!   assistant message came first) gets a synthetic error result
//!   `"No result provided"`.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::model::Model;

pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn role(v: &Value) -> &str {
    str_of(v, "role").unwrap_or("")
}

pub(crate) fn blocks(v: &Value) -> &[Value] {
    v.get("content").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn block_type(b: &Value) -> &str {
    str_of(b, "type").unwrap_or("")
}

/// JavaScript truthiness of an optional string field.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Bool(b)) => *b,
        Some(Value::Null) | None => false,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(_) => true,
    }
}

/// The result Pi inserts for a tool call that never got one.
fn missing_result(call: &Value) -> Value {
    json!({
        "role": "toolResult",
        "toolCallId": str_of(call, "id").unwrap_or(""),
        "toolName": str_of(call, "name").unwrap_or(""),
        "content": [{"type": "text", "text": "No result provided"}],
        "isError": true,
    })
}

pub(crate) fn transform_messages(
    messages: &[Value],
    model: &Model,
    normalize: &dyn Fn(&str) -> String,
) -> Vec<Value> {
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut transformed = Vec::with_capacity(messages.len());
    for msg in messages {
        match role(msg) {
            "toolResult" => {
                let id = str_of(msg, "toolCallId").unwrap_or("");
                match id_map.get(id) {
                    Some(new_id) if new_id != id => {
                        let mut m = msg.clone();
                        m["toolCallId"] = json!(new_id);
                        transformed.push(m);
                    }
                    _ => transformed.push(msg.clone()),
                }
            }
            "assistant" => {
                let same_model = str_of(msg, "provider") == Some(model.provider.as_str())
                    && str_of(msg, "api") == Some(model.api.as_str())
                    && str_of(msg, "model") == Some(model.id.as_str());
                let mut content = Vec::new();
                for block in blocks(msg) {
                    match block_type(block) {
                        "thinking" => {
                            if truthy(block.get("redacted")) {
                                if same_model {
                                    content.push(block.clone());
                                }
                                continue;
                            }
                            if same_model && truthy(block.get("thinkingSignature")) {
                                content.push(block.clone());
                                continue;
                            }
                            let text = str_of(block, "thinking").unwrap_or("");
                            if text.trim().is_empty() {
                                continue;
                            }
                            if same_model {
                                content.push(block.clone());
                            } else {
                                content.push(json!({"type": "text", "text": text}));
                            }
                        }
                        "text" => {
                            if same_model {
                                content.push(block.clone());
                            } else {
                                content.push(json!({"type": "text", "text": block.get("text").cloned().unwrap_or(Value::Null)}));
                            }
                        }
                        "toolCall" => {
                            let mut call = block.clone();
                            if !same_model {
                                if let Some(obj) = call.as_object_mut() {
                                    obj.shift_remove("thoughtSignature");
                                }
                                let id = str_of(block, "id").unwrap_or("").to_owned();
                                let new_id = normalize(&id);
                                if new_id != id {
                                    call["id"] = json!(new_id);
                                    id_map.insert(id, new_id);
                                }
                            }
                            content.push(call);
                        }
                        _ => content.push(block.clone()),
                    }
                }
                let mut m = msg.clone();
                m["content"] = Value::Array(content);
                transformed.push(m);
            }
            _ => transformed.push(msg.clone()),
        }
    }

    let mut out = Vec::with_capacity(transformed.len());
    let mut pending: Vec<Value> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let flush = |pending: &mut Vec<Value>, answered: &mut HashSet<String>, out: &mut Vec<Value>| {
        for call in pending.drain(..) {
            if !answered.contains(str_of(&call, "id").unwrap_or("")) {
                out.push(missing_result(&call));
            }
        }
        answered.clear();
    };
    for msg in transformed {
        match role(&msg) {
            "assistant" => {
                flush(&mut pending, &mut answered, &mut out);
                if matches!(str_of(&msg, "stopReason"), Some("error" | "aborted")) {
                    continue;
                }
                let calls: Vec<Value> =
                    blocks(&msg).iter().filter(|b| block_type(b) == "toolCall").cloned().collect();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                out.push(msg);
            }
            "toolResult" => {
                answered.insert(str_of(&msg, "toolCallId").unwrap_or("").to_owned());
                out.push(msg);
            }
            "user" => {
                flush(&mut pending, &mut answered, &mut out);
                out.push(msg);
            }
            _ => out.push(msg),
        }
    }
    out
}

/// Replaces every character outside `[a-zA-Z0-9_-]` with `_` and keeps the
/// first `max` characters.
pub(crate) fn sanitize_id(id: &str, max: usize) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(max)
        .collect()
}

/// The text of a message's text blocks joined with `sep`.
pub(crate) fn joined_text(content: &[Value], sep: &str) -> String {
    content
        .iter()
        .filter(|b| block_type(b) == "text")
        .map(|b| str_of(b, "text").unwrap_or(""))
        .collect::<Vec<_>>()
        .join(sep)
}

pub(crate) fn is_type(b: &Value, t: &str) -> bool {
    block_type(b) == t
}
