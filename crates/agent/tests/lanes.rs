//! Runs, aborts and queues: an abort mid-stream leaves Pi's aborted
//! assistant entry (never a torn line) and the next turn works; messages to
//! one session run one at a time in arrival order (or interrupt); two
//! sessions run in parallel.

mod support;

use std::time::Duration;

use sessionlog_agent::{AgentEvent, Message, QueueMode};
use sessionlog_provider::{CancellationToken, Delta};
use sessionlog_test_support::fake_llm::{Ending, FakeLlm, Reply, Turn};
use support::{check_requests_against_pi, lines, message, sessions_json, setup, transcript_for};

const KEY: &str = "agent:main:main";

/// A reply that streams "Hello, wor" in pieces of 5 characters and then hangs.
fn hanging() -> Reply {
    let mut turn = Turn::text("Hello, world and more").usage(50, 5);
    turn.piece = 5;
    Reply::turn(turn.ending(Ending::HangAfter(3)))
}

/// Waits for the first streamed text of a turn.
async fn first_text(events: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.recv()).await {
            Ok(Some(AgentEvent::Delta(Delta::TextDelta { text, .. }))) => return text,
            Ok(Some(_)) => {}
            other => panic!("no text streamed: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_mid_stream_leaves_pis_aborted_entry_and_the_next_turn_works() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    fake.push(hanging());
    let cancel = CancellationToken::new();
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let pending = s.agent.submit(Message {
        text: "say hello".into(),
        events: Some(tx),
        cancel: Some(cancel.clone()),
        ..Message::default()
    });
    assert_eq!(first_text(&mut events).await, "Hello");
    cancel.cancel();
    let out = pending.await.unwrap().unwrap();
    assert_eq!(out.stop_reason, Some(sessionlog_provider::StopReason::Aborted));
    // The connection was closed, not left hanging.
    tokio::time::timeout(Duration::from_secs(10), fake.wait_closed(0)).await.unwrap();
    let file = transcript_for(&s.root, KEY);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with('\n'), "no torn last line");
    let entries = lines(&file); // every line parses
    let aborted = &entries.last().unwrap()["message"];
    assert_eq!(aborted["stopReason"], "aborted");
    assert_eq!(aborted["errorMessage"], "Request was aborted.");
    // What had streamed before the abort is kept, as Pi keeps it.
    assert!(aborted["content"][0]["text"].as_str().unwrap().starts_with("Hello"), "{aborted}");
    assert_eq!(sessions_json(&s.root)[KEY]["abortedLastRun"], true);

    fake.push(Reply::turn(Turn::text("Hello again.").usage(60, 4)));
    let out = s.agent.run(message("try again")).await.unwrap();
    assert_eq!((out.reply.as_str(), out.error.as_deref()), ("Hello again.", None));
    assert_eq!(sessions_json(&s.root)[KEY]["abortedLastRun"], false);
    check_requests_against_pi(&s, &fake, &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_to_one_session_run_one_at_a_time_in_arrival_order() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    let mut slow = Turn::text("first reply").usage(10, 2);
    slow.delay = Some(Duration::from_millis(100));
    fake.push(Reply::turn(slow));
    fake.push(Reply::turn(Turn::text("second reply").usage(20, 2)));
    fake.push(Reply::turn(Turn::text("third reply").usage(30, 2)));
    // Submitted back to back while the first is still streaming.
    let a = s.agent.submit(message("one"));
    let b = s.agent.submit(message("two"));
    let c = s.agent.submit(message("three"));
    let (a, b, c) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap(), c.await.unwrap().unwrap());
    assert_eq!([a.reply, b.reply, c.reply], ["first reply", "second reply", "third reply"]);
    let file = transcript_for(&s.root, KEY);
    let texts: Vec<String> = lines(&file)[1..]
        .iter()
        .map(|e| e["message"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["one", "first reply", "two", "second reply", "three", "third reply"]);
    // The second call saw the whole first turn: it started after the first ended.
    let second = fake.requests()[1].json();
    assert_eq!(second["messages"].as_array().unwrap().len(), 4, "system, one, first reply, two");
    check_requests_against_pi(&s, &fake, &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_message_aborts_the_running_turn_then_runs() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    fake.push(hanging());
    fake.push(Reply::turn(Turn::text("done instead").usage(20, 2)));
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let first = s.agent.submit(Message { text: "long task".into(), events: Some(tx), ..Message::default() });
    first_text(&mut events).await;
    let second = s.agent.submit(Message {
        text: "stop, do this".into(),
        mode: QueueMode::Interrupt,
        ..Message::default()
    });
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.stop_reason, Some(sessionlog_provider::StopReason::Aborted));
    assert_eq!(second.await.unwrap().unwrap().reply, "done instead");
    let file = transcript_for(&s.root, KEY);
    let stops: Vec<String> = lines(&file)[1..]
        .iter()
        .map(|e| {
            e["message"]["stopReason"].as_str().unwrap_or(e["message"]["role"].as_str().unwrap()).to_owned()
        })
        .collect();
    assert_eq!(stops, ["user", "aborted", "user", "stop"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_run_in_parallel() {
    let fake = FakeLlm::start();
    let s = setup(&fake, "");
    fake.push(hanging());
    fake.push(Reply::turn(Turn::text("b is done").usage(10, 2)));
    let cancel_a = CancellationToken::new();
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let a = s.agent.submit(Message {
        key: Some("agent:main:a".into()),
        text: "a".into(),
        events: Some(tx),
        cancel: Some(cancel_a.clone()),
        ..Message::default()
    });
    first_text(&mut events).await;
    // Session a is mid-stream (and would hang forever); b completes meanwhile.
    let b = s.agent.run(Message { key: Some("agent:main:b".into()), text: "b".into(), ..Message::default() });
    let b = tokio::time::timeout(Duration::from_secs(20), b).await.expect("b waited for a").unwrap();
    assert_eq!(b.reply, "b is done");
    cancel_a.cancel();
    let a = a.await.unwrap().unwrap();
    assert_eq!(a.stop_reason, Some(sessionlog_provider::StopReason::Aborted));
    let store = sessions_json(&s.root);
    assert_ne!(store["agent:main:a"]["sessionId"], store["agent:main:b"]["sessionId"]);
    assert_eq!(lines(&transcript_for(&s.root, "agent:main:b")).len(), 3);
}
