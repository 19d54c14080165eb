//! Identifier extraction alone, for instruction counts under callgrind.
//!
//! `ids_bench FILE`: `ids::extract` of every message's text of a transcript
//! (its counted parts joined by `\n`, as `facts::text_of` joins them), then
//! the count of identifiers found.
//! `ids_bench --dense BYTES`: `ids::extract` of one chunk of `BYTES` digits
//! and dashes (`12-345-6-…`, no whitespace), the case a per-chunk search
//! must keep linear.
//! `ids_bench --containers BYTES`: `ids::extract` of one chunk of `BYTES`
//! of UUIDs and URLs joined by `,` (no whitespace), whose hashes, tokens
//! and paths lie within them: the container check must keep it linear.
//! `ids_bench --paths BYTES`: `ids::extract` of one chunk of `BYTES` of
//! `a-b.c/` (a path start at every word boundary, no extension after it).

#![allow(clippy::print_stdout)] // a benchmark's report

use sessionlog_compaction::ids::extract;
use sessionlog_context::assemble::context_message;
use sessionlog_events::Entry;
use sessionlog_tokens::parts;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let found = match args.as_slice() {
        [flag, bytes] if flag == "--dense" => {
            let bytes: usize = bytes.parse()?;
            let text: String = "12-345-6-7890-".chars().cycle().take(bytes).collect();
            extract(&text).len()
        }
        [flag, bytes] if flag == "--containers" => {
            let bytes: usize = bytes.parse()?;
            let unit = "3f2c9a1e-6b7d-4c2a-9f11-0a1b2c3d4e5f,<https://h.example/a/b/c1d2e3f4a5>,";
            let text: String = unit.chars().cycle().take(bytes).collect();
            extract(&text).len()
        }
        [flag, bytes] if flag == "--paths" => {
            let bytes: usize = bytes.parse()?;
            let text: String = "a-b.c/".chars().cycle().take(bytes).collect();
            extract(&text).len()
        }
        [file] => {
            let text = std::fs::read_to_string(file)?;
            let entries: Vec<Entry> = text.lines().filter_map(|l| Entry::parse(l).ok()).collect();
            entries
                .iter()
                .filter_map(context_message)
                .map(|m| extract(&parts(&m.message).texts.join("\n")).len())
                .sum()
        }
        _ => {
            return Err(
                "usage: ids_bench FILE | ids_bench --dense BYTES | ids_bench --containers BYTES | ids_bench --paths BYTES".into()
            )
        }
    };
    println!("{found} identifiers");
    Ok(())
}
