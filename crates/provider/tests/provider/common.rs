//! Helpers shared by the tests.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};
use sessionlog_provider::sse::SseParser;
use sessionlog_provider::transport::Reqwest;
use sessionlog_provider::{anthropic, openai};
use sessionlog_provider::{
    Api, ClientOptions, Delta, DeltaStream, HttpProvider, Model, Request, RetryPolicy,
};
use sessionlog_test_support::fake_llm::{FakeLlm, WireApi};

pub const APIS: [Api; 2] = [Api::OpenAiCompletions, Api::AnthropicMessages];

pub fn wire(api: Api) -> WireApi {
    match api {
        Api::OpenAiCompletions => WireApi::OpenAi,
        Api::AnthropicMessages => WireApi::Anthropic,
    }
}

pub fn model(api: Api, fake: &FakeLlm) -> Model {
    let base = match api {
        Api::OpenAiCompletions => fake.openai_base_url(),
        Api::AnthropicMessages => fake.anthropic_base_url(),
    };
    Model::new(api, "fake", "fake-model", &base)
}

/// Options for tests: a key, seeded jitter, no timeouts (a paused clock
/// would fire them while the loopback answer is on its way).
pub fn options() -> ClientOptions {
    ClientOptions {
        api_key: Some("sk-test".into()),
        retry: RetryPolicy { seed: 1, ..RetryPolicy::default() },
        connect_timeout: None,
        read_timeout: None,
    }
}

/// A client without an idle-connection pool, so no timer of its own runs
/// while a paused clock waits on the loopback server.
pub fn client_with(model: Model, options: ClientOptions) -> HttpProvider {
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    HttpProvider::with_transport(model, options, Arc::new(Reqwest::from_client(http, None)))
}

pub fn client(api: Api, fake: &FakeLlm) -> HttpProvider {
    client_with(model(api, fake), options())
}

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

pub fn request(text: &str) -> Request {
    Request { messages: vec![user(text)], ..Request::default() }
}

pub async fn collect(stream: DeltaStream) -> Vec<Delta> {
    stream.collect().await
}

/// The deltas of a response body delivered in `chunks`, without a network.
pub fn decode(api: Api, chunks: &[&[u8]]) -> Vec<Delta> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut oa = openai::Decoder::new();
    let mut an = anthropic::Decoder::new();
    let mut step = |events: &mut Vec<_>, out: &mut Vec<Delta>| -> bool {
        for event in events.drain(..) {
            let result = match api {
                Api::OpenAiCompletions => oa.event(&event, out),
                Api::AnthropicMessages => an.event(&event, out),
            };
            if let Err(error) = result {
                out.push(Delta::Error { error });
                return false;
            }
        }
        true
    };
    for chunk in chunks {
        parser.push(chunk, &mut events);
        if !step(&mut events, &mut out) {
            return out;
        }
    }
    let finished = match api {
        Api::OpenAiCompletions => oa.finish(&mut out),
        Api::AnthropicMessages => an.finish(&mut out),
    };
    if let Err(error) = finished {
        out.push(Delta::Error { error });
    }
    out
}
