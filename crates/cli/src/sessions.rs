//! `sessionlog sessions`: the `sessions.json` projection of a store, or the
//! session entries OpenClaw keeps (`sessions.json`, or its SQLite store).

use std::io::Write;

use anyhow::{bail, Result};
use serde_json::{Map, Value};

use crate::common::{print_pretty, StoreArgs};

/// The sessions of a store as one JSON object keyed by session key: the projection of
/// sessionlog's store log, else OpenClaw's own entries (sessions.json, or its SQLite store).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The store (a state directory) and, optionally, one agent.
    #[command(flatten)]
    stores: StoreArgs,
    /// Time travel: the projection after the first N store events (per agent).
    #[arg(long)]
    at: Option<usize>,
    /// Rewrite every sessions.json from the log instead of printing.
    #[arg(long)]
    rebuild: bool,
    /// Print JSON (the only output; accepted for symmetry with the other commands).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    if a.rebuild && a.at.is_some() {
        bail!("--rebuild writes the projection of the whole log; it does not take --at");
    }
    let mut merged = Map::new();
    for store in a.stores.open()? {
        let entries = if store.is_read_only() {
            // OpenClaw's SQLite store: its entries as stored, read-only.
            if a.rebuild || a.at.is_some() {
                bail!(
                    "agent {}: its sessions are in OpenClaw's SQLite store, which has no store log \
                     (--rebuild and --at need one; `sessionlog import` makes one)",
                    store.id()
                );
            }
            store.read_index()?
        } else if !store.has_log() {
            // OpenClaw's own sessions.json, before sessionlog keeps a log for it.
            if a.rebuild || a.at.is_some() {
                continue;
            }
            store.read_index()?
        } else if a.rebuild {
            let sessions = store.rebuild()?;
            writeln!(out, "rebuilt {} ({sessions} sessions)", store.projection_path().display())?;
            continue;
        } else {
            store.project(a.at)?
        };
        for (key, entry) in entries {
            // Keys carry their agent id already; a legacy key gets it prefixed.
            let key = if sessionlog_sessions::parse_agent_key(&key).is_some() {
                key
            } else {
                format!("agent:{}:{key}", store.id())
            };
            merged.insert(key, entry);
        }
    }
    if !a.rebuild {
        print_pretty(out, &Value::Object(merged))?;
    }
    Ok(())
}
