//! The output budget a summary request asks for, as OpenClaw 2026.9.6's
//! `generateSummary` sets it (dist `compaction-*.mjs`): `⌊0.8 × reserve⌋`
//! for the history, `⌊0.5 × reserve⌋` for a split turn's prefix, where the
//! reserve is the one in force — OpenClaw writes its capped reserve into
//! Pi's settings before compacting (`applyAgentCompactionSettingsFromConfig`).
//! The model's own output limit caps it in the provider.

use sessionlog_compaction::{compact, Policy, RequestKind, Scripted};
use sessionlog_context::cut::prepare;
use sessionlog_events::{Entry, Transcript};
use sessionlog_tokens::PiEstimator;

const LINES: [&str; 7] = [
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
    r#"{"type":"message","id":"u0","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello there","timestamp":1}}"#,
    r#"{"type":"message","id":"a0","parentId":"u0","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Hello."}],"stopReason":"stop","timestamp":2}}"#,
    r#"{"type":"message","id":"u1","parentId":"a0","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"read /srv/app/config.yaml please","timestamp":3}}"#,
    r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call-1","name":"read","arguments":{"path":"/srv/app/config.yaml"}}],"stopReason":"toolUse","timestamp":4}}"#,
    r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolResult","toolCallId":"call-1","toolName":"read","content":[{"type":"text","text":"port: 5432 and a long listing of every other setting in the file"}],"isError":false,"timestamp":5}}"#,
    r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Fixed the port."}],"stopReason":"stop","timestamp":6}}"#,
];

/// The budgets the requests of one compaction asked for, by kind.
fn budgets(policy: &Policy) -> (Vec<u64>, Vec<u64>) {
    let header = Entry::parse(LINES[0]).unwrap();
    let t = Transcript::from_objects(header, LINES[1..].iter().map(|l| Entry::parse(l).unwrap()).collect())
        .unwrap();
    let tree = t.tree();
    let path: Vec<&Entry> =
        tree.path(t.entries.len() - 1).unwrap().into_iter().map(|i| &t.entries[i]).collect();
    let prep = prepare(&path, &policy.cut_settings(), &PiEstimator).unwrap();
    assert!(prep.cut.is_split_turn, "the cut splits the last turn");
    let mut s =
        Scripted::new([Ok("## Decisions\nhistory".to_owned()), Ok("## Decisions\nprefix".to_owned())]);
    compact(&prep, policy, &mut s, &PiEstimator, None);
    let of = |prefix: bool| {
        s.requests
            .iter()
            .filter(|r| (r.kind == RequestKind::TurnPrefix) == prefix)
            .map(|r| r.max_tokens)
            .collect::<Vec<_>>()
    };
    (of(false), of(true))
}

#[test]
fn summaries_ask_for_a_share_of_the_reserve_in_force() {
    // Keep the last answer only ("Fixed the port.": 4 tokens), so the cut
    // splits the second turn; nothing is preserved verbatim.
    let at = |window: u64, base: Policy| Policy {
        context_window: window,
        keep_recent_tokens: 4,
        recent_turns_preserve: 0,
        ..base
    };
    // OpenClaw on 30000: reserve min(max(16384, 20000), 7500) = 7500:
    // ⌊0.8 × 7500⌋ = 6000 and ⌊0.5 × 7500⌋ = 3750.
    assert_eq!(budgets(&at(30_000, Policy::openclaw())), (vec![6_000], vec![3_750]));
    // On 200000: reserve 20000: 16000 and 10000.
    assert_eq!(budgets(&at(200_000, Policy::openclaw())), (vec![16_000], vec![10_000]));
    // Pi's 16384: ⌊13107.2⌋ and 8192.
    assert_eq!(budgets(&at(200_000, Policy::pi())), (vec![13_107], vec![8_192]));
}
