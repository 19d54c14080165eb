//! A recorded session replays to byte-identical requests and the same
//! deltas, without a server.

use sessionlog_provider::record::{self, End, Recorder};
use sessionlog_provider::{Api, CancellationToken, Delta, ErrorClass, Provider, Recorded, Request};
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Step, Turn};

use crate::common::{client, collect, options, request, user};

/// Three calls of a session: a rate limit then an answer with a tool call,
/// the follow-up, and an overflow.
fn session_requests() -> Vec<Request> {
    let first = request("read a.txt");
    let mut second = first.clone();
    second.messages.push(serde_json::json!({"role": "assistant", "content": [
        {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "a.txt"}}],
        "api": "anthropic-messages", "provider": "fake", "model": "fake-model", "usage": {}, "stopReason": "toolUse", "timestamp": 2}));
    second
        .messages
        .push(serde_json::json!({"role": "toolResult", "toolCallId": "toolu_1", "toolName": "read",
        "content": [{"type": "text", "text": "hello"}], "isError": false, "timestamp": 3}));
    let mut third = second.clone();
    third.messages.push(user("and now everything else"));
    vec![first, second, third]
}

#[tokio::test(start_paused = true)]
async fn a_recorded_session_replays_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let fake = FakeLlm::start();
    // A rate limit until an HTTP date: the wait is read against the
    // response's `date`, so the replay, long after, waits as long.
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3);
    fake.push(Reply::rate_limit(&at.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()));
    fake.push(Reply::turn(
        Turn::new(vec![
            Step::Thinking { text: "Read it.".into(), signature: "sig".into() },
            Step::ToolCall {
                id: "toolu_1".into(),
                name: "read".into(),
                arguments: r#"{"path":"a.txt"}"#.into(),
            },
        ])
        .usage(10, 4),
    ));
    fake.push(Reply::turn(Turn::text("It says hello.").usage(20, 5)));
    fake.push(Reply::overflow());
    let live = client(Api::AnthropicMessages, &fake).recording(Recorder::create(&path).unwrap());
    let m = live.model().clone();
    let mut recorded_deltas = Vec::new();
    for r in session_requests() {
        recorded_deltas.push(collect(live.stream(&r, CancellationToken::new())).await);
    }
    drop(live);
    assert!(
        matches!(recorded_deltas[0][0], Delta::Retry { delay_ms, .. } if delay_ms >= 1000),
        "{:?}",
        recorded_deltas[0][0]
    );
    assert!(
        matches!(recorded_deltas[2].last(), Some(Delta::Error { error }) if error.class == ErrorClass::ContextOverflow)
    );

    // The recording holds what crossed the wire: every request body the
    // server received, in order, and no key.
    let exchanges = record::read(&path).unwrap();
    let received = fake.requests();
    assert_eq!(exchanges.len(), 4);
    assert_eq!(received.len(), 4);
    for (exchange, seen) in exchanges.iter().zip(&received) {
        assert_eq!(exchange.request.body.bytes(), seen.body);
        assert_eq!(exchange.end, Some(End::Eof));
        let key = exchange.request.headers.iter().find(|(k, _)| k == "x-api-key").map(|(_, v)| v.as_str());
        assert_eq!(key, Some("<redacted>"));
    }
    assert!(!std::fs::read_to_string(&path).unwrap().contains("sk-test"));
    drop(fake);

    // Replayed with no server at all, and no key.
    let replay =
        Recorded::open(&path, m, sessionlog_provider::ClientOptions { api_key: None, ..options() }).unwrap();
    for (r, expected) in session_requests().iter().zip(&recorded_deltas) {
        assert_eq!(&collect(replay.stream(r, CancellationToken::new())).await, expected);
    }
    assert_eq!(replay.remaining(), 0);
}

#[tokio::test]
async fn a_different_request_does_not_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.jsonl");
    let fake = FakeLlm::start();
    fake.push(Reply::turn(Turn::text("hi")));
    let live = client(Api::OpenAiCompletions, &fake).recording(Recorder::create(&path).unwrap());
    collect(live.stream(&request("hello"), CancellationToken::new())).await;
    let replay = Recorded::open(&path, live.model().clone(), options()).unwrap();
    let deltas = collect(replay.stream(&request("hellO"), CancellationToken::new())).await;
    match deltas.as_slice() {
        [Delta::Error { error }] => {
            assert_eq!(error.class, ErrorClass::Fatal);
            assert!(error.message.contains("request 1: body differs at byte"), "{}", error.message);
        }
        other => panic!("{other:?}"),
    }
}
