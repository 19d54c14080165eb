//! The provider-facing form of a context (Pi's `convertToLlm`) and the plain
//! text a summariser reads (`serializeConversation`), under either Pi
//! release's rules: Pi 1.6 passes `system` messages to the provider and
//! leaves thinking out of the serialised history.

use std::borrow::Cow;

use serde_json::{json, Value};
use sessionlog_events::json::{canonicalize_js, js_entries, string_end, to_js_string, value_end};
use sessionlog_events::{Block, Content, Message, PiRules, Role};

use crate::assemble::{AgentMessage, Source};

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
#[cfg(test)]
fn truncate_for_summary(text: &str, max: usize, rules: PiRules) -> String {
    let mut out = String::new();
    push_truncated(&mut out, text, max, rules);
    out
}

/// Appends [`truncate_for_summary`] of `text` to `out`.
fn push_truncated<O: Out>(out: &mut O, text: &str, max: usize, rules: PiRules) {
    // A UTF-16 unit takes at least one UTF-8 byte: a text of at most `max`
    // bytes is whole.
    if text.len() <= max {
        out.push_str(text);
        return;
    }
    if text.as_bytes()[..max].is_ascii() {
        // `max` ASCII characters are `max` units, and a character follows.
        out.push_str(&text[..max]);
    } else if !out.push_utf16_head(text, max, rules) {
        out.push_str(text);
        return;
    }
    let more = usize::try_from(sessionlog_tokens::utf16_len(text)).unwrap_or(usize::MAX) - max;
    out.push_str(&format!("\n\n[... {more} more characters truncated]"));
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

/// Pi 0.58's `serializeConversation` over provider messages.
pub fn serialize_conversation(messages: &[LlmMessage<'_>]) -> String {
    serialize_conversation_with(messages, PiRules::V0_58)
}

/// `serializeConversation` of the given Pi release. Pi 1.6 leaves thinking
/// out, joins assistant text with pi-ai's `contentText`, serialises a tool
/// result given as a plain string, and truncates with `sliceHead`.
///
/// A message passed through unchanged is written from its typed view, which
/// holds every field the text reads; the JSON of the message is built (its
/// line parsed again) only for converted or projected messages, for a
/// text block whose `text` is not a string (the typed view cannot tell
/// `null` from a number there), and for a line whose JSON may not read back
/// as a `serde_json::Value` (see [`reads_back`]).
pub fn serialize_conversation_with(messages: &[LlmMessage<'_>], rules: PiRules) -> String {
    let mut out = String::new();
    write_conversation(&mut out, messages, rules);
    out
}

/// The characters of Pi 0.58's `serializeConversation` text, counted
/// without writing it.
pub fn conversation_chars(messages: &[LlmMessage<'_>]) -> usize {
    conversation_chars_with(messages, PiRules::V0_58)
}

/// The characters of [`serialize_conversation_with`]'s text, counted as it
/// would be written, without keeping it.
pub fn conversation_chars_with(messages: &[LlmMessage<'_>], rules: PiRules) -> usize {
    let mut out = CharCount::default();
    write_conversation(&mut out, messages, rules);
    out.chars
}

fn write_conversation<O: Out>(out: &mut O, messages: &[LlmMessage<'_>], rules: PiRules) {
    for m in messages {
        let written = m.typed().is_some_and(|typed| write_message(out, typed, rules));
        if !written {
            write_message(out, &m.to_json(), rules);
        }
    }
}

/// Where the serialised conversation goes: its text, or the count of its
/// characters alone.
trait Out {
    /// Appends a string.
    fn push_str(&mut self, s: &str);
    /// Appends a character.
    fn push(&mut self, c: char);
    /// Nothing has been written.
    fn is_empty(&self) -> bool;
    /// Appends the first `max` UTF-16 units of `text` as the rules cut them
    /// (a surrogate pair cut in half: U+FFFD under Pi 0.58, left out under
    /// 1.6); `false`, writing nothing, when the text is not longer.
    fn push_utf16_head(&mut self, text: &str, max: usize, rules: PiRules) -> bool;
    /// Appends `k=JSON.stringify(v), …` of a tool call's raw JSON arguments
    /// (read as `JSON.parse` reads them); nothing unless they read as an
    /// object. `canonical`: `raw` is known to be its own `JSON.stringify` text.
    fn push_arguments(&mut self, raw: &str, canonical: bool);
}

impl Out for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
    fn is_empty(&self) -> bool {
        String::is_empty(self)
    }
    fn push_utf16_head(&mut self, text: &str, max: usize, rules: PiRules) -> bool {
        let Some(mut head) = sessionlog_tokens::utf16_prefix(text, max) else { return false };
        if rules.is_v1() && head.ends_with('\u{FFFD}') && !text.starts_with(&head) {
            head.pop();
        }
        self.push_str(&head);
        true
    }
    fn push_arguments(&mut self, raw: &str, _canonical: bool) {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw) {
            write_arguments(self, &map);
        }
    }
}

/// Counts the characters written instead of keeping them.
#[derive(Default)]
struct CharCount {
    chars: usize,
}

impl Out for CharCount {
    fn push_str(&mut self, s: &str) {
        self.chars += s.chars().count();
    }
    fn push(&mut self, _: char) {
        self.chars += 1;
    }
    fn is_empty(&self) -> bool {
        self.chars == 0
    }
    fn push_utf16_head(&mut self, text: &str, max: usize, rules: PiRules) -> bool {
        // The characters of `utf16_prefix`, counted as it takes them.
        let (mut units, mut chars) = (0, 0);
        for c in text.chars() {
            let n = c.len_utf16();
            if units + n > max {
                // A pair cut in half is U+FFFD, which Pi 1.6 leaves out
                // (the text never holds it there: a whole pair does).
                self.chars += chars + usize::from(units < max && !rules.is_v1());
                return true;
            }
            units += n;
            chars += 1;
        }
        false
    }
    fn push_arguments(&mut self, raw: &str, canonical: bool) {
        self.chars +=
            if canonical { stringified_arguments_chars(raw.as_bytes()) } else { arguments_chars(raw) };
    }
}

/// The characters [`write_arguments`] writes for a tool call's raw JSON
/// arguments, counted from their `JSON.stringify` text (the fast copy of
/// `canonicalize_js`, no value built): `{"k":v,…}` is `k=v, …` with the
/// braces gone, each key's quotes and escapes gone and each `,` followed by
/// a space. 0 when the text is not JSON or not an object, as written.
fn arguments_chars(raw: &str) -> usize {
    let mut text = Vec::with_capacity(raw.len());
    if canonicalize_js(raw, &mut text).is_err() {
        return 0;
    }
    stringified_arguments_chars(&text)
}

/// [`arguments_chars`] from the arguments' `JSON.stringify` text `text`.
fn stringified_arguments_chars(text: &[u8]) -> usize {
    if text.first() != Some(&b'{') {
        return 0;
    }
    // UTF-8: characters are the bytes that start one.
    let chars = text.iter().filter(|&&b| (b as i8) >= -0x40).count();
    if text.len() == 2 {
        return 0;
    }
    let (mut i, mut entries, mut key_extra) = (1, 0usize, 0usize);
    // Compact text: `"key":value` pairs separated by `,`, no whitespace.
    while text.get(i) == Some(&b'"') {
        let Some(end) = string_end(text, i) else { break };
        let key = &text[i..end];
        key_extra += if key.contains(&b'\\') {
            // Decoded as JSON.parse reads it (escapes are rare in keys).
            let quoted = std::str::from_utf8(key).unwrap_or_default();
            let decoded = serde_json::from_str::<String>(quoted).map_or(0, |k| k.chars().count());
            quoted.chars().count().saturating_sub(decoded)
        } else {
            2
        };
        entries += 1;
        // Past the `:` and the value, to the `,` or the closing `}`.
        i = value_end(text, end + 1, usize::MAX).unwrap_or(text.len()) + 1;
    }
    // Each entry's key loses its quotes (and escapes), `{` and `}` go, and
    // every separator gains a space.
    (chars - 2 + entries.saturating_sub(1)).saturating_sub(key_extra)
}

impl LlmMessage<'_> {
    /// The typed view of the message when its JSON is exactly what the entry
    /// holds (a stored message or system snapshot, passed through unchanged
    /// and not projected): the two then read the same fields.
    fn typed(&self) -> Option<&Message> {
        if self.built.is_some() || self.from.projected.is_some() {
            return None;
        }
        match (&self.from.source, &self.from.message) {
            // A line the scanner read reads back (it declines the others).
            (Source::Stored | Source::SystemSnapshot, Cow::Borrowed(message))
                if self.from.entry.surely_reads_back() || reads_back(self.from.entry.raw().as_bytes()) =>
            {
                Some(message)
            }
            _ => None,
        }
    }
}

/// True when every value of a JSON line surely parses as a
/// `serde_json::Value`, as the message's JSON is built: a line the typed
/// reader took can still hold, where the typed view skips or keeps the raw
/// text, a number beyond `f64`, an escaped lone surrogate or nesting deeper
/// than serde_json's limit; its message then reads as `null` (nothing is
/// serialised), and the typed path must not write it. Errs towards `false`.
fn reads_back(line: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        match b {
            b'"' => {
                i += 1;
                loop {
                    // Most strings are short keys and words: a word-at-a-time
                    // search first (a vector search costs more to start).
                    let Some(n) = sessionlog_events::json::find_quote_or_backslash(&line[i..]) else {
                        return false;
                    };
                    i += n;
                    if line[i] == b'"' {
                        break;
                    }
                    // `\uD800`–`\uDFFF`: a surrogate half (a pair reads back, but
                    // telling a pair from a lone half is left to the JSON path).
                    if line.get(i + 1) == Some(&b'u')
                        && matches!(line.get(i + 2), Some(b'd' | b'D'))
                        && line
                            .get(i + 3)
                            .is_some_and(|h| matches!(h, b'8' | b'9' | b'a'..=b'f' | b'A'..=b'F'))
                    {
                        return false;
                    }
                    i += 2;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > 100 {
                    return false;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'0'..=b'9' => {
                let digits = line[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                i += digits;
                i += line[i..].iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
                let mut exponent = 0usize;
                if matches!(line.get(i), Some(b'e' | b'E')) {
                    i += 1;
                    let negative = line.get(i) == Some(&b'-');
                    i += usize::from(matches!(line.get(i), Some(b'-' | b'+')));
                    for d in line[i..].iter().take_while(|b| b.is_ascii_digit()) {
                        exponent = exponent.saturating_mul(10).saturating_add(usize::from(d - b'0'));
                        i += 1;
                    }
                    if negative {
                        exponent = 0;
                    }
                }
                // Below 10^300 a number is well inside `f64`.
                if digits.saturating_add(exponent) >= 300 {
                    return false;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Starts a new part of the conversation text: parts are separated by a
/// blank line (none is empty: each opens with its label).
fn part<'o, O: Out>(out: &'o mut O, label: &str) -> &'o mut O {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(label);
    out
}

/// The `text` of a typed content's text blocks joined with `separator`
/// (pi-ai's `contentText`); `None` when a text block's `text` is not a
/// string, which only the JSON tells apart.
fn typed_text<'m>(content: Option<&'m Content>, separator: &str) -> Option<Cow<'m, str>> {
    match content {
        Some(Content::Text(text)) => Some(Cow::Borrowed(text)),
        Some(Content::Blocks(blocks)) => {
            let mut texts = blocks.iter().filter(|b| b.kind.as_deref() == Some("text"));
            let Some(first) = texts.next() else { return Some(Cow::Borrowed("")) };
            let first = first.text.as_deref()?;
            let mut joined: Option<String> = None;
            for block in texts {
                let text = block.text.as_deref()?;
                let joined = joined.get_or_insert_with(|| first.to_owned());
                joined.push_str(separator);
                joined.push_str(text);
            }
            Some(joined.map_or(Cow::Borrowed(first), Cow::Owned))
        }
        None => Some(Cow::Borrowed("")),
    }
}

/// What `serializeConversation` reads of a message: its JSON, or the typed
/// view of a stored message. [`write_message`] writes either.
trait View {
    /// A content block.
    type Block;
    /// The `role` string.
    fn role(&self) -> Option<&str>;
    /// pi-ai's `contentText(content, separator)`; `None` when the view
    /// cannot tell what it prints.
    fn content_text(&self, separator: &str) -> Option<Cow<'_, str>>;
    /// The content is a plain string.
    fn string_content(&self) -> bool;
    /// The content blocks (none unless the content is an array).
    fn blocks(&self) -> &[Self::Block];
    /// A block's `type` string.
    fn kind(block: &Self::Block) -> Option<&str>;
    /// A block's string field `key` (`text`, `thinking`), "" for any other value.
    fn string<'b>(block: &'b Self::Block, key: &str) -> &'b str;
    /// Appends `name(k=JSON.stringify(v), …)` of a tool-call block.
    fn write_call<O: Out>(out: &mut O, block: &Self::Block);
}

impl View for Value {
    type Block = Value;
    fn role(&self) -> Option<&str> {
        self.get("role").and_then(Value::as_str)
    }
    fn content_text(&self, separator: &str) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(content_text(self.get("content"), separator)))
    }
    fn string_content(&self) -> bool {
        self.get("content").is_some_and(Value::is_string)
    }
    fn blocks(&self) -> &[Value] {
        self.get("content").and_then(Value::as_array).map_or(&[], Vec::as_slice)
    }
    fn kind(block: &Value) -> Option<&str> {
        block.get("type").and_then(Value::as_str)
    }
    fn string<'b>(block: &'b Value, key: &str) -> &'b str {
        block.get(key).and_then(Value::as_str).unwrap_or("")
    }
    fn write_call<O: Out>(out: &mut O, block: &Value) {
        out.push_str(Value::string(block, "name"));
        out.push('(');
        if let Some(Value::Object(map)) = block.get("arguments") {
            write_arguments(out, map);
        }
        out.push(')');
    }
}

impl View for Message {
    type Block = Block;
    fn role(&self) -> Option<&str> {
        self.role.as_deref()
    }
    fn content_text(&self, separator: &str) -> Option<Cow<'_, str>> {
        typed_text(self.content.as_ref(), separator)
    }
    fn string_content(&self) -> bool {
        matches!(self.content, Some(Content::Text(_)))
    }
    fn blocks(&self) -> &[Block] {
        Message::blocks(self)
    }
    fn kind(block: &Block) -> Option<&str> {
        block.kind.as_deref()
    }
    fn string<'b>(block: &'b Block, key: &str) -> &'b str {
        match key {
            "text" => block.text.as_deref(),
            "thinking" => block.thinking.as_deref(),
            _ => None,
        }
        .unwrap_or("")
    }
    fn write_call<O: Out>(out: &mut O, block: &Block) {
        write_typed_call(out, block);
    }
}

/// Writes a message's part of the conversation; `false` (nothing written)
/// when the view cannot tell what it prints.
fn write_message<V: View, O: Out>(out: &mut O, m: &V, rules: PiRules) -> bool {
    let of_kind = |kind: &'static str| m.blocks().iter().filter(move |b| V::kind(b) == Some(kind));
    match m.role() {
        Some("user") => {
            let Some(content) = m.content_text("") else { return false };
            if !content.is_empty() {
                part(out, "[User]: ").push_str(&content);
            }
        }
        Some("assistant") if rules.is_v1() => {
            if of_kind("text").next().is_some() {
                let Some(text) = m.content_text("\n") else { return false };
                part(out, "[Assistant]: ").push_str(&text);
            }
            write_calls::<V, O>(out, of_kind("toolCall"));
        }
        Some("assistant") => {
            write_joined(
                out,
                "[Assistant thinking]: ",
                of_kind("thinking").map(|b| V::string(b, "thinking")),
            );
            write_joined(out, "[Assistant]: ", of_kind("text").map(|b| V::string(b, "text")));
            write_calls::<V, O>(out, of_kind("toolCall"));
        }
        // Pi 1.6's `contentText` also reads a plain string; 0.58's only blocks.
        Some("toolResult") if !rules.is_v1() && m.string_content() => {}
        Some("toolResult") => {
            let Some(content) = m.content_text("") else { return false };
            if !content.is_empty() {
                push_truncated(part(out, "[Tool result]: "), &content, TOOL_RESULT_MAX_CHARS, rules);
            }
        }
        _ => {}
    }
    true
}

/// A part of `texts` joined with newlines, when there is at least one.
fn write_joined<'t, O: Out>(out: &mut O, label: &str, mut texts: impl Iterator<Item = &'t str>) {
    let Some(first) = texts.next() else { return };
    part(out, label).push_str(first);
    for text in texts {
        out.push('\n');
        out.push_str(text);
    }
}

/// The `[Assistant tool calls]` part, when there is a call.
fn write_calls<'b, V: View + 'b, O: Out>(out: &mut O, mut calls: impl Iterator<Item = &'b V::Block>) {
    let Some(first) = calls.next() else { return };
    let out = part(out, "[Assistant tool calls]: ");
    V::write_call(out, first);
    for call in calls {
        out.push_str("; ");
        V::write_call(out, call);
    }
}

/// `name(k=JSON.stringify(v), …)` of a typed tool-call block: the arguments'
/// JSON text is read as `JSON.parse` reads it (the last of duplicate keys wins).
fn write_typed_call<O: Out>(out: &mut O, block: &Block) {
    out.push_str(block.name.as_deref().unwrap_or(""));
    out.push('(');
    if let Some(raw) = block.arguments.as_deref() {
        out.push_arguments(raw.get(), block.arguments_canonical);
    }
    out.push(')');
}

/// `k=JSON.stringify(v)` of each argument, in JavaScript's key order, joined with ", ".
fn write_arguments<O: Out>(out: &mut O, map: &serde_json::Map<String, Value>) {
    for (i, (k, v)) in js_entries(map).into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push('=');
        out.push_str(&to_js_string(v).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sessionlog_events::Entry;

    use super::*;
    use crate::assemble::{context_message, message_of};

    /// The serialiser as it was before messages were written from their
    /// typed view: every message's JSON built (its line parsed again), then
    /// read. Kept verbatim as the reference the typed path must equal.
    mod by_value {
        use super::super::{js_number_text, LlmMessage, TOOL_RESULT_MAX_CHARS};
        use serde_json::Value;
        use sessionlog_events::json::{js_entries, to_js_string};
        use sessionlog_events::PiRules;
        use sessionlog_tokens::utf16_len;

        fn truncate_for_summary(text: &str, max: usize, rules: PiRules) -> String {
            let Some(mut head) = sessionlog_tokens::utf16_prefix(text, max) else { return text.to_owned() };
            if rules.is_v1() && head.ends_with('\u{FFFD}') && !text.starts_with(&head) {
                head.pop();
            }
            format!("{head}\n\n[... {} more characters truncated]", utf16_len(text) as usize - max)
        }

        fn content_text(content: Option<&Value>, separator: &str) -> String {
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

        pub(super) fn serialize_conversation_with(messages: &[LlmMessage<'_>], rules: PiRules) -> String {
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
    }

    /// A JSON string literal of `text`; `escaped` writes every character
    /// outside printable ASCII as `\uXXXX` (surrogate pairs for astral ones).
    fn literal(text: &str, escaped: bool) -> String {
        if !escaped {
            return serde_json::to_string(text).expect("a string serialises");
        }
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                ' '..='~' => out.push(c),
                _ => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
        out.push('"');
        out
    }

    /// Awkward text: quotes and backslashes, control characters, line and
    /// paragraph separators, combining marks, astral characters, and tool
    /// output around the 2,000-unit cut with a surrogate pair on the edge.
    fn awkward_text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-c \"\\\\\n\t\u{0}\u{1f}\u{7f}é\u{301}\u{2028}\u{2029}🚀\u{FEFF}]{0,12}",
            (1995usize..2003, "[aé🚀]{0,3}").prop_map(|(n, tail)| "a".repeat(n) + "🚀" + &tail),
            (1000usize..1003).prop_map(|n| "é".repeat(n) + "b"),
        ]
    }

    /// A JSON value of any kind where the serialiser expects a string.
    fn any_value() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => (awkward_text(), any::<bool>()).prop_map(|(t, e)| literal(&t, e)),
            1 => Just("null".to_owned()),
            1 => prop_oneof![Just("0"), Just("-1.5"), Just("1e21"), Just("123456789012345678901"), Just("true"), Just("false"), Just("{}"), Just("[1,\"a\"]"), Just("{\"a\":1}")].prop_map(str::to_owned),
        ]
    }

    /// Tool-call arguments: nested objects and arrays, keys JavaScript orders
    /// first (array indices), duplicate keys, and non-object values.
    fn arguments() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            any_value(),
            Just("1.0".to_owned()),
            Just("-0".to_owned()),
            Just("1E400".to_owned()),
            Just("0.1e-7".to_owned()),
        ];
        let value = leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(
                    (prop_oneof![Just("k"), Just("2"), Just("10"), Just("01"), Just("é\\n")], inner),
                    0..4
                )
                .prop_map(|kv| format!(
                    "{{{}}}",
                    kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect::<Vec<_>>().join(" , ")
                )),
            ]
        });
        prop::collection::vec(
            (prop_oneof![Just("path"), Just("3"), Just("0"), Just("path"), Just("x y"), Just("🚀")], value),
            0..5,
        )
        .prop_map(|kv| {
            format!("{{{}}}", kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect::<Vec<_>>().join(","))
        })
    }

    /// One content block, as JSON text: text, thinking (plain or redacted),
    /// tool calls, images, unknown and non-string types, non-objects, and
    /// duplicate keys.
    fn block() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => any_value().prop_map(|t| format!(r#"{{"type":"text","text":{t}}}"#)),
            1 => Just(r#"{"type":"text"}"#.to_owned()),
            1 => (any_value(), any_value()).prop_map(|(a, b)| format!(r#"{{"type":"text","text":{a},"text":{b}}}"#)),
            2 => (any_value(), any::<bool>()).prop_map(|(t, r)| format!(r#"{{"type":"thinking","thinking":{t},"thinkingSignature":"sig","redacted":{r}}}"#)),
            3 => (any_value(), prop_oneof![4 => arguments(), 1 => any_value()], any::<bool>()).prop_map(|(name, args, absent)| {
                let args = if absent { String::new() } else { format!(r#","arguments":{args}"#) };
                format!(r#"{{"type":"toolCall","id":"call_1","name":{name}{args}}}"#)
            }),
            1 => Just(r#"{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}"#.to_owned()),
            1 => prop_oneof![Just("5"), Just("null"), Just("\"text\""), Just("[]"), Just("{}"), Just(r#"{"type":7,"text":"x"}"#), Just(r#"{"type":"other","text":"x"}"#)].prop_map(str::to_owned),
        ]
    }

    /// A message's `content`: a string, blocks (possibly none), another JSON
    /// value, or absent.
    fn content() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            2 => any_value().prop_map(Some),
            6 => prop::collection::vec(block(), 0..5).prop_map(|b| Some(format!("[{}]", b.join(",")))),
            1 => Just(None),
        ]
    }

    /// A field the typed view does not read: nothing, or a value that
    /// `JSON.parse` takes but a `serde_json::Value` may not (beyond `f64`,
    /// surrogate escapes, deep nesting), or that only just reads.
    fn extra() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just("1E400".to_owned()),
            Just("-2e308".to_owned()),
            Just("1.5e299".to_owned()),
            Just("0e999".to_owned()),
            Just("1e-400".to_owned()),
            Just("9".repeat(310)),
            Just("9".repeat(299)),
            Just(r#""\ud800""#.to_owned()),
            Just(r#""\uDC00x""#.to_owned()),
            Just(r#""\ud83d\ude80""#.to_owned()),
            Just(r#""\\ud800""#.to_owned()),
            prop::sample::select(vec![100usize, 124, 125, 126, 127, 128, 140])
                .prop_map(|n| "[".repeat(n) + &"]".repeat(n)),
        ];
        prop_oneof![2 => Just(String::new()), 1 => value.prop_map(|v| format!(r#","extra":{v}"#))]
    }

    /// A `message` entry line, or (sometimes) another entry the context
    /// synthesises a message from.
    fn line() -> impl Strategy<Value = String> {
        let role = prop_oneof![
            Just("\"user\""),
            Just("\"assistant\""),
            Just("\"toolResult\""),
            Just("\"system\""),
            Just("\"custom\""),
            Just("\"bashExecution\""),
            Just("\"other\""),
            Just("5"),
        ];
        let message = (role, content(), any::<bool>(), extra()).prop_map(|(role, content, twice, extra)| {
            let content = content.map(|c| format!(r#","content":{c}"#)).unwrap_or_default();
            // A duplicate key: `JSON.parse` keeps the last one.
            let first = if twice { r#""content":"overwritten","# } else { "" };
            format!(
                r#"{{"type":"message","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{{first}"role":{role}{content},"command":"ls","output":"x","timestamp":1767225600000{extra}}}}}"#
            )
        });
        prop_oneof![
            8 => message,
            1 => content().prop_map(|c| {
                let content = c.map(|c| format!(r#","content":{c}"#)).unwrap_or_default();
                format!(r#"{{"type":"custom_message","id":"c","customType":"note"{content},"display":true,"timestamp":"2026-01-01T00:00:00.000Z"}}"#)
            }),
            1 => any_value().prop_map(|s| format!(r#"{{"type":"branch_summary","id":"b","fromId":"a","summary":{s},"timestamp":"2026-01-01T00:00:00.000Z"}}"#)),
        ]
    }

    /// The typed serialiser and the reference, on every message of `lines`
    /// under both Pi releases' rules, one by one and as one conversation.
    fn check(lines: &[String]) -> Result<(), TestCaseError> {
        let entries: Vec<Entry> = lines.iter().filter_map(|l| Entry::parse(l).ok()).collect();
        for emit in [context_message, message_of] {
            let messages: Vec<AgentMessage<'_>> = entries.iter().filter_map(emit).collect();
            for rules in [PiRules::V0_58, PiRules::V1_6] {
                let llm = convert_to_llm_with(&messages, rules);
                for m in &llm {
                    let one = std::slice::from_ref(m);
                    prop_assert_eq!(
                        serialize_conversation_with(one, rules),
                        by_value::serialize_conversation_with(one, rules),
                        "{:?} of {}",
                        rules,
                        m.from.entry.raw()
                    );
                }
                let whole = by_value::serialize_conversation_with(&llm, rules);
                prop_assert_eq!(serialize_conversation_with(&llm, rules), whole.clone());
                // Counted without writing: the characters of the text the reference writes.
                prop_assert_eq!(conversation_chars_with(&llm, rules), whole.chars().count());
                for m in &llm {
                    let one = std::slice::from_ref(m);
                    prop_assert_eq!(
                        conversation_chars_with(one, rules),
                        by_value::serialize_conversation_with(one, rules).chars().count()
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Writing a message from its typed view gives the text the JSON gives.
        #[test]
        fn typed_serialisation_equals_the_json_one(lines in prop::collection::vec(line(), 1..6)) {
            check(&lines)?;
        }
    }

    /// Top-level keys with escapes: quotes, backslashes, control characters,
    /// a `\u` escape of a character and of a surrogate pair.
    fn escaped_key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#"a\"b"#),
            Just(r#"\\"#),
            Just(r#"x\ny\t"#),
            Just(r#"\u00e9\u0001"#),
            Just(r#"\ud83d\ude80"#),
            Just(r#"\/"#),
            Just("k"),
        ]
        .prop_map(str::to_owned)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// The counted arguments are the characters of the written ones.
        #[test]
        fn counted_arguments_equal_the_written_ones(
            args in prop_oneof![
                4 => arguments(),
                2 => prop::collection::vec((escaped_key(), prop_oneof![
                    any_value(),
                    // Structure inside strings: separators and brackets.
                    "[,:{}\\[\\]a ]{0,6}".prop_map(|t| format!("\"{t}\"")),
                    "[,:{}\\[\\]a ]{0,6}".prop_map(|t| format!("[\"{t}\",{{\"{t}\":\"{t}\"}}]")),
                ]), 0..4).prop_map(|kv| format!(
                    "{{ {} }}",
                    kv.iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect::<Vec<_>>().join(" ,\n")
                )),
                1 => any_value(),
                1 => Just("{\"a\":".to_owned()),
            ]
        ) {
            let mut written = String::new();
            written.push_arguments(&args, false);
            let mut counted = CharCount::default();
            counted.push_arguments(&args, false);
            prop_assert_eq!(counted.chars, written.chars().count(), "{} wrote {}", args, written);
            // The text itself counted, when the reader would mark it canonical.
            if sessionlog_events::json::is_canonical_js(&args) {
                let mut direct = CharCount::default();
                direct.push_arguments(&args, true);
                prop_assert_eq!(direct.chars, written.chars().count(), "{} wrote {}", args, written);
            }
        }
    }

    #[test]
    fn counted_arguments_by_hand() {
        let count = |raw: &str| arguments_chars(raw);
        // `2="é", b=1, a"=[1,{"x":"y,}"}]`: index keys first, the key's quote
        // unescaped, a separator after each entry but the last.
        assert_eq!(count(r#"{"b": 1, "a\"": [1, {"x":"y,}"}], "2": "é"}"#), 30);
        assert_eq!(count(r#"{"path":"src/main.rs"}"#), "path=\"src/main.rs\"".len());
        assert_eq!(count(r#"{"k":1,"k":2}"#), 3, "the last of duplicate keys, once");
        assert_eq!(count("{}"), 0);
        assert_eq!(count("[1,2]"), 0, "not an object");
        assert_eq!(count("\"x\""), 0);
        assert_eq!(count("{\"a\":"), 0, "not JSON");
        assert_eq!(count(r#"{"a":1E400}"#), 0, "beyond f64: JSON.parse reads it, the value path does not");
    }

    #[test]
    fn a_message_whose_json_does_not_read_back_is_serialised_as_before() {
        let line = |extra: &str| {
            format!(
                r#"{{"type":"message","id":"m","message":{{"role":"user","content":"hi","extra":{extra}}}}}"#
            )
        };
        let deep = "[".repeat(130) + &"]".repeat(130);
        for extra in ["1E400", r#""\udc00""#, &deep, &"9".repeat(310)] {
            let entry = Entry::parse(&line(extra)).expect("JSON.parse takes it");
            let messages: Vec<AgentMessage<'_>> = context_message(&entry).into_iter().collect();
            let llm = convert_to_llm(&messages);
            assert_eq!(llm[0].to_json(), Value::Null, "{extra}: the JSON path reads null");
            assert_eq!(serialize_conversation(&llm), "", "{extra}");
        }
        let entry = Entry::parse(&line("1e299")).expect("valid");
        let messages: Vec<AgentMessage<'_>> = context_message(&entry).into_iter().collect();
        assert_eq!(serialize_conversation(&convert_to_llm(&messages)), "[User]: hi");
    }

    #[test]
    fn typed_serialisation_equals_the_json_one_on_the_fixtures() {
        use sessionlog_test_support::fixtures;
        let files: Vec<_> = [
            fixtures::pi_transcripts(),
            fixtures::openclaw_transcripts(),
            fixtures::pi_1_6_transcripts(),
            fixtures::generated_transcripts(),
        ]
        .concat();
        assert!(files.len() >= 10, "fixtures found: {files:?}");
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            check(&lines).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        }
        let options = sessionlog_test_support::GenOptions {
            seed: 11,
            entries: 400,
            branches: 2,
            compactions: 2,
            tool_output_chars: 2100,
        };
        check(&sessionlog_test_support::generate(options)).expect("same text");
    }

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
