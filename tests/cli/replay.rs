//! `sessionlog replay`: deterministic, faithful to recorded summaries where
//! cuts match, and judging recorded compactions by the policy.

use std::fs;

use sessionlog_compaction::{compact, Policy, Recorded};
use sessionlog_context::cut::{prepare, Settings};
use sessionlog_event_log::{load, Mode};
use sessionlog_events::{Entry, EntryKind};
use sessionlog_tokens::PiEstimator;

use crate::support::{all_transcripts, arg, fixtures, json, par_map, run, run_ok};

/// A policy small enough that every fixture compacts several times: the
/// OpenClaw preset compacts above 16000 − min(20000, ⌊16000/4⌋) = 12000.
const PRESSURE: [&str; 6] = ["--context-window", "16000", "--reserve", "4096", "--keep-recent", "4000"];
/// The same pressure under Pi's preset: above 32000 − 4096.
const PI_PRESSURE: [&str; 6] = ["--context-window", "32000", "--reserve", "4096", "--keep-recent", "4000"];

#[test]
fn replaying_twice_gives_identical_bytes() {
    let mut files = all_transcripts();
    files.extend(fixtures::generated_transcripts());
    let dir = tempfile::tempdir().unwrap();
    let failures: Vec<String> = par_map(&files, |file| {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let runs: Vec<(Vec<u8>, Vec<u8>)> = (0..2)
            .map(|k| {
                let events = dir.path().join(format!("{name}.{k}.events.jsonl"));
                let mut args = vec![
                    "replay",
                    arg(file),
                    "--json",
                    "--summarizer",
                    "extractive",
                    "--events-out",
                    arg(&events),
                ];
                args.extend(PRESSURE);
                let out = run_ok(&args);
                (out, fs::read(&events).unwrap())
            })
            .collect();
        let report = json(&runs[0].0);
        let compactions = report["metrics"]["compactions"].as_u64().unwrap_or(0);
        let mut problems = Vec::new();
        if runs[0] != runs[1] {
            problems.push(format!("{name}: two replays differ"));
        }
        // The tiny synthetic files fit in the window; every real one must compact.
        let big = fs::metadata(file).map(|m| m.len() > 50_000).unwrap_or(false);
        if big && compactions == 0 {
            problems.push(format!("{name}: the pressure policy made no compaction, so the check is empty"));
        }
        if report["metrics"]["brokenToolPairs"] != 0 {
            problems.push(format!("{name}: broken tool pairs {}", report["metrics"]["brokenToolPairs"]));
        }
        // Every event line is an entry Pi can read.
        for line in String::from_utf8_lossy(&runs[0].1).lines() {
            let entry = Entry::parse(line).unwrap();
            if !matches!(entry.kind, EntryKind::Compaction(_) | EntryKind::Custom { .. }) {
                problems.push(format!("{name}: unexpected event {line}"));
            }
        }
        problems
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn recorded_summaries_come_back_where_the_cut_matches() {
    // For every recorded compaction, prepare Pi's cut on the path just before
    // it; where the cut is the recorded one, the recorded summariser must
    // reproduce the recorded summary (only our ledger may follow it).
    let mut matched = 0;
    let mut compared = 0;
    for file in all_transcripts() {
        let t = load(&file, Mode::Lenient).unwrap().transcript;
        let tree = t.tree();
        let recorded = sessionlog_replay::recorded_summaries(&t);
        for entry in &t.entries {
            let EntryKind::Compaction(c) = &entry.kind else { continue };
            let Some(parent) = entry.parent_id.as_deref().and_then(|p| tree.index_of(p)) else { continue };
            let path: Vec<&Entry> = tree.path(parent).unwrap().into_iter().map(|j| &t.entries[j]).collect();
            let policy = Policy::pi();
            let settings = Settings { enabled: true, reserve_tokens: 16_384, keep_recent_tokens: 20_000 };
            let Ok(prep) = prepare(&path, &settings, &PiEstimator) else { continue };
            compared += 1;
            if Some(prep.first_kept_entry_id.as_str()) != c.first_kept_entry_id.as_deref() {
                continue;
            }
            matched += 1;
            let mut s = Recorded::new(recorded.clone());
            let out = compact(&prep, &policy, &mut s, &PiEstimator, None);
            let summary = c.summary.as_deref().unwrap();
            // Our identifier section comes first; the recorded summary follows it.
            let body = sessionlog_compaction::pipeline::without_ledger_section(&out.summary);
            assert!(body.starts_with(summary), "{}: {:?}", file.display(), entry.id);
            let rest = &body[summary.len()..];
            // Only what our pipeline adds may follow: the file lists (recorded
            // summaries written before Pi appended them lack them).
            let allowed = ["\n\n<read-files>", "\n\n<modified-files>"];
            assert!(
                rest.is_empty() || allowed.iter().any(|a| rest.starts_with(a)),
                "{}: extra text {rest:?}",
                file.display()
            );
            assert_eq!(s.hits, 1);
        }
    }
    eprintln!("recorded compactions: {compared} prepared, {matched} with the recorded cut");
    assert!(compared >= 5, "recorded compactions compared: {compared}");
    assert!(matched >= 1, "no recorded cut was reproduced ({compared} compared)");
}

#[test]
fn the_655_token_second_compaction_is_flagged_below_threshold() {
    let file = fixtures::shared_dir()
        .join("fixtures/openclaw/agents/build/sessions/26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl");
    let report = json(&run_ok(&["replay", arg(&file), "--json", "--preset", "openclaw"]));
    assert_eq!(report["threshold"], 180_000.0, "OpenClaw: 200000 − max(16384, floor 20000)");
    let recorded = report["recorded"].as_array().unwrap();
    assert_eq!(recorded.len(), 2);
    assert_eq!(
        (recorded[0]["tokensBefore"].as_f64(), &recorded[0]["belowThreshold"]),
        (Some(182_705.0), &false.into())
    );
    assert_eq!(
        (recorded[1]["tokensBefore"].as_f64(), &recorded[1]["belowThreshold"]),
        (Some(655.0), &true.into())
    );
    assert_eq!(report["metrics"]["recordedBelowThreshold"], 1);
    assert_eq!(report["metrics"]["brokenToolPairs"], 0);
}

#[test]
fn shipped_policies_parse_and_the_defaults_equal_the_presets() {
    let dir = fixtures::project_dir().join("replay/policies");
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let policy: Policy = toml::from_str(&fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(policy.name.clone());
        match policy.name.as_str() {
            "openclaw-default" => assert_eq!(policy, Policy::openclaw()),
            "pi-default" => assert_eq!(policy, Policy::pi()),
            "claude-code" => assert_eq!(policy, Policy::claude_code()),
            "codex" => assert_eq!(policy, Policy::codex()),
            _ => {}
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "claude-code",
            "claude-code-2.0",
            "codex",
            "codex-90",
            "goose-80",
            "openclaw-default",
            "pi-default",
            "pi-masking",
            "small-window-aggressive"
        ]
    );
    let bad = tempfile::NamedTempFile::new().unwrap();
    fs::write(bad.path(), "contextWindow = 1000\nreserveToken = 5\n").unwrap();
    let file = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    let out = run(&["replay", arg(&file), "--policy", arg(bad.path())]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a valid policy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Pi 1.6 summarises a compaction's kept entries again at the next one
/// (CHANGES.md, `prepareCompaction`); Pi 0.58 starts after the compaction.
/// The Pi preset follows 1.6, `--pi-rules 0.58` brings the old cut back.
#[test]
fn under_pi_1_6_each_compaction_summarises_the_previous_ones_kept_entries_again() {
    for name in ["pi/large-session.jsonl", "pi/before-compaction.jsonl"] {
        let file = fixtures::shared_dir().join("fixtures").join(name);
        // Linear files: file order is path order.
        let entries = json(&run_ok(&["entries", arg(&file)]));
        let entries = entries["entries"].as_array().unwrap();
        let position = |id: &serde_json::Value| entries.iter().position(|e| &e["id"] == id);
        let makes_message =
            |i: usize| matches!(entries[i]["type"].as_str(), Some("message" | "custom_message"));
        let replay = |rules: &[&str]| {
            let mut args = vec!["replay", arg(&file), "--json", "--preset", "pi"];
            args.extend(PI_PRESSURE);
            args.extend(rules);
            json(&run_ok(&args))["compactions"].as_array().unwrap().clone()
        };
        let v16 = replay(&[]);
        assert!(v16.len() >= 10, "{name}: {} compactions", v16.len());
        for pair in v16.windows(2) {
            let kept = position(&pair[0]["firstKeptEntryId"]).unwrap();
            let from = position(&pair[1]["summarizedFrom"]).unwrap_or_else(|| panic!("{name}: {}", pair[1]));
            // The first message at or after the previous first kept entry.
            assert!(
                from >= kept && (kept..from).all(|i| !makes_message(i)),
                "{name}: {} then {}",
                pair[0],
                pair[1]
            );
        }
        let v058 = replay(&["--pi-rules", "0.58"]);
        let restarted_after = v058.windows(2).all(|pair| {
            let after = position(&pair[0]["afterEntryId"]).unwrap();
            position(&pair[1]["summarizedFrom"]).is_none_or(|from| from > after)
        });
        assert!(restarted_after, "{name}: 0.58 summarises only what follows a compaction");
    }
}

/// `replay --mask-after-turns N` answers "what would masking have saved?":
/// its `maskingSavings` are the differences between two separate runs, with
/// and without masking, and the masks come out as Pi 1.6 `context_edit` lines.
#[test]
fn masking_savings_are_the_difference_from_a_run_without_masking() {
    let file = fixtures::project_dir().join("fixtures/generated/long-s3.jsonl");
    let mut base: Vec<&str> = vec!["replay", arg(&file), "--json", "--measure", "estimate"];
    base.extend(PRESSURE);
    let plain = json(&run_ok(&base));
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let mut masked_args = base.clone();
    masked_args.extend(["--mask-after-turns", "2", "--events-out", arg(&events)]);
    let masked = json(&run_ok(&masked_args));
    let billed = |v: &serde_json::Value| v["metrics"]["tokensBilled"].as_i64().unwrap();
    let compactions = |v: &serde_json::Value| v["metrics"]["compactions"].as_i64().unwrap();
    let s = &masked["maskingSavings"];
    assert_eq!(s["baselineTokensBilled"].as_i64(), Some(billed(&plain)));
    assert_eq!(s["tokensBilledSaved"].as_i64(), Some(billed(&plain) - billed(&masked)));
    assert_eq!(s["compactionsAvoided"].as_i64(), Some(compactions(&plain) - compactions(&masked)));
    assert!(s["tokensBilledSaved"].as_i64().unwrap() > 0, "{s}");
    assert!(plain.get("maskingSavings").is_none());
    let masks = masked["metrics"]["maskedToolResults"].as_u64().unwrap();
    assert!(masks > 0);
    let edits = fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(r#"{"type":"context_edit""#))
        .count() as u64;
    assert_eq!(edits, masks);
}

/// The quality probes come per compaction in `replay --json`, and the run's
/// metrics are their sums (added up here from the compactions).
#[test]
fn quality_probes_are_reported_per_compaction_and_summed() {
    let file = fixtures::project_dir().join("fixtures/generated/long-s3.jsonl");
    let mut args: Vec<&str> = vec!["replay", arg(&file), "--json"];
    args.extend(PRESSURE);
    let r = json(&run_ok(&args));
    let compactions = r["compactions"].as_array().unwrap();
    assert!(compactions.len() >= 2, "the policy compacts");
    let sum = |key: &str| compactions.iter().map(|c| c["probes"][key].as_u64().unwrap()).sum::<u64>();
    let m = &r["metrics"];
    assert_eq!(m["probeFiles"].as_u64(), Some(sum("files")));
    assert_eq!(m["probeFilesNamed"].as_u64(), Some(sum("filesNamed")));
    assert_eq!(m["probeToolFailures"].as_u64(), Some(sum("toolFailures")));
    let missing = compactions.iter().filter(|c| c["probes"]["lastUserAsk"] == "missing").count() as u64;
    assert_eq!(m["lastAskMissing"].as_u64(), Some(missing));
    for c in compactions {
        let ask = c["probes"]["lastUserAsk"].as_str().unwrap();
        assert!(["none", "kept", "summary", "missing"].contains(&ask), "{ask}");
    }
}
