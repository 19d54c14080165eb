//! Against OpenClaw itself (`shared/oracle/openclaw`, OpenClaw 2026.9.6):
//! OpenClaw migrates the JSONL fixture store to SQLite and we read back every
//! entry and transcript; a database we write is listed by OpenClaw exactly as
//! its own, and passes its validation.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value};
use sessionlog_sqlite_store::{database_path, AgentDatabase, Export};
use sessionlog_test_support::fixtures::{copy_tree, shared_dir};
use sessionlog_test_support::oracle::openclaw;
use support::{check_against_independent_reads, jsonl_sessions};

/// Fields OpenClaw's migration drops from an entry: the legacy delivery
/// fields (folded into `delivery`) and `sessionFile` (transcripts now live in
/// the database).
const DROPPED: &[&str] =
    &["deliveryContext", "lastChannel", "lastTo", "lastAccountId", "channel", "origin", "sessionFile"];
/// Fields it adds: the canonical `delivery` record, and `chatType` where the
/// delivery says it is a direct chat.
const ADDED: &[&str] = &["delivery", "chatType"];

fn names(fields: &[&str]) -> BTreeSet<String> {
    fields.iter().map(|f| (*f).to_owned()).collect()
}

#[test]
fn openclaw_migrates_the_jsonl_store_and_we_read_back_every_entry_and_transcript() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let said = openclaw::migrated_fixture(&state, |_| {});
    assert!(said.contains("imported=14/888 events"), "{said}");

    let db = AgentDatabase::open(&database_path(&state, "build")).unwrap();
    // Every key's entry equals session_nodes.entry_json read by Python, and
    // every transcript equals its JSONL original (with OpenClaw's one rewrite).
    check_against_independent_reads(&db);

    // Against the original sessions.json: OpenClaw keeps every other field unchanged.
    let original: Map<String, Value> =
        serde_json::from_slice(&std::fs::read(jsonl_sessions().join("sessions.json")).unwrap()).unwrap();
    let entries = db.entries().unwrap();
    let (mut dropped, mut added, mut changed) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (key, before) in &original {
        let before = before.as_object().unwrap();
        let after = entries[key].as_object().unwrap_or_else(|| panic!("{key} missing"));
        for (field, value) in before {
            match after.get(field) {
                None => drop(dropped.insert(field.clone())),
                Some(v) if v != value => drop(changed.insert(field.clone())),
                Some(_) => {}
            }
        }
        added.extend(after.keys().filter(|f| !before.contains_key(*f)).cloned());
        // The one changed field: the runtime-only skill list is stripped.
        if let Some(skills) = before.get("skillsSnapshot") {
            let mut expected = skills.as_object().unwrap().clone();
            expected.remove("resolvedSkills");
            assert_eq!(after["skillsSnapshot"], Value::Object(expected), "{key}");
        }
    }
    assert_eq!(dropped, names(DROPPED));
    assert_eq!(added, names(ADDED));
    assert_eq!(changed, names(&["skillsSnapshot"]));
    // Transcripts without an entry become archived `recovered` sessions.
    let extra: Vec<&String> = entries.keys().filter(|k| !original.contains_key(*k)).collect();
    assert_eq!(
        extra,
        [
            "agent:build:recovered:26f24350-50e0-432d-bfa3-f0ec08fa2691",
            "agent:build:recovered:684637ff-e673-46e4-a1a9-0de622f22f21"
        ]
    );
    for key in extra {
        assert!(entries[key]["archivedAt"].is_i64(), "{key}");
    }
    assert_eq!(db.windows().unwrap().len(), 13);

    // The same schema as our writer's (OpenClaw compares schemas text for text).
    let ours = tmp.path().join("ours.sqlite");
    let none = Map::new();
    sessionlog_sqlite_store::create(
        &ours,
        &Export { agent_id: "build", entries: &none, transcripts: &[], now_ms: 0 },
    )
    .unwrap();
    assert_eq!(schema(&ours), schema(db.path()));
}

/// `sqlite_master` as (type, name, sql), sorted.
fn schema(path: &Path) -> Vec<(String, String, Option<String>)> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn.prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// The rows of `openclaw sessions --json`, without `ageMs` (it moves with the clock).
fn listed(state: &Path) -> Vec<Value> {
    let doc = openclaw::json(state, &["sessions", "--agent", "build", "--json"]);
    let mut rows = doc["sessions"].as_array().unwrap().clone();
    for row in &mut rows {
        row.as_object_mut().unwrap().remove("ageMs");
    }
    rows
}

#[test]
fn a_database_we_write_is_listed_and_validated_by_openclaw() {
    let tmp = tempfile::tempdir().unwrap();
    // OpenClaw's own migration of the fixture store, committed.
    let theirs = tmp.path().join("theirs");
    copy_tree(&shared_dir().join("fixtures/openclaw-sqlite/agents"), &theirs.join("agents"));
    openclaw::write_config(&theirs, &["build"], None);
    // Ours: the same entries and transcripts, read with our reader, written by our writer.
    let source = AgentDatabase::open(&database_path(&theirs, "build")).unwrap();
    let entries = source.entries().unwrap();
    let transcripts: Vec<(String, Vec<String>)> = source
        .transcript_ids()
        .unwrap()
        .into_iter()
        .map(|id| {
            let bytes = source.transcript_bytes(&id).unwrap();
            let lines = String::from_utf8(bytes).unwrap().lines().map(str::to_owned).collect();
            (id, lines)
        })
        .collect();
    drop(source);
    let ours = tmp.path().join("ours");
    openclaw::write_config(&ours, &["build"], None);
    let export =
        Export { agent_id: "build", entries: &entries, transcripts: &transcripts, now_ms: 1_796_000_000_000 };
    let written = sessionlog_sqlite_store::create(&database_path(&ours, "build"), &export).unwrap();
    assert_eq!((written.entries, written.windows, written.events), (14, 13, 888));

    // OpenClaw lists the same sessions with the same fields.
    let (ours_listed, theirs_listed) = (listed(&ours), listed(&theirs));
    assert_eq!(ours_listed.len(), 14);
    for (a, b) in ours_listed.iter().zip(&theirs_listed) {
        assert_eq!(a, b);
    }
    assert_eq!(ours_listed, theirs_listed);

    // OpenClaw's inspection reads every session of it without an issue.
    let out = openclaw::run(&ours, &["doctor", "--session-sqlite", "inspect", "--session-sqlite-all-agents"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("1 target(s), 0 legacy entries, 14 sqlite entries, 0 issue(s)"), "{said}");

    // Validation against the JSONL store it came from: every key and its
    // session id found, every transcript's event count equal. OpenClaw also
    // flags the JSONL transcripts still beside an SQLite session (they await
    // archiving), the only kind of issue here, and says the same of its own
    // database.
    let validate = |state: &Path| {
        let out =
            openclaw::run(state, &["doctor", "--session-sqlite", "validate", "--session-sqlite-all-agents"]);
        let said = String::from_utf8_lossy(&out.stdout).replace(&state.display().to_string(), "STATE");
        (out.status.code(), said)
    };
    for state in [&ours, &theirs] {
        copy_tree(&jsonl_sessions(), &state.join("agents/build/sessions"));
    }
    let (code, said) = validate(&ours);
    assert!(said.contains("validated=14/888 events"), "{said}");
    let issues: Vec<&str> = said.lines().filter(|l| l.trim_start().starts_with('[')).collect();
    assert_eq!(issues.len(), 3, "{said}");
    assert!(issues.iter().all(|l| l.trim_start().starts_with("[active_sqlite_transcript_jsonl]")), "{said}");
    assert_eq!((code, said), validate(&theirs));
}
