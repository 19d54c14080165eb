//! Any bytes as a store log: each line parsed as a store event, the valid
//! ones folded into `sessions.json` and the result written back as text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sessionlog_sessions::store::{fold, StoreEvent};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let events: Vec<StoreEvent> = text.lines().filter_map(|l| StoreEvent::parse(l).ok()).collect();
    for e in &events {
        if let Ok(line) = e.to_line() {
            // A parsed event's line parses again to the same event.
            assert_eq!(StoreEvent::parse(&line).ok().as_ref(), Some(e), "{line}");
        }
    }
    if let Ok(store) = fold(&events) {
        let _ = serde_json::to_string(&store);
    }
});
