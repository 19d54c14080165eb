//! Differential tests of `context` and `cut` against Pi's own code: every
//! case runs under both rule sets, `--pi-rules 0.58` against `oracle/pi`
//! (Pi 0.58.3) and `--pi-rules 1.6` against `oracle/pi-1.6` (Pi 1.6.0).

use std::path::{Path, PathBuf};

use sessionlog_events::PiRules;

use crate::support::{all_transcripts, arg, fixtures, json, oracle, oracle_difference, par_map, run_ok};

/// One comparison: our arguments and the oracle's for the same question.
struct Case {
    file: PathBuf,
    rules: PiRules,
    ours: Vec<String>,
    theirs: Vec<String>,
}

impl Case {
    /// A case whose `ours` arguments get `--pi-rules` for `rules`.
    fn new(file: &Path, rules: PiRules, mut ours: Vec<String>, theirs: Vec<String>) -> Case {
        ours.extend(["--pi-rules".to_owned(), rules.name().to_owned()]);
        Case { file: file.to_owned(), rules, ours, theirs }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn run_cases(cases: &[Case]) {
    let failures: Vec<String> = par_map(cases, |case| {
        let ours: Vec<&str> = case.ours.iter().map(String::as_str).collect();
        let theirs: Vec<&str> = case.theirs.iter().map(String::as_str).collect();
        oracle_difference(&run_ok(&ours), &oracle::run_for(case.rules, &theirs))
            .map(|d| format!("{} {:?}: {d}", case.file.display(), &case.ours[2..]))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from Pi:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn context_case(file: &Path, leaf: Option<&str>, rules: PiRules) -> Case {
    let mut ours = strings(&["context", arg(file), "--json", "--llm"]);
    let mut theirs = strings(&["context", arg(file), "--llm", "--seq-ids"]);
    if let Some(leaf) = leaf {
        for args in [&mut ours, &mut theirs] {
            args.extend(["--leaf".to_owned(), leaf.to_owned()]);
        }
    }
    Case::new(file, rules, ours, theirs)
}

/// Every transcript we can compare: the shared fixtures, the project's
/// generated ones, the hand-written JSON oddities (repeated keys,
/// array-index keys, escapes JSON.stringify writes differently), and the
/// transcripts with Pi 1.x entry types (context edits, system messages,
/// usage entries, a compaction's system snapshot).
fn transcripts() -> Vec<PathBuf> {
    let mut files = all_transcripts();
    files.extend(fixtures::generated_transcripts());
    files.push(fixtures::project_dir().join("fixtures/odd-json/key-order.jsonl"));
    files.extend(fixtures::pi_1_6_transcripts());
    files
}

#[test]
fn context_equals_pi_at_the_default_leaf_of_every_fixture() {
    let cases: Vec<Case> = PiRules::ALL
        .into_iter()
        .flat_map(|rules| transcripts().into_iter().map(move |f| context_case(&f, None, rules)))
        .collect();
    run_cases(&cases);
}

#[test]
fn context_equals_pi_on_lone_surrogates_in_raw_kept_fields() {
    // An image's `data` and a tool call's `arguments` are kept as raw text;
    // Pi prints a lone surrogate there as JSON.stringify's `\udxxx` escape,
    // and reads the model of such an assistant line as of any other.
    let file = fixtures::project_dir().join("fixtures/odd-json/lone-surrogates.jsonl");
    let cases: Vec<Case> = PiRules::ALL
        .into_iter()
        .flat_map(|rules| {
            let file = &file;
            [None, Some("b1000002"), Some("b1000001")].map(move |leaf| context_case(file, leaf, rules))
        })
        .collect();
    run_cases(&cases);
}

#[test]
fn a_lone_surrogate_the_typed_read_refuses_fails_loudly() {
    // Pi keeps a text block holding a reversed pair (the oracles print all four
    // messages of this file); our typed read cannot hold it and would drop the
    // line, so the command refuses the file instead of differing in silence.
    let file = fixtures::project_dir().join("fixtures/odd-json/lone-surrogates-in-text.jsonl");
    for rules in ["0.58", "1.6"] {
        let output = crate::support::run(&["context", arg(&file), "--json", "--pi-rules", rules]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && output.stdout.is_empty(), "{rules}: {stderr}");
        assert!(
            stderr.contains("lone-surrogates-in-text.jsonl: line 2: a lone surrogate escape"),
            "{stderr}"
        );
    }
}

#[test]
fn context_equals_pi_at_every_leaf_of_the_tree_fixtures() {
    let mut cases = Vec::new();
    for file in transcripts() {
        let report = json(&run_ok(&["inspect", arg(&file), "--json"]));
        let leaves = report["leaves"].as_array().cloned().unwrap_or_default();
        if leaves.len() < 2 {
            continue;
        }
        for rules in PiRules::ALL {
            for leaf in &leaves {
                cases.push(context_case(&file, leaf.as_str(), rules));
            }
            cases.push(context_case(&file, Some("null"), rules));
        }
    }
    assert!(cases.len() >= 20, "expected the tree fixtures to give many leaves, got {}", cases.len());
    run_cases(&cases);
}

#[test]
fn cut_equals_pi_for_every_fixture_and_setting() {
    let settings = [("16384", "20000", "200000"), ("4096", "2000", "32000"), ("16384", "50", "128000")];
    let mut cases = Vec::new();
    for file in transcripts() {
        for (reserve, keep, window) in settings {
            for rules in PiRules::ALL {
                let flags = ["--reserve", reserve, "--keep-recent", keep, "--context-window", window];
                let mut ours = vec!["cut", arg(&file), "--json"];
                ours.extend(flags);
                let mut theirs = vec!["cut", arg(&file), "--seq-ids"];
                theirs.extend(flags);
                cases.push(Case::new(&file, rules, strings(&ours), strings(&theirs)));
            }
        }
    }
    run_cases(&cases);
}

/// A compaction line holding fields a `serde_json::Value` cannot hold (a
/// lone surrogate escape, a number beyond f64): the next cut still seeds
/// its file lists from the compaction's `details` and names its summary, as
/// Pi does (reading the whole line as a value gave none of them).
#[test]
fn cut_reads_the_details_and_summary_of_a_compaction_with_odd_fields_as_pi_does() {
    let file = fixtures::project_dir().join("fixtures/odd-json/compaction-extra-fields.jsonl");
    let ours = json(&run_ok(&["cut", arg(&file), "--json", "--keep-recent", "1"]));
    let details = &ours["preparation"]["details"];
    assert_eq!(details["readFiles"], serde_json::json!(["seeded-read.txt"]), "{ours}");
    assert_eq!(details["modifiedFiles"], serde_json::json!(["seeded-mod.txt"]), "{ours}");
    assert_eq!(ours["preparation"]["previousSummary"], "summary");
    let cases: Vec<Case> = PiRules::ALL
        .into_iter()
        .map(|rules| {
            let ours = strings(&["cut", arg(&file), "--json", "--keep-recent", "1"]);
            let theirs = strings(&["cut", arg(&file), "--seq-ids", "--keep-recent", "1"]);
            Case::new(&file, rules, ours, theirs)
        })
        .collect();
    run_cases(&cases);
}

#[test]
fn cut_texts_equal_pi_on_the_1_x_fixtures() {
    // The serialised history byte for byte (thinking left out by 1.6, tool
    // results given as strings, sliceHead at a split surrogate pair, edited
    // content), with small budgets that make split-turn and omission cuts.
    let mut cases = Vec::new();
    for file in fixtures::pi_1_6_transcripts() {
        for keep in ["5", "40", "60", "20000"] {
            for rules in PiRules::ALL {
                let flags = ["--keep-recent", keep, "--text"];
                let mut ours = vec!["cut", arg(&file), "--json"];
                ours.extend(flags);
                let mut theirs = vec!["cut", arg(&file), "--seq-ids"];
                theirs.extend(flags);
                cases.push(Case::new(&file, rules, strings(&ours), strings(&theirs)));
            }
        }
    }
    run_cases(&cases);
}

/// Writes the header and the first `n` entries of `file` (non-blank lines) to `dir`.
fn truncated_copy(file: &Path, n: usize, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(n + 1).collect();
    let stem = file.file_name().unwrap().to_string_lossy();
    let out = dir.join(format!("{stem}.first-{n}.jsonl"));
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    out
}

#[test]
fn time_travel_at_every_position_equals_pi_on_the_truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let shared = fixtures::shared_dir().join("fixtures");
    let tree = shared.join("pi/synthetic/tree-v3.jsonl");
    let compactions =
        shared.join("openclaw/agents/build/sessions/26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl");
    let mut cases = Vec::new();
    for n in 0..=31 {
        let copy = truncated_copy(&tree, n, dir.path());
        cases.push(Case::new(
            &tree,
            PiRules::V0_58,
            strings(&["context", arg(&tree), "--json", "--llm", "--at", &n.to_string()]),
            strings(&["context", arg(&copy), "--llm", "--seq-ids"]),
        ));
    }
    for n in [16, 17, 18, 19, 20] {
        let copy = truncated_copy(&compactions, n, dir.path());
        let flags = ["--reserve", "4096", "--keep-recent", "2000", "--context-window", "32000"];
        let mut ours = vec![
            "cut".to_owned(),
            arg(&compactions).to_owned(),
            "--json".to_owned(),
            "--at".to_owned(),
            n.to_string(),
        ];
        ours.extend(flags.map(str::to_owned));
        let mut theirs = vec!["cut".to_owned(), arg(&copy).to_owned(), "--seq-ids".to_owned()];
        theirs.extend(flags.map(str::to_owned));
        cases.push(Case::new(&compactions, PiRules::V0_58, ours, theirs));
    }
    run_cases(&cases);
}

#[test]
fn pi_1_6_time_travel_over_the_1_x_fixtures_equals_pi_on_the_truncated_file() {
    // Every log position: each edit, usage entry and system message arrives
    // in turn, so the usage rule, the projection and the cut are checked as
    // the log grows.
    let dir = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for file in fixtures::pi_1_6_transcripts() {
        let entries =
            std::fs::read_to_string(&file).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
        for n in 0..entries {
            let copy = truncated_copy(&file, n, dir.path());
            let at = n.to_string();
            cases.push(Case::new(
                &file,
                PiRules::V1_6,
                strings(&["context", arg(&file), "--json", "--llm", "--at", &at]),
                strings(&["context", arg(&copy), "--llm", "--seq-ids"]),
            ));
            // A small budget, so most positions cut (and split turns).
            cases.push(Case::new(
                &file,
                PiRules::V1_6,
                strings(&["cut", arg(&file), "--json", "--text", "--keep-recent", "5", "--at", &at]),
                strings(&["cut", arg(&copy), "--seq-ids", "--text", "--keep-recent", "5"]),
            ));
        }
    }
    assert!(cases.len() >= 160, "expected every position of the 1.x fixtures, got {}", cases.len());
    run_cases(&cases);
}

/// A transcript given as a pipe (`/dev/stdin`) or a FIFO: telling its format
/// used to open it once more, which ate its first bytes from a pipe and hung
/// on a FIFO. Its context must be Pi's for the same file, read once.
#[test]
fn a_transcript_on_a_pipe_or_a_fifo_gives_pis_context() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let file = fixtures::shared_dir().join("fixtures/pi/before-compaction.jsonl");
    let text = std::fs::read(&file).unwrap();
    let theirs = oracle::run_for(PiRules::V1_6, &["context", arg(&file), "--seq-ids"]);
    let piped = |path: &str, feed: &dyn Fn(&mut std::process::Child)| {
        let mut child = Command::new(crate::support::bin())
            .args(["context", path, "--json", "--pi-rules", "1.6"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        feed(&mut child);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{path}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let stdin = piped("/dev/stdin", &|child| {
        let mut input = child.stdin.take().unwrap();
        input.write_all(&text).unwrap();
    });
    assert_eq!(oracle_difference(&stdin, &theirs), None, "/dev/stdin");

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("t.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let writer = {
        let (fifo, text) = (fifo.clone(), text.clone());
        std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
    };
    let out = piped(arg(&fifo), &|_| {});
    writer.join().unwrap();
    assert_eq!(oracle_difference(&out, &theirs), None, "FIFO");
}
