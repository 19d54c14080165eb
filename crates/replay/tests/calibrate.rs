//! Calibration on a real transcript whose recording agent and its settings
//! are known: Pi's defaults (spec pi-compaction: reserve 16384, keep 20000,
//! no floor) reproduce the compaction Pi recorded, and among policies that
//! fit equally the preset the caller prefers wins. (The OpenClaw fixture and
//! the preference of imported formats are checked through the CLI, in
//! `tests/cli/calibrate.rs`.)

use sessionlog_compaction::Policy;
use sessionlog_replay::calibrate::{calibrate, candidates, preset_for_format, Calibration};
use sessionlog_replay::Prepared;
use sessionlog_test_support::fixtures;

fn calibrated(fixture: &str, prefer: Option<&str>) -> Calibration {
    let t = fixtures::pi_jsonl(&fixtures::shared_dir().join("fixtures").join(fixture));
    let prepared = Prepared::new(&t).expect("a path");
    let counter = prepared.counter(&sessionlog_tokens::PiEstimator);
    calibrate(&prepared, &counter, &candidates(), prefer).expect("recorded compactions")
}

fn fitted(c: &Calibration) -> (u64, u64, u64, u64) {
    (c.recorded, c.reproduced, c.policy.effective_reserve(), c.policy.keep_recent_tokens)
}

#[test]
fn pi_defaults_reproduce_the_compaction_pi_recorded_and_the_preferred_preset_wins_ties() {
    // Pi 1.6's and OpenClaw's candidates both reproduce it at a 200k window:
    // without a preference the first in grid order (OpenClaw's) is reported.
    let any = calibrated("pi/history/compact.jsonl", None);
    assert_eq!(fitted(&any), (1, 1, 16_384, 20_000), "{:?}", any.policy);
    assert!(any.policy.name.starts_with("openclaw-"), "{}", any.policy.name);
    let pi = calibrated("pi/history/compact.jsonl", Some("pi"));
    assert_eq!(fitted(&pi), (1, 1, 16_384, 20_000), "{:?}", pi.policy);
    assert!(pi.policy.name.starts_with("pi-"), "{}", pi.policy.name);
    assert_eq!(pi.policy.reserve_tokens_floor, 0);
}

#[test]
fn each_imported_format_prefers_its_agents_preset() {
    let table = [
        ("claude-code", Some("claude-code")),
        ("codex-rollout", Some("codex")),
        ("openclaw-sqlite", Some("openclaw")),
        ("pi-jsonl", None),
        ("sessionlog-msgpack", None),
    ];
    for (format, preset) in table {
        assert_eq!(preset_for_format(format), preset, "{format}");
        if let Some(name) = preset {
            assert!(Policy::preset(name).is_some(), "{name} is a preset");
            assert!(candidates().iter().any(|p| p.name.starts_with(&format!("{name}-"))), "{name}");
        }
    }
}
