//! Import adapters over the shared Claude Code and Codex fixtures and small
//! hand-written files: entry counts against an independent count (python3,
//! the script below), recorded compactions counted by hand, the byte-exact
//! round trip, bad lines with their numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sessionlog_event_log::import::{self, original_text, Format};
use sessionlog_event_log::{Loaded, Mode, ReadError};
use sessionlog_events::{EntryKind, Transcript};
use sessionlog_test_support::fixtures;

/// Counts the entries each documented mapping rule makes, straight from the
/// file (split on `\n` only), independently of the Rust mapper. Prints
/// `{"<type>[:<role or customType>]": n}`.
const COUNT: &str = r#"
import json, sys, collections
fmt, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
raw = data.split(b'\n')
if data.endswith(b'\n'):
    raw = raw[:-1]
recs = []
for n, line in enumerate(raw, 1):
    try:
        v = json.loads(line)
    except Exception:
        continue
    if isinstance(v, dict):
        recs.append((n, v))
c = collections.Counter()
if fmt == 'claude-code':
    def conv(v):
        return v.get('type') in ('user', 'assistant') and isinstance(v.get('message'), dict)
    convs = [v for _, v in recs if conv(v)]
    side_main = bool(convs) and all(v.get('isSidechain') is True for v in convs)
    def main(v):
        return v.get('isSidechain') is not True or side_main
    boundaries = {v.get('uuid') for _, v in recs if v.get('type') == 'system' and v.get('subtype') == 'compact_boundary'}
    prev = None
    for _, v in recs:
        t = v.get('type')
        if conv(v) and not main(v):
            c['custom:claude-code.sidechain'] += 1
        elif t == 'assistant' and conv(v):
            mid = v['message'].get('id')
            same = (prev is not None and prev.get('type') == 'assistant' and conv(prev) and main(prev)
                    and mid is not None and prev['message'].get('id') == mid
                    and v.get('parentUuid') is not None and v.get('parentUuid') == prev.get('uuid'))
            if not same:
                c['message:assistant'] += 1
        elif t == 'user' and conv(v):
            if v.get('isCompactSummary') is True and v.get('parentUuid') in boundaries:
                pass
            else:
                content = v['message'].get('content')
                if isinstance(content, list):
                    results = [b for b in content if isinstance(b, dict) and b.get('type') == 'tool_result']
                    runs, inrun = 0, False
                    for b in content:
                        if isinstance(b, dict) and b.get('type') == 'tool_result':
                            inrun = False
                        elif not inrun:
                            runs, inrun = runs + 1, True
                    c['message:toolResult'] += len(results)
                    c['message:user'] += runs if (runs or results) else 1
                else:
                    c['message:user'] += 1
        elif t == 'system' and v.get('subtype') == 'compact_boundary':
            c['compaction'] += 1
        elif t == 'summary':
            c['session_info'] += 1
        elif t == 'system' and v.get('subtype'):
            c['custom:claude-code.system.' + v['subtype']] += 1
        else:
            c['custom:claude-code.' + (t or 'unknown')] += 1
        if 'uuid' in v:
            prev = v
else:
    def ptype(v):
        p = v.get('payload')
        return p.get('type') if isinstance(p, dict) else None
    def assistant_item(v):
        if v.get('type') != 'response_item':
            return False
        pt = ptype(v)
        if pt in ('reasoning', 'function_call', 'custom_tool_call', 'local_shell_call', 'web_search_call'):
            return True
        return pt == 'message' and v['payload'].get('role') == 'assistant'
    fresh, previous = set(), object()
    for n, v in recs:
        info = v.get('payload', {}).get('info') if isinstance(v.get('payload'), dict) else None
        if v.get('type') == 'event_msg' and ptype(v) == 'token_count' and isinstance(info, dict):
            total = info.get('total_token_usage')
            if total != previous or total is None:
                fresh.add(n)
            previous = total
    header = next((n for n, v in recs if v.get('type') == 'session_meta'), None)
    in_call = False
    for n, v in recs:
        if n == header:
            continue
        t, pt = v.get('type'), ptype(v)
        name = 'custom:codex.' + (t or 'unknown') + ('.' + pt if pt and t in ('event_msg', 'response_item') else '')
        if assistant_item(v):
            if not in_call:
                c['message:assistant'] += 1
            in_call = True
            continue
        if t == 'event_msg' and n not in fresh:
            c[name] += 1
            continue
        in_call = False
        if t == 'response_item' and pt == 'message':
            role = v['payload'].get('role')
            if role == 'user':
                c['message:user'] += 1
            else:
                c['custom_message:codex.' + str(role)] += 1
        elif t == 'response_item' and pt in ('function_call_output', 'custom_tool_call_output'):
            c['message:toolResult'] += 1
        elif t == 'compacted':
            c['compaction'] += 1
        else:
            c[name] += 1
print(json.dumps(c, sort_keys=True))
"#;

fn python(args: &[&str]) -> Vec<u8> {
    let out =
        Command::new("python3").args(args).output().expect("python3 is needed for the independent counts");
    assert!(out.status.success(), "python3 failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn python_counts(format: Format, path: &Path) -> BTreeMap<String, u64> {
    let out = python(&["-c", COUNT, format.name(), path.to_str().unwrap()]);
    serde_json::from_slice(&out).unwrap()
}

/// Our entries by `type[:role or customType]`.
fn our_counts(t: &Transcript) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in t.tree_entries() {
        let key = match &e.kind {
            EntryKind::Message(m) => format!("message:{}", m.role.as_deref().unwrap_or("")),
            EntryKind::Custom { custom_type } => format!("custom:{}", custom_type.as_deref().unwrap_or("")),
            EntryKind::CustomMessage(c) => {
                format!("custom_message:{}", c.custom_type.as_deref().unwrap_or(""))
            }
            _ => e.type_name().unwrap_or("").to_owned(),
        };
        *out.entry(key).or_default() += 1;
    }
    out
}

fn fixture_files() -> Vec<(PathBuf, Format)> {
    let mut all: Vec<(PathBuf, Format)> =
        fixtures::claude_code_transcripts().into_iter().map(|p| (p, Format::ClaudeCode)).collect();
    all.extend(fixtures::codex_rollouts().into_iter().map(|p| (p, Format::Codex)));
    assert_eq!(all.len(), 4, "shared fixtures not found under {}", fixtures::shared_dir().display());
    all
}

fn load(path: &Path) -> (Loaded, Format) {
    import::load_foreign(path, Mode::Lenient).unwrap().expect("recognised by content")
}

fn map(text: &str, format: Format) -> Loaded {
    import::map_bytes(text.as_bytes(), format, Path::new("t.jsonl"), Mode::Lenient, "fallback").unwrap()
}

fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_fixture_maps_to_the_entry_counts_python_takes() {
    for (path, format) in fixture_files() {
        let (loaded, detected) = load(&path);
        assert_eq!(detected, format, "{}", path.display());
        let ours = our_counts(&loaded.transcript);
        let theirs = python_counts(format, &path);
        assert_eq!(ours, theirs, "{}", path.display());
        // Figures checked by hand against the files (and SOURCES.md):
        // assistant messages = distinct `message.id`s among Claude's assistant
        // lines (`jq -r 'select(.type=="assistant").message.id' | sort -u | wc -l`);
        // tool results = `tool_result` blocks, `function_call_output` +
        // `custom_tool_call_output` lines (`grep -c`).
        let key = |k: &str| ours.get(k).copied().unwrap_or(0);
        let figures = (key("message:assistant"), key("message:toolResult"), key("compaction"));
        let expected = match name_of(&path).as_str() {
            "703e4528-dfb0-4257-a888-e10b7d3e39a8.jsonl" => (98, 120, 1),
            "d6a37ffc-384d-4d2a-832a-78cdd493af69.jsonl" => (90, 88, 2),
            "rollout-2025-11-01T11-34-37-97b66f6c-a160-40e0-bd0f-1fdcbbb9498b.jsonl" => (380, 329, 0),
            "rollout-2025-11-12T17-48-11-019a7ae6-1945-7c63-98f2-210adb922af9.jsonl" => (102, 97, 0),
            other => panic!("unexpected fixture {other}"),
        };
        assert_eq!(figures, expected, "{}", path.display());
        // Every call has its result, and the tree is one path (no stray leaves).
        let stats = sessionlog_events::Stats::of(&loaded.transcript);
        assert!(stats.branch_points.is_empty() && stats.leaves.len() == 1, "{}: {stats:?}", path.display());
    }
}

#[test]
fn recorded_compactions_are_found() {
    // Counted by hand: `grep -n '"subtype":"compact_boundary"'` in the Claude
    // files, each followed by its `isCompactSummary` user line (`grep -n
    // isCompactSummary`); `grep -c '"type":"compacted"'` is 0 in both Codex files.
    type Recorded = (Vec<u64>, f64, &'static str);
    let expected: BTreeMap<&str, Vec<Recorded>> = BTreeMap::from([
        ("703e4528-dfb0-4257-a888-e10b7d3e39a8.jsonl", vec![(vec![233, 234], 123_096.0, "auto")]),
        (
            "d6a37ffc-384d-4d2a-832a-78cdd493af69.jsonl",
            vec![(vec![165, 166], 121_367.0, "manual"), (vec![313, 314], 116_717.0, "manual")],
        ),
        ("rollout-2025-11-01T11-34-37-97b66f6c-a160-40e0-bd0f-1fdcbbb9498b.jsonl", vec![]),
        ("rollout-2025-11-12T17-48-11-019a7ae6-1945-7c63-98f2-210adb922af9.jsonl", vec![]),
    ]);
    for (path, _) in fixture_files() {
        let (loaded, _) = load(&path);
        let t = &loaded.transcript;
        let found: Vec<(Vec<u64>, f64, String)> = t
            .entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Compaction(_)))
            .map(|e| {
                let source = e.field_value("source").unwrap();
                let lines = source["lines"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
                let details = e.field_value("details").unwrap_or(Value::Null);
                let EntryKind::Compaction(c) = &e.kind else { unreachable!() };
                assert!(
                    c.summary.as_deref().unwrap().starts_with("This session is being continued"),
                    "the summary is the isCompactSummary message's text"
                );
                (lines, c.tokens_before.unwrap(), details["trigger"].as_str().unwrap().to_owned())
            })
            .collect();
        let want = &expected[name_of(&path).as_str()];
        let want: Vec<(Vec<u64>, f64, String)> =
            want.iter().map(|(l, t, g)| (l.clone(), *t, (*g).to_owned())).collect();
        assert_eq!(found, want, "{}", path.display());
        if want.is_empty() {
            continue;
        }
        // Pi's context at the leaf starts from the last summary, and the
        // path still runs through the whole conversation (the boundary's
        // `logicalParentUuid` is its parent).
        let tree = t.tree();
        let leaf = t.entries.len() - 1;
        let ctx = sessionlog_events::Transcript::tree(t).path(leaf).unwrap();
        assert!(ctx.len() == t.entries.len(), "one path through every entry");
        let last = t.entries.iter().rposition(|e| matches!(e.kind, EntryKind::Compaction(_))).unwrap();
        let parent = tree.parent(last).unwrap();
        assert!(
            parent < last
                && matches!(t.entries[parent].kind, EntryKind::Message(_) | EntryKind::Custom { .. })
        );
    }
}

#[test]
fn codex_compactions_map_from_both_shapes() {
    // Two `compacted` lines, written by hand after the upstream schema
    // (`CompactedItem { message, replacement_history }`): one with a summary
    // message, one with only a replacement history holding an opaque
    // (encrypted) compaction item.
    let text = [
        r#"{"timestamp":"2025-11-20T10:00:00.000Z","type":"session_meta","payload":{"id":"s-1","timestamp":"2025-11-20T10:00:00.000Z","cwd":"/w","cli_version":"0.60.0"}}"#,
        r#"{"timestamp":"2025-11-20T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the build"}]}}"#,
        r#"{"timestamp":"2025-11-20T10:00:02.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":900,"cached_input_tokens":0,"output_tokens":100,"reasoning_output_tokens":0,"total_tokens":1000},"last_token_usage":{"input_tokens":900,"cached_input_tokens":0,"output_tokens":100,"reasoning_output_tokens":0,"total_tokens":1000}}}}"#,
        r#"{"timestamp":"2025-11-20T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#,
        r#"{"timestamp":"2025-11-20T10:00:04.000Z","type":"compacted","payload":{"message":"SUMMARY ONE"}}"#,
        r#"{"timestamp":"2025-11-20T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}}"#,
        r#"{"timestamp":"2025-11-20T10:00:06.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":2000,"cached_input_tokens":500,"output_tokens":150,"reasoning_output_tokens":0,"total_tokens":2150},"last_token_usage":{"input_tokens":1100,"cached_input_tokens":500,"output_tokens":50,"reasoning_output_tokens":0,"total_tokens":1150}}}}"#,
        r#"{"timestamp":"2025-11-20T10:00:07.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}"#,
        r#"{"timestamp":"2025-11-20T10:00:08.000Z","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]},{"type":"compaction","encrypted_content":"gAAAAB-opaque"}],"trigger":"auto"}}"#,
        r#"{"timestamp":"2025-11-20T10:00:09.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"and now?"}]}}"#,
    ]
    .join("\n")
        + "\n";
    let loaded = map(&text, Format::Codex);
    let t = &loaded.transcript;
    let compactions: Vec<Value> = t
        .entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::Compaction(_)))
        .map(|e| {
            let mut v = e.to_value();
            v.as_object_mut().unwrap().remove("source");
            v
        })
        .collect();
    assert_eq!(
        compactions,
        [
            serde_json::json!({"type":"compaction","id":"L5","parentId":"L4","timestamp":"2025-11-20T10:00:04.000Z","summary":"SUMMARY ONE","firstKeptEntryId":"L6","tokensBefore":1000}),
            serde_json::json!({"type":"compaction","id":"L9","parentId":"L8","timestamp":"2025-11-20T10:00:08.000Z","summary":"next","firstKeptEntryId":"L10","tokensBefore":1150,"details":{"trigger":"auto"}}),
        ]
    );
    // The opaque item stays in the line, byte for byte.
    assert!(t
        .entries
        .iter()
        .any(|e| e.raw().contains(r#"{"type":"compaction","encrypted_content":"gAAAAB-opaque"}"#)));
    assert_eq!(original_text(t).unwrap(), text);
    // The second call's usage: input 1100 of which 500 cached, output 50.
    let second = t.entries.iter().find(|e| e.id.as_deref() == Some("L8")).unwrap();
    let u = second.message().unwrap().usage.clone().unwrap();
    assert_eq!(
        (u.input, u.cache_read, u.output, u.total_tokens),
        (Some(600.0), Some(500.0), Some(50.0), Some(1150.0))
    );
}

#[test]
fn every_fixture_round_trips_byte_for_byte_even_through_a_pi_file() {
    for (path, _) in fixture_files() {
        let bytes = std::fs::read(&path).unwrap();
        let (loaded, _) = load(&path);
        let t = &loaded.transcript;
        assert!(original_text(t).unwrap().as_bytes() == bytes.as_slice(), "{}", path.display());
        // The mapped entries written as a Pi file carry the lines with them.
        let mut pi = Vec::new();
        t.write_jsonl(&mut pi);
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("mapped.jsonl");
        std::fs::write(&copy, &pi).unwrap();
        let reread = sessionlog_event_log::load(&copy, Mode::Strict).unwrap();
        assert!(
            original_text(&reread.transcript).unwrap().as_bytes() == bytes.as_slice(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn odd_lines_round_trip_and_bad_ones_are_reported_with_their_numbers() {
    let user = |uuid: &str, parent: &str, text: &str| {
        format!(
            r#"{{"parentUuid":{parent},"isSidechain":false,"type":"user","message":{{"role":"user","content":"{text}"}},"uuid":"{uuid}","timestamp":"2025-12-01T10:00:00.000Z","sessionId":"s"}}"#
        )
    };
    let lines = [
        user("u1", "null", "one"),                              // 1
        String::new(),                                          // 2 blank
        format!("  {}  ", user("u2", "\"u1\"", "two")),         // 3 padded with spaces
        format!("{}\r", user("u3", "\"u2\"", "three")),         // 4 CRLF
        r#"{"parentUuid":"u3","type":"user","mess"#.to_owned(), // 5 torn
        "[1,2]".to_owned(),                                     // 6 not an object
        user("u4", "\"u3\"", "four"),                           // 7, no final newline
    ];
    let text = lines.join("\n");
    let loaded = map(&text, Format::ClaudeCode);
    let skipped: Vec<(u64, &str)> = loaded.skipped.iter().map(|s| (s.line, s.reason.as_str())).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, 5);
    assert!(skipped[0].1.starts_with("invalid JSON"), "{skipped:?}");
    assert_eq!(skipped[1], (6, "not a JSON object"));
    assert_eq!(original_text(&loaded.transcript).unwrap(), text);
    let users: Vec<&str> = loaded.transcript.entries.iter().filter_map(|e| e.id.as_deref()).collect();
    assert_eq!(users, ["u1", "u2", "u3", "u4"]);
    // Strict mode stops at the first bad line, naming line and column.
    let err = import::map_bytes(text.as_bytes(), Format::ClaudeCode, Path::new("t.jsonl"), Mode::Strict, "f")
        .unwrap_err();
    assert!(matches!(err, ReadError::Malformed { line: 5, .. }), "{err}");
    assert!(err.to_string().starts_with("t.jsonl:5:"), "{err}");
}

#[test]
fn a_damaged_copy_of_a_fixture_reports_each_bad_line() {
    // The real files have no bad line split on `\n` (SOURCES.md); 703e4528's
    // line 164 holds two raw U+0085 (NEL) characters, which a splitter on
    // Unicode line breaks (Python's `str.splitlines`) cuts into 3 unparseable
    // pieces. Python shows the pitfall; the importer does not fall into it.
    let nel =
        fixtures::claude_code_transcripts().into_iter().find(|p| name_of(p).starts_with("703e4528")).unwrap();
    let pieces = python(&[
        "-c",
        "import json,sys\nbad=0\nfor l in open(sys.argv[1],encoding='utf-8',newline='').read().splitlines():\n  try: json.loads(l)\n  except Exception: bad+=1\nprint(bad)",
        nel.to_str().unwrap(),
    ]);
    assert_eq!(String::from_utf8(pieces).unwrap().trim(), "3");
    let (loaded, _) = load(&nel);
    assert!(loaded.skipped.is_empty());
    let line_164 = loaded
        .transcript
        .entries
        .iter()
        .find(|e| e.field_value("source").is_some_and(|s| s["lines"] == serde_json::json!([164])));
    assert!(line_164.unwrap().raw().contains('\u{85}'));
    // Damage lines 10 and 200 of a copy (cut each in half): both are reported.
    let bytes = std::fs::read(&nel).unwrap();
    let mut text = String::from_utf8(bytes).unwrap();
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    for n in [10usize, 200] {
        let line = &mut lines[n - 1];
        let half = line.char_indices().nth(line.chars().count() / 2).unwrap().0;
        line.truncate(half);
    }
    text = lines.join("\n");
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.jsonl");
    std::fs::write(&damaged, &text).unwrap();
    let (loaded, _) = load(&damaged);
    let numbers: Vec<u64> = loaded.skipped.iter().map(|s| s.line).collect();
    assert_eq!(numbers, [10, 200]);
    assert_eq!(original_text(&loaded.transcript).unwrap(), text);
}

#[test]
fn streamed_assistant_lines_combine_into_one_message() {
    let a = |uuid: &str, parent: &str, block: &str, stop: &str, out: u64| {
        format!(
            r#"{{"parentUuid":"{parent}","isSidechain":false,"type":"assistant","message":{{"id":"msg_1","role":"assistant","model":"claude-opus-4-5-20251101","content":[{block}],"stop_reason":{stop},"usage":{{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":{out}}}}},"uuid":"{uuid}","timestamp":"2025-12-01T10:00:01.000Z","sessionId":"s"}}"#
        )
    };
    let text = [
        r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-12-01T10:00:00.000Z","sessionId":"s"}"#.to_owned(),
        a("a1", "u1", r#"{"type":"thinking","thinking":"hm","signature":"sig"}"#, "null", 1),
        a("a2", "a1", r#"{"type":"text","text":"let me look"}"#, "null", 2),
        r#"{"type":"file-history-snapshot","messageId":"u1","snapshot":{},"isSnapshotUpdate":false}"#.to_owned(),
        a("a3", "a2", r#"{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/x"}}"#, "null", 30),
        r#"{"parentUuid":"a3","isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"x"},{"type":"text","text":"and?"}]},"uuid":"u2","timestamp":"2025-12-01T10:00:02.000Z","sessionId":"s"}"#.to_owned(),
        // The same message id again, but not the child of the run: its own message.
        a("a4", "u2", r#"{"type":"text","text":"again"}"#, r#""end_turn""#, 5),
    ]
    .join("\n")
        + "\n";
    let loaded = map(&text, Format::ClaudeCode);
    let t = &loaded.transcript;
    let rows: Vec<(String, Option<String>, String)> = t
        .entries
        .iter()
        .map(|e| {
            let what = match e.message() {
                Some(m) => format!("{}:{}", m.role.as_deref().unwrap(), m.blocks().len()),
                None => e.type_name().unwrap().to_owned(),
            };
            (e.id.clone().unwrap(), e.parent_id.clone(), what)
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        rows,
        [
            (s("u1"), None, s("user:0")),
            (s("a3"), Some(s("u1")), s("assistant:3")),
            (s("L4"), Some(s("a3")), s("custom")),
            (s("u2"), Some(s("L4")), s("toolResult:1")),
            (s("u2.1"), Some(s("u2")), s("user:1")),
            (s("a4"), Some(s("u2.1")), s("assistant:1")),
        ]
    );
    let combined = t.entries[1].message().unwrap();
    assert_eq!(combined.stop_reason.as_deref(), Some("toolUse"));
    // Usage of the last line: 10 + 100 + 1000 + 30.
    assert_eq!(combined.usage.as_ref().unwrap().total_tokens, Some(1_140.0));
    assert_eq!(t.entries[3].message().unwrap().tool_name.as_deref(), Some("Read"));
    assert_eq!(t.entries[5].message().unwrap().stop_reason.as_deref(), Some("stop"));
    let source = t.entries[1].field_value("source").unwrap();
    assert_eq!(source["lines"], serde_json::json!([2, 3, 5]));
    assert_eq!(t.entries[4].field_value("source").unwrap()["part"], 1);
    assert_eq!(original_text(t).unwrap(), text);
}

#[test]
fn sidechains_stay_out_of_the_main_context_and_a_subagent_file_is_a_conversation() {
    let line = |uuid: &str, parent: &str, side: bool, role: &str| {
        let content = if role == "user" {
            r#""hi""#.to_owned()
        } else {
            format!(r#"[{{"type":"text","text":"reply {uuid}"}}],"id":"m-{uuid}""#)
        };
        format!(
            r#"{{"parentUuid":{parent},"isSidechain":{side},"type":"{role}","message":{{"role":"{role}","content":{content}}},"uuid":"{uuid}","timestamp":"2025-12-01T10:00:00.000Z","sessionId":"s"}}"#
        )
    };
    let mixed = [
        line("m1", "null", false, "user"),
        line("s1", "null", true, "user"),
        line("s2", "\"s1\"", true, "assistant"),
        line("m2", "\"m1\"", false, "assistant"),
        line("s3", "\"s2\"", true, "user"),
    ]
    .join("\n");
    let t = map(&mixed, Format::ClaudeCode).transcript;
    let kinds: Vec<(String, Option<String>, String)> = t
        .entries
        .iter()
        .map(|e| (e.id.clone().unwrap(), e.parent_id.clone(), e.type_name().unwrap().to_owned()))
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        kinds,
        [
            (s("m1"), None, s("message")),
            (s("s1"), Some(s("m1")), s("custom")),
            (s("s2"), Some(s("s1")), s("custom")),
            (s("m2"), Some(s("s2")), s("message")),
            (s("s3"), Some(s("m2")), s("custom")),
        ]
    );
    // The default leaf (the last entry) sees the main chain's two messages only.
    let ctx = sessionlog_events::Transcript::tree(&t).path(4).unwrap();
    let messages = ctx.iter().filter(|&&i| t.entries[i].message().is_some()).count();
    assert_eq!(messages, 2);
    // A sub-agent file (only sidechain lines) is a conversation of its own.
    let sub = [line("s1", "null", true, "user"), line("s2", "\"s1\"", true, "assistant")].join("\n");
    let t = map(&sub, Format::ClaudeCode).transcript;
    assert!(t.entries.iter().all(|e| e.message().is_some()));
}

#[test]
fn codex_usage_is_taken_from_the_call_s_token_count_before_or_after_its_items() {
    let tc = |total: u64, last: u64| {
        format!(
            r#"{{"timestamp":"t","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{total},"cached_input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0,"total_tokens":{total}}},"last_token_usage":{{"input_tokens":{last},"cached_input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0,"total_tokens":{last}}}}}}}}}"#
        )
    };
    let item = |p: &str| format!(r#"{{"timestamp":"t","type":"response_item","payload":{p}}}"#);
    let call = |id: &str| {
        item(&format!(
            r#"{{"type":"function_call","name":"shell","arguments":"{{\"command\":[\"ls\"]}}","call_id":"{id}"}}"#
        ))
    };
    let out = |id: &str| {
        item(&format!(
            r#"{{"type":"function_call_output","call_id":"{id}","output":"{{\"output\":\"x\",\"metadata\":{{\"exit_code\":1}}}}"}}"#
        ))
    };
    let text = [
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s","cwd":"/"}}"#.to_owned(), // 1
        item(r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}"#), // 2
        tc(100, 100), // 3 before call A
        item(r#"{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAA"}"#), // 4 call A
        call("c1"),   // 5 call A
        out("c1"),    // 6
        tc(100, 100), // 7 a repeat: no call
        item(r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"B"}]}"#), // 8 call B
        tc(250, 150), // 9 after call B
        item(r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}"#), // 10
    ]
    .join("\n");
    let t = map(&text, Format::Codex).transcript;
    let calls: Vec<(String, Option<f64>, usize, String)> = t
        .entries
        .iter()
        .filter_map(|e| {
            let m = e.message().filter(|m| m.role.as_deref() == Some("assistant"))?;
            let total = m.usage.as_ref().and_then(|u| u.total_tokens);
            Some((
                e.id.clone().unwrap(),
                total,
                m.blocks().len(),
                m.stop_reason.as_deref().unwrap().to_owned(),
            ))
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(calls, [(s("L4"), Some(100.0), 2, s("toolUse")), (s("L8"), Some(150.0), 1, s("stop"))]);
    let result = t.entries.iter().find(|e| e.id.as_deref() == Some("L6")).unwrap().message().unwrap().clone();
    assert_eq!((result.tool_name.as_deref(), result.is_error), (Some("shell"), Some(true)));
    let thinking =
        &t.entries.iter().find(|e| e.id.as_deref() == Some("L4")).unwrap().message().unwrap().blocks()[0];
    assert_eq!((thinking.kind.as_deref(), thinking.redacted), (Some("thinking"), Some(true)));
    assert_eq!(t.session_id(), Some("s"));
}

#[test]
fn the_format_is_recognised_by_content_not_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let all = fixture_files();
    // A Claude file named like a Codex rollout, and the other way round.
    let (claude, codex) = (&all[0].0, &all[2].0);
    let as_codex = dir.path().join("rollout-2025-01-01T00-00-00-x.jsonl");
    let as_claude = dir.path().join("notes.txt");
    std::fs::copy(claude, &as_codex).unwrap();
    std::fs::copy(codex, &as_claude).unwrap();
    assert_eq!(load(&as_codex).1, Format::ClaudeCode);
    assert_eq!(load(&as_claude).1, Format::Codex);
    // A Pi transcript and an unrelated JSON file are neither.
    let pi = fixtures::shared_dir().join("fixtures/pi/before-compaction.jsonl");
    assert!(import::load_foreign(&pi, Mode::Lenient).unwrap().is_none());
    let other = dir.path().join("x.jsonl");
    std::fs::write(&other, "{\"hello\":1}\n").unwrap();
    assert!(import::load_foreign(&other, Mode::Lenient).unwrap().is_none());
    // A damaged first line does not hide the format.
    let bytes = std::fs::read(codex).unwrap();
    let damaged = [b"{\"timestamp\":\"2025".as_slice(), b"\n", &bytes].concat();
    assert_eq!(import::sniff(&damaged), Some(Format::Codex));
}

#[test]
fn lines_a_model_never_sees_stay_on_the_one_path() {
    // A progress note nobody points to, a queued prompt, and a system note the next line points to.
    let text = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","timestamp":"2025-12-01T10:00:00.000Z","sessionId":"s"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},"uuid":"a1","timestamp":"2025-12-01T10:00:01.000Z","sessionId":"s"}"#,
        r#"{"parentUuid":"a1","type":"progress","data":{"type":"bash_progress"},"uuid":"p1","timestamp":"2025-12-01T10:00:02.000Z","sessionId":"s"}"#,
        r#"{"parentUuid":"a1","type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"ok"}]},"uuid":"u2","timestamp":"2025-12-01T10:00:03.000Z","sessionId":"s"}"#,
        r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2025-12-01T10:00:03.500Z","content":"later","sessionId":"s"}"#,
        r#"{"parentUuid":"u2","type":"system","subtype":"stop_hook_summary","uuid":"h1","timestamp":"2025-12-01T10:00:04.000Z","sessionId":"s"}"#,
        r#"{"parentUuid":"h1","type":"user","message":{"role":"user","content":"next"},"uuid":"u3","timestamp":"2025-12-01T10:00:05.000Z","sessionId":"s"}"#,
    ]
    .join("\n");
    let t = map(&text, Format::ClaudeCode).transcript;
    let links: Vec<(Option<&str>, Option<&str>)> =
        t.entries.iter().map(|e| (e.id.as_deref(), e.parent_id.as_deref())).collect();
    assert_eq!(
        links,
        [
            (Some("u1"), None),
            (Some("a1"), Some("u1")),
            (Some("p1"), Some("a1")),
            (Some("u2"), Some("p1")),
            (Some("L5"), Some("u2")),
            (Some("h1"), Some("L5")),
            (Some("u3"), Some("h1")),
        ]
    );
    let stats = sessionlog_events::Stats::of(&t);
    assert!(stats.branch_points.is_empty() && stats.leaves == ["u3"]);
}
