//! The provider-facing form of a context (Pi's `convertToLlm`) and the plain
//! text a summariser reads (`serializeConversation`), under either Pi
//! release's rules: Pi 1.6 passes `system` messages to the provider and
//! leaves thinking out of the serialised history.

use serde_json::{json, Value};
use sessionlog_events::json::{js_entries, to_js_string};
use sessionlog_events::{PiRules, Role};
use sessionlog_tokens::utf16_len;

use crate::assemble::AgentMessage;

/// Text that opens a compaction summary sent to the model.
pub const COMPACTION_SUMMARY_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Text that closes a compaction summary.
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// Text that opens a branch summary sent to the model.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// Text that closes a branch summary (no newline before it).
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// Tool-result text longer than this (UTF-16 units) is cut in serialised history.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// One provider message, with the context message it came from.
#[derive(Debug, Clone)]
pub struct LlmMessage<'a> {
    /// The context message converted.
    pub from: &'a AgentMessage<'a>,
    /// The converted message; `None` when it is passed through unchanged.
    pub built: Option<Value>,
}

impl LlmMessage<'_> {
    /// The provider message as JSON.
    pub fn to_json(&self) -> Value {
        match &self.built {
            Some(value) => value.clone(),
            None => self.from.to_json(),
        }
    }
}

fn js_number_text(n: f64) -> String {
    let mut out = Vec::new();
    let value = crate::assemble::number(n);
    sessionlog_events::json::write_js(&mut out, &value).ok();
    String::from_utf8(out).unwrap_or_default()
}

/// The user text Pi sends for a `bashExecution` message.
pub fn bash_execution_text(m: &sessionlog_events::Message) -> String {
    let command = m.command.as_deref().unwrap_or("undefined");
    let mut text = format!("Ran `{command}`\n");
    match m.output.as_deref() {
        Some(output) if !output.is_empty() => text.push_str(&format!("```\n{output}\n```")),
        _ => text.push_str("(no output)"),
    }
    if m.cancelled == Some(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m.exit_code.filter(|c| *c != 0.0) {
        text.push_str(&format!("\n\nCommand exited with code {}", js_number_text(code)));
    }
    if m.truncated == Some(true) {
        if let Some(path) = m.full_output_path.as_deref().filter(|p| !p.is_empty()) {
            text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
        }
    }
    text
}

fn user(text_or_content: Value, timestamp: Option<Value>) -> Value {
    let mut out = json!({"role": "user", "content": text_or_content});
    if let (Some(ts), Some(obj)) = (timestamp, out.as_object_mut()) {
        obj.insert("timestamp".to_owned(), ts);
    }
    out
}

fn text_block(text: String) -> Value {
    json!([{"type": "text", "text": text}])
}

/// Pi 0.58's `convertToLlm`: wrappers for summaries, bash runs and custom
/// messages; `!!` bash runs and unknown roles dropped.
pub fn convert_to_llm<'a>(messages: &'a [AgentMessage<'a>]) -> Vec<LlmMessage<'a>> {
    convert_to_llm_with(messages, PiRules::V0_58)
}

/// `convertToLlm` of the given Pi release: 1.6 passes `system` messages
/// through, 0.58 drops them as an unknown role.
pub fn convert_to_llm_with<'a>(messages: &'a [AgentMessage<'a>], rules: PiRules) -> Vec<LlmMessage<'a>> {
    messages
        .iter()
        .filter_map(|from| {
            let m = &from.message;
            let built = match m.role() {
                Role::User | Role::Assistant | Role::ToolResult => None,
                Role::System if rules.is_v1() => None,
                Role::BashExecution => {
                    if m.exclude_from_context == Some(true) {
                        return None;
                    }
                    Some(user(text_block(bash_execution_text(m)), from.timestamp_json()))
                }
                Role::Custom => {
                    let raw = from.to_json();
                    let content = match raw.get("content").cloned() {
                        Some(Value::String(text)) => text_block(text),
                        Some(other) => other,
                        None => Value::Null,
                    };
                    let mut out = user(content, from.timestamp_json());
                    if raw.get("content").is_none() {
                        // `content: undefined` is left out by JSON.stringify.
                        out.as_object_mut().map(|o| o.remove("content"));
                    }
                    Some(out)
                }
                Role::BranchSummary => Some(user(
                    text_block(format!(
                        "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                        m.summary.as_deref().unwrap_or("undefined")
                    )),
                    from.timestamp_json(),
                )),
                Role::CompactionSummary => Some(user(
                    text_block(format!(
                        "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                        m.summary.as_deref().unwrap_or("undefined")
                    )),
                    from.timestamp_json(),
                )),
                Role::HookMessage | Role::System | Role::Other => return None,
            };
            Some(LlmMessage { from, built })
        })
        .collect()
}

/// Cuts `text` to its first `max` UTF-16 units with Pi's marker. Pi 0.58
/// slices (a split surrogate pair becomes U+FFFD, as Node encodes a lone
/// surrogate); Pi 1.6's `sliceHead` keeps a split pair out whole.
fn truncate_for_summary(text: &str, max: usize, rules: PiRules) -> String {
    let Some(mut head) = sessionlog_tokens::utf16_prefix(text, max) else { return text.to_owned() };
    if rules.is_v1() && head.ends_with('\u{FFFD}') && !text.starts_with(&head) {
        head.pop();
    }
    format!("{head}\n\n[... {} more characters truncated]", utf16_len(text) as usize - max)
}

/// pi-ai's `contentText(content, separator)`: a string as it is, or the
/// `text` of the text blocks joined (`Array.join` prints null and undefined
/// as ""); anything else reads as "".
pub(crate) fn content_text(content: Option<&Value>, separator: &str) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| match b.get("text") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => String::new(),
                Some(Value::Number(n)) => js_number_text(n.as_f64().unwrap_or(f64::NAN)),
                Some(Value::Bool(b)) => b.to_string(),
                Some(_) => "[object Object]".to_owned(),
            })
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}

fn text_of(content: Option<&Value>) -> String {
    content_text(content, "")
}

/// Pi 0.58's `serializeConversation` over provider messages.
pub fn serialize_conversation(messages: &[LlmMessage<'_>]) -> String {
    serialize_conversation_with(messages, PiRules::V0_58)
}

/// `serializeConversation` of the given Pi release. Pi 1.6 leaves thinking
/// out, joins assistant text with pi-ai's `contentText`, serialises a tool
/// result given as a plain string, and truncates with `sliceHead`.
pub fn serialize_conversation_with(messages: &[LlmMessage<'_>], rules: PiRules) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in messages {
        let json = m.to_json();
        let role = json.get("role").and_then(Value::as_str);
        match role {
            Some("user") => {
                let content = text_of(json.get("content"));
                if !content.is_empty() {
                    parts.push(format!("[User]: {content}"));
                }
            }
            Some("assistant") if rules.is_v1() => {
                let blocks = json.get("content").and_then(Value::as_array);
                let calls: Vec<String> = blocks
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
                    .map(tool_call_text)
                    .collect();
                let has_text = blocks
                    .into_iter()
                    .flatten()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("text"));
                if has_text {
                    parts.push(format!("[Assistant]: {}", content_text(json.get("content"), "\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("assistant") => {
                let (mut texts, mut thinking, mut calls) = (Vec::new(), Vec::new(), Vec::new());
                for block in json.get("content").and_then(Value::as_array).into_iter().flatten() {
                    let field = |k: &str| match block.get(k) {
                        Some(Value::String(s)) => s.clone(),
                        _ => String::new(),
                    };
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => texts.push(field("text")),
                        Some("thinking") => thinking.push(field("thinking")),
                        Some("toolCall") => calls.push(tool_call_text(block)),
                        _ => {}
                    }
                }
                if !thinking.is_empty() {
                    parts.push(format!("[Assistant thinking]: {}", thinking.join("\n")));
                }
                if !texts.is_empty() {
                    parts.push(format!("[Assistant]: {}", texts.join("\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("toolResult") => {
                // Pi 1.6's `contentText` also reads a plain string.
                let content = text_of(json.get("content").filter(|c| rules.is_v1() || c.is_array()));
                if !content.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&content, TOOL_RESULT_MAX_CHARS, rules)
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}

/// `name(k=JSON.stringify(v), …)` of a tool-call block.
fn tool_call_text(block: &Value) -> String {
    let name = match block.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let args = match block.get("arguments") {
        Some(Value::Object(map)) => js_entries(map)
            .into_iter()
            .map(|(k, v)| format!("{k}={}", to_js_string(v).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    };
    format!("{name}({args})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_utf16_and_marks_the_rest() {
        let text = "a".repeat(1999) + "🚀b";
        assert_eq!(
            truncate_for_summary(&text, 2000, PiRules::V0_58),
            "a".repeat(1999) + "\u{FFFD}\n\n[... 2 more characters truncated]"
        );
        // Pi 1.6's sliceHead keeps the split pair out whole; the count stays length - max.
        assert_eq!(
            truncate_for_summary(&text, 2000, PiRules::V1_6),
            "a".repeat(1999) + "\n\n[... 2 more characters truncated]"
        );
        assert_eq!(truncate_for_summary("short", 2000, PiRules::V1_6), "short");
    }
}
