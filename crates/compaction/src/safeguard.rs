//! The sections OpenClaw's compaction safeguard adds around the model's
//! summary (spec compaction §3.3 steps 1, 4 and 8): recent turns kept
//! verbatim, failed tool calls, and the structured fallback written when there
//! is nothing to summarise.

/// Sets of call ids, hashed with foldhash (their order is never read).
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use std::borrow::Cow;

use serde_json::Value;
use sessionlog_context::AgentMessage;
use sessionlog_events::json::{is_js_whitespace, js_trim, js_trim_start, to_js_string};
use sessionlog_events::{Content, Role};
use sessionlog_tokens::{utf16_len, utf16_prefix};

/// OpenClaw's default `recentTurnsPreserve`.
pub const DEFAULT_RECENT_TURNS_PRESERVE: u32 = 3;
/// The most user turns OpenClaw preserves verbatim.
pub const MAX_RECENT_TURNS_PRESERVE: u32 = 12;
/// Characters of a preserved message kept in the summary.
pub const MAX_RECENT_TURN_TEXT_CHARS: usize = 600;
/// Failed tool calls listed in the summary.
pub const MAX_TOOL_FAILURES: usize = 8;
/// Characters of a failed tool call's output kept in the summary.
pub const MAX_TOOL_FAILURE_CHARS: usize = 240;

/// The headings a structured summary has, in order.
pub const REQUIRED_SECTIONS: [&str; 5] =
    ["## Decisions", "## Open TODOs", "## Constraints/Rules", "## Pending user asks", "## Exact identifiers"];

/// Whether `summary` has the five required headings in order, each on a line of its own.
pub fn has_required_sections(summary: &str) -> bool {
    // Each heading after the line of the one before it: one walk of the
    // lines, read only as far as the last heading.
    let mut lines = summary.split('\n').map(|l| js_trim(l.strip_suffix('\r').unwrap_or(l)));
    REQUIRED_SECTIONS.iter().all(|heading| lines.any(|l| l == *heading))
}

/// The structured summary of a compaction with nothing to summarise and no
/// previous summary.
pub const SKELETON: &str = "## Decisions\nNo prior history.\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured.";

/// The summary written when nothing is left to summarise: the previous summary
/// when it is already structured, else the five headings with the previous
/// summary (or "No prior history.") under the first, so nothing is lost.
pub fn structured_fallback(previous: Option<&str>) -> String {
    let previous = js_trim(previous.unwrap_or(""));
    if !previous.is_empty() && has_required_sections(previous) {
        return previous.to_owned();
    }
    if previous.is_empty() {
        return SKELETON.to_owned();
    }
    let decisions = previous;
    format!(
        "## Decisions\n{decisions}\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured."
    )
}

/// Appends a section (which starts with its own separator); an empty summary
/// becomes the section without its leading whitespace.
pub fn append_section(summary: String, section: &str) -> String {
    if section.is_empty() {
        summary
    } else if js_trim(&summary).is_empty() {
        js_trim_start(section).to_owned()
    } else {
        summary + section
    }
}

fn call_ids<'m>(m: &'m AgentMessage<'_>) -> impl Iterator<Item = &'m str> {
    m.message
        .blocks()
        .iter()
        .filter(|b| b.kind.as_deref() == Some("toolCall"))
        .filter_map(|b| b.id.as_deref())
}

/// Splits the messages to summarise into (summarisable, preserved): the last
/// `turns` user turns (user and assistant messages from the `turns`-th last
/// user message on; with fewer user messages, all of them plus the newest
/// user/assistant messages up to `2 × turns`), plus the tool results answering
/// preserved assistants. Tool results left without their call in the
/// summarisable part are dropped from it. `turns` is capped at
/// [`MAX_RECENT_TURNS_PRESERVE`]; 0 preserves nothing.
pub fn split_preserved<'a>(
    messages: &[AgentMessage<'a>],
    turns: u32,
) -> (Vec<AgentMessage<'a>>, Vec<AgentMessage<'a>>) {
    let turns = turns.min(MAX_RECENT_TURNS_PRESERVE) as usize;
    let conversation: Vec<usize> = (0..messages.len())
        .filter(|&i| matches!(messages[i].message.role(), Role::User | Role::Assistant))
        .collect();
    if turns == 0 || conversation.is_empty() {
        return (messages.to_vec(), Vec::new());
    }
    let users: Vec<usize> =
        conversation.iter().copied().filter(|&i| messages[i].message.role() == Role::User).collect();
    // By position: whether a message is preserved, and how many are.
    let mut preserved = vec![false; messages.len()];
    let mut count = 0;
    let mut preserve = |preserved: &mut [bool], i: usize| {
        count += usize::from(!std::mem::replace(&mut preserved[i], true));
        count
    };
    if users.len() >= turns {
        let boundary = users[users.len() - turns];
        for &i in conversation.iter().filter(|&&i| i >= boundary) {
            preserve(&mut preserved, i);
        }
    } else {
        for &i in &users {
            preserve(&mut preserved, i);
        }
        for &i in conversation.iter().rev() {
            if preserve(&mut preserved, i) >= turns * 2 {
                break;
            }
        }
    }
    let calls: HashSet<&str> = (0..messages.len())
        .filter(|&i| preserved[i] && messages[i].message.role() == Role::Assistant)
        .flat_map(|i| call_ids(&messages[i]))
        .collect();
    if let Some(start) = preserved.iter().position(|&p| p) {
        for (i, m) in messages.iter().enumerate().skip(start) {
            let answers = m.message.tool_call_id.as_deref().is_some_and(|id| calls.contains(id));
            if m.message.role() == Role::ToolResult && answers {
                preserved[i] = true;
            }
        }
    }
    let mut summarizable = Vec::with_capacity(messages.len());
    let mut open_calls: HashSet<&str> = HashSet::default();
    for (i, m) in messages.iter().enumerate() {
        if preserved[i] {
            continue;
        }
        if m.message.role() == Role::ToolResult {
            // A result without its call (or a second result for it) would break the pairing.
            match m.message.tool_call_id.as_deref() {
                Some(id) if open_calls.remove(id) => {}
                _ => continue,
            }
        }
        if m.message.role() == Role::Assistant {
            open_calls.extend(call_ids(m));
        }
        summarizable.push(m.clone());
    }
    let kept = messages
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            preserved[*i] && matches!(m.message.role(), Role::User | Role::Assistant | Role::ToolResult)
        })
        .map(|(_, m)| m.clone())
        .collect();
    (summarizable, kept)
}

/// A message's text parts, trimmed, the empty ones left out, joined with
/// `\n` (`true`); for text blocks whose join reaches 3 × (`max` + 1) bytes,
/// only that head, which holds more than `max` UTF-16 units (`false`): a
/// long tool output is not copied to be cut. A string content is borrowed
/// whole, trimmed (`true`), whatever its length; the caller cuts it. The
/// parts are trimmed and not empty, so their join starts and ends with a
/// character that is not whitespace and trimming it changes nothing.
fn message_text_head<'m>(m: &'m AgentMessage<'_>, max: usize) -> (Cow<'m, str>, bool) {
    // A unit takes at most three bytes (a four-byte character is two units).
    let enough = max.saturating_add(1).saturating_mul(3);
    match &m.message.content {
        Some(Content::Text(text)) => (Cow::Borrowed(js_trim(text)), true),
        Some(Content::Blocks(blocks)) => {
            let mut out = String::new();
            let parts =
                blocks.iter().filter_map(|b| b.text.as_deref().map(js_trim)).filter(|t| !t.is_empty());
            for part in parts {
                if !out.is_empty() {
                    out.push('\n');
                }
                if out.len() + part.len() >= enough {
                    let mut cut = enough.saturating_sub(out.len()).min(part.len());
                    while !part.is_char_boundary(cut) {
                        cut += 1;
                    }
                    out.push_str(&part[..cut]);
                    return (Cow::Owned(out), false);
                }
                out.push_str(part);
            }
            (Cow::Owned(out), true)
        }
        None => (Cow::Borrowed(""), true),
    }
}

/// `[non-text content: image x2, toolCall]` for the blocks that are not text.
fn non_text_placeholder(m: &AgentMessage<'_>) -> Option<String> {
    let Some(Content::Blocks(blocks)) = &m.message.content else { return None };
    let mut counts: Vec<(String, usize)> = Vec::new();
    for block in blocks {
        let kind = block.kind.as_deref().filter(|k| !js_trim(k).is_empty()).unwrap_or("unknown");
        if kind == "text" {
            continue;
        }
        match counts.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind.to_owned(), 1)),
        }
    }
    if counts.is_empty() {
        return None;
    }
    let parts: Vec<String> =
        counts.into_iter().map(|(k, n)| if n > 1 { format!("{k} x{n}") } else { k }).collect();
    Some(format!("[non-text content: {}]", parts.join(", ")))
}

/// The "Recent turns preserved verbatim" section, one line per message, each
/// cut to [`MAX_RECENT_TURN_TEXT_CHARS`]; empty when nothing is preserved.
pub fn preserved_section(messages: &[AgentMessage<'_>]) -> String {
    // The lines written into one string as they are made (no string per
    // line, no join).
    let mut out = String::new();
    for m in messages {
        let tool = match m.message.role() {
            Role::Assistant | Role::User => None,
            Role::ToolResult => {
                m.message.tool_name.as_deref().filter(|n| !js_trim(n).is_empty()).or(Some("tool"))
            }
            _ => continue,
        };
        let (text, whole) = message_text_head(m, MAX_RECENT_TURN_TEXT_CHARS);
        let rendered = if whole {
            match (text.is_empty(), non_text_placeholder(m)) {
                (false, Some(p)) => Cow::Owned(format!("{text}\n{p}")),
                (false, None) => text,
                (true, Some(p)) => Cow::Owned(p),
                (true, None) => continue,
            }
        } else {
            // Longer than the cut: what would follow it is cut away.
            text
        };
        out.push_str(if out.is_empty() { "\n\n## Recent turns preserved verbatim\n- " } else { "\n- " });
        match (m.message.role(), tool) {
            (_, Some(name)) => {
                out.push_str("Tool result (");
                out.push_str(name);
                out.push(')');
            }
            (Role::Assistant, None) => out.push_str("Assistant"),
            _ => out.push_str("User"),
        }
        out.push_str(": ");
        match utf16_prefix(&rendered, MAX_RECENT_TURN_TEXT_CHARS) {
            Some(head) => {
                out.push_str(&head);
                out.push_str("...");
            }
            None => out.push_str(&rendered),
        }
    }
    out
}

/// `status=… exitCode=…` from a tool result's `details`.
fn failure_meta(details: Option<&Value>) -> Option<String> {
    let details = details?.as_object()?;
    let mut parts = Vec::new();
    if let Some(Value::String(status)) = details.get("status") {
        parts.push(format!("status={status}"));
    }
    // A finite number prints as JavaScript prints it (`1`, not `1.0`).
    let code = details.get("exitCode").filter(|c| c.as_f64().is_some_and(f64::is_finite));
    if let Some(code) = code.and_then(|c| to_js_string(c).ok()) {
        parts.push(format!("exitCode={code}"));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The `## Tool Failures` section: failed tool results (`isError`), once per
/// call id, output whitespace-collapsed and cut to [`MAX_TOOL_FAILURE_CHARS`],
/// at most [`MAX_TOOL_FAILURES`] listed; empty when nothing failed.
pub fn tool_failures_section(messages: &[AgentMessage<'_>]) -> String {
    let mut seen = HashSet::default();
    let mut lines = Vec::new();
    let mut total = 0;
    for m in messages {
        if m.message.role() != Role::ToolResult || m.message.is_error != Some(true) {
            continue;
        }
        let Some(id) = m.message.tool_call_id.as_deref().filter(|id| !id.is_empty()) else { continue };
        if !seen.insert(id) {
            continue;
        }
        total += 1;
        if lines.len() >= MAX_TOOL_FAILURES {
            continue;
        }
        let name = m.message.tool_name.as_deref().filter(|n| !js_trim(n).is_empty()).unwrap_or("tool");
        let texts = m.message.blocks().iter().filter(|b| b.kind.as_deref() == Some("text"));
        // The text blocks joined by `\n` and whitespace-collapsed, only as far
        // as the cut below reads: past MAX_TOOL_FAILURE_CHARS UTF-16 units.
        let mut collapsed = String::new();
        let mut units = 0;
        for word in texts.filter_map(|b| b.text.as_deref()).flat_map(|t| t.split(is_js_whitespace)) {
            if word.is_empty() {
                continue;
            }
            if !collapsed.is_empty() {
                collapsed.push(' ');
                units += 1;
            }
            if units > MAX_TOOL_FAILURE_CHARS {
                break;
            }
            collapsed.push_str(word);
            units += utf16_len(word) as usize;
        }
        let meta = failure_meta(m.to_json().get("details"));
        let summary = match (collapsed.is_empty(), &meta) {
            (false, _) => collapsed,
            (true, Some(_)) => "failed".to_owned(),
            (true, None) => "failed (no output)".to_owned(),
        };
        let summary = match utf16_prefix(&summary, MAX_TOOL_FAILURE_CHARS) {
            Some(_) => {
                format!("{}...", utf16_prefix(&summary, MAX_TOOL_FAILURE_CHARS - 3).unwrap_or_default())
            }
            None => summary,
        };
        let meta = meta.map(|m| format!(" ({m})")).unwrap_or_default();
        lines.push(format!("- {name}{meta}: {summary}"));
    }
    if lines.is_empty() {
        return String::new();
    }
    if total > MAX_TOOL_FAILURES {
        lines.push(format!("- ...and {} more", total - MAX_TOOL_FAILURES));
    }
    format!("\n\n## Tool Failures\n{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sessionlog_context::assemble::context_message;
    use sessionlog_events::Entry;

    use super::*;

    /// Entries from compact message specs: `u:text`, `a:text`, `a:text>call`
    /// (a tool call with that id), `r:call:text` (its result), `e:call:text`
    /// (a failed result), `m:text|text|img` (an assistant message of text
    /// blocks and images).
    fn entries(specs: &[&str]) -> Vec<Entry> {
        specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let (kind, rest) = spec.split_once(':').unwrap();
                let text = |t: &str| serde_json::to_string(t).unwrap();
                let message = match kind {
                    "u" => format!(r#"{{"role":"user","content":{}}}"#, text(rest)),
                    "a" => match rest.split_once('>') {
                        Some((t, call)) => format!(
                            r#"{{"role":"assistant","content":[{{"type":"text","text":{}}},{{"type":"toolCall","id":"{call}","name":"bash","arguments":{{}}}}]}}"#,
                            text(t)
                        ),
                        None => {
                            format!(r#"{{"role":"assistant","content":[{{"type":"text","text":{}}}]}}"#, text(rest))
                        }
                    },
                    "m" => {
                        let blocks: Vec<String> = rest
                            .split('|')
                            .map(|t| match t {
                                "img" => r#"{"type":"image","data":"","mimeType":"image/png"}"#.to_owned(),
                                t => format!(r#"{{"type":"text","text":{}}}"#, text(t)),
                            })
                            .collect();
                        format!(r#"{{"role":"assistant","content":[{}]}}"#, blocks.join(","))
                    }
                    "r" | "e" => {
                        let (call, t) = rest.split_once(':').unwrap();
                        format!(
                            r#"{{"role":"toolResult","toolCallId":"{call}","toolName":"bash","content":[{{"type":"text","text":{}}}],"isError":{}}}"#,
                            text(t),
                            kind == "e"
                        )
                    }
                    other => panic!("unknown spec {other}"),
                };
                Entry::parse(&format!(r#"{{"type":"message","id":"m{i}","parentId":null,"message":{message}}}"#))
                    .unwrap()
            })
            .collect()
    }

    fn ids(messages: &[AgentMessage<'_>]) -> Vec<String> {
        messages.iter().map(|m| m.entry.id.clone().unwrap()).collect()
    }

    fn split(specs: &[&str], turns: u32) -> (Vec<String>, Vec<String>) {
        let es = entries(specs);
        let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
        let (summarizable, preserved) = split_preserved(&messages, turns);
        (ids(&summarizable), ids(&preserved))
    }

    /// The splitter, the failures section and the preserved-turns section
    /// as they were before positions replaced the `HashSet<usize>`, the
    /// output was collapsed only as far as the cut reads and a preserved
    /// message's text was read only as far as its cut: the reference the
    /// fast ones must equal.
    mod reference {
        use std::collections::HashSet;

        use sessionlog_context::AgentMessage;
        use sessionlog_events::json::{is_js_whitespace, js_trim};
        use sessionlog_events::Role;
        use sessionlog_tokens::utf16_prefix;

        use sessionlog_events::Content;

        use super::super::{
            call_ids, failure_meta, non_text_placeholder, MAX_RECENT_TURNS_PRESERVE,
            MAX_RECENT_TURN_TEXT_CHARS, MAX_TOOL_FAILURES, MAX_TOOL_FAILURE_CHARS,
        };

        pub(super) fn split_preserved<'a>(
            messages: &[AgentMessage<'a>],
            turns: u32,
        ) -> (Vec<AgentMessage<'a>>, Vec<AgentMessage<'a>>) {
            let turns = turns.min(MAX_RECENT_TURNS_PRESERVE) as usize;
            let conversation: Vec<usize> = (0..messages.len())
                .filter(|&i| matches!(messages[i].message.role(), Role::User | Role::Assistant))
                .collect();
            if turns == 0 || conversation.is_empty() {
                return (messages.to_vec(), Vec::new());
            }
            let users: Vec<usize> =
                conversation.iter().copied().filter(|&i| messages[i].message.role() == Role::User).collect();
            let mut preserved: HashSet<usize> = HashSet::new();
            if users.len() >= turns {
                let boundary = users[users.len() - turns];
                preserved.extend(conversation.iter().copied().filter(|&i| i >= boundary));
            } else {
                preserved.extend(users.iter().copied());
                for &i in conversation.iter().rev() {
                    preserved.insert(i);
                    if preserved.len() >= turns * 2 {
                        break;
                    }
                }
            }
            let calls: HashSet<&str> = preserved
                .iter()
                .filter(|&&i| messages[i].message.role() == Role::Assistant)
                .flat_map(|&i| call_ids(&messages[i]))
                .collect();
            if let Some(&start) = preserved.iter().min() {
                for (i, m) in messages.iter().enumerate().skip(start) {
                    let answers = m.message.tool_call_id.as_deref().is_some_and(|id| calls.contains(id));
                    if m.message.role() == Role::ToolResult && answers {
                        preserved.insert(i);
                    }
                }
            }
            let mut summarizable = Vec::new();
            let mut open_calls: HashSet<&str> = HashSet::new();
            for (i, m) in messages.iter().enumerate() {
                if preserved.contains(&i) {
                    continue;
                }
                if m.message.role() == Role::ToolResult {
                    // A result without its call (or a second result for it) would break the pairing.
                    match m.message.tool_call_id.as_deref() {
                        Some(id) if open_calls.remove(id) => {}
                        _ => continue,
                    }
                }
                if m.message.role() == Role::Assistant {
                    open_calls.extend(call_ids(m));
                }
                summarizable.push(m.clone());
            }
            let kept = messages
                .iter()
                .enumerate()
                .filter(|(i, m)| {
                    preserved.contains(i)
                        && matches!(m.message.role(), Role::User | Role::Assistant | Role::ToolResult)
                })
                .map(|(_, m)| m.clone())
                .collect();
            (summarizable, kept)
        }

        fn message_text(m: &AgentMessage<'_>) -> String {
            match &m.message.content {
                Some(Content::Text(text)) => js_trim(text).to_owned(),
                Some(Content::Blocks(blocks)) => {
                    let parts: Vec<&str> = blocks
                        .iter()
                        .filter_map(|b| b.text.as_deref().map(js_trim))
                        .filter(|t| !t.is_empty())
                        .collect();
                    js_trim(&parts.join("\n")).to_owned()
                }
                None => String::new(),
            }
        }

        /// The section from each message's whole text, cut after.
        pub(super) fn preserved_section(messages: &[AgentMessage<'_>]) -> String {
            let lines: Vec<String> = messages
                .iter()
                .filter_map(|m| {
                    let label = match m.message.role() {
                        Role::Assistant => "Assistant".to_owned(),
                        Role::User => "User".to_owned(),
                        Role::ToolResult => {
                            let name = m.message.tool_name.as_deref().filter(|n| !js_trim(n).is_empty());
                            format!("Tool result ({})", name.unwrap_or("tool"))
                        }
                        _ => return None,
                    };
                    let text = message_text(m);
                    let rendered = match (text.is_empty(), non_text_placeholder(m)) {
                        (false, Some(p)) => format!("{text}\n{p}"),
                        (false, None) => text,
                        (true, Some(p)) => p,
                        (true, None) => return None,
                    };
                    let rendered = match utf16_prefix(&rendered, MAX_RECENT_TURN_TEXT_CHARS) {
                        Some(head) => format!("{head}..."),
                        None => rendered,
                    };
                    Some(format!("- {label}: {rendered}"))
                })
                .collect();
            if lines.is_empty() {
                return String::new();
            }
            format!("\n\n## Recent turns preserved verbatim\n{}", lines.join("\n"))
        }

        pub(super) fn tool_failures_section(messages: &[AgentMessage<'_>]) -> String {
            let mut seen = HashSet::new();
            let mut lines = Vec::new();
            let mut total = 0;
            for m in messages {
                if m.message.role() != Role::ToolResult || m.message.is_error != Some(true) {
                    continue;
                }
                let Some(id) = m.message.tool_call_id.as_deref().filter(|id| !id.is_empty()) else {
                    continue;
                };
                if !seen.insert(id) {
                    continue;
                }
                total += 1;
                if lines.len() >= MAX_TOOL_FAILURES {
                    continue;
                }
                let name =
                    m.message.tool_name.as_deref().filter(|n| !js_trim(n).is_empty()).unwrap_or("tool");
                let text: Vec<&str> = m
                    .message
                    .blocks()
                    .iter()
                    .filter(|b| b.kind.as_deref() == Some("text"))
                    .filter_map(|b| b.text.as_deref())
                    .collect();
                let text = text.join("\n");
                let collapsed =
                    text.split(is_js_whitespace).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
                let meta = failure_meta(m.to_json().get("details"));
                let summary = match (collapsed.is_empty(), &meta) {
                    (false, _) => collapsed,
                    (true, Some(_)) => "failed".to_owned(),
                    (true, None) => "failed (no output)".to_owned(),
                };
                let summary = match utf16_prefix(&summary, MAX_TOOL_FAILURE_CHARS) {
                    Some(_) => {
                        format!(
                            "{}...",
                            utf16_prefix(&summary, MAX_TOOL_FAILURE_CHARS - 3).unwrap_or_default()
                        )
                    }
                    None => summary,
                };
                let meta = meta.map(|m| format!(" ({m})")).unwrap_or_default();
                lines.push(format!("- {name}{meta}: {summary}"));
            }
            if lines.is_empty() {
                return String::new();
            }
            if total > MAX_TOOL_FAILURES {
                lines.push(format!("- ...and {} more", total - MAX_TOOL_FAILURES));
            }
            format!("\n\n## Tool Failures\n{}", lines.join("\n"))
        }
    }

    /// A message spec for [`entries`]: user, assistant (with a call), result
    /// or failed result of one of three calls, texts with JavaScript
    /// whitespace, astral characters and outputs around the 240-unit cut.
    fn spec() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            3 => "[ab \n\t\u{3000}\u{A0}é🚀]{0,12}",
            1 => (230usize..250, "[ 🚀a]{0,4}").prop_map(|(n, tail)| "w ".repeat(n / 2) + &tail),
            1 => (236usize..244).prop_map(|n| "x".repeat(n) + "🚀 y"),
        ];
        let call = prop_oneof![Just("c1"), Just("c2"), Just("c3")];
        (0..5usize, call, text).prop_map(|(kind, call, text)| match kind {
            0 => format!("u:{text}"),
            1 => format!("a:{text}"),
            2 => format!("a:{text}>{call}"),
            3 => format!("r:{call}:{text}"),
            _ => format!("e:{call}:{text}"),
        })
    }

    /// A message spec for the preserved-turns section: texts short, of
    /// whitespace only, or around its 600-unit cut in characters of one to
    /// four bytes (a cut pair, a head of exactly 1,803 bytes, a four-byte
    /// character across that bound), alone or in several text blocks with
    /// images.
    fn preserved_spec() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            2 => "[ab \n\t\u{3000}é🚀]{0,8}",
            1 => (290usize..320, "[a é日🚀\n]{1,2}").prop_map(|(n, s)| s.repeat(n)),
            1 => (590usize..612).prop_map(|n| "日".repeat(n)),
            1 => (296usize..304, "[a日]{0,1}").prop_map(|(n, s)| s + &"🚀".repeat(n)),
            1 => (595usize..606).prop_map(|n| "x".repeat(n)),
            1 => (598usize..603).prop_map(|n| "日".repeat(n) + "🚀🚀"),
        ];
        let part = prop_oneof![4 => text.clone(), 1 => Just("img".to_owned())];
        let parts = prop::collection::vec(part, 1..4).prop_map(|p| p.join("|"));
        (0..4usize, text, parts).prop_map(|(kind, text, parts)| match kind {
            0 => format!("u:{text}"),
            1 => format!("a:{text}>c1"),
            2 => format!("r:c1:{text}"),
            _ => format!("m:{parts}"),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The preserved-turns section, each text read only as far as its
        /// cut, equals the reference's, which reads each whole.
        #[test]
        fn preserved_section_equals_the_reference(specs in prop::collection::vec(preserved_spec(), 0..8)) {
            let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
            let es = entries(&specs);
            let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
            prop_assert_eq!(preserved_section(&messages), reference::preserved_section(&messages));
        }

        /// The split and the failures section equal the reference's.
        #[test]
        fn split_and_failures_equal_the_reference(
            specs in prop::collection::vec(spec(), 0..24),
            turns in 0u32..16,
        ) {
            let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
            let es = entries(&specs);
            let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
            let (summarizable, preserved) = split_preserved(&messages, turns);
            let (want_summarizable, want_preserved) = reference::split_preserved(&messages, turns);
            prop_assert_eq!(ids(&summarizable), ids(&want_summarizable));
            prop_assert_eq!(ids(&preserved), ids(&want_preserved));
            prop_assert_eq!(tool_failures_section(&messages), reference::tool_failures_section(&messages));
        }
    }

    fn v(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_last_user_turns_are_preserved_with_their_tool_results() {
        let specs = ["u:one", "a:ok", "u:two", "a:run>c1", "r:c1:out", "a:done", "u:three", "a:fine"];
        // Two turns: from the second-last user message (m2) on, results of preserved calls included.
        assert_eq!(split(&specs, 2), (v(&["m0", "m1"]), v(&["m2", "m3", "m4", "m5", "m6", "m7"])));
        assert_eq!(split(&specs, 0), (v(&["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"]), v(&[])));
        // Turns are capped at 12; three users only: every user plus the newest
        // messages up to 24 — here everything conversational.
        assert_eq!(split(&specs, 40).0, Vec::<String>::new());
    }

    #[test]
    fn with_fewer_user_turns_than_asked_all_users_and_the_newest_messages_are_kept() {
        // One user message, three turns asked: the user plus the newest
        // user/assistant messages until six are preserved.
        let specs = ["u:start", "a:a1", "a:a2", "a:a3", "a:a4", "a:a5", "a:a6", "a:a7"];
        assert_eq!(split(&specs, 3), (v(&["m1", "m2"]), v(&["m0", "m3", "m4", "m5", "m6", "m7"])));
    }

    #[test]
    fn a_result_whose_call_stays_behind_does_not_follow_a_preserved_turn() {
        // c1 is called before the boundary; its result (after the boundary) stays with it.
        let specs = ["u:one", "a:run>c1", "u:two", "r:c1:late", "a:ok"];
        assert_eq!(split(&specs, 1), (v(&["m0", "m1", "m3"]), v(&["m2", "m4"])));
        // An orphan result (no call anywhere) is left out of the summarisable part.
        let specs = ["u:one", "r:zz:orphan", "a:ok", "u:two", "a:fine"];
        assert_eq!(split(&specs, 1), (v(&["m0", "m2"]), v(&["m3", "m4"])));
    }

    #[test]
    fn preserved_turns_render_one_line_per_message() {
        let long = "é".repeat(601);
        let specs = ["u:  hello  ", "a:run it>c1", "r:c1:exit 0", &format!("u:{long}")];
        let es = entries(&specs);
        let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
        let expect = format!(
            "\n\n## Recent turns preserved verbatim\n- User: hello\n- Assistant: run it\n[non-text content: toolCall]\n- Tool result (bash): exit 0\n- User: {}...",
            "é".repeat(600)
        );
        assert_eq!(preserved_section(&messages), expect);
        assert_eq!(preserved_section(&[]), "");
    }

    #[test]
    fn tool_failures_are_listed_once_per_call_with_their_meta() {
        let spaced = "error:\n\n   file   not found\t";
        let mut specs: Vec<String> =
            vec![format!("e:c1:{spaced}"), "e:c1:same call again".to_owned(), "r:c2:fine".to_owned()];
        specs.push(format!("e:c3:{}", "x".repeat(300)));
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let mut es = entries(&refs);
        // A failure with details and no text output.
        es.push(
            Entry::parse(r#"{"type":"message","id":"m9","parentId":null,"message":{"role":"toolResult","toolCallId":"c4","toolName":" ","content":[],"isError":true,"details":{"status":"timeout","exitCode":124.0}}}"#)
                .unwrap(),
        );
        let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
        let expect = format!(
            "\n\n## Tool Failures\n- bash: error: file not found\n- bash: {}...\n- tool (status=timeout exitCode=124): failed",
            "x".repeat(237)
        );
        assert_eq!(tool_failures_section(&messages), expect);
    }

    #[test]
    fn more_than_eight_failures_are_counted_not_listed() {
        let specs: Vec<String> = (0..11).map(|i| format!("e:c{i}:boom {i}")).collect();
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let es = entries(&refs);
        let messages: Vec<AgentMessage<'_>> = es.iter().filter_map(context_message).collect();
        let section = tool_failures_section(&messages);
        assert_eq!(section.lines().filter(|l| l.starts_with("- bash: boom")).count(), 8);
        assert!(section.ends_with("- bash: boom 7\n- ...and 3 more"), "{section}");
    }

    #[test]
    fn the_structured_fallback_keeps_the_previous_summary() {
        let structured = "## Decisions\nx\n## Open TODOs\n## Constraints/Rules\n## Pending user asks\n  ## Exact identifiers  ";
        assert!(has_required_sections(structured));
        // Kept as it is, trimmed.
        assert_eq!(structured_fallback(Some(&format!("\n{structured}\n"))), structured.trim_end());
        // Out of order: not structured, so it is kept under the first heading.
        assert!(!has_required_sections(
            "## Open TODOs\n## Decisions\n## Constraints/Rules\n## Pending user asks\n## Exact identifiers"
        ));
        assert_eq!(
            structured_fallback(Some(" went with plan B ")),
            "## Decisions\nwent with plan B\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured."
        );
        assert_eq!(structured_fallback(None), SKELETON);
        assert_eq!(structured_fallback(Some("   ")), SKELETON);
        assert!(SKELETON.starts_with("## Decisions\nNo prior history.\n"));
    }

    proptest::proptest! {
        /// The headings found in one walk of the lines are those found by
        /// collecting the lines and searching on from each heading's line:
        /// headings in any order, repeated, missing, indented, with `\r`.
        #[test]
        fn required_sections_in_one_walk_as_in_the_collected_lines(
            lines in proptest::collection::vec(
                proptest::sample::select(vec![
                    "## Decisions", "## Open TODOs", "## Constraints/Rules", "## Pending user asks",
                    "## Exact identifiers", "  ## Decisions\r", "## Open TODOs\r", "x", "", "## Exact identifiers x",
                ]),
                0..14,
            ),
        ) {
            let summary = lines.join("\n");
            let collected: Vec<&str> =
                summary.split('\n').map(|l| js_trim(l.strip_suffix('\r').unwrap_or(l))).collect();
            let mut cursor = 0;
            let mut expected = true;
            for heading in REQUIRED_SECTIONS {
                match collected[cursor..].iter().position(|l| *l == heading) {
                    Some(i) => cursor += i + 1,
                    None => {
                        expected = false;
                        break;
                    }
                }
            }
            proptest::prop_assert_eq!(has_required_sections(&summary), expected, "{:?}", summary);
        }
    }

    #[test]
    fn sections_append_to_a_summary_or_stand_alone() {
        assert_eq!(append_section("S".to_owned(), "\n\n## X\ny"), "S\n\n## X\ny");
        assert_eq!(append_section("  ".to_owned(), "\n\n## X\ny"), "## X\ny");
        assert_eq!(append_section("S".to_owned(), ""), "S");
    }
}
