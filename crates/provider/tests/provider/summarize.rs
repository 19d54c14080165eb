//! The model summariser against the fake server: what it sends, the cache
//! (served offline, keyed by the request), and the fallbacks.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use sessionlog_compaction::{
    compact_transcript, Compacted, FallbackLevel, ManualCompaction, Policy, RequestKind, Summarizer,
    SummaryRequest,
};
use sessionlog_events::{Entry, Transcript};
use sessionlog_provider::summarize::{
    load_model_config, ModelSummarizer, SummarizeError, SummaryCache, INITIAL_PROMPT, SYSTEM_PROMPT,
    UPDATE_PROMPT,
};
use sessionlog_provider::transport::{HttpRequest, HttpResponse, Transport, TransportError};
use sessionlog_provider::{Api, ClientOptions, HttpProvider, Model, ModelConfig, RetryPolicy};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use sessionlog_test_support::fixtures::summary_body;
use sha2::{Digest, Sha256};

const LINES: &[&str] = &[
    r#"{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"Deploy build 4f3a9c1e to staging","timestamp":1}}"#,
    r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Deploying to db-7.internal:5432 now."}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#,
    r#"{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"Next, fix the login bug in src/auth.rs","timestamp":3}}"#,
    r#"{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":4}}"#,
    r#"{"type":"message","id":"a5","parentId":"a4","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"Thanks","timestamp":5}}"#,
];

/// The history the cut summarises (a1–a4), as Pi's `serializeConversation`
/// writes it (spec pi-compaction §6.1), by hand.
const HISTORY: &str = "[User]: Deploy build 4f3a9c1e to staging\n\n\
[Assistant]: Deploying to db-7.internal:5432 now.\n\n\
[User]: Next, fix the login bug in src/auth.rs\n\n\
[Assistant]: Fixed.";

fn transcript() -> Transcript {
    let mut entries: Vec<Entry> = LINES.iter().map(|l| Entry::parse(l).unwrap()).collect();
    let header = entries.remove(0);
    Transcript::from_objects(header, entries).unwrap()
}

/// Pi's rules, the cut at the last user message, no turns kept verbatim,
/// reserve 10000 (so the summary's budget is floor(0.8 × 10000) = 8000).
fn policy() -> Policy {
    let mut p = Policy::pi();
    p.keep_recent_tokens = 1;
    p.reserve_tokens = 10_000;
    p.recent_turns_preserve = 0;
    p.tool_failures_section = false;
    p
}

fn config(api: Api, fake: &FakeLlm) -> ModelConfig {
    let base_url = match api {
        Api::OpenAiCompletions => fake.openai_base_url(),
        Api::AnthropicMessages => fake.anthropic_base_url(),
    };
    ModelConfig {
        api: api.as_str().to_owned(),
        base_url,
        model: "fake-model".to_owned(),
        provider: None,
        api_key_env: None,
        context_window: Some(128_000),
        max_tokens: Some(20_000),
        reasoning: false,
    }
}

fn compact(summarizer: &mut dyn Summarizer, instructions: Option<&str>) -> Compacted {
    let t = transcript();
    let request = ManualCompaction {
        policy: &policy(),
        instructions,
        summarizer,
        counter: sessionlog_tokens::counter(sessionlog_tokens::Tokenizer::Pi).unwrap(),
        now_ms: 1_767_225_600_000,
    };
    compact_transcript(&t, request).unwrap()
}

/// Every text string of the user message in a request body, joined.
fn user_text(body: &Value) -> String {
    fn texts(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
            Value::Object(o) => {
                if let Some(t) = o.get("text") {
                    texts(t, out)
                } else if let Some(c) = o.get("content") {
                    texts(c, out)
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        if m["role"] == "user" {
            texts(&m["content"], &mut out);
        }
    }
    out.join("")
}

/// The system prompt as either API carries it.
fn system(body: &Value) -> String {
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => body["messages"][0]["content"].as_str().unwrap_or_default().to_owned(),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_request_carries_the_prompts_and_the_history() {
    for api in [Api::OpenAiCompletions, Api::AnthropicMessages] {
        let fake = FakeLlm::start();
        fake.push(Reply::turn(Turn::text("## Decisions\n- deploy 4f3a9c1e to staging")));
        let mut s = ModelSummarizer::from_config(&config(api, &fake), |_| None, None).unwrap();
        let done = compact(&mut s, None);
        let received = fake.requests();
        assert_eq!(received.len(), 1, "{api:?}: one chunk, one call");
        let body = received[0].json();
        assert_eq!(body["model"], "fake-model");
        assert_eq!(system(&body), SYSTEM_PROMPT, "{api:?}");
        let text = user_text(&body);
        let head = format!("<conversation>\n{HISTORY}\n</conversation>\n\n");
        assert!(text.starts_with(&head), "{api:?}: {text}");
        // No running summary: the initial prompt, then the pipeline's instructions.
        let tail = format!(
            "{INITIAL_PROMPT}\n\nAdditional focus: {}",
            sessionlog_compaction::pipeline::INSTRUCTIONS
        );
        assert_eq!(&text[head.len()..], tail, "{api:?}");
        let limit = body.get("max_completion_tokens").or_else(|| body.get("max_tokens"));
        assert_eq!(limit, Some(&Value::from(8000)), "{api:?}: floor(0.8 × 10000)");
        // The model's answer is the summary (file lists and ledger follow it).
        assert!(summary_body(&done.outcome.summary).starts_with("## Decisions\n- deploy 4f3a9c1e to staging"));
        assert_eq!(done.outcome.fallback, FallbackLevel::Full);
    }
}

#[test]
fn an_update_request_carries_the_previous_summary() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("merged")));
    let mut s = ModelSummarizer::from_config(&config(Api::OpenAiCompletions, &fake), |_| None, None).unwrap();
    let request = SummaryRequest {
        kind: RequestKind::Merge,
        messages: Vec::new(),
        conversation: "[User]: part one".to_owned(),
        previous_summary: Some("earlier work".to_owned()),
        instructions: "keep the ids".to_owned(),
        max_tokens: 100,
    };
    assert_eq!(s.summarize(&request).unwrap(), "merged");
    let text = user_text(&fake.requests()[0].json());
    assert_eq!(
        text,
        format!(
            "<conversation>\n[User]: part one\n</conversation>\n\n<previous-summary>\nearlier work\n\
             </previous-summary>\n\n{UPDATE_PROMPT}\n\nAdditional focus: keep the ids"
        )
    );
}

/// Lists `dir`'s file names, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_second_run_is_served_from_the_cache_with_the_server_gone() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let (first, received, base_url) = {
        let fake = FakeLlm::start();
        fake.push(Reply::turn(Turn::text("## Decisions\n- summary from the model")));
        let cache = Arc::new(SummaryCache::open(&cache_dir).unwrap());
        let mut s =
            ModelSummarizer::from_config(&config(Api::OpenAiCompletions, &fake), |_| None, Some(cache))
                .unwrap();
        let done = compact(&mut s, None);
        assert_eq!(s.report().sent, 1);
        (done, fake.requests(), fake.openai_base_url())
    };
    // The key is SHA-256 of "api\nbase-url\nmodel\n" + the body the server received.
    let mut key_input = format!("openai-completions\n{base_url}\nfake-model\n").into_bytes();
    key_input.extend_from_slice(&received[0].body);
    let key = sha256_hex(&key_input);
    assert_eq!(names(&cache_dir), vec![format!("{key}.json"), "model.json".to_owned()], "no temp file left");

    let cache = Arc::new(SummaryCache::open(&cache_dir).unwrap());
    let mut offline = ModelSummarizer::cache_only(cache).unwrap();
    let second = compact(&mut offline, None);
    assert_eq!(second.entry.raw(), first.entry.raw(), "byte-identical entry");
    let report = offline.report();
    assert_eq!((report.sent, report.cache_hits), (0, 1));
    assert!(report.cache_misses.is_empty() && report.failures.is_empty(), "{report:?}");
}

/// Two endpoints serving a model under the same id answer for themselves:
/// what one answered is not served for the other from a shared cache.
#[test]
fn the_cache_key_names_the_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(SummaryCache::open(dir.path()).unwrap());
    let mut summaries = Vec::new();
    for answer in ["## Decisions\n- from the first server", "## Decisions\n- from the second server"] {
        let fake = FakeLlm::start();
        fake.push(Reply::turn(Turn::text(answer)));
        let mut s = ModelSummarizer::from_config(
            &config(Api::OpenAiCompletions, &fake),
            |_| None,
            Some(cache.clone()),
        )
        .unwrap();
        let done = compact(&mut s, None);
        let report = s.report();
        assert_eq!((report.sent, report.cache_hits), (1, 0), "{report:?}");
        summaries.push(summary_body(&done.outcome.summary).to_owned());
    }
    assert_ne!(summaries[0], summaries[1]);
    assert_eq!(names(dir.path()).len(), 3, "two answers and model.json");
}

#[test]
fn a_cache_miss_offline_is_an_error_naming_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let empty = Arc::new(SummaryCache::open(dir.path()).unwrap());
    let err = ModelSummarizer::cache_only(empty).unwrap_err();
    assert!(matches!(err, SummarizeError::NoModel(_)), "{err}");
    assert!(err.to_string().contains("model.json"), "{err}");

    // A cache that knows the model but not this request.
    let fake = FakeLlm::start();
    let cache = Arc::new(SummaryCache::open(dir.path()).unwrap());
    cache.set_model_config(&config(Api::OpenAiCompletions, &fake)).unwrap();
    drop(fake);
    let mut offline = ModelSummarizer::cache_only(cache).unwrap();
    let done = compact(&mut offline, Some("focus on the deploy"));
    let report = offline.report();
    assert_eq!(report.cache_misses.len(), 1, "{report:?}");
    let key = &report.cache_misses[0];
    assert_eq!(key.len(), 64);
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
    // The pipeline fell back (its rules), and the failure it saw names the hash and the folder.
    assert_eq!(done.outcome.fallback, FallbackLevel::Statistical);
    let failure = done.outcome.exchanges[0].response.clone().unwrap_err();
    assert!(
        failure.contains(key.as_str()) && failure.contains(&dir.path().display().to_string()),
        "{failure}"
    );
    assert_eq!(report.sent, 0);
}

#[test]
fn a_failing_provider_falls_back_and_each_request_is_sent_once() {
    let fake = FakeLlm::start();
    for _ in 0..5 {
        fake.push(Reply::auth());
    }
    let mut s = ModelSummarizer::from_config(&config(Api::AnthropicMessages, &fake), |_| None, None).unwrap();
    let done = compact(&mut s, None);
    // Level 3 of the fallback (spec compaction §3.8): 4 messages, none oversized.
    assert_eq!(done.outcome.fallback, FallbackLevel::Statistical);
    assert!(
        summary_body(&done.outcome.summary).starts_with(
            "Context contained 4 messages (0 oversized). Summary unavailable due to size limits."
        ),
        "{}",
        done.outcome.summary
    );
    // The pipeline asked 3 times; a fatal error is not sent again.
    assert_eq!(done.outcome.exchanges.len(), 3);
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(s.report().failures.len(), 1);
}

/// A transport that is never reachable, counting the attempts.
struct Dead(AtomicUsize);

impl Transport for Dead {
    fn send(&self, _: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, TransportError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err(TransportError::Connect("connection refused".into())) })
    }
}

#[test]
fn a_dead_endpoint_costs_one_request_of_retries() {
    let dead = Arc::new(Dead(AtomicUsize::new(0)));
    let retry = RetryPolicy {
        initial_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        ..RetryPolicy::default()
    };
    let options = ClientOptions { retry, ..ClientOptions::default() };
    let model = Model::new(Api::OpenAiCompletions, "p", "m", "http://127.0.0.1:9");
    let provider = HttpProvider::with_transport(model, options, dead.clone());
    let mut s = ModelSummarizer::new(Arc::new(provider));
    let first = compact(&mut s, None);
    assert_eq!(first.outcome.fallback, FallbackLevel::Statistical);
    // The provider's 3 attempts for the first request; nothing after.
    assert_eq!(dead.0.load(Ordering::SeqCst), 3);
    let second = compact(&mut s, Some("another request"));
    assert_eq!(second.outcome.fallback, FallbackLevel::Statistical);
    assert_eq!(dead.0.load(Ordering::SeqCst), 3);
    let why = second.outcome.exchanges[0].response.clone().unwrap_err();
    assert!(why.contains("unreachable"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_programs_use_their_own_runtime() {
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("from a blocking thread")));
    fake.push(Reply::turn(Turn::text("awaited")));
    let s = ModelSummarizer::from_config(&config(Api::OpenAiCompletions, &fake), |_| None, None)
        .unwrap()
        .on_runtime(tokio::runtime::Handle::current());
    let mut blocking = s.clone();
    let done = tokio::task::spawn_blocking(move || compact(&mut blocking, None)).await.unwrap();
    assert!(summary_body(&done.outcome.summary).starts_with("from a blocking thread"));
    let request = SummaryRequest {
        kind: RequestKind::Chunk { index: 0, count: 1 },
        messages: Vec::new(),
        conversation: "[User]: hi".to_owned(),
        previous_summary: None,
        instructions: String::new(),
        max_tokens: 10,
    };
    assert_eq!(s.answer(&request).await.unwrap(), "awaited");
    assert_eq!(s.report().sent, 2);
}

#[test]
fn a_damaged_cache_entry_is_refused_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SummaryCache::open(dir.path()).unwrap();
    let key = SummaryCache::key(Api::OpenAiCompletions, "http://h/v1", "m", b"{}");
    cache.put(&key, Api::OpenAiCompletions, "http://h/v1", "m", b"{}", "text").unwrap();
    assert_eq!(cache.get(&key).unwrap().as_deref(), Some("text"));
    // The stored request edited: it no longer hashes to the name.
    let path = cache.path(&key);
    let edited = std::fs::read_to_string(&path).unwrap().replace("\"{}\"", "\"{ }\"");
    std::fs::write(&path, edited).unwrap();
    let err = cache.get(&key).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("does not hash"), "{err}");
    std::fs::write(&path, "{\n  \"api\": ").unwrap();
    let err = cache.get(&key).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("line 2"), "{err}");
}

#[test]
fn model_configuration_files() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.toml");
    std::fs::write(
        &live,
        "state_dir = \"state\"\nagent = \"main\"\n[model]\napi = \"anthropic-messages\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\nmax_tokens = 4096\n[compaction]\nsummarizer = \"model\"\n",
    )
    .unwrap();
    let c = load_model_config(&live).unwrap();
    assert_eq!((c.api.as_str(), c.model.as_str(), c.max_tokens), ("anthropic-messages", "m", Some(4096)));
    let bare = dir.path().join("model.toml");
    std::fs::write(&bare, "api = \"openai-completions\"\nbase_url = \"http://x/v1\"\nmodel = \"gpt\"\n")
        .unwrap();
    assert_eq!(load_model_config(&bare).unwrap().model, "gpt");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[model]\napi = \"openai-completions\"\nbase_url = \"x\"\nmodel = \"m\"\ntypo = 1\n",
    )
    .unwrap();
    let err = load_model_config(&bad).unwrap_err().to_string();
    assert!(err.contains("bad.toml") && err.contains("line 5") && err.contains("typo"), "{err}");
}

/// A turn split by the cut: its prefix is summarised by its own request. Its
/// budget is floor(0.5 × reserve): OpenClaw 2026.9.6's safeguard asks for the
/// prefix with `summaryPrompt: {kind: "turn-prefix"}`, which its
/// `generateSummary` gives 0.5 × reserve (the history 0.8 ×), as Pi's own
/// default mode does (spec pi-compaction §6.3); the baseline safeguard of
/// spec compaction §3.3 gave it 0.8 ×.
#[test]
fn a_split_turn_prefix_is_its_own_request_with_the_safeguard_budget() {
    let assistant = |id: &str, parent: &str, text: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"stopReason":"stop","timestamp":2}}}}"#
        )
    };
    let lines = [
        LINES[0].to_owned(),
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first question here","timestamp":1}}"#.to_owned(),
        assistant("a1", "u1", "first answer"),
        r#"{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"second task: refactor src/lib.rs","timestamp":3}}"#.to_owned(),
        assistant("a2", "u2", "looking at it"),
        assistant("a3", "a2", "now editing the file"),
    ];
    let mut entries: Vec<Entry> = lines.iter().map(|l| Entry::parse(l).unwrap()).collect();
    let header = entries.remove(0);
    let t = Transcript::from_objects(header, entries).unwrap();
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("history summary")));
    fake.push(Reply::turn(Turn::text("prefix summary")));
    let mut s = ModelSummarizer::from_config(&config(Api::OpenAiCompletions, &fake), |_| None, None).unwrap();
    let mut p = policy();
    p.pi_rules = sessionlog_events::PiRules::V0_58;
    let request = ManualCompaction {
        policy: &p,
        instructions: None,
        summarizer: &mut s,
        counter: sessionlog_tokens::counter(sessionlog_tokens::Tokenizer::Pi).unwrap(),
        now_ms: 1_767_225_600_000,
    };
    let done = compact_transcript(&t, request).unwrap();
    assert!(
        summary_body(&done.outcome.summary)
            .starts_with("history summary\n\n---\n\n**Turn Context (split turn):**\n\nprefix summary"),
        "{}",
        done.outcome.summary
    );
    let received = fake.requests();
    assert_eq!(received.len(), 2);
    let prefix = received[1].json();
    let text = user_text(&prefix);
    assert!(
        text.starts_with(
            "<conversation>\n[User]: second task: refactor src/lib.rs\n\n[Assistant]: looking at it\n</conversation>\n\n"
        ),
        "{text}"
    );
    assert!(text.contains(sessionlog_compaction::pipeline::TURN_PREFIX_INSTRUCTIONS));
    assert_eq!(
        prefix["max_completion_tokens"], 5000,
        "floor(0.5 × 10000), as OpenClaw 2026.9's safeguard asks"
    );
}
