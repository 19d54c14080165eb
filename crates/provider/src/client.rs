//! The [`Provider`] trait and its implementations: [`HttpProvider`] (both
//! APIs over any [`Transport`]), [`Recorded`] (a recording replayed) and
//! [`Scripted`] (deltas from a list, for tests of the code above).

use std::collections::VecDeque;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::delta::Delta;
use crate::error::{classify_status, http_error_message, ErrorClass, ProviderError};
use crate::message::{Accumulator, AssistantMessage};
use crate::model::{Api, Model, Request};
use crate::record::{self, RecordError, Recorder, Recording, Replay};
use crate::retry::{http_date, retry_after, RetryPolicy};
use crate::sse::SseParser;
use crate::transport::{BuildError, HttpRequest, Reqwest, Transport, TransportError};
use crate::{anthropic, openai};

/// A stream of deltas; it ends after its terminal delta.
pub type DeltaStream = Pin<Box<dyn Stream<Item = Delta> + Send>>;

/// A model the agent loop and the summariser talk to.
///
/// `stream` returns at once; the request starts when the stream is first
/// polled. Dropping the stream, or cancelling `cancel`, aborts the request
/// (the connection is closed); a cancelled stream ends with an
/// [`ErrorClass::Aborted`] error delta.
pub trait Provider: Send + Sync {
    /// The model this provider calls.
    fn model(&self) -> &Model;

    /// Streams the model's answer to `request`.
    fn stream(&self, request: &Request, cancel: CancellationToken) -> DeltaStream;
}

/// Runs a whole call and returns the message Pi would persist, stamped
/// `timestamp` (ms).
pub async fn complete(
    provider: &dyn Provider,
    request: &Request,
    cancel: CancellationToken,
    timestamp: i64,
) -> AssistantMessage {
    let mut acc = Accumulator::new(provider.model(), timestamp);
    let mut stream = provider.stream(request, cancel);
    while let Some(delta) = stream.next().await {
        acc.push(&delta);
    }
    acc.finish()
}

/// How an [`HttpProvider`] connects and retries.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOptions {
    /// The API key (`Authorization: Bearer` for OpenAI, `x-api-key` for
    /// Anthropic); none is sent when `None` (a loopback server).
    pub api_key: Option<String>,
    /// Retries of failed attempts.
    pub retry: RetryPolicy,
    /// The connect timeout.
    pub connect_timeout: Option<Duration>,
    /// The longest silence while waiting for response bytes.
    pub read_timeout: Option<Duration>,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            api_key: None,
            retry: RetryPolicy::default(),
            connect_timeout: Some(Duration::from_secs(30)),
            read_timeout: Some(Duration::from_secs(600)),
        }
    }
}

/// A streaming client for a model's API over a [`Transport`].
///
/// Failed attempts are retried by the [`RetryPolicy`] while nothing has
/// been streamed yet (an error status, a refused connection); once content
/// has arrived an error ends the stream, as the providers' SDKs do.
#[derive(Clone)]
pub struct HttpProvider {
    model: Model,
    options: ClientOptions,
    transport: Arc<dyn Transport>,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider")
            .field("model", &self.model)
            .field("retry", &self.options.retry)
            .finish()
    }
}

impl HttpProvider {
    /// A client for `model` over the network.
    pub fn new(model: Model, options: ClientOptions) -> Result<HttpProvider, BuildError> {
        let transport = Reqwest::new(options.connect_timeout, options.read_timeout)?;
        Ok(HttpProvider::with_transport(model, options, Arc::new(transport)))
    }

    /// A client for `model` over `transport`.
    pub fn with_transport(
        model: Model,
        options: ClientOptions,
        transport: Arc<dyn Transport>,
    ) -> HttpProvider {
        HttpProvider { model, options, transport }
    }

    /// The same client, recording every exchange with `recorder`.
    pub fn recording(self, recorder: Recorder) -> HttpProvider {
        let transport = Arc::new(Recording::new(self.transport.clone(), recorder));
        HttpProvider { transport, ..self }
    }

    /// The exact HTTP request this client sends for `request`.
    pub fn http_request(&self, request: &Request) -> HttpRequest {
        build_request(&self.model, self.options.api_key.as_deref(), request)
    }
}

/// The HTTP request for `request` to `model`: URL, headers and the JSON
/// body, printed as `JSON.stringify` prints it.
pub fn build_request(model: &Model, api_key: Option<&str>, request: &Request) -> HttpRequest {
    let (url, headers, body) = match model.api {
        Api::OpenAiCompletions => {
            (openai::endpoint(model), openai::headers(model, api_key), openai::body(model, request))
        }
        Api::AnthropicMessages => {
            (anthropic::endpoint(model), anthropic::headers(model, api_key), anthropic::body(model, request))
        }
    };
    let body = sessionlog_events::json::to_js_string(&body).unwrap_or_default().into_bytes();
    HttpRequest { url, headers, body }
}

enum Decoder {
    OpenAi(openai::Decoder),
    Anthropic(anthropic::Decoder),
}

impl Decoder {
    fn new(api: Api) -> Decoder {
        match api {
            Api::OpenAiCompletions => Decoder::OpenAi(openai::Decoder::new()),
            Api::AnthropicMessages => Decoder::Anthropic(anthropic::Decoder::new()),
        }
    }

    fn event(&mut self, event: &crate::sse::SseEvent, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        match self {
            Decoder::OpenAi(d) => d.event(event, out),
            Decoder::Anthropic(d) => d.event(event, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        match self {
            Decoder::OpenAi(d) => d.finish(out),
            Decoder::Anthropic(d) => d.finish(out),
        }
    }

    fn is_done(&self) -> bool {
        match self {
            Decoder::OpenAi(d) => d.is_done(),
            Decoder::Anthropic(d) => d.is_done(),
        }
    }
}

fn transport_error(error: &TransportError) -> ProviderError {
    match error {
        TransportError::Aborted => ProviderError::aborted(),
        TransportError::Replay(_) => ProviderError::new(ErrorClass::Fatal, None, error.to_string()),
        _ => ProviderError::new(ErrorClass::Transient, None, error.to_string()),
    }
}

/// The largest error body read (the rest is dropped).
const MAX_ERROR_BODY: usize = 1 << 20;

impl Provider for HttpProvider {
    fn model(&self) -> &Model {
        &self.model
    }

    fn stream(&self, request: &Request, cancel: CancellationToken) -> DeltaStream {
        let http = self.http_request(request);
        let transport = self.transport.clone();
        let policy = self.options.retry;
        let api = self.model.api;
        Box::pin(async_stream::stream! {
            let mut jitter = policy.rng();
            let mut attempt = 1u32;
            loop {
                let sent = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        yield Delta::Error { error: ProviderError::aborted() };
                        return;
                    }
                    sent = transport.send(http.clone()) => sent,
                };
                let (error, wait) = match sent {
                    Err(error) => (transport_error(&error), None),
                    Ok(mut response) if !(200..300).contains(&response.status) => {
                        let mut body = Vec::new();
                        loop {
                            let next = tokio::select! {
                                biased;
                                _ = cancel.cancelled() => {
                                    yield Delta::Error { error: ProviderError::aborted() };
                                    return;
                                }
                                next = response.body.next() => next,
                            };
                            match next {
                                Some(Ok(bytes)) if body.len() < MAX_ERROR_BODY => body.extend_from_slice(&bytes),
                                Some(Ok(_)) => {}
                                Some(Err(TransportError::Aborted)) => {
                                    yield Delta::Error { error: ProviderError::aborted() };
                                    return;
                                }
                                Some(Err(_)) | None => break,
                            }
                        }
                        let status = response.status;
                        let message = http_error_message(api, status, &body);
                        let mut error = ProviderError::new(classify_status(status, &message), Some(status), message);
                        // An HTTP-date `retry-after` is read against the
                        // response's own `date` (the server's clock; the same
                        // on a replay), else the local clock.
                        let now = response
                            .headers
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("date"))
                            .and_then(|(_, v)| http_date(v.trim()))
                            .unwrap_or_else(SystemTime::now);
                        let wait = retry_after(&response.headers, now);
                        error.retry_after_ms = wait.map(|w| w.as_millis().min(u64::MAX as u128) as u64);
                        error.should_retry = response
                            .headers
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case("x-should-retry"))
                            .and_then(|(_, v)| match v.trim() {
                                "true" => Some(true),
                                "false" => Some(false),
                                _ => None,
                            });
                        (error, wait)
                    }
                    Ok(mut response) => {
                        yield Delta::Start;
                        let mut parser = SseParser::new();
                        let mut decoder = Decoder::new(api);
                        let mut events = Vec::new();
                        let mut out = Vec::new();
                        loop {
                            let next = tokio::select! {
                                biased;
                                _ = cancel.cancelled() => {
                                    yield Delta::Error { error: ProviderError::aborted() };
                                    return;
                                }
                                next = response.body.next() => next,
                            };
                            let failed = match next {
                                Some(Ok(bytes)) => {
                                    if decoder.is_done() {
                                        continue;
                                    }
                                    parser.push(&bytes, &mut events);
                                    let mut failed = None;
                                    for event in events.drain(..) {
                                        if let Err(error) = decoder.event(&event, &mut out) {
                                            failed = Some(error);
                                            break;
                                        }
                                    }
                                    failed
                                }
                                Some(Err(error)) => {
                                    if decoder.is_done() {
                                        return;
                                    }
                                    Some(transport_error(&error))
                                }
                                None => {
                                    let failed = decoder.finish(&mut out).err();
                                    for delta in out.drain(..) {
                                        yield delta;
                                    }
                                    if let Some(error) = failed {
                                        yield Delta::Error { error };
                                    }
                                    return;
                                }
                            };
                            for delta in out.drain(..) {
                                yield delta;
                            }
                            if let Some(error) = failed {
                                yield Delta::Error { error };
                                return;
                            }
                        }
                    }
                };
                if error.is_retryable() && attempt < policy.max_attempts {
                    if let Some(delay) = policy.delay(attempt, wait, &mut jitter) {
                        yield Delta::Retry {
                            attempt,
                            delay_ms: delay.as_millis().min(u64::MAX as u128) as u64,
                            error,
                        };
                        tokio::select! {
                            biased;
                            _ = cancel.cancelled() => {
                                yield Delta::Error { error: ProviderError::aborted() };
                                return;
                            }
                            _ = tokio::time::sleep(delay) => {}
                        }
                        attempt += 1;
                        continue;
                    }
                }
                yield Delta::Error { error };
                return;
            }
        })
    }
}

/// A provider that replays a recording (see [`crate::record`]): each
/// request must match the next recorded one byte for byte.
#[derive(Debug)]
pub struct Recorded {
    client: HttpProvider,
    replay: Arc<Replay>,
}

impl Recorded {
    /// Replays the recording at `path` for `model`; `options` give the
    /// retry policy (and the API key, which is never compared).
    pub fn open(path: &Path, model: Model, options: ClientOptions) -> Result<Recorded, RecordError> {
        let replay = Arc::new(Replay::new(record::read(path)?));
        let client = HttpProvider::with_transport(model, options, replay.clone());
        Ok(Recorded { client, replay })
    }

    /// Recorded exchanges not yet replayed.
    pub fn remaining(&self) -> usize {
        self.replay.remaining()
    }
}

impl Provider for Recorded {
    fn model(&self) -> &Model {
        self.client.model()
    }

    fn stream(&self, request: &Request, cancel: CancellationToken) -> DeltaStream {
        self.client.stream(request, cancel)
    }
}

/// A provider that answers each call with the next list of deltas it was
/// given, and remembers the requests (for tests of the agent loop).
#[derive(Debug)]
pub struct Scripted {
    model: Model,
    replies: Mutex<VecDeque<Vec<Delta>>>,
    requests: Mutex<Vec<Request>>,
}

impl Scripted {
    /// A provider for `model` with no replies yet.
    pub fn new(model: Model) -> Scripted {
        Scripted { model, replies: Mutex::new(VecDeque::new()), requests: Mutex::new(Vec::new()) }
    }

    /// Queues the deltas of one call.
    pub fn push(&self, deltas: Vec<Delta>) -> &Scripted {
        self.replies.lock().unwrap_or_else(|e| e.into_inner()).push_back(deltas);
        self
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Provider for Scripted {
    fn model(&self) -> &Model {
        &self.model
    }

    fn stream(&self, request: &Request, cancel: CancellationToken) -> DeltaStream {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
        let reply = self.replies.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        Box::pin(async_stream::stream! {
            let Some(deltas) = reply else {
                yield Delta::Error {
                    error: ProviderError::new(ErrorClass::Fatal, None, "scripted provider has no reply left"),
                };
                return;
            };
            for delta in deltas {
                if cancel.is_cancelled() {
                    yield Delta::Error { error: ProviderError::aborted() };
                    return;
                }
                let terminal = delta.is_terminal();
                yield delta;
                tokio::task::yield_now().await;
                if terminal {
                    return;
                }
            }
        })
    }
}
