//! The identifier ledger's contract on every shared fixture (Pi, OpenClaw,
//! Claude Code, Codex) under several policies: after each virtual
//! compaction, every identifier of the history before its first kept entry
//! is in its summary text or its ledger (secrets, under the reference policy,
//! referenced by entry instead).

use std::collections::HashSet;

use sessionlog_compaction::ids::{extract, IdClass};
use sessionlog_compaction::Policy;
use sessionlog_context::assemble::context_message;
use sessionlog_event_log::Mode;
use sessionlog_replay::{replay, Measure};
use sessionlog_test_support::fixtures;
use sessionlog_tokens::{parts, PiEstimator};

use crate::support::par_map;

fn policies() -> Vec<Policy> {
    let pressure = |base: Policy, name: &str| Policy {
        name: name.to_owned(),
        context_window: 32_000,
        reserve_tokens: 4_096,
        keep_recent_tokens: 2_000,
        ..base
    };
    vec![
        Policy::openclaw(),
        Policy::pi(),
        Policy::claude_code(),
        Policy::codex(),
        pressure(Policy::openclaw(), "openclaw-32k"),
        pressure(Policy::pi(), "pi-32k"),
        pressure(Policy { reserve_tokens_floor: 0, ..Policy::openclaw() }, "openclaw-32k-no-floor"),
    ]
}

#[test]
fn every_fixture_keeps_every_identifier_under_every_policy() {
    let mut files = fixtures::pi_transcripts();
    files.extend(fixtures::openclaw_transcripts());
    files.extend(fixtures::claude_code_transcripts());
    files.extend(fixtures::codex_rollouts());
    assert!(files.len() >= 14, "shared fixtures not found under {}", fixtures::shared_dir().display());
    let results: Vec<(u64, Vec<String>)> = par_map(&files, |file| {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let t = sessionlog_store::load_transcript(file, Mode::Lenient).unwrap().loaded.transcript;
        let path: Vec<_> = t.default_path().unwrap().into_iter().map(|i| &t.entries[i]).collect();
        // Identifiers of each path message, taken from its text independently of the replay.
        let ids: Vec<Vec<(IdClass, String)>> = path
            .iter()
            .map(|e| {
                context_message(e)
                    .map(|m| {
                        extract(&parts(&m.message).texts.join("\n"))
                            .into_iter()
                            .map(|i| (i.class, i.text))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let mut checked = 0;
        let mut problems = Vec::new();
        for policy in policies() {
            let r = replay(&t, &policy, &mut sessionlog_compaction::Extractive, &PiEstimator, Measure::Usage)
                .unwrap();
            if r.metrics.ledger_recall != 1.0 {
                problems.push(format!("{name} {}: ledgerRecall {}", policy.name, r.metrics.ledger_recall));
            }
            for c in &r.compactions {
                if c.ledger_recall != 1.0 {
                    problems
                        .push(format!("{name} {} {}: ledgerRecall {}", policy.name, c.id, c.ledger_recall));
                }
                let first =
                    path.iter().position(|e| e.id.as_deref() == Some(c.outcome.first_kept_entry_id.as_str()));
                let Some(first) = first else {
                    problems.push(format!(
                        "{name} {}: first kept {} not on the path",
                        policy.name, c.outcome.first_kept_entry_id
                    ));
                    continue;
                };
                let ledger: HashSet<&str> = c.outcome.identifier_ledger.iter().map(String::as_str).collect();
                // An identifier counts as kept when its text is in the summary or the
                // ledger verbatim, also inside a longer one (a path inside a longer
                // path); the sets answer most lookups, the texts the rest.
                let named: HashSet<String> =
                    extract(&c.outcome.summary).into_iter().map(|i| i.text).collect();
                let ledger_text = c.outcome.identifier_ledger.join("\n");
                let kept = |id: &str| {
                    ledger.contains(id)
                        || named.contains(id)
                        || c.outcome.summary.contains(id)
                        || ledger_text.contains(id)
                };
                for (at, entry) in path[..first].iter().enumerate() {
                    for (class, id) in &ids[at] {
                        checked += 1;
                        let ok = if *class == IdClass::Secret {
                            let entry_id = entry.id.as_deref().unwrap_or("");
                            c.outcome.secret_refs.contains(&format!("secret in entry {entry_id}"))
                                && !ledger.contains(id.as_str())
                        } else {
                            kept(id)
                        };
                        if !ok {
                            problems.push(format!("{name} {} {}: {class:?} {id} lost", policy.name, c.id));
                        }
                    }
                }
            }
        }
        (checked, problems)
    });
    let checked: u64 = results.iter().map(|r| r.0).sum();
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.1).collect();
    assert!(checked > 10_000, "only {checked} identifiers checked: the policies must compact the fixtures");
    assert!(problems.is_empty(), "{} lost, first: {:?}", problems.len(), &problems[..problems.len().min(10)]);
}
