//! `sessionlog sweep`: files, rows, the chart, agreement with `replay`, and bad inputs.

use std::fs;

use crate::support::{arg, fixtures, json, run, run_ok};

/// The rows of a sweep's `results.jsonl`.
fn results(out: &std::path::Path) -> Vec<serde_json::Value> {
    let text = fs::read_to_string(out.join("results.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn corpus() -> std::path::PathBuf {
    fixtures::project_dir().join("fixtures/generated")
}

#[test]
fn a_sweep_writes_one_row_per_transcript_and_policy_and_a_chart() {
    let out = tempfile::tempdir().unwrap();
    let c = corpus();
    let stdout = run_ok(&[
        "sweep",
        arg(&c),
        "--context-window",
        "32000,64000",
        "--keep-recent",
        "4000",
        "--quiet",
        "--out",
        arg(out.path()),
    ]);
    let text = String::from_utf8(stdout).unwrap();
    // 2 grid points + the OpenClaw and Pi references; 3 generated transcripts.
    assert!(text.starts_with("3 transcripts × 4 policies = 12 replays"), "{text}");
    let rows = results(out.path());
    assert_eq!(rows.len(), 12);
    let mut reader = csv::Reader::from_path(out.path().join("summary.csv")).unwrap();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 4);
    let policies: Vec<&str> = records.iter().map(|r| r.get(0).unwrap()).collect();
    assert_eq!(
        policies,
        [
            "openclaw-default",
            "pi-default",
            "w32000-r16384-k4000-cauto-threshold-pi",
            "w64000-r16384-k4000-cauto-threshold-pi"
        ]
    );
    let summary = json(&fs::read(out.path().join("summary.json")).unwrap());
    assert_eq!(summary["policies"].as_array().unwrap().len(), 4);
    let svg = fs::read_to_string(out.path().join("chart.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("chart.svg is well-formed XML");
    let points = doc.descendants().filter(|n| n.has_tag_name("circle")).count();
    // One point per policy, and one legend marker per policy.
    assert_eq!(points, 8, "{svg}");
    for p in policies {
        assert!(
            doc.descendants().any(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(p)),
            "legend lacks {p}"
        );
    }
}

#[test]
fn sweep_rows_equal_individual_replays() {
    let out = tempfile::tempdir().unwrap();
    let c = corpus();
    // The grid: one policy, swept over two preserved-turn counts.
    const GRID: [&str; 6] = ["--context-window", "32000", "--keep-recent", "4000", "--trigger", "ratio:0.8"];
    let mut sweep = vec!["sweep", arg(&c)];
    sweep.extend(GRID);
    sweep.extend(["--preserve-turns", "0,8", "--quiet", "--out", arg(out.path())]);
    run_ok(&sweep);
    let rows = results(out.path());
    assert_eq!(rows.len(), 12);
    let as_js = |v: &serde_json::Value| sessionlog_events::json::to_js_string(v).unwrap();
    let mut by_turns: std::collections::BTreeMap<(String, String), String> = Default::default();
    for row in &rows {
        let file = row["transcript"].as_str().unwrap();
        let mut args = vec!["replay", file, "--json"];
        let policy = row["policy"].as_str().unwrap();
        match policy {
            "openclaw-default" => args.extend(["--preset", "openclaw"]),
            "pi-default" => args.extend(["--preset", "pi"]),
            grid => {
                let turns = grid.rsplit_once("-p").map(|(_, n)| n).unwrap();
                assert_eq!(grid, format!("w32000-r16384-k4000-cauto-ratio:0.8-pi-p{turns}"));
                by_turns.insert((file.to_owned(), turns.to_owned()), as_js(&row["metrics"]));
                args.extend(GRID);
                args.extend(["--preserve-turns", turns]);
            }
        }
        let single = json(&run_ok(&args));
        assert_eq!(as_js(&row["metrics"]), as_js(&single["metrics"]), "{file} {policy}");
    }
    // Keeping turns verbatim changes what a compaction leaves: some transcript shows it.
    let files: std::collections::BTreeSet<&String> = by_turns.keys().map(|(f, _)| f).collect();
    assert_eq!(files.len(), 3);
    assert!(files
        .iter()
        .any(|f| by_turns[&((*f).clone(), "0".to_owned())] != by_turns[&((*f).clone(), "8".to_owned())]));
}

#[test]
fn bad_inputs_are_reported_per_file_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("corpus");
    fs::create_dir(&c).unwrap();
    fs::copy(corpus().join("linear-s1.jsonl"), c.join("good.jsonl")).unwrap();
    fs::copy(fixtures::project_dir().join("fixtures/corrupt/torn-tail.jsonl"), c.join("torn.jsonl")).unwrap();
    // JSON lines that are no session of any known format.
    fs::write(c.join("other.jsonl"), "{\"hello\":1}\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), c.join("gone.jsonl")).unwrap();
    fs::write(c.join("notes.txt"), "not a transcript, not swept").unwrap();
    let out = dir.path().join("out");
    let result = run(&["sweep", arg(&c), "--quiet", "--out", arg(&out)]);
    assert_eq!(result.status.code(), Some(1), "some inputs were skipped");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        stderr.contains("skipped")
            && stderr.contains("other.jsonl")
            && stderr.contains("not a Pi transcript"),
        "{stderr}"
    );
    assert!(stderr.contains("gone.jsonl"), "{stderr}");
    let stdout = String::from_utf8_lossy(&result.stdout);
    // good and torn are swept (the torn line is skipped the way Pi skips it).
    assert!(stdout.starts_with("2 transcripts × 2 policies = 4 replays"), "{stdout}");
    assert_eq!(fs::read_to_string(out.join("results.jsonl")).unwrap().lines().count(), 4);
}

#[test]
fn a_sweep_spec_names_the_corpus_and_the_grid() {
    let spec = fixtures::project_dir().join("replay/sweeps/bundled.toml");
    let text = String::from_utf8(run_ok(&["sweep", arg(&spec), "--quiet"])).unwrap();
    // 2 windows × 2 tails × 2 triggers + 2 references.
    assert!(text.starts_with("3 transcripts × 10 policies = 30 replays"), "{text}");
    assert!(text.contains("best fewest tokens billed"));
}

#[test]
fn an_empty_corpus_is_an_error_not_an_empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["sweep", arg(dir.path()), "--quiet"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no transcripts found under"));
}

/// `sweep --mask-after-turns 0,2`: the masking variant's rows differ from
/// the unmasked one's, and its summary says what masking saved against it —
/// the difference of the two rows' totals, added up here from results.jsonl.
#[test]
fn a_masking_sweep_reports_its_savings_against_the_unmasked_variant() {
    let out = tempfile::tempdir().unwrap();
    let file = corpus().join("long-s3.jsonl");
    let args = ["--context-window", "32000", "--keep-recent", "4000", "--mask-after-turns", "0,2"];
    let mut cmd = vec!["sweep", arg(&file), "--quiet", "--measure", "estimate", "--out", arg(out.path())];
    cmd.extend(args);
    run_ok(&cmd);
    let rows = results(out.path());
    let row = |name: &str| rows.iter().find(|r| r["policy"] == name).unwrap_or_else(|| panic!("{name}"));
    let off = row("w32000-r16384-k4000-cauto-threshold-pi-m0");
    let on = row("w32000-r16384-k4000-cauto-threshold-pi-m2");
    let billed = |r: &serde_json::Value| r["metrics"]["tokensBilled"].as_i64().unwrap();
    let compactions = |r: &serde_json::Value| r["metrics"]["compactions"].as_i64().unwrap();
    assert!(billed(on) < billed(off), "masking bills less: {} vs {}", billed(on), billed(off));
    assert!(on["metrics"]["maskedToolResults"].as_u64().unwrap() > 0);
    let summary = json(&fs::read(out.path().join("summary.json")).unwrap());
    let policies = summary["policies"].as_array().unwrap();
    let masked = policies.iter().find(|p| p["policy"] == on["policy"]).unwrap();
    assert_eq!(masked["maskingBaseline"], off["policy"]);
    assert_eq!(masked["maskingTokensBilledSaved"].as_i64(), Some(billed(off) - billed(on)));
    assert_eq!(masked["maskingCompactionsAvoided"].as_i64(), Some(compactions(off) - compactions(on)));
    let unmasked = policies.iter().find(|p| p["policy"] == off["policy"]).unwrap();
    assert!(unmasked["maskingBaseline"].is_null());
}
