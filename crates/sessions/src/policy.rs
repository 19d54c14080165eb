//! Reset freshness and send policy as pure functions (spec sessions §5.1,
//! §5.2, §6.1). The clock and the host's UTC offset come in as arguments.

use serde_json::{Map, Value};

use crate::keys::{chat_type, normalize_key, parse_agent_key, ChatType};

/// How a session expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResetMode {
    /// A new session every day at `at_hour` (the file era's default, at 4).
    #[default]
    Daily,
    /// A new session after `idle_minutes` without activity.
    Idle,
    /// Only `/new` and `/reset` start a new session.
    Manual,
}

impl std::str::FromStr for ResetMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "daily" => Ok(ResetMode::Daily),
            "idle" => Ok(ResetMode::Idle),
            "manual" => Ok(ResetMode::Manual),
            other => Err(format!("unknown reset mode `{other}` (daily, idle, manual)")),
        }
    }
}

/// One reset rule (`session.reset`, or a per-type / per-channel override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResetRule {
    /// Mode, if set.
    pub mode: Option<ResetMode>,
    /// Hour of the daily boundary, if set.
    pub at_hour: Option<i64>,
    /// Idle minutes, if set.
    pub idle_minutes: Option<i64>,
}

/// Reset configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetConfig {
    /// `session.reset`.
    pub base: Option<ResetRule>,
    /// `session.resetByType.direct`.
    pub direct: Option<ResetRule>,
    /// `session.resetByType.group`.
    pub group: Option<ResetRule>,
    /// `session.resetByType.thread`.
    pub thread: Option<ResetRule>,
    /// `session.resetByChannel`.
    pub by_channel: Vec<(String, ResetRule)>,
    /// Legacy `session.idleMinutes`.
    pub legacy_idle_minutes: Option<i64>,
}

/// The kind of conversation a reset rule is chosen for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetType {
    /// A direct message.
    Direct,
    /// A group or channel.
    Group,
    /// A thread or topic.
    Thread,
}

/// The reset type of a key (thread/topic suffix, group or channel, else direct).
pub fn reset_type(key: &str) -> ResetType {
    let k = normalize_key(key);
    if k.contains(":thread:") || k.contains(":topic:") {
        ResetType::Thread
    } else if k.contains(":group:") || k.contains(":channel:") {
        ResetType::Group
    } else {
        ResetType::Direct
    }
}

/// The resolved rule: mode, daily hour, idle minutes (0 = no idle expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedReset {
    /// Mode.
    pub mode: ResetMode,
    /// Hour of the daily boundary, 0–23.
    pub at_hour: i64,
    /// Idle minutes (0 = off).
    pub idle_minutes: i64,
}

/// Resolves the rule for a key on a channel (file era: default daily at 4, idle 60 when idle).
pub fn resolve_reset(cfg: &ResetConfig, key: &str, channel: Option<&str>) -> ResolvedReset {
    let channel_rule = channel
        .and_then(|c| cfg.by_channel.iter().find(|(ch, _)| ch.eq_ignore_ascii_case(c)).map(|(_, r)| *r));
    let base = channel_rule.or(cfg.base);
    let by_type = if channel_rule.is_some() {
        None
    } else {
        match reset_type(key) {
            ResetType::Direct => cfg.direct,
            ResetType::Group => cfg.group,
            ResetType::Thread => cfg.thread,
        }
    };
    let no_config = cfg.base.is_none()
        && cfg.by_channel.is_empty()
        && cfg.direct.is_none()
        && cfg.group.is_none()
        && cfg.thread.is_none();
    let legacy = if channel_rule.is_some() { None } else { cfg.legacy_idle_minutes };
    let mode = by_type
        .and_then(|r| r.mode)
        .or(base.and_then(|r| r.mode))
        .unwrap_or(if no_config && legacy.is_some() { ResetMode::Idle } else { ResetMode::Daily });
    let at_hour = by_type.and_then(|r| r.at_hour).or(base.and_then(|r| r.at_hour)).unwrap_or(4).clamp(0, 23);
    let idle = by_type.and_then(|r| r.idle_minutes).or(base.and_then(|r| r.idle_minutes)).or(legacy);
    let idle_minutes = match idle {
        Some(m) => m.max(1),
        None if mode == ResetMode::Idle => 60,
        None => 0,
    };
    ResolvedReset { mode, at_hour, idle_minutes }
}

const DAY_MS: i64 = 86_400_000;

/// The last daily boundary at or before `now_ms` (hour `at_hour` in a zone
/// `utc_offset_minutes` east of UTC).
pub fn daily_boundary(now_ms: i64, at_hour: i64, utc_offset_minutes: i64) -> i64 {
    let offset = utc_offset_minutes * 60_000;
    let local = now_ms + offset;
    let today = local.div_euclid(DAY_MS) * DAY_MS + at_hour * 3_600_000;
    let boundary = if local < today { today - DAY_MS } else { today };
    boundary - offset
}

/// Why an entry is stale at `now_ms`, if it is: `daily` (last active before
/// the latest daily boundary) is checked first, then `idle` (file era: both
/// anchors are `updatedAt`).
pub fn stale_reason(
    entry: &Map<String, Value>,
    rule: &ResolvedReset,
    now_ms: i64,
    utc_offset_minutes: i64,
) -> Option<&'static str> {
    if rule.mode == ResetMode::Manual {
        return None;
    }
    let anchor = entry.get("updatedAt").and_then(Value::as_f64).map_or(0, |t| t as i64);
    if rule.mode == ResetMode::Daily && anchor < daily_boundary(now_ms, rule.at_hour, utc_offset_minutes) {
        return Some("daily");
    }
    if rule.idle_minutes > 0 && now_ms > anchor + rule.idle_minutes * 60_000 {
        return Some("idle");
    }
    None
}

/// Whether an entry is still fresh at `now_ms` ("whichever expires first").
pub fn is_fresh(
    entry: &Map<String, Value>,
    rule: &ResolvedReset,
    now_ms: i64,
    utc_offset_minutes: i64,
) -> bool {
    stale_reason(entry, rule, now_ms, utc_offset_minutes).is_none()
}

/// Allow or deny sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    /// Sending is allowed.
    Allow,
    /// Sending is denied.
    Deny,
}

/// A send-policy rule (`session.sendPolicy.rules[]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendRule {
    /// `deny`, else allow.
    pub deny: bool,
    /// Channel to match.
    pub channel: Option<String>,
    /// Chat type to match.
    pub chat_type: Option<ChatType>,
    /// Prefix of the key, with or without its `agent:<a>:`.
    pub key_prefix: Option<String>,
    /// Prefix of the raw key.
    pub raw_key_prefix: Option<String>,
}

/// `session.sendPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendPolicy {
    /// Rules in order.
    pub rules: Vec<SendRule>,
    /// Default when no rule allows (none = allow).
    pub default_deny: bool,
}

fn channel_from_key(key: &str) -> Option<String> {
    let rest = parse_agent_key(key)?.rest;
    let first = rest.split(':').next()?;
    (!matches!(first, "main" | "direct" | "dm" | "cron" | "subagent" | "acp" | "hook"))
        .then(|| first.to_owned())
}

/// Resolves the send policy for a session (spec §6.1): the entry's override,
/// then the rules (first matching deny wins), then the default.
pub fn resolve_send(
    entry: Option<&Map<String, Value>>,
    key: &str,
    channel: Option<&str>,
    ct: Option<ChatType>,
    policy: Option<&SendPolicy>,
) -> Send {
    let field = |k: &str| entry.and_then(|e| e.get(k)).and_then(Value::as_str).map(str::to_lowercase);
    match field("sendPolicy").as_deref() {
        Some("allow") => return Send::Allow,
        Some("deny") => return Send::Deny,
        _ => {}
    }
    let Some(policy) = policy else { return Send::Allow };
    let ch = channel
        .map(str::to_lowercase)
        .or_else(|| field("channel"))
        .or_else(|| field("lastChannel"))
        .or_else(|| channel_from_key(key));
    let chat = ct.or_else(|| match field("chatType").as_deref() {
        Some("direct") => Some(ChatType::Direct),
        Some("group") => Some(ChatType::Group),
        Some("channel" | "room") => Some(ChatType::Channel),
        _ => None,
    });
    let chat = chat.unwrap_or_else(|| chat_type(key));
    let lower = key.to_lowercase();
    let stripped = parse_agent_key(key).map(|k| k.rest);
    let mut saw_allow = false;
    for rule in &policy.rules {
        if rule.channel.as_ref().is_some_and(|c| Some(c.to_lowercase()) != ch) {
            continue;
        }
        if rule.chat_type.is_some_and(|c| c != chat) {
            continue;
        }
        if rule.raw_key_prefix.as_ref().is_some_and(|p| !lower.starts_with(&p.to_lowercase())) {
            continue;
        }
        if let Some(p) = &rule.key_prefix {
            let p = p.to_lowercase();
            if !lower.starts_with(&p) && !stripped.as_ref().is_some_and(|s| s.starts_with(&p)) {
                continue;
            }
        }
        if rule.deny {
            return Send::Deny;
        }
        saw_allow = true;
    }
    if saw_allow || !policy.default_deny {
        Send::Allow
    } else {
        Send::Deny
    }
}
