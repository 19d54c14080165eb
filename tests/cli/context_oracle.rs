//! Differential tests of `context` and `cut` against Pi's own code.

use std::path::{Path, PathBuf};

use crate::support::{all_transcripts, arg, fixtures, json, oracle, oracle_difference, par_map, run_ok};

/// One comparison: our arguments and the oracle's for the same question.
struct Case {
    file: PathBuf,
    ours: Vec<String>,
    theirs: Vec<String>,
}

fn run_cases(cases: &[Case]) {
    let failures: Vec<String> = par_map(cases, |case| {
        let ours: Vec<&str> = case.ours.iter().map(String::as_str).collect();
        let theirs: Vec<&str> = case.theirs.iter().map(String::as_str).collect();
        oracle_difference(&run_ok(&ours), &oracle::run(&theirs))
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

fn context_case(file: &Path, leaf: Option<&str>) -> Case {
    let mut ours = vec!["context".to_owned(), arg(file).to_owned(), "--json".to_owned(), "--llm".to_owned()];
    let mut theirs =
        vec!["context".to_owned(), arg(file).to_owned(), "--llm".to_owned(), "--seq-ids".to_owned()];
    if let Some(leaf) = leaf {
        for args in [&mut ours, &mut theirs] {
            args.extend(["--leaf".to_owned(), leaf.to_owned()]);
        }
    }
    Case { file: file.to_owned(), ours, theirs }
}

/// Every transcript we can compare: the shared fixtures, the project's
/// generated ones, and the hand-written JSON oddities (repeated keys,
/// array-index keys, escapes JSON.stringify writes differently).
fn transcripts() -> Vec<PathBuf> {
    let mut files = all_transcripts();
    files.extend(fixtures::generated_transcripts());
    files.push(fixtures::project_dir().join("fixtures/odd-json/key-order.jsonl"));
    files
}

#[test]
fn context_equals_pi_at_the_default_leaf_of_every_fixture() {
    let cases: Vec<Case> = transcripts().iter().map(|f| context_case(f, None)).collect();
    run_cases(&cases);
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
        for leaf in leaves {
            cases.push(context_case(&file, leaf.as_str()));
        }
        cases.push(context_case(&file, Some("null")));
    }
    assert!(cases.len() >= 10, "expected the tree fixtures to give many leaves, got {}", cases.len());
    run_cases(&cases);
}

#[test]
fn cut_equals_pi_for_every_fixture_and_setting() {
    let settings = [("16384", "20000", "200000"), ("4096", "2000", "32000"), ("16384", "50", "128000")];
    let mut cases = Vec::new();
    for file in transcripts() {
        for (reserve, keep, window) in settings {
            let flags = ["--reserve", reserve, "--keep-recent", keep, "--context-window", window];
            let mut ours = vec!["cut", arg(&file), "--json"];
            ours.extend(flags);
            let mut theirs = vec!["cut", arg(&file), "--seq-ids"];
            theirs.extend(flags);
            cases.push(Case {
                file: file.clone(),
                ours: ours.into_iter().map(str::to_owned).collect(),
                theirs: theirs.into_iter().map(str::to_owned).collect(),
            });
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
        cases.push(Case {
            file: tree.clone(),
            ours: ["context", arg(&tree), "--json", "--llm", "--at", &n.to_string()]
                .map(str::to_owned)
                .to_vec(),
            theirs: ["context", arg(&copy), "--llm", "--seq-ids"].map(str::to_owned).to_vec(),
        });
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
        cases.push(Case { file: compactions.clone(), ours, theirs });
    }
    run_cases(&cases);
}
