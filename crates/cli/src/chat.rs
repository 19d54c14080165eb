//! `sessionlog chat`: an interactive session over the live loop. Replies
//! stream as they arrive; `/new` and `/reset` start a new session (the
//! store's turn decision), `/compact [instructions]` compacts now,
//! `/status` shows the model, the context used of the window, the tokens,
//! compactions and the session; `/model` names the model. Ctrl-C aborts the
//! running turn (Pi's aborted entry is recorded), not the program; at the
//! prompt it is ignored. `/quit` or end of input leaves.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use sessionlog_agent::{AgentEvent, Message, Status};
use sessionlog_provider::{CancellationToken, Delta, StopReason};
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{signal, SignalKind};

use crate::run::{agent, runtime};

/// An interactive session: streamed replies, /new, /reset, /compact, /model, /status; Ctrl-C aborts a run.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The configuration file (TOML: state_dir, agent, workspace, [model], [compaction]).
    #[arg(long)]
    config: PathBuf,
    /// The session key (default agent:<agent>:main).
    #[arg(long)]
    session: Option<String>,
}

/// `1234` as `1.2k`, as OpenClaw's `/status` prints token counts.
fn short(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        format!("{:.1}m", n as f64 / 1_000_000.0)
    }
}

fn print_status(out: &mut dyn Write, s: &Status) -> std::io::Result<()> {
    let percent = s.context_tokens.saturating_mul(100).checked_div(s.context_window).unwrap_or(0);
    writeln!(out, "Model: {}", s.model)?;
    writeln!(out, "Context: {}/{} tokens ({percent}%)", short(s.context_tokens), short(s.context_window))?;
    writeln!(out, "Tokens: {} in / {} out", short(s.last_input), short(s.last_output))?;
    writeln!(out, "Compactions: {}", s.compactions)?;
    writeln!(out, "Session: {} ({})", s.key, s.session_id.as_deref().unwrap_or("none yet"))
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let rt = runtime()?;
    rt.block_on(async {
        let agent = agent(&a.config, tokio::runtime::Handle::current())?;
        let key = a.session.as_deref();
        let mut interrupts = signal(SignalKind::interrupt())?;
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let model = agent.status(key).await?.model;
        writeln!(out, "sessionlog chat · {model} · /status /new /reset /compact /model /quit")?;
        loop {
            write!(out, "> ")?;
            out.flush()?;
            let line = tokio::select! {
                line = lines.next_line() => line?,
                _ = interrupts.recv() => { writeln!(out)?; continue; }
            };
            let Some(line) = line else { break };
            let text = line.trim();
            match text {
                "" => continue,
                "/quit" | "/exit" => break,
                "/status" => print_status(out, &agent.status(key).await?)?,
                "/model" => writeln!(out, "Model: {model}")?,
                _ if text == "/compact" || text.starts_with("/compact ") || text.starts_with("/compact:") => {
                    let rest = text["/compact".len()..].trim_start_matches(':').trim();
                    let instructions = (!rest.is_empty()).then(|| rest.to_owned());
                    match agent.compact(key, instructions).await? {
                        Some(AgentEvent::Compaction { tokens_before, summary_chars, .. }) => writeln!(
                            out,
                            "[compacted: {tokens_before} tokens before, summary of {summary_chars} characters]"
                        )?,
                        _ => writeln!(out, "[nothing to compact]")?,
                    }
                }
                _ => {
                    let cancel = CancellationToken::new();
                    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
                    let pending = agent.submit(Message {
                        key: key.map(str::to_owned),
                        text: text.to_owned(),
                        events: Some(tx),
                        cancel: Some(cancel.clone()),
                        ..Message::default()
                    });
                    loop {
                        let event = tokio::select! {
                            event = events.recv() => event,
                            _ = interrupts.recv() => { cancel.cancel(); continue; }
                        };
                        let Some(event) = event else { break };
                        match event {
                            AgentEvent::Session { session_id, decision, .. } if decision != "reuse" => {
                                writeln!(out, "[new session {session_id} ({decision})]")?
                            }
                            AgentEvent::Delta(Delta::TextDelta { text, .. }) => write!(out, "{text}")?,
                            AgentEvent::ToolCall { name, arguments, .. } => writeln!(out, "\n[{name} {arguments}]")?,
                            AgentEvent::ToolResult { name, is_error: true, .. } => writeln!(out, "[{name} failed]")?,
                            AgentEvent::Compaction { reason, tokens_before, .. } => {
                                writeln!(out, "\n[compacted ({reason}) at {tokens_before} tokens]")?
                            }
                            _ => {}
                        }
                        out.flush()?;
                    }
                    let outcome = pending.await.map_err(|_| anyhow::anyhow!("the session's worker stopped"))??;
                    if outcome.stop_reason == Some(StopReason::Aborted) {
                        writeln!(out, "\n[aborted]")?;
                    } else if let Some(error) = &outcome.error {
                        writeln!(out, "\n[error: {error}]")?;
                    } else if outcome.model_calls > 0 {
                        writeln!(out)?;
                    }
                }
            }
        }
        anyhow::Ok(())
    })
}
