//! Exit status and error messages: 0 ok, 1 bad input (file, line, reason), 2 usage.

use std::fs;

use crate::support::{arg, run};

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["inspect"]).status.code(), Some(2));
    assert_eq!(run(&["no-such-command"]).status.code(), Some(2));
    assert_eq!(run(&["append", "x.jsonl", "--fsync", "sometimes"]).status.code(), Some(2));
}

#[test]
fn bad_input_exits_1_naming_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let out = run(&["inspect", arg(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.jsonl"));

    let bad = dir.path().join("bad.jsonl");
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
    fs::write(&bad, format!("{header}\n{{\"type\":\"label\",\n")).unwrap();
    let out = run(&["entries", arg(&bad), "--strict"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.jsonl:2:16: EOF while parsing a value"), "{stderr}");
    // Lenient mode (the default) reads what Pi reads and reports the skip.
    let out = run(&["inspect", arg(&bad), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["skippedLines"][0]["line"], 2);
    assert_eq!(
        fs::read_to_string(&bad).unwrap(),
        format!("{header}\n{{\"type\":\"label\",\n"),
        "file untouched"
    );

    let headless = dir.path().join("headless.jsonl");
    fs::write(&headless, "{\"type\":\"message\"}\n").unwrap();
    let out = run(&["inspect", arg(&headless)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("headless.jsonl:1: not a Pi transcript"));
}

#[test]
fn foreign_sessions_are_read_and_other_json_is_still_refused() {
    let shared = crate::support::fixtures::shared_dir().join("fixtures");
    let codex = shared.join(
        "codex/sessions/2025/11/12/rollout-2025-11-12T17-48-11-019a7ae6-1945-7c63-98f2-210adb922af9.jsonl",
    );
    assert_eq!(run(&["inspect", arg(&codex)]).status.code(), Some(0));
    let claude = shared.join(
        "claude-code/projects/-Users-pretor-Documents-PAI---TPOS/d6a37ffc-384d-4d2a-832a-78cdd493af69.jsonl",
    );
    assert_eq!(run(&["inspect", arg(&claude)]).status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.jsonl");
    fs::write(&other, "{\"hello\":1}\n").unwrap();
    let out = run(&["inspect", arg(&other)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("other.jsonl:1: not a Pi transcript"));
}

#[test]
fn gen_is_deterministic_and_pack_unpack_round_trips_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    let args = ["gen", "--seed", "7", "--entries", "300", "--branches", "2", "--compactions", "2", "-o"];
    let mut first = args.to_vec();
    first.push(arg(&a));
    let mut second = args.to_vec();
    second.push(arg(&b));
    crate::support::run_ok(&first);
    crate::support::run_ok(&second);
    let text = fs::read(&a).unwrap();
    assert_eq!(text, fs::read(&b).unwrap());
    let packed = dir.path().join("a.slmp");
    crate::support::run_ok(&["pack", arg(&a), "-o", arg(&packed)]);
    let unpacked = crate::support::run_ok(&["unpack", arg(&packed)]);
    assert_eq!(unpacked, text);
    let report = crate::support::json(&crate::support::run_ok(&["inspect", arg(&packed), "--json"]));
    assert_eq!(report["format"], "sessionlog-msgpack");
    assert_eq!(report["byType"]["compaction"], 2);
    assert_eq!(report["branchPoints"].as_array().unwrap().len(), 2);
}

#[test]
fn every_key_of_the_fixture_store_parses_as_an_agent_key() {
    let store =
        crate::support::fixtures::shared_dir().join("fixtures/openclaw/agents/build/sessions/sessions.json");
    let value: serde_json::Value = serde_json::from_slice(&fs::read(store).unwrap()).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 12);
    for key in keys {
        let info = crate::support::json(&crate::support::run_ok(&["key", "parse", key, "--json"]));
        assert_eq!(info["shape"], "agent", "{key}");
        assert_eq!(info["agentId"], "build", "{key}");
        let expect_run = key.contains(":run:");
        assert_eq!(info["cronRun"], expect_run, "{key}");
        assert_eq!(info["subagent"], key.contains(":subagent:"), "{key}");
    }
}

/// A transcript whose header says version 4: a format no Pi writes. Pi
/// itself reads it as version 3 and appends to it (earendil-works/pi#9426);
/// every command here refuses it, names file, line and reason, and leaves it
/// as it was.
#[test]
fn a_version_4_header_is_refused_by_every_command_that_reads_or_writes() {
    let dir = tempfile::tempdir().unwrap();
    let source = crate::support::fixtures::shared_dir().join("oracle/pi-1.6/fixtures/new-entry-types.jsonl");
    let text = fs::read_to_string(source).unwrap();
    assert!(text.starts_with(r#"{"type":"session","version":3,"#));
    let original = format!("\n{}", text.replacen(r#""version":3"#, r#""version":4"#, 1));
    let file = dir.path().join("future.jsonl");
    fs::write(&file, &original).unwrap();
    let out_dir = dir.path().join("out");
    let segment = dir.path().join("future.slmp");
    let f = arg(&file);
    let commands: Vec<Vec<&str>> = vec![
        vec!["inspect", f, "--json"],
        vec!["inspect", f, "--strict"],
        vec!["entries", f],
        vec!["entries", f, "--jsonl"],
        vec!["context", f, "--json"],
        vec!["context", f, "--json", "--pi-rules", "1.6"],
        vec!["context", f, "--engine", "legacy", "--provider", "anthropic"],
        vec!["cut", f, "--json"],
        vec!["cut", f, "--json", "--pi-rules", "1.6"],
        vec!["replay", f, "--json"],
        vec!["sweep", f, "--out", arg(&out_dir), "--quiet"],
        vec!["pack", f, "-o", arg(&segment)],
        vec!["compact", f, "--now", "2026-11-22T00:00:00Z"],
        vec!["compact", f, "--dry-run"],
        vec!["append", f],
    ];
    for args in &commands {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("future.jsonl:2: unsupported session version 4"), "{args:?}: {stderr}");
        assert_eq!(fs::read_to_string(&file).unwrap(), original, "{args:?} changed the file");
    }
    let left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!left.iter().any(|n| n.starts_with("future.jsonl.") || n.ends_with(".slmp")), "{left:?}");
}
