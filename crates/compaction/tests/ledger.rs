//! The identifier ledger stored as one change per compaction: what a chain
//! writes grows with the identifiers it meets, not with the chain's length
//! times them; the resolved ledger is the list of planted identifiers (hand
//! written here, never taken from the extractor), over the compactions of
//! one path only; a compaction written whole (before changes were stored)
//! still reads right.

use sessionlog_compaction::{compact_over, ledger_of, Facts, Policy, Scripted};
use sessionlog_context::cut::prepare_with;
use sessionlog_events::write::Head;
use sessionlog_events::Entry;
use sessionlog_tokens::PiEstimator;

/// Identifiers per turn.
const K: usize = 3;

/// The `K` UUIDs planted in turn `turn` of branch `branch` (hand made: distinct, no other identifier in them).
fn uuids(branch: u32, turn: usize) -> Vec<String> {
    (0..K).map(|j| format!("{branch:08x}-{turn:04x}-4000-a000-{j:012x}")).collect()
}

fn msg(id: &str, parent: &str, role: &str, text: &str) -> Entry {
    let body = match role {
        "user" => serde_json::json!({"role": "user", "content": text}),
        _ => {
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"})
        }
    };
    let parent = if parent.is_empty() { serde_json::Value::Null } else { parent.into() };
    Entry::parse(
        &serde_json::json!({"type": "message", "id": id, "parentId": parent, "timestamp": "t", "message": body})
            .to_string(),
    )
    .unwrap()
}

/// A turn: the user registers its UUIDs (and nothing else opaque), the assistant answers in plain words.
fn turn(tag: &str, parent: &str, ids: &[String]) -> [Entry; 2] {
    let filler = "lorem ipsum ".repeat(40);
    let (u, a) = (format!("u{tag}"), format!("a{tag}"));
    [
        msg(&u, parent, "user", &format!("register these jobs: {} {filler}", ids.join(" "))),
        msg(&a, &u, "assistant", &format!("registered {filler}")),
    ]
}

/// The policy: 5 tokens kept verbatim, so each compaction keeps only the
/// last answer (about 120 tokens) and summarises everything before it, the
/// last user message with its UUIDs included.
fn policy() -> Policy {
    Policy {
        context_window: 100_000,
        reserve_tokens: 1_000,
        keep_recent_tokens: 5,
        recent_turns_preserve: 0,
        ..Policy::openclaw()
    }
}

/// Compacts the path `path` (the summariser names no identifier) and
/// returns the compaction entry with id `id`.
fn compact(path: &[&Entry], id: &str) -> Entry {
    let policy = policy();
    let prep = prepare_with(path, &policy.cut_settings(), &PiEstimator, policy.pi_rules).unwrap();
    let mut s = Scripted::new([Ok("## Decisions\nThe jobs were registered.".to_owned())]);
    let out = compact_over(path, &prep, &policy, &mut s, &PiEstimator, None, &Facts::none());
    let head = Head { id, parent_id: path.last().and_then(|e| e.id.as_deref()), timestamp: "t" };
    out.to_entry(&head, None).unwrap()
}

fn details(e: &Entry) -> serde_json::Value {
    e.field_value("details").unwrap()
}

/// A chain of `N` compactions, one per turn of `K` new UUIDs: each
/// compaction's `details` hold exactly the `K` UUIDs of the turn it
/// summarised (hand count: `K` per compaction, `K·N` in all, where whole
/// ledgers would hold `K·i` at compaction `i`, `K·N(N+1)/2` in all), and the
/// resolved ledger of compaction `i` is every UUID planted in turns `1..=i`,
/// in order.
#[test]
fn a_chain_writes_each_identifier_once_and_resolves_to_the_planted_list() {
    const N: usize = 6;
    let mut log: Vec<Entry> = Vec::new();
    let mut planted: Vec<String> = Vec::new();
    let mut written = 0;
    let mut written_bytes = 0;
    for i in 1..=N {
        let parent = log.last().and_then(|e| e.id.clone()).unwrap_or_default();
        log.extend(turn(&i.to_string(), &parent, &uuids(0, i)));
        // Compaction i keeps answer i and summarises what came since compaction i − 1: turn i's UUIDs.
        let refs: Vec<&Entry> = log.iter().collect();
        let c = compact(&refs, &format!("c{i}"));
        let d = details(&c);
        assert!(d.get("identifierLedger").is_none(), "no whole ledger: {d}");
        let added: Vec<String> = serde_json::from_value(d["ledgerAdded"].clone()).unwrap();
        assert_eq!(added, uuids(0, i), "compaction {i}: the turn's UUIDs only");
        assert_eq!(d["ledgerDropped"], serde_json::json!([]));
        let base = (i > 1).then(|| format!("c{}", i - 1));
        assert_eq!(d.get("ledgerBase").and_then(|b| b.as_str()), base.as_deref());
        written += added.len();
        written_bytes += d["ledgerAdded"].to_string().len();
        planted.extend(uuids(0, i));
        log.push(c);
        let refs: Vec<&Entry> = log.iter().collect();
        assert_eq!(ledger_of(&refs, refs.len() - 1).to_vec(), planted, "compaction {i}");
    }
    assert_eq!(written, K * N);
    // Each list: 2 brackets, K quoted 36-character UUIDs, K − 1 commas.
    assert_eq!(written_bytes, N * (2 + K * 38 + (K - 1)));
}

/// Two branches from one compaction, written interleaved in the file (the
/// other branch's compaction between a compaction and its base): each
/// compaction resolves over its own path, with the first compaction's
/// UUIDs and its branch's, never the other branch's — also when the file's
/// entries in their order are given as the path.
#[test]
fn a_resolved_ledger_uses_the_compactions_of_its_path_only() {
    let mut file: Vec<Entry> = Vec::new();
    file.extend(turn("1", "", &uuids(0, 1)));
    file.extend(turn("2", "a1", &uuids(0, 2)));
    let trunk: Vec<Entry> = file.clone();
    let c1 = compact(&trunk.iter().collect::<Vec<_>>(), "c1");
    file.push(c1.clone());
    // Branch B: turns 3 and 4 after c1, compacted twice.
    let mut b: Vec<Entry> = trunk.clone();
    b.push(c1.clone());
    let b3 = turn("b3", "c1", &uuids(0xb, 3));
    b.extend(b3.clone());
    let cb2 = compact(&b.iter().collect::<Vec<_>>(), "cb2");
    b.push(cb2.clone());
    file.extend(b3);
    file.push(cb2.clone());
    // Branch A: one turn after c1, compacted; written after branch B's first compaction.
    let mut a: Vec<Entry> = trunk.clone();
    a.push(c1.clone());
    let a3 = turn("a3", "c1", &uuids(0xa, 3));
    a.extend(a3.clone());
    let ca2 = compact(&a.iter().collect::<Vec<_>>(), "ca2");
    a.push(ca2.clone());
    file.extend(a3);
    file.push(ca2.clone());
    // Branch B again: its third compaction's base (cb2) comes before ca2 in the file.
    let b4 = turn("b4", "cb2", &uuids(0xb, 4));
    b.extend(b4.clone());
    let cb3 = compact(&b.iter().collect::<Vec<_>>(), "cb3");
    b.push(cb3.clone());
    file.extend(b4);
    file.push(cb3);
    // By hand: c1 summarised turns 1 and 2 (up to answer 2); cb2 turn b3, cb3 turn b4; ca2 turn a3.
    let want_b: Vec<String> = [uuids(0, 1), uuids(0, 2), uuids(0xb, 3), uuids(0xb, 4)].concat();
    let want_a: Vec<String> = [uuids(0, 1), uuids(0, 2), uuids(0xa, 3)].concat();
    let path_b: Vec<&Entry> = b.iter().collect();
    assert_eq!(ledger_of(&path_b, path_b.len() - 1).to_vec(), want_b);
    let path_a: Vec<&Entry> = a.iter().collect();
    assert_eq!(ledger_of(&path_a, path_a.len() - 1).to_vec(), want_a);
    // cb3 was compacted over path B: it carried path B's ledger, none of branch A's.
    let d = details(b.last().unwrap());
    assert_eq!(d["ledgerBase"], "cb2");
    let file_refs: Vec<&Entry> = file.iter().collect();
    assert_eq!(ledger_of(&file_refs, file_refs.len() - 1).to_vec(), want_b, "the file in its order");
}

/// A transcript written before changes were stored: its compaction holds
/// its whole ledger (`identifierLedger`, `secretRefs`). A compaction after
/// it starts from that ledger, and the chain resolves to it plus the new
/// turn's UUIDs; the old secret reference stays.
#[test]
fn a_ledger_written_whole_still_reads_right() {
    let mut log: Vec<Entry> = Vec::new();
    log.extend(turn("1", "", &uuids(0, 1)));
    log.extend(turn("2", "a1", &uuids(0, 2)));
    let old_ids = uuids(0xd, 0);
    let old = serde_json::json!({
        "type": "compaction", "id": "old1", "parentId": "a2", "timestamp": "t",
        "summary": "## Decisions\nThe jobs were registered.", "firstKeptEntryId": "u2", "tokensBefore": 900,
        "details": {"readFiles": [], "modifiedFiles": [], "identifierLedger": old_ids,
                    "secretRefs": ["secret in entry u0"], "fallback": "full"},
        "fromHook": false
    });
    log.push(Entry::parse(&old.to_string()).unwrap());
    let refs: Vec<&Entry> = log.iter().collect();
    assert_eq!(ledger_of(&refs, refs.len() - 1).to_vec(), old_ids);
    log.extend(turn("3", "old1", &uuids(0, 3)));
    let refs: Vec<&Entry> = log.iter().collect();
    let c = compact(&refs, "c2");
    assert_eq!(details(&c)["ledgerBase"], "old1");
    log.push(c);
    let refs: Vec<&Entry> = log.iter().collect();
    let ledger = ledger_of(&refs, refs.len() - 1);
    // Under Pi 1.6's rules the new compaction summarises from old1's first
    // kept entry (u2) to the last user message (u3): turn 2's UUIDs again, then turn 3's.
    assert_eq!(ledger.to_vec(), [old_ids, uuids(0, 2), uuids(0, 3)].concat());
    assert!(ledger.secret_refs().contains("secret in entry u0"));
}
