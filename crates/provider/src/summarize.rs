//! The model summariser: [`compaction::Summarizer`](sessionlog_compaction::Summarizer)
//! over any [`Provider`], with a content-addressed [`SummaryCache`].
//!
//! The compaction pipeline (OpenClaw's safeguard path: chunks, staged merge,
//! split-turn prefix, the three-level fallback) decides *what* to ask; this
//! module turns each [`SummaryRequest`] into one model call the way OpenClaw
//! sends it through Pi's `generateSummary`:
//!
//! * system prompt: summarise, never continue the conversation ([`SYSTEM_PROMPT`]);
//! * one user message: `<conversation>\n…\n</conversation>\n\n`, then
//!   `<previous-summary>\n…\n</previous-summary>\n\n` when there is a running
//!   summary, then the initial or update prompt ([`INITIAL_PROMPT`],
//!   [`UPDATE_PROMPT`]) and `\n\nAdditional focus: ` with the pipeline's
//!   instructions (OpenClaw's five headings, identifier policy, merge or
//!   split-turn instructions, `/compact` text);
//! * the output limit the pipeline gives (at most the model's), reasoning
//!   effort `high` for a reasoning model;
//! * the answer's text blocks joined by a newline; an `error` or `aborted`
//!   stop, or an empty text, is a failure the pipeline falls back from.
//!
//! Only one format is asked for: the pipeline's headings. Pi's own skeleton
//! (Goal, Progress, …) is not sent beside them, as later OpenClaw sends one
//! primary format per request (spec compaction §3.7).
//!
//! **Cache.** The key is the SHA-256 of `api\nbase-url\nmodel-id\n` followed
//! by the request body exactly as it would be sent (no key, no headers), in
//! hex — the endpoint is part of it, so two servers offering a model under
//! the same id never answer for each other;
//! the answer is `DIR/<key>.json`, written atomically (temp file, rename).
//! `DIR/model.json` records the model section, so a later run with only the
//! cache ([`ModelSummarizer::cache_only`]) rebuilds the same bodies offline;
//! a request it does not find there is a failure naming the hash, also kept
//! in [`ModelSummarizer::report`] so a front end can refuse the run.
//!
//! **A dead endpoint is bounded.** The provider retries a failed call by its
//! [`RetryPolicy`] (3 attempts, 0.5–8 s backoff); the pipeline then asks the
//! same request again ([`sessionlog_compaction::pipeline::ATTEMPTS`] times),
//! which this summariser answers from its memory of failures without sending
//! it again; and once a call got no HTTP response at all (refused, DNS,
//! timeout) every later request of the run fails at once. A run against a
//! dead endpoint therefore costs one request's retries, not retries ×
//! attempts × compactions. The connect timeout is 10 s.
//!
//! **Runtimes.** The trait is synchronous. By default the summariser runs
//! each call on its own tokio runtime (single-threaded, built on first use);
//! [`ModelSummarizer::on_runtime`] uses a program's runtime instead — then
//! call the pipeline from a blocking thread (`spawn_blocking`), as the live
//! loop calls every synchronous library function. Async code can also ask
//! one request directly with [`ModelSummarizer::answer`].

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sessionlog_compaction::{Summarizer, SummarizerError, SummaryRequest};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::client::{build_request, HttpProvider, Provider};
use crate::config::{ModelConfig, ModelConfigError};
use crate::delta::Delta;
use crate::message::{Accumulator, Block, StopReason};
use crate::model::{Api, Model, Request, ThinkingLevel};

/// The system prompt of every summary request (our wording of Pi's
/// summariser prompt).
pub const SYSTEM_PROMPT: &str = "You turn a conversation between a user and an AI coding assistant into a structured \
summary, in the format the request asks for.\n\nNever continue the conversation and never answer a question found in it. \
Reply with the summary and nothing else.";

/// The prompt when there is no summary yet (our wording of Pi's initial prompt).
pub const INITIAL_PROMPT: &str = "The messages above are a conversation to be checkpointed. Write a summary that another \
model will read to carry on the work: what the user wants, the rules and preferences they set, what is done, what is \
in progress or blocked, the decisions taken and why, and what comes next. Be brief, but copy file paths, function \
names, commands and error messages exactly.";

/// The prompt when a running summary is updated (our wording of Pi's update prompt).
pub const UPDATE_PROMPT: &str = "The messages above are new since the summary in <previous-summary>. Rewrite that \
summary so it covers both: keep what still matters from it, add the new progress, decisions and context, move work \
that is now finished out of the open items, and bring the next steps up to date. Be brief, but copy file paths, \
function names, commands and error messages exactly.";

/// How long a summary call may take to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a summariser or its cache could not be set up or read.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A cache entry or `model.json` is not what this module writes.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column where JSON parsing failed.
        reason: String,
    },
    /// A model configuration file could not be read.
    #[error("{path}: {reason}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong (TOML's message names the line and column).
        reason: String,
    },
    /// The `[model]` section cannot be used.
    #[error(transparent)]
    Model(#[from] ModelConfigError),
    /// A cache-only run needs the model the cache was filled with.
    #[error("{0}: missing; the cache was never filled (run once with a model configuration)")]
    NoModel(PathBuf),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] crate::transport::BuildError),
}

/// One stored answer, `DIR/<key>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    api: String,
    /// The endpoint (entries written before it was part of the key have none).
    #[serde(default)]
    base_url: String,
    model: String,
    /// The request body the key hashes, verbatim.
    body: String,
    /// The summary text.
    text: String,
}

/// A folder of model answers keyed by the SHA-256 of the request (see the
/// module documentation). Safe to share between threads and processes:
/// every file is written whole under a temporary name and renamed.
#[derive(Debug)]
pub struct SummaryCache {
    dir: PathBuf,
}

impl SummaryCache {
    /// The cache in `dir`, created if missing.
    pub fn open(dir: &Path) -> Result<SummaryCache, SummarizeError> {
        std::fs::create_dir_all(dir).map_err(|source| SummarizeError::Io { path: dir.to_owned(), source })?;
        Ok(SummaryCache { dir: dir.to_owned() })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a request body sent to `model_id` over `api` at
    /// `base_url`: SHA-256 of `api\nbase-url\nmodel-id\n` and the body,
    /// lower-case hex.
    pub fn key(api: Api, base_url: &str, model_id: &str, body: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(api.as_str().as_bytes());
        h.update(b"\n");
        h.update(base_url.as_bytes());
        h.update(b"\n");
        h.update(model_id.as_bytes());
        h.update(b"\n");
        h.update(body);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The file of `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The stored answer of `key`, if any. An entry whose request does not
    /// hash to its name is refused, never served.
    pub fn get(&self, key: &str) -> Result<Option<String>, SummarizeError> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(SummarizeError::Io { path, source }),
        };
        let entry: Entry = serde_json::from_slice(&bytes)
            .map_err(|e| SummarizeError::Corrupt { path: path.clone(), reason: e.to_string() })?;
        let api = Api::from_name(&entry.api).ok_or_else(|| SummarizeError::Corrupt {
            path: path.clone(),
            reason: format!("unknown api `{}`", entry.api),
        })?;
        if SummaryCache::key(api, &entry.base_url, &entry.model, entry.body.as_bytes()) != key {
            return Err(SummarizeError::Corrupt {
                path,
                reason: "the stored request does not hash to the file's name".to_owned(),
            });
        }
        Ok(Some(entry.text))
    }

    /// Stores the answer to a request (atomically; an existing entry is
    /// replaced by the same content).
    pub fn put(
        &self,
        key: &str,
        api: Api,
        base_url: &str,
        model_id: &str,
        body: &[u8],
        text: &str,
    ) -> Result<(), SummarizeError> {
        let entry = Entry {
            api: api.as_str().to_owned(),
            base_url: base_url.to_owned(),
            model: model_id.to_owned(),
            body: String::from_utf8_lossy(body).into_owned(),
            text: text.to_owned(),
        };
        let bytes = serde_json::to_vec_pretty(&entry).unwrap_or_default();
        self.write(&self.path(key), &bytes)
    }

    /// The model section the cache was filled with (`DIR/model.json`).
    pub fn model_config(&self) -> Result<Option<ModelConfig>, SummarizeError> {
        let path = self.dir.join("model.json");
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| SummarizeError::Corrupt { path, reason: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SummarizeError::Io { path, source }),
        }
    }

    /// Records the model section (replacing another one: the cache answers
    /// offline for the model used last; entries of other models stay).
    pub fn set_model_config(&self, config: &ModelConfig) -> Result<(), SummarizeError> {
        if self.model_config().ok().flatten().as_ref() == Some(config) {
            return Ok(());
        }
        let mut bytes = serde_json::to_vec_pretty(config).unwrap_or_default();
        bytes.push(b'\n');
        self.write(&self.dir.join("model.json"), &bytes)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), SummarizeError> {
        let io = |source| SummarizeError::Io { path: path.to_owned(), source };
        let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(&self.dir).map_err(io)?;
        tmp.write_all(bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// Reads a model configuration file (TOML): the live loop's configuration
/// (its `[model]` table is used, the rest ignored) or a file holding the
/// model keys at the top level.
pub fn load_model_config(path: &Path) -> Result<ModelConfig, SummarizeError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SummarizeError::Io { path: path.to_owned(), source })?;
    let bad = |e: toml::de::Error| SummarizeError::Config {
        path: path.to_owned(),
        reason: e.to_string().trim_end().to_owned(),
    };
    let table: toml::Table = toml::from_str(&text).map_err(bad)?;
    if matches!(table.get("model"), Some(toml::Value::Table(_))) {
        #[derive(Deserialize)]
        struct Whole {
            model: ModelConfig,
            #[serde(flatten)]
            _rest: BTreeMap<String, toml::Value>,
        }
        Ok(toml::from_str::<Whole>(&text).map_err(bad)?.model)
    } else {
        toml::from_str(&text).map_err(bad)
    }
}

/// The user text of a summary request (see the module documentation).
pub fn user_text(request: &SummaryRequest) -> String {
    let mut text = format!("<conversation>\n{}\n</conversation>\n\n", request.conversation);
    if let Some(previous) = &request.previous_summary {
        text.push_str(&format!("<previous-summary>\n{previous}\n</previous-summary>\n\n"));
    }
    text.push_str(if request.previous_summary.is_some() { UPDATE_PROMPT } else { INITIAL_PROMPT });
    if !request.instructions.is_empty() {
        text.push_str("\n\nAdditional focus: ");
        text.push_str(&request.instructions);
    }
    text
}

/// The model call that answers `request` on `model`.
pub fn provider_request(model: &Model, request: &SummaryRequest) -> Request {
    Request {
        system_prompt: Some(SYSTEM_PROMPT.to_owned()),
        messages: vec![json!({
            "role": "user",
            "content": [{"type": "text", "text": user_text(request)}],
            "timestamp": 0,
        })],
        tools: None,
        max_tokens: Some(request.max_tokens.clamp(1, model.max_tokens.max(1))),
        temperature: None,
        thinking: model.reasoning.then_some(ThinkingLevel::High),
    }
}

/// What a summariser did over its life (shared by its clones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Calls sent to the provider.
    pub sent: u64,
    /// Requests answered from the cache.
    pub cache_hits: u64,
    /// Requests a cache-only run did not find (their keys, in order).
    pub cache_misses: Vec<String>,
    /// Failures the pipeline fell back from, and cache writes that failed.
    pub failures: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    report: Report,
    /// Requests that failed, by key: asked again, they fail again unsent.
    failed: BTreeMap<String, String>,
    /// Set once a call got no HTTP response: later calls are not sent.
    unreachable: Option<String>,
}

/// A [`Summarizer`] that asks a model (see the module documentation).
///
/// Clones share the provider, the cache, the runtime and the [`Report`], so
/// each worker of a sweep gets its own summariser over one cache.
#[derive(Clone)]
pub struct ModelSummarizer {
    model: Model,
    provider: Option<Arc<dyn Provider>>,
    cache: Option<Arc<SummaryCache>>,
    handle: Option<tokio::runtime::Handle>,
    worker_threads: usize,
    runtime: Arc<OnceLock<tokio::runtime::Runtime>>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for ModelSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSummarizer")
            .field("model", &self.model.id)
            .field("cache", &self.cache.as_ref().map(|c| c.dir().to_owned()))
            .field("cache_only", &self.provider.is_none())
            .finish()
    }
}

impl ModelSummarizer {
    /// A summariser over `provider`, without a cache.
    pub fn new(provider: Arc<dyn Provider>) -> ModelSummarizer {
        ModelSummarizer {
            model: provider.model().clone(),
            provider: Some(provider),
            cache: None,
            handle: None,
            worker_threads: 0,
            runtime: Arc::new(OnceLock::new()),
            state: Arc::default(),
        }
    }

    /// A summariser for a `[model]` section: an [`HttpProvider`] with the key
    /// read through `lookup` (`std::env::var`), the connect timeout bounded
    /// to [`CONNECT_TIMEOUT`]; with a cache, the section is recorded in it.
    pub fn from_config(
        config: &ModelConfig,
        lookup: impl Fn(&str) -> Option<String>,
        cache: Option<Arc<SummaryCache>>,
    ) -> Result<ModelSummarizer, SummarizeError> {
        let model = config.model()?;
        let mut options = config.client_options(lookup)?;
        options.connect_timeout =
            Some(options.connect_timeout.map_or(CONNECT_TIMEOUT, |t| t.min(CONNECT_TIMEOUT)));
        let provider = HttpProvider::new(model, options)?;
        let mut summarizer = ModelSummarizer::new(Arc::new(provider));
        if let Some(cache) = cache {
            cache.set_model_config(config)?;
            summarizer = summarizer.with_cache(cache);
        }
        Ok(summarizer)
    }

    /// A summariser that answers from `cache` only, for the model recorded
    /// in it; it never touches the network.
    pub fn cache_only(cache: Arc<SummaryCache>) -> Result<ModelSummarizer, SummarizeError> {
        let config =
            cache.model_config()?.ok_or_else(|| SummarizeError::NoModel(cache.dir().join("model.json")))?;
        Ok(ModelSummarizer {
            model: config.model()?,
            provider: None,
            cache: Some(cache),
            handle: None,
            worker_threads: 0,
            runtime: Arc::new(OnceLock::new()),
            state: Arc::default(),
        })
    }

    /// The same summariser with a cache.
    pub fn with_cache(mut self, cache: Arc<SummaryCache>) -> ModelSummarizer {
        self.cache = Some(cache);
        self
    }

    /// Runs calls on `handle`'s runtime instead of its own (then call the
    /// synchronous [`Summarizer`] methods from a blocking thread).
    pub fn on_runtime(mut self, handle: tokio::runtime::Handle) -> ModelSummarizer {
        self.handle = Some(handle);
        self
    }

    /// Its own runtime gets `n` worker threads (for clones summarising in
    /// parallel, as a sweep's workers do); 0, the default, is one thread.
    pub fn with_worker_threads(mut self, n: usize) -> ModelSummarizer {
        self.worker_threads = n;
        self
    }

    /// The model asked.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// What it did so far (all clones together).
    pub fn report(&self) -> Report {
        self.lock().report.clone()
    }

    /// The model call that answers `request` (see [`provider_request`]).
    pub fn request_for(&self, request: &SummaryRequest) -> Request {
        provider_request(&self.model, request)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, key: &str, message: String) -> SummarizerError {
        let mut state = self.lock();
        state.failed.insert(key.to_owned(), message.clone());
        state.report.failures.push(message.clone());
        SummarizerError(message)
    }

    /// Answers one request: from the cache, else from the model (stored in
    /// the cache when it succeeds).
    pub async fn answer(&self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        let call = self.request_for(request);
        let body = build_request(&self.model, None, &call).body;
        let key = SummaryCache::key(self.model.api, &self.model.base_url, &self.model.id, &body);
        if let Some(cache) = &self.cache {
            match cache.get(&key) {
                Ok(Some(text)) => {
                    self.lock().report.cache_hits += 1;
                    return Ok(text);
                }
                Ok(None) => {}
                Err(e) => return Err(self.fail(&key, e.to_string())),
            }
        }
        if let Some(message) = self.lock().failed.get(&key) {
            return Err(SummarizerError(message.clone()));
        }
        let Some(provider) = &self.provider else {
            let dir = self.cache.as_ref().map_or_else(String::new, |c| c.dir().display().to_string());
            let mut state = self.lock();
            state.report.cache_misses.push(key.clone());
            let message =
                format!("summary cache miss: {key} is not in {dir} (a cache-only run sends nothing)");
            state.failed.insert(key, message.clone());
            return Err(SummarizerError(message));
        };
        if let Some(why) = self.lock().unreachable.clone() {
            return Err(SummarizerError(format!(
                "not sent: the endpoint was unreachable earlier in this run ({why})"
            )));
        }
        self.lock().report.sent += 1;
        let mut stream = provider.stream(&call, CancellationToken::new());
        let mut acc = Accumulator::new(&self.model, 0);
        let mut responded = false;
        while let Some(delta) = stream.next().await {
            responded |= matches!(delta, Delta::Start);
            acc.push(&delta);
        }
        let message = acc.finish();
        if matches!(message.stop_reason, StopReason::Error | StopReason::Aborted) {
            let error = message.error_message.unwrap_or_else(|| "unknown error".to_owned());
            let text = format!("{}: {error}", self.model.id);
            if !responded && message.error.as_ref().is_some_and(|e| e.status.is_none()) {
                self.lock().unreachable = Some(text.clone());
            }
            return Err(self.fail(&key, text));
        }
        let text: Vec<&str> = message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let text = text.join("\n");
        if text.trim().is_empty() {
            return Err(self.fail(&key, format!("{}: the model answered with no text", self.model.id)));
        }
        if let Some(cache) = &self.cache {
            if let Err(e) =
                cache.put(&key, self.model.api, &self.model.base_url, &self.model.id, &body, &text)
            {
                self.lock().report.failures.push(format!("cache not written: {e}"));
            }
        }
        Ok(text)
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> Result<F::Output, SummarizerError> {
        if let Some(handle) = &self.handle {
            return Ok(handle.block_on(future));
        }
        if self.runtime.get().is_none() {
            let mut builder = if self.worker_threads > 0 {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(self.worker_threads);
                b
            } else {
                tokio::runtime::Builder::new_current_thread()
            };
            let runtime = builder
                .enable_all()
                .build()
                .map_err(|e| SummarizerError(format!("cannot start the summariser's runtime: {e}")))?;
            // Another clone may have won the race; its runtime serves both.
            let _ = self.runtime.set(runtime);
        }
        let runtime = self.runtime.get().ok_or_else(|| SummarizerError("no runtime".to_owned()))?;
        Ok(runtime.block_on(future))
    }
}

impl Summarizer for ModelSummarizer {
    fn name(&self) -> &str {
        "model"
    }

    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        let this = self.clone();
        self.block_on(async move { this.answer(request).await })?
    }
}
