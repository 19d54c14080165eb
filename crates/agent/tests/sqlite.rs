//! The loop with `storage = "sqlite"`: its sessions in OpenClaw's agent
//! database, checked against OpenClaw and Pi themselves. The same scripted
//! conversation (a tool round trip, a threshold compaction, a `/new`) runs
//! once with JSONL storage and once with SQLite storage; then
//!
//! * the two runs sent the model the same requests, and each transcript read
//!   from the database (`<db>#<id>`, our reader) is the JSONL run's file byte
//!   for byte, its entries the JSONL run's `sessions.json`;
//! * OpenClaw lists the session with our keys and fields; its
//!   `doctor --session-sqlite validate`, given the JSONL run's store beside
//!   the database, finds the entry and every event, and `recover` verifies
//!   the transcript against the database event by event (no conflict,
//!   nothing to import);
//! * Pi's oracle, on each transcript exported from the database as JSONL,
//!   builds every request the loop sent at the leaf it sent it from, and the
//!   session's context document equals ours;
//! * a turn runs while another connection holds the database's write lock,
//!   and a read works while one holds it.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sessionlog_test_support::fake_llm::{FakeLlm, Reply, Turn};
use sessionlog_test_support::oracle::openclaw;
use support::{check_call_against_pi, lines, message, reopen_top, sessions_json, setup_top, Setup};

// OpenClaw 2026.9 on a 30000 window: compaction above 30000 − min(20000, 7500) = 22500.
const COMPACTION: &str =
    "[compaction]\npreset = \"openclaw\"\ncontextWindow = 30000\nkeepRecentTokens = 10\n";

fn script(fake: &FakeLlm) {
    fake.push(Reply::turn(Turn::tool_call("call_1", "read", r#"{"path":"notes.txt"}"#).usage(4_000, 12)));
    fake.push(Reply::turn(Turn::text("The file says 42; ticket ABC-123.").usage(5_000, 100)));
    fake.push(Reply::turn(Turn::text("answer 1 about host-1.example.com:8080").usage(12_000, 100)));
    fake.push(Reply::turn(Turn::text("answer 2").usage(22_500, 100)));
    fake.push(Reply::turn(Turn::text("answer 3, after the compaction").usage(3_000, 100)));
    fake.push(Reply::turn(Turn::text("a fresh start").usage(200, 10)));
}

/// Runs the script; `during_fourth` runs beside the fourth turn.
async fn conversation(s: &Setup, during_fourth: impl FnOnce() -> std::thread::JoinHandle<()>) -> Vec<usize> {
    std::fs::write(s.root.join("work/notes.txt"), "the answer is 42\n").unwrap();
    let mut compactions = Vec::new();
    for (i, text) in ["What does notes.txt say?", "question 1", "question 2"].iter().enumerate() {
        let out = s.agent.run(message(text)).await.unwrap();
        assert_eq!(out.error, None, "turn {i}");
        compactions.push(out.compactions);
    }
    let holder = during_fourth();
    let out = s.agent.run(message("question 3")).await.unwrap();
    holder.join().unwrap();
    assert_eq!(out.error, None);
    compactions.push(out.compactions);
    let out = s.agent.run(message("/new hello again")).await.unwrap();
    assert_eq!(out.error, None);
    compactions.push(out.compactions);
    compactions
}

fn database(root: &Path) -> PathBuf {
    root.join("state/agents/main/agent/openclaw-agent.sqlite")
}

/// The session ids of the database's transcripts and their windows
/// (session id, reason, previous session id), read with SQL of this test.
fn windows(db: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT session_id, reason, previous_session_id FROM session_windows ORDER BY created_at, rowid",
        )
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Every transcript event as (session id, seq, event_json), read with SQL of this test.
fn events(db: &Path) -> Vec<(String, i64, String)> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn
        .prepare("SELECT session_id, seq, event_json FROM transcript_events ORDER BY session_id, seq")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// `session_nodes` as key → entry, read with SQL of this test.
fn nodes(db: &Path) -> serde_json::Map<String, Value> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn.prepare("SELECT session_key, entry_json FROM session_nodes ORDER BY rowid").unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .map(|(k, e)| (k, serde_json::from_str(&e).unwrap()))
        .collect();
    rows
}

/// A transcript inside the database, as our reader gives it (the bytes of
/// its JSONL file).
fn read_from_database(db: &Path, session_id: &str) -> Vec<u8> {
    sessionlog_sqlite_store::AgentDatabase::open(db).unwrap().transcript_bytes(session_id).unwrap()
}

/// The context document (`sessionlog context --json`) of a FILE argument.
fn context_of(file: &Path) -> String {
    let opened = sessionlog_store::load_transcript(file, sessionlog_event_log::Mode::Strict).unwrap();
    let doc = sessionlog_context::context_doc(
        &opened.loaded.transcript,
        sessionlog_context::Leaf::Default,
        true,
        sessionlog_events::PiRules::V0_58,
    )
    .unwrap();
    let mut out = Vec::new();
    doc.write_json(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_keeps_its_sessions_in_openclaws_database() {
    let jsonl_fake = FakeLlm::start();
    let jsonl = setup_top(&jsonl_fake, "", COMPACTION);
    script(&jsonl_fake);
    let jsonl_compactions = conversation(&jsonl, || std::thread::spawn(|| {})).await;

    let fake = FakeLlm::start();
    let s = setup_top(&fake, "storage = \"sqlite\"\n", COMPACTION);
    script(&fake);
    let db = database(&s.root);
    let locked_db = db.clone();
    let compactions = conversation(&s, move || {
        // Another connection (OpenClaw's, say) holds the write lock for a
        // while as the fourth turn starts: the loop waits, then writes.
        let holder = rusqlite::Connection::open(&locked_db).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            holder.execute_batch("COMMIT").unwrap();
        })
    })
    .await;
    // The threshold compaction came after the third turn, in both runs.
    assert_eq!(compactions, [0, 0, 1, 0, 0]);
    assert_eq!(compactions, jsonl_compactions);
    assert_eq!(fake.pending(), 0);

    // No JSONL store beside the database: the sessions are in it.
    let agent_dir = s.root.join("state/agents/main");
    assert!(!agent_dir.join("sessions").exists());

    // Two transcript generations: the first, and the one `/new` started.
    let windows = windows(&db);
    let store = nodes(&db);
    let entry = store["agent:main:main"].as_object().unwrap().clone();
    let current = entry["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(windows.len(), 2, "{windows:?}");
    let first = windows[0].0.clone();
    // As OpenClaw's own entry writer records them: no reason, and no
    // predecessor (our entries name none).
    assert_eq!(windows[0], (first.clone(), None, None));
    assert_eq!(windows[1], (current.clone(), None, None));

    // The same requests, the same transcripts and entries as the JSONL run
    // (up to the workspace folder in the header).
    let ours: Vec<Vec<u8>> = fake.requests().iter().map(|r| r.body.clone()).collect();
    let theirs: Vec<Vec<u8>> = jsonl_fake.requests().iter().map(|r| r.body.clone()).collect();
    assert!(ours == theirs, "the runs sent different requests");
    let cwd = |s: &Setup| s.root.join("work").canonicalize().unwrap().to_string_lossy().into_owned();
    let jsonl_store = sessions_json(&jsonl.root);
    assert_eq!(Value::Object(store.clone()), jsonl_store);
    for id in [&first, &current] {
        let from_db = String::from_utf8(read_from_database(&db, id)).unwrap();
        // (The JSONL run archived the first one when `/new` replaced it.)
        let dir = jsonl.root.join("state/agents/main/sessions");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name == format!("{id}.jsonl") || name.starts_with(&format!("{id}.jsonl.reset."))
            })
            .unwrap();
        let expected = std::fs::read_to_string(&file).unwrap().replace(&cwd(&jsonl), &cwd(&s));
        assert_eq!(from_db, expected, "{id}");
        // The context built from `<db>#<id>` is the one built from the JSONL file.
        let name = PathBuf::from(format!("{}#{id}", db.display()));
        assert_eq!(context_of(&name), context_of(&file).replace(&cwd(&jsonl), &cwd(&s)), "{id}");
    }
    // Entries of one transcript, as `entries` reads them: the compaction is there.
    let exported = s.root.join(format!("{first}.jsonl"));
    std::fs::write(&exported, read_from_database(&db, &first)).unwrap();
    let kinds: Vec<String> = lines(&exported)[1..]
        .iter()
        .map(|e| e["message"]["role"].as_str().or(e["type"].as_str()).unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "compaction",
            "user",
            "assistant"
        ]
    );

    // Reading while another connection holds the write lock.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE; DELETE FROM transcript_events;").unwrap();
    assert_eq!(read_from_database(&db, &first), std::fs::read(&exported).unwrap());
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);

    // OpenClaw lists the session with our fields, and validates the database.
    s.agent.close().await;
    let state = s.root.join("state");
    openclaw::write_config(&state, &["main"], None);
    let listed = openclaw::json(&state, &["sessions", "--agent", "main", "--json"]);
    let rows = listed["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    let row = rows[0].as_object().unwrap();
    assert_eq!(row["key"], "agent:main:main");
    let mut compared = 0;
    for (field, value) in row {
        if field.starts_with("totalTokens") || field == "contextTokens" {
            continue; // resolved when listing
        }
        if let Some(ours) = entry.get(field) {
            assert_eq!(value, ours, "{field}");
            compared += 1;
        }
    }
    assert!(compared >= 5, "only {compared} fields compared: {row:?}");
    // OpenClaw's own check of the database against the JSONL run's store
    // (its sessions.json and the current transcript, placed where a JSONL
    // store lives): the entry and every event found; the one issue is the
    // JSONL file beside an SQLite session. Then `recover` verifies that file
    // against the database event by event: nothing missing, nothing in
    // conflict (it reports a changed line as a conflict), nothing imported.
    let sessions = state.join("agents/main/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let jsonl_sessions = jsonl.root.join("state/agents/main/sessions");
    for name in ["sessions.json".to_owned(), format!("{current}.jsonl")] {
        let text = std::fs::read_to_string(jsonl_sessions.join(&name)).unwrap();
        std::fs::write(sessions.join(&name), text.replace(&cwd(&jsonl), &cwd(&s))).unwrap();
    }
    let out =
        openclaw::run(&state, &["doctor", "--session-sqlite", "validate", "--session-sqlite-all-agents"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("1 target(s), 1 legacy entries, 1 sqlite entries, 1 issue(s)"), "{said}");
    assert!(said.contains("validated=1/3 events"), "{said}");
    assert!(said.contains("[active_sqlite_transcript_jsonl] agent:main:main"), "{said}");
    let before = events(&db);
    let out = openclaw::run(
        &state,
        &["doctor", "--session-sqlite", "recover", "--session-sqlite-all-agents", "--yes"],
    );
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("1 target(s), 1 legacy entries, 1 sqlite entries, 0 issue(s)"), "{said}");
    assert!(said.contains("imported=0/0 events"), "{said}");
    assert!(events(&db) == before, "OpenClaw imported events the loop had not written");

    // Pi builds, from the exported transcripts, every request the loop sent.
    let exported_current = s.root.join(format!("{current}.jsonl"));
    std::fs::write(&exported_current, read_from_database(&db, &current)).unwrap();
    let received = support::loop_requests(&fake);
    let mut k = 0;
    for file in [&exported, &exported_current] {
        for assistant in lines(file).iter().filter(|e| e["message"]["role"] == "assistant") {
            let leaf = assistant["parentId"].as_str().unwrap();
            check_call_against_pi(&s, &received[k].body, file, leaf, &format!("model call {k}"));
            k += 1;
        }
    }
    assert_eq!(k, received.len(), "one assistant entry per model call");
}

/// sessionlog's own projection of its store log (the loop's session decisions).
fn our_entries(root: &Path) -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(root.join("state/agents/main/sessionlog/sessions.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_another_writer_changed_is_refused_then_taken_in() {
    let fake = FakeLlm::start();
    let s = setup_top(&fake, "storage = \"sqlite\"\n", "");
    fake.push(Reply::turn(Turn::text("first").usage(100, 10)));
    fake.push(Reply::turn(Turn::text("second").usage(200, 10)));
    assert_eq!(s.agent.run(message("one")).await.unwrap().error, None);
    let key = "agent:main:main";
    assert_eq!(our_entries(&s.root)[key], nodes(&database(&s.root))[key]);
    // Another writer (OpenClaw, say) changes the session's entry.
    let db = database(&s.root);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE session_nodes SET entry_json = json_set(entry_json, '$.label', 'renamed by OpenClaw') \
         WHERE session_key = 'agent:main:main'",
        [],
    )
    .unwrap();
    let theirs = nodes(&db);
    // The next turn's first store write would overwrite it: refused, named,
    // before anything of it reached our log.
    let err = s.agent.run(message("two")).await.unwrap_err().to_string();
    assert!(err.contains("session agent:main:main was changed by another writer"), "{err}");
    assert_eq!(nodes(&db), theirs, "the other writer's entry was overwritten");
    assert_eq!(fake.requests().len(), 1, "a refused turn called the model");
    // Our log took their entry in: log and database agree on the key.
    assert_eq!(our_entries(&s.root)[key], theirs[key], "the log and the database drifted apart");
    // So the next turn builds on their entry: it runs, and their label stays.
    let out = s.agent.run(message("three")).await.unwrap();
    assert_eq!((out.error, out.reply.as_str()), (None, "second"));
    let now = nodes(&db);
    assert_eq!(now[key]["label"], "renamed by OpenClaw");
    assert_eq!(now[key]["sessionId"], theirs[key]["sessionId"]);
    assert_eq!(our_entries(&s.root)[key], now[key]);
    // A restarted process finds log and database in agreement.
    s.agent.close().await;
    fake.push(Reply::turn(Turn::text("third").usage(300, 10)));
    let again = reopen_top(&fake, &s.root, "storage = \"sqlite\"\n", "");
    assert_eq!(again.run(message("four")).await.unwrap().error, None);
    let now = nodes(&db);
    assert_eq!(now[key]["label"], "renamed by OpenClaw");
    assert_eq!(our_entries(&s.root)[key], now[key]);
}
