//! `sessionlog run`: one turn of the live loop (with its whole tool loop)
//! on a session of the configured state folder; prints the reply as it
//! streams, or with `--json` one JSON object per line.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use sessionlog_agent::{Agent, AgentEvent, AgentParts, Config, Message, SummarizerChoice};
use sessionlog_compaction::{Extractive, Summarizer};
use sessionlog_provider::summarize::ModelSummarizer;
use sessionlog_provider::{Delta, HttpProvider, Provider};

/// Runs one message through the live agent loop: the model, the tools, compaction.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The configuration file (TOML: state_dir, agent, workspace, [model], [compaction]).
    #[arg(long)]
    config: PathBuf,
    /// The session key (default agent:<agent>:main).
    #[arg(long)]
    session: Option<String>,
    /// The message.
    #[arg(long)]
    message: String,
    /// One JSON object per line: deltas, tool calls and results, compactions, the final usage.
    #[arg(long)]
    json: bool,
}

/// The agent a configuration describes, with the network client and the clock.
pub(crate) fn agent(config_path: &std::path::Path, handle: tokio::runtime::Handle) -> Result<Agent> {
    let config = Config::read(config_path)?;
    let model = config.model.model().with_context(|| format!("{}", config_path.display()))?;
    let options = config
        .model
        .client_options(|var| std::env::var(var).ok())
        .with_context(|| format!("{}", config_path.display()))?;
    let provider: Arc<dyn Provider> = Arc::new(HttpProvider::new(model, options)?);
    // The model summariser asks the same endpoint, on the loop's runtime
    // (compactions run in place on a worker thread, so its calls block
    // only that thread).
    let summarizer: Arc<dyn Fn() -> Box<dyn Summarizer + Send> + Send + Sync> =
        match config.compaction.summarizer {
            SummarizerChoice::Extractive => Arc::new(|| Box::new(Extractive) as Box<dyn Summarizer + Send>),
            SummarizerChoice::Model => {
                let model = ModelSummarizer::new(provider.clone()).on_runtime(handle);
                Arc::new(move || Box::new(model.clone()) as Box<dyn Summarizer + Send>)
            }
        };
    let parts = AgentParts {
        config,
        provider,
        summarizer,
        clock: Arc::new(|| jiff::Timestamp::now().as_millisecond()),
        tools: None,
    };
    Ok(Agent::new(parts)?)
}

/// A multi-threaded runtime for the loop (the store calls block in place).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let agent = agent(&a.config, tokio::runtime::Handle::current())?;
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let message = Message {
            key: a.session.clone(),
            text: a.message.clone(),
            events: Some(tx),
            ..Message::default()
        };
        let pending = agent.submit(message);
        while let Some(event) = events.recv().await {
            if a.json {
                writeln!(out, "{}", event.to_json())?;
            } else if let AgentEvent::Delta(Delta::TextDelta { text, .. }) = &event {
                write!(out, "{text}")?;
            } else if let AgentEvent::Compaction { reason, tokens_before, .. } = &event {
                eprintln!("[compacted ({reason}) at {tokens_before} tokens]");
            }
            out.flush()?;
        }
        let outcome = pending.await.context("the session's worker stopped")??;
        anyhow::Ok(outcome)
    })?;
    if a.json {
        writeln!(out, "{}", outcome.to_json())?;
    } else if !outcome.reply.is_empty() {
        writeln!(out)?;
    }
    if let Some(error) = &outcome.error {
        bail!("{error}");
    }
    Ok(())
}
