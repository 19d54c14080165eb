//! What several commands share: output, times, leaves, policies, FILE arguments.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;
use sessionlog_compaction::Policy;
use sessionlog_context::Leaf;
use sessionlog_event_log::Mode;
use sessionlog_events::json::write_js_pretty;
use sessionlog_events::Transcript;

/// Prints `value` as `JSON.stringify(value, null, 2)` and a newline.
pub(crate) fn print_pretty(out: &mut dyn Write, value: &Value) -> Result<()> {
    let mut buf = Vec::new();
    write_js_pretty(&mut buf, value)?;
    buf.push(b'\n');
    out.write_all(&buf)?;
    Ok(())
}

/// `--now` as Unix ms: digits, or an ISO-8601 time.
pub(crate) fn parse_now(text: &str) -> Result<i64> {
    sessionlog_context::parse_time_ms(text)
        .ok_or_else(|| anyhow::anyhow!("--now: `{text}` is neither Unix milliseconds nor an ISO-8601 time"))
}

/// `--now` as Unix ms when given, else the clock.
pub(crate) fn now_or_clock(now: Option<&str>) -> Result<i64> {
    now.map_or_else(|| Ok(jiff::Timestamp::now().as_millisecond()), parse_now)
}

/// Lenient (Pi's reading) unless `--strict`.
pub(crate) fn mode(strict: bool) -> Mode {
    if strict {
        Mode::Strict
    } else {
        Mode::Lenient
    }
}

/// Where in the log to look: a leaf entry and/or a log position.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AtArgs {
    /// Build for this entry id instead of Pi's leaf (`null`: before the first entry).
    #[arg(long)]
    pub(crate) leaf: Option<String>,
    /// Time travel: the state after the first N entries of the file.
    #[arg(long)]
    pub(crate) at: Option<usize>,
}

impl AtArgs {
    /// The leaf choice.
    pub(crate) fn leaf(&self) -> Leaf<'_> {
        match self.leaf.as_deref() {
            None => Leaf::Default,
            Some("null") => Leaf::Null,
            Some(id) => Leaf::Id(id),
        }
    }

    /// The transcript of `file` as it stood at `--at`.
    pub(crate) fn load(&self, file: &Path) -> Result<Transcript> {
        Ok(self.cut(sessionlog_store::load_transcript(file, Mode::Lenient)?.loaded.transcript))
    }

    /// `transcript` as it stood at `--at`.
    pub(crate) fn cut(&self, transcript: Transcript) -> Transcript {
        match self.at {
            Some(n) => transcript.prefix(n),
            None => transcript,
        }
    }
}

/// Which Pi release's context and cut rules `context` and `cut` follow.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct RulesArg {
    /// Pi release whose rules decide: 0.58 (Pi 0.58.3, the default: the interface contract's oracle/pi)
    /// or 1.6 (Pi 1.6.0: context edits, system messages, projected cut).
    #[arg(long = "pi-rules", value_name = "0.58|1.6", default_value = "0.58")]
    pub(crate) pi_rules: sessionlog_events::PiRules,
}

/// A compaction policy: a file, or a built-in preset.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PolicyChoice {
    /// A policy TOML file (see replay/policies/); else --preset.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// A built-in preset: openclaw (default), pi, claude-code or codex.
    #[arg(long, default_value = "openclaw")]
    preset: String,
}

impl PolicyChoice {
    /// The policy file's policy, or the preset's.
    pub(crate) fn resolve(&self) -> Result<Policy> {
        match &self.policy {
            Some(path) => Ok(sessionlog_replay::load_policy(path)?),
            None => preset(&self.preset),
        }
    }
}

/// A built-in preset by name.
pub(crate) fn preset(name: &str) -> Result<Policy> {
    Policy::preset(name)
        .with_context(|| format!("unknown preset `{name}` ({})", sessionlog_compaction::PRESETS.join(", ")))
}

/// Writes `bytes` to `target` (replaced atomically), or to `out`.
pub(crate) fn write_to(target: Option<&Path>, bytes: &[u8], out: &mut dyn Write) -> Result<()> {
    match target {
        Some(target) => sessionlog_event_log::replace_atomically(target, bytes)
            .with_context(|| format!("{}", target.display())),
        None => Ok(out.write_all(bytes)?),
    }
}

/// Writes `bytes` to a new file `target`, or to `out`. An existing file (or
/// link) at `target` is refused, left as it was, unless `force`, which
/// replaces it atomically.
pub(crate) fn write_output(
    target: Option<&Path>,
    bytes: &[u8],
    force: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match target {
        Some(target) if force => write_to(Some(target), bytes, out),
        Some(target) => {
            sessionlog_event_log::create_atomically(target, bytes).map_err(|e| exists_or(target, e))
        }
        None => Ok(out.write_all(bytes)?),
    }
}

/// Refuses an output path that already names something, unless `force`.
pub(crate) fn check_output(target: &Path, force: bool) -> Result<()> {
    if !force && target.symlink_metadata().is_ok() {
        return Err(exists_or(target, std::io::ErrorKind::AlreadyExists.into()));
    }
    Ok(())
}

/// The error for an output that could not be created: "exists" with the way
/// out, or the I/O error, naming the file.
pub(crate) fn exists_or(target: &Path, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        anyhow::anyhow!("{}: exists; not replaced (--force replaces it)", target.display())
    } else {
        anyhow::Error::new(e).context(format!("{}", target.display()))
    }
}

/// One session of a store: where the store is, whose it is, which key.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreSession {
    /// The store (a state directory).
    #[arg(long)]
    pub(crate) store: PathBuf,
    /// The agent whose store holds the session.
    #[arg(long, default_value = "main")]
    pub(crate) agent: String,
    /// The session key.
    pub(crate) key: String,
    /// How long to wait for another writer's lock on the store log, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub(crate) lock_timeout_ms: u64,
}

impl StoreSession {
    /// The agent's store.
    pub(crate) fn open(&self) -> sessionlog_store::AgentStore {
        sessionlog_store::AgentStore::jsonl(&self.store, &self.agent)
            .with_lock_timeout(std::time::Duration::from_millis(self.lock_timeout_ms))
    }
}

/// A state folder's stores: all of them, or one agent's.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreArgs {
    /// The store (a state directory).
    #[arg(long)]
    store: PathBuf,
    /// Only this agent.
    #[arg(long)]
    agent: Option<String>,
}

impl StoreArgs {
    /// The agents' stores.
    pub(crate) fn open(&self) -> Result<Vec<sessionlog_store::AgentStore>> {
        let agents = sessionlog_store::discover_agent(&self.store, self.agent.as_deref())?;
        Ok(agents.into_iter().map(sessionlog_store::AgentStore::open).collect())
    }
}

/// The summariser names `--summarizer` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SummarizerName {
    /// Deterministic, no model.
    Extractive,
    /// A recorded compaction's summary where the cut matches, else extractive.
    Recorded,
    /// A model (`--model-config`), through a cache (`--model-cache`).
    Model,
}

/// Which summariser compactions use: `--summarizer`, and for `model` where
/// the model is and where its answers are kept.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SummarizerArgs {
    /// extractive (deterministic, no model), recorded (a recorded compaction's summary where the cut
    /// matches, else extractive) or model [default: the policy's `summarizer`, else extractive].
    #[arg(long, value_enum)]
    summarizer: Option<SummarizerName>,
    /// For --summarizer model: a TOML file with the model (the live loop's configuration, whose
    /// `[model]` section is used, or the model keys alone).
    #[arg(long, value_name = "FILE")]
    model_config: Option<PathBuf>,
    /// For --summarizer model: a folder of the model's answers, keyed by request. Filled when
    /// --model-config is given; without it the run answers from this folder alone, offline, and a
    /// request it does not hold fails the run.
    #[arg(long, value_name = "DIR")]
    model_cache: Option<PathBuf>,
}

/// A summariser for each replay of a run.
pub(crate) enum Summarizers {
    /// Extractive or recorded.
    Plain(sessionlog_replay::SummarizerKind),
    /// The model (clones share its cache and runtime), and the cache folder.
    Model(Box<sessionlog_provider::summarize::ModelSummarizer>, Option<PathBuf>),
}

impl SummarizerArgs {
    /// The summarisers these flags ask for, else the one the policy names
    /// (`summarizer` in a policy file); `parallel` for a sweep's workers.
    pub(crate) fn build(
        &self,
        parallel: bool,
        named: Option<sessionlog_compaction::SummarizerChoice>,
    ) -> Result<Summarizers> {
        use sessionlog_compaction::SummarizerChoice;
        use sessionlog_provider::summarize::{load_model_config, ModelSummarizer, SummaryCache};
        use sessionlog_replay::SummarizerKind;
        let model_flags = self.model_config.is_some() || self.model_cache.is_some();
        let name = self.summarizer.unwrap_or(match named {
            Some(SummarizerChoice::Recorded) => SummarizerName::Recorded,
            Some(SummarizerChoice::Model) => SummarizerName::Model,
            Some(SummarizerChoice::Extractive) | None => SummarizerName::Extractive,
        });
        let kind = match name {
            SummarizerName::Extractive => SummarizerKind::Extractive,
            SummarizerName::Recorded => SummarizerKind::Recorded,
            SummarizerName::Model => {
                let cache = match &self.model_cache {
                    Some(dir) => Some(std::sync::Arc::new(SummaryCache::open(dir)?)),
                    None => None,
                };
                let summarizer = match (&self.model_config, cache) {
                    (Some(file), cache) => {
                        let config = load_model_config(file)?;
                        ModelSummarizer::from_config(&config, |var| std::env::var(var).ok(), cache)
                            .with_context(|| format!("{}", file.display()))?
                    }
                    (None, Some(cache)) => ModelSummarizer::cache_only(cache)?,
                    (None, None) => {
                        anyhow::bail!(
                            "--summarizer model needs --model-config FILE, --model-cache DIR or both"
                        )
                    }
                };
                let summarizer = if parallel { summarizer.with_worker_threads(2) } else { summarizer };
                return Ok(Summarizers::Model(Box::new(summarizer), self.model_cache.clone()));
            }
        };
        if model_flags {
            anyhow::bail!("--model-config and --model-cache go with --summarizer model");
        }
        Ok(Summarizers::Plain(kind))
    }
}

impl SummarizerArgs {
    /// `--summarizer` was given.
    pub(crate) fn is_given(&self) -> bool {
        self.summarizer.is_some()
    }
}

impl Summarizers {
    /// A fresh summariser for one replay of `transcript`.
    pub(crate) fn for_transcript(
        &self,
        transcript: &Transcript,
    ) -> Box<dyn sessionlog_compaction::Summarizer> {
        match self {
            Summarizers::Plain(kind) => kind.for_transcript(transcript),
            Summarizers::Model(model, _) => Box::new((**model).clone()),
        }
    }

    /// After the run: a request a cache-only run did not find fails it
    /// (naming the key); failures the pipeline fell back from are reported.
    pub(crate) fn finish(&self) -> Result<()> {
        let Summarizers::Model(model, dir) = self else { return Ok(()) };
        let report = model.report();
        if let Some(key) = report.cache_misses.first() {
            anyhow::bail!(
                "summary cache miss: {key} (and {} more) not in {}; a run without --model-config sends \
                 nothing — run once with --model-config to fill it",
                report.cache_misses.len() - 1,
                dir.as_deref().map_or_else(String::new, |d| d.display().to_string())
            );
        }
        if let Some(first) = report.failures.first() {
            eprintln!(
                "sessionlog: warning: {} summariser request(s) failed and compaction fell back; first: {first}",
                report.failures.len()
            );
        }
        Ok(())
    }
}
