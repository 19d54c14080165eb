//! Every shared fixture parses as Pi parses it and round-trips losslessly.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use sessionlog_event_log::{load, Mode, PackReader, PackWriter};
use sessionlog_events::json::canonicalize_js;

use crate::support::{all_transcripts, arg, json, run_ok};

fn name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Lines Pi drops, per fixture file name (from the fixtures' SOURCE.md and a read of the files).
fn expected_skips() -> BTreeMap<&'static str, Vec<u64>> {
    BTreeMap::from([
        ("compact.jsonl", vec![1013]),
        ("session.jsonl", vec![440]),
        ("legacy-v1-edge.jsonl", vec![6]),
    ])
}

#[test]
fn every_fixture_parses_with_exactly_the_lines_pi_drops() {
    let skips = expected_skips();
    for file in all_transcripts() {
        let loaded = load(&file, Mode::Lenient).unwrap_or_else(|e| panic!("{e}"));
        let skipped: Vec<u64> = loaded.skipped.iter().map(|s| s.line).collect();
        let expect = skips.get(name(&file).as_str()).cloned().unwrap_or_default();
        assert_eq!(skipped, expect, "{}", file.display());
        assert!(loaded.replaced_utf8.is_empty(), "{}", file.display());
        let strict = load(&file, Mode::Strict);
        assert_eq!(strict.is_err(), !expect.is_empty(), "{}: strict mode", file.display());
        if let Err(err) = strict {
            let prefix = format!("{}:{}:", file.display(), expect[0]);
            assert!(err.to_string().starts_with(&prefix), "{err}");
        }
    }
}

#[test]
fn every_line_of_every_fixture_round_trips_byte_for_byte() {
    for file in all_transcripts() {
        let text = fs::read_to_string(&file).unwrap();
        let loaded = load(&file, Mode::Lenient).unwrap();
        let t = &loaded.transcript;
        let original: Vec<&str> = text.split('\n').collect();
        let mut entries = vec![&t.header];
        entries.extend(&t.entries);
        if !t.migrated {
            // v3: each entry's raw text is its source line, untouched.
            for (entry, line) in entries.iter().zip(&loaded.lines) {
                assert_eq!(entry.raw(), original[*line as usize - 1], "{}:{line}", file.display());
            }
        }
        // Pi wrote every line with JSON.stringify; our JavaScript writer
        // reproduces each one exactly, and so does a MessagePack round trip.
        let mut packed = PackWriter::new(Vec::new()).unwrap();
        for entry in &entries {
            let mut out = Vec::new();
            canonicalize_js(entry.raw(), &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), entry.raw(), "{}", file.display());
            packed.push_json(entry.raw()).unwrap();
        }
        let packed = packed.finish().unwrap();
        let back: Vec<String> = PackReader::new(packed.as_slice()).unwrap().map(Result::unwrap).collect();
        let raw: Vec<&str> = entries.iter().map(|e| e.raw()).collect();
        assert_eq!(back, raw, "{}: pack/unpack", file.display());
    }
}

#[test]
fn inspect_reports_what_the_fixture_sources_document() {
    let shared = crate::support::fixtures::shared_dir().join("fixtures");
    let check = |rel: &str, expect: serde_json::Value| {
        let file = shared.join(rel);
        let report = json(&run_ok(&["inspect", arg(&file), "--json"]));
        for (key, want) in expect.as_object().unwrap() {
            assert_eq!(&report[key], want, "{rel}: {key}");
        }
    };
    // Counts from fixtures/pi/SOURCE.md and fixtures/SOURCES.md; offsets and
    // type counts read off the files with Python's json module.
    check(
        "pi/before-compaction.jsonl",
        serde_json::json!({"version": 1, "entryCount": 1002,
            "byType": {"compaction": 2, "message": 990, "model_change": 5, "thinking_level_change": 5},
            "byRole": {"assistant": 484, "bashExecution": 3, "toolResult": 448, "user": 55}}),
    );
    check(
        "pi/history/compact.jsonl",
        serde_json::json!({"entryCount": 1011, "skippedLines": [
        {"line": 1013, "offset": 1_606_828, "column": 540, "reason": "invalid JSON at column 540: trailing characters"}]}),
    );
    check(
        "openclaw/agents/build/sessions/684637ff-e673-46e4-a1a9-0de622f22f21.jsonl",
        serde_json::json!({"version": 3, "entryCount": 392, "branchPoints": ["d8c2bacf"]}),
    );
    check(
        "openclaw/agents/build/sessions/26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl",
        serde_json::json!({"byType": {"compaction": 2, "custom": 4, "message": 31, "model_change": 1,
                                      "thinking_level_change": 1}}),
    );
}
