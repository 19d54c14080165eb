//! A replay's virtual compaction entries (`Outcome::to_entry`) are written
//! straight from the outcome: the line must be the one the general entry
//! writer makes from the outcome's `details()` (`write::compaction`), byte for
//! byte, and the one Pi writes for the same fields (checked by hand below).

use sessionlog_compaction::{FallbackLevel, LedgerDelta, Outcome};
use sessionlog_events::write::{compaction, CompactionFields, Head};

fn outcome(summary: &str, tokens_before: f64, base: Option<&str>, fallback: FallbackLevel) -> Outcome {
    Outcome {
        summary: summary.to_owned(),
        first_kept_entry_id: "a1b2c3d4".to_owned(),
        tokens_before,
        read_files: vec!["src/main.rs".to_owned(), "docs/\"quoted\".md".to_owned()],
        modified_files: vec!["Cargo.toml".to_owned()],
        ledger: LedgerDelta {
            base: base.map(str::to_owned),
            added: vec!["0xdeadbeef".to_owned(), "https://example.com/a?b=c&d=é".to_owned()],
            dropped: vec!["/tmp/old\\path".to_owned()],
            secret_refs_added: vec!["secret:1".to_owned()],
        },
        ledger_identifiers: 3,
        ledger_visible: 2,
        fallback,
        pruned_messages: 0,
        exchanges: Vec::new(),
    }
}

/// The line the general writer makes from the outcome's `details()`.
fn general(o: &Outcome, head: &Head<'_>) -> String {
    let fields = CompactionFields {
        summary: &o.summary,
        first_kept_entry_id: &o.first_kept_entry_id,
        tokens_before: o.tokens_before,
        details: o.details(),
        from_hook: false,
        system_message: None,
    };
    compaction(head, &fields).unwrap().raw().to_owned()
}

#[test]
fn a_virtual_compaction_entry_is_the_line_the_general_writer_makes() {
    let head = Head { id: "c0000001", parent_id: Some("e5"), timestamp: "2026-01-01T00:00:00.000Z" };
    let root = Head { id: "c0000002", parent_id: None, timestamp: "" };
    let summaries = [
        "plain",
        "",
        "## Goal\n\tquotes \" and \\ backslashes, \u{1} \u{1f} control, \u{7f} del, \u{2028} separator, 日本語 🦀",
        "</read-files>\r\n<modified-files>",
    ];
    let numbers = [0.0, -0.0, 12_345.0, 0.1, 1e21, 1e-7, 9_007_199_254_740_993.0, f64::NAN, f64::INFINITY];
    let levels = [
        FallbackLevel::NoConversation,
        FallbackLevel::Full,
        FallbackLevel::SkippedOversized,
        FallbackLevel::Statistical,
    ];
    let mut checked = 0;
    for (k, summary) in summaries.iter().enumerate() {
        for (j, &n) in numbers.iter().enumerate() {
            for base in [None, Some("c0000000")] {
                let o = outcome(summary, n, base, levels[(k + j) % levels.len()]);
                for h in [&head, &root] {
                    let entry = o.to_entry(h, None).unwrap();
                    assert_eq!(
                        entry.raw(),
                        general(&o, h),
                        "summary {summary:?}, tokensBefore {n}, base {base:?}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 4 * 9 * 2 * 2);
}

#[test]
fn a_virtual_compaction_entry_is_written_in_pis_key_order() {
    // Written by hand from Pi's compaction entry (type, id, parentId,
    // timestamp, summary, firstKeptEntryId, tokensBefore, details, fromHook)
    // and our details (readFiles, modifiedFiles, ledgerBase, ledgerAdded,
    // ledgerDropped, secretRefsAdded, fallback), as JSON.stringify prints it.
    let o = outcome("S \"q\"\n", 1234.5, Some("c0000000"), FallbackLevel::Full);
    let head = Head { id: "c0000001", parent_id: Some("e5"), timestamp: "2026-01-01T00:00:00.000Z" };
    let expected = concat!(
        r#"{"type":"compaction","id":"c0000001","parentId":"e5","timestamp":"2026-01-01T00:00:00.000Z","#,
        r#""summary":"S \"q\"\n","firstKeptEntryId":"a1b2c3d4","tokensBefore":1234.5,"#,
        r#""details":{"readFiles":["src/main.rs","docs/\"quoted\".md"],"modifiedFiles":["Cargo.toml"],"#,
        r#""ledgerBase":"c0000000","ledgerAdded":["0xdeadbeef","https://example.com/a?b=c&d=é"],"#,
        r#""ledgerDropped":["/tmp/old\\path"],"secretRefsAdded":["secret:1"],"fallback":"full"},"#,
        r#""fromHook":false}"#,
    );
    assert_eq!(o.to_entry(&head, None).unwrap().raw(), expected);
    let first = outcome("S", 1e21, None, FallbackLevel::Statistical);
    let root = Head { id: "c0000002", parent_id: None, timestamp: "t" };
    let line = first.to_entry(&root, None).unwrap();
    assert!(line
        .raw()
        .starts_with(r#"{"type":"compaction","id":"c0000002","parentId":null,"timestamp":"t","#));
    assert!(line.raw().contains(r#""tokensBefore":1e+21,"details":{"readFiles":"#), "{}", line.raw());
    assert!(
        line.raw().contains(r#""modifiedFiles":["Cargo.toml"],"ledgerAdded":"#),
        "no ledgerBase: {}",
        line.raw()
    );
    assert!(line.raw().ends_with(r#""fallback":"statistical"},"fromHook":false}"#), "{}", line.raw());
}
