//! The pre-compaction memory flush (OpenClaw, spec compaction §6): before
//! the reply run, a silent turn once the context is within the soft
//! threshold, once per compaction cycle, dated in the user's time zone with
//! a current-time line, `NO_REPLY` suppressed, nothing of it streamed to
//! the caller, recorded as `memoryFlushAt`, and never for a read-only
//! workspace.

mod support;

use sessionlog_agent::AgentEvent;
use sessionlog_provider::Delta;
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use support::{lines, loop_requests, message, sessions_json, setup_top, transcript_of, SYSTEM};

// openclaw preset on a 100000 window: reserve min(max(16384, 20000), 25000) = 20000,
// so compaction above 80000 tokens; the flush at 100000 − min(20000, 25000)
// − min(4000, 40000) = 76000.
const POLICY: &str = "[compaction]\npreset = \"openclaw\"\ncontextWindow = 100000\nkeepRecentTokens = 10\n";
const KEY: &str = "agent:main:main";

/// OpenClaw 2026.9.6's flush prompt for 2026-12-01T00:00:xxZ in New York
/// (still November 30th there), its time line as OpenClaw's
/// `resolveCronStyleNow` prints it.
const FIRST_FLUSH_PROMPT: &str = "Pre-compaction memory flush. Store durable memories only in memory/2026-11-30.md (create memory/ if needed). Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or edit them. If memory/2026-11-30.md already exists, APPEND new content only and do not overwrite existing entries. Do NOT create timestamped variant files (e.g., 2026-11-30-HHMM.md); always use the canonical 2026-11-30.md filename. If nothing to store, reply with NO_REPLY.\nCurrent time: Monday, November 30th, 2026 - 7:00 PM (America/New_York)\nReference UTC: 2026-12-01 00:00 UTC";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flush_runs_before_the_reply_once_per_compaction_cycle_and_is_silent() {
    let fake = FakeLlm::start();
    let s = setup_top(&fake, "user_timezone = \"America/New_York\"\n", POLICY);
    // Turn 1: 3100 tokens. Turn 2 starts at 3100 (no flush) and ends at 77100.
    fake.push(Reply::turn(Turn::text("one").usage(3_000, 100)));
    fake.push(Reply::turn(Turn::text("two").usage(77_000, 100)));
    // Turn 3 starts at 77100 ≥ 76000: the flush runs first, writes its notes,
    // says NO_REPLY; then the reply run: 78100.
    fake.push(Reply::turn(
        Turn::tool_call("f1", "write", r#"{"path":"memory/2026-11-30.md","content":"- prefers tabs\n"}"#)
            .usage(77_200, 30),
    ));
    fake.push(Reply::turn(Turn::text("NO_REPLY").usage(77_300, 2)));
    fake.push(Reply::turn(Turn::text("three").usage(78_000, 100)));
    // Turn 4 starts at 78100, same cycle: no second flush; 82100 > 80000:
    // compaction after it.
    fake.push(Reply::turn(Turn::text("four").usage(82_000, 100)));
    // Turn 5 starts after the compaction (small): no flush; ends at 77100.
    fake.push(Reply::turn(Turn::text("five").usage(77_000, 100)));
    // Turn 6 starts at 77100 in the new cycle: the flush runs again.
    fake.push(Reply::turn(Turn::text("Noted the deadline.").usage(77_100, 5)));
    fake.push(Reply::turn(Turn::text("six").usage(77_200, 100)));
    let mut flushed = Vec::new();
    let mut compactions = Vec::new();
    let replies = ["one", "two", "three", "four", "five", "six"];
    for i in 1..=6 {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let out = s
            .agent
            .run(sessionlog_agent::Message { events: Some(tx), ..message(&format!("message {i}")) })
            .await
            .unwrap();
        assert_eq!(out.error, None);
        flushed.push(out.memory_flushed);
        compactions.push(out.compactions);
        let mut flush_replies = Vec::new();
        let mut streamed = String::new();
        while let Ok(event) = events.try_recv() {
            match event {
                AgentEvent::MemoryFlush { reply } => flush_replies.push(reply),
                AgentEvent::Delta(Delta::TextDelta { text, .. }) => streamed.push_str(&text),
                AgentEvent::ToolCall { name, .. } => {
                    panic!("turn {i}: the flush's {name} call reached the caller")
                }
                _ => {}
            }
        }
        match i {
            3 => assert_eq!(flush_replies, [None], "NO_REPLY is suppressed"),
            6 => assert_eq!(flush_replies, [Some("Noted the deadline.".to_owned())]),
            _ => assert!(flush_replies.is_empty(), "turn {i}: {flush_replies:?}"),
        }
        // What streamed to the caller is the reply run's text alone: the
        // flush streams nothing.
        assert_eq!(streamed, replies[i - 1], "turn {i}");
        // The visible reply is the turn's, never the flush's.
        assert_eq!(out.reply, replies[i - 1]);
    }
    assert_eq!(flushed, [false, false, true, false, false, true]);
    assert_eq!(compactions, [0, 0, 0, 1, 0, 0]);
    assert_eq!(fake.pending(), 0);
    assert_eq!(
        std::fs::read_to_string(s.root.join("work/memory/2026-11-30.md")).unwrap(),
        "- prefers tabs\n"
    );
    let store = &sessions_json(&s.root)[KEY];
    assert_eq!(store["compactionCount"], 1);
    assert_eq!(store["memoryFlushCompactionCount"], 1, "the second flush belongs to cycle 1");
    assert!(store["memoryFlushAt"].as_i64().is_some());
    // The flush turn is in the transcript before turn 3's message, with
    // OpenClaw's prompt, and its call carried the flush system prompt after ours.
    let file = transcript_of(&s.root);
    let prompts: Vec<String> = lines(&file)
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| e["message"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(prompts.len(), 8);
    assert_eq!((prompts[1].as_str(), prompts[3].as_str()), ("message 2", "message 3"));
    assert_eq!(prompts[2], FIRST_FLUSH_PROMPT);
    assert!(prompts[6].starts_with("Pre-compaction memory flush.") && prompts[7] == "message 6");
    let flush_call = fake.requests()[2].json();
    let system = flush_call["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.starts_with(SYSTEM) && system.ends_with("usually NO_REPLY is correct."), "{system}");
    assert!(system.contains("memory/2026-11-30.md"), "{system}");
    // Only the loop's own system prompt marks the loop's requests; the flush calls carry more.
    assert_eq!(loop_requests(&fake).len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_workspace_never_flushes() {
    let fake = FakeLlm::start();
    let s = setup_top(&fake, "read_only_workspace = true\n", POLICY);
    fake.push(Reply::turn(Turn::text("one").usage(77_000, 100)));
    fake.push(Reply::turn(Turn::text("two").usage(77_200, 100)));
    s.agent.run(message("hello")).await.unwrap();
    let out = s.agent.run(message("again")).await.unwrap();
    // 77100 is inside the soft threshold, but the workspace cannot be written.
    assert!(!out.memory_flushed);
    assert_eq!(fake.requests().len(), 2);
    assert!(sessions_json(&s.root)[KEY].get("memoryFlushAt").is_none());
}

/// One turn of `text` answered "one" with `usage`, then the flush decision
/// of the next turn, on a fresh state folder with `policy`: whether it flushed.
async fn second_turn_flushes(policy: &str, usage: (u64, u64), pad_to: Option<u64>) -> bool {
    let fake = FakeLlm::start();
    let s = setup_top(&fake, "user_timezone = \"UTC\"\n", policy);
    fake.push(Reply::turn(Turn::text("one").usage(usage.0, usage.1)));
    s.agent.run(message("hello")).await.unwrap();
    if let Some(target) = pad_to {
        pad_transcript(&transcript_of(&s.root), target);
    }
    // A flush takes the first reply (NO_REPLY) and the turn the second; with
    // no flush the turn takes the first and the second is never asked for.
    fake.push(Reply::turn(Turn::text("NO_REPLY").usage(10, 1)));
    fake.push(Reply::turn(Turn::text("two").usage(10, 1)));
    let out = s.agent.run(message("again")).await.unwrap();
    assert_eq!(out.error, None);
    let flushed = out.reply == "two";
    assert_eq!(out.memory_flushed, flushed);
    assert_eq!(fake.pending(), usize::from(!flushed));
    flushed
}

/// Appends one `custom` entry (not part of any model context) continuing the
/// leaf, sized so the file is exactly `target` bytes long.
fn pad_transcript(file: &std::path::Path, target: u64) {
    let entries = lines(file);
    let leaf = entries.last().unwrap()["id"].as_str().unwrap().to_owned();
    let len = std::fs::metadata(file).unwrap().len();
    let head = format!(
        r#"{{"type":"custom","customType":"pad","id":"pad00001","parentId":"{leaf}","timestamp":"2026-12-01T00:00:00.000Z","data":""#
    );
    let tail = "\"}\n";
    let fill = target - len - (head.len() + tail.len()) as u64;
    let line = format!("{head}{}{tail}", "x".repeat(fill as usize));
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
    drop(f);
    assert_eq!(std::fs::metadata(file).unwrap().len(), target);
}

// OpenClaw 2026.9.6 caps the soft threshold at half of what the window
// leaves after the flush's reserve, which is its default floor (20000, not
// the configured one) capped at a quarter of the window. Window 30000,
// reserve 2000 and no floor (so compaction waits until 30000 − min(2000, 7500)
// = 28000), soft 20000:
// reserve min(20000, 7500) = 7500, soft min(20000, ⌊22500/2⌋) = 11250, the
// flush at 30000 − 7500 − 11250 = 11250 (uncapped it was 10000, and with the
// configured floor 0 as the reserve it would be 15000).
const SOFT_CAPPED: &str = "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nreserveTokens = 2000\nreserveTokensFloor = 0\n[compaction.memoryFlush]\nsoftThresholdTokens = 20000\nforceFlushTranscriptBytes = 0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soft_threshold_is_capped_at_half_the_window_left() {
    assert!(!second_turn_flushes(SOFT_CAPPED, (11_149, 100), None).await, "11249 < 11250");
    assert!(second_turn_flushes(SOFT_CAPPED, (11_150, 100), None).await, "exactly 11250");
}

// The size trigger: OpenClaw's default 2 MiB; tokens far below the soft threshold.
const BY_SIZE: &str = "[compaction]\npreset = \"openclaw\"\ncontextWindow = 200000\n";
const MIB2: u64 = 2 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_of_2_mib_forces_a_flush_and_one_byte_less_does_not() {
    assert!(!second_turn_flushes(BY_SIZE, (1_000, 10), Some(MIB2 - 1)).await, "2 MiB − 1");
    assert!(second_turn_flushes(BY_SIZE, (1_000, 10), Some(MIB2)).await, "2 MiB");
    // 0 turns the size trigger off.
    let off = format!("{BY_SIZE}[compaction.memoryFlush]\nforceFlushTranscriptBytes = 0\n");
    assert!(!second_turn_flushes(&off, (1_000, 10), Some(MIB2)).await, "off");
    // A size written as OpenClaw's config writes it.
    let one_kb = format!("{BY_SIZE}[compaction.memoryFlush]\nforceFlushTranscriptBytes = \"1kb\"\n");
    assert!(!second_turn_flushes(&one_kb, (1_000, 10), Some(1_023)).await, "1kb − 1");
    assert!(second_turn_flushes(&one_kb, (1_000, 10), Some(1_024)).await, "1kb");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_trigger_runs_once_per_compaction_cycle() {
    let fake = FakeLlm::start();
    let policy = format!("{BY_SIZE}[compaction.memoryFlush]\nforceFlushTranscriptBytes = \"1kb\"\n");
    let s = setup_top(&fake, "user_timezone = \"UTC\"\n", &policy);
    fake.push(Reply::turn(Turn::text("one").usage(1_000, 10)));
    s.agent.run(message("hello")).await.unwrap();
    pad_transcript(&transcript_of(&s.root), 4_096);
    fake.push(Reply::turn(Turn::text("NO_REPLY").usage(1_000, 1)));
    fake.push(Reply::turn(Turn::text("two").usage(1_000, 1)));
    assert!(s.agent.run(message("again")).await.unwrap().memory_flushed);
    // Still above 1 KiB, same cycle: no second flush.
    fake.push(Reply::turn(Turn::text("three").usage(1_000, 1)));
    let out = s.agent.run(message("once more")).await.unwrap();
    assert!(!out.memory_flushed);
    assert_eq!(fake.pending(), 0);
    assert_eq!(sessions_json(&s.root)[KEY]["memoryFlushCompactionCount"], 0);
}

/// `[compaction.memoryFlush] model` (OpenClaw 2026.9's key) is read but not
/// honoured: the flush call goes to the `[model]` section's model, with
/// OpenClaw's own prompt and system prompt (2026.9 takes no custom ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flush_model_key_is_read_and_the_flush_sends_openclaws_prompts() {
    let fake = FakeLlm::start();
    let policy = format!("{POLICY}[compaction.memoryFlush]\nmodel = \"openai/gpt-5-mini\"\n");
    let s = setup_top(&fake, "user_timezone = \"America/New_York\"\n", &policy);
    assert_eq!(s.agent.config().flush_model(), Some("openai/gpt-5-mini"));
    assert_eq!(s.agent.config().warnings().len(), 1);
    // 77100 after the first turn: inside the soft threshold (76000).
    fake.push(Reply::turn(Turn::text("one").usage(77_000, 100)));
    fake.push(Reply::turn(Turn::text("NO_REPLY").usage(77_200, 2)));
    fake.push(Reply::turn(Turn::text("two").usage(77_300, 100)));
    s.agent.run(message("hello")).await.unwrap();
    let out = s.agent.run(message("again")).await.unwrap();
    assert!(out.memory_flushed);
    assert_eq!(fake.pending(), 0);
    let flush_call = fake.requests()[1].json();
    assert_eq!(flush_call["model"], "fake-model", "the [model] section's model, not the override");
    let messages = flush_call["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with(&format!(
            "{SYSTEM}\n\nPre-compaction memory flush turn. The session is near auto-compaction;"
        )),
        "{system}"
    );
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    let text = match &last["content"] {
        serde_json::Value::String(s) => s.clone(),
        blocks => blocks[0]["text"].as_str().unwrap().to_owned(),
    };
    assert_eq!(text, FIRST_FLUSH_PROMPT);
}
