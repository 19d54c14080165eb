//! The JSON documents `sessionlog context` and `sessionlog cut` print, in the
//! shape and with the values of the Pi oracle's `context` and `cut` (minus
//! `piVersion`).

use serde_json::{json, Map, Value};
use sessionlog_events::{Entry, EntryKind, Transcript};
use sessionlog_tokens::TokenCounter;

use crate::assemble::{build, number, resolve_leaf, AgentMessage, Context, ContextError, Leaf, Source};
use crate::cut::{
    estimate_context, find_cut_point, format_file_operations, js_sorted, last_assistant_usage_tokens,
    last_compaction, prepare, serialized_history, should_compact, ContextTokens, NoPreparation, Settings,
};
use crate::llm::convert_to_llm;

/// Pi's leaf id for a leaf choice: the chosen id, `null`, or the last entry's
/// id (`None` when that entry has none, which JSON leaves out).
fn leaf_id_json(transcript: &Transcript, leaf: Leaf<'_>) -> Option<Value> {
    match leaf {
        Leaf::Null => Some(Value::Null),
        Leaf::Id(id) => Some(Value::from(id)),
        Leaf::Default => match transcript.default_leaf() {
            None => Some(Value::Null),
            Some(e) => e.id.clone().map(Value::from),
        },
    }
}

fn insert_opt(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v);
    }
}

/// The exact text of an entry's `message` value, when it can be sliced out.
fn stored_message_text(entry: &Entry) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct OnlyMessage<'a> {
        #[serde(borrow, default)]
        message: Option<&'a serde_json::value::RawValue>,
    }
    serde_json::from_str::<OnlyMessage<'_>>(entry.raw()).ok()?.message.map(|m| m.get())
}

/// A context or provider message: the raw text of a stored message passed
/// through unchanged (written without a detour through a value), or a value.
enum MessageOut<'a> {
    Raw(&'a str),
    Value(Value),
}

fn message_out<'a>(m: &AgentMessage<'a>, built: Option<&Value>) -> MessageOut<'a> {
    if let Some(value) = built {
        return MessageOut::Value(value.clone());
    }
    match (m.source, stored_message_text(m.entry)) {
        (Source::Stored, Some(text)) => MessageOut::Raw(text),
        _ => MessageOut::Value(m.to_json()),
    }
}

/// The `context` document: `{leafId, thinkingLevel, model, messageCount,
/// messages[, llmMessages]}`, written straight to output by [`ContextDoc::write_json`].
pub struct ContextDoc<'a> {
    leaf_id: Option<Value>,
    thinking_level: Option<Value>,
    model: Value,
    context: Context<'a>,
    llm: bool,
}

impl<'a> ContextDoc<'a> {
    /// The context built for `leaf`.
    pub fn context(&self) -> &Context<'a> {
        &self.context
    }
}

impl ContextDoc<'_> {
    /// Writes the document as `JSON.stringify(doc, null, 2)` and a newline,
    /// streaming: each stored message is re-indented from its raw text
    /// ([`sessionlog_events::json::write_js_pretty_text`]), without a value.
    pub fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use sessionlog_events::json::{write_js_pretty_at, write_js_pretty_text};
        let invalid = |e: serde_json::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut first = true;
        let mut field = |buf: &mut Vec<u8>, key: &str| {
            buf.extend_from_slice(if first { b"{\n  \"" } else { b",\n  \"" });
            first = false;
            buf.extend_from_slice(key.as_bytes());
            buf.extend_from_slice(b"\": ");
        };
        let mut small = |buf: &mut Vec<u8>, key: &str, value: &Value| {
            field(buf, key);
            write_js_pretty_at(buf, value, 1).map_err(invalid)
        };
        if let Some(leaf) = &self.leaf_id {
            small(&mut buf, "leafId", leaf)?;
        }
        if let Some(level) = &self.thinking_level {
            small(&mut buf, "thinkingLevel", level)?;
        }
        small(&mut buf, "model", &self.model)?;
        small(&mut buf, "messageCount", &Value::from(self.context.messages.len()))?;
        let mut list =
            |buf: &mut Vec<u8>, out: &mut dyn std::io::Write, key: &str, items: Vec<MessageOut<'_>>| {
                field(buf, key);
                if items.is_empty() {
                    buf.extend_from_slice(b"[]");
                    return Ok(());
                }
                buf.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    buf.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
                    match item {
                        MessageOut::Raw(text) => write_js_pretty_text(buf, text, 2),
                        MessageOut::Value(value) => write_js_pretty_at(buf, value, 2),
                    }
                    .map_err(invalid)?;
                    if buf.len() >= 1 << 16 {
                        out.write_all(buf)?;
                        buf.clear();
                    }
                }
                buf.extend_from_slice(b"\n  ]");
                Ok::<(), std::io::Error>(())
            };
        let messages = &self.context.messages;
        list(&mut buf, out, "messages", messages.iter().map(|m| message_out(m, None)).collect())?;
        if self.llm {
            let converted = convert_to_llm(messages);
            let items = converted.iter().map(|m| message_out(m.from, m.built.as_ref())).collect();
            list(&mut buf, out, "llmMessages", items)?;
        }
        buf.extend_from_slice(b"\n}\n");
        out.write_all(&buf)
    }
}

/// Builds the `context` document for `leaf` (with `llmMessages` when `llm`).
pub fn context_doc<'a>(
    transcript: &'a Transcript,
    leaf: Leaf<'_>,
    llm: bool,
) -> Result<ContextDoc<'a>, ContextError> {
    let tree = transcript.tree();
    let index = resolve_leaf(transcript, &tree, leaf)?;
    let context = build(transcript, &tree, index)?;
    Ok(ContextDoc {
        leaf_id: leaf_id_json(transcript, leaf),
        thinking_level: context.thinking_level_json(),
        model: context.model_json(),
        context,
        llm,
    })
}

fn tokens_json(t: &ContextTokens) -> Value {
    json!({
        "tokens": number(t.tokens),
        "usageTokens": number(t.usage_tokens),
        "trailingTokens": t.trailing_tokens,
        "lastUsageIndex": t.last_usage_index,
    })
}

/// The entry id the oracle reports for a prepared message: the message
/// entry itself, or the first path entry matching a synthesised one by kind,
/// content and time (so a NaN time matches nothing).
fn entry_id_for(m: &AgentMessage<'_>, path: &[&Entry]) -> Value {
    if m.source == Source::Stored {
        return m.entry.id.clone().map_or(Value::Null, Value::from);
    }
    let ms = crate::assemble::entry_ms(m.entry);
    let found = path.iter().find(|e| {
        if crate::assemble::entry_ms(e) != ms {
            return false;
        }
        match (&e.kind, &m.entry.kind) {
            (EntryKind::CustomMessage(a), EntryKind::CustomMessage(b)) => a.custom_type == b.custom_type,
            (EntryKind::BranchSummary(a), EntryKind::BranchSummary(b)) => a.summary == b.summary,
            (EntryKind::Compaction(a), EntryKind::Compaction(b)) => a.summary == b.summary,
            _ => false,
        }
    });
    found.and_then(|e| e.id.clone()).map_or(Value::Null, Value::from)
}

fn describe(messages: &[AgentMessage<'_>], path: &[&Entry], counter: &dyn TokenCounter) -> Value {
    let mut total = 0u64;
    let items: Vec<Value> = messages
        .iter()
        .map(|m| {
            let t = counter.message_tokens(&m.message);
            total += t;
            let mut item = Map::new();
            item.insert("entryId".to_owned(), entry_id_for(m, path));
            let role = match m.source {
                Source::Stored => m.entry.to_value().get("message").and_then(|v| v.get("role")).cloned(),
                _ => m.message.role.clone().map(Value::from),
            };
            insert_opt(&mut item, "role", role);
            item.insert("estTokens".to_owned(), Value::from(t));
            Value::Object(item)
        })
        .collect();
    json!({"count": messages.len(), "estTokens": total, "items": items})
}

fn serialized(messages: &[AgentMessage<'_>], with_text: bool) -> Value {
    let text = serialized_history(messages);
    let chars: usize = text.chars().map(char::len_utf16).sum();
    let mut out = json!({"chars": chars, "sha256": crate::hygiene::sha_hex(&text)});
    if with_text {
        out["text"] = Value::from(text);
    }
    out
}

fn settings_json(s: &Settings) -> Value {
    json!({"enabled": s.enabled, "reserveTokens": s.reserve_tokens, "keepRecentTokens": s.keep_recent_tokens})
}

/// Options of the `cut` document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CutOptions {
    /// Compaction settings.
    pub settings: Settings,
    /// The model's context window, if known (`shouldCompact` is null without it).
    pub context_window: Option<u64>,
    /// Include the serialised texts.
    pub with_text: bool,
}

/// The `cut` document of the oracle.
pub fn cut_doc(
    transcript: &Transcript,
    leaf: Leaf<'_>,
    options: &CutOptions,
    counter: &dyn TokenCounter,
) -> Result<Value, ContextError> {
    let tree = transcript.tree();
    let index = resolve_leaf(transcript, &tree, leaf)?;
    let ctx = build(transcript, &tree, index)?;
    // Pi's getBranch() walks from the leaf id; a leaf without an id has no path.
    let has_id = index.is_some_and(|i| transcript.entries[i].id.as_deref().is_some_and(|id| !id.is_empty()));
    let path: Vec<&Entry> =
        if has_id { ctx.path.iter().map(|&i| &transcript.entries[i]).collect() } else { Vec::new() };
    let settings = &options.settings;
    let estimate = estimate_context(&ctx.messages, counter);
    let start = last_compaction(&path).map_or(0, |p| p + 1);
    let cut_point = (!path.is_empty() && start < path.len()).then(|| {
        let c = find_cut_point(&path, start, path.len(), settings.keep_recent_tokens, counter);
        let id_at = |i: usize| path.get(i).and_then(|e| e.id.clone()).map_or(Value::Null, Value::from);
        json!({
            "startIndex": start,
            "endIndex": path.len(),
            "firstKeptEntryIndex": c.first_kept,
            "firstKeptEntryId": id_at(c.first_kept),
            "turnStartIndex": c.turn_start.map_or(-1, |t| t as i64),
            "turnStartEntryId": c.turn_start.map_or(Value::Null, id_at),
            "isSplitTurn": c.is_split_turn,
        })
    });
    let prepared =
        if path.is_empty() { Err(NoPreparation::EmptyPath) } else { prepare(&path, settings, counter) };
    let (preparation, reason) = match &prepared {
        Err(why) => (Value::Null, Value::from(why.reason())),
        Ok(p) => {
            let (read, modified) = p.file_ops.lists();
            let previous =
                p.previous_summary.map(|e| e.to_value().get("summary").cloned().unwrap_or(Value::Null));
            let doc = json!({
                "firstKeptEntryId": p.first_kept_entry_id,
                "isSplitTurn": p.cut.is_split_turn,
                "tokensBefore": number(p.tokens_before),
                "previousSummary": previous.unwrap_or(Value::Null),
                "messagesToSummarize": describe(&p.messages_to_summarize, &path, counter),
                "turnPrefixMessages": describe(&p.turn_prefix_messages, &path, counter),
                "fileOps": {
                    "read": js_sorted(&p.file_ops.read),
                    "written": js_sorted(&p.file_ops.written),
                    "edited": js_sorted(&p.file_ops.edited),
                },
                "details": {"readFiles": read, "modifiedFiles": modified},
                "fileOpsSuffix": format_file_operations(&read, &modified),
                "serializedHistory": serialized(&p.messages_to_summarize, options.with_text),
                "serializedTurnPrefix": serialized(&p.turn_prefix_messages, options.with_text),
                "settings": settings_json(settings),
            });
            (doc, Value::Null)
        }
    };
    let matches = match (&cut_point, &prepared) {
        (Some(c), Ok(p)) => Value::from(c["firstKeptEntryId"] == p.first_kept_entry_id.as_str()),
        _ => Value::Null,
    };
    let mut doc = Map::new();
    insert_opt(&mut doc, "leafId", leaf_id_json(transcript, leaf));
    doc.insert("pathLength".to_owned(), Value::from(path.len()));
    doc.insert("settings".to_owned(), settings_json(settings));
    doc.insert("contextWindow".to_owned(), options.context_window.map_or(Value::Null, Value::from));
    doc.insert("contextMessageCount".to_owned(), Value::from(ctx.messages.len()));
    doc.insert("contextTokens".to_owned(), tokens_json(&estimate));
    doc.insert(
        "lastAssistantUsageTokens".to_owned(),
        last_assistant_usage_tokens(&path).map_or(Value::Null, number),
    );
    doc.insert(
        "shouldCompact".to_owned(),
        options
            .context_window
            .map_or(Value::Null, |w| Value::from(should_compact(estimate.tokens, w, settings))),
    );
    doc.insert("cutPoint".to_owned(), cut_point.unwrap_or(Value::Null));
    doc.insert("cutPointMatchesPreparation".to_owned(), matches);
    doc.insert("preparation".to_owned(), preparation);
    doc.insert("noPreparationReason".to_owned(), reason);
    Ok(Value::Object(doc))
}
