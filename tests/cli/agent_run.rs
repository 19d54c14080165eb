//! `sessionlog run` against the fake model server: the reply printed as it
//! streams, `--json` lines, the transcript and store it leaves, and clear
//! errors for a bad configuration or a failing model.

use std::path::Path;

use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};

use crate::support::{arg, run};

fn config(dir: &Path, fake: &FakeLlm) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"state\"\nagent = \"main\"\nworkspace = \"ws\"\n[model]\napi = \"openai-completions\"\nbase_url = \"{}\"\nmodel = \"m\"\ncontext_window = 128000\nmax_tokens = 4096\n[compaction]\npreset = \"openclaw\"\nsummarizer = \"extractive\"\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    path
}

#[test]
fn run_prints_the_reply_and_records_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start();
    let cfg = config(dir.path(), &fake);
    fake.push(Reply::turn(Turn::text("Hello there.").usage(10, 3)));
    let out = run(&["run", "--config", arg(&cfg), "--message", "hi"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello there.\n");
    let store: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("state/agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    let id = store["agent:main:main"]["sessionId"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(dir.path().join(format!("state/agents/main/sessions/{id}.jsonl"))).unwrap();
    // Header, user, assistant.
    assert_eq!(transcript.lines().count(), 3);

    // --json on the same session: one object per line, the last one `done` with the usage.
    fake.push(Reply::turn(Turn::text("Again.").usage(20, 2)));
    let out = run(&["run", "--config", arg(&cfg), "--message", "more", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["type"], "session");
    assert_eq!((lines[0]["sessionId"].as_str(), lines[0]["decision"].as_str()), (Some(id), Some("reuse")));
    assert!(lines.iter().any(|l| l["type"] == "delta" && l["delta"]["type"] == "textDelta"));
    let done = lines.last().unwrap();
    assert_eq!((done["type"].as_str(), done["reply"].as_str()), (Some("done"), Some("Again.")));
    assert_eq!(done["usage"]["totalTokens"], 22);
}

#[test]
fn a_failing_model_or_a_bad_config_exits_1_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start();
    let cfg = config(dir.path(), &fake);
    fake.push(Reply::auth());
    let out = run(&["run", "--config", arg(&cfg), "--message", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("sessionlog: 401"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&cfg, "state_dir = \"s\"\n[model]\napi = \"gemini\"\nbase_url = \"x\"\nmodel = \"m\"\n")
        .unwrap();
    let out = run(&["run", "--config", arg(&cfg), "--message", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("agent.toml") && err.contains("unknown model api `gemini`"), "{err}");
}
