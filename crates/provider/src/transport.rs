//! The HTTP boundary: a [`Transport`] sends one request and hands back the
//! status, headers and a stream of body chunks. [`Reqwest`] speaks to the
//! network (rustls with the `ring` provider, Mozilla's root certificates
//! built in, HTTP/1.1); `record::Recording` and `record::Replay` wrap or
//! replace it.
//!
//! Dropping the body stream (or the future that sends) closes the
//! connection, which is how cancelling a stream aborts its request.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::Stream;

/// One HTTP request, exactly as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The full URL.
    pub url: String,
    /// Header names (lower case) and values, in sending order.
    pub headers: Vec<(String, String)>,
    /// The body (always JSON for these APIs).
    pub body: Vec<u8>,
}

/// The body of a response, chunk by chunk.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, TransportError>> + Send>>;

/// A response whose body is still arriving.
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: BodyStream,
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse").field("status", &self.status).field("headers", &self.headers).finish()
    }
}

/// Why a request or its body failed below HTTP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// No response: connection refused or reset, DNS, TLS.
    #[error("Connection error.")]
    Connect(String),
    /// No byte arrived within the read timeout.
    #[error("Request timed out.")]
    Timeout,
    /// The body broke off.
    #[error("terminated")]
    Body(String),
    /// A replayed exchange was cancelled when it was recorded.
    #[error("Request was aborted.")]
    Aborted,
    /// A replay has no matching exchange.
    #[error("replay: {0}")]
    Replay(String),
}

/// Sends requests.
pub trait Transport: Send + Sync {
    /// Sends `request`; the body streams after the returned response.
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, TransportError>>;
}

/// The network transport.
#[derive(Debug, Clone)]
pub struct Reqwest {
    client: reqwest::Client,
    read_timeout: Option<Duration>,
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct BuildError(#[from] reqwest::Error);

impl Reqwest {
    /// A client with a connect timeout and an idle-read timeout (no byte for
    /// that long fails the body with [`TransportError::Timeout`]); `None`
    /// waits forever.
    pub fn new(
        connect_timeout: Option<Duration>,
        read_timeout: Option<Duration>,
    ) -> Result<Reqwest, BuildError> {
        let mut builder = reqwest::Client::builder();
        if let Some(timeout) = connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        Ok(Reqwest { client: builder.build()?, read_timeout })
    }

    /// A transport over an existing client.
    pub fn from_client(client: reqwest::Client, read_timeout: Option<Duration>) -> Reqwest {
        Reqwest { client, read_timeout }
    }
}

impl Transport for Reqwest {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpResponse, TransportError>> {
        let client = self.client.clone();
        let read_timeout = self.read_timeout;
        Box::pin(async move {
            let mut builder = client.post(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            let send = builder.body(request.body).send();
            let response = match read_timeout {
                Some(limit) => match tokio::time::timeout(limit, send).await {
                    Ok(result) => result,
                    Err(_) => return Err(TransportError::Timeout),
                },
                None => send.await,
            }
            .map_err(|e| {
                if e.is_timeout() {
                    TransportError::Timeout
                } else {
                    TransportError::Connect(describe(&e))
                }
            })?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            let mut response = response;
            let body = async_stream::stream! {
                loop {
                    let next = match read_timeout {
                        Some(limit) => match tokio::time::timeout(limit, response.chunk()).await {
                            Ok(next) => next,
                            Err(_) => {
                                yield Err(TransportError::Timeout);
                                return;
                            }
                        },
                        None => response.chunk().await,
                    };
                    match next {
                        Ok(Some(bytes)) => yield Ok(bytes),
                        Ok(None) => return,
                        Err(e) => {
                            yield Err(TransportError::Body(describe(&e)));
                            return;
                        }
                    }
                }
            };
            Ok(HttpResponse { status, headers, body: Box::pin(body) })
        })
    }
}

/// An error with its causes, for logs.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
