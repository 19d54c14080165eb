//! Pi 1.6's session projection: the context as a list of entries, each with
//! the messages it contributes after context edits.
//!
//! Pi 1.6 builds the context in steps (`buildContextEntries`,
//! `sessionEntryToContextMessages`, `projectContextEntry`,
//! `buildSessionProjection` in `core/session-manager.js`); compaction planning
//! reads the same projection, so the entry behind every message stays known.
//! What differs from Pi 0.58's `buildSessionContext`:
//!
//! * a `compaction` contributes its `systemMessage` (when it has one) before
//!   its summary, and `system` messages in its kept range are dropped;
//! * the last `context_edit` per target among the selected entries replaces
//!   the target's content (`{content}`) or hides it (`null`);
//! * missing message content becomes `[]` (`""` for system messages), and a
//!   `custom_message` without content gets `[]`.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};
use sessionlog_events::json::js_entries;
use sessionlog_events::{Block, Content, Entry, EntryKind, Message, Replacement, Role};

use crate::assemble::{compaction_summary_message, context_message, number, AgentMessage, Source};
use crate::llm::content_text;
use crate::time::js_date_ms;

/// One selected entry and the messages it contributes.
#[derive(Debug, Clone)]
pub struct Projected<'a> {
    /// The entry (`sourceEntry` in Pi).
    pub entry: &'a Entry,
    /// Its context messages after edits (empty for metadata, hidden targets
    /// and older compactions).
    pub messages: Vec<AgentMessage<'a>>,
}

/// `buildContextEntries`: the newest compaction on the path, the entries it
/// keeps (from `firstKeptEntryId`, without system messages), then everything
/// after it; the whole path when there is no compaction.
pub fn context_entries<'a>(path: &[&'a Entry]) -> Vec<&'a Entry> {
    let Some(compaction) = path.iter().rev().find(|e| matches!(e.kind, EntryKind::Compaction(_))) else {
        return path.to_vec();
    };
    // Pi looks the compaction up by id, whatever the type of the first match.
    let Some(at) = path.iter().position(|e| e.id == compaction.id) else { return path.to_vec() };
    let first_kept = match &compaction.kind {
        EntryKind::Compaction(c) => c.first_kept_entry_id.as_deref(),
        _ => None,
    };
    let mut out = vec![*compaction];
    let mut keeping = false;
    for entry in &path[..at] {
        keeping |= entry.id.as_deref() == first_kept;
        if keeping && !is_system_message(entry) {
            out.push(*entry);
        }
    }
    out.extend_from_slice(&path[at + 1..]);
    out
}

fn is_system_message(entry: &Entry) -> bool {
    entry.message().is_some_and(|m| m.role() == Role::System)
}

/// `sessionEntryToContextMessages`: what one entry contributes before edits.
pub fn entry_messages(entry: &Entry) -> Vec<AgentMessage<'_>> {
    match &entry.kind {
        EntryKind::Message(m) => {
            let mut message = AgentMessage::new(entry, Source::Stored, Cow::Borrowed(&**m));
            fill_missing_content(&mut message);
            vec![message]
        }
        EntryKind::CustomMessage(_) => {
            let mut out: Vec<AgentMessage<'_>> = context_message(entry).into_iter().collect();
            if let Some(message) = out.first_mut() {
                fill_missing_custom_content(message);
            }
            out
        }
        EntryKind::BranchSummary(_) => context_message(entry).into_iter().collect(),
        EntryKind::Compaction(c) => {
            let mut out = Vec::with_capacity(2);
            if let Some(system) = &c.system_message {
                out.push(AgentMessage::new(entry, Source::SystemSnapshot, Cow::Borrowed(&**system)));
            }
            out.extend(compaction_summary_message(entry));
            out
        }
        _ => Vec::new(),
    }
}

/// True when `key` of the JSON object is absent or `null` (`value == null`).
fn is_nullish(object: Option<&Value>, key: &str) -> bool {
    object.and_then(|o| o.get(key)).is_none_or(Value::is_null)
}

/// Sets `key` as JavaScript's `{...object, key: value}` does: in place when
/// present, else at the end; `None` (undefined) leaves the key out.
fn with_key(object: Value, key: &str, value: Option<Value>) -> Value {
    let Value::Object(mut map) = object else { return object };
    match value {
        Some(v) => {
            if let Some(slot) = map.get_mut(key) {
                *slot = v;
            } else {
                map.insert(key.to_owned(), v);
            }
        }
        None => {
            map.shift_remove(key);
        }
    }
    Value::Object(map)
}

/// A stored user, assistant or tool-result message without content gets
/// `content: []`, a system message `content: ""`.
fn fill_missing_content(message: &mut AgentMessage<'_>) {
    if message.message.content.is_some() {
        return;
    }
    let filler = match message.message.role() {
        Role::System => (Value::from(""), Content::Text(String::new())),
        Role::User | Role::Assistant | Role::ToolResult => {
            (Value::Array(Vec::new()), Content::Blocks(Vec::new()))
        }
        _ => return,
    };
    let json = message.to_json();
    if !is_nullish(Some(&json), "content") {
        return; // content of another type is kept as it is
    }
    message.projected = Some(Box::new(with_key(json, "content", Some(filler.0))));
    message.message.to_mut().content = Some(filler.1);
}

/// `createCustomMessage(customType, content ?? [], …)`.
fn fill_missing_custom_content(message: &mut AgentMessage<'_>) {
    let entry = message.entry.to_value();
    if !is_nullish(Some(&entry), "content") {
        return;
    }
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::from("custom"));
    if let Some(v) = entry.get("customType") {
        out.insert("customType".to_owned(), v.clone());
    }
    out.insert("content".to_owned(), Value::Array(Vec::new()));
    for key in ["display", "details"] {
        if let Some(v) = entry.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    let ms = entry.get("timestamp").map_or(f64::NAN, js_date_ms);
    out.insert("timestamp".to_owned(), number(ms));
    message.projected = Some(Box::new(Value::Object(out)));
    message.message.to_mut().content = Some(Content::Blocks(Vec::new()));
}

/// `projectContextEntry` with an edit: `null` hides the entry; `{content}`
/// replaces the content of its user, assistant, tool-result and custom
/// messages (a string becomes one text block for assistant and tool results).
pub(crate) fn apply_edit<'a>(messages: Vec<AgentMessage<'a>>, edit: &'a Entry) -> Vec<AgentMessage<'a>> {
    let EntryKind::ContextEdit(fields) = &edit.kind else { return messages };
    let replacement = match &fields.replacement {
        // Pi fails on an edit without `replacement`; it changes nothing here.
        None => return messages,
        Some(Replacement::Omit) => return Vec::new(),
        Some(r) => r,
    };
    let raw_content = || edit.field_value("replacement").and_then(|r| r.get("content").cloned());
    messages
        .into_iter()
        .map(|mut message| {
            let role = message.message.role();
            if !matches!(role, Role::User | Role::Assistant | Role::ToolResult | Role::Custom) {
                return message;
            }
            let as_blocks = matches!(role, Role::Assistant | Role::ToolResult);
            let (json, typed) = match replacement {
                Replacement::Content(Some(Content::Text(text))) if as_blocks => {
                    let block =
                        Block { kind: Some("text".into()), text: Some(text.clone()), ..Block::default() };
                    (
                        Some(serde_json::json!([{"type": "text", "text": text}])),
                        Some(Content::Blocks(vec![block])),
                    )
                }
                Replacement::Content(content) => (raw_content(), content.clone()),
                // `replacement.content` of any other value is undefined.
                _ => (None, None),
            };
            message.projected = Some(Box::new(with_key(message.to_json(), "content", json)));
            message.message.to_mut().content = typed;
            message
        })
        .collect()
}

/// `buildSessionProjection` over a root→leaf path.
pub fn project<'a>(path: &[&'a Entry]) -> Vec<Projected<'a>> {
    let entries = context_entries(path);
    let mut edits: HashMap<Option<&str>, &'a Entry> = HashMap::new();
    for entry in &entries {
        if let EntryKind::ContextEdit(edit) = &entry.kind {
            edits.insert(edit.target_id.as_deref(), entry);
        }
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, &entry)| {
            // Only the newest compaction (first) contributes; an older one in
            // its kept range yields nothing.
            let messages = if i > 0 && matches!(entry.kind, EntryKind::Compaction(_)) {
                Vec::new()
            } else {
                let own = entry_messages(entry);
                match edits.get(&entry.id.as_deref()) {
                    Some(edit) => apply_edit(own, edit),
                    None => own,
                }
            };
            Projected { entry, messages }
        })
        .collect()
}

/// The messages of a projection in order.
pub fn messages<'p, 'a>(projection: &'p [Projected<'a>]) -> impl Iterator<Item = &'p AgentMessage<'a>> {
    projection.iter().flat_map(|p| &p.messages)
}

/// An insertion-ordered map with JavaScript `Map` semantics (setting a
/// present key keeps its place).
#[derive(Default)]
struct JsMap(Vec<(String, Value)>);

impl JsMap {
    fn set(&mut self, key: String, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    fn delete(&mut self, key: &str) {
        self.0.retain(|(k, _)| k != key);
    }
}

/// pi-ai's `getCurrentSystemMessage`: every system message replayed into
/// one — content texts joined by a blank line, sections patched by name
/// (`null` removes one), tools added and removed by name, the first
/// timestamp. `None` when there is no system message with a timestamp and no
/// tool.
pub fn current_system_message(messages: &[&AgentMessage<'_>]) -> Option<Value> {
    let mut content: Vec<String> = Vec::new();
    let mut sections = JsMap::default();
    let mut tools = JsMap::default();
    let mut timestamp: Option<Value> = None;
    for message in messages.iter().filter(|m| m.message.role() == Role::System) {
        let json = message.to_json();
        if timestamp.is_none() {
            timestamp = json.get("timestamp").filter(|t| !t.is_null()).cloned();
        }
        let text = content_text(json.get("content"), "\n");
        if !text.is_empty() {
            content.push(text);
        }
        if let Some(Value::Object(map)) = json.get("sections") {
            for (name, value) in js_entries(map) {
                if value.is_null() {
                    sections.delete(name);
                } else {
                    sections.set(name.clone(), value.clone());
                }
            }
        }
        let tool_key =
            |tool: &Value| tool.get("name").map_or_else(|| "\u{0}undefined".to_owned(), Value::to_string);
        if let Some(Value::Array(removed)) = json.get("toolsRemoved") {
            for tool in removed {
                tools.delete(&tool_key(tool));
            }
        }
        if let Some(Value::Array(added)) = json.get("toolsAdded") {
            for tool in added {
                tools.set(tool_key(tool), tool.clone());
            }
        }
    }
    if timestamp.is_none() && tools.0.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::from("system"));
    out.insert("content".to_owned(), Value::from(content.join("\n\n")));
    if !sections.0.is_empty() {
        out.insert("sections".to_owned(), Value::Object(sections.0.into_iter().collect()));
    }
    if !tools.0.is_empty() {
        out.insert("toolsAdded".to_owned(), Value::Array(tools.0.into_iter().map(|(_, t)| t).collect()));
    }
    out.insert("timestamp".to_owned(), timestamp.unwrap_or(Value::from(0)));
    Some(Value::Object(out))
}

/// The `systemMessage` Pi 1.6's `appendCompaction` stores on a compaction
/// appended at the end of `path`: the current system message of the path's
/// projection with the compaction's time (`at_ms`); `None` when there is none.
pub fn compaction_system_message(path: &[&Entry], at_ms: i64) -> Option<Value> {
    let projection = project(path);
    let messages: Vec<&AgentMessage<'_>> = messages(&projection).collect();
    let mut system = current_system_message(&messages)?;
    if let Some(map) = system.as_object_mut() {
        map.insert("timestamp".to_owned(), Value::from(at_ms));
    }
    Some(system)
}

/// A system message's typed view from its JSON (for counting its tokens).
pub fn system_message_of(value: &Value) -> Message {
    let text = sessionlog_events::json::to_js_string(value).unwrap_or_default();
    let line = format!(r#"{{"type":"message","message":{text}}}"#);
    Entry::parse(&line).ok().and_then(|e| e.message().cloned()).unwrap_or_default()
}
