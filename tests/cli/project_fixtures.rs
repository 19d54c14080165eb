//! The project's own fixtures: generated ones reproduce exactly, damaged ones
//! read as Pi reads them.

use std::fs;

use crate::support::{arg, first_difference, fixtures, json, oracle, run, run_ok};

#[test]
fn generated_fixtures_regenerate_byte_for_byte() {
    let dir = fixtures::project_dir().join("fixtures/generated");
    let cases: [(&str, &[&str]); 3] = [
        ("linear-s1.jsonl", &["--seed", "1", "--entries", "120"]),
        (
            "tree-s2.jsonl",
            &[
                "--seed",
                "2",
                "--entries",
                "400",
                "--branches",
                "3",
                "--compactions",
                "2",
                "--tool-output-chars",
                "600",
            ],
        ),
        (
            "long-s3.jsonl",
            &[
                "--seed",
                "3",
                "--entries",
                "1500",
                "--branches",
                "1",
                "--compactions",
                "4",
                "--tool-output-chars",
                "400",
            ],
        ),
    ];
    for (name, args) in cases {
        let mut full = vec!["gen"];
        full.extend_from_slice(args);
        let fresh = run_ok(&full);
        let committed = fs::read(dir.join(name)).unwrap();
        assert!(fresh == committed, "{name}: `sessionlog gen {}` no longer reproduces it", args.join(" "));
    }
}

#[test]
fn project_fixtures_read_as_pi_reads_them() {
    let root = fixtures::project_dir().join("fixtures");
    let mut files = fixtures::generated_transcripts();
    for name in ["torn-tail.jsonl", "mixed-bad-lines.jsonl", "invalid-utf8.jsonl", "v1-array-line.jsonl"] {
        files.push(root.join("corrupt").join(name));
    }
    files.push(root.join("odd-json/key-order.jsonl"));
    for file in &files {
        let ours = json(&run_ok(&["entries", arg(file)]));
        let mut theirs = json(&oracle::run(&["entries", arg(file), "--seq-ids"]));
        theirs.as_object_mut().map(|o| o.remove("piVersion"));
        if let Some(d) = first_difference(&ours, &theirs, "$") {
            panic!("{}: {d}", file.display());
        }
        let ours = run_ok(&["entries", arg(file), "--jsonl"]);
        let theirs = oracle::run(&["entries", arg(file), "--jsonl", "--seq-ids"]);
        // The oracle prints the file through a UTF-8 decode, so invalid bytes
        // reach it as U+FFFD; ours prints the untouched bytes Pi leaves on disk.
        let ours = String::from_utf8_lossy(&ours);
        assert!(ours.as_bytes() == theirs, "{}: entries --jsonl differs from the oracle", file.display());
    }
    let no_header = root.join("corrupt/no-header.jsonl");
    let out = run(&["entries", arg(&no_header)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-header.jsonl:1: not a Pi transcript"));
}
