//! Joint replay ([`sessionlog_replay::joint`]): any small set of policies
//! replayed together gives, policy by policy, the replay made alone — the
//! whole result, virtual compactions, flushes and masks included.

use std::path::Path;

use proptest::prelude::*;
use sessionlog_compaction::{Extractive, MemoryFlush, Policy, Summarizer, Trigger};
use sessionlog_events::{Entry, PiRules, Transcript};
use sessionlog_replay::joint::replay_together;
use sessionlog_replay::memo::CompactionMemo;
use sessionlog_replay::{replay_memoized, Measure, Prepared, Replay};
use sessionlog_test_support::fixtures;
use sessionlog_tokens::PiEstimator;

fn load(path: &Path) -> Transcript {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).map(|l| Entry::parse(l).unwrap());
    let header = lines.next().unwrap();
    Transcript::from_objects(header, lines.collect()).unwrap()
}

/// The shared OpenClaw store's transcript whose file name holds `id`.
fn openclaw_fixture(id: &str) -> Transcript {
    let file = fixtures::openclaw_transcripts().into_iter().find(|f| f.to_string_lossy().contains(id));
    load(&file.unwrap_or_else(|| panic!("no OpenClaw fixture {id}")))
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
    // The OpenClaw transcript with 100k-character tool results.
    let transcript = openclaw_fixture("26f24350");
    let prepared = Prepared::new(&transcript).unwrap();
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
    for alone in together_as_alone(&prepared, &policies, Measure::Estimate) {
        assert!(alone.metrics.truncated_tool_results > 0, "{}: nothing cut", alone.policy.name);
    }
}

/// Replays `policies` together, sharing one memo, and alone; asserts that
/// each policy's replay is the same whole result both ways, and returns the
/// replays made alone.
fn together_as_alone(prepared: &Prepared<'_>, policies: &[Policy], measure: Measure) -> Vec<Replay> {
    let counter = prepared.counter(&PiEstimator);
    let refs: Vec<&Policy> = policies.iter().collect();
    let memo = CompactionMemo::new();
    let make = || Box::new(Extractive) as Box<dyn Summarizer>;
    let together = replay_together(prepared, &refs, &counter, measure, Some(&memo), &make, &|| {});
    let mut out = Vec::new();
    for (p, r) in policies.iter().zip(&together.replays) {
        let alone = replay_memoized(prepared, p, &mut Extractive, &counter, measure, None);
        let same = serde_json::to_string(r).unwrap() == serde_json::to_string(&alone).unwrap();
        assert!(same, "{}: the replay made together differs from the one made alone", p.name);
        out.push(alone);
    }
    out
}

/// The memo keeps each cut by what it reads: the log, the recent tokens
/// kept, the counter and the rule set. Policies that differ only in the
/// recent tokens kept, or only in the rule set, cut the same logs
/// differently (checked on their replays alone): taking one's cut for the
/// other's would change their results, which must stay those made alone.
#[test]
fn policies_that_differ_only_in_what_the_cut_reads_do_not_share_their_cuts() {
    // The OpenClaw transcript that compacts most.
    let transcript = openclaw_fixture("684637ff");
    let prepared = Prepared::new(&transcript).unwrap();
    let base = Policy { context_window: 32_000, keep_recent_tokens: 2_000, ..Policy::openclaw() };
    let cuts = |r: &Replay| -> Vec<Option<String>> {
        r.compactions.iter().map(|c| c.summarized_to.clone()).collect()
    };
    for other in [
        Policy { keep_recent_tokens: 8_000, ..base.clone() },
        Policy { pi_rules: PiRules::V1_6, ..base.clone() },
    ] {
        let pair =
            [Policy { name: "a".to_owned(), ..base.clone() }, Policy { name: "b".to_owned(), ..other }];
        let alone = together_as_alone(&prepared, &pair, Measure::Usage);
        assert!(!alone[0].compactions.is_empty(), "the base policy must compact");
        assert_ne!(cuts(&alone[0]), cuts(&alone[1]), "the two policies must cut apart");
    }
}

/// The resolved identifier ledger is shared by the policies whose
/// compactions so far have the same outcomes, and each compaction after
/// they part extends its own policy's ledger: two policies that make the
/// same first compactions (keeping 2,000 or 4,000 recent tokens cuts alike
/// at first on this transcript) and then cut apart each carry the ledger
/// their own outcomes make, as replayed alone — taking the shared ledger on
/// after parting changes the next compactions' ledger changes.
#[test]
fn policies_whose_outcomes_part_after_a_shared_compaction_keep_their_own_ledgers() {
    let transcript = openclaw_fixture("684637ff");
    let prepared = Prepared::new(&transcript).unwrap();
    let base = Policy { context_window: 32_000, keep_recent_tokens: 2_000, ..Policy::openclaw() };
    let pair = [
        Policy { name: "k2000".to_owned(), ..base.clone() },
        Policy { name: "k4000".to_owned(), keep_recent_tokens: 4_000, ..base },
    ];
    let alone = together_as_alone(&prepared, &pair, Measure::Usage);
    let outcomes = |r: &Replay| -> Vec<String> {
        r.compactions.iter().map(|c| serde_json::to_string(&c.outcome).unwrap()).collect()
    };
    let (a, b) = (outcomes(&alone[0]), outcomes(&alone[1]));
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    assert!(shared >= 1, "the two policies must make the same first compaction");
    assert!(
        shared + 1 < a.len().min(b.len()),
        "they must part, then compact again ({shared} of {})",
        a.len()
    );
    // After parting, their ledgers differ: each later compaction extends its own.
    let ledgers = |r: &Replay| -> Vec<(Vec<String>, Vec<String>)> {
        let later = r.compactions.iter().skip(shared);
        later.map(|c| (c.outcome.ledger.added.clone(), c.outcome.ledger.dropped.clone())).collect()
    };
    assert_ne!(ledgers(&alone[0])[0], ledgers(&alone[1])[0], "they must part with different ledger changes");
}

/// The extractive summary with the request's `max_tokens` appended: a
/// summariser whose answer follows the reserve in force, as a model's may.
struct Budgeted;

impl Summarizer for Budgeted {
    fn name(&self) -> &str {
        "budgeted"
    }

    fn summarize(
        &mut self,
        request: &sessionlog_compaction::SummaryRequest,
    ) -> Result<String, sessionlog_compaction::SummarizerError> {
        Ok(format!("{}\n(max {} tokens)", Extractive.summarize(request)?, request.max_tokens))
    }
}

/// The reserve in force sets every request's `max_tokens`: two policies
/// that compact alike (a ratio trigger, the same recent tokens kept) but
/// whose reserve floors differ send different requests, so they must not
/// share an outcome, although the floor only moves the cut otherwise (and
/// leaves the memo's key). Under a summariser that reads `max_tokens`, each
/// gives the replay made alone (fails when the key lacks the reserve).
#[test]
fn policies_whose_reserve_in_force_differs_do_not_share_outcomes() {
    let transcript = openclaw_fixture("684637ff");
    let prepared = Prepared::new(&transcript).unwrap();
    let counter = prepared.counter(&PiEstimator);
    let base = Policy {
        context_window: 64_000,
        keep_recent_tokens: 8_000,
        trigger: Trigger::Ratio(0.5),
        reserve_tokens: 1_000,
        reserve_tokens_floor: 0,
        ..Policy::openclaw()
    };
    let policies = [
        Policy { name: "floor0".to_owned(), ..base.clone() },
        Policy { name: "floor6000".to_owned(), reserve_tokens_floor: 6_000, ..base },
    ];
    assert_ne!(policies[0].effective_reserve(), policies[1].effective_reserve());
    let refs: Vec<&Policy> = policies.iter().collect();
    let memo = CompactionMemo::new();
    let make = || Box::new(Budgeted) as Box<dyn Summarizer>;
    let together = replay_together(&prepared, &refs, &counter, Measure::Usage, Some(&memo), &make, &|| {});
    for (p, r) in policies.iter().zip(&together.replays) {
        let alone = replay_memoized(&prepared, p, &mut Budgeted, &counter, Measure::Usage, None);
        assert!(!alone.compactions.is_empty(), "{} must compact", p.name);
        let same = serde_json::to_string(r).unwrap() == serde_json::to_string(&alone).unwrap();
        assert!(same, "{}: the replay made together differs from the one made alone", p.name);
    }
}
