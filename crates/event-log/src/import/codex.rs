//! Codex rollouts → Pi entries.
//!
//! A rollout is a flat list of `{timestamp, type, payload}` lines: a
//! `session_meta` first, then `response_item`s (what the model saw and said),
//! `event_msg`s (what the UI showed, including `token_count`), `turn_context`
//! (per turn: model, policies; absent in the older schema, cli 0.34 era) and
//! `compacted` (a compaction: `message`, and in later versions the
//! `replacement_history` the conversation continues from). How each maps:
//!
//! | line | entry |
//! |---|---|
//! | the first `session_meta` | the `session` header (id, time, cwd; it carries the line) |
//! | `response_item` `reasoning`, `message` (assistant), `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call` | one assistant `message` per model call: consecutive such items (other `event_msg` lines in between passed over) are **combined**, in order: reasoning → `thinking` (summary and reasoning text; `encrypted_content` kept opaque in `thinkingSignature`, `redacted` when nothing is readable), text → `text`, calls → `toolCall` (JSON arguments parsed; a freeform `input` becomes `{"input": …}`) |
//! | `response_item` `function_call_output`, `custom_tool_call_output` | a `toolResult` message (the output text as the model saw it; `isError` when its `metadata.exit_code` is non-zero) |
//! | `response_item` `message` (user) | a `user` message |
//! | `response_item` `message` (developer, system) | a `custom_message` `codex.developer` (in context, as Codex sends it) |
//! | `compacted` | a `compaction`: `summary` = `message` (or the text of `replacement_history` when `message` is empty; encrypted items stay opaque in the line), `tokensBefore` = the context of the last `token_count` before it, `details.trigger` when the line names one |
//! | `turn_context`, `event_msg` (all), other `response_item`s, further `session_meta`s | `custom` `codex.<type>[.<payload type>]` |
//!
//! Usage: each model call's `token_count` event (`info.last_token_usage`;
//! a repeat of the previous totals is not a new call) becomes the assistant
//! message's `usage` — `{input: input − cached, output, cacheRead: cached,
//! cacheWrite: 0, totalTokens}`. Codex writes the event just before the
//! call's items (both schemas in the fixtures); an event written just after
//! a call's items, with nothing the user side sent in between, is taken too.
//! The model is the latest `turn_context`'s (or `session_meta`'s).
//!
//! Entries form one linear path in file order; ids are `L<line>`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::{ms, put, Line, Lines, Mapped, Pending, Source};

fn payload(l: &Line) -> Option<&Map<String, Value>> {
    l.object()?.get("payload")?.as_object()
}

fn payload_type(l: &Line) -> Option<&str> {
    payload(l)?.get("type")?.as_str()
}

/// A response item the model produced (part of an assistant message).
fn is_assistant_item(l: &Line) -> bool {
    if l.str("type") != Some("response_item") {
        return false;
    }
    match payload_type(l) {
        Some("reasoning" | "function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call") => {
            true
        }
        Some("message") => {
            payload(l).and_then(|p| p.get("role")).and_then(Value::as_str) == Some("assistant")
        }
        _ => false,
    }
}

fn is_token_count(l: &Line) -> bool {
    l.str("type") == Some("event_msg") && payload_type(l) == Some("token_count")
}

/// Pi's usage from a `token_count` event's last call.
fn usage(l: &Line) -> Option<Value> {
    let last = payload(l)?.get("info")?.get("last_token_usage")?.as_object()?;
    let n = |k: &str| last.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (input, cached, output) = (n("input_tokens"), n("cached_input_tokens"), n("output_tokens"));
    let total = last.get("total_tokens").and_then(Value::as_u64).unwrap_or(input + output);
    Some(json!({
        "input": input.saturating_sub(cached),
        "output": output,
        "cacheRead": cached,
        "cacheWrite": 0,
        "totalTokens": total,
    }))
}

/// Text and image content items as Pi blocks.
fn content_blocks(content: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(items)) = content else {
        return match content {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
    };
    items
        .iter()
        .map(|item| match item.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => json!({"type": "text", "text": item.get("text").cloned().unwrap_or_else(|| "".into())}),
            Some("refusal") => json!({"type": "text", "text": item.get("refusal").cloned().unwrap_or_else(|| "".into())}),
            Some("input_image") => {
                let url = item.get("image_url").and_then(Value::as_str).unwrap_or_default();
                // `data:<mime>;base64,<data>`; anything else keeps no data.
                let (mime, data) = url
                    .strip_prefix("data:")
                    .and_then(|rest| rest.split_once(";base64,"))
                    .unwrap_or(("image/png", ""));
                json!({"type": "image", "data": data, "mimeType": mime})
            }
            _ => json!({"type": "text", "text": sessionlog_events::json::to_js_string(item).unwrap_or_default()}),
        })
        .collect()
}

/// The text of the output an item returned to the model, and whether it failed.
fn output(p: &Map<String, Value>) -> (Vec<Value>, bool) {
    match p.get("output") {
        Some(Value::String(s)) => {
            let exit = serde_json::from_str::<Value>(s)
                .ok()
                .and_then(|v| v.get("metadata")?.get("exit_code")?.as_i64());
            (vec![json!({"type": "text", "text": s})], exit.is_some_and(|c| c != 0))
        }
        Some(Value::Object(o)) => {
            let failed = o.get("success").and_then(Value::as_bool) == Some(false);
            match o.get("content") {
                Some(Value::String(s)) => (vec![json!({"type": "text", "text": s})], failed),
                Some(c @ Value::Array(_)) => (content_blocks(Some(c)), failed),
                _ => (
                    content_blocks(Some(&Value::String(
                        sessionlog_events::json::to_js_string(&Value::Object(o.clone())).unwrap_or_default(),
                    ))),
                    failed,
                ),
            }
        }
        Some(a @ Value::Array(_)) => (content_blocks(Some(a)), false),
        _ => (Vec::new(), false),
    }
}

/// A model-produced item as a Pi block (`None` for nothing to show).
fn item_block(p: &Map<String, Value>, line: u64) -> Vec<Value> {
    let s = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
    match p.get("type").and_then(Value::as_str) {
        Some("reasoning") => {
            let texts = |k: &str| -> Vec<String> {
                p.get(k)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.get("text").and_then(Value::as_str).map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut all = texts("summary");
            all.extend(texts("content"));
            let text = all.join("\n\n");
            let mut b = Map::new();
            b.insert("type".into(), "thinking".into());
            let encrypted = p.get("encrypted_content").filter(|v| v.is_string()).cloned();
            b.insert("thinking".into(), text.clone().into());
            if let Some(e) = encrypted {
                b.insert("thinkingSignature".into(), e);
                if text.is_empty() {
                    b.insert("redacted".into(), true.into());
                }
            }
            vec![Value::Object(b)]
        }
        Some("message") => content_blocks(p.get("content")),
        Some("function_call") => {
            let args = p
                .get("arguments")
                .and_then(Value::as_str)
                .and_then(|a| serde_json::from_str::<Value>(a).ok())
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"input": s("arguments")}));
            vec![json!({"type": "toolCall", "id": s("call_id"), "name": s("name"), "arguments": args})]
        }
        Some("custom_tool_call") => {
            vec![
                json!({"type": "toolCall", "id": s("call_id"), "name": s("name"), "arguments": {"input": s("input")}}),
            ]
        }
        Some("local_shell_call") => {
            let id = p
                .get("call_id")
                .or_else(|| p.get("id"))
                .cloned()
                .unwrap_or_else(|| format!("L{line}").into());
            let args = p.get("action").filter(|v| v.is_object()).cloned().unwrap_or_else(|| json!({}));
            vec![json!({"type": "toolCall", "id": id, "name": "local_shell", "arguments": args})]
        }
        Some("web_search_call") => {
            let id = p.get("id").cloned().unwrap_or_else(|| format!("L{line}").into());
            let args = p.get("action").filter(|v| v.is_object()).cloned().unwrap_or_else(|| json!({}));
            vec![json!({"type": "toolCall", "id": id, "name": "web_search", "arguments": args})]
        }
        _ => Vec::new(),
    }
}

struct Mapper<'a> {
    lines: &'a [Line],
    header_index: Option<usize>,
    /// `token_count` events that report a new model call (not a repeat).
    fresh: Vec<bool>,
    /// Fresh events already given to the call before them.
    claimed: Vec<bool>,
    consumed: Vec<bool>,
    tail: Option<String>,
    pending_usage: Option<Value>,
    /// Context tokens of the last call (for a compaction's `tokensBefore`).
    last_context: Option<u64>,
    provider: String,
    model: Option<String>,
    tool_names: HashMap<String, String>,
    entries: Vec<Pending>,
}

impl<'a> Mapper<'a> {
    fn push(&mut self, mut fields: Map<String, Value>, lines: Vec<u64>) {
        let id = fields.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        let parent = self.tail.clone().map_or(Value::Null, Value::from);
        if fields.get("type").and_then(Value::as_str).is_some_and(|t| t == "custom" || t == "custom_message")
        {
            // Pi's order for these puts the ids last.
            fields.insert("id".into(), id.clone().into());
            let ts = fields.shift_remove("timestamp");
            fields.insert("parentId".into(), parent);
            if let Some(ts) = ts {
                fields.insert("timestamp".into(), ts);
            }
        } else {
            super::claude::set_after(&mut fields, "id", "parentId", parent);
        }
        self.tail = Some(id);
        self.entries.push(Pending { fields, source: Source { lines, part: 0 } });
    }

    fn base(l: &Line, ty: &str) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("type".into(), ty.into());
        fields.insert("id".into(), format!("L{}", l.number).into());
        fields.insert("timestamp".into(), l.str("timestamp").unwrap_or_default().into());
        fields
    }

    fn custom(&mut self, l: &Line) {
        let mut name = format!("codex.{}", l.str("type").unwrap_or("unknown"));
        if let Some(sub) =
            payload_type(l).filter(|_| matches!(l.str("type"), Some("event_msg" | "response_item")))
        {
            name.push('.');
            name.push_str(sub);
        }
        let mut fields = Map::new();
        fields.insert("type".into(), "custom".into());
        fields.insert("customType".into(), name.into());
        fields.insert("id".into(), format!("L{}", l.number).into());
        fields.insert("timestamp".into(), l.str("timestamp").unwrap_or_default().into());
        self.push(fields, vec![l.number]);
    }

    fn message(&mut self, l: &Line, m: Map<String, Value>) {
        let mut fields = Self::base(l, "message");
        fields.insert("message".into(), Value::Object(m));
        self.push(fields, vec![l.number]);
    }

    fn run(&mut self) {
        let lines = self.lines;
        for (i, l) in lines.iter().enumerate() {
            if self.consumed[i] || l.value.is_none() || Some(i) == self.header_index {
                continue;
            }
            let at = ms(l.str("timestamp")).map_or(Value::Null, Value::from);
            match (l.str("type"), payload_type(l)) {
                (Some("response_item"), _) if is_assistant_item(l) => self.assistant(i),
                (Some("response_item"), Some("message")) => {
                    let p = payload(l).cloned().unwrap_or_default();
                    let role = p.get("role").and_then(Value::as_str).unwrap_or_default();
                    let content = content_blocks(p.get("content"));
                    self.pending_usage = None;
                    if role == "user" {
                        let mut m = Map::new();
                        m.insert("role".into(), "user".into());
                        m.insert("content".into(), Value::Array(content));
                        put(&mut m, "timestamp", at);
                        self.message(l, m);
                    } else {
                        let mut fields = Map::new();
                        fields.insert("type".into(), "custom_message".into());
                        fields.insert("customType".into(), format!("codex.{role}").into());
                        fields.insert("content".into(), Value::Array(content));
                        fields.insert("display".into(), false.into());
                        fields.insert("id".into(), format!("L{}", l.number).into());
                        fields.insert("timestamp".into(), l.str("timestamp").unwrap_or_default().into());
                        self.push(fields, vec![l.number]);
                    }
                }
                (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
                    let p = payload(l).cloned().unwrap_or_default();
                    let call = p.get("call_id").cloned().unwrap_or(Value::Null);
                    let name =
                        call.as_str().and_then(|c| self.tool_names.get(c)).cloned().unwrap_or_default();
                    let (content, failed) = output(&p);
                    let mut m = Map::new();
                    m.insert("role".into(), "toolResult".into());
                    m.insert("toolCallId".into(), call);
                    m.insert("toolName".into(), name.into());
                    m.insert("content".into(), Value::Array(content));
                    m.insert("isError".into(), failed.into());
                    put(&mut m, "timestamp", at);
                    self.pending_usage = None;
                    self.message(l, m);
                }
                (Some("compacted"), _) => self.compaction(l),
                (Some("event_msg"), Some("token_count")) => {
                    if self.fresh[i] {
                        self.last_context = usage(l).and_then(|u| u["totalTokens"].as_u64());
                        if !self.claimed[i] {
                            self.pending_usage = usage(l);
                        }
                    }
                    self.custom(l);
                }
                (Some("turn_context"), _) => {
                    if let Some(m) = payload(l).and_then(|p| p.get("model")).and_then(Value::as_str) {
                        self.model = Some(m.to_owned());
                    }
                    self.custom(l);
                }
                _ => self.custom(l),
            }
        }
        // A compaction keeps nothing of what it summarised: its first kept
        // entry is the one after it (linear path).
        for i in 0..self.entries.len() {
            if self.entries[i].fields.get("type").and_then(Value::as_str) != Some("compaction") {
                continue;
            }
            let next =
                self.entries.get(i + 1).or(self.entries.get(i)).and_then(|e| e.id()).unwrap_or_default();
            let next = Value::from(next);
            super::claude::set_after(&mut self.entries[i].fields, "summary", "firstKeptEntryId", next);
        }
    }

    fn assistant(&mut self, start: usize) {
        let lines = self.lines;
        let mut group = vec![start];
        let mut j = start + 1;
        while j < lines.len() {
            let l = &lines[j];
            if l.value.is_none() {
                j += 1;
                continue;
            }
            if is_assistant_item(l) {
                group.push(j);
            } else if l.str("type") != Some("event_msg") || self.fresh[j] {
                // Anything but an event of this same call ends the call.
                break;
            }
            j += 1;
        }
        for &k in &group {
            self.consumed[k] = true;
        }
        let mut usage_value = self.pending_usage.take();
        if usage_value.is_none() {
            // The call's event written after its items, before anything else.
            let end = *group.last().unwrap_or(&start);
            for (k, l) in lines.iter().enumerate().skip(end + 1) {
                if l.value.is_none() {
                    continue;
                }
                if is_token_count(l) && self.fresh[k] {
                    usage_value = usage(l);
                    self.claimed[k] = true;
                    break;
                }
                if l.str("type") != Some("event_msg") {
                    break;
                }
            }
        }
        let first = &lines[start];
        let mut content = Vec::new();
        for &k in &group {
            if let Some(p) = payload(&lines[k]) {
                content.extend(item_block(p, lines[k].number));
            }
        }
        for b in &content {
            if let (Some("toolCall"), Some(id), Some(name)) =
                (b["type"].as_str(), b["id"].as_str(), b["name"].as_str())
            {
                self.tool_names.insert(id.to_owned(), name.to_owned());
            }
        }
        let calls_tools = content.iter().any(|b| b["type"] == "toolCall");
        let mut m = Map::new();
        m.insert("role".into(), "assistant".into());
        m.insert("content".into(), Value::Array(content));
        m.insert("api".into(), "openai-responses".into());
        m.insert("provider".into(), self.provider.clone().into());
        put(&mut m, "model", self.model.clone().map_or(Value::Null, Value::from));
        put(&mut m, "usage", usage_value.unwrap_or(Value::Null));
        m.insert("stopReason".into(), if calls_tools { "toolUse" } else { "stop" }.into());
        put(&mut m, "timestamp", ms(first.str("timestamp")).map_or(Value::Null, Value::from));
        let mut fields = Self::base(first, "message");
        fields.insert("message".into(), Value::Object(m));
        self.push(fields, group.iter().map(|&k| lines[k].number).collect());
    }

    fn compaction(&mut self, l: &Line) {
        let p = payload(l).cloned().unwrap_or_default();
        let message = p.get("message").and_then(Value::as_str).unwrap_or_default();
        let summary = if message.is_empty() {
            // The text of the history the conversation continues from.
            p.get("replacement_history")
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                        .flat_map(|i| content_blocks(i.get("content")))
                        .filter_map(|b| b.get("text").and_then(Value::as_str).map(str::to_owned))
                        .collect::<Vec<_>>()
                        .join("\n\n")
                })
                .unwrap_or_default()
        } else {
            message.to_owned()
        };
        let mut fields = Self::base(l, "compaction");
        fields.insert("summary".into(), summary.into());
        put(&mut fields, "tokensBefore", self.last_context.map_or(Value::Null, Value::from));
        if let Some(trigger) = p.get("trigger").filter(|t| !t.is_null()) {
            fields.insert("details".into(), json!({"trigger": trigger}));
        }
        self.pending_usage = None;
        self.push(fields, vec![l.number]);
    }
}

/// Maps a Codex rollout's lines.
pub(crate) fn map(lines: &Lines, fallback_id: &str) -> Mapped {
    let all = &lines.lines;
    let header_index = all.iter().position(|l| l.str("type") == Some("session_meta"));
    let meta = header_index.and_then(|i| payload(&all[i]));
    let meta_str = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).map(str::to_owned);
    let mut fresh = vec![false; all.len()];
    let mut previous: Option<&Value> = None;
    for (i, l) in all.iter().enumerate() {
        let Some(info) =
            payload(l).and_then(|p| p.get("info")).filter(|v| v.is_object() && is_token_count(l))
        else {
            continue;
        };
        let total = info.get("total_token_usage");
        fresh[i] = previous != total || total.is_none();
        previous = total;
    }
    let mut header = Map::new();
    header.insert("type".into(), "session".into());
    header.insert("version".into(), 3.into());
    header.insert("id".into(), meta_str("id").unwrap_or_else(|| fallback_id.to_owned()).into());
    let first_ts = all.iter().find_map(|l| l.str("timestamp").map(str::to_owned));
    header.insert("timestamp".into(), meta_str("timestamp").or(first_ts).unwrap_or_default().into());
    header.insert("cwd".into(), meta_str("cwd").unwrap_or_default().into());
    let mut extra = Map::new();
    put(&mut extra, "formatVersion", meta_str("cli_version").map_or(Value::Null, Value::from));
    let mut mapper = Mapper {
        lines: all,
        header_index,
        fresh,
        claimed: vec![false; all.len()],
        consumed: vec![false; all.len()],
        tail: None,
        pending_usage: None,
        last_context: None,
        provider: meta_str("model_provider").unwrap_or_else(|| "openai".to_owned()),
        model: meta_str("model"),
        tool_names: HashMap::new(),
        entries: Vec::new(),
    };
    mapper.run();
    Mapped {
        header,
        header_lines: header_index.map(|i| vec![all[i].number]).unwrap_or_default(),
        header_extra: extra,
        entries: mapper.entries,
    }
}
