//! A virtual compaction's entry line, written by hand.
//!
//! A sweep writes one virtual entry per distinct compaction key; its line
//! holds the summary (tens of kilobytes) and the ledger's lists (hundreds of
//! short strings). [`virtual_entry`] writes the line
//! `Outcome::to_entry(head, None)` writes, byte for byte, with strings
//! escaped eight bytes at a time where nothing needs escaping, and makes the
//! entry reading it back would make without reading it.

use serde::Serialize;
use sessionlog_compaction::Outcome;
use sessionlog_events::json::{js_number, push_json_str as push_str, JsFormatter};
use sessionlog_events::write::Head;
use sessionlog_events::{Compaction, Entry, LineError};

/// The entry `outcome.to_entry(head, None)` makes: the same line, written
/// without serde's per-byte escaping loop, and the same typed view, made from
/// the outcome instead of read back from the line.
pub(crate) fn virtual_entry(outcome: &Outcome, head: &Head<'_>) -> Result<Entry, LineError> {
    let ledger = &outcome.ledger;
    let list_chars: usize = [&outcome.read_files, &outcome.modified_files, &ledger.added, &ledger.dropped]
        .iter()
        .flat_map(|l| l.iter())
        .map(|s| s.len() + 3)
        .sum();
    let mut line = Vec::with_capacity(outcome.summary.len() + list_chars + 512);
    line.extend_from_slice(b"{\"type\":\"compaction\",\"id\":");
    push_str(&mut line, head.id);
    line.extend_from_slice(b",\"parentId\":");
    match head.parent_id {
        Some(parent) => push_str(&mut line, parent),
        None => line.extend_from_slice(b"null"),
    }
    line.extend_from_slice(b",\"timestamp\":");
    push_str(&mut line, head.timestamp);
    line.extend_from_slice(b",\"summary\":");
    push_str(&mut line, &outcome.summary);
    line.extend_from_slice(b",\"firstKeptEntryId\":");
    push_str(&mut line, &outcome.first_kept_entry_id);
    line.extend_from_slice(b",\"tokensBefore\":");
    let invalid = |reason: String| LineError::Json { column: 0, reason };
    let mut ser = serde_json::Serializer::with_formatter(&mut line, JsFormatter);
    js_number(outcome.tokens_before).serialize(&mut ser).map_err(|e| invalid(e.to_string()))?;
    line.extend_from_slice(b",\"details\":{\"readFiles\":");
    push_list(&mut line, &outcome.read_files);
    line.extend_from_slice(b",\"modifiedFiles\":");
    push_list(&mut line, &outcome.modified_files);
    if let Some(base) = &ledger.base {
        line.extend_from_slice(b",\"ledgerBase\":");
        push_str(&mut line, base);
    }
    line.extend_from_slice(b",\"ledgerAdded\":");
    push_list(&mut line, &ledger.added);
    line.extend_from_slice(b",\"ledgerDropped\":");
    push_list(&mut line, &ledger.dropped);
    line.extend_from_slice(b",\"secretRefsAdded\":");
    push_list(&mut line, &ledger.secret_refs_added);
    line.extend_from_slice(b",\"fallback\":");
    let mut ser = serde_json::Serializer::with_formatter(&mut line, JsFormatter);
    outcome.fallback.serialize(&mut ser).map_err(|e| invalid(e.to_string()))?;
    line.extend_from_slice(b"},\"fromHook\":false}");
    let line = String::from_utf8(line).map_err(|e| invalid(e.to_string()))?;
    // What reading the line back gives, without reading it: the number
    // written is read back as itself (the shortest text that does), but
    // JavaScript prints -0 as 0 and NaN and the infinities as null.
    let tokens_before = outcome.tokens_before;
    let compaction = Compaction {
        summary: Some(outcome.summary.clone()),
        first_kept_entry_id: Some(outcome.first_kept_entry_id.clone()),
        first_kept_entry_index: None,
        tokens_before: tokens_before.is_finite().then_some(if tokens_before == 0.0 {
            0.0
        } else {
            tokens_before
        }),
        from_hook: Some(false),
        usage: None,
        system_message: None,
    };
    Ok(Entry::written_compaction(
        line.into_boxed_str(),
        Some(head.id.to_owned()),
        head.parent_id.map(str::to_owned),
        Some(head.timestamp.to_owned()),
        compaction,
    ))
}

/// A JSON array of strings.
fn push_list(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, item);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sessionlog_compaction::{FallbackLevel, LedgerDelta};

    /// Strings of the characters that matter to JSON: quotes, backslashes,
    /// every control character, DEL, multi-byte characters and plain text,
    /// in runs long enough to reach the eight-byte path.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("\"".to_owned()),
                Just("\\".to_owned()),
                (0u8..0x20).prop_map(|b| char::from(b).to_string()),
                Just("\u{7f}".to_owned()),
                Just("\u{2028}日本🦀é".to_owned()),
                "[a-z ]{1,20}",
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat())
    }

    fn level() -> impl Strategy<Value = FallbackLevel> {
        prop_oneof![
            Just(FallbackLevel::NoConversation),
            Just(FallbackLevel::Full),
            Just(FallbackLevel::SkippedOversized),
            Just(FallbackLevel::Statistical),
        ]
    }

    fn number() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(9_007_199_254_740_993.0),
            Just(1e21),
            any::<f64>(),
            (0u64..1_000_000).prop_map(|n| n as f64),
        ]
    }

    proptest! {
        /// The hand-written line is `Outcome::to_entry`'s, byte for byte,
        /// and reads back into the same entry.
        #[test]
        fn the_line_is_to_entrys(
            summary in text(),
            first_kept in text(),
            lists in proptest::collection::vec(proptest::collection::vec(text(), 0..4), 5),
            base in proptest::option::of(text()),
            tokens_before in number(),
            fallback in level(),
            head in (text(), proptest::option::of(text()), text()),
        ) {
            let outcome = Outcome {
                summary,
                first_kept_entry_id: first_kept,
                tokens_before,
                read_files: lists[0].clone(),
                modified_files: lists[1].clone(),
                ledger: LedgerDelta {
                    base,
                    added: lists[2].clone(),
                    dropped: lists[3].clone(),
                    secret_refs_added: lists[4].clone(),
                },
                ledger_identifiers: 0,
                ledger_visible: 0,
                fallback,
                pruned_messages: 0,
                exchanges: Vec::new(),
            };
            let head = Head { id: &head.0, parent_id: head.1.as_deref(), timestamp: &head.2 };
            let expected = outcome.to_entry(&head, None);
            let made = virtual_entry(&outcome, &head);
            prop_assert_eq!(format!("{made:?}"), format!("{expected:?}"));
            if let (Ok(made), Ok(expected)) = (&made, &expected) {
                prop_assert_eq!(made.raw(), expected.raw());
            }
        }

    }
}
