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

/// Every transcript we can compare: the shared fixtures and the project's generated ones.
fn transcripts() -> Vec<PathBuf> {
    let mut files = all_transcripts();
    files.extend(fixtures::generated_transcripts());
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
