//! The turn against the fake model server: a tool round trip, threshold
//! compaction over several turns, overflow recovery. After each, Pi's own
//! code (the oracle) opens the transcript the loop wrote and, at the leaf
//! each model call was made from, builds the messages that call sent —
//! byte for byte, through the provider's request encoding — and the
//! context document of the whole session equals ours.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::Value;
use sessionlog_agent::{tools, Agent, AgentParts, Config, Message};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_events::PiRules;
use sessionlog_provider::{build_request, ClientOptions, HttpProvider, Provider, Request, RetryPolicy};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use sessionlog_test_support::oracle;

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    agent: Agent,
    provider: Arc<HttpProvider>,
}

const SYSTEM: &str = "You are a careful assistant.";

fn setup(fake: &FakeLlm, extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    std::fs::create_dir(root.join("work")).unwrap();
    let text = format!(
        r#"state_dir = "state"
workspace = "work"
system_prompt = "{SYSTEM}"
[model]
api = "openai-completions"
base_url = "{}"
model = "fake-model"
context_window = 128000
{extra}"#,
        fake.openai_base_url()
    );
    let config = Config::parse(&text, &root).unwrap();
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
        summarizer: Arc::new(|| Box::new(Extractive) as Box<dyn Summarizer + Send>),
        clock: Arc::new(move || clock.fetch_add(1000, Ordering::SeqCst)),
        tools: None,
    })
    .unwrap();
    Setup { _dir: dir, root, agent, provider }
}

fn message(text: &str) -> Message {
    Message { text: text.to_owned(), ..Message::default() }
}

fn transcript_of(root: &Path) -> PathBuf {
    let dir = root.join("state/agents/main/sessions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.file_name().unwrap() != "events.jsonl")
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

fn lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn sessions_json(root: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(root.join("state/agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap()
}

/// Every model call the fake server received equals the request built from
/// the messages Pi's oracle derives from our transcript at the leaf the
/// call was made from (the parent of the assistant entry it produced).
fn check_requests_against_pi(s: &Setup, fake: &FakeLlm, file: &Path) {
    let received = fake.requests();
    let assistants: Vec<Value> = lines(file)
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(assistants.len(), received.len(), "one assistant entry per model call");
    let defs: Vec<_> = tools::builtins(&tools::Workspace::new(&s.root.join("work")).unwrap(), None)
        .iter()
        .map(|t| tools::definition(t.as_ref()))
        .collect();
    let path = file.to_string_lossy().into_owned();
    for (k, assistant) in assistants.iter().enumerate() {
        let leaf = assistant["parentId"].as_str().unwrap();
        let pi: Value =
            serde_json::from_slice(&oracle::run(&["context", &path, "--leaf", leaf, "--llm"])).unwrap();
        let request = Request {
            system_prompt: Some(SYSTEM.to_owned()),
            messages: pi["llmMessages"].as_array().unwrap().clone(),
            tools: Some(defs.clone()),
            ..Request::default()
        };
        let expected = build_request(s.provider.model(), None, &request).body;
        assert_eq!(
            String::from_utf8_lossy(&received[k].body),
            String::from_utf8_lossy(&expected),
            "model call {k} (leaf {leaf})"
        );
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
    let theirs = String::from_utf8(oracle::run(&["context", &path, "--llm"])).unwrap();
    // The oracle names the Pi release it ran; the document is otherwise the same.
    let theirs = theirs.replacen("  \"piVersion\": \"0.58.3\",\n", "", 1);
    assert_eq!(String::from_utf8_lossy(&ours).trim_end(), theirs.trim_end());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_tool_round_trip_is_recorded_as_pi_records_it() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    std::fs::write(s.root.join("work/notes.txt"), "the answer is 42\n").unwrap();
    fake.push(Reply::turn(Turn::tool_call("call_1", "read", r#"{"path":"notes.txt"}"#).usage(120, 12)));
    fake.push(Reply::turn(Turn::text("The file says 42.").usage(160, 6)));
    let out = s.agent.run(message("What does notes.txt say?")).await.unwrap();
    assert_eq!((out.reply.as_str(), out.model_calls, out.error.as_deref()), ("The file says 42.", 2, None));

    let file = transcript_of(&s.root);
    let entries = lines(&file);
    let roles: Vec<&str> = entries[1..].iter().map(|e| e["message"]["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    let result = &entries[3]["message"];
    assert_eq!(result["toolCallId"], "call_1");
    assert_eq!(result["content"][0]["text"], "the answer is 42\n");
    assert_eq!(result["isError"], false);
    // The second call sent the tool result back as OpenAI's `tool` message.
    let second = fake.requests()[1].json();
    let last = second["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("tool"), Some("the answer is 42\n")));
    // The store: created, with the last call's counters (160 + 6).
    let store = sessions_json(&s.root);
    let entry = &store["agent:main:main"];
    assert_eq!(entry["sessionId"], entries[0]["id"]);
    assert_eq!((entry["inputTokens"].as_u64(), entry["outputTokens"].as_u64()), (Some(160), Some(6)));
    assert_eq!(entry["totalTokens"].as_u64(), Some(166));
    check_requests_against_pi(&s, &fake, &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_compaction_fires_after_the_turn_that_crosses_it() {
    let fake = FakeLlm::start();
    // A 30000-token window with a 10000 reserve: compaction above 20000 context tokens.
    let s = setup(&fake, "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nreserveTokens = 10000\nreserveTokensFloor = 0\nkeepRecentTokens = 10\n");
    let usages = [(5_000, 100), (12_000, 100), (21_000, 100), (3_000, 100)];
    for (i, (input, output)) in usages.iter().enumerate() {
        fake.push(Reply::turn(
            Turn::text(&format!("answer {i}: noted ticket ABC-{i}23")).usage(*input, *output),
        ));
    }
    let mut compactions = Vec::new();
    for i in 0..4 {
        let out =
            s.agent.run(message(&format!("question {i} about host-{i}.example.com:8080"))).await.unwrap();
        assert_eq!(out.error, None);
        compactions.push(out.compactions);
    }
    // 5100 and 12100 stay under 20000; 21100 crosses it; the fourth turn
    // (3100 after the compaction) does not.
    assert_eq!(compactions, [0, 0, 1, 0]);
    let file = transcript_of(&s.root);
    let kinds: Vec<String> = lines(&file)[1..]
        .iter()
        .map(|e| {
            if e["type"] == "message" {
                e["message"]["role"].as_str().unwrap().to_owned()
            } else {
                e["type"].as_str().unwrap().to_owned()
            }
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "user", "assistant", "user", "assistant", "compaction", "user", "assistant"]
    );
    let compaction = &lines(&file)[7];
    assert_eq!(compaction["tokensBefore"].as_f64(), Some(21_100.0));
    assert_eq!(sessions_json(&s.root)["agent:main:main"]["compactionCount"], 1);
    // The fourth call was made after the compaction: it starts with Pi's summary message.
    let fourth = fake.requests()[3].json();
    let first_user =
        fourth["messages"].as_array().unwrap().iter().find(|m| m["role"] == "user").unwrap().clone();
    assert!(
        first_user["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("The conversation history before this point was compacted"),
        "{first_user}"
    );
    check_requests_against_pi(&s, &fake, &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_compacts_once_and_the_retry_succeeds() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "[compaction]\npreset = \"openclaw\"\nkeepRecentTokens = 10\n");
    fake.push(Reply::turn(Turn::text("first answer about /srv/app/config.toml").usage(900, 40)));
    fake.push(Reply::turn(Turn::text("second answer").usage(1_000, 40)));
    fake.push(Reply::overflow());
    fake.push(Reply::turn(Turn::text("third answer, after compaction").usage(300, 20)));
    for text in ["first question", "second question"] {
        assert_eq!(s.agent.run(message(text)).await.unwrap().compactions, 0);
    }
    let out = s.agent.run(message("third question")).await.unwrap();
    assert_eq!((out.compactions, out.model_calls, out.error.as_deref()), (1, 2, None));
    assert_eq!(out.reply, "third answer, after compaction");
    assert_eq!(fake.requests().len(), 4);
    let file = transcript_of(&s.root);
    let entries = lines(&file);
    let compactions: Vec<&Value> = entries.iter().filter(|e| e["type"] == "compaction").collect();
    assert_eq!(compactions.len(), 1, "exactly one compaction");
    // The failed call is in the log as Pi persists it; the retry follows the compaction.
    let failed = &entries[entries.len() - 3];
    assert_eq!(failed["message"]["stopReason"], "error");
    assert_eq!(entries[entries.len() - 2]["type"], "compaction");
    assert_eq!(entries[entries.len() - 1]["parentId"], entries[entries.len() - 2]["id"]);
    assert_eq!(sessions_json(&s.root)["agent:main:main"]["compactionCount"], 1);
    // The first exchange was summarised; its path survives in the summary or its ledger.
    let compaction = compactions[0];
    assert_eq!(compaction["firstKeptEntryId"], entries[3]["id"]);
    assert!(compaction.to_string().contains("/srv/app/config.toml"), "{compaction}");
    check_requests_against_pi(&s, &fake, &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_that_compaction_cannot_cure_ends_with_openclaws_advice() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "[compaction]\nkeepRecentTokens = 50\n");
    fake.push(Reply::turn(Turn::text("ok").usage(100, 10)));
    for _ in 0..5 {
        fake.push(Reply::overflow());
    }
    s.agent.run(message("hello")).await.unwrap();
    let out = s.agent.run(message("a long question")).await.unwrap();
    assert_eq!(out.error.as_deref(), Some(sessionlog_agent::OVERFLOW_ADVICE));
    // OpenClaw's three overflow compactions, each followed by a retry; the
    // fourth call's overflow ends the turn.
    assert_eq!((out.compactions, out.model_calls), (3, 4));
    assert_eq!(fake.requests().len(), 5);
}
