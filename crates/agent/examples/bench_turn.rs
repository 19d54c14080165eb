//! The live loop's overhead per turn against the fake model server, which
//! answers at once with a short reply, on a new session and on sessions
//! whose transcript is a generated one put in its place (e.g. 1 MB and
//! 40 MB): N turns each after one warm-up turn; the median per-turn time,
//! the same less the provider's own call (the loop's overhead), and each
//! session's ratio to the new one; the time to the first streamed token
//! through the agent vs from the provider alone; and, for each session
//! after its turns, one provider context built from the whole transcript
//! (`context::provider_context`, what each model call cost before the
//! projection was kept in memory) vs folded (`LiveContext`).
//!
//! A long session compacts, so its context stays within the model's
//! window whatever the file's size: each generated session gets one
//! `/compact` (extractive, keeping the policy's recent tokens) before it is
//! timed. `--no-compact` leaves the generated file's own context (then the
//! request itself grows with it).
//!
//! Usage: `bench_turn [--turns N] [--no-compact] [TRANSCRIPT…]` (build with `--release`).
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use sessionlog_agent::{Agent, AgentEvent, AgentParts, Config, Message};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_context::engine::Legacy;
use sessionlog_context::live::LiveContext;
use sessionlog_context::{provider_context, PiRules, ProviderRequest};
use sessionlog_provider::{
    CancellationToken, ClientOptions, Delta, HttpProvider, Provider, Request, RetryPolicy,
};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use sessionlog_tokens::PiEstimator;

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

/// `n` turns: the median per-turn and first-token times.
async fn turns(agent: &Agent, fake: &FakeLlm, n: usize) -> (Duration, Duration) {
    let (mut totals, mut firsts) = (Vec::new(), Vec::new());
    for i in 1..=n {
        let (t, f) = turn(agent, fake, i).await;
        totals.push(t);
        firsts.push(f);
    }
    (median(totals), median(firsts))
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

/// What one session measured.
struct Figures {
    name: String,
    bytes: u64,
    open: Duration,
    turn: Duration,
    first: Duration,
    request_bytes: usize,
    /// One provider context from the whole transcript vs folded, and its messages.
    context: (Duration, Duration, usize),
}

/// A session in a fresh state folder: a new one, or (with `transcript`) the
/// generated transcript put in place of the new session's own (header id
/// set to the session's id) and opened by a fresh agent (compacted once
/// unless `no_compact`); one warm-up turn, then `n` timed turns.
async fn session(fake: &FakeLlm, transcript: Option<&Path>, n: usize, no_compact: bool) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("work")).unwrap();
    let mut agent = agent(fake, root);
    let (mut open, _) = turn(&agent, fake, 0).await;
    let mut name = "new session".to_owned();
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("state/agents/main/sessions/sessions.json")).unwrap(),
    )
    .unwrap();
    let id = store["agent:main:main"]["sessionId"].as_str().unwrap().to_owned();
    let path = root.join(format!("state/agents/main/sessions/{id}.jsonl"));
    if let Some(transcript) = transcript {
        agent.close().await;
        drop(agent);
        let text = std::fs::read_to_string(transcript).unwrap();
        let (header, rest) = text.split_once('\n').unwrap();
        let mut header: Value = serde_json::from_str(header).unwrap();
        header["id"] = Value::String(id);
        std::fs::write(&path, format!("{header}\n{rest}")).unwrap();
        agent = self::agent(fake, root);
        if !no_compact {
            agent.compact(None, None).await.unwrap().expect("a compaction");
        }
        // OpenClaw's size-forced memory flush: a transcript of
        // forceFlushTranscriptBytes (2 MiB) or more gets one silent flush
        // turn, its own model call, before the cycle's first reply. It is
        // scripted for the opening turn, which is not one of the timed ones.
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        if config(fake, root).policy().memory_flush.is_some_and(|f| f.forced_by_size(bytes, 0, None)) {
            fake.push(Reply::turn(Turn::text("NO_REPLY").usage(1_000, 10)));
        }
        (open, _) = turn(&agent, fake, 0).await;
        name = transcript.file_name().unwrap().to_string_lossy().into_owned();
    }
    let (turn, first) = turns(&agent, fake, n).await;
    agent.close().await;
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    let request_bytes = fake.requests().last().map_or(0, |r| r.body.len());
    let context = context_cost(&path, 5);
    Figures { name, bytes, open, turn, first, request_bytes, context }
}

/// One provider context of `transcript`'s default leaf (what the next
/// model call sends) built from the whole transcript vs from the folded
/// projection: median of `n` each, and its message count.
fn context_cost(transcript: &Path, n: usize) -> (Duration, Duration, usize) {
    let t = sessionlog_store::load_transcript(transcript, sessionlog_event_log::Mode::Lenient)
        .unwrap()
        .loaded
        .transcript;
    let request = ProviderRequest {
        provider: Some("openai-completions"),
        rules: PiRules::V0_58,
        ..ProviderRequest::default()
    };
    let live = LiveContext::new(&t, PiRules::V0_58);
    let (mut full, mut folded) = (Vec::new(), Vec::new());
    let mut messages = 0;
    for _ in 0..n {
        let start = Instant::now();
        let a = provider_context(&t, &request, &mut Legacy, &PiEstimator).unwrap();
        full.push(start.elapsed());
        let start = Instant::now();
        let b = live.provider_context(&t, &request, &mut Legacy, &PiEstimator).unwrap();
        folded.push(start.elapsed());
        assert_eq!(a, b);
        messages = b.messages.len();
    }
    (median(full), median(folded), messages)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut n = 20;
    let mut no_compact = false;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--turns" => n = args.next().and_then(|s| s.parse().ok()).expect("--turns N"),
            "--no-compact" => no_compact = true,
            _ => files.push(PathBuf::from(arg)),
        }
    }
    let fake = FakeLlm::start();
    let dir = tempfile::tempdir().unwrap();
    let (alone_first, alone_total) = provider_alone(&provider(&config(&fake, dir.path())), &fake, n).await;
    let mut figures = vec![session(&fake, None, n, no_compact).await];
    for file in &files {
        figures.push(session(&fake, Some(file), n, no_compact).await);
    }

    println!("turns per session: {n} after one warm-up turn; medians");
    println!("provider alone: first token {}, whole call {}", ms(alone_first), ms(alone_total));
    let base = figures[0].turn.as_secs_f64();
    let overhead = |d: Duration| d.saturating_sub(alone_total);
    let base_overhead = overhead(figures[0].turn).as_secs_f64();
    for f in &figures {
        println!(
            "{} ({} bytes after the turns): first turn (opens it) {}; per turn {}, overhead (less the provider's call) {}, \
             first token {}; last request {} bytes; ratio to the new session: per turn {:.2}, overhead {:.2}; \
             one provider context ({} messages): from the whole transcript {}, folded {}",
            f.name,
            f.bytes,
            ms(f.open),
            ms(f.turn),
            ms(overhead(f.turn)),
            ms(f.first),
            f.request_bytes,
            f.turn.as_secs_f64() / base,
            overhead(f.turn).as_secs_f64() / base_overhead,
            f.context.2,
            ms(f.context.0),
            ms(f.context.1),
        );
    }
}
