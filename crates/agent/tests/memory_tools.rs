//! The memory tools end to end over a hand-written memory folder: a search
//! finds the one file holding a word, with its line range; `memory_get`
//! returns exact lines and refuses paths outside memory; the tools are
//! registered only when `[memory] enabled = true`.

use std::sync::Arc;

use serde_json::{json, Value};
use sessionlog_agent::tools::{configured, execute, memory_tools, Tool, Workspace};
use sessionlog_agent::Config;
use sessionlog_provider::CancellationToken;

// MEMORY.md: 3 lines; memory/2026-11-30.md: 4 lines, "zanzibar" only on line 3.
const MEMORY_MD: &str =
    "# Long-term memory\nThe user prefers tea over coffee.\nThe build server is called orchid.";
const DAILY_MD: &str =
    "# 2026-11-30\nMet with Dana about the release.\nThe offsite moves to Zanzibar in March.\nTodo: book flights.";

fn setup() -> (tempfile::TempDir, Vec<Arc<dyn Tool>>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), MEMORY_MD).unwrap();
    std::fs::write(ws.join("memory/2026-11-30.md"), DAILY_MD).unwrap();
    std::fs::write(ws.join("notes.md"), "zanzibar outside memory").unwrap();
    let workspace = Workspace::new(&ws).unwrap();
    let tools = memory_tools(&workspace, &dir.path().join("state"));
    (dir, tools)
}

async fn call(tools: &[Arc<dyn Tool>], name: &str, args: Value) -> Value {
    let (out, is_error) = execute(tools, name, &args, CancellationToken::new()).await;
    assert!(!is_error, "{name} failed: {:?}", out.content);
    let text = out.content[0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_the_only_file_with_the_word_and_its_lines() {
    let (_dir, tools) = setup();
    let out = call(&tools, "memory_search", json!({"query": "zanzibar", "maxResults": 3})).await;
    let results = out["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{out}");
    assert_eq!(results[0]["path"], "memory/2026-11-30.md");
    assert_eq!(results[0]["startLine"], 1);
    assert_eq!(results[0]["endLine"], 4);
    assert_eq!(results[0]["source"], "memory");
    assert!(results[0]["snippet"].as_str().unwrap().contains("Zanzibar in March"));
    // notes.md is not a memory file: never a result.
    assert!(results.iter().all(|r| r["path"] != "notes.md"), "{out}");
    assert!(results.len() <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_returns_the_exact_lines_and_refuses_paths_outside_memory() {
    let (_dir, tools) = setup();
    let out =
        call(&tools, "memory_get", json!({"path": "memory/2026-11-30.md", "from": 2, "lines": 2})).await;
    assert_eq!(
        out,
        json!({"path": "memory/2026-11-30.md", "text": "Met with Dana about the release.\nThe offsite moves to Zanzibar in March."})
    );
    let out = call(&tools, "memory_get", json!({"path": "MEMORY.md"})).await;
    assert_eq!(out["text"], MEMORY_MD);
    for path in ["notes.md", "../ws/notes.md", "memory/../notes.md"] {
        let out = call(&tools, "memory_get", json!({"path": path})).await;
        assert_eq!(out["text"], "", "{path}: {out}");
        assert_eq!(out["disabled"], true, "{path}: {out}");
        assert!(out["error"].as_str().unwrap().contains("path required"), "{path}: {out}");
    }
}

#[test]
fn the_tools_are_registered_only_when_memory_is_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let base = "state_dir = \"state\"\n[model]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\ncontext_window = 1000\n";
    let names = |text: &str| -> Vec<String> {
        let config = Config::parse(text, dir.path()).unwrap();
        configured(&workspace, &config).iter().map(|t| t.name().to_owned()).collect()
    };
    assert_eq!(names(base), ["read", "bash", "edit", "write"]);
    assert_eq!(
        names(&format!("{base}[memory]\nenabled = true\n")),
        ["read", "bash", "edit", "write", "memory_search", "memory_get"]
    );
}
