//! The pipeline under honest and adversarial summarisers: the fallback levels,
//! and the flagship property — every identifier of a compacted range survives
//! into the summary or its ledger, the summary is never empty, and no tool pair
//! is broken.

use proptest::prelude::*;
use sessionlog_compaction::ids::{extract, IdClass, SecretPolicy};
use sessionlog_compaction::pipeline::{groups, SKELETON};
use sessionlog_compaction::{
    compact, Extractive, FallbackLevel, Policy, Scripted, Summarizer, SummarizerError, SummaryRequest,
};
use sessionlog_context::assemble::context_message;
use sessionlog_context::cut::{prepare, Settings};
use sessionlog_context::pairing::{check_pairs, PairingIssue};
use sessionlog_context::AgentMessage;
use sessionlog_events::{Entry, Transcript};
use sessionlog_test_support::{generate, GenOptions};
use sessionlog_tokens::{parts, PiEstimator};

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
            return Ok(request.messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join("\n"));
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
    assert!(out.summary.starts_with("## Decisions\nread the config"));
    // The path is in the file list; the host:port and the ticket go to the ledger.
    assert!(out.summary.contains("<read-files>\n/srv/app/config.yaml\n</read-files>"));
    for id in ["db.internal:5432", "OPS-4242"] {
        assert!(
            out.identifier_ledger.iter().any(|l| l == id),
            "{id} missing from {:?}",
            out.identifier_ledger
        );
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
    assert!(out.identifier_ledger.is_empty(), "{:?}", out.identifier_ledger);

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
        out.summary.starts_with(
            "## Decisions\nretry the read\n\n## Tool Failures\n- read: xxxxxxxxxx\n\n<read-files>"
        ),
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
    assert!(out.summary.starts_with(expect), "{}", out.summary);
    // Three attempts, then no oversized message to leave out: straight to level 3.
    assert_eq!(s.requests.len(), 3);
    assert!(out.identifier_ledger.iter().any(|l| l == "db.internal:5432"));
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

/// Adversarial summarisers for the property.
#[derive(Debug, Clone, Copy)]
enum Adversary {
    /// The honest extractive summariser.
    Extractive,
    /// Drops every identifier from the text it returns.
    DropsIds,
    /// Rewrites identifiers (upper-cases hex, shortens them).
    RewritesIds,
    /// Returns empty text.
    Empty,
    /// Always fails.
    Fails,
    /// Fails every other call.
    Flaky,
}

struct Adversarial {
    kind: Adversary,
    calls: usize,
}

impl Summarizer for Adversarial {
    fn name(&self) -> &str {
        "adversarial"
    }
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        self.calls += 1;
        let honest = Extractive.summarize(request)?;
        let scrub = |text: &str, f: &dyn Fn(&str) -> String| {
            let mut out = text.to_owned();
            for id in extract(text) {
                out = out.replace(&id.text, &f(&id.text));
            }
            out
        };
        match self.kind {
            Adversary::Extractive => Ok(honest),
            Adversary::DropsIds => Ok(scrub(&honest, &|_| "[id]".to_owned())),
            Adversary::RewritesIds => Ok(scrub(&honest, &|id| id.to_uppercase().chars().take(6).collect())),
            Adversary::Empty => Ok(String::new()),
            Adversary::Fails => Err(SummarizerError("model unavailable".to_owned())),
            Adversary::Flaky if self.calls % 2 == 0 => Err(SummarizerError("flaky".to_owned())),
            Adversary::Flaky => Ok(honest),
        }
    }
}

fn adversary() -> impl Strategy<Value = Adversary> {
    prop_oneof![
        Just(Adversary::Extractive),
        Just(Adversary::DropsIds),
        Just(Adversary::RewritesIds),
        Just(Adversary::Empty),
        Just(Adversary::Fails),
        Just(Adversary::Flaky),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        (2_000u64..40_000, 50u64..6_000, prop::option::of(0.05f64..0.6), 1usize..4, 0.1f64..0.9),
        (any::<bool>(), 0u32..5, any::<bool>()),
    )
        .prop_map(|((window, keep, chunk_ratio, parts, share), (keep_secrets, turns, failures))| {
            Policy {
                context_window: window,
                reserve_tokens: window / 8,
                keep_recent_tokens: keep,
                chunk_ratio,
                parts,
                max_history_share: share,
                secret_policy: if keep_secrets { SecretPolicy::Keep } else { SecretPolicy::Reference },
                recent_turns_preserve: turns,
                tool_failures_section: failures,
                ..Policy::pi()
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn identifiers_survive_every_compaction(
        seed in any::<u64>(), entries in 20usize..220, compactions in 0usize..3, branches in 0usize..2,
        policy in policy(), adversary in adversary(),
    ) {
        let mut lines = generate(GenOptions { seed, entries, branches, compactions, tool_output_chars: 300 });
        // Plant a secret in the history so the secret policy is exercised too.
        lines.insert(2, r#"{"type":"message","id":"5ec4e700","parentId":null,"timestamp":"2026-01-05T10:00:00.500Z","message":{"role":"user","content":"use key sk-proj-abcdefghijklmnopqrstuvwx0123 for db.internal:6379","timestamp":1}}"#.to_owned());
        let t = transcript(&lines);
        let path = path_of(&t);
        let Ok(prep) = prepare(&path, &settings(&policy), &PiEstimator) else { return Ok(()) };
        let mut s = Adversarial { kind: adversary, calls: 0 };
        let out = compact(&prep, &policy, &mut s, &PiEstimator, None);

        prop_assert!(!out.summary.trim().is_empty(), "empty summary");
        let body = out.summary.split("\n\n## Identifier ledger\n").next().unwrap_or_default();
        let previous = prep.previous_summary.and_then(|e| match &e.kind {
            sessionlog_events::EntryKind::Compaction(c) => c.summary.clone(),
            _ => None,
        });
        let mut texts: Vec<String> = previous.into_iter().collect();
        for m in prep.messages_to_summarize.iter().chain(&prep.turn_prefix_messages) {
            texts.push(parts(&m.message).texts.join("\n"));
        }
        for text in &texts {
            for id in extract(text) {
                let kept = body.contains(&id.text) || out.identifier_ledger.contains(&id.text);
                let referenced = id.class == IdClass::Secret && policy.secret_policy == SecretPolicy::Reference
                    && !out.secret_refs.is_empty();
                prop_assert!(kept || referenced, "{:?} lost by {:?}", id, adversary);
            }
        }

        // The context after this compaction: summary, then the kept entries.
        let first = path.iter().position(|e| e.id.as_deref() == Some(out.first_kept_entry_id.as_str())).unwrap();
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
    assert!(summary.starts_with("## Decisions\nkept the config"));
    assert_eq!(first_kept_entry_id, "u2");
    assert_eq!(details["identifierLedger"], serde_json::json!(["db.internal:5432", "OPS-4242"]));
    assert!(summarizer.requests[0].instructions.ends_with("Additional focus:\nkeep ports"));
}
