//! `parse_streaming` against Pi's own reading of every prefix of sample
//! tool-call arguments. The expected values were printed by the
//! `partial-json` package Pi 0.58.3 depends on, through
//! `scripts/partial-json-cases.mjs`.

use sessionlog_events::json::to_js_string;
use sessionlog_provider::partial_json::parse_streaming;

#[test]
fn every_prefix_reads_as_pi_reads_it() {
    let data = include_str!("../data/partial_json.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in data.lines() {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = case["input"].as_str().unwrap();
        let expected = case["value"].as_str().unwrap();
        let got = to_js_string(&parse_streaming(input)).unwrap();
        count += 1;
        if got != expected {
            failures.push(format!("{input:?}: expected {expected}, got {got}"));
        }
    }
    assert_eq!(count, 341);
    assert!(failures.is_empty(), "{} of {count} differ:\n{}", failures.len(), failures.join("\n"));
}
