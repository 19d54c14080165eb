//! Differential tests of `entries` against Pi's own loader (the oracle).

use sessionlog_events::PiRules;

use crate::support::{all_transcripts, arg, first_difference, fixtures, json, oracle, par_map, run_ok};

#[test]
fn entries_jsonl_is_byte_identical_to_pi_for_every_pi_fixture() {
    let files = fixtures::pi_transcripts();
    assert!(files.len() >= 7, "expected the 7 Pi fixtures, found {files:?}");
    let failures: Vec<String> = par_map(&files, |file| {
        let ours = run_ok(&["entries", arg(file), "--jsonl"]);
        let theirs = oracle::run(&["entries", arg(file), "--jsonl", "--seq-ids"]);
        if ours == theirs {
            return None;
        }
        let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
        let line = ours[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Some(format!("{}: first difference at byte {at} (line {line})", file.display()))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "entries --jsonl differs from the oracle:\n{}", failures.join("\n"));
}

#[test]
fn entries_document_equals_pi_for_every_fixture() {
    let files = all_transcripts();
    let failures: Vec<String> = par_map(&files, |file| {
        let ours = json(&run_ok(&["entries", arg(file)]));
        let mut theirs = json(&oracle::run(&["entries", arg(file), "--seq-ids"]));
        theirs.as_object_mut().map(|o| o.remove("piVersion"));
        first_difference(&ours, &theirs, "$").map(|d| format!("{}: {d}", file.display()))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "entries differs from the oracle:\n{}", failures.join("\n"));
}

#[test]
fn pi_1_x_entries_are_read_and_written_back_losslessly() {
    // context_edit, usage, compaction systemMessage/usage, system messages,
    // nestedCalls: both Pi releases keep every line as it is, and so do we —
    // in the entries document, in `entries --jsonl`, and through a
    // MessagePack segment and back.
    let dir = tempfile::tempdir().unwrap();
    for file in fixtures::pi_1_6_transcripts() {
        let original = std::fs::read(&file).unwrap();
        let ours = run_ok(&["entries", arg(&file), "--jsonl"]);
        assert!(ours == original, "{}: entries --jsonl changed the file", file.display());
        let ours = json(&run_ok(&["entries", arg(&file)]));
        for rules in PiRules::ALL {
            assert!(
                oracle::run_for(rules, &["entries", arg(&file), "--jsonl", "--seq-ids"]) == original,
                "{}: Pi {} rewrote the file",
                file.display(),
                rules.pi_version()
            );
            let mut theirs = json(&oracle::run_for(rules, &["entries", arg(&file), "--seq-ids"]));
            theirs.as_object_mut().map(|o| o.remove("piVersion"));
            if let Some(d) = first_difference(&ours, &theirs, "$") {
                panic!("{}: entries differs from Pi {}: {d}", file.display(), rules.pi_version());
            }
        }
        let segment = dir.path().join("segment.slmp");
        run_ok(&["pack", arg(&file), "-o", arg(&segment), "--force"]);
        assert!(run_ok(&["unpack", arg(&segment)]) == original, "{}: pack/unpack changed it", file.display());
    }
}
