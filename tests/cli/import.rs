//! Claude Code and Codex sessions through the commands: `inspect`, `context`,
//! `cut`, `entries`, `replay` under each preset, and mixed-format sweeps.
//! Expected figures come from the files (python3 one-liners below, or counted
//! by hand as the comments say), never from sessionlog itself.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{arg, fixtures, json, run, run_ok};

fn claude(prefix: &str) -> PathBuf {
    let all = fixtures::claude_code_transcripts();
    all.into_iter().find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix)).unwrap()
}

fn codex(date: &str) -> PathBuf {
    let all = fixtures::codex_rollouts();
    all.into_iter().find(|p| p.file_name().unwrap().to_string_lossy().contains(date)).unwrap()
}

fn python(script: &str, file: &Path) -> Value {
    let out = Command::new("python3").args(["-c", script, arg(file)]).output().expect("python3 is needed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    json(&out.stdout)
}

/// Model calls in a Claude Code file: runs of assistant lines with one `message.id`
/// (the shell equivalent: `jq -r 'select(.type=="assistant").message.id' | uniq | wc -l`).
const CLAUDE_CALLS: &str = r#"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1], 'rb').read().split(b'\n') if l.strip()]
ids = [r['message']['id'] for r in recs if r.get('type') == 'assistant']
print(sum(1 for i, x in enumerate(ids) if i == 0 or ids[i - 1] != x))
"#;

/// Codex model calls: `token_count` events with new totals (a repeat is no call);
/// per call, its first line, whether it calls a tool, and its context
/// (`last_token_usage.total_tokens` of the event just before its items).
const CODEX_CALLS: &str = r#"
import json, sys
recs = [(n, json.loads(l)) for n, l in enumerate(open(sys.argv[1], 'rb').read().split(b'\n'), 1) if l.strip()]
calls, previous, context, current = [], object(), None, None
for n, r in recs:
    p = r.get('payload') or {}
    if r['type'] == 'event_msg' and p.get('type') == 'token_count' and p.get('info'):
        if p['info']['total_token_usage'] != previous:
            context, current = p['info']['last_token_usage']['total_tokens'], None
        previous = p['info']['total_token_usage']
    elif r['type'] == 'response_item' and (p.get('type') in ('reasoning', 'function_call', 'custom_tool_call') or p.get('role') == 'assistant'):
        if current is None:
            current = {'line': n, 'tools': False, 'context': context}
            calls.append(current)
        current['tools'] |= p.get('type') in ('function_call', 'custom_tool_call')
    elif r['type'] != 'event_msg':
        current = None
print(json.dumps(calls))
"#;

#[test]
fn inspect_reads_both_formats_by_content() {
    // Session ids and titles from the files' first lines; compactions counted
    // with `grep -c compact_boundary` (Codex: no `compacted` line).
    let cases = [
        (claude("703e4528"), "claude-code", "703e4528-dfb0-4257-a888-e10b7d3e39a8", None, 1),
        (
            claude("d6a37ffc"),
            "claude-code",
            "d6a37ffc-384d-4d2a-832a-78cdd493af69",
            Some("Voice System Proper Fix: MCP Integration"),
            2,
        ),
        (codex("2025-11-01"), "codex-rollout", "97b66f6c-a160-40e0-bd0f-1fdcbbb9498b", None, 0),
        (codex("2025-11-12"), "codex-rollout", "019a7ae6-1945-7c63-98f2-210adb922af9", None, 0),
    ];
    for (file, format, id, name, compactions) in cases {
        let report = json(&run_ok(&["inspect", arg(&file), "--json"]));
        assert_eq!(report["format"], format, "{}", file.display());
        assert_eq!(report["sessionId"], id);
        assert_eq!(report["sessionName"].as_str(), name);
        assert_eq!(report["byType"]["compaction"].as_u64().unwrap_or(0), compactions);
        assert_eq!(report["skippedLines"], serde_json::json!([]));
        assert_eq!(report["branchPoints"], serde_json::json!([]));
    }
    // The text report too, for a Codex rollout read from a file with another name.
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("session.log");
    fs::copy(codex("2025-11-12"), &renamed).unwrap();
    let text = String::from_utf8(run_ok(&["inspect", arg(&renamed)])).unwrap();
    assert!(text.contains("format        codex-rollout"), "{text}");
}

#[test]
fn a_damaged_session_reports_its_bad_lines_by_number() {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(claude("d6a37ffc")).unwrap();
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines[6] = "{\"type\":\"user\",\"mess"; // line 7, torn
    lines.insert(20, "garbage"); // now line 21
    let damaged = dir.path().join("d.jsonl");
    fs::write(&damaged, lines.join("\n")).unwrap();
    let report = json(&run_ok(&["inspect", arg(&damaged), "--json"]));
    let skipped: Vec<u64> =
        report["skippedLines"].as_array().unwrap().iter().map(|s| s["line"].as_u64().unwrap()).collect();
    assert_eq!(skipped, [7, 21]);
    let strict = run(&["inspect", arg(&damaged), "--strict"]);
    assert_eq!(strict.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(stderr.contains(&format!("{}:7:", damaged.display())), "{stderr}");
}

#[test]
fn context_cut_and_entries_work_on_imported_sessions() {
    // Claude: the context starts from the last compaction's summary (preTokens
    // 116717 at line 313 of d6a37ffc, counted by hand).
    let file = claude("d6a37ffc");
    let ctx = json(&run_ok(&["context", arg(&file), "--json"]));
    let first = &ctx["messages"][0];
    assert_eq!(
        (first["role"].as_str(), first["tokensBefore"].as_f64()),
        (Some("compactionSummary"), Some(116_717.0))
    );
    assert!(first["summary"].as_str().unwrap().starts_with("This session is being continued"));
    assert_eq!(ctx["model"]["modelId"], "claude-opus-4-5-20251101");
    // Codex 0.34: no compaction; the first message is the environment context,
    // and the last call's context (248519, the last `token_count`) is over
    // Codex's limit of 244800 for a 272000 window.
    let file = codex("2025-11-01");
    let ctx = json(&run_ok(&["context", arg(&file), "--json"]));
    let text = ctx["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("<environment_context>"), "{text}");
    let cut = json(&run_ok(&[
        "cut",
        arg(&file),
        "--context-window",
        "272000",
        "--reserve",
        "27200",
        "--keep-recent",
        "20000",
        "--json",
    ]));
    assert_eq!(cut["contextTokens"]["tokens"], 248_519);
    assert_eq!(cut["shouldCompact"], true);
    // `entries --jsonl` prints the mapped entries as a Pi file, which reads back as Pi.
    let dir = tempfile::tempdir().unwrap();
    let pi = dir.path().join("mapped.jsonl");
    fs::write(&pi, run_ok(&["entries", arg(&file), "--jsonl"])).unwrap();
    let report = json(&run_ok(&["inspect", arg(&pi), "--json"]));
    assert_eq!(report["format"], "pi-jsonl");
    let original = json(&run_ok(&["inspect", arg(&file), "--json"]));
    assert_eq!(report["byType"], original["byType"]);
}

#[test]
fn replay_runs_under_each_preset_and_lists_the_recorded_compactions() {
    // Recorded compactions by hand: the `isCompactSummary` line's uuid (the
    // compaction entry's id), `compactMetadata.preTokens` and `.trigger` of its boundary.
    let recorded = |file: &Path| -> Vec<(String, f64, String)> {
        match file.file_name().unwrap().to_string_lossy().get(..8).unwrap() {
            "703e4528" => vec![("e5e1e8f9-77ca-4c1a-bab5-172e0ecba742".into(), 123_096.0, "auto".into())],
            "d6a37ffc" => vec![
                ("3fc054f6-7da6-4b28-a80a-b7664263855d".into(), 121_367.0, "manual".into()),
                ("29e350f9-6c76-4e80-933b-c8844871ea18".into(), 116_717.0, "manual".into()),
            ],
            _ => vec![],
        }
    };
    let files = [claude("703e4528"), claude("d6a37ffc"), codex("2025-11-01"), codex("2025-11-12")];
    // Thresholds by hand: 200000 − 20000 − 13000; 272000 × 9 / 10.
    for (preset, threshold) in [("claude-code", 167_000.0), ("codex", 244_800.0)] {
        for file in &files {
            let report = json(&run_ok(&["replay", arg(file), "--preset", preset, "--json"]));
            assert_eq!(report["policy"]["name"], preset);
            assert_eq!(report["threshold"].as_f64(), Some(threshold));
            let got: Vec<(String, f64, String)> = report["recorded"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let below = r["tokensBefore"].as_f64().unwrap() <= threshold;
                    assert_eq!(r["belowThreshold"], below);
                    (
                        r["entryId"].as_str().unwrap().to_owned(),
                        r["tokensBefore"].as_f64().unwrap(),
                        r["trigger"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            assert_eq!(got, recorded(file), "{}", file.display());
            let m = &report["metrics"];
            let calls = if file.to_string_lossy().contains("/codex/") {
                python(CODEX_CALLS, file).as_array().unwrap().len() as u64
            } else {
                python(CLAUDE_CALLS, file).as_u64().unwrap()
            };
            assert_eq!(m["modelCalls"].as_u64(), Some(calls), "{}", file.display());
            assert_eq!(m["brokenToolPairs"], 0);
            assert_eq!(m["compactionsBelowThreshold"], 0);
            for c in report["compactions"].as_array().unwrap() {
                assert!(c["contextBefore"].as_f64().unwrap() > threshold || c["trigger"] == "overflow");
            }
        }
    }
    // Where Codex's own rule would have compacted the 0.34 session: after the
    // first call that ends a turn (calls no tool) with a context over 244800 —
    // before any compaction the replay measures exactly the recorded usage.
    let file = codex("2025-11-01");
    let calls = python(CODEX_CALLS, &file);
    let first = calls
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tools"] == false && c["context"].as_f64().is_some_and(|t| t > 244_800.0))
        .expect("the session passes the limit at a turn's end");
    let report = json(&run_ok(&["replay", arg(&file), "--preset", "codex", "--json"]));
    let c = &report["compactions"][0];
    assert_eq!(c["afterEntryId"].as_str(), Some(format!("L{}", first["line"]).as_str()));
    assert_eq!(c["contextBefore"].as_f64(), first["context"].as_f64());
    // The 0.57 session never comes near either limit (its largest context is 82788).
    let report = json(&run_ok(&["replay", arg(&codex("2025-11-12")), "--preset", "codex", "--json"]));
    assert_eq!(report["metrics"]["compactions"], 0);
    // The text report names the recorded compactions.
    let text =
        String::from_utf8(run_ok(&["replay", arg(&claude("703e4528")), "--preset", "claude-code"])).unwrap();
    assert!(text.contains("e5e1e8f9-77ca-4c1a-bab5-172e0ecba742 tokensBefore 123096 trigger auto"), "{text}");
}

/// A home folder laid out as the three tools keep their sessions.
fn home_with_sessions(home: &Path) -> [PathBuf; 3] {
    let claude_dir = home.join(".claude/projects/-home-me-project");
    let codex_dir = home.join(".codex/sessions/2025/11/01");
    let openclaw_dir = home.join(".openclaw/agents/main/sessions");
    for d in [&claude_dir, &codex_dir, &openclaw_dir] {
        fs::create_dir_all(d).unwrap();
    }
    let c = claude("703e4528");
    fs::copy(&c, claude_dir.join(c.file_name().unwrap())).unwrap();
    let x = codex("2025-11-12");
    fs::copy(&x, codex_dir.join(x.file_name().unwrap())).unwrap();
    let pi = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    fs::copy(pi, openclaw_dir.join("0d9a3f4e-1111-4222-8333-944455556666.jsonl")).unwrap();
    [home.join(".claude/projects"), home.join(".codex/sessions"), openclaw_dir]
}

#[test]
fn the_readme_sweep_over_three_tools_writes_the_format_of_each_row() {
    let home = tempfile::tempdir().unwrap();
    let [claude_root, codex_root, openclaw_root] = home_with_sessions(home.path());
    let out = home.path().join("out");
    let stdout = run_ok(&[
        "sweep",
        arg(&claude_root),
        arg(&codex_root),
        arg(&openclaw_root),
        "--preset",
        "claude-code,codex",
        "--quiet",
        "--out",
        arg(&out),
    ]);
    let text = String::from_utf8(stdout).unwrap();
    // 3 transcripts × (OpenClaw, Pi, claude-code, codex).
    assert!(text.starts_with("3 transcripts × 4 policies = 12 replays"), "{text}");
    assert!(text.contains("formats: claude-code 1, codex-rollout 1, pi-jsonl 1"), "{text}");
    let rows: Vec<Value> = fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 12);
    for row in &rows {
        let file = row["transcript"].as_str().unwrap();
        let expected = if file.contains("/.claude/") {
            "claude-code"
        } else if file.contains("/.codex/") {
            "codex-rollout"
        } else {
            "pi-jsonl"
        };
        assert_eq!(row["format"], expected, "{file}");
        // The column sits after the transcript, before the policy.
        let keys: Vec<&String> = row.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["transcript", "format", "policy", "metrics"]);
    }
    let mut reader = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    assert_eq!(reader.headers().unwrap().get(1), Some("format"));
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    // 4 policies over the whole corpus, then 4 per format.
    assert_eq!(records.len(), 16);
    let formats: Vec<&str> = records.iter().map(|r| r.get(1).unwrap()).collect();
    assert_eq!(formats[..4], ["claude-code+codex-rollout+pi-jsonl"; 4]);
    assert_eq!(formats[4..8], ["claude-code"; 4]);
    assert_eq!(formats[8..12], ["codex-rollout"; 4]);
    assert_eq!(formats[12..], ["pi-jsonl"; 4]);
    let per_format: u64 = records[4..]
        .iter()
        .filter(|r| r.get(0) == Some("codex"))
        .map(|r| r.get(2).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(per_format, 3, "each transcript counted once per policy");
    let summary = json(&fs::read(out.join("summary.json")).unwrap());
    assert_eq!(summary["byFormat"].as_object().unwrap().len(), 3);
}

#[test]
fn compact_never_writes_an_imported_session() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    fs::copy(claude("d6a37ffc"), &file).unwrap();
    let before = fs::read(&file).unwrap();
    let out = run(&["compact", arg(&file), "--now", "2026-03-01T00:00:00Z"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a claude-code session"), "{out:?}");
    let report = json(&run_ok(&["compact", arg(&file), "--now", "2026-03-01T00:00:00Z", "--dry-run"]));
    assert_eq!(report["written"], false);
    assert_eq!(report["entry"]["type"], "compaction");
    assert_eq!(fs::read(&file).unwrap(), before);
}
