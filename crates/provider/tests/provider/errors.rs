//! Each error class, on the providers' real error bodies, with the retry
//! behaviour it calls for. Time is tokio's paused clock: backoff and
//! `retry-after` waits pass instantly but are measured.

use std::time::Duration;

use sessionlog_provider::{
    complete, Accumulator, Api, CancellationToken, Delta, ErrorClass, Provider, RetryPolicy, StopReason,
};
use sessionlog_test_support::fake_llm::{Ending, FakeLlm, Reply, Turn};

use crate::common::{client, client_with, collect, model, options, request, APIS};

fn retries(deltas: &[Delta]) -> Vec<(u32, u64, ErrorClass)> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Retry { attempt, delay_ms, error } => Some((*attempt, *delay_ms, error.class)),
            _ => None,
        })
        .collect()
}

fn last_error(deltas: &[Delta]) -> sessionlog_provider::ProviderError {
    match deltas.last() {
        Some(Delta::Error { error }) => error.clone(),
        other => panic!("expected an error delta, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn context_overflow_is_recognised_and_never_retried() {
    for api in APIS {
        let fake = FakeLlm::start();
        fake.push(Reply::overflow());
        let message = complete(&client(api, &fake), &request("x"), CancellationToken::new(), 7).await;
        let expected = match api {
            Api::AnthropicMessages => r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#,
            Api::OpenAiCompletions => "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
        };
        assert_eq!(message.error_message.as_deref(), Some(expected), "{api:?}");
        assert_eq!(message.stop_reason, StopReason::Error);
        let error = message.error.clone().unwrap();
        assert_eq!(error.class, ErrorClass::ContextOverflow, "{api:?}");
        assert_eq!(error.status, Some(400));
        assert!(error.observed_prompt_tokens().is_some());
        assert_eq!(fake.requests().len(), 1, "{api:?}: an overflow is not retried");
        // Pi's persisted shape for a failed call: no content, zero usage.
        let json = message_json(&message);
        assert_eq!(json["content"], serde_json::json!([]));
        assert_eq!(json["usage"]["totalTokens"], 0);
    }
}

fn message_json(m: &sessionlog_provider::AssistantMessage) -> serde_json::Value {
    m.to_json()
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_waits_as_long_as_retry_after_says() {
    for api in APIS {
        let fake = FakeLlm::start();
        fake.push(Reply::rate_limit("7"));
        fake.push(Reply::turn(Turn::text("done")));
        let started = tokio::time::Instant::now();
        let deltas = collect(client(api, &fake).stream(&request("x"), CancellationToken::new())).await;
        let waited = started.elapsed();
        assert_eq!(retries(&deltas), vec![(1, 7000, ErrorClass::RateLimit)], "{api:?}");
        assert!(
            waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
            "{api:?}: waited {waited:?}"
        );
        assert_eq!(deltas.last(), Some(&Delta::Stop { reason: StopReason::Stop }));
        assert_eq!(fake.requests().len(), 2);
        assert_eq!(fake.requests()[0].body, fake.requests()[1].body, "the retry sends the same bytes");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_ms_and_http_dates_are_honoured() {
    let fake = FakeLlm::start();
    // Both headers: the larger wait wins.
    fake.push(Reply::rate_limit("1").header("retry-after-ms", "2500"));
    fake.push(Reply::turn(Turn::text("ok")));
    let deltas =
        collect(client(Api::OpenAiCompletions, &fake).stream(&request("x"), CancellationToken::new())).await;
    assert_eq!(retries(&deltas), vec![(1, 2500, ErrorClass::RateLimit)]);

    // An HTTP date 30 s ahead of the wall clock (whole seconds, so 29–30 s).
    let fake = FakeLlm::start();
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(30);
    let date = at.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    fake.push(Reply::rate_limit(&date));
    fake.push(Reply::turn(Turn::text("ok")));
    let started = tokio::time::Instant::now();
    let deltas =
        collect(client(Api::AnthropicMessages, &fake).stream(&request("x"), CancellationToken::new())).await;
    let waits = retries(&deltas);
    assert_eq!(waits.len(), 1);
    assert!((28_000..=30_000).contains(&waits[0].1), "{date}: {waits:?}");
    assert!(started.elapsed() >= Duration::from_millis(waits[0].1));
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_limit_is_returned_not_slept() {
    let fake = FakeLlm::start();
    fake.push(Reply::rate_limit("3600"));
    let started = tokio::time::Instant::now();
    let deltas =
        collect(client(Api::AnthropicMessages, &fake).stream(&request("x"), CancellationToken::new())).await;
    assert!(retries(&deltas).is_empty());
    let error = last_error(&deltas);
    assert_eq!(
        (error.class, error.status, error.retry_after_ms),
        (ErrorClass::RateLimit, Some(429), Some(3_600_000))
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn overload_backs_off_exponentially_with_seeded_jitter() {
    let run = || async {
        let fake = FakeLlm::start();
        fake.push(Reply::overloaded());
        fake.push(Reply::overloaded());
        fake.push(Reply::turn(Turn::text("ok")));
        let started = tokio::time::Instant::now();
        let deltas =
            collect(client(Api::AnthropicMessages, &fake).stream(&request("x"), CancellationToken::new()))
                .await;
        (retries(&deltas), started.elapsed(), deltas.last().cloned(), fake.requests().len())
    };
    let (waits, elapsed, last, requests) = run().await;
    assert_eq!(requests, 3);
    assert_eq!(last, Some(Delta::Stop { reason: StopReason::Stop }));
    assert_eq!(waits.len(), 2);
    // 0.5 s then 1 s, each shortened by at most a quarter.
    assert_eq!((waits[0].0, waits[0].2), (1, ErrorClass::Transient));
    assert!((375..=500).contains(&waits[0].1), "{waits:?}");
    assert!((750..=1000).contains(&waits[1].1), "{waits:?}");
    assert!(elapsed >= Duration::from_millis(waits[0].1 + waits[1].1));
    // The same seed draws the same jitter.
    assert_eq!(run().await.0, waits);
}

#[tokio::test(start_paused = true)]
async fn transient_errors_give_up_after_the_attempt_limit() {
    let fake = FakeLlm::start();
    for _ in 0..4 {
        fake.push(Reply::Status { status: 503, headers: vec![], body: "upstream connect error".into() });
    }
    let deltas =
        collect(client(Api::OpenAiCompletions, &fake).stream(&request("x"), CancellationToken::new())).await;
    assert_eq!(retries(&deltas).len(), 2);
    let error = last_error(&deltas);
    assert_eq!((error.class, error.status), (ErrorClass::Transient, Some(503)));
    assert_eq!(error.message, "503 upstream connect error");
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(fake.pending(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_server_can_forbid_a_retry() {
    let fake = FakeLlm::start();
    fake.push(Reply::overloaded().header("x-should-retry", "false"));
    let deltas =
        collect(client(Api::AnthropicMessages, &fake).stream(&request("x"), CancellationToken::new())).await;
    assert!(retries(&deltas).is_empty());
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn auth_and_bad_requests_are_fatal() {
    let fake = FakeLlm::start();
    fake.push(Reply::auth());
    fake.push(Reply::Status {
        status: 400,
        headers: vec![],
        body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."}}"#.into(),
    });
    let anthropic = client(Api::AnthropicMessages, &fake);
    let first = collect(anthropic.stream(&request("x"), CancellationToken::new())).await;
    let second = collect(anthropic.stream(&request("x"), CancellationToken::new())).await;
    let (a, b) = (last_error(&first), last_error(&second));
    assert_eq!((a.class, a.status), (ErrorClass::Fatal, Some(401)));
    assert_eq!(
        a.message,
        r#"401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
    );
    assert_eq!((b.class, b.status), (ErrorClass::Fatal, Some(400)));
    assert_eq!(fake.requests().len(), 2, "neither is retried");
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_transient() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut m = sessionlog_provider::Model::new(
        Api::OpenAiCompletions,
        "fake",
        "m",
        &format!("http://127.0.0.1:{port}/v1"),
    );
    m.max_tokens = 10;
    let options = sessionlog_provider::ClientOptions {
        retry: RetryPolicy { seed: 3, ..RetryPolicy::default() },
        ..options()
    };
    let deltas = collect(client_with(m, options).stream(&request("x"), CancellationToken::new())).await;
    assert_eq!(retries(&deltas).len(), 2);
    let error = last_error(&deltas);
    assert_eq!((error.class, error.message.as_str()), (ErrorClass::Transient, "Connection error."));
}

#[tokio::test]
async fn an_error_event_mid_stream_keeps_the_content_and_is_not_retried() {
    let fake = FakeLlm::start();
    // message_start, ping, block start, two text deltas, then the error.
    fake.push(Reply::turn(Turn::text("Partial answer").ending(Ending::ErrorAfter(5, "Overloaded".into()))));
    let m = model(Api::AnthropicMessages, &fake);
    let deltas =
        collect(client_with(m.clone(), options()).stream(&request("x"), CancellationToken::new())).await;
    let mut acc = Accumulator::new(&m, 5);
    deltas.iter().for_each(|d| acc.push(d));
    let message = acc.finish();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "Partial answer");
    assert_eq!(
        message.error_message.as_deref(),
        Some(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
    );
    assert_eq!(message.error.unwrap().class, ErrorClass::Transient);
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_short_is_an_error_that_keeps_the_partial_call() {
    let fake = FakeLlm::start();
    let mut turn = Turn::tool_call("toolu_9", "write", r#"{"path":"a.txt","content":"hello"}"#);
    turn.piece = 10;
    // message_start, ping, block start, two argument pieces; then the body ends.
    fake.push(Reply::turn(turn.ending(Ending::CutAfter(5))));
    let m = model(Api::AnthropicMessages, &fake);
    let message = complete(&client_with(m, options()), &request("x"), CancellationToken::new(), 5).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some("Anthropic stream ended before message_stop"));
    assert_eq!(message.error.as_ref().unwrap().class, ErrorClass::Transient);
    // As Pi leaves an interrupted call: the arguments read so far, and the
    // raw text under `partialJson`.
    assert_eq!(
        message.to_json()["content"],
        serde_json::json!([{"type": "toolCall", "id": "toolu_9", "name": "write",
            "arguments": {"path": "a.txt"}, "partialJson": "{\"path\":\"a.txt\",\"con"}])
    );
}
