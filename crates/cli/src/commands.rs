//! The command implementations behind `main`.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use sessionlog_compaction::Policy;
use sessionlog_context::cut::Settings;
use sessionlog_context::{context_doc, cut_doc, CutOptions, Leaf};
use sessionlog_event_log::{
    self as log, AppendOptions, Appender, LockOptions, Mode, PackReader, PackWriter, ReadError, Reader,
};
use sessionlog_events::gen::{generate, GenOptions};
use sessionlog_events::json::write_js_pretty;
use sessionlog_events::{Entry, PiRules, Stats, Transcript};
use sessionlog_tokens::Tokenizer;

use crate::{AtArgs, Command, EngineArgs, KeyCommand};

/// `--now` as Unix ms when given, else the clock.
fn now_or_clock(now: Option<&str>) -> Result<i64> {
    now.map_or_else(|| Ok(jiff::Timestamp::now().as_millisecond()), parse_now)
}

/// `--now` as Unix ms: digits, or an ISO-8601 time.
fn parse_now(text: &str) -> Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let ms = sessionlog_context::js_date_ms(&Value::from(text));
    if ms.is_nan() {
        bail!("--now: `{text}` is neither Unix milliseconds nor an ISO-8601 time");
    }
    Ok(ms as i64)
}

fn engine_context(
    file: &Path,
    at: &AtArgs,
    args: &EngineArgs,
    rules: PiRules,
    out: &mut dyn Write,
) -> Result<()> {
    use sessionlog_context::engine::{ContextEngine, Registry};
    let transcript = load_at(file, at)?;
    let counter = sessionlog_tokens::counter(Tokenizer::Pi)?;
    let mut pins = Vec::new();
    for path in &args.pin {
        pins.push(fs::read_to_string(path).with_context(|| format!("{}", path.display()))?);
    }
    let mut engine = Registry::with_pinned(pins, counter).resolve(args.engine.as_deref())?;
    let prune_at_ms =
        if args.prune { Some(parse_now(args.now.as_deref().unwrap_or_default())?) } else { None };
    let request = sessionlog_context::ProviderRequest {
        leaf: leaf_of(at),
        history_limit: args.history_limit,
        token_budget: args.budget,
        prune_at_ms,
        provider: args.provider.as_deref(),
        rules,
        ..Default::default()
    };
    let doc = sessionlog_context::provider_context(&transcript, &request, &mut engine, counter)?;
    engine.dispose();
    print_pretty(out, &doc.to_json())
}

fn load_at(file: &Path, at: &AtArgs) -> Result<Transcript> {
    let (loaded, _) = load_any(file, Mode::Lenient)?;
    let transcript = loaded.transcript;
    Ok(match at.at {
        Some(n) => transcript.prefix(n),
        None => transcript,
    })
}

fn leaf_of(at: &AtArgs) -> Leaf<'_> {
    match at.leaf.as_deref() {
        None => Leaf::Default,
        Some("null") => Leaf::Null,
        Some(id) => Leaf::Id(id),
    }
}

fn context(
    file: &Path,
    at: &AtArgs,
    llm: bool,
    as_json: bool,
    (tokenizer, rules): (Tokenizer, PiRules),
    out: &mut dyn Write,
) -> Result<()> {
    let transcript = load_at(file, at)?;
    let doc =
        context_doc(&transcript, leaf_of(at), llm, rules).with_context(|| format!("{}", file.display()))?;
    if as_json {
        doc.write_json(&mut *out).with_context(|| format!("{}", file.display()))?;
        // A one-shot command: leave the memory to the OS instead of freeing
        // every entry one by one.
        std::mem::forget(doc);
        std::mem::forget(transcript);
        return Ok(());
    }
    let counter = sessionlog_tokens::counter(tokenizer)?;
    let ctx = doc.context();
    let estimate = match rules {
        PiRules::V0_58 => sessionlog_context::cut::estimate_context(&ctx.messages, counter),
        PiRules::V1_6 => {
            let path: Vec<&Entry> = ctx.path.iter().map(|&i| &transcript.entries[i]).collect();
            let projection = sessionlog_context::projection::project(&path);
            sessionlog_context::cut::projected::estimate_projected(&projection, &path, counter)
        }
    };
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

/// Reads a policy TOML file (fields as in `Policy`, camelCase).
/// A compaction policy read from a TOML file.
pub(crate) fn load_policy(path: &Path) -> Result<Policy> {
    let text = fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}: not a valid policy", path.display()))
}

impl crate::PolicyChoice {
    /// The policy file's policy, or the preset's.
    fn resolve(&self) -> Result<Policy> {
        match &self.policy {
            Some(path) => load_policy(path),
            None => Policy::preset(&self.preset).with_context(|| {
                let known = sessionlog_compaction::PRESETS.join(", ");
                format!("unknown preset `{}` ({known})", self.preset)
            }),
        }
    }
}

/// What `sessionlog compact` was asked to do.
struct CompactRun {
    policy: Policy,
    instructions: Option<String>,
    summarizer: sessionlog_replay::SummarizerKind,
    now_ms: i64,
    dry_run: bool,
    lock_timeout: Duration,
}

/// An entry id for `seed` that no entry of `transcript` has: 8 lowercase hex
/// digits, as Pi's ids, taken from a hash so the same compaction gets the same id.
fn fresh_id(transcript: &Transcript, seed: &str) -> String {
    use sha2::{Digest, Sha256};
    let taken: std::collections::HashSet<&str> =
        transcript.entries.iter().filter_map(|e| e.id.as_deref()).collect();
    (0u32..)
        .map(|n| {
            let digest = Sha256::digest(format!("{seed}\n{n}").as_bytes());
            digest[..4].iter().map(|b| format!("{b:02x}")).collect::<String>()
        })
        .find(|id| !taken.contains(id.as_str()))
        .unwrap_or_default()
}

/// `sessionlog compact`: the lock is taken before the transcript is read, so
/// no other writer can move the leaf between the cut and the append.
fn compact_cmd(file: &Path, run: &CompactRun, out: &mut dyn Write) -> Result<()> {
    use sessionlog_compaction::compact;
    if !file.is_file() {
        bail!("{}: no such transcript", file.display());
    }
    if is_segment(file)? {
        bail!(
            "{}: a MessagePack segment; compact appends to JSONL transcripts (unpack it first)",
            file.display()
        );
    }
    // Read once before touching the file: what is not a transcript is refused unchanged.
    let (loaded, format) = load_any(file, Mode::Lenient)?;
    if format != "pi-jsonl" && !run.dry_run {
        bail!(
            "{}: a {format} session, which sessionlog reads but never writes (--dry-run shows the compaction)",
            file.display()
        );
    }
    let lock = LockOptions { timeout: run.lock_timeout, ..LockOptions::default() };
    let (mut appender, loaded) = if run.dry_run {
        (None, loaded)
    } else {
        let appender = Appender::open(file, AppendOptions { fsync: log::FsyncPolicy::EveryEntry, lock })?;
        if let Some(repair) = appender.tail_repair() {
            eprintln!("sessionlog: {}: repaired torn tail: {repair:?}", file.display());
        }
        // Read again under the lock: another writer may have appended meanwhile.
        (Some(appender), load_any(file, Mode::Lenient)?.0)
    };
    let t = &loaded.transcript;
    let tree = t.tree();
    let Some(leaf) =
        t.entries.iter().rposition(|e| !matches!(e.kind, sessionlog_events::EntryKind::Session(_)))
    else {
        bail!("{}: nothing to compact (no entries)", file.display());
    };
    let path: Vec<&Entry> = tree
        .path(leaf)
        .with_context(|| format!("{}", file.display()))?
        .into_iter()
        .map(|i| &t.entries[i])
        .collect();
    let settings = Settings {
        enabled: true,
        reserve_tokens: run.policy.effective_reserve(),
        keep_recent_tokens: run.policy.keep_recent_tokens,
    };
    let counter = sessionlog_tokens::counter(Tokenizer::Pi)?;
    let rules = run.policy.pi_rules;
    let prep = sessionlog_context::cut::prepare_with(&path, &settings, counter, rules)
        .map_err(|why| anyhow::anyhow!("{}: nothing to compact ({})", file.display(), why.reason()))?;
    let mut summarizer = run.summarizer.for_transcript(t);
    let outcome = compact(&prep, &run.policy, summarizer.as_mut(), counter, run.instructions.as_deref());
    let parent = path.last().and_then(|e| e.id.clone());
    let timestamp = jiff::Timestamp::from_millisecond(run.now_ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .context("--now: out of range")?;
    let seed = format!(
        "{}\n{}\n{timestamp}\n{}",
        t.session_id().unwrap_or(""),
        parent.as_deref().unwrap_or(""),
        outcome.summary
    );
    let id = fresh_id(t, &seed);
    // Pi 1.6 keeps the system prompt and tools in force on the compaction:
    // system messages before the kept range would otherwise be lost.
    let system = rules
        .is_v1()
        .then(|| sessionlog_context::projection::compaction_system_message(&path, run.now_ms))
        .flatten();
    let head = sessionlog_events::write::Head { id: &id, parent_id: parent.as_deref(), timestamp: &timestamp };
    let entry =
        outcome.to_entry(&head, system).with_context(|| format!("{}: the compaction entry", file.display()))?;
    let value = entry.to_value();
    if let Some(appender) = appender.as_mut() {
        appender.append(&entry)?;
    }
    let summarized = prep.messages_to_summarize.len() + prep.turn_prefix_messages.len();
    let doc = json!({
        "file": file.display().to_string(),
        "written": appender.is_some(),
        "summarizedMessages": summarized,
        "fallback": outcome.fallback,
        "entry": value,
    });
    print_pretty(out, &doc)
}

/// What `sessionlog replay` was asked to do.
struct ReplayRun {
    policy: Policy,
    summarizer: sessionlog_replay::SummarizerKind,
    tokenizer: Tokenizer,
    measure: sessionlog_replay::Measure,
    json: bool,
    events_out: Option<PathBuf>,
}

fn replay_cmd(file: &Path, run: &ReplayRun, out: &mut dyn Write) -> Result<()> {
    let ReplayRun { policy, summarizer, tokenizer, measure, json: as_json, events_out } = run;
    let (tokenizer, measure, as_json, events_out) = (*tokenizer, *measure, *as_json, events_out.as_deref());
    let (loaded, _) = load_any(file, Mode::Lenient)?;
    let t = &loaded.transcript;
    let counter = sessionlog_tokens::counter(tokenizer)?;
    let mut summarizer = summarizer.for_transcript(t);
    let report = sessionlog_replay::replay(t, policy, summarizer.as_mut(), counter, measure)
        .with_context(|| format!("{}", file.display()))?;
    if let Some(path) = events_out {
        let mut buf = Vec::new();
        for line in report.event_lines()? {
            buf.extend_from_slice(line.raw().as_bytes());
            buf.push(b'\n');
        }
        write_atomic(path, &buf)?;
    }
    if as_json {
        let mut value = serde_json::to_value(&report)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("file".to_owned(), Value::from(file.display().to_string()));
        }
        return print_pretty(out, &value);
    }
    let m = &report.metrics;
    writeln!(out, "policy            {} (threshold {} tokens)", report.policy.name, report.threshold)?;
    writeln!(
        out,
        "summariser        {} / tokenizer {} / measure {:?}",
        report.summarizer, report.tokenizer, report.measure
    )?;
    writeln!(out, "model calls       {}", m.model_calls)?;
    writeln!(
        out,
        "compactions       {} ({} below threshold, {} degraded)",
        m.compactions, m.compactions_below_threshold, m.degraded_summaries
    )?;
    writeln!(
        out,
        "recorded          {} ({} below this policy's threshold)",
        m.recorded_compactions, m.recorded_below_threshold
    )?;
    for r in &report.recorded {
        let tokens = r.tokens_before.map_or_else(|| "-".to_owned(), |t| t.to_string());
        writeln!(
            out,
            "  {} tokensBefore {tokens} trigger {}{}",
            r.entry_id.as_deref().unwrap_or("-"),
            r.trigger.as_deref().unwrap_or("-"),
            if r.below_threshold { " (below threshold)" } else { "" }
        )?;
    }
    writeln!(out, "context           peak {} / mean {:.0}", m.peak_context_tokens, m.mean_context_tokens)?;
    writeln!(out, "tokens billed     {}", m.tokens_billed)?;
    writeln!(out, "summary tokens    {}", m.summary_tokens)?;
    writeln!(out, "overflow calls    {}", m.overflow_calls)?;
    writeln!(out, "broken tool pairs {}", m.broken_tool_pairs)?;
    writeln!(
        out,
        "identifier recall {:.4} ({}/{})",
        m.identifier_recall, m.identifier_hits, m.identifier_mentions
    )?;
    writeln!(out, "memory flushes    {}", m.memory_flushes)?;
    Ok(())
}

fn cut(
    file: &Path,
    at: &AtArgs,
    options: &CutOptions,
    as_json: bool,
    tokenizer: Tokenizer,
    out: &mut dyn Write,
) -> Result<()> {
    let transcript = load_at(file, at)?;
    let counter = sessionlog_tokens::counter(tokenizer)?;
    let doc =
        cut_doc(&transcript, leaf_of(at), options, counter).with_context(|| format!("{}", file.display()))?;
    if as_json {
        return print_pretty(out, &doc);
    }
    writeln!(out, "leaf             {}", doc["leafId"].as_str().unwrap_or("-"))?;
    writeln!(out, "rules            Pi {}", options.rules.pi_version())?;
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

/// Runs one command, writing its output to `out`.
pub(crate) fn run(command: Command, out: &mut dyn Write) -> Result<()> {
    match command {
        Command::Inspect { files, json, strict } => inspect_all(&files, json, mode(strict), out),
        Command::Entries { file, jsonl, strict } => entries(&file, jsonl, mode(strict), out),
        Command::Pack { file, output, lenient } => pack(&file, &output, mode(!lenient)),
        Command::Unpack { file, output } => unpack(&file, output.as_deref(), out),
        Command::Gen { seed, entries, branches, compactions, tool_output_chars, output } => {
            let options = GenOptions { seed, entries, branches, compactions, tool_output_chars };
            gen(options, output.as_deref(), out)
        }
        Command::Context { file, at, engine, rules, .. } if engine.active() => {
            engine_context(&file, &at, &engine, rules.pi_rules, out)
        }
        Command::Context { file, at, llm, json, tokenizer, rules, .. } => {
            context(&file, &at, llm, json, (tokenizer, rules.pi_rules), out)
        }
        Command::Cut {
            file,
            at,
            reserve,
            keep_recent,
            context_window,
            disabled,
            text,
            json,
            tokenizer,
            rules,
        } => {
            let settings =
                Settings { enabled: !disabled, reserve_tokens: reserve, keep_recent_tokens: keep_recent };
            let options = CutOptions { settings, context_window, with_text: text, rules: rules.pi_rules };
            cut(&file, &at, &options, json, tokenizer, out)
        }
        Command::Replay {
            file,
            policy,
            context_window,
            reserve,
            reserve_floor,
            keep_recent,
            chunk_ratio,
            trigger,
            preserve_turns,
            summarizer,
            tokenizer,
            measure,
            json,
            events_out,
            pi_rules,
        } => {
            let mut p = policy.resolve()?;
            if let Some(v) = pi_rules {
                p.pi_rules = v;
            }
            if let Some(v) = context_window {
                p.context_window = v;
            }
            if let Some(v) = reserve {
                p.reserve_tokens = v;
            }
            if let Some(v) = reserve_floor {
                p.reserve_tokens_floor = v.parse().context("--reserve-floor")?;
            }
            if let Some(v) = keep_recent {
                p.keep_recent_tokens = v;
            }
            if let Some(v) = chunk_ratio {
                p.chunk_ratio = Some(v);
            }
            if let Some(v) = trigger {
                p.trigger = v;
            }
            if let Some(v) = preserve_turns {
                p.recent_turns_preserve = v;
            }
            let run = ReplayRun { policy: p, summarizer, tokenizer, measure, json, events_out };
            replay_cmd(&file, &run, out)
        }
        Command::Sweep(args) => {
            if crate::sweep::run(&args, out)? {
                Ok(())
            } else {
                Err(anyhow::anyhow!("some inputs were skipped (listed above)"))
            }
        }
        Command::Import { path, into } => crate::store::import(&path, &into, out),
        Command::Sessions { store, agent, at, rebuild, json: _ } => {
            crate::store::sessions(&store, agent.as_deref(), at, rebuild, out)
        }
        Command::Patch { session, set, clear, preserve_activity, at } => crate::store::patch(
            &crate::store::PatchArgs {
                store: &session.store,
                agent: &session.agent,
                key: &session.key,
                set: &set,
                clear: &clear,
                preserve_activity,
                at,
            },
            out,
        ),
        Command::Usage { store, agent } => crate::store::usage(&store, agent.as_deref(), out),
        Command::Key(KeyCommand::Parse { key, json }) => {
            let info = sessionlog_sessions::key_info(&key);
            if json {
                print_pretty(out, &serde_json::to_value(&info)?)
            } else {
                writeln!(out, "{}", serde_json::to_string(&info)?)?;
                Ok(())
            }
        }
        Command::Key(KeyCommand::Route { channel, peer_kind, peer, account, thread, dm_scope, agent }) => {
            use sessionlog_sessions::route::{DmScope, Inbound, Peer, PeerKind, RouteConfig};
            let kind = match peer_kind.as_str() {
                "direct" => PeerKind::Direct,
                "group" => PeerKind::Group,
                "channel" => PeerKind::Channel,
                other => bail!("--peer-kind: `{other}` (direct, group, channel)"),
            };
            let dm_scope = match dm_scope.as_str() {
                "main" => DmScope::Main,
                "per-peer" => DmScope::PerPeer,
                "per-channel-peer" => DmScope::PerChannelPeer,
                "per-account-channel-peer" => DmScope::PerAccountChannelPeer,
                other => bail!(
                    "--dm-scope: `{other}` (main, per-peer, per-channel-peer, per-account-channel-peer)"
                ),
            };
            let cfg = RouteConfig {
                agents: vec![agent],
                dm_scope,
                main_key: "main".to_owned(),
                ..RouteConfig::default()
            };
            let inbound = Inbound {
                channel,
                account_id: account,
                peer: Peer { kind, id: peer },
                parent_peer: None,
                guild_id: None,
                team_id: None,
                member_roles: Vec::new(),
                thread_id: thread,
            };
            print_pretty(out, &serde_json::to_value(sessionlog_sessions::route(&cfg, &inbound))?)
        }
        Command::Cleanup { store, agent, enforce, now, active_key, prune_after, max_entries } => {
            use sessionlog_sessions::maintenance::{parse_duration_ms, Settings};
            let prune_after_ms = match prune_after.as_str() {
                "off" => None,
                text => Some(parse_duration_ms(text).map_err(|e| anyhow::anyhow!("--prune-after {e}"))?),
            };
            let max_entries = match max_entries.as_str() {
                "off" => None,
                text => Some(text.parse().with_context(|| format!("--max-entries {text}"))?),
            };
            let now_ms = now_or_clock(now.as_deref())?;
            let args = crate::store::CleanupArgs {
                store: &store,
                agent: agent.as_deref(),
                enforce,
                now_ms,
                active_key: active_key.as_deref(),
                settings: Settings { prune_after_ms, max_entries },
            };
            crate::store::cleanup(&args, out)
        }
        Command::Turn {
            session: crate::StoreSession { store, agent, key },
            body,
            authorized,
            group,
            system_event,
            mention,
            trigger,
            reset_mode,
            at_hour,
            idle_minutes,
            utc_offset,
            now,
            apply,
        } => {
            use sessionlog_sessions::policy::{resolve_reset, ResetConfig, ResetMode, ResetRule};
            let mode = match reset_mode.as_str() {
                "daily" => ResetMode::Daily,
                "idle" => ResetMode::Idle,
                "manual" => ResetMode::Manual,
                other => bail!("unknown reset mode `{other}` (daily, idle, manual)"),
            };
            let cfg = ResetConfig {
                base: Some(ResetRule { mode: Some(mode), at_hour, idle_minutes }),
                ..ResetConfig::default()
            };
            let rule = resolve_reset(&cfg, &key, None);
            let now_ms = now_or_clock(now.as_deref())?;
            let triggers: Vec<&str> = if trigger.is_empty() {
                sessionlog_sessions::turn::DEFAULT_RESET_TRIGGERS.to_vec()
            } else {
                trigger.iter().map(String::as_str).collect()
            };
            let args = crate::store::TurnArgs {
                store: &store,
                agent: &agent,
                key: &key,
                inbound: sessionlog_sessions::turn::Inbound {
                    body: &body,
                    is_group: group,
                    command_authorized: authorized,
                    is_system_event: system_event,
                    mention_patterns: &mention,
                },
                triggers,
                rule,
                now_ms,
                utc_offset_minutes: utc_offset,
                apply,
            };
            crate::store::turn(&args, out)
        }
        Command::Compact {
            file,
            policy,
            instructions,
            summarizer,
            now,
            dry_run,
            lock_timeout_ms,
            pi_rules,
        } => {
            let mut policy = policy.resolve()?;
            if let Some(v) = pi_rules {
                policy.pi_rules = v;
            }
            let now_ms = now_or_clock(now.as_deref())?;
            let run = CompactRun {
                policy,
                instructions,
                summarizer,
                now_ms,
                dry_run,
                lock_timeout: Duration::from_millis(lock_timeout_ms),
            };
            compact_cmd(&file, &run, out)
        }
        Command::Append { file, fsync, batch, lock_timeout_ms } => {
            let lock =
                LockOptions { timeout: Duration::from_millis(lock_timeout_ms), ..LockOptions::default() };
            append(&file, AppendOptions { fsync, lock }, batch.max(1))
        }
    }
}

fn mode(strict: bool) -> Mode {
    if strict {
        Mode::Strict
    } else {
        Mode::Lenient
    }
}

/// Prints `value` as `JSON.stringify(value, null, 2)` and a newline.
pub(crate) fn print_pretty(out: &mut dyn Write, value: &Value) -> Result<()> {
    let mut buf = Vec::new();
    write_js_pretty(&mut buf, value)?;
    buf.push(b'\n');
    out.write_all(&buf)?;
    Ok(())
}

fn is_segment(path: &Path) -> Result<bool> {
    let mut magic = [0u8; 8];
    let mut file = File::open(path).with_context(|| format!("{}", path.display()))?;
    let n = file.read(&mut magic).with_context(|| format!("{}", path.display()))?;
    Ok(n == magic.len() && &magic == log::pack::MAGIC)
}

/// Loads a JSONL transcript, a MessagePack segment, or an imported session
/// (Claude Code, Codex), naming its format.
pub(crate) fn load_any(path: &Path, mode: Mode) -> Result<(log::Loaded, &'static str)> {
    if is_segment(path)? {
        let file = File::open(path).with_context(|| format!("{}", path.display()))?;
        let mut text = String::new();
        for line in PackReader::new(BufReader::new(file)).with_context(|| format!("{}", path.display()))? {
            text.push_str(&line.with_context(|| format!("{}", path.display()))?);
            text.push('\n');
        }
        let loaded = log::read::load_from(Reader::new(text.as_bytes(), path, mode))?;
        return Ok((loaded, "sessionlog-msgpack"));
    }
    match log::load(path, mode) {
        Ok(loaded) => Ok((loaded, "pi-jsonl")),
        // Not a Pi transcript: a Claude Code or Codex session, recognised by content.
        Err(err @ ReadError::NoHeader { .. }) => match log::import::load_foreign(path, mode)? {
            Some((loaded, format)) => Ok((loaded, format.name())),
            None => Err(err.into()),
        },
        Err(err) => Err(err.into()),
    }
}

fn counts(map: &std::collections::BTreeMap<String, usize>) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect())
}

fn inspect_all(files: &[PathBuf], as_json: bool, mode: Mode, out: &mut dyn Write) -> Result<()> {
    if let [file] = files {
        let report = inspect(file, mode)?;
        return if as_json { print_pretty(out, &report) } else { print_report(&report, out) };
    }
    let mut reports = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let report = inspect(file, mode)?;
        if !as_json {
            if i > 0 {
                writeln!(out)?;
            }
            print_report(&report, out)?;
        }
        reports.push(report);
    }
    if as_json {
        print_pretty(out, &Value::Array(reports))?;
    }
    Ok(())
}

fn inspect(path: &Path, mode: Mode) -> Result<Value> {
    let (loaded, format) = load_any(path, mode)?;
    let t = &loaded.transcript;
    let stats = Stats::of(t);
    let header = t.header.header().cloned().unwrap_or_default();
    let skipped: Vec<Value> = loaded
        .skipped
        .iter()
        .map(|s| json!({"line": s.line, "offset": s.offset, "column": s.column, "reason": s.reason}))
        .collect();
    let report = json!({
        "file": path.display().to_string(),
        "format": format,
        "version": t.original_version.map_or(Value::from(1), sessionlog_context::assemble::number),
        "currentVersion": 3,
        "migrated": t.migrated,
        "sessionId": t.session_id(),
        "cwd": header.cwd,
        "sessionName": t.session_name(),
        "entryCount": stats.entry_count,
        "byType": counts(&stats.by_type),
        "byRole": counts(&stats.by_role),
        "leafId": t.default_leaf().and_then(|e| e.id.clone()),
        "branchPoints": stats.branch_points,
        "leaves": stats.leaves,
        "entriesWithoutId": stats.without_id,
        "skippedLines": skipped,
        "invalidUtf8Lines": loaded.replaced_utf8,
    });
    Ok(report)
}

fn print_report(r: &Value, out: &mut dyn Write) -> Result<()> {
    let text = |v: &Value| v.as_str().map_or_else(|| "-".to_owned(), str::to_owned);
    let migrated = if r["migrated"] == true { ", migrated" } else { "" };
    writeln!(out, "file          {}", text(&r["file"]))?;
    writeln!(out, "format        {}, version {} (read as v3{migrated})", text(&r["format"]), r["version"])?;
    writeln!(out, "session       {}", text(&r["sessionId"]))?;
    if let Some(name) = r["sessionName"].as_str() {
        writeln!(out, "name          {name}")?;
    }
    writeln!(out, "entries       {}", r["entryCount"])?;
    for (ty, n) in r["byType"].as_object().into_iter().flatten() {
        writeln!(out, "  {ty:<26} {n}")?;
    }
    writeln!(out, "messages by role")?;
    for (role, n) in r["byRole"].as_object().into_iter().flatten() {
        writeln!(out, "  {role:<26} {n}")?;
    }
    writeln!(out, "leaf          {}", text(&r["leafId"]))?;
    let ids = |v: &Value| v.as_array().map_or(0, Vec::len);
    writeln!(out, "branch points {} {}", ids(&r["branchPoints"]), r["branchPoints"])?;
    writeln!(out, "leaves        {}", ids(&r["leaves"]))?;
    match r["skippedLines"].as_array() {
        Some(skipped) if !skipped.is_empty() => {
            writeln!(out, "skipped lines {}", skipped.len())?;
            for s in skipped {
                writeln!(out, "  line {}: {}", s["line"], text(&s["reason"]))?;
            }
        }
        _ => writeln!(out, "skipped lines none")?,
    }
    if ids(&r["invalidUtf8Lines"]) > 0 {
        writeln!(out, "invalid UTF-8 replaced on lines {}", r["invalidUtf8Lines"])?;
    }
    Ok(())
}

fn entries(path: &Path, jsonl: bool, mode: Mode, out: &mut dyn Write) -> Result<()> {
    let original = fs::read(path).with_context(|| format!("{}", path.display()))?;
    let loaded = match log::read::load_from(Reader::new(original.as_slice(), path, mode)) {
        Ok(loaded) => loaded,
        // An imported session: `--jsonl` prints the mapped entries.
        Err(ReadError::NoHeader { .. }) => load_any(path, mode)?.0,
        Err(err) => return Err(err.into()),
    };
    let t = &loaded.transcript;
    let imported = t.header.field_value("source").is_some();
    let mut rewritten = Vec::new();
    if t.migrated || imported {
        t.write_jsonl(&mut rewritten);
    }
    let changed = (t.migrated || imported) && rewritten != original;
    if jsonl {
        // As Pi leaves the file after opening: rewritten if migrated, else untouched.
        out.write_all(if changed { &rewritten } else { &original })?;
        return Ok(());
    }
    let labels: Map<String, Value> =
        t.labels().into_iter().map(|(id, label)| (id.to_owned(), Value::from(label))).collect();
    let mut doc = json!({
        "originalVersion": t.original_version.map_or(Value::from(1), sessionlog_context::assemble::number),
        "currentVersion": 3,
        "rewrittenOnOpen": changed,
        "sessionId": t.session_id(),
        "sessionName": t.session_name(),
        "leafId": t.default_leaf().and_then(|e| e.id.clone()),
        "entryCount": t.tree_entries().count(),
        "labels": labels,
        "header": t.header.to_value(),
        "entries": t.tree_entries().map(Entry::to_value).collect::<Vec<_>>(),
    });
    if t.default_leaf().is_some_and(|e| e.id.is_none()) {
        // Pi's leaf id is then `undefined`, which JSON leaves out.
        doc.as_object_mut().map(|o| o.remove("leafId"));
    }
    print_pretty(out, &doc)
}

fn pack(path: &Path, output: &Path, mode: Mode) -> Result<()> {
    let mut reader = Reader::open(path, mode)?;
    let tmp = sibling_tmp(output);
    let file = File::create(&tmp).with_context(|| format!("{}", tmp.display()))?;
    let mut writer = PackWriter::new(io::BufWriter::new(file))?;
    let mut records = 0u64;
    for record in reader.by_ref() {
        let record = record?;
        writer
            .push_json(record.entry.raw())
            .with_context(|| format!("{}:{}", path.display(), record.line))?;
        records += 1;
    }
    let file = writer.finish()?.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&tmp, output).with_context(|| format!("{}", output.display()))?;
    for s in reader.skipped() {
        eprintln!("sessionlog: {}:{}: skipped: {}", path.display(), s.line, s.reason);
    }
    eprintln!("packed {records} records into {}", output.display());
    Ok(())
}

/// A temporary name beside `path`, renamed over it when complete.
fn sibling_tmp(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn unpack(path: &Path, output: Option<&Path>, out: &mut dyn Write) -> Result<()> {
    let file = File::open(path).with_context(|| format!("{}", path.display()))?;
    let reader = PackReader::new(BufReader::new(file)).with_context(|| format!("{}", path.display()))?;
    let mut buf = Vec::new();
    for line in reader {
        buf.extend_from_slice(line.with_context(|| format!("{}", path.display()))?.as_bytes());
        buf.push(b'\n');
    }
    match output {
        Some(target) => write_atomic(target, &buf),
        None => Ok(out.write_all(&buf)?),
    }
}

fn write_atomic(target: &Path, bytes: &[u8]) -> Result<()> {
    log::replace_atomically(target, bytes).with_context(|| format!("{}", target.display()))
}

fn gen(options: GenOptions, output: Option<&Path>, out: &mut dyn Write) -> Result<()> {
    let mut buf = Vec::new();
    for line in generate(options) {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    match output {
        Some(target) => write_atomic(target, &buf),
        None => Ok(out.write_all(&buf)?),
    }
}

fn append(path: &Path, options: AppendOptions, batch: usize) -> Result<()> {
    if path.is_file() && is_segment(path)? {
        bail!("{}: a MessagePack segment; append writes JSONL lines (unpack it first)", path.display());
    }
    let mut appender = Appender::open(path, options)?;
    if let Some(repair) = appender.tail_repair() {
        eprintln!("sessionlog: {}: repaired torn tail: {repair:?}", path.display());
    }
    let stdin = io::stdin();
    let mut pending: Vec<Entry> = Vec::with_capacity(batch);
    for (i, line) in stdin.lock().lines().enumerate() {
        let line = line.context("<stdin>")?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = Entry::parse(&line).with_context(|| format!("<stdin>:{}", i + 1))?;
        pending.push(entry);
        if pending.len() >= batch {
            appender.append_batch(&pending)?;
            pending.clear();
        }
    }
    if !pending.is_empty() {
        appender.append_batch(&pending)?;
    }
    Ok(())
}
