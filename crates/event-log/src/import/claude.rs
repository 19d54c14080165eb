//! Claude Code project transcripts → Pi entries.
//!
//! A Claude Code file is a `uuid`/`parentUuid` tree of lines. How each kind
//! of line maps:
//!
//! | line | entry |
//! |---|---|
//! | `assistant` | one `message` (role `assistant`) per API message: Claude Code writes one line per content block, all sharing `message.id`, each the child of the previous; such a run is **combined** into one entry (blocks in order, `usage` and `model` of its last line, the last non-null `stop_reason`), id = the last line's `uuid`. A run broken by any other line is not combined. |
//! | `user` | a `message` per `tool_result` block (role `toolResult`, tool name from its call) and one `user` message for the other blocks (or the string content), in block order; the first entry gets the line's `uuid`, further ones `<uuid>.<k>` |
//! | `system` `compact_boundary` + its `isCompactSummary` child | one `compaction`: `summary` = the summary message's text, `tokensBefore` = `compactMetadata.preTokens`, `details.trigger` = `compactMetadata.trigger`, parent = `logicalParentUuid` (the boundary itself has no parent), so the path runs through the whole conversation while the context starts at the summary |
//! | other `system` lines | `custom` `claude-code.system.<subtype>` |
//! | `summary` | `session_info` (its text is the session's title) |
//! | `file-history-snapshot`, `queue-operation`, any other type | `custom` `claude-code.<type>` |
//! | sidechain lines (`isSidechain:true`) of a file that also has a main chain | `custom` `claude-code.sidechain` (a sub-agent's turns are not in the main agent's context); a file holding only sidechain lines (a sub-agent file) maps like a main chain |
//!
//! Blocks: `text` → `text`; `thinking` → `thinking` with `thinkingSignature`;
//! `redacted_thinking` → `thinking` (`redacted`, payload in the signature);
//! `tool_use` → `toolCall`; `image` → `image`; any other block → a `text`
//! block holding its JSON. Usage → `{input, output, cacheRead, cacheWrite,
//! totalTokens}` (their sum, the context size after the call). A null
//! `stop_reason` (streamed lines) reads as `toolUse` when the message calls
//! tools, else `stop`; `isApiErrorMessage` as `error`.
//!
//! Threading: a message or compaction hangs where its `parentUuid` points
//! (the entry that absorbed that line); every other line (snapshots, queue
//! operations, titles, system notes, progress, sidechain lines of a mixed
//! file) is appended to the entry before it in file order, and a line that
//! pointed to that entry, or to this line's own `uuid`, now points to it — as
//! Pi threads entries a model never sees — so the conversation stays one path
//! (its branches, from edited or retried messages, stay branches).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::{ms, put, Line, Lines, Mapped, Pending, Source};

fn is_conversation(l: &Line) -> bool {
    matches!(l.str("type"), Some("user" | "assistant"))
        && l.object().is_some_and(|o| o.get("message").is_some_and(Value::is_object))
}

fn is_sidechain(l: &Line) -> bool {
    l.object().and_then(|o| o.get("isSidechain")).and_then(Value::as_bool) == Some(true)
}

fn message(l: &Line) -> Option<&Map<String, Value>> {
    l.object()?.get("message")?.as_object()
}

/// Pi's usage from Claude's (`None` when the line has none).
fn usage(m: &Map<String, Value>) -> Value {
    let Some(u) = m.get("usage").and_then(Value::as_object) else { return Value::Null };
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (n("input_tokens"), n("output_tokens"));
    let (read, write) = (n("cache_read_input_tokens"), n("cache_creation_input_tokens"));
    json!({"input": input, "output": output, "cacheRead": read, "cacheWrite": write, "totalTokens": input + output + read + write})
}

/// A Claude content block as a Pi block.
fn block(b: &Value) -> Value {
    let text_of_json =
        || json!({"type": "text", "text": sessionlog_events::json::to_js_string(b).unwrap_or_default()});
    let Some(o) = b.as_object() else { return text_of_json() };
    let s = |k: &str| o.get(k).cloned().unwrap_or(Value::Null);
    match o.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": s("text")}),
        Some("thinking") => {
            let mut out = Map::new();
            out.insert("type".into(), "thinking".into());
            out.insert("thinking".into(), s("thinking"));
            put(&mut out, "thinkingSignature", s("signature"));
            Value::Object(out)
        }
        Some("redacted_thinking") => {
            json!({"type": "thinking", "thinking": "", "thinkingSignature": s("data"), "redacted": true})
        }
        Some("tool_use" | "server_tool_use") => {
            let args = o.get("input").filter(|v| v.is_object()).cloned().unwrap_or_else(|| json!({}));
            json!({"type": "toolCall", "id": s("id"), "name": s("name"), "arguments": args})
        }
        Some("image") => {
            let src = o.get("source").and_then(Value::as_object);
            let field = |k: &str| src.and_then(|x| x.get(k)).cloned();
            json!({
                "type": "image",
                "data": field("data").unwrap_or_else(|| "".into()),
                "mimeType": field("media_type").unwrap_or_else(|| "image/png".into()),
            })
        }
        _ => text_of_json(),
    }
}

fn blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(items)) => items.iter().map(block).collect(),
        _ => Vec::new(),
    }
}

/// Pi's stop reason for Claude's.
fn stop_reason(reason: Option<&str>, calls_tools: bool, api_error: bool) -> &'static str {
    if api_error {
        return "error";
    }
    match reason {
        Some("tool_use") => "toolUse",
        Some("max_tokens") | Some("model_context_window_exceeded") => "length",
        Some("refusal") => "error",
        Some(_) => "stop",
        None if calls_tools => "toolUse",
        None => "stop",
    }
}

/// The text of a user message's content (string, or its text blocks joined).
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

struct Mapper<'a> {
    lines: &'a [Line],
    /// Sidechain lines count as the main chain (a sub-agent file).
    sidechain_is_main: bool,
    consumed: Vec<bool>,
    /// Where a child of each original `uuid` attaches.
    resolve: HashMap<String, String>,
    /// The last entry placed, and the `uuid`s that resolve to it.
    tail: Option<String>,
    tail_keys: Vec<String>,
    seen_main: bool,
    tool_names: HashMap<String, String>,
    last_ts: Option<String>,
    entries: Vec<Pending>,
}

impl<'a> Mapper<'a> {
    fn is_main(&self, l: &Line) -> bool {
        !is_sidechain(l) || self.sidechain_is_main
    }

    fn timestamp(&mut self, l: &Line) -> String {
        if let Some(t) = l.str("timestamp") {
            self.last_ts = Some(t.to_owned());
        }
        self.last_ts.clone().unwrap_or_default()
    }

    /// The entry a child of original `parent` hangs from.
    fn parent_of(&self, parent: Option<&str>) -> Value {
        match parent {
            Some(p) => Value::from(self.resolve.get(p).cloned().unwrap_or_else(|| p.to_owned())),
            // The first message hangs after the leading title or snapshot lines.
            None if !self.seen_main => self.tail.clone().map_or(Value::Null, Value::from),
            None => Value::Null,
        }
    }

    fn place(&mut self, pending: Pending, keys: Vec<String>) {
        let id = pending.id().unwrap_or_default().to_owned();
        for k in &keys {
            self.resolve.insert(k.clone(), id.clone());
        }
        self.tail = Some(id);
        self.tail_keys = keys;
        self.entries.push(pending);
    }

    /// Places an entry a model never sees after the last one: what pointed
    /// to that one (or to this line's own `uuid`) now points to this one.
    fn place_side(&mut self, mut fields: Map<String, Value>, source: Source, own: Option<&str>) {
        let id = fields.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        fields.insert("parentId".into(), self.tail.clone().map_or(Value::Null, Value::from));
        reorder_custom(&mut fields);
        self.tail_keys.extend(own.map(str::to_owned));
        for k in &self.tail_keys {
            self.resolve.insert(k.clone(), id.clone());
        }
        self.tail = Some(id);
        self.entries.push(Pending { fields, source });
    }

    fn id_of(l: &Line) -> String {
        l.str("uuid").map_or_else(|| format!("L{}", l.number), str::to_owned)
    }

    /// Index of the next line after `i` that is not passed over (blank,
    /// unparseable, or a line without `uuid`).
    fn next_threaded(&self, i: usize) -> Option<usize> {
        (i + 1..self.lines.len()).find(|&j| {
            let l = &self.lines[j];
            !self.consumed[j] && l.value.is_some() && l.str("uuid").is_some()
        })
    }

    fn run(&mut self) {
        for i in 0..self.lines.len() {
            if self.consumed[i] {
                continue;
            }
            let l = &self.lines[i];
            if l.value.is_none() {
                continue;
            }
            let ty = l.str("type").unwrap_or_default();
            if is_conversation(l) && !self.is_main(l) {
                self.custom(l, "claude-code.sidechain".to_owned());
            } else if ty == "assistant" && is_conversation(l) {
                self.assistant(i);
            } else if ty == "user" && is_conversation(l) {
                self.user(l);
            } else if ty == "system" && l.str("subtype") == Some("compact_boundary") {
                self.compaction(i);
            } else if ty == "summary" {
                let ts = self.timestamp(l);
                let mut fields = Map::new();
                fields.insert("type".into(), "session_info".into());
                fields.insert("id".into(), Self::id_of(l).into());
                fields.insert("parentId".into(), Value::Null);
                fields.insert("timestamp".into(), ts.into());
                put(
                    &mut fields,
                    "name",
                    l.object().and_then(|o| o.get("summary")).cloned().unwrap_or(Value::Null),
                );
                self.place_side(fields, Source { lines: vec![l.number], part: 0 }, l.str("uuid"));
            } else {
                let name = match (ty, l.str("subtype")) {
                    ("system", Some(sub)) => format!("claude-code.system.{sub}"),
                    ("", _) => "claude-code.unknown".to_owned(),
                    (ty, _) => format!("claude-code.{ty}"),
                };
                self.custom(l, name);
            }
        }
        // A compaction keeps nothing of what it summarised: its first kept
        // entry is the one after it.
        let ids: Vec<(usize, String)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.fields.get("type").and_then(Value::as_str) == Some("compaction"))
            .map(|(i, e)| (i, e.id().unwrap_or_default().to_owned()))
            .collect();
        for (i, id) in ids {
            let next = self.entries[i + 1..]
                .iter()
                .find(|e| e.fields.get("parentId").and_then(Value::as_str) == Some(id.as_str()))
                .and_then(|e| e.id())
                .map(str::to_owned)
                .unwrap_or_else(|| id.clone());
            set_after(&mut self.entries[i].fields, "summary", "firstKeptEntryId", next.into());
        }
    }

    fn custom(&mut self, l: &Line, custom_type: String) {
        let ts = self.timestamp(l);
        let mut fields = Map::new();
        fields.insert("type".into(), "custom".into());
        fields.insert("customType".into(), custom_type.into());
        fields.insert("id".into(), Self::id_of(l).into());
        fields.insert("parentId".into(), Value::Null);
        fields.insert("timestamp".into(), ts.into());
        self.place_side(fields, Source { lines: vec![l.number], part: 0 }, l.str("uuid"));
    }

    fn assistant(&mut self, start: usize) {
        let mut group = vec![start];
        let msg_id = message(&self.lines[start]).and_then(|m| m.get("id")).and_then(Value::as_str);
        while let Some(msg_id) = msg_id {
            let last = &self.lines[*group.last().unwrap_or(&start)];
            let Some(j) = self.next_threaded(*group.last().unwrap_or(&start)) else { break };
            // Lines without uuid in between are passed over only if the run goes on.
            let next = &self.lines[j];
            let same = is_conversation(next)
                && next.str("type") == Some("assistant")
                && self.is_main(next)
                && message(next).and_then(|m| m.get("id")).and_then(Value::as_str) == Some(msg_id)
                && next.str("parentUuid").is_some()
                && next.str("parentUuid") == last.str("uuid");
            if !same {
                break;
            }
            group.push(j);
        }
        // Lines without uuid between the first and last line of the run come after it.
        for &j in &group {
            self.consumed[j] = true;
        }
        let first = &self.lines[start];
        let last = &self.lines[*group.last().unwrap_or(&start)];
        let ts = self.timestamp(first);
        let mut content = Vec::new();
        for &j in &group {
            content.extend(blocks(message(&self.lines[j]).and_then(|m| m.get("content"))));
        }
        for b in &content {
            if let (Some("toolCall"), Some(id), Some(name)) =
                (b["type"].as_str(), b["id"].as_str(), b["name"].as_str())
            {
                self.tool_names.insert(id.to_owned(), name.to_owned());
            }
        }
        let calls_tools = content.iter().any(|b| b["type"] == "toolCall");
        let last_msg = message(last);
        let reason = group.iter().rev().find_map(|&j| {
            message(&self.lines[j]).and_then(|m| m.get("stop_reason")).and_then(Value::as_str)
        });
        let api_error =
            last.object().and_then(|o| o.get("isApiErrorMessage")).and_then(Value::as_bool) == Some(true);
        let mut m = Map::new();
        m.insert("role".into(), "assistant".into());
        let error_text = api_error.then(|| text_of(last_msg.and_then(|m| m.get("content"))));
        m.insert("content".into(), Value::Array(content));
        m.insert("api".into(), "anthropic-messages".into());
        m.insert("provider".into(), "anthropic".into());
        put(&mut m, "model", last_msg.and_then(|m| m.get("model")).cloned().unwrap_or(Value::Null));
        put(&mut m, "usage", last_msg.map_or(Value::Null, usage));
        m.insert("stopReason".into(), stop_reason(reason, calls_tools, api_error).into());
        if let Some(text) = error_text {
            m.insert("errorMessage".into(), text.into());
        }
        put(&mut m, "timestamp", ms(first.str("timestamp")).map_or(Value::Null, Value::from));
        let mut fields = Map::new();
        fields.insert("type".into(), "message".into());
        fields.insert("id".into(), Self::id_of(last).into());
        fields.insert("parentId".into(), self.parent_of(first.str("parentUuid")));
        fields.insert("timestamp".into(), ts.into());
        fields.insert("message".into(), Value::Object(m));
        let keys = group.iter().filter_map(|&j| self.lines[j].str("uuid").map(str::to_owned)).collect();
        let lines = group.iter().map(|&j| self.lines[j].number).collect();
        self.seen_main = true;
        self.place(Pending { fields, source: Source { lines, part: 0 } }, keys);
    }

    fn user(&mut self, l: &Line) {
        let ts = self.timestamp(l);
        let at = ms(l.str("timestamp")).map_or(Value::Null, Value::from);
        let content = message(l).and_then(|m| m.get("content"));
        // Messages in block order: each tool result alone, other blocks together.
        let mut messages: Vec<Map<String, Value>> = Vec::new();
        let mut pending_blocks: Vec<Value> = Vec::new();
        let flush = |blocks: &mut Vec<Value>, messages: &mut Vec<Map<String, Value>>| {
            if !blocks.is_empty() {
                let mut m = Map::new();
                m.insert("role".into(), "user".into());
                m.insert("content".into(), Value::Array(std::mem::take(blocks)));
                put(&mut m, "timestamp", at.clone());
                messages.push(m);
            }
        };
        match content {
            Some(Value::Array(items)) => {
                for item in items {
                    if item.get("type").and_then(Value::as_str) != Some("tool_result") {
                        pending_blocks.push(block(item));
                        continue;
                    }
                    flush(&mut pending_blocks, &mut messages);
                    let call = item.get("tool_use_id").cloned().unwrap_or(Value::Null);
                    let name =
                        call.as_str().and_then(|c| self.tool_names.get(c)).cloned().unwrap_or_default();
                    let mut m = Map::new();
                    m.insert("role".into(), "toolResult".into());
                    m.insert("toolCallId".into(), call);
                    m.insert("toolName".into(), name.into());
                    m.insert("content".into(), Value::Array(blocks(item.get("content"))));
                    let is_error = item.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    m.insert("isError".into(), is_error.into());
                    put(&mut m, "timestamp", at.clone());
                    messages.push(m);
                }
                flush(&mut pending_blocks, &mut messages);
                if messages.is_empty() {
                    // An empty block list is still a user message.
                    let mut m = Map::new();
                    m.insert("role".into(), "user".into());
                    m.insert("content".into(), Value::Array(Vec::new()));
                    put(&mut m, "timestamp", at.clone());
                    messages.push(m);
                }
            }
            other => {
                let mut m = Map::new();
                m.insert("role".into(), "user".into());
                m.insert("content".into(), other.cloned().unwrap_or_else(|| "".into()));
                put(&mut m, "timestamp", at.clone());
                messages.push(m);
            }
        }
        let base = Self::id_of(l);
        let mut parent = self.parent_of(l.str("parentUuid"));
        let count = messages.len();
        for (k, m) in messages.into_iter().enumerate() {
            let id = if k == 0 { base.clone() } else { format!("{base}.{k}") };
            let mut fields = Map::new();
            fields.insert("type".into(), "message".into());
            fields.insert("id".into(), id.clone().into());
            fields.insert("parentId".into(), parent);
            fields.insert("timestamp".into(), ts.clone().into());
            fields.insert("message".into(), Value::Object(m));
            let keys = if k + 1 == count {
                l.str("uuid").map(str::to_owned).into_iter().collect()
            } else {
                Vec::new()
            };
            self.seen_main = true;
            self.place(Pending { fields, source: Source { lines: vec![l.number], part: k as u32 } }, keys);
            parent = Value::from(id);
        }
    }

    fn compaction(&mut self, i: usize) {
        let boundary = &self.lines[i];
        let uuid = boundary.str("uuid");
        // Its summary: the next threaded line, a user message marked as the summary, its child.
        let summary_line = self.next_threaded(i).filter(|&j| {
            let l = &self.lines[j];
            l.str("type") == Some("user")
                && l.object().and_then(|o| o.get("isCompactSummary")).and_then(Value::as_bool) == Some(true)
                && uuid.is_some()
                && l.str("parentUuid") == uuid
        });
        let mut group = vec![i];
        group.extend(summary_line);
        for &j in &group {
            self.consumed[j] = true;
        }
        let ts = self.timestamp(boundary);
        let meta = boundary.object().and_then(|o| o.get("compactMetadata")).and_then(Value::as_object);
        let summary = summary_line.map(|j| text_of(message(&self.lines[j]).and_then(|m| m.get("content"))));
        let last = &self.lines[*group.last().unwrap_or(&i)];
        let parent = match boundary.str("logicalParentUuid") {
            Some(p) => self.parent_of(Some(p)),
            None => self.parent_of(boundary.str("parentUuid")),
        };
        let mut fields = Map::new();
        fields.insert("type".into(), "compaction".into());
        fields.insert("id".into(), Self::id_of(last).into());
        fields.insert("parentId".into(), parent);
        fields.insert("timestamp".into(), ts.into());
        fields.insert("summary".into(), summary.unwrap_or_default().into());
        put(
            &mut fields,
            "tokensBefore",
            meta.and_then(|m| m.get("preTokens")).cloned().unwrap_or(Value::Null),
        );
        if let Some(trigger) = meta.and_then(|m| m.get("trigger")).filter(|t| !t.is_null()) {
            fields.insert("details".into(), json!({"trigger": trigger}));
        }
        let keys = group.iter().filter_map(|&j| self.lines[j].str("uuid").map(str::to_owned)).collect();
        let lines = group.iter().map(|&j| self.lines[j].number).collect();
        self.seen_main = true;
        self.place(Pending { fields, source: Source { lines, part: 0 } }, keys);
    }
}

/// Pi's key order for a `custom` entry: `type, customType, data, id, parentId, timestamp`.
fn reorder_custom(fields: &mut Map<String, Value>) {
    if fields.get("type").and_then(Value::as_str) != Some("custom") {
        return;
    }
    let mut out = Map::new();
    for k in ["type", "customType", "data", "id", "parentId", "timestamp"] {
        if let Some(v) = fields.remove(k) {
            out.insert(k.to_owned(), v);
        }
    }
    out.append(fields);
    *fields = out;
}

/// Inserts `key` right after `after` (or at the end).
pub(super) fn set_after(fields: &mut Map<String, Value>, after: &str, key: &str, value: Value) {
    let mut out = Map::new();
    let mut done = false;
    for (k, v) in std::mem::take(fields) {
        let here = k == after;
        out.insert(k, v);
        if here {
            out.insert(key.to_owned(), value.clone());
            done = true;
        }
    }
    if !done {
        out.insert(key.to_owned(), value);
    }
    *fields = out;
}

/// Maps a Claude Code file's lines.
pub(crate) fn map(lines: &Lines, fallback_id: &str) -> Mapped {
    let all = &lines.lines;
    let conversation: Vec<&Line> = all.iter().filter(|l| is_conversation(l)).collect();
    let sidechain_is_main = !conversation.is_empty() && conversation.iter().all(|l| is_sidechain(l));
    let first = |key: &str| all.iter().find_map(|l| l.str(key).map(str::to_owned));
    let mut header = Map::new();
    header.insert("type".into(), "session".into());
    header.insert("version".into(), 3.into());
    header.insert("id".into(), first("sessionId").unwrap_or_else(|| fallback_id.to_owned()).into());
    header.insert("timestamp".into(), first("timestamp").unwrap_or_default().into());
    header.insert("cwd".into(), first("cwd").unwrap_or_default().into());
    let mut extra = Map::new();
    put(&mut extra, "formatVersion", first("version").map_or(Value::Null, Value::from));
    let mut mapper = Mapper {
        lines: all,
        sidechain_is_main,
        consumed: vec![false; all.len()],
        resolve: HashMap::new(),
        tail: None,
        tail_keys: Vec::new(),
        seen_main: false,
        tool_names: HashMap::new(),
        last_ts: first("timestamp"),
        entries: Vec::new(),
    };
    mapper.run();
    Mapped { header, header_lines: Vec::new(), header_extra: extra, entries: mapper.entries }
}
