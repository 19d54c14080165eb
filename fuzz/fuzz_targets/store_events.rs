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
            // A written line reads back to an event that writes the same
            // line. (Not always to `e` itself: numbers are written as
            // JavaScript writes them, so an integer beyond 2^53 is rounded
            // once — see the store module's tests.)
            let again = StoreEvent::parse(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
            assert_eq!(again.to_line().ok().as_deref(), Some(line.as_str()), "{line}");
        }
    }
    if let Ok(store) = fold(&events) {
        let _ = serde_json::to_string(&store);
    }
});
