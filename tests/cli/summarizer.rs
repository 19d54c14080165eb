//! `--summarizer model`: replay, sweep and compact with a model (the fake
//! server on loopback), its cache, and offline re-runs from the cache.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::Value;
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use sessionlog_test_support::fixtures::summary_body;
use sha2::{Digest, Sha256};

use crate::support::{arg, fixtures, json, run, run_ok};

/// A policy small enough that the fixture compacts several times (the
/// OpenClaw preset: above 16000 − min(20000, ⌊16000/4⌋) = 12000).
const PRESSURE: [&str; 6] = ["--context-window", "16000", "--reserve", "4096", "--keep-recent", "4000"];

fn model_config(dir: &Path, fake: &FakeLlm) -> std::path::PathBuf {
    let path = dir.join("live.toml");
    let text = format!(
        "state_dir = \"state\"\n[model]\napi = \"openai-completions\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\nmax_tokens = 4096\n",
        fake.openai_base_url()
    );
    fs::write(&path, text).unwrap();
    path
}

/// A policy under which the fixture has history to summarise at its leaf.
fn small_policy(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("small.toml");
    fs::write(
        &path,
        "name = \"small\"\ncontextWindow = 32000\nreserveTokens = 4096\nkeepRecentTokens = 4000\n",
    )
    .unwrap();
    path
}

fn is_key(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The cache's entry names without `.json`, and whether `model.json` is there.
fn cache_keys(dir: &Path) -> (BTreeSet<String>, bool) {
    let mut keys = BTreeSet::new();
    let mut model = false;
    for e in fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        match name.strip_suffix(".json") {
            Some("model") => model = true,
            Some(key) if is_key(key) => {
                keys.insert(key.to_owned());
            }
            _ => panic!("unexpected file in the cache: {name}"),
        }
    }
    (keys, model)
}

#[test]
fn replay_with_the_model_then_offline_from_the_cache_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let file = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    let fake = FakeLlm::start();
    for i in 0..400 {
        fake.push(Reply::turn(Turn::text(&format!("## Decisions\n- model summary {i}"))));
    }
    let config = model_config(tmp.path(), &fake);
    let mut args = vec!["replay", arg(&file)];
    args.extend(PRESSURE);
    args.extend(["--summarizer", "model", "--model-cache", arg(&cache), "--json"]);
    let mut online = args.clone();
    online.extend(["--model-config", arg(&config)]);
    let first = run_ok(&online);
    let report = json(&first);
    assert_eq!(report["summarizer"], "model");
    let compactions = report["compactions"].as_array().unwrap();
    assert!(compactions.len() >= 2, "the policy compacts: {}", compactions.len());
    // Every summary the pipeline asked for is the model's; a compaction that had nothing new to
    // summarise keeps the previous (model-written) summary under the five headings.
    let mut full = 0;
    for c in compactions {
        let summary = c["summary"].as_str().unwrap();
        assert!(summary.contains("- model summary "), "{summary}");
        if c["fallback"] == "full" {
            assert!(summary_body(summary).starts_with("## Decisions\n- model summary "), "{summary}");
            full += 1;
        }
    }
    assert!(full >= 1);
    // One cache entry per distinct request the server received, named by
    // SHA-256 of "api\nbase-url\nmodel\n" + the body.
    let received = fake.requests();
    assert!(!received.is_empty());
    let expected: BTreeSet<String> = received
        .iter()
        .map(|r| {
            let mut input =
                format!("openai-completions\n{}\nfake-model\n", fake.openai_base_url()).into_bytes();
            input.extend_from_slice(&r.body);
            Sha256::digest(&input).iter().map(|b| format!("{b:02x}")).collect()
        })
        .collect();
    let (keys, model) = cache_keys(&cache);
    assert!(model, "model.json is written");
    assert_eq!(keys, expected);
    drop(fake);

    // Offline: the same bytes, from the cache alone.
    let second = run_ok(&args);
    assert_eq!(String::from_utf8_lossy(&second), String::from_utf8_lossy(&first));

    // Offline under another policy: requests the cache never saw fail the run, naming the hash.
    let mut other = args.clone();
    other[7] = "3000"; // --keep-recent
    let out = run(&other);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let key = stderr.split("summary cache miss: ").nth(1).map(|s| &s[..64.min(s.len())]);
    assert!(key.is_some_and(is_key), "{stderr}");
    assert!(out.stdout.is_empty(), "no report is printed");
}

#[test]
fn a_sweep_with_the_model_cache_is_deterministic_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let file = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    let fake = FakeLlm::start();
    // Workers run in parallel: one answer for every request keeps the first run's rows
    // independent of the order requests arrive in.
    for _ in 0..600 {
        fake.push(Reply::turn(Turn::text("## Decisions\n- the model's summary")));
    }
    let config = model_config(tmp.path(), &fake);
    let sweep = |out: &str, online: bool| {
        let out_dir = tmp.path().join(out);
        let mut args = vec![
            "sweep",
            arg(&file),
            // The OpenClaw preset's grid: compaction above 9000 and 12000 (a quarter reserved).
            "--context-window",
            "12000,16000",
            "--reserve",
            "4096",
            "--keep-recent",
            "4000",
            "--summarizer",
            "model",
            "--model-cache",
            arg(&cache),
            "--out",
            arg(&out_dir),
            "--quiet",
        ];
        if online {
            args.extend(["--model-config", arg(&config)]);
        }
        run_ok(&args);
        fs::read(out_dir.join("results.jsonl")).unwrap()
    };
    let first = sweep("online", true);
    assert!(!fake.requests().is_empty());
    drop(fake);
    let second = sweep("offline-1", false);
    let third = sweep("offline-2", false);
    assert_eq!(second, first);
    assert_eq!(third, first);
    let rows: Vec<Value> =
        String::from_utf8(first).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The two grid policies, then the OpenClaw and Pi defaults a sweep always adds.
    assert_eq!(rows.len(), 4);
    let compacted = rows.iter().filter(|r| r["metrics"]["compactions"].as_u64().unwrap() > 0).count();
    assert!(compacted >= 2, "{rows:?}");
}

#[test]
fn model_flags_are_checked() {
    let file = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    let out = run(&["replay", arg(&file), "--summarizer", "model"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--model-config"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["replay", arg(&file), "--model-cache", "somewhere"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--summarizer model"));
    let out = run(&["replay", arg(&file), "--summarizer", "oracle"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn compact_offline_with_an_empty_cache_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    fs::copy(fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl"), &file).unwrap();
    let before = fs::read(&file).unwrap();
    let cache = tmp.path().join("cache");
    let policy = small_policy(tmp.path());
    let compact = [
        "compact",
        arg(&file),
        "--policy",
        arg(&policy),
        "--summarizer",
        "model",
        "--model-cache",
        arg(&cache),
    ];
    let out = run(&compact);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("model.json"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(&file).unwrap(), before);
    // The cache knows the model but not this request: a miss, and still nothing written.
    fs::write(
        cache.join("model.json"),
        r#"{"api":"openai-completions","base_url":"http://127.0.0.1:9/v1","model":"fake-model"}"#,
    )
    .unwrap();
    let out = run(&compact);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("summary cache miss: "));
    assert_eq!(fs::read(&file).unwrap(), before);
}

#[test]
fn compact_with_the_model_appends_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.jsonl");
    fs::copy(fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl"), &file).unwrap();
    let before = fs::read_to_string(&file).unwrap();
    let fake = FakeLlm::start();
    for i in 0..50 {
        fake.push(Reply::turn(Turn::text(&format!("## Decisions\n- compacted by the model {i}"))));
    }
    let config = model_config(tmp.path(), &fake);
    let cache = tmp.path().join("cache");
    let policy = small_policy(tmp.path());
    let args = [
        "compact",
        arg(&file),
        "--policy",
        arg(&policy),
        "--summarizer",
        "model",
        "--model-config",
        arg(&config),
    ];
    let mut with_cache = args.to_vec();
    with_cache.extend(["--model-cache", arg(&cache)]);
    let doc = json(&run_ok(&with_cache));
    assert_eq!(doc["written"], true);
    let after = fs::read_to_string(&file).unwrap();
    let added = &after[before.len()..];
    assert_eq!(added.lines().count(), 1, "one entry appended");
    let entry: Value = serde_json::from_str(added.trim_end()).unwrap();
    let summary = entry["summary"].as_str().unwrap();
    assert!(summary_body(summary).starts_with("## Decisions\n- compacted by the model "), "{summary}");
    // The split turn's prefix is the last request; its answer follows the main summary.
    let n = fake.requests().len();
    assert!(n >= 2);
    let prefix = format!(
        "\n\n---\n\n**Turn Context (split turn):**\n\n## Decisions\n- compacted by the model {}\n",
        n - 1
    );
    assert!(summary.contains(&prefix), "{summary}");
}

#[test]
fn a_policy_file_names_its_summarizer() {
    let tmp = tempfile::tempdir().unwrap();
    let file = fixtures::project_dir().join("fixtures/generated/linear-s1.jsonl");
    let policy = tmp.path().join("model.toml");
    fs::write(
        &policy,
        "name = \"m\"\ncontextWindow = 32000\nreserveTokens = 4096\nkeepRecentTokens = 4000\nsummarizer = \"model\"\n",
    )
    .unwrap();
    // The policy's summariser is the model: an empty cache cannot serve it.
    let empty = tmp.path().join("empty");
    let out = run(&["replay", arg(&file), "--policy", arg(&policy), "--model-cache", arg(&empty)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("model.json"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // --summarizer overrides it; the report's policy keeps the field.
    let report = json(&run_ok(&[
        "replay",
        arg(&file),
        "--policy",
        arg(&policy),
        "--summarizer",
        "extractive",
        "--json",
    ]));
    assert_eq!(report["summarizer"], "extractive");
    assert_eq!(report["policy"]["summarizer"], "model");
    // The same key the live loop's [compaction] table takes; unknown names are refused.
    fs::write(&policy, "name = \"m\"\nsummarizer = \"oracle\"\n").unwrap();
    let out = run(&["replay", arg(&file), "--policy", arg(&policy)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid policy"));
}
