//! A session recorded against the fake server replays through the
//! `Recorded` provider: every request the loop makes the second time is
//! byte-identical to the first (the replay refuses any other), and the
//! transcript and store it writes are the same bytes.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use sessionlog_agent::{Agent, AgentParts, Config, Message};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_provider::record::Recorder;
use sessionlog_provider::{ClientOptions, HttpProvider, Provider, Recorded, RetryPolicy};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};

fn agent(
    root: &Path,
    base_url: &str,
    provider: impl FnOnce(sessionlog_provider::Model, ClientOptions) -> Arc<dyn Provider>,
) -> Agent {
    let text = format!(
        "state_dir = \"state\"\nworkspace = \"work\"\n[model]\napi = \"anthropic-messages\"\nbase_url = \"{base_url}\"\nmodel = \"claude-test\"\n[compaction]\ncontextWindow = 30000\nkeepRecentTokens = 10\n"
    );
    let config = Config::parse(&text, root).unwrap();
    let options = ClientOptions {
        retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() },
        ..ClientOptions::default()
    };
    let provider = provider(config.model.model().unwrap(), options);
    let clock = Arc::new(AtomicI64::new(1_796_083_200_000));
    Agent::new(AgentParts {
        config,
        provider,
        summarizer: Arc::new(|| Box::new(Extractive) as Box<dyn Summarizer + Send>),
        clock: Arc::new(move || clock.fetch_add(1000, Ordering::SeqCst)),
        tools: None,
    })
    .unwrap()
}

async fn conversation(agent: &Agent) -> Vec<String> {
    let mut replies = Vec::new();
    for text in ["read notes.txt", "thanks", "and now?"] {
        let out = agent.run(Message { text: text.into(), ..Message::default() }).await.unwrap();
        assert_eq!(out.error, None);
        replies.push(out.reply);
    }
    replies
}

fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let dir = root.join("state/agents/main/sessions");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with(".lock"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_session_replays_to_the_same_requests_and_the_same_log() {
    let fake = FakeLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("work")).unwrap();
    std::fs::write(root.join("work/notes.txt"), "deploy at 09:00 on host-3:8443\n").unwrap();
    fake.push(Reply::turn(Turn::tool_call("toolu_1", "read", r#"{"path":"notes.txt"}"#).usage(2_000, 20)));
    fake.push(Reply::turn(Turn::text("Deploy is at 09:00 on host-3:8443.").usage(2_100, 12)));
    // Above 22500, where the openclaw preset compacts on a 30000 window.
    fake.push(Reply::turn(Turn::text("You're welcome.").usage(22_500, 5)));
    fake.push(Reply::turn(Turn::text("Nothing else pending.").usage(3_000, 5)));
    let recording = root.join("exchanges.jsonl");
    let live = agent(root, &fake.anthropic_base_url(), |model, options| {
        Arc::new(HttpProvider::new(model, options).unwrap().recording(Recorder::create(&recording).unwrap()))
    });
    let first = conversation(&live).await;
    live.close().await;
    let recorded_files = snapshot(root);
    assert!(recorded_files
        .iter()
        .any(|(_, bytes)| String::from_utf8_lossy(bytes).contains("\"type\":\"compaction\"")));

    // Again from an empty state folder, with the server gone: the recording answers.
    let base_url = fake.anthropic_base_url();
    drop(fake);
    std::fs::remove_dir_all(root.join("state")).unwrap();
    let mut replay = None;
    let again = agent(root, &base_url, |model, options| {
        let r = Arc::new(Recorded::open(&recording, model, options).unwrap());
        replay = Some(r.clone());
        r
    });
    let second = conversation(&again).await;
    assert_eq!(first, second);
    assert_eq!(replay.unwrap().remaining(), 0, "every recorded exchange was asked for");
    let replayed_files = snapshot(root);
    assert_eq!(recorded_files.len(), replayed_files.len());
    for ((name_a, a), (name_b, b)) in recorded_files.iter().zip(&replayed_files) {
        assert_eq!(name_a, name_b);
        assert!(a == b, "{name_a} differs after replay");
    }
}
