//! Transcript hygiene: repairing provider messages for one provider family
//! before a call (spec context-engine §5.2). Driven by [`FAMILIES`], a table
//! with one row per family, so a new family is a row, not a branch. Every
//! repair is reported as a [`Repair`]. Never written to the log.
//!
//! Steps, in order: drop malformed tool calls and empty blocks/messages (and
//! thinking where the family forbids it); pair every tool call with exactly
//! one result directly after its assistant message (results moved into call
//! order, duplicates and orphans dropped, a missing result synthesised as an
//! error — or, for families without synthetic results, the unanswered call
//! dropped; calls of failed or aborted replies are dropped, they never ran);
//! rewrite tool-call ids to the family's grammar; fix turn order.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::AgentMessage;

/// How tool-call ids must look for a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolIdMode {
    /// Left as they are.
    Keep,
    /// `[A-Za-z0-9]{1,40}`, unique in the request.
    Strict,
    /// Exactly 9 of `[A-Za-z0-9]`, unique in the request.
    Strict9,
}

/// Turn-order rules for a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnRule {
    /// Anything goes.
    None,
    /// Consecutive user messages are merged (Anthropic).
    MergeUsers,
    /// Consecutive assistant messages are merged and the history may not
    /// start with an assistant (Gemini).
    MergeAssistants,
}

/// One row of the hygiene table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Family {
    /// The family name the CLI takes.
    pub name: &'static str,
    /// Full sanitising: malformed tool calls dropped.
    pub full_sanitize: bool,
    /// Tool-call id grammar.
    pub tool_ids: ToolIdMode,
    /// Turn order.
    pub turns: TurnRule,
    /// A missing tool result is synthesised (else the unanswered call is dropped).
    pub synthetic_results: bool,
    /// Thinking blocks are removed.
    pub drop_thinking: bool,
}

/// The provider families (spec context-engine §5.2 policy table).
pub const FAMILIES: &[Family] = &[
    Family {
        name: "anthropic",
        full_sanitize: true,
        tool_ids: ToolIdMode::Strict,
        turns: TurnRule::MergeUsers,
        synthetic_results: true,
        drop_thinking: false,
    },
    Family {
        name: "bedrock",
        full_sanitize: true,
        tool_ids: ToolIdMode::Strict,
        turns: TurnRule::MergeUsers,
        synthetic_results: true,
        drop_thinking: false,
    },
    Family {
        name: "google",
        full_sanitize: true,
        tool_ids: ToolIdMode::Strict,
        turns: TurnRule::MergeAssistants,
        synthetic_results: true,
        drop_thinking: false,
    },
    Family {
        name: "mistral",
        full_sanitize: true,
        tool_ids: ToolIdMode::Strict9,
        turns: TurnRule::None,
        synthetic_results: false,
        drop_thinking: false,
    },
    Family {
        name: "openai-responses",
        full_sanitize: false,
        tool_ids: ToolIdMode::Keep,
        turns: TurnRule::None,
        synthetic_results: false,
        drop_thinking: false,
    },
    Family {
        name: "openai-completions",
        full_sanitize: false,
        tool_ids: ToolIdMode::Keep,
        turns: TurnRule::MergeUsers,
        synthetic_results: false,
        drop_thinking: false,
    },
    Family {
        name: "github-copilot-claude",
        full_sanitize: false,
        tool_ids: ToolIdMode::Keep,
        turns: TurnRule::None,
        synthetic_results: false,
        drop_thinking: true,
    },
];

/// The family row named `name`.
pub fn family(name: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// The text of a synthesised tool result.
pub const SYNTHETIC_RESULT_TEXT: &str =
    "[sessionlog] missing tool result in session history; inserted synthetic error result for transcript repair.";

/// One repair hygiene made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "repair", rename_all = "camelCase")]
pub enum Repair {
    /// A tool-call block was dropped as malformed.
    #[serde(rename_all = "camelCase")]
    DroppedMalformedToolCall {
        /// Why.
        reason: String,
    },
    /// An empty block was dropped.
    DroppedEmptyBlock,
    /// Thinking blocks were dropped (family rule).
    DroppedThinking,
    /// A message left without content was dropped.
    #[serde(rename_all = "camelCase")]
    DroppedEmptyMessage {
        /// Its role.
        role: String,
    },
    /// A tool call of a failed or aborted reply was dropped (it never ran).
    #[serde(rename_all = "camelCase")]
    DroppedCallOfFailedReply {
        /// The call id.
        call_id: String,
    },
    /// A result was moved next to its call.
    #[serde(rename_all = "camelCase")]
    MovedResult {
        /// The call id.
        call_id: String,
    },
    /// A second result for one call was dropped.
    #[serde(rename_all = "camelCase")]
    DroppedDuplicateResult {
        /// The call id.
        call_id: String,
    },
    /// A result without its call was dropped.
    #[serde(rename_all = "camelCase")]
    DroppedOrphanResult {
        /// The call id.
        call_id: String,
    },
    /// A synthetic error result was inserted.
    #[serde(rename_all = "camelCase")]
    InsertedSyntheticResult {
        /// The call id.
        call_id: String,
    },
    /// An unanswered call was dropped (family without synthetic results).
    #[serde(rename_all = "camelCase")]
    DroppedUnansweredCall {
        /// The call id.
        call_id: String,
    },
    /// A tool-call id was rewritten for the family.
    #[serde(rename_all = "camelCase")]
    RenamedToolCallId {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// Two consecutive messages of one role were merged.
    #[serde(rename_all = "camelCase")]
    MergedMessages {
        /// The role.
        role: String,
    },
    /// A `(session bootstrap)` user message was put first.
    PrependedBootstrap,
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn calls(m: &Value) -> Vec<(String, String)> {
    match m.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
            .map(|b| {
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                (s("id"), s("name"))
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Step 1: blocks and messages.
fn clean_blocks(messages: Vec<Value>, fam: &Family, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for mut m in messages {
        let r = role(&m).to_owned();
        if let Some(Value::Array(items)) = m.get_mut("content") {
            items.retain(|b| {
                let ty = b.get("type").and_then(Value::as_str);
                match ty {
                    Some("text") if b.get("text").and_then(Value::as_str).is_none_or(str::is_empty) => {
                        repairs.push(Repair::DroppedEmptyBlock);
                        false
                    }
                    Some("thinking") if fam.drop_thinking => {
                        repairs.push(Repair::DroppedThinking);
                        false
                    }
                    Some("toolCall") if fam.full_sanitize || r == "assistant" => {
                        let id_ok = b.get("id").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
                        let args_ok = b.get("arguments").is_some_and(Value::is_object);
                        let name_ok = b.get("name").and_then(Value::as_str).is_some_and(valid_tool_name);
                        let reason = match (id_ok, args_ok, name_ok || !fam.full_sanitize) {
                            (false, _, _) => Some("no id"),
                            (_, false, _) => Some("no arguments object"),
                            (_, _, false) => Some("invalid tool name"),
                            _ => None,
                        };
                        if let Some(reason) = reason {
                            repairs.push(Repair::DroppedMalformedToolCall { reason: reason.to_owned() });
                        }
                        reason.is_none()
                    }
                    _ => true,
                }
            });
        }
        let empty = match m.get("content") {
            Some(Value::Array(items)) => items.is_empty(),
            Some(Value::String(s)) => s.is_empty() && r != "toolResult",
            None => r != "toolResult",
            _ => false,
        };
        if empty && r != "toolResult" {
            repairs.push(Repair::DroppedEmptyMessage { role: r });
            continue;
        }
        out.push(m);
    }
    out
}

fn synthetic(call_id: &str, tool: &str) -> Value {
    json!({"role": "toolResult", "toolCallId": call_id, "toolName": if tool.is_empty() { "unknown" } else { tool },
           "content": [{"type": "text", "text": SYNTHETIC_RESULT_TEXT}], "isError": true})
}

/// Step 2: every call answered exactly once, right after its assistant.
fn repair_pairing(messages: Vec<Value>, fam: &Family, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let mut used = vec![false; messages.len()];
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    let next_assistant = |from: usize| {
        (from..messages.len()).find(|&j| role(&messages[j]) == "assistant").unwrap_or(messages.len())
    };
    let mut answered: HashSet<String> = HashSet::new();
    for i in 0..messages.len() {
        let m = &messages[i];
        match role(m) {
            "assistant" => {
                let mut m = m.clone();
                let failed = matches!(m.get("stopReason").and_then(Value::as_str), Some("error" | "aborted"));
                let end = next_assistant(i + 1);
                let mut results = Vec::new();
                // One decision per call occurrence (ids may repeat within a reply).
                let mut keep_calls: Vec<bool> = Vec::new();
                for (id, name) in calls(&m) {
                    if failed {
                        repairs.push(Repair::DroppedCallOfFailedReply { call_id: id });
                        keep_calls.push(false);
                        continue;
                    }
                    let found = (i + 1..end).find(|&j| {
                        !used[j]
                            && role(&messages[j]) == "toolResult"
                            && messages[j].get("toolCallId").and_then(Value::as_str) == Some(id.as_str())
                    });
                    match found {
                        Some(j) => {
                            used[j] = true;
                            if j != i + 1 + results.len() {
                                repairs.push(Repair::MovedResult { call_id: id.clone() });
                            }
                            results.push(messages[j].clone());
                            keep_calls.push(true);
                        }
                        None if fam.synthetic_results => {
                            repairs.push(Repair::InsertedSyntheticResult { call_id: id.clone() });
                            results.push(synthetic(&id, &name));
                            keep_calls.push(true);
                        }
                        None => {
                            repairs.push(Repair::DroppedUnansweredCall { call_id: id.clone() });
                            keep_calls.push(false);
                        }
                    }
                    answered.insert(id);
                }
                if let Some(Value::Array(items)) = m.get_mut("content") {
                    let mut decisions = keep_calls.into_iter();
                    items.retain(|b| {
                        b.get("type").and_then(Value::as_str) != Some("toolCall")
                            || decisions.next().unwrap_or(false)
                    });
                    if items.is_empty() {
                        repairs.push(Repair::DroppedEmptyMessage { role: "assistant".to_owned() });
                        continue;
                    }
                }
                out.push(m);
                out.extend(results);
            }
            "toolResult" if used[i] => {}
            "toolResult" => {
                let id = m.get("toolCallId").and_then(Value::as_str).unwrap_or("").to_owned();
                if answered.contains(&id) {
                    repairs.push(Repair::DroppedDuplicateResult { call_id: id });
                } else {
                    repairs.push(Repair::DroppedOrphanResult { call_id: id });
                }
            }
            _ => out.push(m.clone()),
        }
    }
    out
}

/// Lowercase hex SHA-256 of `s`.
pub(crate) fn sha_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn new_id(old: &str, mode: ToolIdMode, taken: &HashSet<String>) -> String {
    match mode {
        ToolIdMode::Keep => old.to_owned(),
        ToolIdMode::Strict => {
            let mut base: String = old.chars().filter(char::is_ascii_alphanumeric).take(40).collect();
            if base.is_empty() {
                base = if old.is_empty() { "defaulttoolid".to_owned() } else { "sanitizedtoolid".to_owned() };
            }
            if !taken.contains(&base) {
                return base;
            }
            let hashed: String = base.chars().take(32).chain(sha_hex(old).chars().take(8)).collect();
            if !taken.contains(&hashed) {
                return hashed;
            }
            (2..)
                .map(|n| format!("{}x{n}", &hashed[..hashed.len().min(36)]))
                .find(|c| !taken.contains(c))
                .unwrap_or(hashed)
        }
        ToolIdMode::Strict9 => {
            let alnum: String = old.chars().filter(char::is_ascii_alphanumeric).collect();
            let first = if alnum.len() >= 9 { alnum[..9].to_owned() } else { sha_hex(old)[..9].to_owned() };
            if !taken.contains(&first) {
                return first;
            }
            (1..)
                .map(|i| sha_hex(&format!("{old}:{i}"))[..9].to_owned())
                .find(|c| !taken.contains(c))
                .unwrap_or(first)
        }
    }
}

/// Step 3: ids to the family's grammar, each call occurrence renamed and its
/// result (right after, in call order) following it.
fn rewrite_ids(messages: &mut [Value], mode: ToolIdMode, repairs: &mut Vec<Repair>) {
    if mode == ToolIdMode::Keep {
        return;
    }
    let mut taken: HashSet<String> = HashSet::new();
    let mut i = 0;
    while i < messages.len() {
        if role(&messages[i]) != "assistant" {
            i += 1;
            continue;
        }
        let mut renames: Vec<String> = Vec::new();
        if let Some(Value::Array(items)) = messages[i].get_mut("content") {
            for b in items.iter_mut().filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall")) {
                let old = b.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
                let new = new_id(&old, mode, &taken);
                taken.insert(new.clone());
                if new != old {
                    repairs.push(Repair::RenamedToolCallId { from: old, to: new.clone() });
                    b["id"] = Value::from(new.clone());
                }
                renames.push(new);
            }
        }
        for (k, new) in renames.into_iter().enumerate() {
            if let Some(r) = messages.get_mut(i + 1 + k).filter(|r| role(r) == "toolResult") {
                r["toolCallId"] = Value::from(new);
            }
        }
        i += 1;
    }
}

fn content_blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// Step 4: turn order.
fn fix_turns(messages: Vec<Value>, rule: TurnRule, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let merge_role = match rule {
        TurnRule::None => return messages,
        TurnRule::MergeUsers => "user",
        TurnRule::MergeAssistants => "assistant",
    };
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    if rule == TurnRule::MergeAssistants && messages.first().is_some_and(|m| role(m) == "assistant") {
        repairs.push(Repair::PrependedBootstrap);
        out.push(json!({"role": "user", "content": "(session bootstrap)"}));
    }
    for m in messages {
        match out.last_mut() {
            Some(prev) if role(prev) == merge_role && role(&m) == merge_role => {
                let mut merged = content_blocks(prev);
                merged.extend(content_blocks(&m));
                let later = m.as_object().cloned().unwrap_or_default();
                if let Some(obj) = prev.as_object_mut() {
                    for (k, v) in later {
                        if k != "content" {
                            obj.insert(k, v);
                        }
                    }
                    obj.insert("content".to_owned(), Value::Array(merged));
                }
                repairs.push(Repair::MergedMessages { role: merge_role.to_owned() });
            }
            _ => out.push(m),
        }
    }
    out
}

/// OpenClaw's `limitHistoryTurns`: where the last `limit` user turns begin
/// (the index of the `limit`-th last user message), or 0 when there are no
/// more than `limit` user messages or `limit` is 0. Only real user messages
/// count (a compaction summary is not a turn), so apply it to the session's
/// messages before they become provider messages; pairing repair afterwards
/// drops the results whose calls were cut away.
pub fn history_limit_start(messages: &[AgentMessage<'_>], limit: usize) -> usize {
    if limit == 0 {
        return 0;
    }
    let mut users = 0;
    let mut start = messages.len();
    for (i, m) in messages.iter().enumerate().rev() {
        if m.message.role() == sessionlog_events::Role::User {
            users += 1;
            if users > limit {
                return start;
            }
            start = i;
        }
    }
    0
}

/// Runs the hygiene pipeline for `fam`.
pub fn hygiene(messages: Vec<Value>, fam: &Family) -> (Vec<Value>, Vec<Repair>) {
    let mut repairs = Vec::new();
    let messages = clean_blocks(messages, fam, &mut repairs);
    let mut messages = repair_pairing(messages, fam, &mut repairs);
    rewrite_ids(&mut messages, fam.tool_ids, &mut repairs);
    let messages = fix_turns(messages, fam.turns, &mut repairs);
    (messages, repairs)
}

/// The family's structural rules, checked: returns what is violated.
pub fn violations(messages: &[Value], fam: &Family) -> Vec<String> {
    let mut out = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        match role(m) {
            "assistant" => {
                for (k, (id, _)) in calls(m).into_iter().enumerate() {
                    let answer = messages.get(i + 1 + k);
                    let ok = answer.is_some_and(|r| {
                        role(r) == "toolResult"
                            && r.get("toolCallId").and_then(Value::as_str) == Some(id.as_str())
                    });
                    if !ok {
                        out.push(format!("call {id} at {i} is not answered in order"));
                    }
                    let valid = match fam.tool_ids {
                        ToolIdMode::Keep => !id.is_empty(),
                        ToolIdMode::Strict => {
                            (1..=40).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
                        }
                        ToolIdMode::Strict9 => id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
                    };
                    if !valid {
                        out.push(format!("call id {id:?} invalid for {}", fam.name));
                    }
                    if fam.tool_ids != ToolIdMode::Keep && ids.insert(id.clone(), i).is_some() {
                        out.push(format!("call id {id} repeated"));
                    }
                }
                i += 1 + calls(m).len();
            }
            "toolResult" => {
                out.push(format!("result at {i} does not follow its call"));
                i += 1;
            }
            _ => i += 1,
        }
    }
    for w in messages.windows(2) {
        let (a, b) = (role(&w[0]), role(&w[1]));
        match fam.turns {
            TurnRule::MergeUsers if a == "user" && b == "user" => {
                out.push("consecutive user messages".to_owned())
            }
            TurnRule::MergeAssistants if a == "assistant" && b == "assistant" => {
                out.push("consecutive assistant messages".to_owned())
            }
            _ => {}
        }
    }
    if fam.turns == TurnRule::MergeAssistants && messages.first().is_some_and(|m| role(m) == "assistant") {
        out.push("history starts with an assistant".to_owned());
    }
    out
}
