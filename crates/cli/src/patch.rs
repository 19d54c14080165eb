//! `sessionlog patch`: one `patched` event, appended and projected under the store's lock.

use std::io::Write;

use anyhow::{anyhow, Result};
use serde_json::{Map, Value};

use crate::common::StoreSession;

/// Patch one session of a store: append a `patched` event under the store's lock and re-project.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
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
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let mut fields = Map::new();
    for item in &a.set {
        let (k, v) = item.split_once('=').ok_or_else(|| anyhow!("--set {item}: expected FIELD=JSON"))?;
        fields.insert(k.to_owned(), serde_json::from_str(v).unwrap_or_else(|_| Value::from(v)));
    }
    for k in &a.clear {
        fields.insert(k.clone(), Value::Null);
    }
    let at = a.at.unwrap_or_else(|| jiff::Timestamp::now().as_millisecond());
    let events = a.session.open().patch(&a.session.key, fields, at, a.preserve_activity)?;
    writeln!(out, "patched {} ({events} events)", a.session.key)?;
    Ok(())
}
