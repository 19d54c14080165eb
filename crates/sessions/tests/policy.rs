//! Reset freshness and send policy, table-driven, with the clock passed in.

use serde_json::{json, Map, Value};
use sessionlog_sessions::keys::ChatType;
use sessionlog_sessions::policy::*;

const H: i64 = 3_600_000;
/// 2026-01-05T00:00:00Z.
const DAY0: i64 = 1_767_571_200_000;

fn entry(updated_at: i64) -> Map<String, Value> {
    json!({"sessionId": "s", "updatedAt": updated_at}).as_object().cloned().unwrap()
}

#[test]
fn freshness_whichever_expires_first() {
    let daily = ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 0 };
    let idle = ResolvedReset { mode: ResetMode::Idle, at_hour: 4, idle_minutes: 60 };
    let both = ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 30 };
    let manual = ResolvedReset { mode: ResetMode::Manual, at_hour: 4, idle_minutes: 1 };
    // (rule, updatedAt, now, utc offset minutes, fresh)
    let cases = [
        (daily, DAY0 + 5 * H, DAY0 + 23 * H, 0, true), // same day after 04:00
        (daily, DAY0 + 3 * H, DAY0 + 5 * H, 0, false), // crossed today's 04:00
        (daily, DAY0 + 5 * H, DAY0 + 24 * H + 3 * H, 0, true), // next day before 04:00
        (daily, DAY0 + 5 * H, DAY0 + 24 * H + 4 * H, 0, false),
        // In UTC+2, 04:00 local is 02:00 UTC.
        (daily, DAY0 + H, DAY0 + 3 * H, 120, false),
        (daily, DAY0 + 2 * H + 1, DAY0 + 3 * H, 120, true),
        (idle, DAY0, DAY0 + 60 * 60_000, 0, true),
        (idle, DAY0, DAY0 + 60 * 60_000 + 1, 0, false),
        (both, DAY0 + 5 * H, DAY0 + 5 * H + 31 * 60_000, 0, false), // idle first
        (manual, 0, DAY0 * 2, 0, true),
    ];
    for (i, (rule, updated, now, offset, fresh)) in cases.into_iter().enumerate() {
        assert_eq!(is_fresh(&entry(updated), &rule, now, offset), fresh, "case {i}");
    }
}

#[test]
fn reset_rules_resolve_by_channel_then_type() {
    let rule = |mode, idle| ResetRule { mode: Some(mode), at_hour: None, idle_minutes: idle };
    let cfg = ResetConfig {
        base: Some(rule(ResetMode::Daily, None)),
        group: Some(rule(ResetMode::Idle, Some(120))),
        thread: Some(rule(ResetMode::Manual, None)),
        by_channel: vec![(
            "discord".into(),
            ResetRule { mode: Some(ResetMode::Idle), at_hour: Some(30), idle_minutes: Some(0) },
        )],
        ..ResetConfig::default()
    };
    assert_eq!(
        resolve_reset(&cfg, "agent:main:main", None),
        ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 0 }
    );
    assert_eq!(resolve_reset(&cfg, "agent:main:telegram:group:1", None).idle_minutes, 120);
    assert_eq!(resolve_reset(&cfg, "agent:main:telegram:group:1:topic:2", None).mode, ResetMode::Manual);
    // A channel override replaces the base and disables the per-type rules; hours clamp, idle >= 1.
    let d = resolve_reset(&cfg, "agent:main:discord:group:1", Some("Discord"));
    assert_eq!(d, ResolvedReset { mode: ResetMode::Idle, at_hour: 23, idle_minutes: 1 });
    // Only a legacy idleMinutes: idle mode.
    let legacy = ResetConfig { legacy_idle_minutes: Some(45), ..ResetConfig::default() };
    assert_eq!(
        resolve_reset(&legacy, "agent:main:main", None),
        ResolvedReset { mode: ResetMode::Idle, at_hour: 4, idle_minutes: 45 }
    );
    assert_eq!(
        resolve_reset(&ResetConfig::default(), "k", None),
        ResolvedReset { mode: ResetMode::Daily, at_hour: 4, idle_minutes: 0 }
    );
}

#[test]
fn send_policy_override_then_rules_then_default() {
    let policy = SendPolicy {
        rules: vec![
            SendRule {
                deny: true,
                channel: Some("discord".into()),
                chat_type: Some(ChatType::Channel),
                ..SendRule::default()
            },
            SendRule { deny: false, key_prefix: Some("cron:".into()), ..SendRule::default() },
            SendRule { deny: true, raw_key_prefix: Some("agent:ops:".into()), ..SendRule::default() },
        ],
        default_deny: true,
    };
    let e = |v: Value| v.as_object().cloned().unwrap();
    type Case<'a> = (Option<Map<String, Value>>, &'a str, Option<&'a str>, Send);
    let cases: Vec<Case<'_>> = vec![
        (Some(e(json!({"sendPolicy": "ALLOW"}))), "agent:main:discord:channel:1", None, Send::Allow),
        (None, "agent:main:discord:channel:1", None, Send::Deny),
        (None, "agent:main:discord:group:1", None, Send::Deny), // no rule allows; default deny
        (None, "agent:main:cron:job1", None, Send::Allow),      // keyPrefix without the agent prefix
        // An earlier allow does not stop the loop: any matching deny wins.
        (None, "agent:ops:cron:job1", None, Send::Deny),
        (None, "agent:ops:main", None, Send::Deny),
        (
            Some(e(json!({"lastChannel": "discord", "chatType": "channel"}))),
            "agent:main:main",
            None,
            Send::Deny,
        ),
    ];
    for (entry, key, channel, want) in cases {
        assert_eq!(resolve_send(entry.as_ref(), key, channel, None, Some(&policy)), want, "{key}");
    }
    assert_eq!(
        resolve_send(None, "agent:main:discord:channel:1", None, None, None),
        Send::Allow,
        "no policy: allow"
    );
}
