//! Recording model exchanges to a file, and replaying them.
//!
//! The recording keeps the raw HTTP exchange, not the deltas: replaying runs
//! the same SSE parser and decoder over the same bytes, so a recording made
//! before a decoder fix shows the fix. One JSON object per line, one line
//! per attempt (a retried request leaves one line per try), in the order
//! the responses finished:
//!
//! ```json
//! {"version":1,
//!  "request":{"url":"http://127.0.0.1:8080/v1/chat/completions",
//!             "headers":[["content-type","application/json"],["authorization","<redacted>"]],
//!             "body":"{\"model\":\"m\",...}"},
//!  "response":{"status":200,"headers":[["content-type","text/event-stream"]],
//!              "body":"data: {...}\n\ndata: [DONE]\n\n"},
//!  "end":"eof"}
//! ```
//!
//! * Secrets are never written: `authorization`, `x-api-key`, `api-key`,
//!   `cookie` and `proxy-authorization` values read `<redacted>`.
//! * A body that is not UTF-8 is kept as `bodyBytes` (an array of bytes).
//! * `end` says how the body ended: `"eof"`; `{"error":"..."}` (the
//!   transport error, replayed as such); `"cancelled"` (the caller dropped
//!   the stream: replayed as an abort at the same byte).
//! * A request that got no response has `"response":null` and
//!   `"error":{"kind":"connect"|"timeout","message":"..."}`.
//!
//! Replay ([`Replay`]) checks each request against the next recorded one —
//! URL, body byte for byte, and the headers other than the redacted ones —
//! and fails with [`crate::transport::TransportError::Replay`] naming the
//! first difference.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::transport::{HttpRequest, HttpResponse, Transport, TransportError};

/// The format version written in every line.
pub const VERSION: u32 = 1;

const SECRET_HEADERS: [&str; 5] = ["authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"];

fn is_secret(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// A body as stored: text when it is UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct StoredBody {
    /// The body as text.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub body: Option<String>,
    /// The body as bytes, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub body_bytes: Option<Vec<u8>>,
}

impl StoredBody {
    fn new(bytes: &[u8]) -> StoredBody {
        match std::str::from_utf8(bytes) {
            Ok(text) => StoredBody { body: Some(text.to_owned()), body_bytes: None },
            Err(_) => StoredBody { body: None, body_bytes: Some(bytes.to_vec()) },
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> Vec<u8> {
        match (&self.body, &self.body_bytes) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(bytes)) => bytes.clone(),
            (None, None) => Vec::new(),
        }
    }
}

/// A recorded request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The URL.
    pub url: String,
    /// The headers, secrets redacted.
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(flatten)]
    pub body: StoredBody,
}

/// A recorded response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedResponse {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    /// The body as received (up to where it ended).
    #[serde(flatten)]
    pub body: StoredBody,
}

/// How a recorded body ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum End {
    /// The body was complete.
    Eof,
    /// The caller stopped reading (dropped or cancelled the stream).
    Cancelled,
    /// The transport failed with this message.
    Error(String),
}

/// A request that got no response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFailure {
    /// `connect` or `timeout`.
    pub kind: String,
    /// The transport's message.
    pub message: String,
}

/// One attempt: a line of the recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    /// [`VERSION`].
    pub version: u32,
    /// What was sent.
    pub request: RecordedRequest,
    /// What came back, if anything.
    pub response: Option<RecordedResponse>,
    /// How the body ended.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub end: Option<End>,
    /// Why there was no response.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<RecordedFailure>,
}

fn record_request(request: &HttpRequest) -> RecordedRequest {
    RecordedRequest {
        url: request.url.clone(),
        headers: request
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), if is_secret(k) { "<redacted>".to_owned() } else { v.clone() }))
            .collect(),
        body: StoredBody::new(&request.body),
    }
}

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The recording.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not an exchange.
    #[error("{path}:{line}: not a recorded exchange: {reason}")]
    Line {
        /// The recording.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Appends exchanges to a file, one line each, as they finish.
#[derive(Debug, Clone)]
pub struct Recorder {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl Recorder {
    /// Creates (or truncates) the recording at `path`.
    pub fn create(path: &Path) -> Result<Recorder, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Io { path: path.to_owned(), source })?;
        Ok(Recorder { path: path.to_owned(), file: Arc::new(Mutex::new(file)) })
    }

    /// Appends to the recording at `path`, creating it if needed.
    pub fn append(path: &Path) -> Result<Recorder, RecordError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| RecordError::Io { path: path.to_owned(), source })?;
        Ok(Recorder { path: path.to_owned(), file: Arc::new(Mutex::new(file)) })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, exchange: &Exchange) {
        let mut line = serde_json::to_string(exchange).unwrap_or_default();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = file.write_all(line.as_bytes()) {
            tracing::warn!(path = %self.path.display(), %error, "cannot write the model recording");
        }
    }
}

/// A transport that records every exchange of the one it wraps.
pub struct Recording {
    inner: Arc<dyn Transport>,
    recorder: Recorder,
}

impl Recording {
    /// Records what `inner` sends and receives with `recorder`.
    pub fn new(inner: Arc<dyn Transport>, recorder: Recorder) -> Recording {
        Recording { inner, recorder }
    }
}

/// Writes the exchange when the body ends, or when it is dropped unfinished.
struct Tee {
    recorder: Recorder,
    exchange: Exchange,
    body: Vec<u8>,
    written: bool,
}

impl Tee {
    fn finish(&mut self, end: End) {
        if self.written {
            return;
        }
        self.written = true;
        if let Some(response) = &mut self.exchange.response {
            response.body = StoredBody::new(&self.body);
        }
        self.exchange.end = Some(end);
        self.recorder.write(&self.exchange);
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        self.finish(End::Cancelled);
    }
}

impl Transport for Recording {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, TransportError>> {
        let recorded = record_request(&request);
        let recorder = self.recorder.clone();
        let sent = self.inner.send(request);
        Box::pin(async move {
            let response = match sent.await {
                Ok(response) => response,
                Err(error) => {
                    let kind = if error == TransportError::Timeout { "timeout" } else { "connect" };
                    recorder.write(&Exchange {
                        version: VERSION,
                        request: recorded,
                        response: None,
                        end: None,
                        error: Some(RecordedFailure { kind: kind.to_owned(), message: detail(&error) }),
                    });
                    return Err(error);
                }
            };
            let mut tee = Tee {
                recorder,
                exchange: Exchange {
                    version: VERSION,
                    request: recorded,
                    response: Some(RecordedResponse {
                        status: response.status,
                        headers: response.headers.clone(),
                        body: StoredBody::default(),
                    }),
                    end: None,
                    error: None,
                },
                body: Vec::new(),
                written: false,
            };
            let mut inner = response.body;
            let body = async_stream::stream! {
                loop {
                    match inner.next().await {
                        Some(Ok(bytes)) => {
                            tee.body.extend_from_slice(&bytes);
                            yield Ok(bytes);
                        }
                        Some(Err(error)) => {
                            tee.finish(End::Error(detail(&error)));
                            yield Err(error);
                            return;
                        }
                        None => {
                            tee.finish(End::Eof);
                            return;
                        }
                    }
                }
            };
            Ok(HttpResponse { status: response.status, headers: response.headers, body: Box::pin(body) })
        })
    }
}

fn detail(error: &TransportError) -> String {
    match error {
        TransportError::Connect(m) | TransportError::Body(m) | TransportError::Replay(m) => m.clone(),
        TransportError::Timeout => "timeout".to_owned(),
        TransportError::Aborted => "aborted".to_owned(),
    }
}

/// Reads a recording.
pub fn read(path: &Path) -> Result<Vec<Exchange>, RecordError> {
    let file = File::open(path).map_err(|source| RecordError::Io { path: path.to_owned(), source })?;
    let mut out = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| RecordError::Io { path: path.to_owned(), source })?;
        if line.trim().is_empty() {
            continue;
        }
        let exchange: Exchange = serde_json::from_str(&line).map_err(|e| RecordError::Line {
            path: path.to_owned(),
            line: n + 1,
            reason: e.to_string(),
        })?;
        if exchange.version != VERSION {
            return Err(RecordError::Line {
                path: path.to_owned(),
                line: n + 1,
                reason: format!("version {} (this build reads {VERSION})", exchange.version),
            });
        }
        out.push(exchange);
    }
    Ok(out)
}

/// A transport that answers from a recording, in order.
#[derive(Debug, Default)]
pub struct Replay {
    exchanges: Mutex<VecDeque<Exchange>>,
    served: Mutex<usize>,
}

impl Replay {
    /// Serves `exchanges` in order.
    pub fn new(exchanges: Vec<Exchange>) -> Replay {
        Replay { exchanges: Mutex::new(exchanges.into()), served: Mutex::new(0) }
    }

    /// Exchanges not yet served.
    pub fn remaining(&self) -> usize {
        self.exchanges.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The first difference between a request and its recording, if any.
fn difference(recorded: &RecordedRequest, live: &RecordedRequest) -> Option<String> {
    if recorded.url != live.url {
        return Some(format!("URL {} was recorded as {}", live.url, recorded.url));
    }
    let public =
        |h: &[(String, String)]| h.iter().filter(|(k, _)| !is_secret(k)).cloned().collect::<Vec<_>>();
    if public(&recorded.headers) != public(&live.headers) {
        return Some(format!(
            "headers {:?} were recorded as {:?}",
            public(&live.headers),
            public(&recorded.headers)
        ));
    }
    let (a, b) = (recorded.body.bytes(), live.body.bytes());
    if a != b {
        let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
        let near = |bytes: &[u8]| {
            String::from_utf8_lossy(&bytes[at.saturating_sub(20)..(at + 40).min(bytes.len())]).into_owned()
        };
        return Some(format!("body differs at byte {at}: {:?} was recorded as {:?}", near(&b), near(&a)));
    }
    None
}

impl Transport for Replay {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, TransportError>> {
        let live = record_request(&request);
        let next = self.exchanges.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        let number = {
            let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
            *served += 1;
            *served
        };
        Box::pin(async move {
            let Some(exchange) = next else {
                return Err(TransportError::Replay(format!("request {number} has no recorded exchange")));
            };
            if let Some(why) = difference(&exchange.request, &live) {
                return Err(TransportError::Replay(format!("request {number}: {why}")));
            }
            let Some(response) = exchange.response else {
                let failure = exchange
                    .error
                    .unwrap_or(RecordedFailure { kind: "connect".into(), message: String::new() });
                return Err(match failure.kind.as_str() {
                    "timeout" => TransportError::Timeout,
                    _ => TransportError::Connect(failure.message),
                });
            };
            let bytes = Bytes::from(response.body.bytes());
            let end = exchange.end.unwrap_or(End::Eof);
            let body = async_stream::stream! {
                if !bytes.is_empty() {
                    yield Ok(bytes);
                }
                match end {
                    End::Eof => {}
                    End::Cancelled => yield Err(TransportError::Aborted),
                    End::Error(message) => yield Err(TransportError::Body(message)),
                }
            };
            Ok(HttpResponse { status: response.status, headers: response.headers, body: Box::pin(body) })
        })
    }
}
