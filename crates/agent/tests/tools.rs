//! The built-in tools end to end: a read round trip, a refused escape, a
//! bash timeout, and results shaped as Pi's agent loop writes them.

use std::sync::Arc;

use serde_json::json;
use sessionlog_agent::tools::{builtins, execute, result_message, Tool, Workspace};
use sessionlog_provider::CancellationToken;

fn workspace() -> (tempfile::TempDir, Workspace, Vec<Arc<dyn Tool>>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let tools = builtins(&ws, Some(30.0));
    (dir, ws, tools)
}

#[tokio::test]
async fn read_returns_what_write_wrote_and_the_result_is_pis_message() {
    let (_dir, ws, tools) = workspace();
    let (out, err) = execute(
        &tools,
        "write",
        &json!({"path": "notes/a.txt", "content": "héllo\nworld"}),
        CancellationToken::new(),
    )
    .await;
    // "héllo\nworld".length in JavaScript is 11 (UTF-16 units), not its 12 bytes.
    assert!(!err);
    assert_eq!(
        out.content,
        vec![json!({"type": "text", "text": "Successfully wrote 11 bytes to notes/a.txt"})]
    );
    assert_eq!(std::fs::read_to_string(ws.root().join("notes/a.txt")).unwrap(), "héllo\nworld");
    let (out, err) = execute(&tools, "read", &json!({"path": "notes/a.txt"}), CancellationToken::new()).await;
    assert!(!err);
    let message = result_message("call_1", "read", &out, err, 1_767_225_600_000);
    // Pi's key order; no `details` when the read was not truncated.
    assert_eq!(
        sessionlog_events::json::to_js_string(&message).unwrap(),
        r#"{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"héllo\nworld"}],"isError":false,"timestamp":1767225600000}"#
    );
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_before_any_io() {
    let (dir, _ws, tools) = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    let escape = outside.path().join("secret.txt").to_string_lossy().into_owned();
    for (tool, args) in [
        ("read", json!({"path": "../secret.txt"})),
        ("read", json!({"path": escape})),
        ("read", json!({"path": "link/secret.txt"})),
        ("write", json!({"path": "link/new.txt", "content": "x"})),
        ("edit", json!({"path": "link/secret.txt", "oldText": "top", "newText": "no"})),
    ] {
        let (out, err) = execute(&tools, tool, &args, CancellationToken::new()).await;
        assert!(err, "{tool} {args}");
        let text = out.content[0]["text"].as_str().unwrap();
        assert!(text.starts_with("Path escapes the workspace: "), "{text}");
        let message = result_message("c", tool, &out, err, 0);
        assert_eq!(message["details"], json!({}), "an error result carries empty details, as Pi's");
    }
    assert!(!outside.path().join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "top secret");
}

#[tokio::test]
async fn bash_times_out_kills_the_command_and_says_so() {
    let (dir, _ws, tools) = workspace();
    // 3 s leaves a loaded machine time to start bash and print; the `touch`
    // would run at 6 s, so its absence a little later shows the group died.
    let started = std::time::Instant::now();
    let (out, err) = execute(
        &tools,
        "bash",
        &json!({"command": "echo started; sleep 6; touch after", "timeout": 3}),
        CancellationToken::new(),
    )
    .await;
    assert!(err);
    assert_eq!(out.content[0]["text"], "started\n\n\nCommand timed out after 3 seconds");
    let settle = std::time::Duration::from_secs(8).saturating_sub(started.elapsed());
    std::thread::sleep(settle);
    assert!(!dir.path().join("after").exists(), "the process group is gone before its sleep ends");
}

#[tokio::test]
async fn bash_reports_exit_codes_and_keeps_the_tail_of_long_output() {
    let (_dir, _ws, tools) = workspace();
    let (out, err) = execute(
        &tools,
        "bash",
        &json!({"command": "echo out; echo err >&2; exit 3"}),
        CancellationToken::new(),
    )
    .await;
    assert!(err);
    // stdout and stderr are two pipes read as data arrives (as Pi reads
    // them): both lines are there, in either order.
    let text = out.content[0]["text"].as_str().unwrap();
    let (output, status) = text.split_once("\n\n\n").unwrap();
    assert_eq!(status, "Command exited with code 3");
    let mut got: Vec<&str> = output.lines().collect();
    got.sort_unstable();
    assert_eq!(got, ["err", "out"]);
    let (out, err) =
        execute(&tools, "bash", &json!({"command": "seq 1 3000"}), CancellationToken::new()).await;
    assert!(!err);
    let text = out.content[0]["text"].as_str().unwrap();
    // 3000 lines plus the empty one after the last newline: 3001; the last 2000 are 1002..=3001.
    assert!(text.starts_with("1002\n1003\n"), "{}", &text[..20]);
    assert!(
        text.contains("\n\n[Showing lines 1002-3001 of 3001. Full output: "),
        "{}",
        &text[text.len() - 120..]
    );
    assert_eq!(out.details.unwrap()["truncation"]["outputLines"], 2000);
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_error_results() {
    let (_dir, _ws, tools) = workspace();
    let (out, err) = execute(&tools, "grep", &json!({}), CancellationToken::new()).await;
    assert!(err);
    assert_eq!(out.content[0]["text"], "Tool grep not found");
    let (out, err) = execute(&tools, "read", &json!({"offset": 1}), CancellationToken::new()).await;
    assert!(err);
    assert_eq!(
        out.content[0]["text"],
        "Validation failed for tool \"read\":\n  - path: must have required property 'path'\n\nReceived arguments:\n{\n  \"offset\": 1\n}"
    );
}

#[tokio::test]
async fn huge_numbers_from_the_model_are_no_panic() {
    let (dir, _ws, tools) = workspace();
    std::fs::write(dir.path().join("three.txt"), "a\nb\nc").unwrap();
    // A limit far past the end reads the rest of the file, as Pi's slice does.
    let (out, err) = execute(
        &tools,
        "read",
        &json!({"path": "three.txt", "offset": 2, "limit": 1e300}),
        CancellationToken::new(),
    )
    .await;
    assert!(!err, "{out:?}");
    assert_eq!(out.content[0]["text"], "b\nc");
    // A timeout no `Duration` can hold means no deadline: the command runs to its end.
    let (out, err) =
        execute(&tools, "bash", &json!({"command": "echo hi", "timeout": 1e20}), CancellationToken::new())
            .await;
    assert!(!err, "{out:?}");
    assert_eq!(out.content[0]["text"], "hi\n");
}
