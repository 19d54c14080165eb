//! `sessionlog context`: the model context for a leaf, exactly as Pi builds it,
//! or (with engine flags) what the provider receives.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;
use sessionlog_context::engine::{ContextEngine, Registry};
use sessionlog_context::{context_doc, provider_context, ProviderRequest};
use sessionlog_event_log::map::FileBytes;
use sessionlog_tokens::Tokenizer;

use crate::common::{parse_now, print_pretty, AtArgs, RulesArg};

/// Print the model context for a leaf, exactly as Pi builds it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A Pi/OpenClaw transcript (or MessagePack segment).
    file: PathBuf,
    #[command(flatten)]
    at: AtArgs,
    /// Also print `llmMessages`: what a provider receives (Pi's convertToLlm).
    #[arg(long)]
    llm: bool,
    /// Print the JSON document (the default prints a short summary).
    #[arg(long)]
    json: bool,
    /// Counter for token figures: pi (Pi's chars/4), o200k or cl100k.
    #[arg(long, default_value = "pi")]
    tokenizer: Tokenizer,
    #[command(flatten)]
    rules: RulesArg,
    #[command(flatten)]
    engine: EngineArgs,
}

/// The provider-facing pipeline after the projection: engine, pruning, hygiene.
#[derive(Debug, Clone, clap::Args)]
struct EngineArgs {
    /// Assemble through this context engine (legacy, pinned, …); switches the output to the engine report.
    #[arg(long)]
    engine: Option<String>,
    /// Repair the context for this provider family (anthropic, bedrock, google, mistral, openai-responses, openai-completions, github-copilot-claude).
    #[arg(long)]
    provider: Option<String>,
    /// Apply cache-TTL pruning of old tool results (needs --now).
    #[arg(long, requires = "now")]
    prune: bool,
    /// The time the call happens, ISO-8601 or Unix ms (pruning compares it with the last cache touch).
    #[arg(long)]
    now: Option<String>,
    /// Token budget (the model's context window) given to the engine and the pruner.
    #[arg(long)]
    budget: Option<u64>,
    /// A file whose text the `pinned` engine keeps outside the history (repeatable).
    #[arg(long)]
    pin: Vec<PathBuf>,
    /// Keep only the last N user turns (OpenClaw's DM `historyLimit`; 0 = no limit).
    #[arg(long)]
    history_limit: Option<usize>,
}

impl EngineArgs {
    fn active(&self) -> bool {
        self.engine.is_some()
            || self.provider.is_some()
            || self.prune
            || self.budget.is_some()
            || self.history_limit.is_some()
    }
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    if a.engine.active() {
        return provider(a, out);
    }
    if a.json {
        // Straight from the bytes when the fast path takes the file on.
        if let Some(bytes) = jsonl_bytes(&a.file)? {
            let fast = sessionlog_context::fast::render_context(
                &bytes,
                a.at.at,
                a.at.leaf(),
                a.llm,
                a.rules.pi_rules,
            )
            // A file cut short while it was read: the general path reads it again.
            .filter(|_| bytes.intact());
            if let Some(doc) = fast {
                let file = a.file.display();
                let written = doc.write(out);
                if !bytes.intact() {
                    anyhow::bail!(
                        "{file}: the file was cut short while it was read; the context written is not whole"
                    );
                }
                written.with_context(|| format!("{file}"))?;
                // A one-shot command: leave the memory to the OS.
                std::mem::forget(doc);
                std::mem::forget(bytes);
                return Ok(());
            }
        }
    }
    let transcript = load(a)?;
    let file = a.file.display();
    let rules = a.rules.pi_rules;
    let doc = context_doc(&transcript, a.at.leaf(), a.llm, rules).with_context(|| format!("{file}"))?;
    if a.json {
        doc.write_json(&mut *out).with_context(|| format!("{file}"))?;
        // A one-shot command: leave the memory to the OS instead of freeing
        // every entry one by one.
        std::mem::forget(doc);
        std::mem::forget(transcript);
        return Ok(());
    }
    let counter = sessionlog_tokens::counter(a.tokenizer)?;
    let ctx = doc.context();
    let estimate = doc.estimate(&transcript, counter);
    let sent = sessionlog_context::llm::convert_to_llm_with(&ctx.messages, rules).len();
    let leaf = ctx.path.last().and_then(|&i| transcript.entries[i].id.as_deref()).unwrap_or("-");
    writeln!(out, "leaf      {leaf}")?;
    writeln!(out, "rules     Pi {}", rules.pi_version())?;
    writeln!(out, "model     {}", ctx.model_json())?;
    writeln!(out, "thinking  {}", ctx.thinking_level_json().unwrap_or(Value::Null))?;
    writeln!(out, "messages  {} ({sent} sent to the provider)", ctx.messages.len())?;
    writeln!(
        out,
        "tokens    {} ({} tokenizer: usage {} + estimated {})",
        estimate.tokens,
        counter.name(),
        estimate.usage_tokens,
        estimate.trailing_tokens
    )?;
    Ok(())
}

/// The transcript as `--at` asks, refused when the reader dropped a line
/// only for a lone surrogate escape (`\ud800`–`\udfff` unpaired) in a
/// string the typed view decodes: `JSON.parse` takes such a line and Pi
/// keeps it, so a context without it would differ from Pi's in silence.
fn load(a: &Args) -> Result<sessionlog_events::Transcript> {
    let opened = sessionlog_store::load_transcript(&a.file, sessionlog_event_log::Mode::Lenient)?;
    let skipped = &opened.loaded.skipped;
    let surrogate = |reason: &str| reason.contains("surrogate") || reason.contains("hex escape");
    if skipped.iter().any(|s| surrogate(&s.reason)) {
        // The file again, for those lines' text (a database or a segment
        // gives no such line, and nothing is refused).
        let bytes = fs::read(&a.file).unwrap_or_default();
        for s in skipped.iter().filter(|s| surrogate(&s.reason)) {
            let rest = usize::try_from(s.offset).ok().and_then(|o| bytes.get(o..)).unwrap_or_default();
            let line = &rest[..line_len(rest)];
            let json = std::str::from_utf8(line)
                .is_ok_and(|l| serde_json::from_str::<Box<serde_json::value::RawValue>>(l.trim()).is_ok());
            if json {
                anyhow::bail!(
                    "{}: line {}: a lone surrogate escape in a string ({}): Pi keeps this line, \
                     sessionlog cannot read it yet, so its context would differ from Pi's",
                    a.file.display(),
                    s.line,
                    s.reason
                );
            }
        }
    }
    Ok(a.at.cut(opened.loaded.transcript))
}

/// The length of the first line of `bytes` (up to its `\n`, or all of it).
fn line_len(bytes: &[u8]) -> usize {
    bytes.iter().position(|&b| b == b'\n').unwrap_or(bytes.len())
}

/// The bytes of a FILE argument that names a JSONL file, memory-mapped when
/// it is a regular file (`None` for a MessagePack segment or a transcript
/// in OpenClaw's database, which only `load_transcript` reads).
fn jsonl_bytes(path: &Path) -> Result<Option<FileBytes>> {
    // Only a regular file is taken here: a pipe can be read once, and the
    // general path reads it whole before telling its format.
    let regular = fs::metadata(path).is_ok_and(|m| m.is_file());
    if !regular
        || sessionlog_store::database_transcript(path).is_some()
        || sessionlog_store::is_segment(path)?
    {
        return Ok(None);
    }
    // SAFETY: `read_file` asks that nobody rewrites the file in place while
    // its bytes live. Transcripts are append-only logs (Pi, OpenClaw and this
    // project append, or replace a file by rename, which the mapping does not
    // see); a truncation is allowed and reported by `intact`, checked above
    // before anything is written and again after.
    #[allow(unsafe_code)]
    let bytes = unsafe { sessionlog_event_log::map::read_file(path) }
        .map_err(|source| sessionlog_store::StoreError::Io { path: path.to_owned(), source })?;
    Ok(Some(bytes))
}

/// `--engine/--provider/--prune/--budget/--history-limit`: the provider-facing context.
fn provider(a: &Args, out: &mut dyn Write) -> Result<()> {
    let e = &a.engine;
    let transcript = load(a)?;
    let counter = sessionlog_tokens::counter(Tokenizer::Pi)?;
    let mut pins = Vec::new();
    for path in &e.pin {
        pins.push(fs::read_to_string(path).with_context(|| format!("{}", path.display()))?);
    }
    let mut engine = Registry::with_pinned(pins, counter).resolve(e.engine.as_deref())?;
    let prune_at_ms = if e.prune { Some(parse_now(e.now.as_deref().unwrap_or_default())?) } else { None };
    let request = ProviderRequest {
        leaf: a.at.leaf(),
        history_limit: e.history_limit,
        token_budget: e.budget,
        prune_at_ms,
        provider: e.provider.as_deref(),
        rules: a.rules.pi_rules,
        ..ProviderRequest::default()
    };
    let doc = provider_context(&transcript, &request, &mut engine, counter)?;
    engine.dispose();
    print_pretty(out, &doc.to_json())
}
