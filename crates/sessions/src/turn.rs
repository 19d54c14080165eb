//! The per-turn session decision of OpenClaw's `initSessionState` (spec
//! sessions §5.3 steps 2–4): is the inbound message a reset trigger, and does
//! the key's session carry on or start a new generation? Pure: the stored
//! entry, the message, the rule and the clock come in; the decision goes out,
//! and [`plan`] turns it into the one store event that records it.

use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::LazyLock;

use crate::keys::normalize_key;
use crate::policy::{stale_reason, ResolvedReset};
use crate::store::{Store, StoreEvent};

/// OpenClaw's default `session.resetTriggers`.
pub const DEFAULT_RESET_TRIGGERS: [&str; 2] = ["/new", "/reset"];

/// The marker a batched group message puts before the message to answer.
pub const CURRENT_MESSAGE_MARKER: &str = "[Current message - respond to this]";

static BRACKETED: LazyLock<Regex> = LazyLock::new(|| regex(r"\[[^\]]+\]\s*"));
static SENDER_LABEL: LazyLock<Regex> = LazyLock::new(|| regex(r"(?m)^[ \t]*[A-Za-z0-9+()\-_. ]+:\s*"));
static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| regex(r"\s+"));
static PHONE_MENTION: LazyLock<Regex> = LazyLock::new(|| regex(r"@[0-9+]{5,}"));

fn regex(pattern: &str) -> Regex {
    // Constants of this module; a typo is a bug its tests catch.
    Regex::new(pattern).unwrap_or_else(|e| panic!("turn pattern {pattern}: {e}"))
}

/// Drops what wraps a message before its text: everything up to the
/// current-message marker, bracketed labels and timestamps, `Sender:` labels
/// at line starts, literal `\n` escapes; whitespace collapsed and trimmed.
pub fn strip_structural_prefixes(text: &str) -> String {
    let after = match text.find(CURRENT_MESSAGE_MARKER) {
        Some(at) => text[at + CURRENT_MESSAGE_MARKER.len()..].trim_start(),
        None => text,
    };
    let s = BRACKETED.replace_all(after, "");
    let s = SENDER_LABEL.replace_all(&s, "");
    let s = s.replace("\\n", " ");
    WHITESPACE.replace_all(&s, " ").trim().to_owned()
}

/// Removes the agent's mention patterns (case-insensitive regular
/// expressions; an invalid one is skipped) and `@`-phone-number mentions.
pub fn strip_mentions(text: &str, patterns: &[String]) -> String {
    let mut out = text.to_owned();
    for p in patterns {
        if let Ok(re) = Regex::new(&format!("(?i){p}")) {
            out = re.replace_all(&out, " ").into_owned();
        }
    }
    let out = PHONE_MENTION.replace_all(&out, " ");
    WHITESPACE.replace_all(&out, " ").trim().to_owned()
}

/// An inbound message as the turn decision sees it.
#[derive(Debug, Clone, Default)]
pub struct Inbound<'a> {
    /// The command body (the message text without history context).
    pub body: &'a str,
    /// A group or channel message (mentions are stripped before matching).
    pub is_group: bool,
    /// The sender may run commands (only they can reset).
    pub command_authorized: bool,
    /// A heartbeat, cron or exec event: never resets, never starts a session of its own.
    pub is_system_event: bool,
    /// The agent's mention patterns for groups.
    pub mention_patterns: &'a [String],
}

/// A matched reset trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerMatch {
    /// The trigger, lowercased.
    pub trigger: String,
    /// What follows it (original case): the prompt of the new session; empty for a bare trigger.
    pub remainder: String,
}

/// The reset trigger `inbound` starts with, if its sender may reset: the body
/// (or its stripped form) equal to a trigger, or starting with the trigger and
/// a space, compared case-insensitively.
pub fn match_reset_trigger(inbound: &Inbound<'_>, triggers: &[&str]) -> Option<TriggerMatch> {
    if !inbound.command_authorized || inbound.is_system_event {
        return None;
    }
    let normalized = strip_structural_prefixes(inbound.body);
    let stripped =
        if inbound.is_group { strip_mentions(&normalized, inbound.mention_patterns) } else { normalized };
    let body_lower = inbound.body.trim().to_lowercase();
    let stripped_lower = stripped.to_lowercase();
    for trigger in triggers.iter().filter(|t| !t.is_empty()) {
        let t = trigger.to_lowercase();
        if body_lower == t || stripped_lower == t {
            return Some(TriggerMatch { trigger: t, remainder: String::new() });
        }
        let prefix = format!("{t} ");
        if body_lower.starts_with(&prefix) || stripped_lower.starts_with(&prefix) {
            let remainder = stripped.get(trigger.len()..).unwrap_or("").trim_start().to_owned();
            return Some(TriggerMatch { trigger: t, remainder });
        }
    }
    None
}

/// What the turn does to the key's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum Decision {
    /// The stored session carries on.
    Reuse,
    /// A new session: `first` (no usable entry), `new` or `reset` (a
    /// trigger), `daily` or `idle` (the stored one expired).
    New {
        /// Why.
        reason: &'static str,
    },
}

/// The decision for one inbound turn on a key whose stored entry is `stored`.
pub fn decide(
    stored: Option<&Map<String, Value>>,
    trigger: Option<&TriggerMatch>,
    is_system_event: bool,
    rule: &ResolvedReset,
    now_ms: i64,
    utc_offset_minutes: i64,
) -> Decision {
    let usable = stored.filter(|e| {
        e.get("sessionId").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
            && e.get("updatedAt").and_then(Value::as_f64).is_some_and(f64::is_finite)
    });
    if let Some(t) = trigger {
        return Decision::New { reason: if t.trigger == "/reset" { "reset" } else { "new" } };
    }
    let Some(entry) = usable else { return Decision::New { reason: "first" } };
    if is_system_event {
        return Decision::Reuse;
    }
    match stale_reason(entry, rule, now_ms, utc_offset_minutes) {
        Some(reason) => Decision::New { reason },
        None => Decision::Reuse,
    }
}

/// One inbound turn on a store: the message, the key it routed to, and the
/// rules in force.
#[derive(Debug, Clone)]
pub struct Turn<'a> {
    /// The session key (normalised before use).
    pub key: &'a str,
    /// The message.
    pub inbound: Inbound<'a>,
    /// The reset triggers (OpenClaw's default: [`DEFAULT_RESET_TRIGGERS`]).
    pub triggers: &'a [&'a str],
    /// The reset rule for the key.
    pub rule: ResolvedReset,
    /// The time of the turn (Unix ms).
    pub now_ms: i64,
    /// The host's offset from UTC in minutes (the daily boundary is host time).
    pub utc_offset_minutes: i64,
}

/// What a turn does to the store, before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPlan {
    /// The normalised key.
    pub key: String,
    /// The reset trigger the message matched.
    pub trigger: Option<TriggerMatch>,
    /// Reuse or a new generation, and why.
    pub decision: Decision,
    /// What the model is asked: the message, or what followed the trigger.
    pub prompt: String,
    /// The session the turn runs in.
    pub session_id: String,
    /// The key's session before the turn.
    pub previous_session_id: Option<String>,
    /// The event that records the turn: activity (`patched`), `created` or `reset`.
    pub event: StoreEvent,
    /// The transcript the new generation replaces (session id and its
    /// `sessionFile`): archived as `<file>.reset.<time>` once the event is in the log.
    pub archive: Option<(String, Option<String>)>,
}

/// A session id for a new generation of `key`: UUID-shaped, derived from the
/// key, the time and the length of the store's log, so the same turn on the
/// same store always mints the same id.
pub fn new_session_id(key: &str, now_ms: i64, log_len: usize) -> String {
    sessionlog_events::ids::session_id(&format!("{key}\n{now_ms}\n{log_len}"))
}

/// Plans `turn` on `store` (whose log holds `log_len` events): the trigger,
/// the decision, and the event to append.
pub fn plan(turn: &Turn<'_>, store: &Store, log_len: usize) -> TurnPlan {
    let key = normalize_key(turn.key);
    let stored = store.get(&key).and_then(Value::as_object);
    let trigger = match_reset_trigger(&turn.inbound, turn.triggers);
    let system = turn.inbound.is_system_event;
    let decision = decide(stored, trigger.as_ref(), system, &turn.rule, turn.now_ms, turn.utc_offset_minutes);
    let previous = stored.and_then(|e| e.get("sessionId")).and_then(Value::as_str).map(str::to_owned);
    let (session_id, event) = match &decision {
        Decision::Reuse => {
            let activity = StoreEvent::Patched {
                key: key.clone(),
                at: turn.now_ms,
                patch: Map::new(),
                preserve_activity: system,
            };
            (previous.clone().unwrap_or_default(), activity)
        }
        Decision::New { reason } => {
            let id = new_session_id(&key, turn.now_ms, log_len);
            let event = if stored.is_some() {
                StoreEvent::Reset {
                    key: key.clone(),
                    at: turn.now_ms,
                    session_id: id.clone(),
                    reason: (*reason).to_owned(),
                }
            } else {
                StoreEvent::Created {
                    key: key.clone(),
                    session_id: id.clone(),
                    at: turn.now_ms,
                    reason: "inbound".to_owned(),
                    fields: Map::new(),
                    provenance: None,
                }
            };
            (id, event)
        }
    };
    // A replaced generation's transcript is archived, never deleted.
    let archive = match (&decision, &previous, stored) {
        (Decision::New { .. }, Some(old), Some(entry)) => {
            Some((old.clone(), entry.get("sessionFile").and_then(Value::as_str).map(str::to_owned)))
        }
        _ => None,
    };
    let prompt = match &trigger {
        Some(t) => t.remainder.clone(),
        None => turn.inbound.body.to_owned(),
    };
    TurnPlan { key, trigger, decision, prompt, session_id, previous_session_id: previous, event, archive }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::ResetMode;

    fn inbound(body: &str) -> Inbound<'_> {
        Inbound { body, command_authorized: true, ..Inbound::default() }
    }

    fn matched(i: &Inbound<'_>) -> Option<(String, String)> {
        match_reset_trigger(i, &DEFAULT_RESET_TRIGGERS).map(|m| (m.trigger, m.remainder))
    }

    fn m(t: &str, r: &str) -> Option<(String, String)> {
        Some((t.to_owned(), r.to_owned()))
    }

    #[test]
    fn structural_prefixes_are_stripped() {
        assert_eq!(strip_structural_prefixes("[Dec 4 17:35] /new"), "/new");
        assert_eq!(
            strip_structural_prefixes("history\n[Current message - respond to this]\n  Bob: /reset now"),
            "/reset now"
        );
        assert_eq!(strip_structural_prefixes("Alice (admin): hi\\nthere"), "hi there");
        assert_eq!(strip_structural_prefixes("  a \t b  "), "a b");
    }

    #[test]
    fn mentions_are_stripped_in_groups() {
        let patterns = vec!["@?openclaw\\b".to_owned(), "(".to_owned()];
        assert_eq!(strip_mentions("@OpenClaw /new", &patterns), "/new");
        assert_eq!(strip_mentions("@4915112345678 /reset", &[]), "/reset");
    }

    #[test]
    fn triggers_match_bare_or_with_a_prompt_in_any_case() {
        assert_eq!(matched(&inbound("/new")), m("/new", ""));
        assert_eq!(matched(&inbound("  /NEW  ")), m("/new", ""));
        assert_eq!(matched(&inbound("/reset Plan the Trip")), m("/reset", "Plan the Trip"));
        assert_eq!(matched(&inbound("[Mon 09:00] /new fix /srv/App")), m("/new", "fix /srv/App"));
        // Not a trigger: a longer word, or mid-sentence.
        assert_eq!(matched(&inbound("/newsletter")), None);
        assert_eq!(matched(&inbound("please /new")), None);
        // Only authorised senders reset; system events never do.
        assert_eq!(matched(&Inbound { command_authorized: false, ..inbound("/new") }), None);
        assert_eq!(matched(&Inbound { is_system_event: true, ..inbound("/new") }), None);
        // In a group the bot mention is stripped first.
        let patterns = vec!["@bot".to_owned()];
        let group = Inbound { is_group: true, mention_patterns: &patterns, ..inbound("@bot /new hello") };
        assert_eq!(matched(&group), m("/new", "hello"));
        // Configured triggers replace the defaults.
        assert_eq!(
            match_reset_trigger(&inbound("!fresh start"), &["!fresh"]).map(|t| t.remainder),
            Some("start".to_owned())
        );
    }

    const HOUR: i64 = 3_600_000;

    fn entry(updated_at: i64) -> Map<String, Value> {
        json!({"sessionId": "s1", "updatedAt": updated_at}).as_object().unwrap().clone()
    }

    #[test]
    fn the_decision_follows_triggers_then_freshness() {
        let daily = ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 0 };
        let idle = ResolvedReset { mode: ResetMode::Idle, at_hour: 4, idle_minutes: 60 };
        let manual = ResolvedReset { mode: ResetMode::Manual, at_hour: 4, idle_minutes: 0 };
        // 2026-03-02T10:00Z; the daily boundary is 04:00 that day.
        let now = 1_772_445_600_000;
        let before_boundary = entry(now - 7 * HOUR);
        let after_boundary = entry(now - 5 * HOUR);
        assert_eq!(
            decide(Some(&before_boundary), None, false, &daily, now, 0),
            Decision::New { reason: "daily" }
        );
        assert_eq!(decide(Some(&after_boundary), None, false, &daily, now, 0), Decision::Reuse);
        // UTC+2: the boundary is 02:00Z, so the 03:00Z update is fresh.
        assert_eq!(decide(Some(&before_boundary), None, false, &daily, now, 120), Decision::Reuse);
        assert_eq!(
            decide(Some(&entry(now - 61 * 60_000)), None, false, &idle, now, 0),
            Decision::New { reason: "idle" }
        );
        assert_eq!(decide(Some(&entry(now - 59 * 60_000)), None, false, &idle, now, 0), Decision::Reuse);
        assert_eq!(decide(Some(&entry(0)), None, false, &manual, now, 0), Decision::Reuse);
        // Triggers win; `/reset` and anything else name themselves.
        let reset = TriggerMatch { trigger: "/reset".into(), remainder: String::new() };
        let new = TriggerMatch { trigger: "/new".into(), remainder: String::new() };
        assert_eq!(
            decide(Some(&after_boundary), Some(&reset), false, &daily, now, 0),
            Decision::New { reason: "reset" }
        );
        assert_eq!(decide(None, Some(&new), false, &daily, now, 0), Decision::New { reason: "new" });
        // No usable entry: a first session; a system event keeps even a stale one.
        assert_eq!(decide(None, None, false, &daily, now, 0), Decision::New { reason: "first" });
        let no_id = json!({"updatedAt": now}).as_object().unwrap().clone();
        assert_eq!(decide(Some(&no_id), None, false, &daily, now, 0), Decision::New { reason: "first" });
        assert_eq!(decide(Some(&before_boundary), None, true, &daily, now, 0), Decision::Reuse);
    }

    #[test]
    fn a_plan_records_the_decision_as_one_event_and_names_the_transcript_to_archive() {
        let daily = ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 0 };
        let now = 1_772_445_600_000; // 2026-03-02T10:00Z
        let store: Store = serde_json::from_value(json!({
            "agent:main:main": {"sessionId": "s1", "updatedAt": now - HOUR, "sessionFile": "s1-topic.jsonl"}
        }))
        .unwrap();
        let turn = |body: &'static str, key: &'static str| Turn {
            key,
            inbound: Inbound { body, command_authorized: true, ..Inbound::default() },
            triggers: &DEFAULT_RESET_TRIGGERS,
            rule: daily,
            now_ms: now,
            utc_offset_minutes: 0,
        };
        let reuse = plan(&turn("hello", "Agent:Main:Main"), &store, 1);
        assert_eq!(
            (reuse.key.as_str(), reuse.session_id.as_str(), reuse.archive.clone()),
            ("agent:main:main", "s1", None)
        );
        assert!(matches!(reuse.event, StoreEvent::Patched { at, preserve_activity: false, .. } if at == now));
        let reset = plan(&turn("/reset plan it", "agent:main:main"), &store, 1);
        assert_eq!(reset.prompt, "plan it");
        assert_eq!(reset.session_id, new_session_id("agent:main:main", now, 1));
        assert!(
            matches!(&reset.event, StoreEvent::Reset { reason, session_id, .. } if reason == "reset" && *session_id == reset.session_id)
        );
        assert_eq!(reset.archive, Some(("s1".to_owned(), Some("s1-topic.jsonl".to_owned()))));
        let first = plan(&turn("hi", "agent:main:other"), &store, 1);
        assert!(matches!(&first.event, StoreEvent::Created { reason, .. } if reason == "inbound"));
        assert_eq!((first.previous_session_id, first.archive), (None, None));
    }
}
