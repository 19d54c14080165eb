//! Helpers shared by the loop's tests: an agent over a temporary state
//! folder talking to the fake model server, and the differential check
//! against Pi's oracle.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::Value;
use sessionlog_agent::{tools, Agent, AgentParts, Config, Message};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_events::PiRules;
use sessionlog_provider::summarize::ModelSummarizer;
use sessionlog_provider::{build_request, ClientOptions, HttpProvider, Provider, Request, RetryPolicy};
use sessionlog_test_support::fake_llm::FakeLlm;
use sessionlog_test_support::oracle;

pub struct Setup {
    pub _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub agent: Agent,
    pub provider: Arc<HttpProvider>,
}

pub const SYSTEM: &str = "You are a careful assistant.";

pub fn setup(fake: &FakeLlm, extra: &str) -> Setup {
    setup_with(fake, extra, false)
}

/// An agent whose compactions ask the fake server (`model_summarizer`) or
/// use the extractive summariser.
pub fn setup_with(fake: &FakeLlm, extra: &str, model_summarizer: bool) -> Setup {
    setup_full(fake, "", extra, model_summarizer)
}

/// An agent with top-level configuration keys `top` as well.
pub fn setup_top(fake: &FakeLlm, top: &str, extra: &str) -> Setup {
    setup_full(fake, top, extra, false)
}

fn setup_full(fake: &FakeLlm, top: &str, extra: &str, model_summarizer: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    std::fs::create_dir(root.join("work")).unwrap();
    let (agent, provider) = agent_at(fake, &root, top, extra, model_summarizer);
    Setup { _dir: dir, root, agent, provider }
}

/// A second agent over the state folder of `root` (a restarted process).
pub fn reopen_top(fake: &FakeLlm, root: &Path, top: &str, extra: &str) -> Agent {
    agent_at(fake, root, top, extra, false).0
}

fn agent_at(
    fake: &FakeLlm,
    root: &Path,
    top: &str,
    extra: &str,
    model_summarizer: bool,
) -> (Agent, Arc<HttpProvider>) {
    let text = format!(
        r#"state_dir = "state"
workspace = "work"
system_prompt = "{SYSTEM}"
{top}[model]
api = "openai-completions"
base_url = "{}"
model = "fake-model"
context_window = 128000
{extra}"#,
        fake.openai_base_url()
    );
    let config = Config::parse(&text, root).unwrap();
    let model = config.model.model().unwrap();
    let options = ClientOptions {
        retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() },
        ..ClientOptions::default()
    };
    let provider = Arc::new(HttpProvider::new(model, options).unwrap());
    // A clock that moves one second per reading, from 2026-12-01T00:00:00Z.
    let clock = Arc::new(AtomicI64::new(1_796_083_200_000));
    let agent = Agent::new(AgentParts {
        config,
        provider: provider.clone(),
        summarizer: if model_summarizer {
            let model = ModelSummarizer::new(provider.clone() as Arc<dyn Provider>)
                .on_runtime(tokio::runtime::Handle::current());
            Arc::new(move || Box::new(model.clone()) as Box<dyn Summarizer + Send>)
        } else {
            Arc::new(|| Box::new(Extractive) as Box<dyn Summarizer + Send>)
        },
        clock: Arc::new(move || clock.fetch_add(1000, Ordering::SeqCst)),
        tools: None,
    })
    .unwrap();
    (agent, provider)
}

pub fn message(text: &str) -> Message {
    Message { text: text.to_owned(), ..Message::default() }
}

pub fn transcript_of(root: &Path) -> PathBuf {
    let dir = root.join("state/agents/main/sessions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.file_name().unwrap() != "events.jsonl")
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

/// The transcript of `key`'s current session.
pub fn transcript_for(root: &Path, key: &str) -> PathBuf {
    let id = sessions_json(root)[key]["sessionId"].as_str().unwrap().to_owned();
    root.join(format!("state/agents/main/sessions/{id}.jsonl"))
}

/// The loop's model calls among the requests (the summariser's have another system prompt).
pub fn loop_requests(fake: &FakeLlm) -> Vec<sessionlog_test_support::fake_llm::Received> {
    fake.requests().into_iter().filter(|r| r.json()["messages"][0]["content"] == SYSTEM).collect()
}

pub fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

pub fn sessions_json(root: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(root.join("state/agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap()
}

/// Every model call the fake server received equals the request built from
/// the messages Pi's oracle derives from our transcript at the leaf the
/// call was made from (the parent of the assistant entry it produced).
/// Pi's oracle builds, at `leaf` of `file`, the messages of the request
/// whose body the fake server received as `body`.
pub fn check_call_against_pi(s: &Setup, body: &[u8], file: &Path, leaf: &str, what: &str) {
    let defs: Vec<_> = tools::builtins(&tools::Workspace::new(&s.root.join("work")).unwrap(), None)
        .iter()
        .map(|t| tools::definition(t.as_ref()))
        .collect();
    let path = file.to_string_lossy().into_owned();
    let pi: Value =
        serde_json::from_slice(&oracle::run(&["context", &path, "--leaf", leaf, "--llm"])).unwrap();
    let request = Request {
        system_prompt: Some(SYSTEM.to_owned()),
        messages: pi["llmMessages"].as_array().unwrap().clone(),
        tools: Some(defs),
        ..Request::default()
    };
    let expected = build_request(s.provider.model(), None, &request).body;
    assert_eq!(String::from_utf8_lossy(body), String::from_utf8_lossy(&expected), "{what} (leaf {leaf})");
}

pub fn check_requests_against_pi(s: &Setup, fake: &FakeLlm, file: &Path) {
    let received = loop_requests(fake);
    let assistants: Vec<Value> = lines(file)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(assistants.len(), received.len(), "one assistant entry per model call");
    for (k, assistant) in assistants.iter().enumerate() {
        let leaf = assistant["parentId"].as_str().unwrap();
        check_call_against_pi(s, &received[k].body, file, leaf, &format!("model call {k}"));
    }
    // And the session's context document as Pi builds it equals ours.
    let transcript = sessionlog_store::load_transcript(file, sessionlog_event_log::Mode::Lenient)
        .unwrap()
        .loaded
        .transcript;
    let doc =
        sessionlog_context::context_doc(&transcript, sessionlog_context::Leaf::Default, true, PiRules::V0_58)
            .unwrap();
    let mut ours = Vec::new();
    doc.write_json(&mut ours).unwrap();
    let theirs = String::from_utf8(oracle::run(&["context", &file.to_string_lossy(), "--llm"])).unwrap();
    // The oracle names the Pi release it ran; the document is otherwise the same.
    let theirs = theirs.replacen("  \"piVersion\": \"0.58.3\",\n", "", 1);
    assert_eq!(String::from_utf8_lossy(&ours).trim_end(), theirs.trim_end());
}
