//! `sessionlog calibrate` and replay's `recordedReproduced`: which policy
//! reproduces the compactions a session recorded.

use sessionlog_compaction::Policy;
use sessionlog_test_support::fixtures;

use crate::support::{arg, json, run_ok};

/// The OpenClaw fixture with two recorded compactions. By hand (`jq
/// 'select(.type=="compaction") | [.id,.parentId,.firstKeptEntryId,.tokensBefore]'`):
/// `08493d58` after `a1727b33`, keeping from `72a62d41`, at 182705 tokens;
/// then `a9cfc991`, at 655 tokens, right after the first.
fn openclaw_file() -> std::path::PathBuf {
    fixtures::shared_dir()
        .join("fixtures/openclaw/agents/build/sessions/26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl")
}

#[test]
fn calibration_reproduces_the_recorded_compaction_and_reports_the_655_token_one() {
    let file = openclaw_file();
    let out = json(&run_ok(&["calibrate", arg(&file), "--json"]));
    assert_eq!(out["file"], arg(&file));
    assert_eq!(out["recorded"], 2);
    assert_eq!(out["reproduced"], 1);
    assert_eq!(out["anomalies"], serde_json::json!(["a9cfc991"]));
    assert_eq!(out["matchRate"], 1.0);
    // The policy in the policy file's field names: it reads back as one.
    let policy: Policy = serde_json::from_value(out["policy"].clone()).unwrap();
    assert_eq!(policy.context_window, 200_000);
    assert_eq!(policy.threshold(), 180_000.0, "OpenClaw's 20000 floor on a 200k window");
    assert_eq!(policy.keep_recent_tokens, 20_000);
    // The replay under that policy reproduces the same one: after a1727b33,
    // from 72a62d41, tokensBefore 182705.
    let r = json(&run_ok(&["replay", arg(&file), "--preset", "openclaw", "--json"]));
    assert_eq!(r["recordedReproduced"], "1/2");
    let c = &r["compactions"][0];
    assert_eq!(
        (&c["afterEntryId"], &c["firstKeptEntryId"], c["tokensBefore"].as_f64()),
        (&serde_json::json!("a1727b33"), &serde_json::json!("72a62d41"), Some(182_705.0))
    );
    assert_eq!(r["recorded"][0]["reproduced"], true);
    assert_eq!(r["recorded"][1]["reproduced"], false);
    // A window of 100000 compacts elsewhere: nothing reproduced.
    let r = json(&run_ok(&[
        "replay",
        arg(&file),
        "--preset",
        "openclaw",
        "--context-window",
        "100000",
        "--json",
    ]));
    assert_eq!(r["recordedReproduced"], "0/2");
}

#[test]
fn claude_code_and_codex_sessions_are_calibrated() {
    let claude = fixtures::shared_dir().join("fixtures/claude-code");
    let codex = fixtures::shared_dir().join("fixtures/codex");
    let out = String::from_utf8(run_ok(&["calibrate", arg(&claude), arg(&codex), "--json"])).unwrap();
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_name = |part: &str| lines.iter().find(|l| l["file"].as_str().unwrap().contains(part)).unwrap();
    assert_eq!(lines.len(), 4, "{out}");
    // By hand (grep compactMetadata): 703e4528 records one automatic
    // compaction (preTokens 123096), d6a37ffc two manual ones; the Codex
    // rollouts record none (no `compacted` item).
    let auto = by_name("703e4528");
    assert_eq!((auto["recorded"].as_u64(), auto["manual"].as_array().map(Vec::len)), (Some(1), Some(0)));
    assert_eq!(auto["anomalies"], serde_json::json!([]), "123096 tokens is no anomaly");
    // Claude Code wrote it: among the policies that fit it equally (none
    // reproduces its compaction), a variant of the claude-code preset is
    // reported (the format's preset; openclaw's come first in grid order).
    assert!(auto["policy"]["name"].as_str().is_some_and(|n| n.starts_with("claude-code-")), "{auto}");
    let manual = by_name("d6a37ffc");
    assert_eq!((manual["recorded"].as_u64(), manual["manual"].as_array().map(Vec::len)), (Some(2), Some(2)));
    assert_eq!(manual["reproduced"], 0);
    for part in ["97b66f6c", "019a7ae6"] {
        let rollout = by_name(part);
        assert_eq!((rollout["recorded"].as_u64(), rollout["policy"].is_null()), (Some(0), true), "{rollout}");
        assert_eq!(rollout["format"], "codex-rollout");
    }
    assert_eq!(auto["format"], "claude-code");
}
