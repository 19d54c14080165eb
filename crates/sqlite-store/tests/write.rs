//! Writing an agent database: what we write reads back exactly; bad input
//! is refused before anything is written; an existing database is never
//! replaced.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sessionlog_sqlite_store::{create, AgentDatabase, Error, Export};

fn entries(items: &[(&str, Value)]) -> Map<String, Value> {
    items.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

/// A bad input case: entries, transcripts, the reason expected.
type Case = (Map<String, Value>, Vec<(String, Vec<String>)>, &'static str);

fn folder(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("agent/openclaw-agent.sqlite");
    let good = json!({"sessionId": "s1", "updatedAt": 5});
    let line = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let cases: Vec<Case> = vec![
        (entries(&[("k", json!({"updatedAt": 5}))]), vec![], "k: entry has no string sessionId"),
        (
            entries(&[("k", json!({"sessionId": "s1", "updatedAt": 1.5}))]),
            vec![],
            "k: entry has no integer updatedAt",
        ),
        (entries(&[("k", json!([1]))]), vec![], "k: entry is not a JSON object"),
        (
            entries(&[("k", good.clone())]),
            vec![("s2".into(), vec![line.into()])],
            "transcript s2: no session entry has this sessionId",
        ),
        (
            entries(&[("k", good.clone())]),
            vec![("s1".into(), vec![line.into(), "{not json".into()])],
            "transcript s1 line 2: not JSON",
        ),
        (
            entries(&[("k", good.clone())]),
            vec![("s1".into(), vec!["[1]".into()])],
            "transcript s1 line 1: not a JSON object",
        ),
    ];
    for (entries, transcripts, reason) in cases {
        let e =
            create(&path, &Export { agent_id: "a", entries: &entries, transcripts: &transcripts, now_ms: 0 })
                .unwrap_err();
        assert!(matches!(e, Error::BadInput { .. }), "{e}");
        let expected = format!("{}: {reason}", path.display());
        assert!(e.to_string().starts_with(&expected), "{e}");
        assert!(!path.exists());
    }
    // An existing database is never replaced, and the folder is left as it was.
    let written = create(
        &path,
        &Export { agent_id: "a", entries: &entries(&[("k", good)]), transcripts: &[], now_ms: 0 },
    );
    assert_eq!(written.unwrap().entries, 1);
    let before = std::fs::read(&path).unwrap();
    let e = create(&path, &Export { agent_id: "a", entries: &Map::new(), transcripts: &[], now_ms: 0 })
        .unwrap_err();
    assert!(matches!(e, Error::Exists { .. }), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(folder(path.parent().unwrap()), ["openclaw-agent.sqlite"]);
}

/// Files and links planted at the names a writer could once be predicted to
/// use for its temporary database (`.<name>.<pid>.tmp` and SQLite's
/// companions) are neither written through nor removed.
#[cfg(unix)]
#[test]
fn planted_files_at_guessable_temporary_names_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("openclaw-agent.sqlite");
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let guessed = format!(".openclaw-agent.sqlite.{}.tmp", std::process::id());
    std::os::unix::fs::symlink(&victim, dir.join(&guessed)).unwrap();
    std::fs::write(dir.join(format!("{guessed}-wal")), "someone's").unwrap();
    let good = json!({"sessionId": "s1", "updatedAt": 5});
    let written = create(
        &path,
        &Export { agent_id: "a", entries: &entries(&[("k", good)]), transcripts: &[], now_ms: 0 },
    );
    assert_eq!(written.unwrap().entries, 1);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(std::fs::read_to_string(dir.join(format!("{guessed}-wal"))).unwrap(), "someone's");
    let mut expected =
        vec![guessed.clone(), format!("{guessed}-wal"), "openclaw-agent.sqlite".into(), "victim".into()];
    expected.sort();
    assert_eq!(folder(dir), expected);
}

fn line_strategy() -> impl Strategy<Value = String> {
    // JSON objects with awkward text (quotes, escapes, non-ASCII, U+2028), as Pi writes them.
    (any::<u32>(), "[a-zé€😀\"\\\\\u{2028} ]{0,40}").prop_map(|(n, text)| {
        sessionlog_events::json::to_js_string(
            &json!({"type": "message", "id": format!("{n:08x}"), "text": text}),
        )
        .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// What we write reads back exactly: entries as `JSON.stringify` text,
    /// transcript lines byte for byte, in order.
    #[test]
    fn what_we_write_reads_back_exactly(lines in prop::collection::vec(line_strategy(), 0..600), label in "[^\u{0}]{0,20}") {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("openclaw-agent.sqlite");
        let header = r#"{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
        let mut all = vec![header.to_owned()];
        all.extend(lines);
        let e = entries(&[
            ("agent:a:main", json!({"sessionId": "s-1", "updatedAt": 1_700_000_000_000_i64, "label": label})),
            ("agent:a:other", json!({"sessionId": "s-2", "updatedAt": 1, "nested": {"x": [1.5, null]}})),
        ]);
        let transcripts = vec![("s-1".to_owned(), all.clone())];
        create(&path, &Export { agent_id: "a", entries: &e, transcripts: &transcripts, now_ms: 7 }).unwrap();
        let db = AgentDatabase::open(&path).unwrap();
        prop_assert_eq!(db.entries().unwrap(), e.clone());
        for node in db.nodes().unwrap() {
            prop_assert_eq!(&node.entry_json, &sessionlog_events::json::to_js_string(&e[&node.key]).unwrap());
            prop_assert_eq!(node.entry_valid, 1);
        }
        let expected: String = all.iter().map(|l| format!("{l}\n")).collect();
        prop_assert_eq!(String::from_utf8(db.transcript_bytes("s-1").unwrap()).unwrap(), expected);
        // A session without a transcript has a window and reads as empty.
        prop_assert!(db.transcript_bytes("s-2").unwrap().is_empty());
        prop_assert_eq!(db.windows().unwrap().len(), 2);
        prop_assert_eq!(db.agent_id().unwrap(), Some("a".to_owned()));
        prop_assert_eq!(db.schema_version().unwrap(), 23);
    }
}
