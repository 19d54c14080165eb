//! Calibration: which policy reproduces the compactions a transcript recorded.
//!
//! [`calibrate`] replays a prepared transcript under each [`candidates`]
//! policy (the presets over a grid of windows, keep-recent values and reserve
//! floors) and counts the recorded compactions each reproduces — a virtual
//! compaction after the same entry, with the same `firstKeptEntryId` and a
//! `tokensBefore` within 1% ([`reproduces`]). The best policy reproduces the
//! most (the fewest virtual compactions beside them, then a variant of
//! the preset the caller prefers — the one of the agent that wrote the
//! transcript — then the first in grid order). A recorded compaction that fired far below the best policy's
//! threshold (under [`ANOMALY_SHARE`] of it, like a 655-token compaction
//! right after a 182,705-token one) is an anomaly: reported, never fitted.
//! Manual compactions (`/compact`, Claude Code's `manual` trigger) follow no
//! threshold and are reported apart.

use rayon::prelude::*;
use serde::Serialize;
use sessionlog_compaction::{Extractive, Policy, Trigger};
use sessionlog_events::EntryKind;
use sessionlog_tokens::TokenCounter;

use crate::{replay_prepared, Measure, Prepared, RecordedCompaction, Replay, VirtualCompaction};

/// A recorded compaction under this share of the policy's threshold is an anomaly.
pub const ANOMALY_SHARE: f64 = 0.5;

/// Largest relative difference of `tokensBefore` for a reproduced compaction.
pub const TOKENS_TOLERANCE: f64 = 0.01;

/// Whether the virtual compaction `v` reproduces the recorded `r`: made after
/// the same entry, keeping from the same entry, `tokensBefore` within 1%.
pub fn reproduces(v: &VirtualCompaction, r: &RecordedCompaction) -> bool {
    let Some(tokens) = r.tokens_before else { return false };
    r.after_entry_id.is_some()
        && v.after_entry_id == r.after_entry_id
        && r.first_kept_entry_id.as_deref() == Some(v.outcome.first_kept_entry_id.as_str())
        && (v.outcome.tokens_before - tokens).abs() <= TOKENS_TOLERANCE * tokens
}

/// The policies calibration tries, in order: each preset as it is, then
/// over windows of 128k, 200k, 272k and 1M tokens × keep-recent (its own,
/// 20000) × reserve floor (its own, none); at its own window also reserves
/// of 16384, 33000 (Claude Code) and 77000 (Claude Code 2.0) and the
/// ratio triggers 0.8 and 0.9 (duplicates left out).
pub fn candidates() -> Vec<Policy> {
    let mut out: Vec<Policy> = Vec::new();
    let mut push = |p: Policy| {
        let same = |q: &Policy| Policy { name: String::new(), ..q.clone() };
        if !out.iter().any(|q| same(q) == same(&p)) {
            out.push(p);
        }
    };
    for base in sessionlog_compaction::PRESETS {
        let Some(preset) = Policy::preset(base) else { continue };
        for window in [preset.context_window, 128_000, 200_000, 272_000, 1_000_000] {
            for keep in [preset.keep_recent_tokens, 20_000] {
                for floor in [preset.reserve_tokens_floor, 0] {
                    push(Policy {
                        name: format!("{base}-w{window}-k{keep}-f{floor}"),
                        context_window: window,
                        keep_recent_tokens: keep,
                        reserve_tokens_floor: floor,
                        ..preset.clone()
                    });
                }
            }
        }
        for reserve in [16_384, 33_000, 77_000] {
            push(Policy { name: format!("{base}-r{reserve}"), reserve_tokens: reserve, ..preset.clone() });
        }
        for ratio in [0.8, 0.9] {
            push(Policy {
                name: format!("{base}-ratio{ratio}"),
                trigger: Trigger::Ratio(ratio),
                ..preset.clone()
            });
        }
    }
    out
}

/// What calibration found for one transcript (`calibrate --json` prints one per file).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    /// Recorded compactions on the path.
    pub recorded: u64,
    /// Of those, reproduced by the best policy.
    pub reproduced: u64,
    /// `reproduced / (recorded − anomalies − manual)` (1 when nothing is left to fit).
    pub match_rate: f64,
    /// Entry ids of recorded compactions that fired far below the best
    /// policy's threshold: reported, not fitted.
    pub anomalies: Vec<String>,
    /// Entry ids of manual compactions (no threshold to fit).
    pub manual: Vec<String>,
    /// The best policy found (the policy file's field names).
    pub policy: Policy,
    /// Policies tried.
    pub candidates: u64,
}

fn score(r: &Replay) -> (u64, u64) {
    let reproduced = r.recorded.iter().filter(|x| x.reproduced).count() as u64;
    let extra = r.compactions.len() as u64 - reproduced.min(r.compactions.len() as u64);
    (reproduced, extra)
}

/// Whether `policy` is one of [`candidates`]' variants of the preset `base`
/// (named `base-…` there) or the preset itself.
fn from_preset(policy: &Policy, base: &str) -> bool {
    policy.name.strip_prefix(base).is_some_and(|rest| rest.starts_with('-'))
        || Policy::preset(base).is_some_and(|p| p.name == policy.name)
}

/// The preset of the agent that writes transcripts in `format` (the names
/// reports give formats: `claude-code`, `codex-rollout`, `openclaw-sqlite`);
/// `None` for Pi JSONL, which Pi and OpenClaw both write.
pub fn preset_for_format(format: &str) -> Option<&'static str> {
    match format {
        "claude-code" => Some("claude-code"),
        "codex-rollout" => Some("codex"),
        "openclaw-sqlite" => Some("openclaw"),
        _ => None,
    }
}

/// Replays `prepared` under every candidate (extractive summariser, the
/// usage-calibrated measure) and reports the best; among policies that fit
/// equally well, a variant of the preset `prefer` wins over the others
/// (`None`: the first in grid order). `None` when the transcript recorded
/// no compaction.
pub fn calibrate(
    prepared: &Prepared<'_>,
    counter: &(dyn TokenCounter + Sync),
    candidates: &[Policy],
    prefer: Option<&str>,
) -> Option<Calibration> {
    if !prepared.path.iter().any(|e| matches!(e.kind, EntryKind::Compaction(_))) {
        return None;
    }
    let replays: Vec<Replay> = candidates
        .par_iter()
        .map(|policy| replay_prepared(prepared, policy, &mut Extractive, counter, Measure::Usage))
        .collect();
    let preferred = |r: &Replay| prefer.is_some_and(|base| from_preset(&r.policy, base));
    let mut best: Option<((u64, u64), Replay)> = None;
    for r in replays {
        let s = score(&r);
        let better = match &best {
            None => true,
            Some((b, current)) => {
                s.0 > b.0 || (s.0 == b.0 && s.1 < b.1) || (s == *b && preferred(&r) && !preferred(current))
            }
        };
        if better {
            best = Some((s, r));
        }
    }
    let (_, r) = best?;
    let id = |x: &RecordedCompaction| x.entry_id.clone().unwrap_or_default();
    let manual: Vec<String> =
        r.recorded.iter().filter(|x| x.trigger.as_deref() == Some("manual")).map(id).collect();
    let anomalies: Vec<String> = r
        .recorded
        .iter()
        .filter(|x| x.trigger.as_deref() != Some("manual") && !x.reproduced)
        .filter(|x| x.tokens_before.unwrap_or(0.0) < ANOMALY_SHARE * r.threshold)
        .map(id)
        .collect();
    let reproduced = r.recorded.iter().filter(|x| x.reproduced).count() as u64;
    let recorded = r.recorded.len() as u64;
    let fitted = recorded - anomalies.len() as u64 - manual.len() as u64;
    Some(Calibration {
        recorded,
        reproduced,
        match_rate: if fitted == 0 { 1.0 } else { reproduced as f64 / fitted as f64 },
        anomalies,
        manual,
        policy: r.policy,
        candidates: candidates.len() as u64,
    })
}
