//! The compaction decision as Pi makes it: context size, the threshold,
//! valid cut points, turn starts, `findCutPoint` and `prepareCompaction` (no
//! summarising; that is the compaction engine's job).
//!
//! The functions here follow Pi 0.58.3; [`projected`] holds Pi 1.6.0's
//! versions, which work on the session projection, and [`prepare_with`]
//! picks one by [`PiRules`].

pub mod projected;

use std::collections::BTreeSet;

use serde_json::Value;
use sessionlog_events::{Entry, EntryKind, Message, PiRules, Role};
use sessionlog_tokens::{usage_tokens, valid_usage_for, ContextSize, TokenCounter};

use crate::assemble::{message_of, AgentMessage};
use crate::llm::{convert_to_llm_with, serialize_conversation_with};

/// Pi's compaction settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Automatic compaction on or off.
    pub enabled: bool,
    /// Head-room kept free for the reply.
    pub reserve_tokens: u64,
    /// Recent conversation kept verbatim, in tokens.
    pub keep_recent_tokens: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { enabled: true, reserve_tokens: 16_384, keep_recent_tokens: 20_000 }
    }
}

/// `estimateContextTokens`: last valid usage plus estimates after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextTokens {
    /// `usage_tokens + trailing_tokens` (NaN when the usage record is incomplete).
    pub tokens: f64,
    /// Context size the last valid usage reports (0 without one).
    pub usage_tokens: f64,
    /// Estimated tokens of the messages after it (all messages without one).
    pub trailing_tokens: u64,
    /// Index of the message with that usage.
    pub last_usage_index: Option<usize>,
}

/// Pi's `estimateContextTokens` over context messages (the [`ContextSize`] fold).
pub fn estimate_context(messages: &[AgentMessage<'_>], counter: &dyn TokenCounter) -> ContextTokens {
    let size = ContextSize::of(PiRules::V0_58, messages, |m| Some(&*m.message), counter);
    ContextTokens {
        tokens: size.tokens(),
        usage_tokens: size.usage_tokens(),
        trailing_tokens: size.trailing_tokens(),
        last_usage_index: size.last_usage().map(|r| r.index),
    }
}

/// `shouldCompact`: enabled and the context is strictly above window − reserve.
pub fn should_compact(context_tokens: f64, context_window: u64, settings: &Settings) -> bool {
    settings.enabled && context_tokens > context_window as f64 - settings.reserve_tokens as f64
}

/// `getLastAssistantUsage` over path entries, as a context size.
pub fn last_assistant_usage_tokens(path: &[&Entry]) -> Option<f64> {
    last_assistant_usage_tokens_with(path, PiRules::V0_58)
}

/// `getLastAssistantUsage` of the given Pi release (1.6 skips zero usage).
pub fn last_assistant_usage_tokens_with(path: &[&Entry], rules: PiRules) -> Option<f64> {
    path.iter().rev().find_map(|e| e.message().and_then(|m| valid_usage_for(m, rules))).map(usage_tokens)
}

fn role_of(entry: &Entry) -> Option<Role> {
    entry.message().map(Message::role)
}

/// Valid cut points in `[start, end)`: user, assistant, bash, custom and
/// summary messages, `branch_summary` and `custom_message` entries; never a
/// tool result.
pub fn valid_cut_points(path: &[&Entry], start: usize, end: usize) -> Vec<usize> {
    (start..end)
        .filter(|&i| match &path[i].kind {
            EntryKind::Message(m) => {
                !matches!(m.role(), Role::ToolResult | Role::HookMessage | Role::System | Role::Other)
            }
            EntryKind::BranchSummary(_) | EntryKind::CustomMessage(_) => true,
            _ => false,
        })
        .collect()
}

/// `findTurnStartIndex`: the nearest turn start at or before `index`, down to `start`.
pub fn turn_start(path: &[&Entry], index: usize, start: usize) -> Option<usize> {
    (start..=index).rev().find(|&i| match &path[i].kind {
        EntryKind::BranchSummary(_) | EntryKind::CustomMessage(_) => true,
        EntryKind::Message(m) => matches!(m.role(), Role::User | Role::BashExecution),
        _ => false,
    })
}

/// The result of `findCutPoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// First path index kept verbatim.
    pub first_kept: usize,
    /// Start of the turn the cut splits, for a split turn.
    pub turn_start: Option<usize>,
    /// True when the cut lands inside a turn.
    pub is_split_turn: bool,
}

/// Pi's `findCutPoint` over path indices `[start, end)`.
pub fn find_cut_point(
    path: &[&Entry],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
    counter: &dyn TokenCounter,
) -> CutPoint {
    let cut_points = valid_cut_points(path, start, end);
    let Some(&first) = cut_points.first() else {
        return CutPoint { first_kept: start, turn_start: None, is_split_turn: false };
    };
    let mut cut = first;
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        let Some(message) = path[i].message() else { continue };
        accumulated += counter.message_tokens(message);
        if accumulated >= keep_recent_tokens {
            if let Some(&c) = cut_points.iter().find(|&&c| c >= i) {
                cut = c;
            }
            break;
        }
    }
    while cut > start {
        match path[cut - 1].kind {
            EntryKind::Compaction(_) | EntryKind::Message(_) => break,
            _ => cut -= 1,
        }
    }
    let is_user = role_of(path[cut]) == Some(Role::User);
    let turn_start = if is_user { None } else { turn_start(path, cut, start) };
    CutPoint { first_kept: cut, turn_start, is_split_turn: !is_user && turn_start.is_some() }
}

/// Files read, written and edited by tool calls (Pi's `FileOperations`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    /// Paths passed to `read`.
    pub read: BTreeSet<String>,
    /// Paths passed to `write`.
    pub written: BTreeSet<String>,
    /// Paths passed to `edit`.
    pub edited: BTreeSet<String>,
}

/// Sorts like JavaScript's default `sort()`: by UTF-16 code units.
pub fn js_sorted<'a>(items: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = items.into_iter().cloned().collect();
    v.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    v
}

impl FileOps {
    /// Adds the file operations of an assistant message's tool calls.
    pub fn add_message(&mut self, message: &Message) {
        self.add_message_with(message, PiRules::V0_58);
    }

    /// Adds the file operations of a message under the given Pi release's
    /// rules: an assistant message's tool calls, and with Pi 1.6 also the
    /// nested calls a tool result records.
    pub fn add_message_with(&mut self, message: &Message, rules: PiRules) {
        if rules.is_v1() && message.role() == Role::ToolResult {
            let calls = message.nested_calls.as_ref().and_then(|n| n.calls.as_deref()).unwrap_or(&[]);
            for call in calls {
                self.add_call(call.name.as_deref(), call.arguments.as_deref());
            }
            return;
        }
        if message.role() != Role::Assistant {
            return;
        }
        for block in message.blocks() {
            if block.kind.as_deref() != Some("toolCall") {
                continue;
            }
            self.add_call(block.name.as_deref(), block.arguments.as_deref());
        }
    }

    /// `addFileOp`: a `read`, `write` or `edit` call with a non-empty string `path`.
    fn add_call(&mut self, name: Option<&str>, args: Option<&serde_json::value::RawValue>) {
        let (Some(name), Some(args)) = (name, args) else { return };
        let set = match name {
            "read" => &mut self.read,
            "write" => &mut self.written,
            "edit" => &mut self.edited,
            _ => return,
        };
        if let Some(path) = path_arg(args.get()).filter(|p| !p.is_empty()) {
            set.insert(path);
        }
    }

    /// `computeFileLists`: (read-only files, modified files), each sorted.
    pub fn lists(&self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        let read = js_sorted(self.read.iter().filter(|f| !modified.contains(f)));
        (read, js_sorted(modified))
    }
}

/// `args.path` of a tool call's arguments when it is a string, read as
/// `serde_json::from_str::<Value>(raw).ok()?.get("path")?.as_str()` reads it
/// (JSON that `Value` refuses has none; of repeated keys the last counts)
/// without building a `Value`: the text is parsed as `Value` parses it (the
/// same deserializer, numbers and strings decoded and checked alike), but
/// only the `path` string is kept. serde_json's private raw-value key makes a
/// `Value` of the text it names; a text that may hold it (its name, or a
/// `\u` escape that may spell it) is read as a `Value`.
fn path_arg(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    if memchr::memmem::find(bytes, b"$serde_json").is_some() || memchr::memmem::find(bytes, b"\\u").is_some()
    {
        let args: Value = serde_json::from_str(raw).ok()?;
        return args.get("path").and_then(Value::as_str).map(str::to_owned);
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    let path = serde::de::DeserializeSeed::deserialize(Find(Want::PathMember), &mut de).ok()?;
    de.end().ok()?;
    path
}

/// What [`Find`] keeps of the value it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Nothing: the value is only walked.
    Nothing,
    /// A string's text.
    Text,
    /// An object's last `path` member, when it is a string.
    PathMember,
}

/// Reads any JSON value as `Value`'s visitor accepts it (strings and numbers
/// decoded, arrays and objects walked), keeping only what it is told to.
#[derive(Clone, Copy)]
struct Find(Want);

impl<'de> serde::de::DeserializeSeed<'de> for Find {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Find {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<String>, E> {
        Ok((self.0 == Want::Text).then(|| v.to_owned()))
    }
    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        while seq.next_element_seed(Find(Want::Nothing))?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut path = None;
        while let Some(IsPath(is_path)) = map.next_key::<IsPath>()? {
            if is_path && self.0 == Want::PathMember {
                path = map.next_value_seed(Find(Want::Text))?;
            } else {
                map.next_value_seed(Find(Want::Nothing))?;
            }
        }
        Ok(path)
    }
}

/// Whether an object's key is `path` (decoded, not copied).
struct IsPath(bool);

impl<'de> serde::Deserialize<'de> for IsPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<IsPath, D::Error> {
        d.deserialize_str(IsPathVisitor)
    }
}

/// Visits a key: whether it is `path`.
struct IsPathVisitor;

impl<'de> serde::de::Visitor<'de> for IsPathVisitor {
    type Value = IsPath;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> Result<IsPath, E> {
        Ok(IsPath(v == "path"))
    }
}

/// `formatFileOperations`: the text appended to a summary.
pub fn format_file_operations(read: &[String], modified: &[String]) -> String {
    let mut sections = Vec::new();
    if !read.is_empty() {
        sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
    }
    if !modified.is_empty() {
        sections.push(format!("<modified-files>\n{}\n</modified-files>", modified.join("\n")));
    }
    if sections.is_empty() {
        String::new()
    } else {
        format!("\n\n{}", sections.join("\n\n"))
    }
}

/// What `prepareCompaction` decides.
#[derive(Debug, Clone)]
pub struct Preparation<'a> {
    /// The cut.
    pub cut: CutPoint,
    /// Id of the first kept entry.
    pub first_kept_entry_id: String,
    /// Context tokens before compacting (from the previous compaction on).
    pub tokens_before: f64,
    /// The previous compaction's summary, if any.
    pub previous_summary: Option<&'a Entry>,
    /// Messages to summarise.
    pub messages_to_summarize: Vec<AgentMessage<'a>>,
    /// The split turn's prefix.
    pub turn_prefix_messages: Vec<AgentMessage<'a>>,
    /// File operations, seeded from the previous compaction.
    pub file_ops: FileOps,
}

/// Why there is no preparation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPreparation {
    /// The path is empty.
    EmptyPath,
    /// The last entry on the path is a compaction ("Already compacted").
    LastIsCompaction,
    /// The first kept entry has no id.
    FirstKeptHasNoId,
    /// Pi 1.6: the cut leaves nothing to summarise (no message before it).
    NothingToSummarize,
}

impl NoPreparation {
    /// The oracle's wording.
    pub fn reason(self) -> &'static str {
        match self {
            NoPreparation::EmptyPath => "empty path",
            NoPreparation::LastIsCompaction => "last entry on path is a compaction",
            NoPreparation::FirstKeptHasNoId => "first kept entry has no id",
            NoPreparation::NothingToSummarize => "nothing to summarize",
        }
    }
}

/// Index of the last compaction on the path.
pub fn last_compaction(path: &[&Entry]) -> Option<usize> {
    path.iter().rposition(|e| matches!(e.kind, EntryKind::Compaction(_)))
}

/// `prepareCompaction` of the given Pi release over a root→leaf path.
pub fn prepare_with<'a>(
    path: &[&'a Entry],
    settings: &Settings,
    counter: &dyn TokenCounter,
    rules: PiRules,
) -> Result<Preparation<'a>, NoPreparation> {
    match rules {
        PiRules::V0_58 => prepare(path, settings, counter),
        PiRules::V1_6 => projected::prepare(path, settings, counter),
    }
}

/// Pi 0.58.3's `prepareCompaction` over a root→leaf path.
pub fn prepare<'a>(
    path: &[&'a Entry],
    settings: &Settings,
    counter: &dyn TokenCounter,
) -> Result<Preparation<'a>, NoPreparation> {
    if path.last().is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_))) {
        return Err(NoPreparation::LastIsCompaction);
    }
    let prev = last_compaction(path);
    let start = prev.map_or(0, |p| p + 1);
    let end = path.len();
    let usage_messages = messages_of(&path[prev.unwrap_or(0)..]);
    let tokens_before = estimate_context(&usage_messages, counter).tokens;
    let cut = find_cut_point(path, start, end, settings.keep_recent_tokens, counter);
    let Some(first_kept) = path.get(cut.first_kept) else {
        return Err(if path.is_empty() { NoPreparation::EmptyPath } else { NoPreparation::FirstKeptHasNoId });
    };
    let Some(first_kept_entry_id) = first_kept.id.clone().filter(|id| !id.is_empty()) else {
        return Err(NoPreparation::FirstKeptHasNoId);
    };
    let history_end =
        if cut.is_split_turn { cut.turn_start.unwrap_or(cut.first_kept) } else { cut.first_kept };
    let messages = |range: std::ops::Range<usize>| messages_of(&path[range]);
    let messages_to_summarize = messages(start..history_end.max(start));
    let turn_prefix_messages = match (cut.is_split_turn, cut.turn_start) {
        (true, Some(ts)) => messages(ts..cut.first_kept),
        _ => Vec::new(),
    };
    let previous = prev.map(|p| path[p]);
    let mut file_ops = FileOps::default();
    if let Some(EntryKind::Compaction(c)) = previous.map(|e| &e.kind) {
        if c.from_hook != Some(true) {
            // Only the `details` field is parsed, not the whole entry.
            seed_from_details(
                &mut file_ops,
                previous.and_then(|e| e.field_members("details", DETAILS_FILES)).as_ref(),
            );
        }
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(&m.message);
    }
    Ok(Preparation {
        cut,
        first_kept_entry_id,
        tokens_before,
        previous_summary: previous,
        messages_to_summarize,
        turn_prefix_messages,
        file_ops,
    })
}

/// The context messages of `entries` ([`message_of`] each), in a vector
/// sized for all of them at once (a message is hundreds of bytes, and a
/// vector grown by doubling copies them again at each step).
fn messages_of<'a>(entries: &[&'a Entry]) -> Vec<AgentMessage<'a>> {
    let mut out = Vec::with_capacity(entries.len());
    out.extend(entries.iter().filter_map(|e| message_of(e)));
    out
}

/// The members of a compaction's `details` that [`seed_from_details`] reads
/// (the rest, such as long identifier lists, is not built).
pub(crate) const DETAILS_FILES: &[&str] = &["readFiles", "modifiedFiles"];

/// Seeds `ops` with the file lists of a compaction's `details` (its top-level field).
pub(crate) fn seed_from_details(ops: &mut FileOps, details: Option<&Value>) {
    let Some(details) = details.filter(|d| truthy(d)) else { return };
    let strings = |key: &str| -> Vec<String> {
        details
            .get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(js_string).collect())
            .unwrap_or_default()
    };
    ops.read.extend(strings("readFiles"));
    ops.edited.extend(strings("modifiedFiles"));
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `serializeConversation(convertToLlm(messages))` (Pi 0.58).
pub fn serialized_history(messages: &[AgentMessage<'_>]) -> String {
    serialized_history_with(messages, PiRules::V0_58)
}

/// `serializeConversation(convertToLlm(messages))` of the given Pi release.
pub fn serialized_history_with(messages: &[AgentMessage<'_>], rules: PiRules) -> String {
    serialize_conversation_with(&convert_to_llm_with(messages, rules), rules)
}

#[cfg(test)]
mod tests {
    /// [`path_arg`] against `Value`'s reading over arguments of every
    /// shape: objects with `path` (escaped or not) repeated or not, of every
    /// type, nested, numbers out of `f64`'s range, lone surrogates, texts cut
    /// short or with a byte changed, and the raw-value key.
    mod path_arg_law {
        use proptest::prelude::*;

        use super::super::path_arg;

        fn by_value(raw: &str) -> Option<String> {
            let args: serde_json::Value = serde_json::from_str(raw).ok()?;
            args.get("path").and_then(serde_json::Value::as_str).map(str::to_owned)
        }

        fn leaf() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                r#""src/a.rs""#,
                r#""""#,
                r#""a\"b\\c\n\u00e9""#,
                r#""\ud800""#,
                r#""\ud83d\ude80""#,
                "1",
                "-0",
                "1e400",
                "-1e400",
                "1.5e-3",
                "18446744073709551616",
                "true",
                "null",
                "[]",
                "{}",
                r#""\u0024serde_json::private::RawValue""#,
                r#""é🚀""#,
                "01",
                "1.",
                "\"\t\"",
            ])
            .prop_map(str::to_owned)
        }

        fn key() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                r#""path""#,
                r#""pat\u0068""#,
                r#""paths""#,
                r#""Path""#,
                r#""x""#,
                r#""""#,
                r#""$serde_json::private::RawValue""#,
                r#""pa\th""#,
            ])
            .prop_map(str::to_owned)
        }

        fn value() -> impl Strategy<Value = String> {
            leaf().prop_recursive(3, 24, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                    prop::collection::vec((key(), inner), 0..5).prop_map(|m| {
                        let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                        format!("{{{}}}", members.join(","))
                    }),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn path_arg_reads_as_value_does(
                text in value(),
                cut in any::<prop::sample::Index>(),
                change in any::<prop::sample::Index>(),
                byte in prop::sample::select(vec![b' ', b'"', b',', b'}', b']', b'\\', b'x', b'1']),
                how in 0u8..4,
            ) {
                let mut bytes = text.clone().into_bytes();
                match how {
                    1 => bytes.truncate(cut.index(bytes.len() + 1)),
                    2 if !bytes.is_empty() => {
                        let at = change.index(bytes.len());
                        if bytes[at].is_ascii() {
                            bytes[at] = byte;
                        }
                    }
                    3 => bytes.extend_from_slice(b" \n"),
                    _ => {}
                }
                // A cut inside a multi-byte character is no text.
                let Ok(raw) = String::from_utf8(bytes) else { return Ok(()) };
                prop_assert_eq!(path_arg(&raw), by_value(&raw), "{}", raw);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            /// Objects that hold a string `path` among other members, so
            /// what the other members hold (numbers `Value` refuses, lone
            /// surrogates, nesting) decides the answer.
            #[test]
            fn path_arg_reads_objects_with_a_path_as_value_does(
                members in prop::collection::vec((key(), value()), 0..5),
                at in any::<prop::sample::Index>(),
            ) {
                let mut members: Vec<String> = members.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                members.insert(at.index(members.len() + 1), r#""path":"src/a.rs""#.to_owned());
                let raw = format!("{{{}}}", members.join(","));
                prop_assert_eq!(path_arg(&raw), by_value(&raw), "{}", raw);
            }
        }

        #[test]
        fn path_arg_by_hand() {
            let cases = [
                (r#"{"path":"src/a.rs"}"#, Some("src/a.rs")),
                (r#"{"path":"a","path":"b"}"#, Some("b")),
                (r#"{"path":"a","path":1}"#, None),
                (r#"{"path":1,"path":"b"}"#, Some("b")),
                (r#"{"pat\u0068":"a"}"#, Some("a")),
                (r#"{"path":"a","x":1e400}"#, None),
                (r#"{"path":"a","x":[1,{"y":-1e400}]}"#, None),
                (r#"{"path":"a","x":"\ud800"}"#, None),
                (r#"{"path":"a","x":"b	c"}"#, None),
                (r#"{"path":"a"} x"#, None),
                (r#"{"path":"a",}"#, None),
                (r#"{"x":{"path":"a"}}"#, None),
                (r#"["path","a"]"#, None),
                (r#""path""#, None),
            ];
            for (raw, want) in cases {
                assert_eq!(path_arg(raw).as_deref(), want, "{raw}");
                assert_eq!(by_value(raw).as_deref(), want, "{raw}");
            }
        }
    }

    use super::*;

    /// [`messages_of`] is `message_of` over the entries, in order, whatever
    /// kinds they are: messages, a compaction, a branch summary and a custom
    /// message make one, a model change and a custom entry none.
    #[test]
    fn messages_of_is_message_of_each_entry() {
        let lines = [
            r#"{"type":"model_change","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"x"}"#,
            r#"{"type":"message","id":"u1","parentId":"m1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"compaction","id":"c1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","summary":"s","firstKeptEntryId":"u1","tokensBefore":10}"#,
            r#"{"type":"custom","id":"x1","parentId":"c1","timestamp":"2026-01-01T00:00:03.000Z","customType":"t"}"#,
            r#"{"type":"branch_summary","id":"b1","parentId":"x1","timestamp":"2026-01-01T00:00:04.000Z","fromId":"u1","summary":"b"}"#,
            r#"{"type":"custom_message","id":"k1","parentId":"b1","timestamp":"2026-01-01T00:00:05.000Z","customType":"t","content":"c","display":true}"#,
            r#"{"type":"message","id":"a1","parentId":"k1","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}"#,
        ];
        let entries: Vec<Entry> = lines.iter().map(|l| Entry::parse(l).unwrap()).collect();
        let path: Vec<&Entry> = entries.iter().collect();
        let seen = |ms: &[AgentMessage<'_>]| -> Vec<(Option<String>, String)> {
            ms.iter().map(|m| (m.entry.id.clone(), format!("{:?} {:?}", m.source, m.message))).collect()
        };
        for from in 0..path.len() {
            let made = messages_of(&path[from..]);
            let expected: Vec<AgentMessage<'_>> = path[from..].iter().filter_map(|e| message_of(e)).collect();
            assert_eq!(seen(&made), seen(&expected), "from {from}");
        }
        let ids: Vec<_> = messages_of(&path).iter().map(|m| m.entry.id.clone().unwrap()).collect();
        assert_eq!(ids, ["u1", "c1", "b1", "k1", "a1"]);
    }
}
