//! The pipeline under honest and adversarial summarisers: the fallback levels,
//! and the flagship property — every identifier of a compacted range survives
//! into the summary or its ledger, the summary is never empty, and no tool pair
//! is broken.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sessionlog_compaction::ids::SecretPolicy;
use sessionlog_compaction::pipeline::{groups, SKELETON};
use sessionlog_compaction::{
    compact, compact_over, ledger_of, Extractive, Facts, FallbackLevel, Ledger, Policy, Scripted, Summarizer,
    SummarizerError, SummaryRequest,
};
use sessionlog_context::assemble::context_message;
use sessionlog_context::cut::{prepare, prepare_with, Settings};
use sessionlog_context::pairing::{check_pairs, PairingIssue};
use sessionlog_context::AgentMessage;
use sessionlog_events::write::Head;
use sessionlog_events::{Entry, Transcript};
use sessionlog_test_support::planted::{planted, PlantOptions, Planted};
use sessionlog_tokens::PiEstimator;

fn transcript(lines: &[String]) -> Transcript {
    let header = Entry::parse(&lines[0]).unwrap();
    Transcript::from_objects(header, lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect()).unwrap()
}

fn path_of(t: &Transcript) -> Vec<&Entry> {
    let tree = t.tree();
    tree.path(t.entries.len() - 1).unwrap().into_iter().map(|i| &t.entries[i]).collect()
}

fn settings(policy: &Policy) -> Settings {
    policy.cut_settings()
}

/// A summariser that fails whenever a message is longer than `max_chars`;
/// a merge returns its partial summaries joined.
struct FailsAbove {
    max_chars: usize,
}

impl Summarizer for FailsAbove {
    fn name(&self) -> &str {
        "fails-above"
    }
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        if request.messages.iter().any(|m| m.text.chars().count() > self.max_chars) {
            return Err(SummarizerError("request too large".to_owned()));
        }
        if request.kind == sessionlog_compaction::RequestKind::Merge {
            return Ok(request.messages.iter().map(|m| &*m.text).collect::<Vec<_>>().join("\n"));
        }
        Ok(format!("summary of {} messages", request.messages.len()))
    }
}

const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

/// user, assistant with a read call, its (large) result, assistant, then a recent turn.
fn lines_with_large_result(result_chars: usize) -> Vec<String> {
    let big = "x".repeat(result_chars);
    vec![
        HEADER.to_owned(),
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"read /srv/app/config.yaml please","timestamp":1}}"#.to_owned(),
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call-1","name":"read","arguments":{"path":"/srv/app/config.yaml"}}],"stopReason":"toolUse","timestamp":2}}"#.to_owned(),
        format!(r#"{{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{{"role":"toolResult","toolCallId":"call-1","toolName":"read","content":[{{"type":"text","text":"{big}"}}],"isError":false,"timestamp":3}}}}"#),
        r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"The config points at db.internal:5432 (ticket OPS-4242)."}],"stopReason":"stop","timestamp":4}}"#.to_owned(),
        r#"{"type":"message","id":"u2","parentId":"a2","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"now fix it","timestamp":5}}"#.to_owned(),
        r#"{"type":"message","id":"a3","parentId":"u2","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}],"stopReason":"stop","timestamp":6}}"#.to_owned(),
    ]
}

/// The visible identifier section of a compaction of [`lines_with_large_result`].
const LEDGER: &str = "## Identifier ledger\n- db.internal:5432\n- OPS-4242\n\n";

/// A 100k window: chunks of 100000 × 0.4 − 4096 tokens; a message is
/// oversized above 0.5 × 100000 / 1.2 ≈ 41667 tokens. Keeping 5 tokens cuts
/// at the last user message ("now fix it" + "Fixed." = 3 + 2 tokens).
fn small_policy() -> Policy {
    Policy { context_window: 100_000, reserve_tokens: 1_000, keep_recent_tokens: 5, ..Policy::pi() }
}

#[test]
fn level_one_summarises_everything() {
    let t = transcript(&lines_with_large_result(100));
    let path = path_of(&t);
    let policy = small_policy();
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    let mut s = Scripted::new([Ok("## Decisions\nread the config".to_owned())]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert_eq!(out.fallback, FallbackLevel::Full);
    // The identifier section comes first, so no cut of the summary reaches it.
    assert!(out.summary.starts_with(&format!("{LEDGER}## Decisions\nread the config")), "{}", out.summary);
    // The path is in the file list; the host:port and the ticket go to the ledger.
    assert!(out.summary.contains("<read-files>\n/srv/app/config.yaml\n</read-files>"));
    for id in ["db.internal:5432", "OPS-4242"] {
        assert!(out.ledger.added.iter().any(|l| l == id), "{id} missing from {:?}", out.ledger.added);
        assert!(out.summary.contains(&format!("- {id}")), "{id} not in the ledger section");
    }
    assert_eq!(out.read_files, ["/srv/app/config.yaml"]);
    assert_eq!(s.requests.len(), 1);
}

#[test]
fn preserved_turns_leave_the_summariser_and_appear_verbatim() {
    let t = transcript(&lines_with_large_result(100));
    let path = path_of(&t);
    // One turn: the range's only user turn (u1 … a2) is preserved, so nothing
    // is left for the summariser and the structured skeleton stands in.
    let policy = Policy { recent_turns_preserve: 1, tool_failures_section: true, ..small_policy() };
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    let mut s = Scripted::new([]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert!(s.requests.is_empty());
    let expect = format!(
        "{SKELETON}\n\n## Recent turns preserved verbatim\n- User: read /srv/app/config.yaml please\n- Assistant: [non-text content: toolCall]\n- Tool result (read): {}\n- Assistant: The config points at db.internal:5432 (ticket OPS-4242).\n\n<read-files>\n/srv/app/config.yaml\n</read-files>",
        "x".repeat(100)
    );
    assert_eq!(out.summary, expect);
    // Everything is verbatim in the summary: the ledger has nothing to add.
    assert!(out.ledger.added.is_empty(), "{:?}", out.ledger.added);

    // Without preservation the same range goes to the summariser.
    let mut s = Scripted::new([Ok("## Decisions\nread the config".to_owned())]);
    let out = compact(&prep, &small_policy(), &mut s, &PiEstimator, None);
    assert_eq!(s.requests[0].messages.len(), 4);
    assert!(!out.summary.contains("## Recent turns preserved verbatim"));
}

#[test]
fn failed_tool_calls_are_listed_after_the_summary() {
    let mut lines = lines_with_large_result(10);
    lines[3] = lines[3].replace(r#""isError":false"#, r#""isError":true"#);
    let t = transcript(&lines);
    let path = path_of(&t);
    let policy = Policy { tool_failures_section: true, ..small_policy() };
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    let mut s = Scripted::new([Ok("## Decisions\nretry the read".to_owned())]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert!(
        out.summary.starts_with(&format!(
            "{LEDGER}## Decisions\nretry the read\n\n## Tool Failures\n- read: xxxxxxxxxx\n\n<read-files>"
        )),
        "{}",
        out.summary
    );
    // Pi's policy has no such section.
    let mut s = Scripted::new([Ok("## Decisions\nretry the read".to_owned())]);
    let out = compact(&prep, &small_policy(), &mut s, &PiEstimator, None);
    assert!(!out.summary.contains("## Tool Failures"));
}

#[test]
fn level_two_leaves_out_oversized_messages_with_a_note() {
    // A 200000-char result is 50000 tokens: oversized, and the summariser refuses it.
    let t = transcript(&lines_with_large_result(200_000));
    let path = path_of(&t);
    let policy = small_policy();
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    assert!(!prep.cut.is_split_turn);
    let mut s = FailsAbove { max_chars: 50_000 };
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert_eq!(out.fallback, FallbackLevel::SkippedOversized);
    assert!(out.summary.contains("[Large toolResult (~50K tokens) omitted from summary]"), "{}", out.summary);
}

#[test]
fn level_three_is_a_statistical_description_never_empty() {
    let t = transcript(&lines_with_large_result(100));
    let path = path_of(&t);
    let policy = small_policy();
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    let mut s = Scripted::new([]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert_eq!(out.fallback, FallbackLevel::Statistical);
    assert_eq!(prep.messages_to_summarize.len(), 4);
    let expect = "Context contained 4 messages (0 oversized). Summary unavailable due to size limits.";
    assert!(out.summary.starts_with(&format!("{LEDGER}{expect}")), "{}", out.summary);
    // Three attempts, then no oversized message to leave out: straight to level 3.
    assert_eq!(s.requests.len(), 3);
    assert!(out.ledger.added.iter().any(|l| l == "db.internal:5432"));
}

#[test]
fn nothing_to_summarise_writes_a_skeleton_instead_of_cancelling() {
    let lines = vec![
        HEADER.to_owned(),
        r#"{"type":"custom","customType":"x","data":1,"id":"c1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}"#.to_owned(),
        r#"{"type":"message","id":"u1","parentId":"c1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"hi","timestamp":2}}"#.to_owned(),
    ];
    let t = transcript(&lines);
    let path = path_of(&t);
    let policy = Policy::pi();
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    let mut s = Scripted::new([]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    assert_eq!(out.fallback, FallbackLevel::NoConversation);
    assert_eq!(out.summary, SKELETON);
    assert!(s.requests.is_empty());
}

#[test]
fn tool_calls_and_results_form_one_group() {
    let t = transcript(&lines_with_large_result(10));
    let path = path_of(&t);
    let messages: Vec<AgentMessage<'_>> = path.iter().filter_map(|e| context_message(e)).collect();
    let sizes: Vec<usize> = groups(&messages).iter().map(|g| g.len()).collect();
    assert_eq!(sizes, [1, 2, 1, 1, 1]);
}

/// A group by hand: an assistant message with two calls takes the results
/// that answer either, in any order, up to the first that answers neither
/// (or a message of another role); a text block's `id` is no call.
#[test]
fn a_group_takes_the_results_of_its_own_calls_by_hand() {
    let mut lines = vec![HEADER.to_owned()];
    let mut parent = "null".to_owned();
    let mut add = |id: &str, message: &str| {
        lines.push(format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{message}}}"#
        ));
        parent = format!("\"{id}\"");
    };
    let result = |call: &str| {
        format!(
            r#"{{"role":"toolResult","toolCallId":"{call}","toolName":"bash","content":"ok","isError":false}}"#
        )
    };
    add("u1", r#"{"role":"user","content":"go"}"#);
    add(
        "a1",
        r#"{"role":"assistant","content":[{"type":"text","text":"t","id":"x"},{"type":"toolCall","id":"ca","name":"bash","arguments":{}},{"type":"toolCall","id":"cb","name":"bash","arguments":{}}],"stopReason":"toolUse"}"#,
    );
    add("rb", &result("cb"));
    add("ra", &result("ca"));
    add("rx", &result("x"));
    add("ra2", &result("ca"));
    add(
        "a2",
        r#"{"role":"assistant","content":[{"type":"toolCall","id":"cc","name":"bash","arguments":{}}],"stopReason":"toolUse"}"#,
    );
    add("rc", &result("cc"));
    add("u2", r#"{"role":"user","content":"more"}"#);
    add("rc2", &result("cc"));
    let t = transcript(&lines);
    let path = path_of(&t);
    let messages: Vec<AgentMessage<'_>> = path.iter().filter_map(|e| context_message(e)).collect();
    let ids: Vec<Vec<&str>> = groups(&messages)
        .iter()
        .map(|g| g.iter().map(|m| m.entry.id.as_deref().unwrap_or("?")).collect())
        .collect();
    assert_eq!(
        ids,
        [
            vec!["u1"],
            vec!["a1", "rb", "ra"],
            vec!["rx"],
            vec!["ra2"],
            vec!["a2", "rc"],
            vec!["u2"],
            vec!["rc2"]
        ]
    );
}

/// Adversarial summarisers for the property.
#[derive(Debug, Clone, Copy)]
enum Adversary {
    /// The honest extractive summariser.
    Extractive,
    /// Answers with one sentence and no identifier at all.
    DropsEverything,
    /// Drops every identifier from the honest text it returns.
    DropsIds,
    /// Rewrites identifiers (upper-cased, shortened to 6 characters).
    RewritesIds,
    /// Cuts the honest text after 60 characters.
    Truncates,
    /// Returns empty text.
    Empty,
    /// Always fails.
    Fails,
    /// Fails on a seeded pseudo-random third of its calls.
    FailsIntermittently(u64),
}

struct Adversarial {
    kind: Adversary,
    calls: u64,
}

/// Replaces each identifier-shaped word (digits and letters mixed, or
/// punctuation inside) without asking the extractor: an adversary that hides
/// identifiers must not depend on the grammar under test.
fn scrub(text: &str, f: &dyn Fn(&str) -> String) -> String {
    text.split(' ')
        .map(|w| {
            let mixed = w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic());
            if mixed || w.contains(['/', '@', ':']) {
                f(w)
            } else {
                w.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Summarizer for Adversarial {
    fn name(&self) -> &str {
        "adversarial"
    }
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        self.calls += 1;
        let honest = Extractive.summarize(request)?;
        match self.kind {
            Adversary::Extractive => Ok(honest),
            Adversary::DropsEverything => Ok("The user and the assistant worked on things.".to_owned()),
            Adversary::DropsIds => Ok(scrub(&honest, &|_| "[id]".to_owned())),
            Adversary::RewritesIds => Ok(scrub(&honest, &|id| id.to_uppercase().chars().take(6).collect())),
            Adversary::Truncates => Ok(honest.chars().take(60).collect()),
            Adversary::Empty => Ok(String::new()),
            Adversary::Fails => Err(SummarizerError("model unavailable".to_owned())),
            Adversary::FailsIntermittently(seed) => {
                if (self.calls.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed) % 3 == 0 {
                    Err(SummarizerError("flaky".to_owned()))
                } else {
                    Ok(honest)
                }
            }
        }
    }
}

fn adversary() -> impl Strategy<Value = Adversary> {
    prop_oneof![
        Just(Adversary::Extractive),
        Just(Adversary::DropsEverything),
        Just(Adversary::DropsIds),
        Just(Adversary::RewritesIds),
        Just(Adversary::Truncates),
        Just(Adversary::Empty),
        Just(Adversary::Fails),
        any::<u64>().prop_map(Adversary::FailsIntermittently),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        (2_000u64..40_000, 50u64..3_000, prop::option::of(0.05f64..0.6), 1usize..4, 0.1f64..0.9),
        (any::<bool>(), 0u32..5, any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |((window, keep, chunk_ratio, parts, share), (keep_secrets, turns, failures, pi_0_58))| Policy {
                context_window: window,
                reserve_tokens: window / 8,
                keep_recent_tokens: keep,
                chunk_ratio,
                parts,
                max_history_share: share,
                secret_policy: if keep_secrets { SecretPolicy::Keep } else { SecretPolicy::Reference },
                recent_turns_preserve: turns,
                tool_failures_section: failures,
                pi_rules: if pi_0_58 {
                    sessionlog_events::PiRules::V0_58
                } else {
                    sessionlog_events::PiRules::V1_6
                },
                ..Policy::pi()
            },
        )
}

/// The summary's visible ledger section (empty when it has none).
fn visible_section(summary: &str) -> &str {
    match summary.find("## Identifier ledger") {
        Some(start) => {
            let rest = &summary[start..];
            rest.find("\n\n").map_or(rest, |end| &rest[..end])
        }
        None => "",
    }
}

/// Checks one compaction against the planted identifiers of the entries
/// before its first kept entry (`before`).
fn check_against_planted(
    out: &sessionlog_compaction::Outcome,
    ledger: &Ledger,
    before: &std::collections::HashSet<&str>,
    planted: &[Planted],
    policy: &Policy,
    adversary: Adversary,
) -> Result<(), TestCaseError> {
    prop_assert!(!out.summary.trim().is_empty(), "empty summary");
    let visible = visible_section(&out.summary);
    let mut checked = 0;
    for p in planted.iter().filter(|p| before.contains(p.entry_id.as_str())) {
        checked += 1;
        if p.class == "secret" && policy.secret_policy == SecretPolicy::Reference {
            prop_assert!(!ledger.contains(&p.text), "secret {} in the ledger", p.text);
            prop_assert!(!visible.contains(&p.text), "secret {} in the visible section", p.text);
            let reference = format!("secret in entry {}", p.entry_id);
            prop_assert!(
                ledger.secret_refs().contains(&reference),
                "{reference} missing: {:?}",
                ledger.secret_refs()
            );
        } else {
            let kept = out.summary.contains(&p.text) || ledger.contains(&p.text);
            prop_assert!(kept, "{} {} of {} lost by {:?}", p.class, p.text, p.entry_id, adversary);
        }
    }
    prop_assert!(checked > 0 || before.is_empty(), "nothing planted before the cut");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// One compaction of a planted transcript: every planted identifier
    /// before the first kept entry is in the summary text or the ledger (a
    /// secret, under the reference policy, only as a reference to its entry),
    /// and no tool pair is separated.
    #[test]
    fn planted_identifiers_survive_a_compaction(
        seed in any::<u64>(), turns in 4usize..40, per_message in 1usize..4,
        policy in policy(), adversary in adversary(),
    ) {
        let options = PlantOptions { seed, turns, per_message, max_padding: 1_500, secret_every: 3 };
        let (lines, planted) = planted(options);
        let t = transcript(&lines);
        let path = path_of(&t);
        let Ok(prep) = prepare_with(&path, &settings(&policy), &PiEstimator, policy.pi_rules) else {
            return Ok(());
        };
        let mut s = Adversarial { kind: adversary, calls: 0 };
        let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
        let first = path.iter().position(|e| e.id.as_deref() == Some(out.first_kept_entry_id.as_str())).unwrap();
        let before = path[..first].iter().filter_map(|e| e.id.as_deref()).collect();
        // The first compaction: its change is its whole ledger.
        let mut ledger = Ledger::default();
        ledger.apply(&out.ledger);
        check_against_planted(&out, &ledger, &before, &planted, &policy, adversary)?;

        // The context after this compaction: summary, then the kept entries.
        let kept: Vec<AgentMessage<'_>> = path[first..].iter().filter_map(|e| context_message(e)).collect();
        let calls_before: std::collections::HashSet<&str> = path[..first]
            .iter()
            .filter_map(|e| e.message())
            .flat_map(|m| m.blocks().iter().filter_map(|b| b.id.as_deref()))
            .collect();
        for issue in check_pairs(&kept) {
            if let PairingIssue::OrphanResult { call_id, .. } = issue {
                prop_assert!(!calls_before.contains(call_id.as_str()), "compaction separated {} from its result", call_id);
            }
        }
    }

    /// Chains of three compactions or more, each over the log that holds
    /// the previous ones: after each, every planted identifier of the whole
    /// history before its first kept entry is in its summary or its ledger —
    /// including those an earlier compaction kept only in its `details`.
    /// Every generated case is a chain: a compaction is tried after each
    /// turn once `every` turns have passed since the last one, until Pi's
    /// cut allows it, and the verbatim tail (at most 400 tokens) is smaller
    /// than the 3 turns (each at least 80 tokens: an answer alone holds 40
    /// words) that separate two compactions, over 36 turns or more.
    #[test]
    fn planted_identifiers_survive_a_chain_of_compactions(
        seed in any::<u64>(), turns in 36usize..48, per_message in 1usize..4, every in 3usize..6,
        keep in 50u64..400, policy in policy(), adversary in adversary(),
    ) {
        let policy = Policy { keep_recent_tokens: keep, ..policy };
        let options = PlantOptions { seed, turns, per_message, max_padding: 1_500, secret_every: 4 };
        let (lines, planted) = planted(options);
        let t = transcript(&lines);
        let mut log: Vec<Entry> = Vec::new();
        let mut made = 0;
        let mut since = 0;
        for (i, entry) in t.entries.iter().enumerate() {
            log.push(entry.clone());
            // A turn ends with its answer (`b<n>`, each fourth entry).
            if (i + 1) % 4 != 0 {
                continue;
            }
            since += 1;
            if since < every {
                continue;
            }
            let refs: Vec<&Entry> = log.iter().collect();
            let Ok(prep) = prepare_with(&refs, &settings(&policy), &PiEstimator, policy.pi_rules) else { continue };
            since = 0;
            let mut s = Adversarial { kind: adversary, calls: 0 };
            let out = compact_over(&refs, &prep, &policy, &mut s, &PiEstimator, None, &Facts::none());
            let first = log.iter().position(|e| e.id.as_deref() == Some(out.first_kept_entry_id.as_str())).unwrap();
            let before: Vec<String> = log[..first].iter().filter_map(|e| e.id.clone()).collect();
            let id = format!("c{made}");
            let head = Head { id: &id, parent_id: log.last().and_then(|e| e.id.as_deref()), timestamp: "" };
            let entry = out.to_entry(&head, None).unwrap();
            log.push(entry);
            // The ledger as a reader of the log resolves it: the chain of changes in `details`.
            let refs: Vec<&Entry> = log.iter().collect();
            let ledger = ledger_of(&refs, refs.len() - 1);
            let before = before.iter().map(String::as_str).collect();
            check_against_planted(&out, &ledger, &before, &planted, &policy, adversary)?;
            made += 1;
        }
        prop_assert!(made >= 3, "a chain of {made} compactions: the generator must make 3 or more");
    }
}

#[test]
fn the_legacy_engine_delegates_compaction_to_the_pipeline() {
    use sessionlog_compaction::PipelineCompactor;
    use sessionlog_context::engine::{CompactRequest, CompactResult, ContextEngine, Registry};

    let t = transcript(&lines_with_large_result(100));
    let policy = small_policy();
    let mut summarizer = Scripted::new([Ok("## Decisions\nkept the config".to_owned())]);
    let mut engine = Registry::with_builtins().resolve(None).unwrap();
    assert!(!engine.info().owns_compaction);
    let mut compactor = PipelineCompactor {
        transcript: &t,
        policy: &policy,
        summarizer: &mut summarizer,
        counter: &PiEstimator,
    };
    // Not forced and far below the threshold: nothing is written.
    let quiet = engine.compact(&CompactRequest::default(), &mut compactor).unwrap();
    assert_eq!(quiet, CompactResult::NotCompacted { reason: "below_threshold".to_owned() });
    // `/compact`: forced, with instructions that reach the summariser.
    let request = CompactRequest {
        force: true,
        custom_instructions: Some("keep ports".to_owned()),
        ..Default::default()
    };
    let CompactResult::Compacted { summary, first_kept_entry_id, details, .. } =
        engine.compact(&request, &mut compactor).unwrap()
    else {
        panic!("expected a compaction");
    };
    assert!(summary.starts_with(&format!("{LEDGER}## Decisions\nkept the config")), "{summary}");
    assert_eq!(first_kept_entry_id, "u2");
    assert_eq!(details["ledgerAdded"], serde_json::json!(["db.internal:5432", "OPS-4242"]));
    assert!(summarizer.requests[0].instructions.ends_with("Additional focus:\nkeep ports"));
}

/// A hand-built chain: the first compaction's range holds 120 UUIDs (4,680
/// characters of ledger lines, more than the summary's visible ledger
/// section holds), the summariser keeps none of them, and the second
/// compaction's summariser sees only the first summary's text. The second
/// compaction must still carry all 120: the ones that only the first
/// compaction's `details` held included.
#[test]
fn a_chain_carries_the_identifiers_that_overflowed_the_visible_section() {
    let uuids: Vec<String> = (0..120).map(|n| format!("{n:08x}-0000-4000-a000-{:012x}", n * 7919)).collect();
    let msg = |id: &str, parent: &str, role: &str, text: &str| {
        let body = match role {
            "user" => serde_json::json!({"role": "user", "content": text}),
            _ => {
                serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"})
            }
        };
        Entry::parse(
            &serde_json::json!({"type": "message", "id": id, "parentId": parent, "timestamp": "t", "message": body})
                .to_string(),
        )
        .unwrap()
    };
    let filler = "lorem ipsum ".repeat(40);
    let mut log = vec![
        msg("u1", "", "user", &format!("register these jobs: {}", uuids.join(" "))),
        msg("a1", "u1", "assistant", &format!("registered {filler}")),
        msg("u2", "a1", "user", &format!("now wait {filler}")),
        msg("a2", "u2", "assistant", "waiting"),
    ];
    let policy = Policy {
        context_window: 100_000,
        reserve_tokens: 1_000,
        keep_recent_tokens: 5,
        recent_turns_preserve: 0,
        ..Policy::openclaw()
    };
    let compact_log = |log: &[Entry], id: &str| {
        let refs: Vec<&Entry> = log.iter().collect();
        let prep = prepare_with(&refs, &settings(&policy), &PiEstimator, policy.pi_rules).unwrap();
        let mut s = Scripted::new([Ok("## Decisions\nJobs were registered.".to_owned())]);
        let out = compact_over(&refs, &prep, &policy, &mut s, &PiEstimator, None, &Facts::none());
        let head = Head { id, parent_id: log.last().and_then(|e| e.id.as_deref()), timestamp: "t" };
        let entry = out.to_entry(&head, None).unwrap();
        (out, entry)
    };
    let (first, entry) = compact_log(&log, "c1");
    assert_eq!(first.first_kept_entry_id, "u2");
    assert_eq!(first.ledger.added, uuids, "every UUID in the first ledger, in order");
    // The visible section shows the most recent ones only: UUID 0 is in `details` alone.
    assert!(!first.summary.contains(&uuids[0]), "{}", first.summary);
    assert!(first.summary.contains(&uuids[119]));
    assert!(first.summary.contains("older identifiers in the compaction's details"));
    log.push(entry);
    log.push(msg("u3", "c1", "user", &format!("anything new? {filler}")));
    log.push(msg("a3", "u3", "assistant", "nothing"));
    let (second, entry) = compact_log(&log, "c2");
    assert_eq!(second.first_kept_entry_id, "u3");
    log.push(entry);
    let refs: Vec<&Entry> = log.iter().collect();
    let ledger = ledger_of(&refs, refs.len() - 1);
    for id in &uuids {
        assert!(second.summary.contains(id) || ledger.contains(id), "{id} lost by the second compaction");
    }
}

/// A summary longer than `summaryMaxChars`: the text below the identifier
/// section is cut to fit, with a marker; the identifiers the cut removed
/// join the ledger, and the section (first) is whole.
#[test]
fn a_long_summary_is_cut_below_the_identifier_section_and_loses_no_identifier() {
    let t = transcript(&lines_with_large_result(100));
    let path = path_of(&t);
    let policy = Policy { summary_max_chars: 3_000, ledger_visible_max_chars: 500, ..small_policy() };
    let prep = prepare(&path, &settings(&policy), &PiEstimator).unwrap();
    // 4,000 characters of prose, then both identifiers at the very end.
    let long = format!("## Decisions\n{}\ndb.internal:5432 OPS-4242", "word ".repeat(800));
    let mut s = Scripted::new([Ok(long)]);
    let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
    // Hand count: body budget 3000 − 500 − 100 = 2400 characters, marker included.
    let body = out.summary.split_once("\n\n").unwrap().1;
    assert_eq!(body.chars().count(), 2_400, "{body}");
    // The text: "## Decisions\n" (13) + 800 × "word " (4000) + "\n" (1) + the two
    // identifiers (25), then "\n\n<read-files>\n/srv/app/config.yaml\n</read-files>"
    // (49): 4088. The marker "\n\n[1734 characters cut to fit summaryMaxChars]"
    // is 46 characters, so 2400 − 46 = 2354 are kept and 4088 − 2354 cut.
    let cut = 4_088 - (2_400 - 46);
    assert!(body.ends_with(&format!("[{cut} characters cut to fit summaryMaxChars]")), "{body}");
    assert!(out.summary.len() <= 3_000);
    // The file list went with the cut, so its path joins the ledger too.
    assert_eq!(out.ledger.added, ["/srv/app/config.yaml", "db.internal:5432", "OPS-4242"]);
    let section =
        "## Identifier ledger\n- /srv/app/config.yaml\n- db.internal:5432\n- OPS-4242\n\n## Decisions\n";
    assert!(out.summary.starts_with(section), "{}", out.summary);
    // Within the budget nothing is cut.
    let mut s = Scripted::new([Ok("## Decisions\nshort db.internal:5432 OPS-4242".to_owned())]);
    let out = compact(&prep, &small_policy(), &mut s, &PiEstimator, None);
    assert!(out.ledger.added.is_empty() && !out.summary.contains("characters cut"), "{}", out.summary);
}
