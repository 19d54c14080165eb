//! A scripted fake model server on loopback that speaks both OpenAI Chat
//! Completions and Anthropic Messages (feature `fake-llm`).
//!
//! ```text
//! let fake = FakeLlm::start();                     // its own thread and runtime
//! fake.push(Reply::turn(Turn::text("Hello!").usage(12, 3)));
//! fake.push(Reply::rate_limit("7"));               // 429, retry-after: 7
//! // point a client at fake.openai_base_url() or fake.anthropic_base_url()
//! let seen = fake.requests();                      // every request, in order
//! ```
//!
//! * Replies are served in the order pushed, one per request, whichever
//!   endpoint is called; a request with no reply left gets a 500 with a
//!   plain-text body.
//! * A [`Reply::Turn`] is rendered in the format of the endpoint it
//!   answers, as the providers document their streams: OpenAI
//!   `data: {chunk}\n\n` lines closed by `data: [DONE]\n\n` (a role chunk,
//!   content chunks, a finish chunk, a usage chunk with `choices: []`);
//!   Anthropic `event: X\ndata: {...}\n\n` (`message_start`, a `ping`,
//!   `content_block_start/delta/stop` per block, `message_delta`,
//!   `message_stop`). [`render`] gives the same bytes without a server.
//! * Errors come in each provider's body shape ([`Reply::overflow`],
//!   [`Reply::rate_limit`], [`Reply::overloaded`], [`Reply::auth`]) or
//!   verbatim ([`Reply::Status`]).
//! * A turn can hang after some events (the connection stays open, with
//!   SSE comments every 20 ms so a closed connection is noticed), break off,
//!   or end with an error event; [`FakeLlm::wait_closed`] resolves when the
//!   client has closed the connection of a request.
//!
//! The server runs on its own thread with its own (real-time) tokio runtime,
//! so tests that pause tokio's clock drive it without disturbing it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};
use tokio::sync::Notify;

/// Which API an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

/// One block of a scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Visible text.
    Text(String),
    /// Reasoning (OpenAI: `reasoning_content`; Anthropic: a thinking block
    /// with this signature).
    Thinking {
        /// The reasoning text.
        text: String,
        /// Anthropic's signature.
        signature: String,
    },
    /// A tool call; `arguments` is the JSON text streamed in pieces.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
        /// The arguments' JSON text.
        arguments: String,
    },
}

/// The stop reason a turn reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// `stop` / `end_turn` (or tool calls when the turn has any).
    Auto,
    /// `length` / `max_tokens`.
    Length,
}

/// How a turn's stream ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// Every event, then the body ends.
    Complete,
    /// After this many events the server sends nothing more and keeps the
    /// connection open until the client closes it.
    HangAfter(usize),
    /// After this many events the body ends without a terminal event.
    CutAfter(usize),
    /// After this many events, the provider's in-stream error event with
    /// this message (Anthropic: `overloaded_error`; OpenAI: `server_error`).
    ErrorAfter(usize, String),
}

/// A scripted streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The blocks, in order.
    pub steps: Vec<Step>,
    /// Uncached input tokens reported.
    pub input: u64,
    /// Output tokens reported.
    pub output: u64,
    /// Cache reads reported.
    pub cache_read: u64,
    /// Cache writes reported (Anthropic only).
    pub cache_write: u64,
    /// The stop reason.
    pub finish: Finish,
    /// How the stream ends.
    pub ending: Ending,
    /// Text and arguments are streamed in pieces of this many characters.
    pub piece: usize,
    /// Send the body in chunks of this many bytes (default: one per event).
    pub chunk_bytes: Option<usize>,
    /// Wait this long between events.
    pub delay: Option<Duration>,
}

impl Turn {
    /// A turn with these blocks, no usage, stopping normally.
    pub fn new(steps: Vec<Step>) -> Turn {
        Turn {
            steps,
            input: 0,
            output: 0,
            cache_read: 0,
            cache_write: 0,
            finish: Finish::Auto,
            ending: Ending::Complete,
            piece: 8,
            chunk_bytes: None,
            delay: None,
        }
    }

    /// A turn that answers `text`.
    pub fn text(text: &str) -> Turn {
        Turn::new(vec![Step::Text(text.to_owned())])
    }

    /// A turn that calls one tool.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Turn {
        Turn::new(vec![Step::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }])
    }

    /// Sets the reported input and output tokens.
    pub fn usage(mut self, input: u64, output: u64) -> Turn {
        self.input = input;
        self.output = output;
        self
    }

    /// Sets the reported cache reads and writes.
    pub fn cache(mut self, read: u64, write: u64) -> Turn {
        self.cache_read = read;
        self.cache_write = write;
        self
    }

    /// Sets how the stream ends.
    pub fn ending(mut self, ending: Ending) -> Turn {
        self.ending = ending;
        self
    }

    /// Sends the body in chunks of `n` bytes.
    pub fn chunk_bytes(mut self, n: usize) -> Turn {
        self.chunk_bytes = Some(n.max(1));
        self
    }
}

/// One scripted answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A `200 text/event-stream` answer in the endpoint's format.
    Turn(Turn),
    /// A status with headers and a body, verbatim.
    Status {
        /// The status code.
        status: u16,
        /// Extra headers (e.g. `retry-after`).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// An error in the endpoint's body shape.
    Error {
        /// The status code.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The error's type (Anthropic `error.type`, OpenAI `error.type`).
        kind: String,
        /// The error's message.
        message: String,
        /// OpenAI's `error.code`.
        code: Option<String>,
    },
}

impl Reply {
    /// A streamed turn.
    pub fn turn(turn: Turn) -> Reply {
        Reply::Turn(turn)
    }

    /// The provider's context-overflow error (400): Anthropic's
    /// "prompt is too long", OpenAI's `context_length_exceeded`.
    pub fn overflow() -> Reply {
        Reply::Error {
            status: 400,
            headers: Vec::new(),
            kind: "invalid_request_error".into(),
            message: String::new(),
            code: Some("context_length_exceeded".into()),
        }
    }

    /// A 429 rate-limit error with `retry-after: {retry_after}`.
    pub fn rate_limit(retry_after: &str) -> Reply {
        Reply::Error {
            status: 429,
            headers: vec![("retry-after".into(), retry_after.into())],
            kind: "rate_limit_error".into(),
            message: "This request would exceed your account's rate limit. Please try again later.".into(),
            code: None,
        }
    }

    /// Anthropic's 529 `overloaded_error` (OpenAI: 503 `server_error`).
    pub fn overloaded() -> Reply {
        Reply::Error {
            status: 529,
            headers: Vec::new(),
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
            code: None,
        }
    }

    /// A 401 authentication error.
    pub fn auth() -> Reply {
        Reply::Error {
            status: 401,
            headers: Vec::new(),
            kind: "authentication_error".into(),
            message: "invalid x-api-key".into(),
            code: Some("invalid_api_key".into()),
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        match &mut self {
            Reply::Turn(_) => {}
            Reply::Status { headers, .. } | Reply::Error { headers, .. } => {
                headers.push((name.to_owned(), value.to_owned()))
            }
        }
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The endpoint's API (`None` for an unknown path).
    pub api: Option<WireApi>,
    /// The path.
    pub path: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Received {
    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    replies: Mutex<std::collections::VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    closed: Mutex<Vec<bool>>,
    changed: Notify,
}

/// The running server; dropping it stops the server.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlm {
    /// Starts a server on `127.0.0.1` at a free port.
    pub fn start() -> FakeLlm {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("fake server runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let app = axum::Router::new().fallback(handle).with_state(state);
                // Stopping does not wait for open connections (a client
                // blocked on this thread's join could never close them):
                // dropping the runtime below drops every connection task.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        });
        FakeLlm { addr, shared, stop: Some(stop), thread: Some(thread) }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL for an OpenAI client (`http://127.0.0.1:PORT/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for an Anthropic client (`http://127.0.0.1:PORT`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues the answer to the next request.
    pub fn push(&self, reply: Reply) -> &FakeLlm {
        self.shared.replies.lock().unwrap_or_else(|e| e.into_inner()).push_back(reply);
        self
    }

    /// Replies not yet served.
    pub fn pending(&self) -> usize {
        self.shared.replies.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// True once the response to request `n` (0-based) is finished or its
    /// connection closed.
    pub fn closed(&self, n: usize) -> bool {
        self.shared.closed.lock().unwrap_or_else(|e| e.into_inner()).get(n).copied().unwrap_or(false)
    }

    /// Waits until the response body of request `n` (0-based) has been
    /// dropped: sent completely, or its connection closed by the client.
    pub async fn wait_closed(&self, n: usize) {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed(n) {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Marks a request's response finished when the body is dropped.
struct Closed {
    shared: Arc<Shared>,
    n: usize,
}

impl Drop for Closed {
    fn drop(&mut self) {
        if let Some(slot) = self.shared.closed.lock().unwrap_or_else(|e| e.into_inner()).get_mut(self.n) {
            *slot = true;
        }
        self.shared.changed.notify_waiters();
    }
}

async fn handle(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let api = match path.as_str() {
        "/v1/chat/completions" => Some(WireApi::OpenAi),
        "/v1/messages" => Some(WireApi::Anthropic),
        _ => None,
    };
    let n = {
        let mut received = shared.received.lock().unwrap_or_else(|e| e.into_inner());
        received.push(Received {
            api,
            path: path.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect(),
            body: body.to_vec(),
        });
        shared.closed.lock().unwrap_or_else(|e| e.into_inner()).push(false);
        received.len() - 1
    };
    shared.changed.notify_waiters();
    let guard = Closed { shared: shared.clone(), n };
    let reply = shared.replies.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let (Some(api), Some(reply)) = (api, reply) else {
        drop(guard);
        return plain(500, &[], "fake server: no reply scripted for this request".into());
    };
    match reply {
        Reply::Status { status, headers, body } => {
            drop(guard);
            plain(status, &headers, body)
        }
        Reply::Error { status, headers, kind, message, code } => {
            drop(guard);
            let (status, body) = error_body(api, status, &kind, &message, code.as_deref());
            let mut all = vec![("content-type".to_owned(), "application/json".to_owned())];
            all.extend(headers);
            plain(status, &all, body)
        }
        Reply::Turn(turn) => stream(turn, api, &model, guard),
    }
}

fn plain(status: u16, headers: &[(String, String)], body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) =
            (axum::http::HeaderName::from_bytes(name.as_bytes()), axum::http::HeaderValue::from_str(value))
        {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// The error body each provider sends, and the status for the API (an
/// overload is 529 at Anthropic, 503 at OpenAI).
fn error_body(api: WireApi, status: u16, kind: &str, message: &str, code: Option<&str>) -> (u16, String) {
    let overflow = code == Some("context_length_exceeded");
    match api {
        WireApi::Anthropic => {
            let message =
                if overflow { "prompt is too long: 213462 tokens > 200000 maximum" } else { message };
            (status, json!({"type": "error", "error": {"type": kind, "message": message}}).to_string())
        }
        WireApi::OpenAi => {
            let (status, kind, message) = match (overflow, kind) {
                (true, _) => (
                    status,
                    "invalid_request_error",
                    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
                ),
                (false, "overloaded_error") => (503, "server_error", "The server is overloaded or not ready yet."),
                (false, "rate_limit_error") => (status, "requests", "Rate limit reached for requests"),
                (false, "authentication_error") => (status, "invalid_request_error", "Incorrect API key provided."),
                (false, kind) => (status, kind, message),
            };
            let mut error = json!({"message": message, "type": kind, "param": null, "code": code});
            if overflow {
                error["param"] = json!("messages");
            }
            (status, json!({"error": error}).to_string())
        }
    }
}

/// The SSE events (each a complete `...\n\n` frame) of a complete `turn`
/// for `api`, `model` being echoed in the payloads.
pub fn render(turn: &Turn, api: WireApi, model: &str) -> Vec<String> {
    match api {
        WireApi::OpenAi => render_openai(turn, model),
        WireApi::Anthropic => render_anthropic(turn, model),
    }
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(size.max(1)).map(|c| c.iter().collect()).collect()
}

fn has_tools(turn: &Turn) -> bool {
    turn.steps.iter().any(|s| matches!(s, Step::ToolCall { .. }))
}

fn render_openai(turn: &Turn, model: &str) -> Vec<String> {
    let frame = |v: Value| format!("data: {v}\n\n");
    let chunk = |delta: Value, finish: Value| {
        frame(json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        }))
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    let mut tool = 0;
    for step in &turn.steps {
        match step {
            Step::Text(text) => out.extend(
                pieces(text, turn.piece).into_iter().map(|p| chunk(json!({"content": p}), Value::Null)),
            ),
            Step::Thinking { text, .. } => out.extend(
                pieces(text, turn.piece)
                    .into_iter()
                    .map(|p| chunk(json!({"reasoning_content": p}), Value::Null)),
            ),
            Step::ToolCall { id, name, arguments } => {
                out.push(chunk(
                    json!({"tool_calls": [{"index": tool, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for p in pieces(arguments, turn.piece).into_iter().filter(|p| !p.is_empty()) {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": tool, "function": {"arguments": p}}]}),
                        Value::Null,
                    ));
                }
                tool += 1;
            }
        }
    }
    let finish = match turn.finish {
        Finish::Length => "length",
        Finish::Auto if has_tools(turn) => "tool_calls",
        Finish::Auto => "stop",
    };
    out.push(chunk(json!({}), json!(finish)));
    out.push(frame(json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": turn.input + turn.cache_read,
            "completion_tokens": turn.output,
            "total_tokens": turn.input + turn.cache_read + turn.output,
            "prompt_tokens_details": {"cached_tokens": turn.cache_read},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    })));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn render_anthropic(turn: &Turn, model: &str) -> Vec<String> {
    let frame = |event: &str, v: Value| format!("event: {event}\ndata: {v}\n\n");
    let mut out = vec![frame(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": model,
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": turn.input, "cache_creation_input_tokens": turn.cache_write,
                      "cache_read_input_tokens": turn.cache_read, "output_tokens": 1},
        }}),
    )];
    out.push("event: ping\ndata: {\"type\": \"ping\"}\n\n".to_owned());
    for (index, step) in turn.steps.iter().enumerate() {
        let start = |block: Value| {
            frame(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            )
        };
        let delta = |d: Value| {
            frame("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": d}))
        };
        match step {
            Step::Text(text) => {
                out.push(start(json!({"type": "text", "text": ""})));
                out.extend(
                    pieces(text, turn.piece)
                        .into_iter()
                        .map(|p| delta(json!({"type": "text_delta", "text": p}))),
                );
            }
            Step::Thinking { text, signature } => {
                out.push(start(json!({"type": "thinking", "thinking": ""})));
                out.extend(
                    pieces(text, turn.piece)
                        .into_iter()
                        .map(|p| delta(json!({"type": "thinking_delta", "thinking": p}))),
                );
                out.push(delta(json!({"type": "signature_delta", "signature": signature})));
            }
            Step::ToolCall { id, name, arguments } => {
                out.push(start(json!({"type": "tool_use", "id": id, "name": name, "input": {}})));
                out.extend(
                    pieces(arguments, turn.piece)
                        .into_iter()
                        .map(|p| delta(json!({"type": "input_json_delta", "partial_json": p}))),
                );
            }
        }
        out.push(frame("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    let stop = match turn.finish {
        Finish::Length => "max_tokens",
        Finish::Auto if has_tools(turn) => "tool_use",
        Finish::Auto => "end_turn",
    };
    out.push(frame(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": turn.output}}),
    ));
    out.push(frame("message_stop", json!({"type": "message_stop"})));
    out
}

fn error_event(api: WireApi, message: &str) -> String {
    match api {
        WireApi::Anthropic => format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": message}})
        ),
        WireApi::OpenAi => format!(
            "data: {}\n\n",
            json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}})
        ),
    }
}

fn stream(turn: Turn, api: WireApi, model: &str, guard: Closed) -> Response {
    let mut events = render(&turn, api, model);
    let (keep, tail): (usize, Option<String>) = match &turn.ending {
        Ending::Complete => (events.len(), None),
        Ending::HangAfter(n) | Ending::CutAfter(n) => ((*n).min(events.len()), None),
        Ending::ErrorAfter(n, message) => ((*n).min(events.len()), Some(error_event(api, message))),
    };
    events.truncate(keep);
    events.extend(tail);
    let hang = matches!(turn.ending, Ending::HangAfter(_));
    let bytes: Vec<Bytes> = match turn.chunk_bytes {
        None => events.into_iter().map(Bytes::from).collect(),
        Some(size) => events.concat().into_bytes().chunks(size).map(Bytes::copy_from_slice).collect(),
    };
    let delay = turn.delay;
    let body = async_stream_body(bytes, delay, hang, guard);
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert("content-type", axum::http::HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    response
}

fn async_stream_body(
    chunks: Vec<Bytes>,
    delay: Option<Duration>,
    hang: bool,
    guard: Closed,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold(
        (chunks.into_iter(), delay, hang, guard, false),
        |(mut chunks, delay, hang, guard, first)| async move {
            if first {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
            }
            match chunks.next() {
                Some(chunk) => Some((Ok(chunk), (chunks, delay, hang, guard, true))),
                None if hang => {
                    // Keep the connection open; a comment every 20 ms makes a
                    // closed connection fail the write, which drops this body.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Some((Ok(Bytes::from_static(b": waiting\n\n")), (chunks, delay, hang, guard, true)))
                }
                None => {
                    drop(guard);
                    None
                }
            }
        },
    )
}
