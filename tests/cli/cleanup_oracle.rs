//! `cleanup` against OpenClaw's own `sessions cleanup` (OpenClaw 2026.9.6):
//! the same store, the same settings, the same plan — on our event store
//! imported from the JSONL fixture, and on OpenClaw's SQLite store itself at
//! a fixed clock (Debian's `faketime`).
//!
//! OpenClaw 2026.9 runs maintenance only on its SQLite store, so its side is
//! the fixture store migrated by OpenClaw (`doctor --session-sqlite import`);
//! ours is the same JSONL store imported by `sessionlog import`. The fixture
//! gets one ordinary session more (`agent:build:explicit:notes`, older than
//! everything), because every fixture session is either protected or a
//! runtime row, and an ordinary one is archived in place rather than removed.
//! The migration adds two archived `recovered` sessions, which maintenance
//! leaves alone and which do not count toward the cap.
//!
//! The clock: OpenClaw measures staleness from the current time, so ours
//! runs at `--now` = the time of the test, and every `pruneAfter` is chosen
//! from that time to put the cutoff in the middle of a gap of more than 12
//! hours between the fixture's `updatedAt` values: the seconds between our
//! run and OpenClaw's cannot move an entry across it. The test on OpenClaw's
//! SQLite store runs OpenClaw under Debian's `faketime` instead (`.ci/run`
//! installs it when missing). For each setting OpenClaw's `--dry-run --json` gives the
//! counts, and `--enforce --store <database>` on a copy gives which keys went
//! and which were archived, read back from its database.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};
use sessionlog_sqlite_store::{database_path, AgentDatabase};
use sessionlog_test_support::oracle::openclaw;

use crate::support::{arg, fixtures, run_ok};
use fixtures::copy_tree;

const NOTES: &str = "agent:build:explicit:notes";

/// Adds [`NOTES`], an ordinary session older than every fixture session,
/// to the copy of the fixture store at `state`.
fn add_notes(state: &Path) {
    let store_file = state.join("agents/build/sessions/sessions.json");
    let mut store: serde_json::Map<String, Value> =
        serde_json::from_slice(&fs::read(&store_file).unwrap()).unwrap();
    store.insert(NOTES.into(), json!({"sessionId": "0b8f0c36-notes", "updatedAt": 1_771_250_000_000_i64}));
    fs::write(&store_file, serde_json::to_vec_pretty(&store).unwrap()).unwrap();
}

/// What a plan does, per key: `removed:<why>` or `archived:<why>`.
type Outcome = BTreeMap<String, String>;

/// What OpenClaw's `--enforce` did, per key, from the entries before and after.
fn outcome(before: &serde_json::Map<String, Value>, after: &serde_json::Map<String, Value>) -> Outcome {
    let mut outcome = Outcome::new();
    for (key, entry) in before {
        let why = |reason: &str| match reason {
            "age-retention" => "stale",
            "active-session-cap" => "overCap",
            other => panic!("{key}: archive reason {other}"),
        };
        match after.get(key) {
            None => {
                // Removed: stale or over the cap, as the counts say (checked below).
                outcome.insert(key.clone(), "removed".into());
            }
            Some(now) if entry.get("archivedAt").is_none() && now.get("archivedAt").is_some() => {
                outcome
                    .insert(key.clone(), format!("archived:{}", why(now["archiveReason"].as_str().unwrap())));
            }
            Some(_) => {}
        }
    }
    outcome
}

/// OpenClaw's plan: counts from `--dry-run`, keys from `--enforce` on a copy.
fn openclaw_plan(migrated: &Path, work: &Path, maintenance: &Value) -> (Value, Outcome) {
    copy_tree(migrated, work);
    openclaw::write_config(work, &["build"], Some(json!({ "maintenance": maintenance })));
    let counts = openclaw::json(work, &["sessions", "cleanup", "--agent", "build", "--dry-run", "--json"]);
    let before = AgentDatabase::open(&database_path(work, "build")).unwrap().entries().unwrap();
    // With `--store` OpenClaw applies maintenance itself instead of asking a gateway.
    let db = database_path(work, "build");
    openclaw::json(work, &["sessions", "cleanup", "--store", arg(&db), "--enforce", "--json"]);
    let after = AgentDatabase::open(&database_path(work, "build")).unwrap().entries().unwrap();
    (counts, outcome(&before, &after))
}

/// Our plan through the CLI, in report mode.
fn our_plan(store: &Path, now_ms: i64, prune_after: &str, max_entries: &str) -> (Value, Outcome) {
    our_plan_with(store, now_ms, prune_after, max_entries, &[])
}

/// [`our_plan`] with more flags (`--fix-missing`, `--active-key KEY`).
fn our_plan_with(
    store: &Path,
    now_ms: i64,
    prune_after: &str,
    max_entries: &str,
    extra: &[&str],
) -> (Value, Outcome) {
    let now = now_ms.to_string();
    let mut args = vec![
        "cleanup",
        "--store",
        arg(store),
        "--now",
        &now,
        "--prune-after",
        prune_after,
        "--max-entries",
        max_entries,
    ];
    args.extend_from_slice(extra);
    let report = crate::support::json(&run_ok(&args));
    let report = report[0].clone();
    let mut outcome = Outcome::new();
    for r in report["removed"].as_array().unwrap() {
        outcome.insert(r["key"].as_str().unwrap().to_owned(), "removed".into());
    }
    for r in report["archived"].as_array().unwrap() {
        outcome.insert(
            r["key"].as_str().unwrap().to_owned(),
            format!("archived:{}", r["why"].as_str().unwrap()),
        );
    }
    (report, outcome)
}

fn count(report: &Value, list: &str, why: &str) -> usize {
    report[list].as_array().unwrap().iter().filter(|r| r["why"] == why).count()
}

/// Our report's removals and archivals by reason equal OpenClaw's summary
/// counts: `pruned`, `capped` (every cap victim, removed or archived),
/// `archived` and `capArchived`.
fn assert_counts(report: &Value, counts: &Value, context: &str) {
    let theirs = |field: &str| counts[field].as_u64().unwrap() as usize;
    assert_eq!(count(report, "removed", "stale"), theirs("pruned"), "{context}");
    let capped = count(report, "removed", "overCap") + count(report, "archived", "overCap");
    assert_eq!(capped, theirs("capped"), "{context}");
    assert_eq!(count(report, "archived", "stale"), theirs("archived"), "{context}");
    assert_eq!(count(report, "archived", "overCap"), theirs("capArchived"), "{context}");
}

#[test]
fn cleanup_plans_what_openclaw_plans() {
    let tmp = tempfile::tempdir().unwrap();
    // The fixture store, plus one ordinary session older than everything:
    // imported by us, and migrated by OpenClaw.
    let source = tmp.path().join("source");
    copy_tree(&fixtures::shared_dir().join("fixtures/openclaw/agents"), &source.join("agents"));
    add_notes(&source);
    let ours = tmp.path().join("ours");
    run_ok(&["import", arg(&source), "--into", arg(&ours)]);
    let migrated = tmp.path().join("migrated");
    openclaw::migrated_fixture(&migrated, add_notes);

    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    // Minutes from now back to a cutoff in the middle of a gap between updatedAt values.
    let minutes_to = |earlier: i64, later: i64| format!("{}m", (now_ms - (earlier + later) / 2) / 60_000);
    let settings = [
        // Cutoff in the 30.9 h gap after the discord channel's last update:
        // six sessions are stale, three of them runtime rows, plus the notes.
        (minutes_to(1_771_465_852_505, 1_771_577_100_032), "5000"),
        // Cutoff in the 21 h gap after the oldest direct chat, and a cap of 8.
        (minutes_to(1_771_260_242_698, 1_771_337_084_016), "8"),
        // No pruning to speak of (ten years); a cap of 5, with a tie in activity at the edge.
        ("3650d".to_owned(), "5"),
    ];
    // The settings run side by side, each on its own copy.
    let indexed: Vec<(usize, &(String, &str))> = settings.iter().enumerate().collect();
    let runs = crate::support::par_map(&indexed, |(i, (prune_after, max_entries))| {
        let maintenance =
            json!({"pruneAfter": prune_after, "maxEntries": max_entries.parse::<u64>().unwrap()});
        let (counts, theirs) = openclaw_plan(&migrated, &tmp.path().join(format!("oc-{i}")), &maintenance);
        let (report, mine) = our_plan(&ours, now_ms, prune_after, max_entries);
        (maintenance, counts, theirs, report, mine)
    });
    for (maintenance, counts, theirs, report, mine) in runs {
        let context = format!("setting {maintenance}: OpenClaw {counts}\nours {report}");
        assert_eq!(mine, theirs, "{context}");
        assert_counts(&report, &counts, &context);
        // OpenClaw's store also holds the two archived `recovered` sessions.
        assert_eq!(report["kept"].as_u64().unwrap() + 2, counts["afterCount"].as_u64().unwrap(), "{context}");
        assert!(!mine.is_empty(), "{context}: a setting that changes nothing proves little");
    }
}

/// The fixed clock both sides run at: 2026-03-20T21:00:00Z.
const FIXED_NOW_MS: i64 = 1_774_040_400_000;
const FIXED_NOW: &str = "2026-03-20 21:00:00";

/// `openclaw ARGS…` on `state` under Debian's `faketime` at [`FIXED_NOW`]
/// (UTC, the clock frozen; Node's monotonic timers left real).
fn openclaw_at_fixed_clock(state: &Path, args: &[&str]) -> Value {
    // Installs the oracle once (serialised) before the first parallel use.
    openclaw::run(state, &["--version"]);
    let script = fixtures::shared_dir().join("oracle/openclaw/run.sh");
    let out = std::process::Command::new("faketime")
        .env("TZ", "UTC")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .arg(FIXED_NOW)
        .arg("bash")
        .arg(&script)
        .arg(state)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run faketime (Debian package `faketime`): {e}"));
    assert!(
        out.status.success(),
        "openclaw {args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    openclaw::first_json(&out.stdout).unwrap_or_else(|| {
        panic!("openclaw {args:?} printed no JSON:\n{}", String::from_utf8_lossy(&out.stdout))
    })
}

#[test]
fn cleanup_of_a_sqlite_store_plans_what_openclaw_plans_on_the_same_store() {
    let tmp = tempfile::tempdir().unwrap();
    // The fixture store, plus one ordinary session older than everything,
    // migrated by OpenClaw: both sides read this one database.
    let migrated = tmp.path().join("migrated");
    openclaw::migrated_fixture(&migrated, add_notes);

    // Cutoffs from the fixed clock, in minutes (the unit both sides read).
    let minutes_to = |at: i64| format!("{}m", (FIXED_NOW_MS - at) / 60_000);
    let settings = [
        // Between the discord channel's last update and the next one.
        (minutes_to((1_771_465_852_505 + 1_771_577_100_032) / 2), "5000"),
        // Between the oldest direct chat and the next update, and a cap of 8.
        (minutes_to((1_771_260_242_698 + 1_771_337_084_016) / 2), "8"),
        // Ten years, and a cap of 5 with a tie in activity at the edge.
        ("3650d".to_owned(), "5"),
        // Thirty days (OpenClaw's default) and a cap of 3.
        ("30d".to_owned(), "3"),
    ];
    let indexed: Vec<(usize, &(String, &str))> = settings.iter().enumerate().collect();
    let runs = crate::support::par_map(&indexed, |(i, (prune_after, max_entries))| {
        let maintenance =
            json!({"pruneAfter": prune_after, "maxEntries": max_entries.parse::<u64>().unwrap()});
        let work = tmp.path().join(format!("oc-{i}"));
        copy_tree(&migrated, &work);
        openclaw::write_config(&work, &["build"], Some(json!({ "maintenance": maintenance })));
        let db = database_path(&work, "build");
        let before_bytes = fs::read(&db).unwrap();
        // Ours first, on the same database, report only: it must not change.
        let (report, mine) = our_plan(&work, FIXED_NOW_MS, prune_after, max_entries);
        assert!(fs::read(&db).unwrap() == before_bytes, "our cleanup changed the database");
        let counts = openclaw_at_fixed_clock(
            &work,
            &["sessions", "cleanup", "--agent", "build", "--dry-run", "--json"],
        );
        let before = AgentDatabase::open(&db).unwrap().entries().unwrap();
        openclaw_at_fixed_clock(&work, &["sessions", "cleanup", "--store", arg(&db), "--enforce", "--json"]);
        let after = AgentDatabase::open(&db).unwrap().entries().unwrap();
        (maintenance, counts, outcome(&before, &after), report, mine)
    });
    for (maintenance, counts, theirs, report, mine) in runs {
        let context = format!("setting {maintenance}: OpenClaw {counts}\nours {report}");
        assert_eq!(mine, theirs, "{context}");
        assert_counts(&report, &counts, &context);
        // The same store on both sides: the entries left are counted alike.
        assert_eq!(report["kept"].as_u64().unwrap(), counts["afterCount"].as_u64().unwrap(), "{context}");
        assert_eq!(counts["beforeCount"].as_u64().unwrap(), 15, "{context}");
        assert!(!mine.is_empty(), "{context}: a setting that changes nothing proves little");
    }
}

/// `--fix-missing` on OpenClaw's SQLite store as its migration left the
/// fixture: eleven entries (the agent's main session among them) name a
/// session whose transcript was never in the store, so the database holds
/// no event for them. OpenClaw removes those first, before pruning and the
/// cap, whatever their protection and even when one is the `--active-key`;
/// what the cap then sees is the store without them.
/// `pruneAfter`, `maxEntries` and the flags both sides get.
type Setting = (String, &'static str, &'static [&'static str]);

#[test]
fn cleanup_fix_missing_removes_what_openclaw_removes_first() {
    let tmp = tempfile::tempdir().unwrap();
    let migrated = tmp.path().join("migrated");
    openclaw::migrated_fixture(&migrated, add_notes);
    // The same JSONL store imported into our event store, for `--enforce` on our side.
    let source = tmp.path().join("source");
    copy_tree(&fixtures::shared_dir().join("fixtures/openclaw/agents"), &source.join("agents"));
    add_notes(&source);
    let imported = tmp.path().join("imported");
    run_ok(&["import", arg(&source), "--into", arg(&imported)]);

    let minutes_to = |at: i64| format!("{}m", (FIXED_NOW_MS - at) / 60_000);
    let settings: [Setting; 3] = [
        // Ten years and a cap of 5: without the flag the cap takes 7 (see the
        // test above); with it, the missing go first and the cap has nothing left to do.
        ("3650d".to_owned(), "5", &["--fix-missing"]),
        // Thirty days and a cap of 3, the main session (whose transcript is
        // missing) as the active key: the key does not save it.
        ("30d".to_owned(), "3", &["--fix-missing", "--active-key", "agent:build:main"]),
        // A cutoff after the oldest direct chat and a cap of 8: stale entries
        // and missing ones together.
        (minutes_to((1_771_260_242_698 + 1_771_337_084_016) / 2), "8", &["--fix-missing"]),
    ];
    let indexed: Vec<(usize, &Setting)> = settings.iter().enumerate().collect();
    let runs = crate::support::par_map(&indexed, |(i, (prune_after, max_entries, extra))| {
        let maintenance =
            json!({"pruneAfter": prune_after, "maxEntries": max_entries.parse::<u64>().unwrap()});
        let work = tmp.path().join(format!("fm-{i}"));
        copy_tree(&migrated, &work);
        openclaw::write_config(&work, &["build"], Some(json!({ "maintenance": maintenance })));
        let db = database_path(&work, "build");
        let (report, mine) = our_plan_with(&work, FIXED_NOW_MS, prune_after, max_entries, extra);
        let mut args = vec!["sessions", "cleanup", "--agent", "build", "--dry-run", "--json"];
        args.extend_from_slice(extra);
        let counts = openclaw_at_fixed_clock(&work, &args);
        let before = AgentDatabase::open(&db).unwrap().entries().unwrap();
        let mut args = vec!["sessions", "cleanup", "--store", arg(&db), "--enforce", "--json"];
        args.extend_from_slice(extra);
        openclaw_at_fixed_clock(&work, &args);
        let after = AgentDatabase::open(&db).unwrap().entries().unwrap();
        // Ours enforced on the imported event store: the same entries go.
        let ours = tmp.path().join(format!("fm-ours-{i}"));
        copy_tree(&imported, &ours);
        let index = ours.join("agents/build/sessions/sessions.json");
        let read = |p: &Path| -> serde_json::Map<String, Value> {
            serde_json::from_slice(&fs::read(p).unwrap()).unwrap()
        };
        let ours_before = read(&index);
        let now = FIXED_NOW_MS.to_string();
        let mut args = vec![
            "cleanup",
            "--store",
            arg(&ours),
            "--now",
            &now,
            "--prune-after",
            prune_after,
            "--max-entries",
            max_entries,
            "--enforce",
        ];
        args.extend_from_slice(extra);
        run_ok(&args);
        let enforced = outcome(&ours_before, &read(&index));
        (format!("{maintenance} {extra:?}"), counts, outcome(&before, &after), report, mine, enforced)
    });
    for (setting, counts, theirs, report, mine, enforced) in runs {
        let context = format!("setting {setting}: OpenClaw {counts}\nours {report}");
        assert_eq!(mine, theirs, "{context}");
        assert_eq!(enforced, theirs, "{context}: our --enforce on the imported store");
        let missing = count(&report, "removed", "missing");
        assert_eq!(missing, counts["missing"].as_u64().unwrap() as usize, "{context}");
        assert!(missing > 0, "{context}: the fixture has sessions without transcripts");
        assert_counts(&report, &counts, &context);
        assert_eq!(report["kept"].as_u64().unwrap(), counts["afterCount"].as_u64().unwrap(), "{context}");
    }
}
