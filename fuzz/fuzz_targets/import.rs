//! Any bytes as a Claude Code or Codex session: mapped to Pi entries, and
//! the original text rebuilt from them.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sessionlog_event_log::import::{map_bytes, original_text, sniff, Format};
use sessionlog_event_log::Mode;

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    for format in [Format::ClaudeCode, Format::Codex] {
        for mode in [Mode::Lenient, Mode::Strict] {
            if let Ok(loaded) = map_bytes(data, format, Path::new("fuzz.jsonl"), mode, "fallback") {
                let _ = original_text(&loaded.transcript);
            }
        }
    }
});
