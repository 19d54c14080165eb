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

#[test]
fn concurrent_patches_from_several_processes_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    let state = fixtures::shared_dir().join("fixtures/openclaw");
    run_ok(&["import", arg(&state), "--into", arg(&into)]);
    let key = "agent:build:main";
    const WRITERS: usize = 6;
    const PATCHES: usize = 15;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let into = &into;
            s.spawn(move || {
                for i in 0..PATCHES {
                    let set = format!("p{w}={i}");
                    let at = (1_800_000_000_000u64 + (w * PATCHES + i) as u64).to_string();
                    run_ok(&[
                        "patch",
                        "--store",
                        arg(into),
                        "--agent",
                        "build",
                        key,
                        "--set",
                        &set,
                        "--at",
                        &at,
                    ]);
                }
            });
        }
    });
    let sessions = into.join("agents/build/sessions");
    let events = fs::read_to_string(sessions.join("events.jsonl")).unwrap();
    let lines: Vec<&str> = events.lines().collect();
    assert_eq!(lines.len(), 12 + WRITERS * PATCHES, "every event present");
    for w in 0..WRITERS {
        for i in 0..PATCHES {
            let needle = format!(r#""patch":{{"p{w}":{i}}}"#);
            assert_eq!(lines.iter().filter(|l| l.contains(&needle)).count(), 1, "p{w}={i} once");
        }
    }
    // The projection saw every update (the last value of each writer's field)…
    let projected = json(&fs::read(sessions.join("sessions.json")).unwrap());
    for w in 0..WRITERS {
        assert_eq!(projected[key][format!("p{w}")], PATCHES as u64 - 1, "p{w}");
    }
    // …and equals a rebuild from the log.
    let before = fs::read(sessions.join("sessions.json")).unwrap();
    run_ok(&["sessions", "--store", arg(&into), "--rebuild"]);
    assert_eq!(fs::read(sessions.join("sessions.json")).unwrap(), before);
}

#[test]
fn unknown_store_events_are_refused_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("agents/main/sessions");
    fs::create_dir_all(&sessions).unwrap();
    let good = r#"{"type":"created","key":"agent:main:main","sessionId":"s1","at":1,"reason":"inbound"}"#;
    fs::write(sessions.join("events.jsonl"), format!("{good}\n{{\"type\":\"teleported\",\"key\":\"k\"}}\n"))
        .unwrap();
    let out = run(&["sessions", "--store", arg(dir.path()), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("events.jsonl:2:") && stderr.contains("unknown variant `teleported`"),
        "{stderr}"
    );
}

#[test]
fn usage_counters_come_from_the_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    run_ok(&["import", arg(&fixtures::shared_dir().join("fixtures/openclaw")), "--into", arg(&into)]);
    let said = String::from_utf8(run_ok(&["usage", "--store", arg(&into)])).unwrap();
    // Of the 12 sessions only 678366ea has its transcript in the fixture folder.
    assert_eq!(said.trim(), "agent build: usage recorded for 1 sessions");
    let store = json(&run_ok(&["sessions", "--store", arg(&into), "--json"]));
    let e = &store
        ["agent:build:cron:041c005d-992e-440c-8521-c014a53ef7fb:run:678366ea-e225-4877-a005-d4b79b0ed0ec"];
    // The last valid assistant usage of the transcript (entry d59f8bca), read off with Python's json.
    assert_eq!(
        (e["inputTokens"].as_u64(), e["outputTokens"].as_u64(), e["cacheRead"].as_u64()),
        (Some(133), Some(44), Some(38784))
    );
    assert_eq!((e["totalTokens"].as_u64(), e["totalTokensFresh"].as_bool()), (Some(38961), Some(true)));
    assert!(
        e["updatedAt"].as_i64().unwrap() >= 1_771_577_130_981,
        "the usage counts as activity at its time"
    );
    // Running it again records nothing new.
    let again = String::from_utf8(run_ok(&["usage", "--store", arg(&into)])).unwrap();
    assert_eq!(again.trim(), "agent build: usage recorded for 0 sessions");
}

#[test]
fn cleanup_reports_then_enforces_openclaw_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    run_ok(&["import", arg(&fixtures::shared_dir().join("fixtures/openclaw")), "--into", arg(&into)]);
    let sessions = into.join("agents/build/sessions");
    let log_before = fs::read(sessions.join("events.jsonl")).unwrap();
    let store_before = fs::read(sessions.join("sessions.json")).unwrap();
    let removed = |report: &serde_json::Value, why: &str| -> Vec<String> {
        report[0]["removed"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["why"] == why)
            .map(|r| r["key"].as_str().unwrap().to_owned())
            .collect()
    };

    // 30 days before 2026-03-20T21:00Z is 2026-02-18T21:00Z: five entries were
    // last updated before that (read off the fixture's updatedAt values). The
    // main session and the direct chat are protected; the three runtime rows go.
    let report = json(&run_ok(&["cleanup", "--store", arg(&into), "--now", "2026-03-20T21:00:00Z"]));
    assert_eq!(report[0]["mode"], "warn");
    assert_eq!(
        removed(&report, "stale"),
        [
            "agent:build:cron:8b380d56-7314-4ba9-b4c4-ea11d3e5ca6f",
            "agent:build:cron:e78d8581-f2b2-47f7-b79c-c469c401e6c9",
            "agent:build:subagent:7e7f7194-c91b-41f9-857c-ba52dbc270cc",
        ]
    );
    assert_eq!(report[0]["archived"], serde_json::json!([]));
    assert_eq!(report[0]["kept"], 9);
    // The active session is exempt.
    let active = "agent:build:cron:8b380d56-7314-4ba9-b4c4-ea11d3e5ca6f";
    let exempt = json(&run_ok(&[
        "cleanup",
        "--store",
        arg(&into),
        "--now",
        "2026-03-20T21:00:00Z",
        "--active-key",
        active,
    ]));
    assert_eq!(exempt[0]["activeExempted"], true);
    assert!(!removed(&exempt, "stale").contains(&active.to_owned()));
    // Reporting writes nothing.
    assert_eq!(fs::read(sessions.join("events.jsonl")).unwrap(), log_before);
    assert_eq!(fs::read(sessions.join("sessions.json")).unwrap(), store_before);

    // Enforce a cap of 3: every one of the eight runtime rows goes; the four
    // protected sessions count toward the cap but stay.
    let cap = ["--prune-after", "off", "--max-entries", "3", "--now", "2026-03-01T00:00:00Z"];
    let mut args = vec!["cleanup", "--store", arg(&into), "--enforce"];
    args.extend(cap);
    let report = json(&run_ok(&args));
    assert_eq!(removed(&report, "overCap").len(), 8);
    let store = json(&fs::read(sessions.join("sessions.json")).unwrap());
    let kept: Vec<&str> = store.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        kept,
        [
            "agent:build:main",
            "agent:build:discord:channel:191633014441115648",
            "agent:build:discord:pip-build:direct:191633014441115650",
            "agent:build:discord:pip-build:direct:191633014441115648",
        ]
    );
    // The log grew by one event per removal; the projection is its fold.
    let log = fs::read_to_string(sessions.join("events.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 12 + 8);
    run_ok(&["sessions", "--store", arg(&into), "--rebuild"]);
    assert_eq!(json(&fs::read(sessions.join("sessions.json")).unwrap()), store);
    // The removed cron run's transcript is archived, not deleted; unreferenced files stay.
    assert_eq!(
        report[0]["archivedFiles"],
        serde_json::json!(["678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl.deleted.2026-03-01T00-00-00.000Z"])
    );
    assert!(!sessions.join("678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl").exists());
    assert!(sessions
        .join("678366ea-e225-4877-a005-d4b79b0ed0ec.jsonl.deleted.2026-03-01T00-00-00.000Z")
        .is_file());
    assert!(sessions.join("26f24350-50e0-432d-bfa3-f0ec08fa2691.jsonl").is_file());
    // Nothing left to do.
    let again = json(&run_ok(&args));
    assert!(again[0]["removed"].as_array().unwrap().is_empty());
}

#[test]
fn a_turn_reuses_resets_or_starts_a_session_as_openclaw_decides() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    run_ok(&["import", arg(&fixtures::shared_dir().join("fixtures/openclaw")), "--into", arg(&into)]);
    let sessions = into.join("agents/build/sessions");
    // Last updated 2026-02-20T08:45:00.032Z; its transcript is in the store.
    let key =
        "agent:build:cron:041c005d-992e-440c-8521-c014a53ef7fb:run:678366ea-e225-4877-a005-d4b79b0ed0ec";
    let old_id = "678366ea-e225-4877-a005-d4b79b0ed0ec";
    let turn = |extra: &[&str]| {
        let mut args = vec!["turn", "--store", arg(&into), "--agent", "build", key];
        args.extend_from_slice(extra);
        json(&run_ok(&args))
    };
    let entry = || json(&fs::read(sessions.join("sessions.json")).unwrap())[key].clone();

    // Same day, after the 04:00 boundary: the session carries on.
    let t = turn(&["--body", "hello", "--now", "2026-02-20T09:00:00Z"]);
    assert_eq!(t["decision"], serde_json::json!({"decision": "reuse"}));
    assert_eq!(t["sessionId"], old_id);
    assert_eq!(t["prompt"], "hello");
    // The next day after 04:00 it would not (printed only: nothing written).
    let t = turn(&["--body", "hello", "--now", "2026-02-21T05:00:00Z"]);
    assert_eq!(t["decision"], serde_json::json!({"decision": "new", "reason": "daily"}));
    assert_eq!(entry()["sessionId"], old_id);
    // An unauthorised sender's `/new` is just a message.
    let t = turn(&["--body", "/new", "--now", "2026-02-20T09:00:00Z"]);
    assert_eq!(t["decision"]["decision"], "reuse");

    // Applied activity moves updatedAt to the turn.
    turn(&["--body", "hello", "--now", "2026-02-20T09:00:00Z", "--apply"]);
    assert_eq!(entry()["updatedAt"], 1_771_578_000_000_i64);
    assert_eq!(entry()["sessionId"], old_id);

    // An authorised `/reset <prompt>`: a new generation, the old transcript archived.
    let t = turn(&[
        "--body",
        "[Fri 09:05] /RESET check the PRs",
        "--authorized",
        "--now",
        "2026-02-20T09:05:00Z",
        "--apply",
    ]);
    assert_eq!(t["decision"], serde_json::json!({"decision": "new", "reason": "reset"}));
    assert_eq!(t["prompt"], "check the PRs");
    let new_id = t["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(new_id, old_id);
    assert_eq!(new_id.len(), 36);
    assert_eq!(entry()["sessionId"], new_id.as_str());
    let archive = format!("{old_id}.jsonl.reset.2026-02-20T09-05-00.000Z");
    assert_eq!(t["archivedTranscript"], archive.as_str());
    assert!(sessions.join(&archive).is_file());
    assert!(!sessions.join(format!("{old_id}.jsonl")).exists());
    // The projection is still the fold of the log.
    let projected = json(&fs::read(sessions.join("sessions.json")).unwrap());
    run_ok(&["sessions", "--store", arg(&into), "--rebuild"]);
    assert_eq!(json(&fs::read(sessions.join("sessions.json")).unwrap()), projected);

    // A key the store has never seen starts its first session.
    let t = json(&run_ok(&[
        "turn",
        "--store",
        arg(&into),
        "--agent",
        "build",
        "agent:build:main:thread:42",
        "--body",
        "hi",
        "--now",
        "2026-02-20T09:10:00Z",
        "--apply",
    ]));
    assert_eq!(t["decision"], serde_json::json!({"decision": "new", "reason": "first"}));
    let created =
        json(&fs::read(sessions.join("sessions.json")).unwrap())["agent:build:main:thread:42"].clone();
    assert_eq!(created["sessionId"], t["sessionId"]);
    assert_eq!(created["updatedAt"], 1_771_578_600_000_i64);
}

#[test]
fn a_second_writer_process_is_refused_while_the_store_lock_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("store");
    run_ok(&["import", arg(&fixtures::shared_dir().join("fixtures/openclaw")), "--into", arg(&into)]);
    let log = into.join("agents/build/sessions/events.jsonl");
    let before = fs::read(&log).unwrap();
    let patch = ["patch", "--store", arg(&into), "--agent", "build", "agent:build:main", "--set", "x=1"];
    let quick: Vec<&str> = patch.iter().copied().chain(["--lock-timeout-ms", "300"]).collect();
    // This process holds the store log's lock through the library, as a live loop would.
    let store = sessionlog_store::AgentStore::jsonl(&into, "build");
    let held = store.writer().unwrap();
    let out = run(&quick);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("session file locked (timeout 300ms): pid={}", std::process::id())),
        "{stderr}"
    );
    assert_eq!(fs::read(&log).unwrap(), before, "the refused writer wrote nothing");
    drop(held);
    run_ok(&quick);
    assert_eq!(fs::read_to_string(&log).unwrap().lines().count(), 13);
}
