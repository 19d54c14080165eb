//! The loop keeps the session's provider context in memory and folds each
//! appended entry into it; the transcript is read again only when its file
//! changed behind the writer (here: Pi appending to it between two turns).

mod support;

use serde_json::{json, Value};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use support::{check_call_against_pi, lines, loop_requests, message, setup, transcript_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_appended_by_another_program_reach_the_next_model_call() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    fake.push(Reply::turn(Turn::text("first answer").usage(100, 10)));
    fake.push(Reply::turn(Turn::text("second answer").usage(200, 10)));
    s.agent.run(message("first question")).await.unwrap();
    // Pi (which takes no lock) appends a user message and its reply to the file.
    let file = transcript_of(&s.root);
    let leaf = lines(&file).last().unwrap()["id"].as_str().unwrap().to_owned();
    let outside = [
        json!({"type": "message", "id": "0a1b2c3d", "parentId": leaf, "timestamp": "2026-12-01T01:00:00.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "asked in Pi"}], "timestamp": 1_796_086_800_000i64}}),
        json!({"type": "message", "id": "0a1b2c3e", "parentId": "0a1b2c3d", "timestamp": "2026-12-01T01:00:01.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "answered in Pi"}],
                           "api": "openai-completions", "provider": "openai", "model": "fake-model",
                           "usage": {"input": 150, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 155,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                           "stopReason": "stop", "timestamp": 1_796_086_801_000i64}}),
    ];
    let mut text = std::fs::read_to_string(&file).unwrap();
    for line in &outside {
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&file, text).unwrap();

    let out = s.agent.run(message("second question")).await.unwrap();
    assert_eq!((out.reply.as_str(), out.error.as_deref()), ("second answer", None));
    // The new user entry continues Pi's reply, and the call sent Pi's turn.
    let entries = lines(&file);
    let user = &entries[entries.len() - 2];
    assert_eq!(
        (user["message"]["content"][0]["text"].as_str(), user["parentId"].as_str()),
        (Some("second question"), Some("0a1b2c3e"))
    );
    let second = loop_requests(&fake)[1].json();
    let texts: Vec<Value> =
        second["messages"].as_array().unwrap().iter().map(|m| m["content"].clone()).collect();
    assert!(texts.contains(&json!([{"type": "text", "text": "asked in Pi"}])), "{texts:?}");
    assert!(texts.contains(&json!("answered in Pi")), "{texts:?}");
    // Byte for byte what Pi's oracle builds at that leaf.
    let leaf = user["id"].as_str().unwrap();
    check_call_against_pi(&s, &loop_requests(&fake)[1].body, &file, leaf, "the call after Pi's turn");
}

/// A writer in this process that waits at most `secs` for the lock.
fn open_within(
    file: &std::path::Path,
    secs: u64,
) -> Result<sessionlog_store::TranscriptWriter, sessionlog_store::StoreError> {
    let lock = sessionlog_event_log::LockOptions {
        timeout: std::time::Duration::from_secs(secs),
        ..Default::default()
    };
    sessionlog_store::TranscriptWriter::open(
        file,
        sessionlog_store::WriteOptions { lock, ..Default::default() },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_or_dropping_the_agent_releases_the_transcripts_lock() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("first").usage(100, 10)));
    fake.push(Reply::turn(Turn::text("second").usage(100, 10)));
    // close(): the worker ends and the writer with it.
    let s = setup(&fake, "");
    s.agent.run(message("hello")).await.unwrap();
    let file = transcript_of(&s.root);
    let lock = sessionlog_event_log::lock::lock_path(&file);
    assert!(lock.exists(), "the open session holds its lock between turns");
    assert!(open_within(&file, 0).is_err(), "and no other writer gets the file");
    s.agent.close().await;
    assert!(!lock.exists(), "close() released the lock");
    drop(open_within(&file, 0).expect("another writer opens the file after close()"));

    // Dropping the agent: its workers end on their own, and release it.
    let support::Setup { agent, root, _dir, .. } = setup(&fake, "");
    agent.run(message("hello")).await.unwrap();
    let file = transcript_of(&root);
    let lock = sessionlog_event_log::lock::lock_path(&file);
    assert!(lock.exists());
    drop(agent);
    // Bounded wait for the worker task to notice (not a timing assertion).
    for _ in 0..500 {
        if !lock.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(!lock.exists(), "dropping the agent released the lock");
    // The writer's in-process claim goes with it (waiting, bounded, for the
    // worker to finish dropping it).
    drop(open_within(&file, 10).expect("another writer opens the file after the drop"));
}
