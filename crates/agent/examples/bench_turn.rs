//! The live loop's overhead per turn against the fake model server, which
//! answers at once with a short reply: on a new session and on a session
//! whose transcript is a generated one (e.g. 40 MB), N turns each; the
//! median per-turn time of each and their ratio; and the time to the first
//! streamed token through the agent vs from the provider alone.
//!
//! Usage: `bench_turn TRANSCRIPT [TURNS]` (build with `--release`).
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use sessionlog_agent::{Agent, AgentEvent, AgentParts, Config, Message};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_provider::{
    CancellationToken, ClientOptions, Delta, HttpProvider, Provider, Request, RetryPolicy,
};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};

const REPLY: &str = "Done: the change is in place.";

fn config(fake: &FakeLlm, root: &Path) -> Config {
    let text = format!(
        "state_dir = \"state\"\nworkspace = \"work\"\nsystem_prompt = \"You are a careful assistant.\"\n\
         [model]\napi = \"openai-completions\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\ncontext_window = 1000000\n",
        fake.openai_base_url()
    );
    Config::parse(&text, root).unwrap()
}

fn provider(config: &Config) -> Arc<HttpProvider> {
    let options = ClientOptions {
        retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() },
        ..ClientOptions::default()
    };
    Arc::new(HttpProvider::new(config.model.model().unwrap(), options).unwrap())
}

fn agent(fake: &FakeLlm, root: &Path) -> Agent {
    let config = config(fake, root);
    let clock = Arc::new(AtomicI64::new(1_796_083_200_000));
    Agent::new(AgentParts {
        provider: provider(&config),
        config,
        summarizer: Arc::new(|| Box::new(Extractive) as Box<dyn Summarizer + Send>),
        clock: Arc::new(move || clock.fetch_add(1000, Ordering::SeqCst)),
        tools: None,
    })
    .unwrap()
}

/// One turn: its whole time and the time to its first streamed text delta.
async fn turn(agent: &Agent, fake: &FakeLlm, i: usize) -> (Duration, Duration) {
    fake.push(Reply::turn(Turn::text(REPLY).usage(1_000, 10)));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let text = format!("Please make change {i} and tell me when done.");
    let start = Instant::now();
    let done = agent.submit(Message { text, events: Some(tx), ..Message::default() });
    let mut first = None;
    while let Some(event) = rx.recv().await {
        if first.is_none() && matches!(event, AgentEvent::Delta(Delta::TextDelta { .. })) {
            first = Some(start.elapsed());
        }
    }
    let out = done.await.unwrap().unwrap();
    let total = start.elapsed();
    assert_eq!((out.reply.as_str(), out.error.as_deref()), (REPLY, None));
    (total, first.expect("a streamed text delta"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// One warm-up turn, then `n` turns: the warm-up's time, the median per-turn
/// and first-token times.
async fn turns(agent: &Agent, fake: &FakeLlm, n: usize) -> (Duration, Duration, Duration) {
    let (warm, _) = turn(agent, fake, 0).await;
    let (mut totals, mut firsts) = (Vec::new(), Vec::new());
    for i in 1..=n {
        let (t, f) = turn(agent, fake, i).await;
        totals.push(t);
        firsts.push(f);
    }
    (warm, median(totals), median(firsts))
}

/// Straight from the provider (one warm-up call, then `n`): median time to
/// the first text delta and of the whole call.
async fn provider_alone(provider: &HttpProvider, fake: &FakeLlm, n: usize) -> (Duration, Duration) {
    let request = Request {
        system_prompt: Some("You are a careful assistant.".to_owned()),
        messages: vec![json!({"role": "user", "content": "Please make the change.", "timestamp": 0})],
        ..Request::default()
    };
    let (mut firsts, mut totals) = (Vec::new(), Vec::new());
    for _ in 0..=n {
        fake.push(Reply::turn(Turn::text(REPLY).usage(1_000, 10)));
        let start = Instant::now();
        let mut stream = provider.stream(&request, CancellationToken::new());
        let mut first = None;
        while let Some(delta) = stream.next().await {
            if first.is_none() && matches!(delta, Delta::TextDelta { .. }) {
                first = Some(start.elapsed());
            }
        }
        firsts.push(first.expect("a streamed text delta"));
        totals.push(start.elapsed());
    }
    firsts.remove(0);
    totals.remove(0);
    (median(firsts), median(totals))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let transcript = args.get(1).expect("usage: bench_turn TRANSCRIPT [TURNS]");
    let n: usize = args.get(2).map_or(20, |s| s.parse().expect("TURNS is a number"));
    let fake = FakeLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("work")).unwrap();
    let (alone_first, alone_total) = provider_alone(&provider(&config(&fake, root)), &fake, n).await;

    // A new session.
    let small = agent(&fake, root);
    let (_, new_turn, new_first) = turns(&small, &fake, n).await;
    small.close().await;
    drop(small);

    // The same session with the generated transcript in place of its own
    // (header id set to the session's id), opened by a fresh agent.
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("state/agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    let id = store["agent:main:main"]["sessionId"].as_str().unwrap().to_owned();
    let path = root.join(format!("state/agents/main/sessions/{id}.jsonl"));
    let text = std::fs::read_to_string(transcript).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(header).unwrap();
    header["id"] = Value::String(id);
    std::fs::write(&path, format!("{header}\n{rest}")).unwrap();
    drop(text);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let big = agent(&fake, root);
    let (open_turn, big_turn, big_first) = turns(&big, &fake, n).await;
    big.close().await;

    println!("turns per session: {n} after one warm-up turn; medians");
    println!("provider alone: first token {}, whole call {}", ms(alone_first), ms(alone_total));
    println!("new session: per turn {}, first token {}", ms(new_turn), ms(new_first));
    println!("{bytes}-byte session: first turn (opens it) {}", ms(open_turn));
    println!("{bytes}-byte session: per turn {}, first token {}", ms(big_turn), ms(big_first));
    println!("ratio per turn, large / new: {:.2}", big_turn.as_secs_f64() / new_turn.as_secs_f64());
}
