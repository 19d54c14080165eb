//! `sessionlog cut`: Pi's compaction decision for a leaf.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use sessionlog_context::cut::Settings;
use sessionlog_context::{cut_doc, CutOptions};
use sessionlog_tokens::Tokenizer;

use crate::common::{print_pretty, AtArgs, RulesArg};

/// Print Pi's compaction decision for a leaf: context size, threshold, cut point, preparation.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A Pi/OpenClaw transcript (or MessagePack segment).
    file: PathBuf,
    #[command(flatten)]
    at: AtArgs,
    /// Tokens kept free for the reply (Pi's reserveTokens).
    #[arg(long, default_value_t = 16_384)]
    reserve: u64,
    /// Recent tokens kept verbatim (Pi's keepRecentTokens).
    #[arg(long, default_value_t = 20_000)]
    keep_recent: u64,
    /// The model's context window; without it `shouldCompact` is null.
    #[arg(long)]
    context_window: Option<u64>,
    /// Automatic compaction disabled (shouldCompact is then false).
    #[arg(long)]
    disabled: bool,
    /// Include the serialised history texts.
    #[arg(long)]
    text: bool,
    /// Print the JSON document (the default prints a short summary).
    #[arg(long)]
    json: bool,
    /// Counter for token figures: pi (Pi's chars/4), o200k or cl100k.
    #[arg(long, default_value = "pi")]
    tokenizer: Tokenizer,
    #[command(flatten)]
    rules: RulesArg,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let settings =
        Settings { enabled: !a.disabled, reserve_tokens: a.reserve, keep_recent_tokens: a.keep_recent };
    let rules = a.rules.pi_rules;
    let options = CutOptions { settings, context_window: a.context_window, with_text: a.text, rules };
    let transcript = a.at.load(&a.file)?;
    let counter = sessionlog_tokens::counter(a.tokenizer)?;
    let doc = cut_doc(&transcript, a.at.leaf(), &options, counter)
        .with_context(|| format!("{}", a.file.display()))?;
    if a.json {
        return print_pretty(out, &doc);
    }
    writeln!(out, "leaf             {}", doc["leafId"].as_str().unwrap_or("-"))?;
    writeln!(out, "rules            Pi {}", rules.pi_version())?;
    writeln!(out, "context tokens   {} ({} tokenizer)", doc["contextTokens"]["tokens"], counter.name())?;
    writeln!(out, "should compact   {}", doc["shouldCompact"])?;
    let p = &doc["preparation"];
    if p.is_null() {
        writeln!(out, "no preparation   {}", doc["noPreparationReason"].as_str().unwrap_or("-"))?;
    } else {
        writeln!(
            out,
            "first kept       {} (split turn: {})",
            p["firstKeptEntryId"].as_str().unwrap_or("-"),
            p["isSplitTurn"]
        )?;
        writeln!(out, "tokens before    {}", p["tokensBefore"])?;
        writeln!(
            out,
            "to summarise     {} messages, {} tokens",
            p["messagesToSummarize"]["count"], p["messagesToSummarize"]["estTokens"]
        )?;
        writeln!(
            out,
            "turn prefix      {} messages, {} tokens",
            p["turnPrefixMessages"]["count"], p["turnPrefixMessages"]["estTokens"]
        )?;
        writeln!(out, "read files       {}", p["details"]["readFiles"])?;
        writeln!(out, "modified files   {}", p["details"]["modifiedFiles"])?;
    }
    Ok(())
}
