//! Quality probes: deterministic checks of what a compaction kept beyond
//! identifiers (cf. Factory's probe categories — artifact, continuation,
//! recall): the files the compacted range read or modified, the last user
//! ask, and the tool failures.

use std::collections::BTreeSet;

use serde::Serialize;
use sessionlog_compaction::Outcome;
use sessionlog_context::AgentMessage;
use sessionlog_events::json::is_js_whitespace;
use sessionlog_events::{Content, Message, Role};

/// Characters of a user ask (whitespace collapsed) the summary must hold for
/// the ask to count as present in it.
pub const ASK_PREFIX_CHARS: usize = 100;
/// Characters of a failed tool result's output (whitespace collapsed) the
/// summary must hold for the failure to count as present.
pub const FAILURE_PREFIX_CHARS: usize = 40;

/// Where the last user ask before a compaction is afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AskPresence {
    /// No user message before the compaction.
    None,
    /// Kept verbatim in the context.
    Kept,
    /// Quoted in the summary (its first [`ASK_PREFIX_CHARS`] characters).
    Summary,
    /// Neither: the model no longer sees what it was last asked.
    Missing,
}

/// The probes of one compaction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probes {
    /// Distinct files the compacted range read, wrote or edited (`read`,
    /// `write`, `edit` calls with a `path`).
    pub files: u64,
    /// Of those, the ones the summary text or its file lists name.
    pub files_named: u64,
    /// `filesNamed / files` (1 when no file was touched).
    pub file_recall: f64,
    /// Where the last user ask is.
    pub last_user_ask: AskPresence,
    /// Failed tool results (`isError`) in the compacted range, once per call.
    pub tool_failures: u64,
    /// Of those, the ones the summary names: the first
    /// [`FAILURE_PREFIX_CHARS`] characters of the output (the tool name when
    /// there is none).
    pub tool_failures_named: u64,
}

/// The runs of `text` between JavaScript whitespace, ASCII read byte by byte.
struct Words<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut start = None;
        while let Some(&b) = bytes.get(self.at) {
            let i = self.at;
            let space = if b.is_ascii() {
                self.at += 1;
                matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
            } else {
                let c = text[i..].chars().next().unwrap_or(' ');
                self.at += c.len_utf8();
                is_js_whitespace(c)
            };
            match (space, start) {
                (true, Some(from)) => return Some(&text[from..i]),
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        start.map(|from| &text[from..])
    }
}

/// JavaScript-whitespace runs collapsed to one space, trimmed.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in (Words { text, at: 0 }) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The first `n` characters of [`collapse`]`(text)`, without collapsing past them.
fn collapse_prefix(text: &str, n: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in (Words { text, at: 0 }) {
        if chars > 0 {
            if chars == n {
                break;
            }
            out.push(' ');
            chars += 1;
        }
        match word.char_indices().nth(n - chars) {
            Some((cut, _)) => {
                out.push_str(&word[..cut]);
                break;
            }
            None => {
                out.push_str(word);
                chars += word.chars().count();
            }
        }
    }
    out
}

/// The length of the JavaScript whitespace character at byte `i` of `text`
/// (`None`: none there, or not whitespace), as [`Words`] reads it.
fn space_at(text: &str, i: usize) -> Option<usize> {
    let b = *text.as_bytes().get(i)?;
    if b.is_ascii() {
        return matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ').then_some(1);
    }
    let c = text.get(i..)?.chars().next()?;
    is_js_whitespace(c).then(|| c.len_utf8())
}

/// Whether [`collapse`]`(text)` holds `needle`, read from `text` itself when
/// `needle` is collapsed already (words of no whitespace joined by single
/// spaces, and perhaps one space after the last, as [`collapse_prefix`] cuts
/// it when its last character is a space; `None` otherwise): such a needle's
/// first word ends one of the text's words (or lies inside one, if it is the
/// only word), each space stands for a run of whitespace, each middle word is
/// a whole word and the last word begins one (a space at the end: a word
/// follows the run, since the collapsed text ends with no space). A summary
/// is tens of kilobytes and a needle at most a hundred characters, so the
/// text is not collapsed to look for it.
fn holds_collapsed(text: &str, needle: &str) -> Option<bool> {
    if needle.is_empty() {
        return Some(true);
    }
    // A space at the end (after at least one word) is an empty last word.
    let (words_text, space_after) = match needle.strip_suffix(' ') {
        Some(head) if !head.is_empty() => (head, true),
        _ => (needle, false),
    };
    let mut words = words_text.split(' ');
    if words.clone().any(|w| w.is_empty() || (Words { text: w, at: 0 }).next() != Some(w)) {
        return None;
    }
    let first = words.next()?;
    let rest: Vec<&str> = words.collect();
    let first_finder = memchr::memmem::Finder::new(first.as_bytes());
    if rest.is_empty() && !space_after {
        return Some(first_finder.find(text.as_bytes()).is_some());
    }
    // The words after the first from byte `i` on: a whitespace run before
    // each, and before a word (any) after them when the needle ends with a space.
    let follows = |mut i: usize| {
        for word in &rest {
            let run_start = i;
            while let Some(n) = space_at(text, i) {
                i += n;
            }
            if i == run_start || !text[i..].starts_with(word) {
                return false;
            }
            i += word.len();
        }
        if space_after {
            let run_start = i;
            while let Some(n) = space_at(text, i) {
                i += n;
            }
            return i > run_start && i < text.len();
        }
        true
    };
    // Every occurrence of the first word, overlapping ones included.
    let mut from = 0;
    while let Some(at) = first_finder.find(&text.as_bytes()[from..]) {
        let start = from + at;
        if follows(start + first.len()) {
            return Some(true);
        }
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    Some(false)
}

/// Whether `text` holds `needle` (memchr's `memmem`, which reads a long text
/// faster than `str::contains`).
fn contains(text: &str, needle: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some()
}

/// The text of a message's content (text blocks joined by newlines).
fn text_of(m: &Message) -> String {
    match &m.content {
        Some(Content::Text(t)) => t.clone(),
        Some(Content::Blocks(_)) => m
            .blocks()
            .iter()
            .filter(|b| b.kind.as_deref() == Some("text"))
            .filter_map(|b| b.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n"),
        None => String::new(),
    }
}

/// Tool names whose calls read or modify a file (any case): Pi's and
/// OpenClaw's `read`, `write`, `edit`, and Claude Code's `MultiEdit`.
const FILE_TOOLS: [&str; 4] = ["read", "write", "edit", "multiedit"];
/// Argument keys naming the file: Pi's `path`, Claude Code's `file_path`.
const PATH_KEYS: [&str; 3] = ["path", "file_path", "filePath"];

/// The distinct files the assistant messages' tool calls read or modify
/// (a [`FILE_TOOLS`] call with a non-empty [`PATH_KEYS`] argument) — read
/// here from the calls themselves, apart from the file lists the
/// compaction keeps.
pub fn files_touched<'m>(messages: impl Iterator<Item = &'m Message>) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for m in messages.filter(|m| m.role() == Role::Assistant) {
        for b in m.blocks().iter().filter(|b| b.kind.as_deref() == Some("toolCall")) {
            let (Some(name), Some(args)) = (b.name.as_deref(), b.arguments.as_deref()) else { continue };
            if !FILE_TOOLS.iter().any(|t| name.eq_ignore_ascii_case(t)) {
                continue;
            }
            let Ok(args) = serde_json::from_str::<serde_json::Value>(args.get()) else { continue };
            let path = PATH_KEYS.iter().find_map(|k| args.get(*k)?.as_str().filter(|p| !p.is_empty()));
            files.extend(path.map(str::to_owned));
        }
    }
    files
}

/// Probes a compaction that summarised `compacted` into `outcome`; `last_ask`
/// is the last user message before it and `ask_kept` whether the context
/// after it still holds that message verbatim.
pub fn probe(
    compacted: &[&AgentMessage<'_>],
    outcome: &Outcome,
    last_ask: Option<&Message>,
    ask_kept: bool,
) -> Probes {
    // Whether the collapsed summary holds a needle: read from the summary
    // itself for a collapsed needle (an ask's or a failure's prefix), else
    // collapsed once (a tool name with whitespace).
    let summary = std::cell::OnceCell::new();
    let holds = |needle: &str| {
        holds_collapsed(&outcome.summary, needle)
            .unwrap_or_else(|| contains(summary.get_or_init(|| collapse(&outcome.summary)), needle))
    };
    let files = files_touched(compacted.iter().map(|m| &*m.message));
    let listed = |f: &str| outcome.read_files.iter().chain(&outcome.modified_files).any(|l| l == f);
    let files_named = files.iter().filter(|f| listed(f) || contains(&outcome.summary, f)).count() as u64;
    let last_user_ask = match last_ask {
        None => AskPresence::None,
        Some(_) if ask_kept => AskPresence::Kept,
        Some(m) => {
            if holds(&collapse_prefix(&text_of(m), ASK_PREFIX_CHARS)) {
                AskPresence::Summary
            } else {
                AskPresence::Missing
            }
        }
    };
    let mut seen = std::collections::HashSet::new();
    let (mut tool_failures, mut tool_failures_named) = (0, 0);
    for m in compacted {
        let m = &m.message;
        if m.role() != Role::ToolResult || m.is_error != Some(true) {
            continue;
        }
        if !seen.insert(m.tool_call_id.clone()) {
            continue;
        }
        tool_failures += 1;
        let output = collapse_prefix(&text_of(m), FAILURE_PREFIX_CHARS);
        let needle =
            if output.is_empty() { m.tool_name.as_deref().unwrap_or_default().to_owned() } else { output };
        tool_failures_named += u64::from(holds(&needle));
    }
    let files_count = files.len() as u64;
    Probes {
        files: files_count,
        files_named,
        file_recall: if files_count == 0 { 1.0 } else { files_named as f64 / files_count as f64 },
        last_user_ask,
        tool_failures,
        tool_failures_named,
    }
}

#[cfg(test)]
mod tests {
    use sessionlog_compaction::FallbackLevel;
    use sessionlog_context::assemble::context_message;
    use sessionlog_events::Entry;

    use super::*;

    fn entry(id: &str, message: &str) -> Entry {
        Entry::parse(&format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"t","message":{message}}}"#
        ))
        .unwrap()
    }

    fn call(id: &str, name: &str, args: &str) -> Entry {
        entry(
            id,
            &format!(
                r#"{{"role":"assistant","content":[{{"type":"toolCall","id":"{id}c","name":"{name}","arguments":{args}}}],"stopReason":"toolUse"}}"#
            ),
        )
    }

    fn result(id: &str, call: &str, text: &str, error: bool) -> Entry {
        entry(
            id,
            &format!(
                r#"{{"role":"toolResult","toolCallId":"{call}","toolName":"bash","content":[{{"type":"text","text":{}}}],"isError":{error}}}"#,
                serde_json::to_string(text).unwrap()
            ),
        )
    }

    /// A compacted range: Pi's `read` of src/main.rs, Claude Code's `Read` of
    /// notes.txt (failed: "permission\n denied: notes.txt", reported twice
    /// for one call), an `edit` of b.txt, a `bash` call (no file) that fails
    /// with no output, and a `write` with an empty path (no file).
    fn range() -> Vec<Entry> {
        vec![
            entry("u1", r#"{"role":"user","content":"please fix the bug"}"#),
            call("a1", "read", r#"{"path":"src/main.rs"}"#),
            result("r1", "a1c", "fn main() {}", false),
            call("a2", "Read", r#"{"file_path":"notes.txt"}"#),
            result("r2", "a2c", "permission\n denied:   notes.txt", true),
            result("r2b", "a2c", "permission denied: notes.txt", true),
            call("a3", "edit", r#"{"path":"b.txt","oldText":"x","newText":"y"}"#),
            result("r3", "a3c", "ok", false),
            call("a4", "bash", r#"{"command":"make"}"#),
            result("r4", "a4c", "", true),
            call("a5", "write", r#"{"path":"","content":"z"}"#),
        ]
    }

    fn outcome(summary: &str) -> Outcome {
        Outcome {
            summary: summary.to_owned(),
            first_kept_entry_id: "k".to_owned(),
            tokens_before: 0.0,
            read_files: vec!["src/main.rs".to_owned()],
            modified_files: vec!["b.txt".to_owned()],
            ledger: Default::default(),
            ledger_identifiers: 0,
            ledger_visible: 0,
            fallback: FallbackLevel::Full,
            pruned_messages: 0,
            exchanges: Vec::new(),
        }
    }

    #[test]
    fn probes_by_hand() {
        let entries = range();
        let messages: Vec<AgentMessage<'_>> = entries.iter().filter_map(context_message).collect();
        let compacted: Vec<&AgentMessage<'_>> = messages.iter().collect();
        let ask = entry("u2", r#"{"role":"user","content":"now  run\tthe\ntests"}"#);
        let ask = ask.message();
        // Files: src/main.rs, notes.txt, b.txt (3). The lists name src/main.rs
        // and b.txt; the summary names none: 2 of 3. Failures: the read of
        // notes.txt (once for its call id) and the bash call (2); the summary
        // names neither. The ask is not kept and not in the summary.
        let p = probe(&compacted, &outcome("Fixed it."), ask, false);
        assert_eq!(
            p,
            Probes {
                files: 3,
                files_named: 2,
                file_recall: 2.0 / 3.0,
                last_user_ask: AskPresence::Missing,
                tool_failures: 2,
                tool_failures_named: 0,
            }
        );
        // A summary naming notes.txt, quoting the ask and the first failure
        // (whitespace collapsed), and the tool name of the empty failure.
        let rich = "Read notes.txt: permission denied: notes.txt. bash failed. Asked: now run the tests.";
        let p = probe(&compacted, &outcome(rich), ask, false);
        assert_eq!(
            (p.files_named, p.file_recall, p.last_user_ask, p.tool_failures_named),
            (3, 1.0, AskPresence::Summary, 2)
        );
        // Kept verbatim wins; no ask at all is `none`.
        assert_eq!(probe(&compacted, &outcome("x"), ask, true).last_user_ask, AskPresence::Kept);
        assert_eq!(probe(&compacted, &outcome("x"), None, false).last_user_ask, AskPresence::None);
        // Nothing compacted: recall 1 of nothing.
        let none = probe(&[], &outcome("x"), None, false);
        assert_eq!((none.files, none.file_recall, none.tool_failures), (0, 1.0, 0));
    }

    #[test]
    fn a_long_ask_is_present_by_its_first_100_characters() {
        let long = format!("{} tail", "word ".repeat(40)); // 200 characters of words, then "tail"
        let ask =
            entry("u", &format!(r#"{{"role":"user","content":{}}}"#, serde_json::to_string(&long).unwrap()));
        let first_100: String = "word ".repeat(20).chars().take(100).collect();
        let p = probe(&[], &outcome(&format!("User asked: {first_100}…")), ask.message(), false);
        assert_eq!(p.last_user_ask, AskPresence::Summary);
        let first_99: String = first_100.chars().take(99).collect();
        let p = probe(&[], &outcome(&format!("User asked: {first_99}…")), ask.message(), false);
        assert_eq!(p.last_user_ask, AskPresence::Missing);
    }

    /// The collapse of the probes (a byte-level scan) against a plain
    /// reading of its definition: split at every JavaScript whitespace
    /// character, drop the empty pieces, join with one space; then the first
    /// `n` characters.
    fn collapsed_by_definition(text: &str, n: usize) -> String {
        let all = text.split(is_js_whitespace).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        all.chars().take(n).collect()
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #[test]
        fn collapsing_follows_its_definition(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        " ", "\t", "\n", "\r\n", "\u{b}", "\u{c}", "\u{85}", "\u{a0}", "\u{1680}",
                        "\u{2000}", "\u{200a}", "\u{200b}", "\u{2028}", "\u{2029}", "\u{202f}",
                        "\u{205f}", "\u{3000}", "\u{feff}", "\u{1c}", "\u{1f}",
                    ]).prop_map(str::to_owned),
                    "[a-zé日🦀]{1,5}",
                ],
                0..24,
            ),
            n in 0usize..40,
        ) {
            let text: String = pieces.concat();
            proptest::prop_assert_eq!(collapse(&text), collapsed_by_definition(&text, usize::MAX));
            proptest::prop_assert_eq!(collapse_prefix(&text, n), collapsed_by_definition(&text, n));
        }

        /// Looking for a needle in a text without collapsing the text is
        /// looking for it in the collapsed text: needles cut from the
        /// collapsed text anywhere (mid-word, across words, at either end)
        /// or built from the same pieces (collapsed or not).
        #[test]
        fn a_needle_is_found_as_in_the_collapsed_text(
            pieces in proptest::collection::vec(piece(), 0..24),
            cut in (0usize..200, 0usize..60, 0usize..60),
            own in proptest::collection::vec(piece(), 0..6),
            collapse_own in proptest::bool::ANY,
        ) {
            let text: String = pieces.concat();
            let collapsed = collapsed_by_definition(&text, usize::MAX);
            let chars: Vec<char> = collapsed.chars().collect();
            let from = cut.0.min(chars.len());
            let cut_needle: String = chars[from..(from + cut.1).min(chars.len())].iter().collect();
            // The cut with a space put in (a word split where the text has none).
            let mut split: Vec<char> = cut_needle.chars().collect();
            split.insert(cut.2.min(split.len()), ' ');
            let split = collapsed_by_definition(&split.into_iter().collect::<String>(), usize::MAX);
            let own: String = own.concat();
            // Collapsed with a space after, as a prefix cut after a space reads.
            let spaced = format!("{} ", collapsed_by_definition(&own, usize::MAX));
            let own = if collapse_own { collapsed_by_definition(&own, usize::MAX) } else { own };
            for needle in [cut_needle, split, own, spaced] {
                let holds = holds_collapsed(&text, &needle);
                // Collapsed, or collapsed with one space after (a prefix cut after a space).
                let collapsed_needle = collapsed_by_definition(&needle, usize::MAX) == needle
                    || needle.strip_suffix(' ').is_some_and(|head| {
                        !head.is_empty() && collapsed_by_definition(head, usize::MAX) == head
                    });
                proptest::prop_assert_eq!(holds.is_some(), collapsed_needle, "{:?}", needle);
                if let Some(holds) = holds {
                    proptest::prop_assert_eq!(holds, collapsed.contains(&needle), "{:?} in {:?}", needle, text);
                }
            }
        }
    }

    /// Text pieces: JavaScript whitespace and not, ASCII and not, from a small
    /// alphabet (so that needles often occur).
    fn piece() -> impl Strategy<Value = String> {
        proptest::prop_oneof![
            proptest::sample::select(vec![
                " ", "  ", "\t", "\n", "\r\n", "\u{b}", "\u{85}", "\u{a0}", "\u{2028}", "\u{3000}",
                "\u{feff}", "\u{1f}",
            ])
            .prop_map(str::to_owned),
            "[abé日]{1,3}",
        ]
    }

    /// The probes' whitespace-collapsing search by hand: a needle across a
    /// line break and a double space, a first word found only on its second
    /// occurrence (the first is not followed by whitespace), and overlapping
    /// occurrences of the first word.
    #[test]
    fn a_needle_is_found_across_whitespace_by_hand() {
        let text = "please\n  run the   tests\tnow";
        assert_eq!(holds_collapsed(text, "please run the tests"), Some(true));
        assert_eq!(holds_collapsed(text, "ease run th"), Some(true));
        assert_eq!(holds_collapsed(text, "run the tests now"), Some(true));
        assert_eq!(holds_collapsed(text, "run thetests"), Some(false));
        assert_eq!(holds_collapsed(text, "tests now please"), Some(false));
        assert_eq!(holds_collapsed("ab abc a b", "a b"), Some(true));
        assert_eq!(holds_collapsed("ab", "a b"), Some(false));
        assert_eq!(holds_collapsed("aaa b", "aa b"), Some(true));
        assert_eq!(holds_collapsed("x", ""), Some(true));
        assert_eq!(holds_collapsed("a  b", "a  b"), None);
        assert_eq!(holds_collapsed("a b", " a"), None);
        assert_eq!(holds_collapsed("a b", " "), None);
        // A space at the end: a word must follow the whitespace after the last word.
        assert_eq!(holds_collapsed("run the\n tests", "run the "), Some(true));
        assert_eq!(holds_collapsed("xrun \t", "run "), Some(false));
        assert_eq!(holds_collapsed("xrun \t", "xrun"), Some(true));
        assert_eq!(holds_collapsed("run the", "run the "), Some(false));
        assert_eq!(holds_collapsed("run thee x", "run the "), Some(false));
        assert_eq!(holds_collapsed("arun  x", "run "), Some(true));
        assert_eq!(holds_collapsed("a b", "a b  "), None);
    }
}
