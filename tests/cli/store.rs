//! `import` and `sessions`: the fixture store as an event-sourced store.

use std::fs;

use crate::support::{arg, fixtures, json, run, run_ok};

fn fixture_store() -> std::path::PathBuf {
    fixtures::shared_dir().join("fixtures/openclaw/agents/build/sessions/sessions.json")
}

#[test]
fn import_then_rebuild_reproduces_the_store_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    let state = fixtures::shared_dir().join("fixtures/openclaw");
    let said = String::from_utf8(run_ok(&["import", arg(&state), "--into", arg(&into)])).unwrap();
    assert!(said.starts_with("agent build: 12 sessions imported, 4 transcripts copied"), "{said}");
    let sessions = into.join("agents/build/sessions");
    // The projection equals the original store, field for field and, since it is
    // written as OpenClaw writes it, byte for byte.
    let original = fs::read(fixture_store()).unwrap();
    let projected = fs::read(sessions.join("sessions.json")).unwrap();
    assert_eq!(projected, original);
    let printed = json(&run_ok(&["sessions", "--store", arg(&into), "--json"]));
    assert_eq!(printed, json(&original));
    // One imported event per entry.
    let events = fs::read_to_string(sessions.join("events.jsonl")).unwrap();
    assert_eq!(events.lines().count(), 12);
    assert!(events.lines().all(|l| l.starts_with(r#"{"type":"imported","key":"agent:build:"#)));
    // Delete the projection, rebuild it from the log: the same bytes.
    fs::remove_file(sessions.join("sessions.json")).unwrap();
    run_ok(&["sessions", "--store", arg(&into), "--rebuild"]);
    assert_eq!(fs::read(sessions.join("sessions.json")).unwrap(), projected);
    // Time travel: the store after its first 3 events.
    let early = json(&run_ok(&["sessions", "--store", arg(&into), "--at", "3", "--json"]));
    assert_eq!(early.as_object().unwrap().len(), 3);
    // A second import into the same store is refused, nothing rewritten.
    let again = run(&["import", arg(&state), "--into", arg(&into)]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(fs::read_to_string(sessions.join("events.jsonl")).unwrap(), events);
}

#[test]
fn bad_stores_are_refused_with_file_and_reason_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("agents/main/sessions");
    fs::create_dir_all(&src).unwrap();
    let into = dir.path().join("out");
    let cases = [
        ("{\"agent:main:main\": {\"sessionId\": \"a\",", "sessions.json:1:"),
        ("[1, 2]", "not a session store: expected a JSON object, found an array"),
        (r#"{"agent:main:../../etc": {"sessionId": "a", "updatedAt": 1}}"#, "invalid session key"),
        (r#"{"agent:main:main": {"sessionId": "../escape", "updatedAt": 1}}"#, "Invalid session ID"),
    ];
    for (content, reason) in cases {
        fs::write(src.join("sessions.json"), content).unwrap();
        let out = run(&["import", arg(dir.path()), "--into", arg(&into)]);
        assert_eq!(out.status.code(), Some(1), "{content}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{content}: {stderr}");
        assert!(!into.exists(), "{content}: something was written");
        assert_eq!(fs::read_to_string(src.join("sessions.json")).unwrap(), content, "source untouched");
    }
}
