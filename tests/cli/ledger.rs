//! The identifier ledger's contract on every shared fixture (Pi, OpenClaw,
//! Claude Code, Codex) under several policies: after each virtual
//! compaction, every identifier of the history before its first kept entry
//! is in its summary text or its ledger (secrets, under the reference policy,
//! referenced by entry instead).

use std::collections::HashSet;

use sessionlog_compaction::ids::{extract, IdClass};
use sessionlog_compaction::{ledger_of, Ledger, Policy};
use sessionlog_context::assemble::context_message;
use sessionlog_event_log::Mode;
use sessionlog_replay::{replay_prepared, Measure, Prepared};
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

/// What one fixture gives under one policy: compactions and the lowest
/// per-compaction `ledgerRecall` (1 when it never compacts).
struct Outcome {
    policy: String,
    compactions: u64,
    min_ledger_recall: f64,
}

#[test]
fn every_fixture_keeps_every_identifier_under_every_policy() {
    let mut files = fixtures::pi_transcripts();
    files.extend(fixtures::openclaw_transcripts());
    files.extend(fixtures::claude_code_transcripts());
    files.extend(fixtures::codex_rollouts());
    assert!(files.len() >= 14, "shared fixtures not found under {}", fixtures::shared_dir().display());
    let results: Vec<(u64, Vec<String>, Vec<Outcome>)> = par_map(&files, |file| {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let t = sessionlog_store::load_transcript(file, Mode::Lenient).unwrap().loaded.transcript;
        let path: Vec<_> = t.default_path().unwrap().into_iter().map(|i| &t.entries[i]).collect();
        // Identifiers of each path message, taken from its text independently
        // of the replay: each distinct non-secret text once, with the first
        // path index naming it (whether a compaction keeps it does not depend
        // on where it appears), and every secret with its entry (its
        // reference names the entry).
        let mut distinct: Vec<(IdClass, String, usize)> = Vec::new();
        let mut secrets: Vec<(usize, String)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        // occurrences[k]: identifier occurrences in path[..k] (what the check covers).
        let mut occurrences = vec![0u64; path.len() + 1];
        for (at, e) in path.iter().enumerate() {
            let ids =
                context_message(e).map(|m| extract(&parts(&m.message).texts.join("\n"))).unwrap_or_default();
            occurrences[at + 1] = occurrences[at] + ids.len() as u64;
            for id in ids {
                if id.class == IdClass::Secret {
                    secrets.push((at, id.text));
                } else if seen.insert(id.text.clone()) {
                    distinct.push((id.class, id.text, at));
                }
            }
        }
        // The transcript is prepared once and every policy replayed over it.
        let prepared = Prepared::new(&t).unwrap();
        let counter = prepared.counter(&PiEstimator);
        let mut checked = 0;
        let mut problems = Vec::new();
        let mut outcomes = Vec::new();
        for policy in policies() {
            let mut summarizer = sessionlog_compaction::Extractive;
            let r = replay_prepared(&prepared, &policy, &mut summarizer, &counter, Measure::Usage);
            if r.metrics.ledger_recall != 1.0 {
                problems.push(format!("{name} {}: ledgerRecall {}", policy.name, r.metrics.ledger_recall));
            }
            outcomes.push(Outcome {
                policy: policy.name.clone(),
                compactions: r.compactions.len() as u64,
                min_ledger_recall: r.compactions.iter().map(|c| c.ledger_recall).fold(1.0, f64::min),
            });
            // Each compaction keeps its change to the ledger: applied in order, the whole ledger.
            // The entries `--events-out` writes resolve to the same ledgers (each
            // names the one before as its base).
            let lines = r.event_lines().unwrap();
            let written: Vec<&sessionlog_events::Entry> = lines.iter().take(r.compactions.len()).collect();
            let mut resolved = Ledger::default();
            for (k, c) in r.compactions.iter().enumerate() {
                resolved.apply(&c.outcome.ledger);
                if ledger_of(&written, k).to_vec() != resolved.to_vec() {
                    problems
                        .push(format!("{name} {} {}: --events-out resolves otherwise", policy.name, c.id));
                }
                if resolved.len() != c.outcome.ledger_identifiers {
                    problems.push(format!(
                        "{name} {} {}: {} identifiers resolved, {} reported",
                        policy.name,
                        c.id,
                        resolved.len(),
                        c.outcome.ledger_identifiers
                    ));
                }
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
                let ledger: HashSet<&str> = resolved.iter().collect();
                // An identifier counts as kept when its text is in the summary or the
                // ledger verbatim, also inside a longer one (a path inside a longer
                // path); the sets answer most lookups, the texts the rest.
                let named: HashSet<String> =
                    extract(&c.outcome.summary).into_iter().map(|i| i.text).collect();
                let ledger_text = resolved.iter().collect::<Vec<_>>().join("\n");
                let kept = |id: &str| {
                    ledger.contains(id)
                        || named.contains(id)
                        || c.outcome.summary.contains(id)
                        || ledger_text.contains(id)
                };
                checked += occurrences[first];
                for (class, id, _) in distinct.iter().take_while(|(_, _, at)| *at < first) {
                    if !kept(id) {
                        problems.push(format!("{name} {} {}: {class:?} {id} lost", policy.name, c.id));
                    }
                }
                for (at, id) in secrets.iter().take_while(|(at, _)| *at < first) {
                    let entry_id = path[*at].id.as_deref().unwrap_or("");
                    let referenced = resolved.secret_refs().contains(&format!("secret in entry {entry_id}"));
                    if !referenced || ledger.contains(id.as_str()) {
                        problems.push(format!(
                            "{name} {} {}: secret {id} kept or unreferenced",
                            policy.name, c.id
                        ));
                    }
                }
            }
        }
        (checked, problems, outcomes)
    });
    // The fixture-wide result, per policy (printed with --nocapture).
    for policy in policies() {
        let mine = results.iter().flat_map(|r| &r.2).filter(|o| o.policy == policy.name);
        let (n, min) =
            mine.fold((0, 1.0f64), |(n, min), o| (n + o.compactions, min.min(o.min_ledger_recall)));
        eprintln!("{:<24} {n:>5} compactions, min ledgerRecall {min}", policy.name);
    }
    let checked: u64 = results.iter().map(|r| r.0).sum();
    let problems: Vec<&String> = results.iter().flat_map(|r| &r.1).collect();
    assert!(checked > 10_000, "only {checked} identifiers checked: the policies must compact the fixtures");
    assert!(problems.is_empty(), "{} lost, first: {:?}", problems.len(), &problems[..problems.len().min(10)]);
}
