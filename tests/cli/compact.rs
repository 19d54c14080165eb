//! `sessionlog compact`: the `/compact` of a live session, appended under the
//! transcript's lock and read back by Pi's own code.

use std::fs;

use crate::support::{arg, fixtures, json, oracle, oracle_difference, run, run_ok};

const SESSION: &str = "openclaw/agents/build/sessions/678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl";

fn copy_of_session(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("session.jsonl");
    fs::copy(fixtures::shared_dir().join("fixtures").join(SESSION), &file).unwrap();
    file
}

#[test]
fn a_manual_compaction_is_appended_and_pi_builds_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let file = copy_of_session(dir.path());
    let before = fs::read(&file).unwrap();
    let last_id = {
        let text = String::from_utf8_lossy(&before).into_owned();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        last["id"].as_str().unwrap().to_owned()
    };
    let args =
        ["compact", arg(&file), "--now", "2026-03-01T00:00:00Z", "--instructions", "keep the PR numbers"];
    let report = json(&run_ok(&args));
    assert_eq!(report["written"], true);
    let entry = &report["entry"];
    assert_eq!(entry["type"], "compaction");
    assert_eq!(entry["parentId"].as_str(), Some(last_id.as_str()));
    assert_eq!(entry["timestamp"], "2026-03-01T00:00:00.000Z");
    let id = entry["id"].as_str().unwrap();
    assert!(id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert!(report["summarizedMessages"].as_u64().unwrap() > 0);

    // One line appended; every earlier byte untouched.
    let after = fs::read(&file).unwrap();
    assert_eq!(&after[..before.len()], before.as_slice());
    let added = std::str::from_utf8(&after[before.len()..]).unwrap();
    assert_eq!(added.matches('\n').count(), 1);
    assert!(added.ends_with('\n'));
    let written: serde_json::Value = serde_json::from_str(added.trim_end()).unwrap();
    assert_eq!(&written, entry);

    // Pi reads the compacted session: the summary first, then the kept messages,
    // and our context equals Pi's.
    let theirs = oracle::run(&["context", arg(&file), "--llm"]);
    let pi = json(&theirs);
    assert_eq!(pi["messages"][0]["role"], "compactionSummary");
    assert_eq!(pi["messages"][0]["summary"], entry["summary"]);
    let ours = run_ok(&["context", arg(&file), "--json", "--llm"]);
    if let Some(difference) = oracle_difference(&ours, &theirs) {
        panic!("context after compaction differs from Pi: {difference}");
    }

    // Compacting again right away: nothing to compact, and nothing written.
    let again = run(&["compact", arg(&file)]);
    assert_eq!(again.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("nothing to compact"), "{stderr}");
    assert_eq!(fs::read(&file).unwrap(), after);
}

#[test]
fn a_dry_run_writes_nothing_and_ids_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let file = copy_of_session(dir.path());
    let before = fs::read(&file).unwrap();
    let args = ["compact", arg(&file), "--now", "2026-03-01T00:00:00Z", "--dry-run", "--preset", "pi"];
    let first = json(&run_ok(&args));
    assert_eq!(first["written"], false);
    assert_eq!(fs::read(&file).unwrap(), before);
    assert!(!dir.path().join("session.jsonl.lock").exists());
    // The same session, time and policy give the same entry.
    assert_eq!(json(&run_ok(&args))["entry"], first["entry"]);
    // Pi's preset has no safeguard sections.
    let summary = first["entry"]["summary"].as_str().unwrap();
    assert!(!summary.contains("## Recent turns preserved verbatim"));
}

#[test]
fn a_missing_transcript_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("absent.jsonl");
    let out = run(&["compact", arg(&file)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such transcript"));
    assert!(!file.exists());
}

#[test]
fn what_is_not_a_jsonl_transcript_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let file = copy_of_session(dir.path());
    let segment = dir.path().join("session.slog");
    run_ok(&["pack", arg(&file), "-o", arg(&segment)]);
    let packed = fs::read(&segment).unwrap();
    for args in [vec!["compact", arg(&segment)], vec!["append", arg(&segment)]] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("MessagePack segment"), "{args:?}");
        assert_eq!(fs::read(&segment).unwrap(), packed, "{args:?} changed the segment");
    }
    // A file without a header: refused before the lock is taken or the tail looked at.
    let headless = dir.path().join("headless.jsonl");
    fs::copy(fixtures::project_dir().join("fixtures/corrupt/no-header.jsonl"), &headless).unwrap();
    let before = fs::read(&headless).unwrap();
    let out = run(&["compact", arg(&headless)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Pi transcript"));
    assert_eq!(fs::read(&headless).unwrap(), before);
    assert!(!dir.path().join("headless.jsonl.lock").exists());
}

#[test]
fn under_pi_1_6_rules_the_compaction_keeps_the_system_message_and_pi_1_6_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    fs::copy(fixtures::shared_dir().join("oracle/pi-1.6/fixtures/new-entry-types.jsonl"), &file).unwrap();
    let policy = dir.path().join("tiny.toml");
    fs::write(&policy, "name = \"tiny\"\nkeepRecentTokens = 40\npiRules = \"1.6\"\n").unwrap();
    let report =
        json(&run_ok(&["compact", arg(&file), "--policy", arg(&policy), "--now", "2026-11-21T11:00:00Z"]));
    let entry = &report["entry"];
    // What Pi 1.6's appendCompaction stores: the system messages of the context
    // replayed into one (the previous compaction's snapshot, then the later
    // message that adds `write`), at the compaction's time.
    let read = serde_json::json!({"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}});
    let write = serde_json::json!({"name": "write", "description": "Write a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}});
    let expected = serde_json::json!({
        "role": "system",
        "content": "",
        "sections": {
            "preamble": "You are an expert coding assistant.",
            "cwd": "Current working directory: /home/dev/demo",
            "skills": "<skills>\n- json: inspect JSON files\n</skills>"
        },
        "toolsAdded": [read, write],
        "timestamp": 1_795_258_800_000_i64
    });
    assert_eq!(entry["systemMessage"], expected);
    let keys: Vec<&str> = entry.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.last(), Some(&"systemMessage"), "stored last, as Pi 1.6 writes it");

    // Pi 1.6 reads the compacted session: the system message leads, the summary follows.
    let theirs = oracle::run_for(sessionlog_events::PiRules::V1_6, &["context", arg(&file), "--llm"]);
    let pi = json(&theirs);
    assert_eq!(pi["messages"][0], expected);
    assert_eq!(pi["messages"][1]["role"], "compactionSummary");
    let ours = run_ok(&["context", arg(&file), "--json", "--llm", "--pi-rules", "1.6"]);
    if let Some(difference) = oracle_difference(&ours, &theirs) {
        panic!("context after compaction differs from Pi 1.6: {difference}");
    }

    // The same cut under 0.58 rules (the OpenClaw preset's) stores no system message.
    let plain = dir.path().join("plain.jsonl");
    fs::copy(fixtures::shared_dir().join("oracle/pi-1.6/fixtures/new-entry-types.jsonl"), &plain).unwrap();
    let args = ["compact", arg(&plain), "--policy", arg(&policy), "--pi-rules", "0.58", "--dry-run"];
    assert!(json(&run_ok(&args))["entry"].get("systemMessage").is_none());
}
