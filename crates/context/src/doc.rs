//! The JSON documents `sessionlog entries`, `context` and `cut` print, in
//! the shape and with the values of the Pi oracle's `entries`, `context` and
//! `cut` (minus `piVersion`): `oracle/pi` under [`PiRules::V0_58`],
//! `oracle/pi-1.6` under [`PiRules::V1_6`].

use serde_json::{json, Map, Value};
use sessionlog_events::{Entry, EntryKind, PiRules, Transcript};
use sessionlog_tokens::TokenCounter;

use crate::assemble::{build_with, number, resolve_leaf, AgentMessage, Context, ContextError, Leaf, Source};
use crate::cut::{
    estimate_context, find_cut_point, format_file_operations, js_sorted, last_assistant_usage_tokens_with,
    last_compaction, prepare, projected, serialized_history_with, should_compact, ContextTokens,
    NoPreparation, Preparation, Settings,
};
use crate::llm::convert_to_llm_with;
use crate::projection;

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

/// The `entries` document: the transcript after Pi's load-time migration
/// (whether opening it rewrites the file, the labels, the header and the
/// entries Pi indexes).
pub fn entries_doc(t: &Transcript, rewritten_on_open: bool) -> Value {
    let labels: Map<String, Value> =
        t.labels().into_iter().map(|(id, label)| (id.to_owned(), Value::from(label))).collect();
    let mut doc = json!({
        "originalVersion": t.original_version.map_or(Value::from(1), number),
        "currentVersion": 3,
        "rewrittenOnOpen": rewritten_on_open,
        "sessionId": t.session_id(),
        "sessionName": t.session_name(),
        "leafId": t.default_leaf().and_then(|e| e.id.clone()),
        "entryCount": t.tree_entries().count(),
        "labels": labels,
        "header": t.header.to_value(),
        "entries": t.tree_entries().map(Entry::to_value).collect::<Vec<_>>(),
    });
    if t.default_leaf().is_some_and(|e| e.id.is_none()) {
        // Pi's leaf id is then `undefined`, which JSON leaves out.
        doc.as_object_mut().map(|o| o.remove("leafId"));
    }
    doc
}

fn insert_opt(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v);
    }
}

/// The exact text of an entry's `message` (or, for a compaction's system
/// snapshot, `systemMessage`) value, when it can be sliced out.
fn stored_message_text(entry: &Entry, source: Source) -> Option<&str> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Only<'a> {
        #[serde(borrow, default)]
        message: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default)]
        system_message: Option<&'a serde_json::value::RawValue>,
    }
    let only = serde_json::from_str::<Only<'_>>(entry.raw()).ok()?;
    match source {
        Source::Stored => only.message.map(|m| m.get()),
        Source::SystemSnapshot => only.system_message.map(|m| m.get()),
        _ => None,
    }
}

/// A context or provider message: the raw text of a stored message passed
/// through unchanged (written without a detour through a value), or a value.
pub(crate) enum MessageOut<'a> {
    Raw(&'a str),
    Value(Value),
}

pub(crate) fn message_out<'a>(m: &AgentMessage<'a>, built: Option<&Value>) -> MessageOut<'a> {
    if let Some(value) = built {
        return MessageOut::Value(value.clone());
    }
    if m.projected.is_some() {
        return MessageOut::Value(m.to_json());
    }
    match stored_message_text(m.entry, m.source) {
        Some(text) => MessageOut::Raw(text),
        None => MessageOut::Value(m.to_json()),
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
    rules: PiRules,
}

impl<'a> ContextDoc<'a> {
    /// The context built for `leaf`.
    pub fn context(&self) -> &Context<'a> {
        &self.context
    }

    /// The context's size as the document's Pi release measures it: 0.58's
    /// `estimateContextTokens`, or 1.6's `estimateProjectedContextTokens`
    /// over the projection of the context's path in `transcript`.
    pub fn estimate(&self, transcript: &Transcript, counter: &dyn TokenCounter) -> ContextTokens {
        match self.rules {
            PiRules::V0_58 => estimate_context(&self.context.messages, counter),
            PiRules::V1_6 => {
                let path: Vec<&Entry> = self.context.path.iter().map(|&i| &transcript.entries[i]).collect();
                projected::estimate_projected(&projection::project(&path), &path, counter)
            }
        }
    }
}

impl ContextDoc<'_> {
    /// Writes the document as `JSON.stringify(doc, null, 2)` and a newline,
    /// streaming: each stored message is re-indented from its raw text
    /// ([`sessionlog_events::json::write_js_pretty_text`]), without a value.
    pub fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use sessionlog_events::json::{write_js_pretty_at, write_js_pretty_text};

        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        write_head(
            &mut buf,
            self.leaf_id.as_ref(),
            self.thinking_level.as_ref(),
            &self.model,
            self.context.messages.len(),
        )?;
        let field = |buf: &mut Vec<u8>, key: &str| {
            buf.extend_from_slice(b",\n  \"");
            buf.extend_from_slice(key.as_bytes());
            buf.extend_from_slice(b"\": ");
        };
        let list =
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
                    .map_err(|e| {
                        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{key}[{i}]: {e}"))
                    })?;
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
            let converted = convert_to_llm_with(messages, self.rules);
            let items = converted.iter().map(|m| message_out(m.from, m.built.as_ref())).collect();
            list(&mut buf, out, "llmMessages", items)?;
        }
        buf.extend_from_slice(b"\n}\n");
        out.write_all(&buf)
    }
}

/// Writes the head of the `context` document — `{`, then `leafId` and
/// `thinkingLevel` (each when present), `model` and `messageCount` — as
/// `JSON.stringify(doc, null, 2)` prints them; the lists follow, each after `,`.
pub(crate) fn write_head(
    buf: &mut Vec<u8>,
    leaf_id: Option<&Value>,
    thinking_level: Option<&Value>,
    model: &Value,
    message_count: usize,
) -> std::io::Result<()> {
    use sessionlog_events::json::write_js_pretty_at;
    let count = Value::from(message_count);
    let fields = [
        ("leafId", leaf_id),
        ("thinkingLevel", thinking_level),
        ("model", Some(model)),
        ("messageCount", Some(&count)),
    ];
    let mut first = true;
    for (key, value) in fields {
        let Some(value) = value else { continue };
        buf.extend_from_slice(if first { b"{\n  \"" } else { b",\n  \"" });
        first = false;
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(b"\": ");
        write_js_pretty_at(buf, value, 1)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    }
    Ok(())
}

/// Builds the `context` document for `leaf` (with `llmMessages` when `llm`)
/// under the given Pi release's rules.
pub fn context_doc<'a>(
    transcript: &'a Transcript,
    leaf: Leaf<'_>,
    llm: bool,
    rules: PiRules,
) -> Result<ContextDoc<'a>, ContextError> {
    let tree = transcript.tree();
    let index = resolve_leaf(transcript, &tree, leaf)?;
    let context = build_with(transcript, &tree, index, rules)?;
    Ok(ContextDoc {
        leaf_id: leaf_id_json(transcript, leaf),
        thinking_level: context.thinking_level_json(),
        model: context.model_json(),
        context,
        llm,
        rules,
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

fn describe(
    messages: &[AgentMessage<'_>],
    path: &[&Entry],
    counter: &dyn TokenCounter,
    rules: PiRules,
) -> Value {
    let mut total = 0u64;
    let items: Vec<Value> = messages
        .iter()
        .map(|m| {
            let t = counter.tokens_for(&m.message, rules);
            total += t;
            let mut item = Map::new();
            match rules {
                PiRules::V0_58 => {
                    item.insert("entryId".to_owned(), entry_id_for(m, path));
                }
                // Pi 1.6's oracle takes the id from the projection slice (undefined is left out).
                PiRules::V1_6 => insert_opt(&mut item, "entryId", m.entry.id.clone().map(Value::from)),
            }
            let role = match m.source {
                Source::Stored if m.projected.is_none() => {
                    m.entry.field_value("message").and_then(|v| v.get("role").cloned())
                }
                Source::Stored | Source::SystemSnapshot => m.to_json().get("role").cloned(),
                _ => m.message.role.clone().map(Value::from),
            };
            insert_opt(&mut item, "role", role);
            item.insert("estTokens".to_owned(), Value::from(t));
            Value::Object(item)
        })
        .collect();
    json!({"count": messages.len(), "estTokens": total, "items": items})
}

fn serialized(messages: &[AgentMessage<'_>], with_text: bool, rules: PiRules) -> Value {
    let text = serialized_history_with(messages, rules);
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
    /// Whose rules decide: Pi 0.58.3's or Pi 1.6.0's.
    pub rules: PiRules,
}

/// What one rule set decides for a path, before it is written out.
struct Decision<'a> {
    context_message_count: usize,
    estimate: ContextTokens,
    cut_point: Option<Value>,
    prepared: Result<Preparation<'a>, NoPreparation>,
}

/// The oracle's `cutPoint` object.
fn cut_point_json(
    start: Option<usize>,
    end: usize,
    first_kept: (Option<usize>, Value),
    turn_start: (Option<usize>, Value),
    is_split_turn: bool,
) -> Value {
    let index = |i: Option<usize>| i.map_or(-1, |i| i as i64);
    json!({
        "startIndex": index(start),
        "endIndex": end,
        "firstKeptEntryIndex": index(first_kept.0),
        "firstKeptEntryId": first_kept.1,
        "turnStartIndex": index(turn_start.0),
        "turnStartEntryId": turn_start.1,
        "isSplitTurn": is_split_turn,
    })
}

/// Pi 0.58.3: `estimateContextTokens` over the context, `findCutPoint` over
/// the path after the last compaction, `prepareCompaction`.
fn decide_0_58<'a>(
    ctx: &Context<'a>,
    path: &[&'a Entry],
    settings: &Settings,
    counter: &dyn TokenCounter,
) -> Decision<'a> {
    let start = last_compaction(path).map_or(0, |p| p + 1);
    let cut_point = (!path.is_empty() && start < path.len()).then(|| {
        let c = find_cut_point(path, start, path.len(), settings.keep_recent_tokens, counter);
        let id_at = |i: usize| path.get(i).and_then(|e| e.id.clone()).map_or(Value::Null, Value::from);
        cut_point_json(
            Some(start),
            path.len(),
            (Some(c.first_kept), id_at(c.first_kept)),
            (c.turn_start, c.turn_start.map_or(Value::Null, id_at)),
            c.is_split_turn,
        )
    });
    Decision {
        context_message_count: ctx.messages.len(),
        estimate: estimate_context(&ctx.messages, counter),
        cut_point,
        prepared: if path.is_empty() {
            Err(NoPreparation::EmptyPath)
        } else {
            prepare(path, settings, counter)
        },
    }
}

/// Pi 1.6.0: `estimateProjectedContextTokens`, `findProjectedCutPoint` over
/// the projection window (positions mapped back to the path), and
/// `prepareCompaction` over the same projection.
fn decide_1_6<'a>(
    leaf_path: &[&'a Entry],
    path: &[&'a Entry],
    settings: &Settings,
    counter: &dyn TokenCounter,
) -> Decision<'a> {
    let context = projection::project(leaf_path);
    let estimate = projected::estimate_projected(&context, path, counter);
    let context_message_count = projection::messages(&context).count();
    // The path is the leaf's path unless the leaf has no id (then it is empty).
    let owned;
    let window: &[projection::Projected<'a>] = if path.len() == leaf_path.len() {
        &context
    } else {
        owned = projection::project(path);
        &owned
    };
    let (_, start) = projected::window(window);
    let last_is_compaction = path.last().is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_)));
    let cut_point = (!path.is_empty() && !last_is_compaction && start < window.len()).then(|| {
        let c = projected::find_cut_point(window, start, window.len(), settings.keep_recent_tokens, counter);
        let index = projected::PathIndex::new(path);
        let at = |i: usize| {
            let entry = window[i].entry;
            (index.of(entry), entry.id.clone().map_or(Value::Null, Value::from))
        };
        let turn = c.turn_start.map_or((None, Value::Null), at);
        cut_point_json(index.of(window[start].entry), path.len(), at(c.first_kept), turn, c.is_split_turn)
    });
    let prepared = if path.is_empty() {
        Err(NoPreparation::EmptyPath)
    } else {
        projected::prepare_projected(path, window, settings, counter)
    };
    Decision { context_message_count, estimate, cut_point, prepared }
}

/// The `cut` document of the oracle (`oracle/pi` or `oracle/pi-1.6`, by `options.rules`).
pub fn cut_doc(
    transcript: &Transcript,
    leaf: Leaf<'_>,
    options: &CutOptions,
    counter: &dyn TokenCounter,
) -> Result<Value, ContextError> {
    let rules = options.rules;
    let tree = transcript.tree();
    let index = resolve_leaf(transcript, &tree, leaf)?;
    // The 1.6 context comes from the projection below; build only the path then.
    let ctx = build_with(transcript, &tree, index, PiRules::V0_58)?;
    let leaf_path: Vec<&Entry> = ctx.path.iter().map(|&i| &transcript.entries[i]).collect();
    // Pi's getBranch() walks from the leaf id; a leaf without an id has no path.
    let has_id = index.is_some_and(|i| transcript.entries[i].id.as_deref().is_some_and(|id| !id.is_empty()));
    let path: Vec<&Entry> = if has_id { leaf_path.clone() } else { Vec::new() };
    let settings = &options.settings;
    let decision = match rules {
        PiRules::V0_58 => decide_0_58(&ctx, &path, settings, counter),
        PiRules::V1_6 => decide_1_6(&leaf_path, &path, settings, counter),
    };
    let estimate = decision.estimate;
    let prepared = decision.prepared;
    let (preparation, reason) = match &prepared {
        Err(why) => (Value::Null, Value::from(why.reason())),
        Ok(p) => {
            let (read, modified) = p.file_ops.lists();
            let previous = p.previous_summary.map(|e| e.field_value("summary").unwrap_or(Value::Null));
            let doc = json!({
                "firstKeptEntryId": p.first_kept_entry_id,
                "isSplitTurn": p.cut.is_split_turn,
                "tokensBefore": number(p.tokens_before),
                "previousSummary": previous.unwrap_or(Value::Null),
                "messagesToSummarize": describe(&p.messages_to_summarize, &path, counter, rules),
                "turnPrefixMessages": describe(&p.turn_prefix_messages, &path, counter, rules),
                "fileOps": {
                    "read": js_sorted(&p.file_ops.read),
                    "written": js_sorted(&p.file_ops.written),
                    "edited": js_sorted(&p.file_ops.edited),
                },
                "details": {"readFiles": read, "modifiedFiles": modified},
                "fileOpsSuffix": format_file_operations(&read, &modified),
                "serializedHistory": serialized(&p.messages_to_summarize, options.with_text, rules),
                "serializedTurnPrefix": serialized(&p.turn_prefix_messages, options.with_text, rules),
                "settings": settings_json(settings),
            });
            (doc, Value::Null)
        }
    };
    let cut_point = decision.cut_point;
    let matches = match (&cut_point, &prepared) {
        (Some(c), Ok(p)) => Value::from(c["firstKeptEntryId"] == p.first_kept_entry_id.as_str()),
        _ => Value::Null,
    };
    let mut doc = Map::new();
    insert_opt(&mut doc, "leafId", leaf_id_json(transcript, leaf));
    doc.insert("pathLength".to_owned(), Value::from(path.len()));
    doc.insert("settings".to_owned(), settings_json(settings));
    doc.insert("contextWindow".to_owned(), options.context_window.map_or(Value::Null, Value::from));
    doc.insert("contextMessageCount".to_owned(), Value::from(decision.context_message_count));
    doc.insert("contextTokens".to_owned(), tokens_json(&estimate));
    doc.insert(
        "lastAssistantUsageTokens".to_owned(),
        last_assistant_usage_tokens_with(&path, rules).map_or(Value::Null, number),
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
