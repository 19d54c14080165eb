//! Differential tests of `context::fast` against the general path (the
//! event-log reader, `context_doc`, `ContextDoc::write_json`), which the
//! oracle tests check against Pi: on generated transcripts with lines mixed
//! in that exercise every way out of the raw-slice path (Pi 1.6's filled
//! content and context edits, repeated and array-index keys, roles the
//! provider list wraps, tokens serde_json's typed read refuses, other entry
//! types), under both rule sets, with and without `llmMessages`, at the
//! default leaf, other leaves, `null` and time-travel positions.

use std::path::Path;

use proptest::prelude::*;
use sessionlog_context::fast::render_context;
use sessionlog_context::{context_doc, Leaf, PiRules};
use sessionlog_event_log::{load_from, Mode, Reader};
use sessionlog_events::gen::{generate, GenOptions};
use sessionlog_events::Transcript;

/// The general path's transcript: the event-log reader's, cut at `at`.
fn load(bytes: &[u8], at: Option<usize>) -> Option<Transcript> {
    let loaded = load_from(Reader::new(bytes, Path::new("t.jsonl"), Mode::Lenient)).ok()?;
    Some(match at {
        Some(n) => loaded.transcript.prefix(n),
        None => loaded.transcript,
    })
}

/// The general path's document, or `None` when it fails (bad leaf, cycle).
fn general(transcript: Option<&Transcript>, leaf: Leaf<'_>, llm: bool, rules: PiRules) -> Option<Vec<u8>> {
    let doc = context_doc(transcript?, leaf, llm, rules).ok()?;
    let mut out = Vec::new();
    doc.write_json(&mut out).ok()?;
    Some(out)
}

fn fast(bytes: &[u8], at: Option<usize>, leaf: Leaf<'_>, llm: bool, rules: PiRules) -> Option<Vec<u8>> {
    let doc = render_context(bytes, at, leaf, llm, rules)?;
    let mut out = Vec::new();
    doc.write(&mut out).expect("a document the fast path took on is written");
    Some(out)
}

/// Compares both paths for one question; returns whether the fast path answered.
fn same(
    bytes: &[u8],
    transcript: Option<&Transcript>,
    at: Option<usize>,
    leaf: Leaf<'_>,
    llm: bool,
    rules: PiRules,
) -> Result<bool, String> {
    let expected = general(transcript, leaf, llm, rules);
    match fast(bytes, at, leaf, llm, rules) {
        None => Ok(false),
        Some(got) if Some(&got) == expected.as_ref() => Ok(true),
        Some(got) => {
            let expected = expected.map(|e| String::from_utf8_lossy(&e).into_owned()).unwrap_or_default();
            let got = String::from_utf8_lossy(&got).into_owned();
            let line = got.lines().zip(expected.lines()).position(|(a, b)| a != b).unwrap_or(0);
            Err(format!(
                "at {at:?} leaf {leaf:?} llm {llm} rules {}: line {}: fast {:?}, general {:?}",
                rules.name(),
                line + 1,
                got.lines().nth(line),
                expected.lines().nth(line)
            ))
        }
    }
}

/// Lines mixed into generated transcripts; `{P}` is a parent id, `{T}` a
/// target id (an existing entry), `{I}` the line's own id.
const ODD: &[&str] = &[
    // Pi 1.6 fills in missing content; a system message, kept out of the kept range.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"assistant","content":null,"provider":"p","model":"m","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"system","content":"be brief","sections":{"a":"b"},"timestamp":2}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"system","timestamp":2}}"#,
    // Context edits (Pi 1.6), replacing and hiding.
    r#"{"type":"context_edit","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:01.000Z","targetId":"{T}","replacement":{"content":"edited"}}"#,
    r#"{"type":"context_edit","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:01.000Z","targetId":"{T}","replacement":null}"#,
    // Repeated keys, array-index keys, an escaped role, a role given twice.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"a","content":"b","timestamp":3}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"first","timestamp":3},"message":{"role":"assistant","content":[],"timestamp":4}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"2":"two","role":"user","content":"x","1":"one","timestamp":3}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"us\u0065r","content":"escaped role","timestamp":3}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","role":"assistant","content":[],"timestamp":3}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","systemMessage":1,"systemMessage":2,"message":{"role":"user","content":"dup system","timestamp":3}}"#,
    // Roles the provider list wraps or drops.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":2,"timestamp":5}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"custom","customType":"x","content":"hi","display":true,"timestamp":5}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"hookMessage","content":"old","timestamp":5}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"content":"no role","timestamp":5}}"#,
    // Tokens the typed read refuses (the general reader drops such lines) or reads oddly.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"big","timestamp":1e400}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"big elsewhere","extra":1e400,"timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","tokensBefore":-2.5e+308,"message":{"role":"user","content":"x","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"lone \ud800 surrogate","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"tab\tand \u00e9 and \/","timestamp":1.5e2,"n":-0,"f":0.1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","summary":"\udc00","message":{"role":"user","content":"x","timestamp":1}}"#,
    // A number beyond `f64` although neither 300 digits long nor with a three-digit exponent.
    concat!(
        r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"big","timestamp":"#,
        "11111111111111111111111111111111111111111111111111",
        "11111111111111111111111111111111111111111111111111",
        "11111111111111111111111111111111111111111111111111",
        "11111111111111111111111111111111111111111111111111",
        "11111111111111111111111111111111111111111111111111",
        "e99}}"
    ),
    // Lone surrogates where the typed read keeps the text raw: it accepts the line, and they
    // print as JSON.stringify's escapes.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":[{"type":"image","data":"AA\ud800","mimeType":"image/png"}],"timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"read","arguments":{"p":"\udc00"}}],"provider":"p","model":"m","timestamp":1}}"#,
    // A surrogate pair, an escaped id, a tab between tokens.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"pair \ud83d\ude00","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}\u0078","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"escaped id","timestamp":1}}"#,
    "{\"type\":\"message\",\t\"id\":\"{I}\",\"parentId\":\"{P}\",\"timestamp\":\"2026-01-05T10:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"tab\",\"timestamp\":1}}",
    // Messages that are not objects, other entry types.
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":5}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":null}"#,
    r#"{"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z"}"#,
    r#"{"type":"model_change","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","provider":"openai","modelId":"gpt"}"#,
    r#"{"type":"thinking_level_change","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","thinkingLevel":"high"}"#,
    r#"{"type":"custom_message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","customType":"note","content":"seen","display":false}"#,
    r#"{"type":"custom_message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","customType":"note"}"#,
    r#"{"type":"branch_summary","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","fromId":"{T}","summary":"went elsewhere"}"#,
    r#"{"type":"label","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","targetId":"{T}","label":"here"}"#,
    r#"{"type":"compaction","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","summary":"sum","firstKeptEntryId":"{T}","tokensBefore":9,"systemMessage":{"role":"system","content":"snap","timestamp":1}}"#,
    r#"{"type":"session","version":3,"id":"stray","timestamp":"2026-01-05T10:00:00.000Z"}"#,
    r#"{"type":"message","id":{"not":"a string"},"parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"odd id","timestamp":1}}"#,
    r#"{"type":"message","id":"{I}","parentId":"","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"a new root","timestamp":1}}"#,
    // Lines the general reader drops or trims.
    r#"{"type":"message","id":"{I}","parentId":"{P}","message":{"role":"user","content":"broken"}"#,
    r#"  {"type":"message","id":"{I}","parentId":"{P}","timestamp":"2026-01-05T10:00:00.000Z","message":{"role":"user","content":"indented","timestamp":1}}  "#,
    "null",
    "[1,2]",
];

/// Ids of the generated lines (`None` for lines without one).
fn ids(lines: &[String]) -> Vec<Option<String>> {
    lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("id")?.as_str().map(str::to_owned))
        .collect()
}

/// A generated transcript with odd lines mixed in (`(kind, position, parent pick, target pick)`).
fn transcript(options: GenOptions, odd: &[(usize, usize, usize, usize)]) -> Vec<u8> {
    let mut lines = generate(options);
    for (n, &(kind, position, parent, target)) in odd.iter().enumerate() {
        let known: Vec<String> = ids(&lines).into_iter().skip(1).flatten().collect();
        let pick = |k: usize| known.get(k % known.len().max(1)).cloned().unwrap_or_default();
        // Mostly at the end (on the default path), sometimes in the middle.
        let at = if position % 3 == 0 { 1 + position % lines.len().max(1) } else { lines.len() };
        let parent = if position % 3 == 0 {
            pick(parent)
        } else {
            ids(&lines).last().cloned().flatten().unwrap_or_default()
        };
        let line = ODD[kind % ODD.len()]
            .replace("{I}", &format!("odd{n:05}"))
            .replace("{P}", &parent)
            .replace("{T}", &pick(target));
        lines.insert(at.min(lines.len()), line);
    }
    let mut out = lines.join("\n").into_bytes();
    out.push(b'\n');
    out
}

fn check_all(bytes: &[u8], extra_leaves: &[String]) -> Result<usize, String> {
    let mut answered = 0;
    let entries = bytes.iter().filter(|&&b| b == b'\n').count();
    let whole = load(bytes, None);
    let cut: Vec<(usize, Option<Transcript>)> = [0, 1, entries / 2, entries.saturating_sub(1)]
        .into_iter()
        .map(|at| (at, load(bytes, Some(at))))
        .collect();
    for rules in PiRules::ALL {
        for llm in [false, true] {
            let mut leaves: Vec<Leaf<'_>> = vec![Leaf::Default, Leaf::Null, Leaf::Id("no-such-entry")];
            leaves.extend(extra_leaves.iter().map(|l| Leaf::Id(l.as_str())));
            for leaf in leaves {
                answered += usize::from(same(bytes, whole.as_ref(), None, leaf, llm, rules)?);
            }
            for (at, transcript) in &cut {
                answered +=
                    usize::from(same(bytes, transcript.as_ref(), Some(*at), Leaf::Default, llm, rules)?);
            }
        }
    }
    Ok(answered)
}

fn leaves_of(bytes: &[u8], picks: &[usize]) -> Vec<String> {
    let lines: Vec<String> = String::from_utf8_lossy(bytes).lines().map(str::to_owned).collect();
    let known: Vec<String> = ids(&lines).into_iter().skip(1).flatten().collect();
    picks.iter().filter_map(|p| known.get(p % known.len().max(1)).cloned()).collect()
}

#[test]
fn generated_transcripts_take_the_fast_path_and_equal_the_general_path() {
    for (seed, branches, compactions) in [(1, 0, 0), (2, 3, 0), (3, 0, 3), (4, 4, 4)] {
        let options = GenOptions { seed, entries: 300, branches, compactions, tool_output_chars: 400 };
        let bytes = transcript(options, &[]);
        let leaves = leaves_of(&bytes, &[7, 91, 250]);
        let answered = check_all(&bytes, &leaves).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // Everything but the unknown leaf is answered by the fast path.
        let asked = 2 * 2 * (3 + leaves.len() + 4);
        assert_eq!(answered, asked - 4, "seed {seed}: the fast path declined a plain generated transcript");
    }
}

#[test]
fn every_odd_line_alone_equals_the_general_path() {
    let options = GenOptions { seed: 9, entries: 60, branches: 1, compactions: 1, tool_output_chars: 200 };
    for (kind, odd) in ODD.iter().enumerate() {
        for position in [1, 3] {
            // Once on the default path, once in the middle of the file.
            let bytes = transcript(options, &[(kind, position, 5, 11), (kind, 2, 17, 23)]);
            let leaves = leaves_of(&bytes, &[3, 40]);
            if let Err(e) = check_all(&bytes, &leaves) {
                panic!("odd line {kind} ({odd}): {e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_path_equals_the_general_path(
        seed in 0u64..1000,
        entries in 5usize..160,
        branches in 0usize..4,
        compactions in 0usize..4,
        odd in proptest::collection::vec((0usize..64, 0usize..1000, 0usize..1000, 0usize..1000), 0..8),
        picks in proptest::collection::vec(0usize..1000, 0..3),
    ) {
        let options = GenOptions { seed, entries, branches, compactions, tool_output_chars: 300 };
        let bytes = transcript(options, &odd);
        let leaves = leaves_of(&bytes, &picks);
        if let Err(e) = check_all(&bytes, &leaves) {
            prop_assert!(false, "{}", e);
        }
    }
}
