//! Typed constructors for every entry sessionlog writes, in the key order Pi
//! writes them (spec transcript-format §2, §4), so an entry we append reads
//! back in Pi exactly as one of its own.
//!
//! Each returns an [`Entry`] whose raw text is the line to append
//! (`JSON.stringify` of the object). Ids come from [`crate::ids`], times from
//! [`timestamp`]; nothing here reads a clock.

use serde_json::{Map, Value};

use crate::entry::{Entry, LineError};
use crate::json::js_number;

/// Where an entry sits in the tree: its id, its parent and when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    /// The entry's id (8 hex digits, see [`crate::ids`]).
    pub id: &'a str,
    /// The parent entry (`None` for a root: `parentId: null`).
    pub parent_id: Option<&'a str>,
    /// ISO time (see [`timestamp`]).
    pub timestamp: &'a str,
}

/// `new Date(ms).toISOString()`: `2026-03-01T00:00:00.000Z`; `None` out of range.
pub fn timestamp(ms: i64) -> Option<String> {
    let t = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

fn object(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn head_pairs(head: &Head<'_>) -> Vec<(&'static str, Value)> {
    vec![
        ("id", Value::from(head.id)),
        ("parentId", head.parent_id.map_or(Value::Null, Value::from)),
        ("timestamp", Value::from(head.timestamp)),
    ]
}

fn entry(kind: &str, head: &Head<'_>, fields: Vec<(&str, Value)>) -> Result<Entry, LineError> {
    let mut pairs = vec![("type", Value::from(kind))];
    pairs.extend(head_pairs(head));
    pairs.extend(fields);
    Entry::from_value(&Value::Object(object(pairs)))
}

/// A session header: `type, version, id, timestamp, cwd, parentSession`.
pub fn header(
    session_id: &str,
    timestamp: &str,
    cwd: &str,
    parent_session: Option<&str>,
) -> Result<Entry, LineError> {
    let mut pairs = vec![
        ("type", Value::from("session")),
        ("version", js_number(crate::CURRENT_VERSION)),
        ("id", Value::from(session_id)),
        ("timestamp", Value::from(timestamp)),
        ("cwd", Value::from(cwd)),
    ];
    if let Some(parent) = parent_session {
        pairs.push(("parentSession", Value::from(parent)));
    }
    Entry::from_value(&Value::Object(object(pairs)))
}

/// A `message` entry: `type, id, parentId, timestamp, message`.
pub fn message(head: &Head<'_>, message: &Value) -> Result<Entry, LineError> {
    entry("message", head, vec![("message", message.clone())])
}

/// A `model_change` entry: `type, id, parentId, timestamp, provider, modelId`.
pub fn model_change(head: &Head<'_>, provider: &str, model_id: &str) -> Result<Entry, LineError> {
    entry("model_change", head, vec![("provider", Value::from(provider)), ("modelId", Value::from(model_id))])
}

/// A `thinking_level_change` entry: `type, id, parentId, timestamp, thinkingLevel`.
pub fn thinking_level_change(head: &Head<'_>, level: &str) -> Result<Entry, LineError> {
    entry("thinking_level_change", head, vec![("thinkingLevel", Value::from(level))])
}

/// What a `compaction` entry says.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionFields<'a> {
    /// The summary text.
    pub summary: &'a str,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: &'a str,
    /// Context tokens before compacting (a JavaScript number).
    pub tokens_before: f64,
    /// `details` (Pi's file lists, and our ledger).
    pub details: Value,
    /// `fromHook` (Pi writes `false` for its own compactions).
    pub from_hook: bool,
    /// Pi 1.6's `systemMessage`: the system prompt and tools in force, kept
    /// on the compaction so the ones before the kept range are not lost.
    pub system_message: Option<Value>,
}

/// A `compaction` entry: `type, id, parentId, timestamp, summary,
/// firstKeptEntryId, tokensBefore, details, fromHook` (and Pi 1.6's
/// `systemMessage` last, when there is one).
pub fn compaction(head: &Head<'_>, fields: &CompactionFields<'_>) -> Result<Entry, LineError> {
    let mut pairs = vec![
        ("summary", Value::from(fields.summary)),
        ("firstKeptEntryId", Value::from(fields.first_kept_entry_id)),
        ("tokensBefore", js_number(fields.tokens_before)),
        ("details", fields.details.clone()),
        ("fromHook", Value::from(fields.from_hook)),
    ];
    if let Some(system) = &fields.system_message {
        pairs.push(("systemMessage", system.clone()));
    }
    entry("compaction", head, pairs)
}

/// A `custom` entry (extension state, never in the model's context):
/// `type, customType, data, id, parentId, timestamp`. Without a head the
/// entry has no place in the tree (Pi keeps and ignores it).
pub fn custom(head: Option<&Head<'_>>, custom_type: &str, data: &Value) -> Result<Entry, LineError> {
    let mut pairs = vec![
        ("type", Value::from("custom")),
        ("customType", Value::from(custom_type)),
        ("data", data.clone()),
    ];
    if let Some(head) = head {
        pairs.extend(head_pairs(head));
    }
    Entry::from_value(&Value::Object(object(pairs)))
}

/// A `custom_message` entry (in the model's context): `type, customType,
/// content, display, details, id, parentId, timestamp`.
pub fn custom_message(
    head: &Head<'_>,
    custom_type: &str,
    content: &Value,
    display: bool,
    details: Option<&Value>,
) -> Result<Entry, LineError> {
    let mut pairs = vec![
        ("type", Value::from("custom_message")),
        ("customType", Value::from(custom_type)),
        ("content", content.clone()),
        ("display", Value::from(display)),
    ];
    if let Some(details) = details {
        pairs.push(("details", details.clone()));
    }
    pairs.extend(head_pairs(head));
    Entry::from_value(&Value::Object(object(pairs)))
}

/// A `label` entry: `type, id, parentId, timestamp, targetId, label` (no
/// label clears the bookmark).
pub fn label(head: &Head<'_>, target_id: &str, label: Option<&str>) -> Result<Entry, LineError> {
    let mut fields = vec![("targetId", Value::from(target_id))];
    if let Some(text) = label {
        fields.push(("label", Value::from(text)));
    }
    entry("label", head, fields)
}

/// A `session_info` entry: `type, id, parentId, timestamp, name` (stored trimmed).
pub fn session_info(head: &Head<'_>, name: &str) -> Result<Entry, LineError> {
    entry("session_info", head, vec![("name", Value::from(crate::json::js_trim(name)))])
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Head<'static> = Head { id: "0a1b2c3d", parent_id: Some("99999999"), timestamp: "t" };

    #[test]
    fn entries_have_pi_key_orders() {
        // Expected lines written out by hand from spec transcript-format §2, §4.
        let check = |e: Result<Entry, LineError>, line: &str| assert_eq!(e.unwrap().raw(), line);
        check(
            header("s1", "t", "/w", None),
            r#"{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/w"}"#,
        );
        check(
            message(&HEAD, &serde_json::json!({"role": "user", "content": "hi"})),
            r#"{"type":"message","id":"0a1b2c3d","parentId":"99999999","timestamp":"t","message":{"role":"user","content":"hi"}}"#,
        );
        check(
            model_change(&Head { parent_id: None, ..HEAD }, "openai", "gpt"),
            r#"{"type":"model_change","id":"0a1b2c3d","parentId":null,"timestamp":"t","provider":"openai","modelId":"gpt"}"#,
        );
        check(
            thinking_level_change(&HEAD, "high"),
            r#"{"type":"thinking_level_change","id":"0a1b2c3d","parentId":"99999999","timestamp":"t","thinkingLevel":"high"}"#,
        );
        let fields = CompactionFields {
            summary: "s",
            first_kept_entry_id: "11111111",
            tokens_before: 1234.0,
            details: serde_json::json!({"readFiles": []}),
            from_hook: false,
            system_message: None,
        };
        check(
            compaction(&HEAD, &fields),
            r#"{"type":"compaction","id":"0a1b2c3d","parentId":"99999999","timestamp":"t","summary":"s","firstKeptEntryId":"11111111","tokensBefore":1234,"details":{"readFiles":[]},"fromHook":false}"#,
        );
        check(
            custom(Some(&HEAD), "x", &serde_json::json!(1)),
            r#"{"type":"custom","customType":"x","data":1,"id":"0a1b2c3d","parentId":"99999999","timestamp":"t"}"#,
        );
        check(custom(None, "x", &serde_json::json!({})), r#"{"type":"custom","customType":"x","data":{}}"#);
        check(
            custom_message(&HEAD, "x", &serde_json::json!("c"), true, None),
            r#"{"type":"custom_message","customType":"x","content":"c","display":true,"id":"0a1b2c3d","parentId":"99999999","timestamp":"t"}"#,
        );
        check(
            label(&HEAD, "11111111", Some("l")),
            r#"{"type":"label","id":"0a1b2c3d","parentId":"99999999","timestamp":"t","targetId":"11111111","label":"l"}"#,
        );
        check(
            session_info(&HEAD, " n "),
            r#"{"type":"session_info","id":"0a1b2c3d","parentId":"99999999","timestamp":"t","name":"n"}"#,
        );
    }

    #[test]
    fn timestamps_print_as_to_iso_string() {
        assert_eq!(timestamp(1_772_323_200_000).as_deref(), Some("2026-03-01T00:00:00.000Z"));
        assert_eq!(timestamp(5).as_deref(), Some("1970-01-01T00:00:00.005Z"));
        assert_eq!(timestamp(i64::MAX), None);
    }
}
