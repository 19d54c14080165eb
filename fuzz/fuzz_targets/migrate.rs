//! Any bytes after a version 1 or version 2 header: Pi's v1→v2→v3
//! migration in memory (deterministic ids, parent links from order).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sessionlog_event_log::{load_from, Mode, Reader};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let header: &[u8] = if which & 1 == 0 {
        b"{\"type\":\"session\",\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n"
    } else {
        b"{\"type\":\"session\",\"version\":2,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n"
    };
    let bytes = [header, rest].concat();
    if let Ok(loaded) = load_from(Reader::new(&bytes[..], Path::new("fuzz.jsonl"), Mode::Lenient)) {
        let t = &loaded.transcript;
        let _ = t.tree();
        let _ = t.default_path();
    }
});
