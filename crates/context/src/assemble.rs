//! Pi's `buildSessionContext`: the messages a model sees for a leaf.
//!
//! [`build`] follows Pi 0.58.3; [`build_with`] takes the [`PiRules`] to
//! follow (Pi 1.6.0 builds the context from its projection, see
//! [`crate::projection`]).

use std::borrow::Cow;

use serde_json::{Map, Value};
use sessionlog_events::json::value_at;
use sessionlog_events::{CycleError, Entry, EntryKind, Message, PiRules, Role, Transcript, Tree};

use crate::time::js_date_ms;

/// Which leaf to build the context for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leaf<'a> {
    /// Pi's own leaf: the last entry in file order.
    #[default]
    Default,
    /// Before the first entry (`resetLeaf()`): an empty context.
    Null,
    /// A given entry id (must exist; see [`resolve_leaf`]).
    Id(&'a str),
}

/// Where a context message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A `message` entry, verbatim.
    Stored,
    /// Synthesised from a `compaction` entry.
    CompactionSummary,
    /// Synthesised from a `branch_summary` entry.
    BranchSummary,
    /// Synthesised from a `custom_message` entry.
    Custom,
    /// Pi 1.x: a `compaction` entry's `systemMessage`, emitted before its summary.
    SystemSnapshot,
}

/// One message of the context, with the entry that produced it.
#[derive(Debug, Clone)]
pub struct AgentMessage<'a> {
    /// The entry it comes from.
    pub entry: &'a Entry,
    /// How it was produced.
    pub source: Source,
    /// Its typed view (the stored message, or the synthesised one).
    pub message: Cow<'a, Message>,
    /// Pi 1.x: the message as projected when it differs from what the entry
    /// holds (a context edit replaced its content, or missing content was
    /// filled in); `None` for a message taken as the entry has it.
    pub projected: Option<Box<Value>>,
}

impl<'a> AgentMessage<'a> {
    /// A message taken from `entry` as it is.
    pub fn new(entry: &'a Entry, source: Source, message: Cow<'a, Message>) -> AgentMessage<'a> {
        AgentMessage { entry, source, message, projected: None }
    }
}

impl AgentMessage<'_> {
    /// The message as JSON, exactly as Pi builds it.
    pub fn to_json(&self) -> Value {
        if let Some(projected) = &self.projected {
            return (**projected).clone();
        }
        let value = || self.entry.to_value();
        match self.source {
            // Only the message is parsed again, not the whole line.
            Source::Stored => self.entry.field_value("message").unwrap_or(Value::Null),
            Source::SystemSnapshot => self.entry.field_value("systemMessage").unwrap_or(Value::Null),
            Source::CompactionSummary => synthesized(
                "compactionSummary",
                &value(),
                &[("summary", "summary"), ("tokensBefore", "tokensBefore")],
            ),
            Source::BranchSummary => {
                synthesized("branchSummary", &value(), &[("summary", "summary"), ("fromId", "fromId")])
            }
            Source::Custom => synthesized(
                "custom",
                &value(),
                &[
                    ("customType", "customType"),
                    ("content", "content"),
                    ("display", "display"),
                    ("details", "details"),
                ],
            ),
        }
    }

    /// The message's `timestamp` as Pi has it (raw for stored messages,
    /// `Date.parse` of the entry time for synthesised ones; NaN prints as null).
    pub fn timestamp_json(&self) -> Option<Value> {
        if let Some(projected) = &self.projected {
            return projected.get("timestamp").cloned();
        }
        match self.source {
            Source::Stored => self.entry.field_value("message").and_then(|m| m.get("timestamp").cloned()),
            Source::SystemSnapshot => {
                self.entry.field_value("systemMessage").and_then(|m| m.get("timestamp").cloned())
            }
            _ => Some(number(entry_ms(self.entry))),
        }
    }
}

/// A JavaScript number as JSON (NaN and infinities print as null).
pub use sessionlog_events::json::js_number as number;

/// `new Date(entry.timestamp).getTime()`.
pub fn entry_ms(entry: &Entry) -> f64 {
    match &entry.timestamp {
        Some(text) => js_date_ms(&Value::from(text.as_str())),
        None => js_date_ms(entry.to_value().get("timestamp").unwrap_or(&Value::Null)),
    }
}

fn synthesized(role: &str, entry: &Value, fields: &[(&str, &str)]) -> Value {
    let mut out = Map::new();
    out.insert("role".to_owned(), Value::from(role));
    for (to, from) in fields {
        // `undefined` fields are left out, as JSON.stringify does.
        if let Some(v) = entry.get(*from) {
            out.insert((*to).to_owned(), v.clone());
        }
    }
    let ms = entry.get("timestamp").map_or(f64::NAN, js_date_ms);
    out.insert("timestamp".to_owned(), number(ms));
    Value::Object(out)
}

/// The message an entry contributes to the context (`None` for settings,
/// labels, custom state, compactions and empty branch summaries).
pub fn context_message(entry: &Entry) -> Option<AgentMessage<'_>> {
    emit(entry, false)
}

/// The message an entry contributes when Pi maps entries to messages in
/// compaction (`getMessageFromEntry`): like context emission, except that a
/// `branch_summary` always yields one and a `compaction` yields its summary.
pub fn message_of(entry: &Entry) -> Option<AgentMessage<'_>> {
    emit(entry, true)
}

fn emit(entry: &Entry, for_compaction: bool) -> Option<AgentMessage<'_>> {
    let ms = || {
        let ms = entry_ms(entry);
        (!ms.is_nan()).then_some(ms)
    };
    let (source, message) = match &entry.kind {
        EntryKind::Message(m) => (Source::Stored, Cow::Borrowed(&**m)),
        EntryKind::CustomMessage(c) => (
            Source::Custom,
            Cow::Owned(Message {
                role: Some("custom".into()),
                content: c.content.clone(),
                custom_type: c.custom_type.clone(),
                display: c.display,
                timestamp: ms(),
                ..Message::default()
            }),
        ),
        EntryKind::BranchSummary(b)
            if for_compaction || b.summary.as_deref().is_some_and(|s| !s.is_empty()) =>
        {
            (
                Source::BranchSummary,
                Cow::Owned(Message {
                    role: Some("branchSummary".into()),
                    summary: b.summary.clone(),
                    from_id: b.from_id.clone(),
                    timestamp: ms(),
                    ..Message::default()
                }),
            )
        }
        EntryKind::Compaction(c) if for_compaction => {
            (Source::CompactionSummary, Cow::Owned(compaction_summary(c, ms())))
        }
        _ => return None,
    };
    Some(AgentMessage::new(entry, source, message))
}

/// The synthesised `compactionSummary` message of a compaction entry.
pub(crate) fn compaction_summary_message(entry: &Entry) -> Option<AgentMessage<'_>> {
    let EntryKind::Compaction(c) = &entry.kind else { return None };
    let ms = Some(entry_ms(entry)).filter(|m| !m.is_nan());
    Some(AgentMessage::new(entry, Source::CompactionSummary, Cow::Owned(compaction_summary(c, ms))))
}

fn compaction_summary(c: &sessionlog_events::Compaction, ms: Option<f64>) -> Message {
    Message {
        role: Some("compactionSummary".into()),
        summary: c.summary.clone(),
        tokens_before: c.tokens_before,
        timestamp: ms,
        ..Message::default()
    }
}

/// The context for one leaf: messages plus the model and thinking level in force.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// Entry indices (into `Transcript::entries`) of the root→leaf path.
    pub path: Vec<usize>,
    /// The last `thinking_level_change` on the path (none: `"off"`).
    pub thinking_level: Option<&'a Entry>,
    /// The last `model_change` entry or assistant message on the path.
    pub model: Option<&'a Entry>,
    /// The messages in order.
    pub messages: Vec<AgentMessage<'a>>,
}

impl Context<'_> {
    /// `thinkingLevel` as Pi reports it (`None` when the entry has no such key).
    pub fn thinking_level_json(&self) -> Option<Value> {
        match self.thinking_level {
            None => Some(Value::from("off")),
            Some(entry) => entry.to_value().get("thinkingLevel").cloned(),
        }
    }

    /// `model` as Pi reports it: `{provider, modelId}` or `null`.
    pub fn model_json(&self) -> Value {
        model_json(self.model)
    }
}

/// `model` as Pi reports it for the model entry of a path (see
/// [`Context::model`]): `{provider, modelId}` or `null`.
pub fn model_json(entry: Option<&Entry>) -> Value {
    let Some(entry) = entry else { return Value::Null };
    // Only these two values are parsed: a lone surrogate elsewhere in the line
    // (which `JSON.parse` takes and a `Value` cannot hold) does not matter.
    let paths: [&[&str]; 2] = match entry.kind {
        EntryKind::Message(_) => [&["message", "provider"], &["message", "model"]],
        _ => [&["provider"], &["modelId"]],
    };
    let mut out = Map::new();
    for (key, path) in ["provider", "modelId"].into_iter().zip(paths) {
        if let Some(value) = value_at(entry.raw(), path) {
            out.insert(key.to_owned(), value);
        }
    }
    Value::Object(out)
}

/// Errors from building a context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// `--leaf` names no entry.
    #[error("entry {0} not found")]
    UnknownLeaf(String),
    /// The `parentId` chain loops (Pi would hang).
    #[error(transparent)]
    Cycle(#[from] CycleError),
}

/// The entry index a leaf choice resolves to (`None` = empty context).
pub fn resolve_leaf(
    transcript: &Transcript,
    tree: &Tree<'_>,
    leaf: Leaf<'_>,
) -> Result<Option<usize>, ContextError> {
    match leaf {
        Leaf::Null => Ok(None),
        Leaf::Id(id) => tree.index_of(id).map(Some).ok_or_else(|| ContextError::UnknownLeaf(id.to_owned())),
        Leaf::Default => Ok(transcript.default_leaf_index()),
    }
}

/// Builds the context for `leaf` (an index from [`resolve_leaf`]) as Pi 0.58.3 does.
pub fn build<'a>(
    transcript: &'a Transcript,
    tree: &Tree<'a>,
    leaf: Option<usize>,
) -> Result<Context<'a>, CycleError> {
    build_with(transcript, tree, leaf, PiRules::V0_58)
}

/// Builds the context for `leaf` under the given Pi release's rules.
pub fn build_with<'a>(
    transcript: &'a Transcript,
    tree: &Tree<'a>,
    leaf: Option<usize>,
    rules: PiRules,
) -> Result<Context<'a>, CycleError> {
    let entries = &transcript.entries;
    let mut ctx = Context { path: Vec::new(), thinking_level: None, model: None, messages: Vec::new() };
    let Some(leaf) = leaf else { return Ok(ctx) };
    ctx.path = tree.path(leaf)?;
    let mut compaction: Option<&Entry> = None;
    for &i in &ctx.path {
        let entry = &entries[i];
        match &entry.kind {
            EntryKind::ThinkingLevelChange { .. } => ctx.thinking_level = Some(entry),
            EntryKind::ModelChange { .. } => ctx.model = Some(entry),
            EntryKind::Message(m) if m.role() == Role::Assistant => ctx.model = Some(entry),
            EntryKind::Compaction(_) => compaction = Some(entry),
            _ => {}
        }
    }
    let path: Vec<&Entry> = ctx.path.iter().map(|&i| &entries[i]).collect();
    if rules.is_v1() {
        ctx.messages = crate::projection::project(&path).into_iter().flat_map(|p| p.messages).collect();
        return Ok(ctx);
    }
    let Some(c) = compaction else {
        ctx.messages = path.iter().filter_map(|e| emit(e, false)).collect();
        return Ok(ctx);
    };
    ctx.messages.extend(compaction_summary_message(c));
    // Pi finds the compaction by id: the first compaction on the path with it.
    let at = path
        .iter()
        .position(|e| matches!(e.kind, EntryKind::Compaction(_)) && e.id == c.id)
        .unwrap_or(path.len());
    let EntryKind::Compaction(fields) = &c.kind else { unreachable!("matched above") };
    let first_kept = fields.first_kept_entry_id.as_deref();
    let mut keeping = false;
    for e in &path[..at] {
        keeping |= e.id.as_deref() == first_kept;
        if keeping {
            ctx.messages.extend(emit(e, false));
        }
    }
    ctx.messages.extend(path.get(at + 1..).unwrap_or(&[]).iter().filter_map(|e| emit(e, false)));
    Ok(ctx)
}
