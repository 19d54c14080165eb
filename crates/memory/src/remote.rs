//! Embedding providers over HTTP (feature `remote`, blocking `ureq`, no
//! tokio): an OpenAI-compatible `POST {base}/embeddings` and Ollama's
//! `POST {base}/api/embed`. Failed requests are retried on rate limits and
//! server errors (spec §2.5: up to 3 retries, 500 ms doubling, cap 8 s).

use std::time::Duration;

use serde_json::{json, Value};

use crate::chunk::sha256_hex;
use crate::embed::{normalize, EmbedError, Embedder};

/// Where and how to reach an embedding server.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// Base URL: `https://api.openai.com/v1` (OpenAI-compatible) or
    /// `http://127.0.0.1:11434` (Ollama).
    pub base_url: String,
    /// The model.
    pub model: String,
    /// Bearer key (OpenAI-compatible; never stored in the index).
    pub api_key: Option<String>,
    /// Requested vector length (OpenAI `dimensions`); otherwise known from
    /// the model or probed with one request.
    pub dimensions: Option<usize>,
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// First retry delay (default 500 ms; doubles, capped at 8 s).
    pub retry_delay: Duration,
    /// Per-request timeout (default 60 s).
    pub timeout: Duration,
}

impl RemoteConfig {
    /// A configuration with OpenClaw's retry and timeout defaults.
    pub fn new(base_url: &str, model: &str) -> Self {
        RemoteConfig {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            dimensions: None,
            max_retries: 3,
            retry_delay: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Ollama,
}

/// An embedding server speaking the OpenAI or the Ollama API.
#[derive(Debug)]
pub struct RemoteEmbedder {
    api: Api,
    config: RemoteConfig,
    dims: usize,
    agent: ureq::Agent,
}

impl RemoteEmbedder {
    /// An OpenAI-compatible server (`openai/` model prefix stripped). The
    /// vector length comes from `dimensions`, the model's known size, or one
    /// probe request.
    pub fn openai(mut config: RemoteConfig) -> Result<Self, EmbedError> {
        if let Some(m) = config.model.strip_prefix("openai/") {
            config.model = m.to_owned();
        }
        let known = match config.model.as_str() {
            "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
            "text-embedding-3-large" => Some(3072),
            _ => None,
        };
        Self::build(Api::OpenAi, config, known)
    }

    /// An Ollama server; its vectors are sanitised and L2-normalised. The
    /// vector length is probed with one request.
    pub fn ollama(config: RemoteConfig) -> Result<Self, EmbedError> {
        Self::build(Api::Ollama, config, None)
    }

    fn build(api: Api, config: RemoteConfig, known: Option<usize>) -> Result<Self, EmbedError> {
        let agent = ureq::AgentBuilder::new().timeout(config.timeout).build();
        let mut e = RemoteEmbedder { api, dims: 0, config, agent };
        e.dims = match e.config.dimensions.or(known) {
            Some(d) => d,
            None => e.request(&["ping"])?.first().map_or(0, Vec::len),
        };
        Ok(e)
    }

    fn error(&self, message: String) -> EmbedError {
        EmbedError { provider: self.id().to_owned(), message }
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (url, body) = match self.api {
            Api::OpenAi => {
                let mut body = json!({ "model": self.config.model, "input": texts });
                if let Some(d) = self.config.dimensions {
                    body["dimensions"] = json!(d);
                }
                (format!("{}/embeddings", self.config.base_url), body)
            }
            Api::Ollama => (
                format!("{}/api/embed", self.config.base_url),
                json!({ "model": self.config.model, "input": texts }),
            ),
        };
        let mut delay = self.config.retry_delay;
        let mut attempt = 0;
        loop {
            let mut req = self.agent.post(&url).set("content-type", "application/json");
            if let Some(key) = &self.config.api_key {
                req = req.set("authorization", &format!("Bearer {key}"));
            }
            let outcome = req.send_string(&body.to_string());
            let retryable = match &outcome {
                Ok(_) => false,
                Err(ureq::Error::Status(code, _)) => *code == 429 || *code >= 500,
                Err(ureq::Error::Transport(_)) => true,
            };
            if retryable && attempt < self.config.max_retries {
                attempt += 1;
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(8));
                continue;
            }
            let response = match outcome {
                Ok(r) => r,
                Err(ureq::Error::Status(code, r)) => {
                    let text = r.into_string().unwrap_or_default();
                    let excerpt: String = text.chars().take(300).collect();
                    return Err(self.error(format!("{url}: HTTP {code}: {excerpt}")));
                }
                Err(e) => return Err(self.error(format!("{url}: {e}"))),
            };
            let text = response.into_string().map_err(|e| self.error(format!("{url}: {e}")))?;
            let value: Value =
                serde_json::from_str(&text).map_err(|e| self.error(format!("{url}: not JSON: {e}")))?;
            return self.parse(&value, texts.len()).map_err(|m| self.error(format!("{url}: {m}")));
        }
    }

    fn parse(&self, value: &Value, n: usize) -> Result<Vec<Vec<f32>>, String> {
        let vector = |v: &Value| -> Result<Vec<f32>, String> {
            v.as_array()
                .ok_or("an embedding is not an array")?
                .iter()
                .map(|x| {
                    x.as_f64().map(|f| f as f32).ok_or_else(|| "an embedding holds a non-number".to_owned())
                })
                .collect()
        };
        let mut out = match self.api {
            Api::OpenAi => {
                let data = value["data"].as_array().ok_or("no `data` array in the answer")?;
                let mut rows: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
                for (i, d) in data.iter().enumerate() {
                    rows.push((d["index"].as_u64().unwrap_or(i as u64), vector(&d["embedding"])?));
                }
                rows.sort_by_key(|r| r.0);
                rows.into_iter().map(|r| r.1).collect::<Vec<_>>()
            }
            Api::Ollama => {
                let data = value["embeddings"].as_array().ok_or("no `embeddings` array in the answer")?;
                data.iter().map(vector).collect::<Result<Vec<_>, _>>()?
            }
        };
        if out.len() != n {
            return Err(format!("{} vectors for {n} texts", out.len()));
        }
        if self.dims > 0 {
            if let Some(v) = out.iter().find(|v| v.len() != self.dims) {
                return Err(format!("a vector of {} dimensions, expected {}", v.len(), self.dims));
            }
        }
        if self.api == Api::Ollama {
            out.iter_mut().for_each(|v| normalize(v));
        }
        Ok(out)
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> &str {
        match self.api {
            Api::OpenAi => "openai",
            Api::Ollama => "ollama",
        }
    }
    fn model(&self) -> &str {
        &self.config.model
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn provider_key(&self) -> String {
        // Everything that changes the vectors, never the key.
        sha256_hex(&json!({ "provider": self.id(), "baseUrl": self.config.base_url, "model": self.config.model, "dimensions": self.config.dimensions }).to_string())
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.request(texts)
    }
}
