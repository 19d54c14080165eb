//! The token counters as one projection: folded entry by entry as a live
//! session appends them, they equal the fold of the whole file, the last
//! valid usage read off the raw lines independently, and what
//! `AgentStore::record_usage` (`sessionlog usage`) computes for a store.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::Value;
use sessionlog_event_log::{load, Mode};
use sessionlog_events::gen::{generate, GenOptions};
use sessionlog_events::PiRules;
use sessionlog_events::{Entry, StoreEvent, Transcript};
use sessionlog_sessions::paths::SESSIONS_JSON;
use sessionlog_store::{
    path_counters, AgentStore, OwnedSessionWriter, SessionOptions, SessionWriter, TranscriptWriter,
    WriteOptions,
};
use sessionlog_test_support::fixtures;
use sessionlog_tokens::{ContextSize, PiEstimator};

fn fast() -> WriteOptions {
    WriteOptions { fsync: sessionlog_event_log::FsyncPolicy::Never, ..WriteOptions::default() }
}

/// Writes `transcript` to `path` one entry per append; returns the writer's counters after each.
fn append_one_by_one(path: &Path, transcript: &Transcript) -> Vec<ContextSize> {
    let mut writer = TranscriptWriter::create(path, &transcript.header, fast()).unwrap();
    transcript
        .entries
        .iter()
        .map(|e| {
            writer.append(std::slice::from_ref(e)).unwrap();
            writer.counters().clone()
        })
        .collect()
}

fn whole(transcript: &Transcript) -> ContextSize {
    path_counters(transcript, PiRules::V0_58, &PiEstimator).unwrap()
}

/// The last trusted usage on the default path, read off the raw lines with
/// serde_json alone: the leaf is the last non-header object, parents are
/// followed by id (a later duplicate id wins), and the usage is that of the
/// last assistant message not aborted or failed. Returns (input, output, total).
fn last_usage_by_hand(lines: &[String]) -> Option<(u64, u64, u64)> {
    let values: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut by_id = std::collections::HashMap::new();
    for (i, v) in values.iter().enumerate().skip(1) {
        if v["type"] != "session" {
            if let Some(id) = v["id"].as_str() {
                by_id.insert(id.to_owned(), i);
            }
        }
    }
    let mut at = (1..values.len()).rev().find(|&i| values[i]["type"] != "session");
    while let Some(i) = at {
        let m = &values[i]["message"];
        let trusted = values[i]["type"] == "message"
            && m["role"] == "assistant"
            && !matches!(m["stopReason"].as_str(), Some("aborted" | "error"))
            && m["usage"].is_object();
        if trusted {
            let u = &m["usage"];
            let part = |k: &str| u[k].as_f64();
            let total = match part("totalTokens") {
                Some(t) if t != 0.0 => Some(t),
                _ => Some(part("input")? + part("output")? + part("cacheRead")? + part("cacheWrite")?),
            };
            let n = |v: Option<f64>| v.unwrap_or(0.0).max(0.0) as u64;
            return Some((n(part("input")), n(part("output")), n(total)));
        }
        at = values[i]["parentId"].as_str().and_then(|p| by_id.get(p).copied());
    }
    None
}

fn lines_of(t: &Transcript) -> Vec<String> {
    std::iter::once(&t.header).chain(&t.entries).map(|e| e.raw().to_owned()).collect()
}

fn summary(size: &ContextSize) -> Option<(u64, u64, u64)> {
    let r = size.last_usage()?;
    let n = |v: Option<f64>| v.unwrap_or(0.0).max(0.0) as u64;
    let total = if r.tokens.is_finite() { r.tokens as u64 } else { 0 };
    Some((n(r.usage.input), n(r.usage.output), total))
}

#[test]
fn every_fixture_folded_entry_by_entry_equals_the_whole_file_and_the_hand_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = fixtures::pi_transcripts();
    files.extend(fixtures::openclaw_transcripts());
    files.extend(fixtures::generated_transcripts());
    assert!(files.len() >= 14, "fixtures found: {}", files.len());
    let mut with_usage = 0;
    for (n, file) in files.iter().enumerate() {
        let t = load(file, Mode::Lenient).unwrap().transcript;
        let copy = dir.path().join(format!("{n}.jsonl"));
        let steps = append_one_by_one(&copy, &t);
        let end = steps.last().cloned().unwrap_or_else(|| ContextSize::new(PiRules::V0_58));
        assert_eq!(end, whole(&t), "{}", file.display());
        // The file written is the transcript, and reads back to the same fold.
        let reread = load(&copy, Mode::Strict).unwrap().transcript;
        assert_eq!(whole(&reread), end, "{}", file.display());
        assert_eq!(summary(&end), last_usage_by_hand(&lines_of(&t)), "{}", file.display());
        with_usage += usize::from(end.last_usage().is_some());
        // Every prefix too: the counters after k appends are the fold of the first k entries.
        for (k, step) in steps.iter().enumerate().step_by(97) {
            assert_eq!(step, &whole(&t.prefix(k + 1)), "{} after {} entries", file.display(), k + 1);
        }
    }
    assert!(with_usage >= 8, "fixtures with usage: {with_usage}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn appending_in_any_batches_gives_the_counters_of_the_whole_file(
        seed in 0u64..10_000,
        branches in 0usize..4,
        compactions in 0usize..3,
        cuts in proptest::collection::vec(1usize..9, 1..40),
    ) {
        let lines = generate(GenOptions { seed, entries: 150, branches, compactions, tool_output_chars: 300 });
        let header = Entry::parse(&lines[0]).unwrap();
        let entries: Vec<Entry> = lines[1..].iter().map(|l| Entry::parse(l).unwrap()).collect();
        let t = Transcript::from_objects(header.clone(), entries.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut writer = TranscriptWriter::create(&dir.path().join("t.jsonl"), &header, fast()).unwrap();
        let mut at = 0;
        for cut in cuts.iter().cycle() {
            if at >= entries.len() {
                break;
            }
            let end = (at + cut).min(entries.len());
            writer.append(&entries[at..end]).unwrap();
            at = end;
        }
        prop_assert_eq!(writer.counters(), &whole(&t));
        prop_assert_eq!(summary(writer.counters()), last_usage_by_hand(&lines));
    }
}

/// A store whose sessions are the fixture store's plus one per other fixture
/// transcript; returns it with the transcripts to replay (session key, file).
fn fixture_store(root: &Path) -> (PathBuf, Vec<(String, PathBuf)>) {
    let state = fixtures::shared_dir().join("fixtures/openclaw");
    sessionlog_store::import(&state, root).unwrap();
    let store = AgentStore::jsonl(root, "build");
    let mut sessions = Vec::new();
    for (key, entry) in store.project(None).unwrap() {
        if let Some(path) = store.transcript_path(entry.as_object().unwrap()).filter(|p| p.is_file()) {
            sessions.push((key, path));
        }
    }
    let mut created = Vec::new();
    // Each usage change is one durable store write: the smaller fixtures keep
    // this test quick (every fixture goes through the fold above).
    let small = |p: &PathBuf| fs::metadata(p).is_ok_and(|m| m.len() < 400_000);
    let mut others: Vec<PathBuf> = fixtures::pi_transcripts().into_iter().filter(small).collect();
    others.extend(fixtures::generated_transcripts().into_iter().filter(small));
    for (n, file) in others.iter().enumerate() {
        let id = format!("fixture-{n}");
        let key = format!("agent:build:fixture:{n}");
        fs::copy(file, store.dir().join(format!("{id}.jsonl"))).unwrap();
        created.push(StoreEvent::Created {
            key: key.clone(),
            session_id: id.clone(),
            at: 1,
            reason: "test".into(),
            fields: Default::default(),
            provenance: None,
        });
        sessions.push((key, store.dir().join(format!("{id}.jsonl"))));
    }
    store.append(&created).unwrap();
    (store.dir().to_owned(), sessions)
}

#[test]
fn a_live_session_keeps_the_store_counters_equal_to_what_usage_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let (live_root, rebuilt_root) = (dir.path().join("live"), dir.path().join("rebuilt"));
    let (live_dir, sessions) = fixture_store(&live_root);
    let (_, _) = fixture_store(&rebuilt_root);
    assert!(sessions.len() >= 6, "{} sessions", sessions.len());
    // The rebuild: `sessionlog usage` over the untouched copies.
    let rebuilt = AgentStore::jsonl(&rebuilt_root, "build");
    let recorded = rebuilt.record_usage().unwrap();
    assert!(recorded.len() >= 5, "{} sessions had usage", recorded.len());
    // The live store: every transcript written again through a session,
    // entry by entry — every other one by an owned writer on another thread.
    let live =
        Arc::new(AgentStore::jsonl(&live_root, "build").with_fsync(sessionlog_event_log::FsyncPolicy::Never));
    for (n, (key, file)) in sessions.iter().enumerate() {
        let t = load(file, Mode::Lenient).unwrap().transcript;
        let aside = file.with_extension("orig");
        fs::rename(file, &aside).unwrap();
        let options = SessionOptions { cwd: "/", now_ms: 0, context_window: None, write: fast() };
        if n % 2 == 0 {
            // The header the session writes is its own; the entries are the recording's.
            let mut session = SessionWriter::open(&*live, key, &options).unwrap();
            for e in &t.entries {
                session.append(std::slice::from_ref(e)).unwrap();
            }
        } else {
            let mut session: OwnedSessionWriter = SessionWriter::open(live.clone(), key, &options).unwrap();
            std::thread::spawn(move || {
                for e in &t.entries {
                    session.append(std::slice::from_ref(e)).unwrap();
                }
            })
            .join()
            .unwrap();
        }
        fs::remove_file(&aside).unwrap();
    }
    let counters = |root: &Path| -> serde_json::Map<String, Value> {
        let store = AgentStore::jsonl(root, "build").project(None).unwrap();
        store
            .into_iter()
            .map(|(k, e)| {
                let picked: serde_json::Map<String, Value> = [
                    "inputTokens",
                    "outputTokens",
                    "cacheRead",
                    "cacheWrite",
                    "totalTokens",
                    "totalTokensFresh",
                ]
                .iter()
                .filter_map(|f| e.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
                (k, Value::Object(picked))
            })
            .collect()
    };
    let (live_counters, rebuilt_counters) = (counters(&live_root), counters(&rebuilt_root));
    assert_eq!(live_counters, rebuilt_counters);
    // Nothing left for a rebuild of the live store to record.
    assert_eq!(live.record_usage().unwrap(), Vec::new());
    // The projection on disk is the fold of the log.
    let on_disk: Value = serde_json::from_slice(&fs::read(live_dir.join(SESSIONS_JSON)).unwrap()).unwrap();
    assert_eq!(on_disk, Value::Object(live.project(None).unwrap()));
}
