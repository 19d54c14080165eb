//! The pre-compaction memory flush (OpenClaw, spec compaction §6): a
//! silent turn once the context is within the soft threshold, once per
//! compaction cycle, `NO_REPLY` suppressed, recorded as `memoryFlushAt`,
//! and never for a read-only workspace.

mod support;

use sessionlog_agent::AgentEvent;
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use support::{lines, loop_requests, message, sessions_json, setup, transcript_of, SYSTEM};

// openclaw preset on a 30000 window: reserve max(16384, floor 20000) = 20000,
// so compaction above 10000 tokens; the flush at 30000 − 20000 − 4000 = 6000.
const POLICY: &str = "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nkeepRecentTokens = 10\n";
const KEY: &str = "agent:main:main";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flush_runs_once_per_compaction_cycle_and_is_silent() {
    let fake = FakeLlm::start();
    let s = setup(&fake, POLICY);
    // Turn 1: 3100 tokens, no flush.
    fake.push(Reply::turn(Turn::text("one").usage(3_000, 100)));
    // Turn 2: 7100 ≥ 6000: the flush turn follows, writes its notes, says NO_REPLY.
    fake.push(Reply::turn(Turn::text("two").usage(7_000, 100)));
    fake.push(Reply::turn(
        Turn::tool_call("f1", "write", r#"{"path":"memory/2026-12-01.md","content":"- prefers tabs\n"}"#)
            .usage(7_200, 30),
    ));
    fake.push(Reply::turn(Turn::text("NO_REPLY").usage(7_300, 2)));
    // Turn 3: 8100, same cycle: no second flush.
    fake.push(Reply::turn(Turn::text("three").usage(8_000, 100)));
    // Turn 4: 12100 > 10000: compaction (no flush: this cycle already flushed).
    fake.push(Reply::turn(Turn::text("four").usage(12_000, 100)));
    // Turn 5: 7100 in the new cycle: the flush runs again.
    fake.push(Reply::turn(Turn::text("five").usage(7_000, 100)));
    fake.push(Reply::turn(Turn::text("Noted the deadline.").usage(7_100, 5)));
    let mut flushed = Vec::new();
    let mut compactions = Vec::new();
    for i in 1..=5 {
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let out = s
            .agent
            .run(sessionlog_agent::Message { events: Some(tx), ..message(&format!("message {i}")) })
            .await
            .unwrap();
        assert_eq!(out.error, None);
        flushed.push(out.memory_flushed);
        compactions.push(out.compactions);
        let mut replies = Vec::new();
        while let Ok(event) = events.try_recv() {
            if let AgentEvent::MemoryFlush { reply } = event {
                replies.push(reply);
            }
            // The flush streams nothing to the caller.
        }
        match i {
            2 => assert_eq!(replies, [None], "NO_REPLY is suppressed"),
            5 => assert_eq!(replies, [Some("Noted the deadline.".to_owned())]),
            _ => assert!(replies.is_empty()),
        }
        // The visible reply is the turn's, never the flush's.
        assert_eq!(out.reply, ["one", "two", "three", "four", "five"][i - 1]);
    }
    assert_eq!(flushed, [false, true, false, false, true]);
    assert_eq!(compactions, [0, 0, 0, 1, 0]);
    assert_eq!(fake.pending(), 0);
    assert_eq!(
        std::fs::read_to_string(s.root.join("work/memory/2026-12-01.md")).unwrap(),
        "- prefers tabs\n"
    );
    let store = &sessions_json(&s.root)[KEY];
    assert_eq!(store["compactionCount"], 1);
    assert_eq!(store["memoryFlushCompactionCount"], 1, "the second flush belongs to cycle 1");
    assert!(store["memoryFlushAt"].as_i64().is_some());
    // The flush turn is in the transcript with OpenClaw's prompt, and its
    // call carried the flush system prompt after ours.
    let file = transcript_of(&s.root);
    let prompts: Vec<String> = lines(&file)
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| e["message"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(prompts.len(), 7);
    assert_eq!(
        prompts[2],
        "Pre-compaction memory flush. Store durable memories now (use memory/2026-12-01.md; create memory/ if needed). If nothing to store, reply with NO_REPLY."
    );
    let flush_call = fake.requests()[2].json();
    let system = flush_call["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.starts_with(SYSTEM) && system.ends_with("usually NO_REPLY is correct."), "{system}");
    // Only the loop's own system prompt marks the loop's requests; the flush calls carry more.
    assert_eq!(loop_requests(&fake).len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_workspace_never_flushes() {
    let fake = FakeLlm::start();
    let s = support::setup_top(&fake, "read_only_workspace = true\n", POLICY);
    fake.push(Reply::turn(Turn::text("two").usage(7_000, 100)));
    let out = s.agent.run(message("hello")).await.unwrap();
    // 7100 is inside the soft threshold, but the workspace cannot be written.
    assert!(!out.memory_flushed);
    assert_eq!(fake.requests().len(), 1);
    assert!(sessions_json(&s.root)[KEY].get("memoryFlushAt").is_none());
}
