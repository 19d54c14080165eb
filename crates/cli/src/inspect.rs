//! `sessionlog inspect`: format, version, counts by type and role, branches, skipped lines.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde_json::Value;

use crate::common::{mode, print_pretty};

/// Summarise transcripts: format, version, counts by type and role, branches, skipped lines.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Pi/OpenClaw JSONL transcripts or sessionlog MessagePack segments.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print JSON instead of text (an array when several files are given).
    #[arg(long)]
    json: bool,
    /// Fail on the first line Pi would drop instead of skipping it.
    #[arg(long)]
    strict: bool,
}

pub(crate) fn run(a: &Args, out: &mut dyn Write) -> Result<()> {
    let inspect = |path: &PathBuf| -> Result<Value> {
        Ok(sessionlog_store::load_transcript(path, mode(a.strict))?.report(path))
    };
    if let [file] = a.files.as_slice() {
        let report = inspect(file)?;
        return if a.json { print_pretty(out, &report) } else { print_report(&report, out) };
    }
    let mut reports = Vec::with_capacity(a.files.len());
    for (i, file) in a.files.iter().enumerate() {
        let report = inspect(file)?;
        if !a.json {
            if i > 0 {
                writeln!(out)?;
            }
            print_report(&report, out)?;
        }
        reports.push(report);
    }
    if a.json {
        print_pretty(out, &Value::Array(reports))?;
    }
    Ok(())
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
