//! The turn against the fake model server: a tool round trip, threshold
//! compaction over several turns, overflow recovery. After each, Pi's own
//! code (the oracle) opens the transcript the loop wrote and, at the leaf
//! each model call was made from, builds the messages that call sent —
//! byte for byte, through the provider's request encoding — and the
//! context document of the whole session equals ours.

mod support;

use serde_json::Value;
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use support::{
    check_call_against_pi, check_requests_against_pi, lines, loop_requests, message, sessions_json, setup,
    setup_with, transcript_of,
};

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
    // OpenClaw 2026.9 on a 30000-token window: a reserve of min(max(16384,
    // 20000), ⌊30000/4⌋) = 7500, so compaction above 22500 context tokens
    // (the memory flush's 18500 is never reached at the start of a turn on
    // fresh counters).
    let s =
        setup(&fake, "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nkeepRecentTokens = 10\n");
    let usages = [(5_000, 100), (12_000, 100), (22_500, 100), (3_000, 100)];
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
    // 5100 and 12100 stay under 22500; 22600 crosses it; the fourth turn
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
    assert_eq!(compaction["tokensBefore"].as_f64(), Some(22_600.0));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threshold_compaction_with_the_model_summariser_talks_to_the_model() {
    let fake = FakeLlm::start();
    let s = setup_with(
        &fake,
        "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nkeepRecentTokens = 10\nsummarizer = \"model\"\n",
        true,
    );
    fake.push(Reply::turn(Turn::text("answer 0 about deploy-7f3a9c2").usage(5_000, 100)));
    // 22600 is above the 22500 the preset compacts at on a 30000 window.
    fake.push(Reply::turn(Turn::text("answer 1").usage(22_500, 100)));
    // The summariser's call, answered by the model.
    let summary = "## Decisions\nDeploy build deploy-7f3a9c2.\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n## Pending user asks\nNone.\n\n## Exact identifiers\ndeploy-7f3a9c2";
    fake.push(Reply::turn(Turn::text(summary).usage(400, 60)));
    fake.push(Reply::turn(Turn::text("answer 2").usage(2_000, 100)));
    let mut compactions = Vec::new();
    for i in 0..3 {
        let out = s.agent.run(message(&format!("question {i} please"))).await.unwrap();
        assert_eq!(out.error, None);
        compactions.push(out.compactions);
    }
    assert_eq!(compactions, [0, 1, 0]);
    assert_eq!(fake.pending(), 0, "every scripted reply was asked for");
    assert_eq!((fake.requests().len(), loop_requests(&fake).len()), (4, 3), "one summariser call");
    let file = transcript_of(&s.root);
    let compaction = lines(&file).into_iter().find(|e| e["type"] == "compaction").unwrap();
    // keepRecentTokens 10 cuts inside the first turn (at its answer): the
    // model summarised the turn's prefix, and its text is the split-turn context.
    let text = compaction["summary"].as_str().unwrap();
    assert!(
        text.contains("**Turn Context (split turn):**\n\n## Decisions\nDeploy build deploy-7f3a9c2."),
        "{text}"
    );
    let asked = String::from_utf8_lossy(&fake.requests()[2].body).into_owned();
    assert!(asked.contains("question 0 please"), "{asked}");
    check_requests_against_pi(&s, &fake, &file);
}

/// 1000 lines of 45 characters: 45000 characters, under the read tool's
/// 50 KB / 2000 lines but over OpenClaw's cap on one tool result for the
/// fake model's 128000-token window (30% x 4 chars/token = 153600, capped
/// at 32000 characters).
fn write_build_log(root: &std::path::Path) {
    let line = format!("{:<44}\n", "log line of the nightly build, all fine");
    std::fs::write(root.join("work/build.log"), line.repeat(1_000)).unwrap();
}

/// The text of the `tool` message in a request body.
fn tool_text(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    messages.iter().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str()).map(str::to_owned)
}

/// The cut text as spec compaction §3.9 describes it for this log: the tail
/// has no important words, so the head only, snapped back to a line end
/// within the last 20% of 32000 characters, then the notice.
fn assert_cut_as_openclaw_cuts(cut: &str) {
    let head = cut.split("\n\n[Tool result truncated").next().unwrap();
    let n = head.chars().count();
    assert!((25_600..=32_000).contains(&n), "{n}");
    assert_eq!((n + 1) % 45, 0, "ends at a line end");
    assert_eq!(n, 31_994, "711 whole lines (31995 chars) less the final newline");
    assert!(!cut.contains("middle omitted"));
    assert!(
        cut.ends_with(&format!(
            "\n\n[Tool result truncated: {} characters removed to fit the context window]",
            45_000 - n
        )),
        "{}",
        &cut[cut.len() - 120..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_after_three_compactions_truncates_the_huge_tool_result_and_retries() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "[compaction]\nkeepRecentTokens = 50\n");
    write_build_log(&s.root);
    fake.push(Reply::turn(Turn::text("ok").usage(100, 10)));
    fake.push(Reply::turn(Turn::tool_call("call_1", "read", r#"{"path":"build.log"}"#).usage(200, 10)));
    // The call after the tool result overflows, and again after each of
    // OpenClaw's three compactions; the retry after the truncation succeeds.
    for _ in 0..4 {
        fake.push(Reply::overflow());
    }
    fake.push(Reply::turn(Turn::text("the build was fine").usage(9_000, 10)));
    s.agent.run(message("hello")).await.unwrap();
    let out = s.agent.run(message("read build.log")).await.unwrap();
    assert_eq!((out.error.as_deref(), out.reply.as_str()), (None, "the build was fine"));
    assert_eq!((out.compactions, out.truncated_tool_results, out.model_calls), (3, 1, 6));
    let requests = fake.requests();
    assert_eq!(requests.len(), 7);
    assert_eq!(tool_text(&requests[2].json()).unwrap().chars().count(), 45_000);
    // The log stays append-only: the whole result is still in the file; the
    // cut copy is on a branch from the tool call, with the rest of the path
    // (errors and compactions) re-appended after it, and is the current path.
    let file = transcript_of(&s.root);
    let entries = lines(&file);
    let results: Vec<&Value> = entries.iter().filter(|e| e["message"]["role"] == "toolResult").collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["message"]["content"][0]["text"].as_str().unwrap().len(), 45_000);
    assert_eq!(results[1]["parentId"], results[0]["parentId"], "a branch at the tool call");
    assert_eq!(results[1]["message"]["toolCallId"], "call_1");
    assert_cut_as_openclaw_cuts(results[1]["message"]["content"][0]["text"].as_str().unwrap());
    let kinds = |from: usize| -> Vec<String> {
        entries[from..]
            .iter()
            .map(|e| e["message"]["role"].as_str().unwrap_or(e["type"].as_str().unwrap()).to_owned())
            .collect()
    };
    let first = entries.iter().position(|e| e["message"]["role"] == "toolResult").unwrap();
    let second = entries.iter().rposition(|e| e["message"]["role"] == "toolResult").unwrap();
    let mut copied = kinds(first);
    copied.truncate(second - first);
    let mut again = kinds(second);
    assert_eq!(again.pop().as_deref(), Some("assistant"), "the retry's reply");
    assert_eq!(copied, again);
    // Pi, at the leaf the retry was made from, builds the request we sent.
    let last = entries.last().unwrap();
    check_call_against_pi(&s, &requests[6].body, &file, last["parentId"].as_str().unwrap(), "the retry");
}
