//! Cancelling a stream, or dropping it, aborts the HTTP request: the fake
//! server sees its connection closed.

use std::time::Duration;

use futures::StreamExt;
use sessionlog_provider::{Accumulator, Api, CancellationToken, Delta, ErrorClass, Provider, StopReason};
use sessionlog_test_support::fake_llm::{Ending, FakeLlm, Reply, Turn};

use crate::common::{client, model, request, APIS};

/// A long answer that stops after four events and keeps the connection open.
fn hanging() -> Reply {
    Reply::turn(Turn::text("Once upon a time, in a land far away").ending(Ending::HangAfter(4)))
}

/// Waits for the server to see the connection closed; a generous bound
/// keeps a broken build from hanging the suite (not a timing assertion).
async fn closed(fake: &FakeLlm) {
    tokio::time::timeout(Duration::from_secs(30), fake.wait_closed(0))
        .await
        .expect("the server never saw the connection close");
}

#[tokio::test]
async fn cancelling_aborts_the_request_and_ends_as_pi_records_an_abort() {
    for api in APIS {
        let fake = FakeLlm::start();
        fake.push(hanging());
        let m = model(api, &fake);
        let cancel = CancellationToken::new();
        let mut stream = client(api, &fake).stream(&request("tell me a story"), cancel.clone());
        let mut acc = Accumulator::new(&m, 9);
        // Read up to the first text: the request is in flight.
        while let Some(delta) = stream.next().await {
            acc.push(&delta);
            if matches!(delta, Delta::TextDelta { .. }) {
                break;
            }
        }
        assert!(!fake.closed(0), "{api:?}: the response is still open before the cancel");
        cancel.cancel();
        let rest: Vec<Delta> = tokio::time::timeout(Duration::from_secs(30), stream.collect())
            .await
            .expect("the stream did not end after the cancel");
        rest.iter().for_each(|d| acc.push(d));
        assert!(
            matches!(rest.as_slice(), [Delta::Error { error }] if error.class == ErrorClass::Aborted),
            "{rest:?}"
        );
        closed(&fake).await;
        let message = acc.finish();
        assert_eq!(message.stop_reason, StopReason::Aborted);
        assert_eq!(message.error_message.as_deref(), Some("Request was aborted."));
        assert!(!message.text().is_empty(), "the text before the abort is kept");
    }
}

#[tokio::test]
async fn dropping_the_stream_aborts_the_request() {
    let fake = FakeLlm::start();
    fake.push(hanging());
    let mut stream = client(Api::OpenAiCompletions, &fake).stream(&request("hi"), CancellationToken::new());
    while let Some(delta) = stream.next().await {
        if matches!(delta, Delta::TextDelta { .. }) {
            break;
        }
    }
    assert!(!fake.closed(0));
    drop(stream);
    closed(&fake).await;
}

#[tokio::test]
async fn cancelling_before_the_first_poll_sends_nothing() {
    let fake = FakeLlm::start();
    fake.push(hanging());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let deltas: Vec<Delta> =
        client(Api::AnthropicMessages, &fake).stream(&request("hi"), cancel).collect().await;
    assert!(matches!(deltas.as_slice(), [Delta::Error { error }] if error.class == ErrorClass::Aborted));
    assert!(fake.requests().is_empty());
}
