//! `sessionlog entries`: the entries after Pi's load-time migration.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use sessionlog_event_log::{self as log, Mode, Reader};
use sessionlog_events::Entry;

use crate::common::{mode, print_pretty};

/// Print the entries after Pi's load-time migration (v1/v2 -> v3, deterministic ids).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A Pi/OpenClaw JSONL transcript.
    file: PathBuf,
    /// Print the file as Pi leaves it after opening (JSONL) instead of a JSON document.
    #[arg(long)]
    jsonl: bool,
    /// Fail on the first line Pi would drop instead of skipping it.
    #[arg(long)]
    strict: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    entries(&a.file, a.jsonl, mode(a.strict), out)
}

fn entries(path: &Path, jsonl: bool, mode: Mode, out: &mut dyn Write) -> Result<()> {
    let original = fs::read(path).with_context(|| format!("{}", path.display()))?;
    let loaded = log::read::load_from(Reader::new(original.as_slice(), path, mode))?;
    let t = &loaded.transcript;
    let mut rewritten = Vec::new();
    if t.migrated {
        t.write_jsonl(&mut rewritten);
    }
    let changed = t.migrated && rewritten != original;
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
