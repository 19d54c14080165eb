//! Helpers shared by the test files: independent reads of a database
//! (Python's sqlite3) and OpenClaw's documented rewrites during migration.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sessionlog_event_log::{Mode, Reader};
use sessionlog_sqlite_store::{AgentDatabase, TranscriptName};
use sessionlog_test_support::fixtures::shared_dir;

/// The JSONL store the SQLite fixture was migrated from.
pub fn jsonl_sessions() -> PathBuf {
    shared_dir().join("fixtures/openclaw/agents/build/sessions")
}

/// `(session_key, entry_json)` in `rowid` order and the transcript ids, read by Python's sqlite3.
pub fn python_read(db: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let script = r#"
import json, sqlite3, sys, urllib.parse
uri = 'file:' + urllib.parse.quote(sys.argv[1]) + '?immutable=1'
db = sqlite3.connect(uri, uri=True)
nodes = db.execute('SELECT session_key, entry_json FROM session_nodes ORDER BY rowid').fetchall()
ids = [r[0] for r in db.execute('SELECT DISTINCT session_id FROM transcript_events ORDER BY session_id')]
print(json.dumps({'nodes': nodes, 'ids': ids}))
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(db).output().expect("python3 runs");
    assert!(out.status.success(), "python3: {}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_str().unwrap().to_owned()))
        .collect();
    let ids = doc["ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    (nodes, ids)
}

/// `event_json` of every event of `id` in `seq` order (None for compressed rows), read by Python.
pub fn python_events(db: &Path, id: &str) -> Vec<Option<String>> {
    let script = r#"
import json, sqlite3, sys, urllib.parse
db = sqlite3.connect('file:' + urllib.parse.quote(sys.argv[1]) + '?immutable=1', uri=True)
rows = db.execute('SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq', (sys.argv[2],))
print(json.dumps([r[0] for r in rows]))
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(db).arg(id).output().expect("python3 runs");
    assert!(out.status.success(), "python3: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A JSONL original as OpenClaw's migration stores it: lines kept verbatim,
/// except that messages of the retired `openai-codex` provider are rewritten
/// (provider `openai-codex` → `openai`, api `openai-codex-responses` →
/// `openai-chatgpt-responses`) and re-serialised. Returns the bytes and how
/// many lines were rewritten.
pub fn as_openclaw_migrates(original: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut rewritten = 0;
    for line in original.split_inclusive(|&b| b == b'\n') {
        let text = std::str::from_utf8(line).unwrap().trim_end_matches('\n');
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut touched = false;
        if let Some(message) = value.get_mut("message").and_then(|m| m.as_object_mut()) {
            if message.get("provider").and_then(|p| p.as_str()) == Some("openai-codex") {
                message.insert("provider".into(), "openai".into());
                touched = true;
            }
            if message.get("api").and_then(|p| p.as_str()) == Some("openai-codex-responses") {
                message.insert("api".into(), "openai-chatgpt-responses".into());
                touched = true;
            }
        }
        if touched {
            rewritten += 1;
            out.extend_from_slice(sessionlog_events::json::to_js_string(&value).unwrap().as_bytes());
            out.push(b'\n');
        } else {
            out.extend_from_slice(line);
        }
    }
    (out, rewritten)
}

/// Checks a database against Python's reading of it and against the JSONL
/// files OpenClaw migrated it from.
pub fn check_against_independent_reads(db: &AgentDatabase) {
    let (nodes, ids) = python_read(db.path());
    let ours: Vec<(String, String)> =
        db.nodes().unwrap().into_iter().map(|n| (n.key, n.entry_json)).collect();
    assert_eq!(ours, nodes, "session_nodes rows");
    let entries = db.entries().unwrap();
    assert_eq!(
        entries.keys().cloned().collect::<Vec<_>>(),
        nodes.iter().map(|n| n.0.clone()).collect::<Vec<_>>()
    );
    for (key, text) in &nodes {
        let expected: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(entries[key], expected, "{key}");
    }
    assert_eq!(db.transcript_ids().unwrap(), ids);
    assert_eq!(ids.len(), 3, "the store holds three transcripts");
    for id in &ids {
        let original = std::fs::read(jsonl_sessions().join(format!("{id}.jsonl"))).unwrap();
        let (expected, rewritten) = as_openclaw_migrates(&original);
        // Only the transcript with `openai-codex` messages was rewritten by the migration.
        let expected_rewrites = if id == "684637ff-e673-46e4-a1a9-0de622f22f21" { 53 } else { 0 };
        assert_eq!(rewritten, expected_rewrites, "{id}");
        let bytes = db.transcript_bytes(id).unwrap();
        assert!(bytes == expected, "{id}: transcript differs from its JSONL original");
        // Rows stored uncompressed are exactly what Python reads.
        for (line, stored) in bytes.split(|&b| b == b'\n').zip(python_events(db.path(), id)) {
            if let Some(stored) = stored {
                assert_eq!(line, stored.as_bytes(), "{id}");
            }
        }
        // The JSONL reader takes it as it takes the file: every line an entry.
        let name = TranscriptName { database: db.path().to_owned(), session_id: id.clone() };
        let reader = Reader::new(db.transcript(id).unwrap(), Path::new(&name.to_string()), Mode::Strict);
        let loaded = sessionlog_event_log::read::load_from(reader).unwrap();
        let lines = original.iter().filter(|&&b| b == b'\n').count();
        assert_eq!(loaded.transcript.entries.len() + 1, lines, "{id}");
    }
}
