//! Properties of context assembly over generated transcripts.

use std::collections::HashSet;

use proptest::prelude::*;
use sessionlog_context::pairing::{check_pairs, PairingIssue};
use sessionlog_context::{build, resolve_leaf, Leaf};
use sessionlog_events::{Entry, EntryKind, Role, Transcript};
use sessionlog_test_support::{generate, GenOptions};

fn transcript(options: GenOptions) -> Transcript {
    let mut lines = generate(options).into_iter();
    let header = Entry::parse(&lines.next().unwrap()).unwrap();
    let entries = lines.map(|l| Entry::parse(&l).unwrap()).collect();
    Transcript::from_objects(header, entries).unwrap()
}

/// Tool calls on `path` that have a result later on the same path.
fn answered_on_path(path: &[&Entry]) -> HashSet<String> {
    let mut calls = HashSet::new();
    let mut answered = HashSet::new();
    for e in path {
        let Some(m) = e.message() else { continue };
        match m.role() {
            Role::Assistant => {
                for b in m.blocks().iter().filter(|b| b.kind.as_deref() == Some("toolCall")) {
                    calls.extend(b.id.clone());
                }
            }
            Role::ToolResult => {
                if let Some(id) = m.tool_call_id.as_deref().filter(|id| calls.contains(*id)) {
                    answered.insert(id.to_owned());
                }
            }
            _ => {}
        }
    }
    answered
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Assembly never breaks a tool pair by itself: a call left unanswered in
    /// the context is unanswered on its path too, and an orphaned result's
    /// call was compacted away (it lies on the path before the kept range).
    #[test]
    fn assembly_never_breaks_a_tool_pair(seed in any::<u64>(), entries in 10usize..300, branches in 0usize..4, compactions in 0usize..4) {
        let t = transcript(GenOptions { seed, entries, branches, compactions, tool_output_chars: 40 });
        let tree = t.tree();
        for leaf in tree.leaves() {
            let ctx = build(&t, &tree, Some(leaf)).unwrap();
            let path: Vec<&Entry> = ctx.path.iter().map(|&i| &t.entries[i]).collect();
            let answered = answered_on_path(&path);
            let in_context: HashSet<&str> = ctx.messages.iter().filter_map(|m| m.entry.id.as_deref()).collect();
            for issue in check_pairs(&ctx.messages) {
                match issue {
                    PairingIssue::MissingResult { call_id, .. } => {
                        prop_assert!(!answered.contains(&call_id), "assembly dropped the result of {}", call_id);
                    }
                    PairingIssue::OrphanResult { call_id, .. } => {
                        let call_entry = path.iter().find(|e| e.message().is_some_and(|m| m.blocks().iter().any(|b| b.id.as_deref() == Some(call_id.as_str()))));
                        let compacted = call_entry.is_some_and(|e| !in_context.contains(e.id.as_deref().unwrap_or_default()))
                            && path.iter().any(|e| matches!(e.kind, EntryKind::Compaction(_)));
                        prop_assert!(compacted || call_entry.is_none(), "assembly orphaned the result of {}", call_id);
                    }
                }
            }
        }
        // The default leaf resolves to the last entry and builds without error.
        let index = resolve_leaf(&t, &tree, Leaf::Default).unwrap();
        prop_assert_eq!(index, Some(t.entries.len() - 1));
    }
}

#[test]
fn pairing_reports_what_a_broken_transcript_breaks() {
    let lines = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{}}],"stopReason":"toolUse"}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"toolResult","toolCallId":"c2","toolName":"read","content":[],"isError":false}}"#,
    ];
    let header = Entry::parse(lines[0]).unwrap();
    let t = Transcript::from_objects(header, lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect())
        .unwrap();
    let tree = t.tree();
    let ctx = build(&t, &tree, Some(1)).unwrap();
    assert_eq!(
        check_pairs(&ctx.messages),
        [
            PairingIssue::OrphanResult { call_id: "c2".into(), entry_id: Some("b".into()) },
            PairingIssue::MissingResult { call_id: "c1".into(), entry_id: Some("a".into()) },
        ]
    );
}
