//! `sessionlog turn`: OpenClaw's per-turn session decision, printed and with `--apply` recorded.

use std::io::Write;

use anyhow::Result;
use sessionlog_sessions::policy::{resolve_reset, ResetConfig, ResetMode, ResetRule};
use sessionlog_sessions::turn::{Inbound, Turn, DEFAULT_RESET_TRIGGERS};

use crate::common::{now_or_clock, print_pretty, StoreSession};

/// One inbound turn (OpenClaw's initSessionState decision): reset trigger, then freshness;
/// prints whether the key's session carries on or starts anew, and records it with --apply.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store, agent and the session key the message routes to.
    #[command(flatten)]
    session: StoreSession,
    /// The message's command body.
    #[arg(long)]
    body: String,
    /// The sender may run commands (only then can a trigger reset).
    #[arg(long)]
    authorized: bool,
    /// A group or channel message (mention patterns are stripped before matching).
    #[arg(long)]
    group: bool,
    /// A heartbeat, cron or exec event: never resets, never counts as activity.
    #[arg(long)]
    system_event: bool,
    /// A mention pattern (regular expression) of the agent; repeatable.
    #[arg(long)]
    mention: Vec<String>,
    /// Reset triggers (default /new and /reset); repeatable.
    #[arg(long)]
    trigger: Vec<String>,
    /// daily (default, at --at-hour), idle (after --idle-minutes) or manual.
    #[arg(long, default_value = "daily")]
    reset_mode: ResetMode,
    /// Hour of the daily reset, host time.
    #[arg(long)]
    at_hour: Option<i64>,
    /// Idle minutes before a reset.
    #[arg(long)]
    idle_minutes: Option<i64>,
    /// The host's offset from UTC in minutes (the daily boundary is host time).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    utc_offset: i64,
    /// The time of the turn, ISO-8601 or Unix ms (default: now).
    #[arg(long)]
    now: Option<String>,
    /// Record the decision in the store (else only print it).
    #[arg(long)]
    apply: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let rule = ResetRule { mode: Some(a.reset_mode), at_hour: a.at_hour, idle_minutes: a.idle_minutes };
    let cfg = ResetConfig { base: Some(rule), ..ResetConfig::default() };
    let triggers: Vec<&str> = if a.trigger.is_empty() {
        DEFAULT_RESET_TRIGGERS.to_vec()
    } else {
        a.trigger.iter().map(String::as_str).collect()
    };
    let turn = Turn {
        key: &a.session.key,
        inbound: Inbound {
            body: &a.body,
            is_group: a.group,
            command_authorized: a.authorized,
            is_system_event: a.system_event,
            mention_patterns: &a.mention,
        },
        triggers: &triggers,
        rule: resolve_reset(&cfg, &a.session.key, None),
        now_ms: now_or_clock(a.now.as_deref())?,
        utc_offset_minutes: a.utc_offset,
    };
    print_pretty(out, &a.session.open().turn(&turn, a.apply)?.to_json())
}
