//! Joint replay ([`sessionlog_replay::joint`]): any small set of policies
//! replayed together gives, policy by policy, the replay made alone — the
//! whole result, virtual compactions, flushes and masks included.

use std::path::Path;

use proptest::prelude::*;
use sessionlog_compaction::{Extractive, MemoryFlush, Policy, Summarizer, Trigger};
use sessionlog_events::{Entry, PiRules, Transcript};
use sessionlog_replay::joint::replay_together;
use sessionlog_replay::memo::CompactionMemo;
use sessionlog_replay::{replay_memoized, Measure, Prepared};
use sessionlog_test_support::fixtures;
use sessionlog_tokens::PiEstimator;

fn load(path: &Path) -> Transcript {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).map(|l| Entry::parse(l).unwrap());
    let header = lines.next().unwrap();
    Transcript::from_objects(header, lines.collect()).unwrap()
}

/// A policy from small knob values: windows from tiny (compacts at once) to
/// larger than the transcript, either trigger, rule set, flush and masking.
fn policy() -> impl Strategy<Value = Policy> {
    (
        prop::sample::select(vec![6_000u64, 12_000, 24_000, 48_000, 400_000]),
        prop::sample::select(vec![500u64, 2_000, 8_000]),
        prop::sample::select(vec![1_000u64, 4_000]),
        prop_oneof![Just(Trigger::Threshold), Just(Trigger::Ratio(0.6))],
        prop_oneof![Just(PiRules::V0_58), Just(PiRules::V1_6)],
        prop::option::of(prop::sample::select(vec![1u32, 3])),
        any::<bool>(),
        prop::option::of(Just(0.3f64)),
    )
        .prop_map(|(window, keep, reserve, trigger, rules, mask, flush, ratio)| Policy {
            name: format!("w{window}-k{keep}-r{reserve}-{trigger:?}-{rules:?}-m{mask:?}-f{flush}-c{ratio:?}"),
            context_window: window,
            keep_recent_tokens: keep,
            reserve_tokens: reserve,
            trigger,
            pi_rules: rules,
            mask_tool_results_after_turns: mask,
            memory_flush: flush
                .then_some(MemoryFlush { soft_threshold_tokens: 1_000, ..MemoryFlush::OPENCLAW }),
            chunk_ratio: ratio,
            ..Policy::openclaw()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn policies_replayed_together_give_the_replays_made_alone(
        policies in prop::collection::vec(policy(), 1..6),
        measure in prop_oneof![Just(Measure::Estimate), Just(Measure::Usage)],
    ) {
        let transcript = load(&fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl"));
        let prepared = Prepared::new(&transcript).unwrap();
        let counter = prepared.counter(&PiEstimator);
        let alone: Vec<String> = policies
            .iter()
            .map(|p| {
                let r = replay_memoized(&prepared, p, &mut Extractive, &counter, measure, None);
                serde_json::to_string(&r).unwrap()
            })
            .collect();
        let refs: Vec<&Policy> = policies.iter().collect();
        let memo = CompactionMemo::new();
        let make = || Box::new(Extractive) as Box<dyn Summarizer>;
        let together = replay_together(&prepared, &refs, &counter, measure, Some(&memo), &make, &|| {});
        prop_assert_eq!(together.replays.len(), policies.len());
        for (k, r) in together.replays.iter().enumerate() {
            prop_assert_eq!(&serde_json::to_string(r).unwrap(), &alone[k], "policy {}", &policies[k].name);
        }
    }
}

/// Overflow recovery cuts the same tool results to each window's size: the
/// counts the memo keeps for one window are never another window's (the
/// windows' cut sizes differ: 2,400, 6,000 and 12,000 characters).
#[test]
fn tool_results_cut_under_several_windows_give_the_replays_made_alone() {
    let file = fixtures::openclaw_transcripts()
        .into_iter()
        .find(|f| f.to_string_lossy().contains("26f24350"))
        .expect("the OpenClaw transcript with 100k-character tool results");
    let transcript = load(&file);
    let prepared = Prepared::new(&transcript).unwrap();
    let counter = prepared.counter(&PiEstimator);
    let policies: Vec<Policy> = [2_000u64, 5_000, 10_000]
        .into_iter()
        .map(|w| Policy {
            name: format!("w{w}"),
            context_window: w,
            reserve_tokens: 500,
            reserve_tokens_floor: 0,
            keep_recent_tokens: 500,
            ..Policy::openclaw()
        })
        .collect();
    let refs: Vec<&Policy> = policies.iter().collect();
    let memo = CompactionMemo::new();
    let make = || Box::new(Extractive) as Box<dyn Summarizer>;
    let together = replay_together(&prepared, &refs, &counter, Measure::Estimate, Some(&memo), &make, &|| {});
    for (p, r) in policies.iter().zip(&together.replays) {
        let alone = replay_memoized(&prepared, p, &mut Extractive, &counter, Measure::Estimate, None);
        assert!(alone.metrics.truncated_tool_results > 0, "{}: nothing cut", p.name);
        assert_eq!(r.metrics, alone.metrics, "{}", p.name);
    }
}
