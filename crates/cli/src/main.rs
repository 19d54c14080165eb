//! `sessionlog`: the command line over sessionlog's libraries.
//!
//! Thin by design: each command parses arguments, calls the libraries and
//! prints. Exit status 0 on success, 1 on bad input (stderr names the file,
//! line and reason), 2 on usage errors.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod store;
mod sweep;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Event-sourced session logs for AI agents, compatible with Pi and OpenClaw.
#[derive(Debug, Parser)]
#[command(name = "sessionlog", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarise transcripts: format, version, counts by type and role, branches, skipped lines.
    Inspect {
        /// Pi/OpenClaw JSONL transcripts or sessionlog MessagePack segments.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON instead of text (an array when several files are given).
        #[arg(long)]
        json: bool,
        /// Fail on the first line Pi would drop instead of skipping it.
        #[arg(long)]
        strict: bool,
    },
    /// Print the entries after Pi's load-time migration (v1/v2 -> v3, deterministic ids).
    Entries {
        /// A Pi/OpenClaw JSONL transcript.
        file: PathBuf,
        /// Print the file as Pi leaves it after opening (JSONL) instead of a JSON document.
        #[arg(long)]
        jsonl: bool,
        /// Fail on the first line Pi would drop instead of skipping it.
        #[arg(long)]
        strict: bool,
    },
    /// Print the model context for a leaf, exactly as Pi builds it.
    Context {
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
        tokenizer: sessionlog_tokens::Tokenizer,
        #[command(flatten)]
        rules: RulesArg,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Print Pi's compaction decision for a leaf: context size, threshold, cut point, preparation.
    Cut {
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
        tokenizer: sessionlog_tokens::Tokenizer,
        #[command(flatten)]
        rules: RulesArg,
    },
    /// Replay a transcript under a compaction policy: virtual compactions and metrics.
    Replay {
        /// A Pi/OpenClaw transcript (or MessagePack segment).
        file: PathBuf,
        /// The policy (the flags below override it).
        #[command(flatten)]
        policy: PolicyChoice,
        /// Context window in tokens.
        #[arg(long)]
        context_window: Option<u64>,
        /// Reserve tokens (OpenClaw raises it to the floor).
        #[arg(long)]
        reserve: Option<u64>,
        /// OpenClaw's reserve floor (20000); 0 for Pi's behaviour.
        #[arg(long)]
        reserve_floor: Option<String>,
        /// Recent tokens kept verbatim.
        #[arg(long)]
        keep_recent: Option<u64>,
        /// Chunk size as a share of the window (default: OpenClaw's adaptive ratio).
        #[arg(long)]
        chunk_ratio: Option<f64>,
        /// When to compact: threshold or ratio:R (e.g. ratio:0.9).
        #[arg(long)]
        trigger: Option<sessionlog_compaction::Trigger>,
        /// User turns kept verbatim in each summary (OpenClaw's recentTurnsPreserve; 0 = off, at most 12).
        #[arg(long)]
        preserve_turns: Option<u32>,
        /// recorded (a recorded compaction's summary where the cut matches, else extractive) or extractive.
        #[arg(long, default_value = "extractive")]
        summarizer: sessionlog_replay::SummarizerKind,
        /// Token counter: pi, o200k or cl100k.
        #[arg(long, default_value = "pi")]
        tokenizer: sessionlog_tokens::Tokenizer,
        /// How to measure a context: usage (estimates calibrated by the recorded provider usage) or estimate.
        #[arg(long, default_value = "usage")]
        measure: sessionlog_replay::Measure,
        /// Print the JSON report (the default prints a short summary).
        #[arg(long)]
        json: bool,
        /// Write the virtual compaction (and memory-flush) entries as Pi JSONL here.
        #[arg(long)]
        events_out: Option<PathBuf>,
        /// Whose cut prepares each compaction: Pi 0.58 or 1.6 (default: the policy's `piRules`).
        #[arg(long, value_name = "0.58|1.6")]
        pi_rules: Option<sessionlog_events::PiRules>,
    },
    /// Sweep a grid of compaction policies over a corpus: metrics table, files and a chart.
    Sweep(sweep::SweepArgs),
    /// Import an OpenClaw state directory (or one sessions folder) as an event-sourced store.
    Import {
        /// A state directory holding agents/<id>/sessions/, or a sessions folder.
        path: PathBuf,
        /// The store to create (its agents/<id>/sessions/ get events.jsonl, sessions.json and the transcripts).
        #[arg(long)]
        into: PathBuf,
    },
    /// The sessions.json projection of a store, as one JSON object keyed by session key.
    Sessions {
        /// The store (a state directory).
        #[arg(long)]
        store: PathBuf,
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Time travel: the projection after the first N store events (per agent).
        #[arg(long)]
        at: Option<usize>,
        /// Rewrite every sessions.json from the log instead of printing.
        #[arg(long)]
        rebuild: bool,
        /// Print JSON (the only output; accepted for symmetry with the other commands).
        #[arg(long)]
        json: bool,
    },
    /// Store maintenance (OpenClaw `sessions cleanup`): prune stale entries, cap the store, archive
    /// the transcripts they leave behind. Reports only, unless --enforce.
    Cleanup {
        /// The store (a state directory).
        #[arg(long)]
        store: PathBuf,
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Apply the plan (default: report what would go, as OpenClaw's warn mode).
        #[arg(long)]
        enforce: bool,
        /// The time maintenance runs at, ISO-8601 or Unix ms (default: now).
        #[arg(long)]
        now: Option<String>,
        /// The caller's session key, never removed.
        #[arg(long)]
        active_key: Option<String>,
        /// Entries not updated for this long go (30d; units ms, s, m, h, d, w; `off` keeps them).
        #[arg(long, default_value = "30d")]
        prune_after: String,
        /// Keep at most this many entries, the most recently active first (`off` for no cap).
        #[arg(long, default_value = "5000")]
        max_entries: String,
    },
    /// One inbound turn (OpenClaw's initSessionState decision): reset trigger, then freshness;
    /// prints whether the key's session carries on or starts anew, and records it with --apply.
    Turn {
        /// The store, agent and the session key the message routes to.
        #[command(flatten)]
        session: StoreSession,
        /// The message's command body.
        #[arg(long)]
        body: String,
        /// The sender may run commands (only then can a trigger reset).
        #[arg(long)]
        authorized: bool,
        /// A group or channel message (mention patterns are stripped before matching).
        #[arg(long)]
        group: bool,
        /// A heartbeat, cron or exec event: never resets, never counts as activity.
        #[arg(long)]
        system_event: bool,
        /// A mention pattern (regular expression) of the agent; repeatable.
        #[arg(long)]
        mention: Vec<String>,
        /// Reset triggers (default /new and /reset); repeatable.
        #[arg(long)]
        trigger: Vec<String>,
        /// daily (default, at --at-hour), idle (after --idle-minutes) or manual.
        #[arg(long, default_value = "daily")]
        reset_mode: String,
        /// Hour of the daily reset, host time.
        #[arg(long)]
        at_hour: Option<i64>,
        /// Idle minutes before a reset.
        #[arg(long)]
        idle_minutes: Option<i64>,
        /// The host's offset from UTC in minutes (the daily boundary is host time).
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        utc_offset: i64,
        /// The time of the turn, ISO-8601 or Unix ms (default: now).
        #[arg(long)]
        now: Option<String>,
        /// Record the decision in the store (else only print it).
        #[arg(long)]
        apply: bool,
    },
    /// Patch one session of a store: append a `patched` event under the store's lock and re-project.
    Patch {
        /// The store, agent and session key.
        #[command(flatten)]
        session: StoreSession,
        /// FIELD=VALUE (VALUE as JSON, else a string); repeatable.
        #[arg(long)]
        set: Vec<String>,
        /// A field to clear; repeatable.
        #[arg(long)]
        clear: Vec<String>,
        /// Metadata only: do not count as activity (`updatedAt` kept).
        #[arg(long)]
        preserve_activity: bool,
        /// The event time in Unix ms (default: now).
        #[arg(long)]
        at: Option<i64>,
    },
    /// Record each session's token counters from its transcript's last assistant usage.
    Usage {
        /// The store (a state directory).
        #[arg(long)]
        store: PathBuf,
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Session keys: parse one, or route an inbound message to one.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Write a transcript as a MessagePack segment (length-prefixed, CRC-32 per record).
    Pack {
        /// The JSONL transcript to pack.
        file: PathBuf,
        /// Where to write the segment.
        #[arg(short, long)]
        output: PathBuf,
        /// Skip (and report) lines Pi would drop instead of refusing the file.
        #[arg(long)]
        lenient: bool,
    },
    /// Write a MessagePack segment back as JSONL.
    Unpack {
        /// The segment to read.
        file: PathBuf,
        /// Where to write the JSONL (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Generate a deterministic, realistic v3 transcript.
    Gen {
        /// Seed of the generator.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Entries after the header (a turn is never cut, so a few more may appear).
        #[arg(long, default_value_t = 200)]
        entries: usize,
        /// Times the conversation goes back to an earlier entry and continues there.
        #[arg(long, default_value_t = 0)]
        branches: usize,
        /// Compaction entries spread over the conversation.
        #[arg(long, default_value_t = 0)]
        compactions: usize,
        /// Mean length of a tool result's text, in characters.
        #[arg(long, default_value_t = 1200)]
        tool_output_chars: usize,
        /// Where to write (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Compact a session now (Pi's and OpenClaw's `/compact`): summarise up to the cut and append
    /// the `compaction` entry to the transcript, under its lock.
    Compact {
        /// The transcript (Pi/OpenClaw JSONL) to compact.
        file: PathBuf,
        /// The policy.
        #[command(flatten)]
        policy: PolicyChoice,
        /// What the summary should focus on (`/compact <text>`).
        #[arg(long)]
        instructions: Option<String>,
        /// extractive, or recorded (a recorded compaction's summary where the cut matches).
        #[arg(long, default_value = "extractive")]
        summarizer: sessionlog_replay::SummarizerKind,
        /// The entry's time, ISO-8601 or Unix ms (default: now).
        #[arg(long)]
        now: Option<String>,
        /// Print the entry without writing it.
        #[arg(long)]
        dry_run: bool,
        /// How long to wait for another writer's lock, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        lock_timeout_ms: u64,
        /// Whose cut decides, and whether the entry records the current system message (Pi 1.6):
        /// 0.58 or 1.6 (default: the policy's `piRules`).
        #[arg(long, value_name = "0.58|1.6")]
        pi_rules: Option<sessionlog_events::PiRules>,
    },
    /// Append JSONL entries read from stdin to a transcript, durably and under its lock.
    Append {
        /// The transcript to append to (created if missing).
        file: PathBuf,
        /// When to fsync: every-entry, per-batch or never.
        #[arg(long, default_value = "per-batch")]
        fsync: sessionlog_event_log::FsyncPolicy,
        /// Lines written per group commit.
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// How long to wait for another writer's lock, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        lock_timeout_ms: u64,
    },
}

/// Which Pi release's context and cut rules `context` and `cut` follow.
#[derive(Debug, Clone, Copy, clap::Args)]
struct RulesArg {
    /// Pi release whose rules decide: 0.58 (Pi 0.58.3, the default: the interface contract's oracle/pi)
    /// or 1.6 (Pi 1.6.0: context edits, system messages, projected cut).
    #[arg(long = "pi-rules", value_name = "0.58|1.6", default_value = "0.58")]
    pi_rules: sessionlog_events::PiRules,
}

/// A compaction policy: a file, or a built-in preset.
#[derive(Debug, Clone, clap::Args)]
struct PolicyChoice {
    /// A policy TOML file (see replay/policies/); else --preset.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// A built-in preset: openclaw (default), pi, claude-code or codex.
    #[arg(long, default_value = "openclaw")]
    preset: String,
}

/// One session of a store: where the store is, whose it is, which key.
#[derive(Debug, Clone, clap::Args)]
struct StoreSession {
    /// The store (a state directory).
    #[arg(long)]
    store: PathBuf,
    /// The agent whose store holds the session.
    #[arg(long, default_value = "main")]
    agent: String,
    /// The session key.
    key: String,
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

/// `sessionlog key …`.
#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Parse a session key: normalised form, shape, agent, chat type, cron/sub-agent/ACP/hook, thread.
    Parse {
        /// The key.
        key: String,
        /// Print JSON (the default is text).
        #[arg(long)]
        json: bool,
    },
    /// Route an inbound message to its session key (no bindings: the default agent).
    Route {
        /// The channel (telegram, discord, …).
        #[arg(long)]
        channel: String,
        /// direct, group or channel.
        #[arg(long, default_value = "direct")]
        peer_kind: String,
        /// The peer id on the channel.
        #[arg(long)]
        peer: String,
        /// The account on the channel.
        #[arg(long)]
        account: Option<String>,
        /// Thread id.
        #[arg(long)]
        thread: Option<String>,
        /// main, per-peer, per-channel-peer or per-account-channel-peer.
        #[arg(long, default_value = "main")]
        dm_scope: String,
        /// The agent handling the channel.
        #[arg(long, default_value = "main")]
        agent: String,
    },
}

/// Where in the log to look: a leaf entry and/or a log position.
#[derive(Debug, Clone, clap::Args)]
struct AtArgs {
    /// Build for this entry id instead of Pi's leaf (`null`: before the first entry).
    #[arg(long)]
    leaf: Option<String>,
    /// Time travel: the state after the first N entries of the file.
    #[arg(long)]
    at: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SESSIONLOG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = commands::run(cli.command, &mut out).and_then(|()| out.flush().map_err(Into::into));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed pipe (e.g. `| head`) is not a failure.
            if err.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sessionlog: {err:#}");
            ExitCode::from(1)
        }
    }
}
