//! The `Summarizer` trait — the only door to a model — and the summarisers
//! that need none.

use std::collections::VecDeque;
use std::sync::{Arc, LazyLock};

use serde::Serialize;

/// What a summariser request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum RequestKind {
    /// One chunk of the history (`index` of `count`), seeded with the running summary.
    Chunk {
        /// 0-based chunk index.
        index: usize,
        /// Chunks in this pass.
        count: usize,
    },
    /// Merge of partial summaries into one.
    Merge,
    /// The prefix of a split turn.
    TurnPrefix,
}

/// One message as the summariser sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryMessage {
    /// The entry it comes from.
    pub entry_id: Option<String>,
    /// `user`, `assistant`, `toolResult`, … (`summary` for a partial summary being merged).
    pub role: String,
    /// Its text (tool calls as `name(args)`), shared with the transcript's
    /// [`crate::Facts`] and with every other request that sends it.
    pub text: Arc<str>,
}

/// A request to summarise.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// What it is for.
    pub kind: RequestKind,
    /// The messages.
    pub messages: Vec<SummaryMessage>,
    /// The conversation as plain text (Pi's `serializeConversation`); empty
    /// for a summariser that does not read it ([`Summarizer::reads_conversation`]).
    pub conversation: String,
    /// The summary so far, to update.
    pub previous_summary: Option<String>,
    /// Instructions (structure, identifier policy, custom focus).
    pub instructions: String,
    /// Output budget in tokens.
    pub max_tokens: u64,
}

/// A summariser failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("summariser failed: {0}")]
pub struct SummarizerError(pub String);

/// Produces summaries. Implementations: [`Extractive`] (deterministic, no
/// model), [`Recorded`] (a recorded compaction's summary), [`Scripted`]
/// (canned answers; the test double for a model).
pub trait Summarizer {
    /// Name shown in reports.
    fn name(&self) -> &str;

    /// Answers one request.
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError>;

    /// Whether the answer reads the request's `conversation`. A summariser
    /// that does not (it reads the messages) is sent an empty one: the
    /// pipeline then counts the conversation's characters without writing it.
    fn reads_conversation(&self) -> bool {
        true
    }

    /// Called before each compaction with the cut it summarises (recorded
    /// summarisers use it to find the matching recorded compaction).
    fn begin(&mut self, _first_kept_entry_id: &str) {}

    /// A finished summary for the whole compaction, when the summariser has
    /// one (a recorded compaction with the same cut); the pipeline then skips
    /// staged summarisation and only adds file lists and the ledger.
    fn whole_summary(&mut self) -> Option<String> {
        None
    }
}

/// `text` trimmed, cut to its first `max` characters with `…` after them
/// when it has more (counted only as far as the cut).
fn clip(text: &str, max: usize) -> String {
    let t = text.trim();
    match t.char_indices().nth(max) {
        None => t.to_owned(),
        Some((cut, _)) => {
            let mut head = String::with_capacity(cut + '…'.len_utf8());
            head.push_str(&t[..cut]);
            head.push('…');
            head
        }
    }
}

/// `haystack.to_lowercase().contains(needle)` for an ASCII haystack and needle:
/// each place holding the needle's first byte in either case (memchr) is
/// compared with the rest of it.
fn contains_ascii_lowercase(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else { return true };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let mut from = 0;
    while let Some(at) = memchr::memchr2(lower, upper, &h[from..]) {
        let start = from + at;
        match h.get(start + 1..start + n.len()) {
            Some(w) if w.eq_ignore_ascii_case(rest) => return true,
            Some(_) => from = start + 1,
            None => return false,
        }
    }
    false
}

/// Whether a trimmed line holds one of `keys` (ASCII lowercase) once lowered.
fn line_matches(line: &str, keys: &[&str]) -> bool {
    // A line needs no Unicode lowering unless it holds a character outside
    // ASCII that lowers to ASCII.
    if !lowers_to_ascii(line) {
        keys.iter().any(|k| contains_ascii_lowercase(line, k))
    } else {
        let lower = line.to_lowercase();
        keys.iter().any(|k| lower.contains(k))
    }
}

/// Sets of keys (ASCII lowercase, none holding a `\n`) and an automaton
/// that finds them all in ASCII case in one pass (Aho–Corasick, as a table
/// from state and byte to state): each state knows the sets of the keys that
/// end at it, and the states where some key ends are numbered last, so a
/// pass compares each state with one number.
struct Keys {
    /// The sets; set `k` is bit `k` of a mask.
    sets: &'static [&'static [&'static str]],
    /// The next state after each state and byte (an ASCII capital read as
    /// its small letter), at `state | byte`: states are numbered in steps
    /// of 256, so that no index leaves the table.
    next: Box<[u16; 1 << 16]>,
    /// `next`, except that a state where a key ends is never left: whether
    /// a text holds a key is where a pass ends.
    sticky: Box<[u16; 1 << 16]>,
    /// The first state where a key ends.
    first_out: u16,
    /// The sets of the keys that end at each state (by `state >> 8`).
    out: Vec<u8>,
}

/// Bytes [`Keys::lines_holding`] reads between two looks at its sticky pass.
const STRIDE: usize = 64;

impl Keys {
    fn new(sets: &'static [&'static [&'static str]]) -> Keys {
        assert!(sets.len() <= 8, "at most 8 sets of keys");
        // The trie of the keys (state 0 the root, 0 also "no child").
        let mut goto: Vec<[usize; 256]> = vec![[0; 256]];
        let mut out: Vec<u8> = vec![0];
        for (k, keys) in sets.iter().enumerate() {
            for key in keys.iter() {
                assert!(
                    !key.is_empty() && !key.contains('\n') && !key.bytes().any(|b| b.is_ascii_uppercase()),
                    "key {key:?}"
                );
                let mut s = 0;
                for b in key.bytes().map(usize::from) {
                    if goto[s][b] == 0 {
                        goto.push([0; 256]);
                        out.push(0);
                        goto[s][b] = goto.len() - 1;
                    }
                    s = goto[s][b];
                }
                out[s] |= 1 << k;
            }
        }
        assert!(goto.len() <= 256, "at most 256 states");
        // Failure links in breadth-first order, the table completed from them.
        let mut delta = vec![[0usize; 256]; goto.len()];
        let mut fail = vec![0usize; goto.len()];
        let mut queue: std::collections::VecDeque<usize> =
            goto[0].iter().copied().filter(|&c| c != 0).collect();
        delta[0] = goto[0];
        while let Some(s) = queue.pop_front() {
            for b in 0..256 {
                let c = goto[s][b];
                if c == 0 {
                    delta[s][b] = delta[fail[s]][b];
                } else {
                    fail[c] = delta[fail[s]][b];
                    out[c] |= out[fail[c]];
                    delta[s][b] = c;
                    queue.push_back(c);
                }
            }
        }
        // States where a key ends numbered last (the root stays first).
        let mut order: Vec<usize> = (0..goto.len()).filter(|&s| out[s] == 0).collect();
        let first_out = order.len();
        order.extend((0..goto.len()).filter(|&s| out[s] != 0));
        let mut number = vec![0usize; goto.len()];
        for (new, &old) in order.iter().enumerate() {
            number[old] = new;
        }
        let step = |s: usize| u16::try_from(s << 8).expect("at most 256 states");
        let table = || -> Box<[u16; 1 << 16]> {
            vec![0u16; 1 << 16].into_boxed_slice().try_into().expect("a table of 2^16 states and bytes")
        };
        let (mut next, mut sticky) = (table(), table());
        for (new, &old) in order.iter().enumerate() {
            for b in 0..256 {
                // Capitals as small letters.
                let to = step(number[delta[old][usize::from((b as u8).to_ascii_lowercase())]]);
                next[(new << 8) | b] = to;
                sticky[(new << 8) | b] = if new >= first_out { step(new) } else { to };
            }
        }
        let out = order.iter().map(|&old| out[old]).collect();
        Keys { sets, next, sticky, first_out: step(first_out), out }
    }

    /// The lines of `text` (split at each `\n` only, so a line keeps a `\r`
    /// before it; untrimmed) that hold
    /// a key in ASCII case, in order, each with the sets of the keys it
    /// holds. No key holds a `\n`, so a key found lies within one line.
    fn lines_holding<'t>(&self, text: &'t str) -> Vec<(&'t str, u8)> {
        let bytes = text.as_bytes();
        let mut found = Vec::new();
        // The sticky pass, looked at every STRIDE bytes: the lines before
        // the stride where it first reaches a key's end hold none.
        let mut s = 0u16;
        let mut from = None;
        for (i, stride) in bytes.chunks(STRIDE).enumerate() {
            for &b in stride {
                s = self.sticky[usize::from(s | u16::from(b))];
            }
            if s >= self.first_out {
                from = Some(i * STRIDE);
                break;
            }
        }
        let Some(from) = from else { return found };
        // From that line on, line by line: the sticky pass tells a line
        // holding no key, and only a line holding one is read for its sets.
        let mut line_start = memchr::memrchr(b'\n', &bytes[..from]).map_or(0, |at| at + 1);
        loop {
            let end = memchr::memchr(b'\n', &bytes[line_start..]).map_or(bytes.len(), |at| line_start + at);
            let line = &bytes[line_start..end];
            if line.iter().fold(0u16, |s, &b| self.sticky[usize::from(s | u16::from(b))]) >= self.first_out {
                let (mut s, mut mask) = (0u16, 0u8);
                for &b in line {
                    s = self.next[usize::from(s | u16::from(b))];
                    if s >= self.first_out {
                        mask |= self.out.get(usize::from(s >> 8)).copied().unwrap_or(0);
                    }
                }
                found.push((&text[line_start..end], mask));
            }
            if end == bytes.len() {
                return found;
            }
            line_start = end + 1;
        }
    }
}

/// Keys of the extractive summary's decisions (assistant lines).
const DECISIONS: &[&str] = &["decid", "chose", "will use", "switch to", "instead"];
/// Keys of its open TODOs (assistant lines).
const TODOS: &[&str] = &["todo", "- [ ]", "next step", "remaining", "blocked"];
/// Keys of its constraints and rules (user lines).
const RULES: &[&str] = &["must", "never", "always", "don't", "do not", "only"];

/// The keys of the assistant's lines: decisions (set 0) and TODOs (set 1).
static ASSISTANT: LazyLock<Keys> = LazyLock::new(|| Keys::new(&[DECISIONS, TODOS]));
/// The keys of the user's lines: rules (set 0).
static USER: LazyLock<Keys> = LazyLock::new(|| Keys::new(&[RULES]));

/// For each set of `keys`, the last `n` lines (trimmed, non-empty, in
/// order) of the messages of `role` that hold one of its keys once lowered.
/// The messages are walked from the last one back, so a walk ends once every
/// set has its `n` lines (the summary keeps only the latest ones); a
/// message's lines holding a key are found in one pass of `keys`'
/// automaton, unless the message holds a character that lowers to ASCII
/// (then each line is lowered and searched).
fn last_lines_matching<'a, const K: usize>(
    messages: &'a [SummaryMessage],
    role: &str,
    keys: &Keys,
    n: usize,
) -> [Vec<&'a str>; K] {
    debug_assert_eq!(keys.sets.len(), K, "one list of lines per set of keys");
    let mut found: [Vec<&str>; K] = std::array::from_fn(|_| Vec::new());
    for m in messages.iter().rev().filter(|m| m.role == role) {
        if found.iter().all(|f| f.len() >= n) {
            break;
        }
        if lowers_to_ascii(&m.text) {
            for line in m.text.lines().rev().map(str::trim).filter(|l| !l.is_empty()) {
                for (f, set) in found.iter_mut().zip(keys.sets) {
                    if f.len() < n && line_matches(line, set) {
                        f.push(line);
                    }
                }
            }
            continue;
        }
        for (line, mask) in keys.lines_holding(&m.text).into_iter().rev() {
            for (k, f) in found.iter_mut().enumerate() {
                if mask & (1 << k) != 0 && f.len() < n {
                    f.push(line.trim());
                }
            }
        }
    }
    for f in &mut found {
        f.reverse();
    }
    found
}

/// The characters outside ASCII whose lowercase holds an ASCII character:
/// the Kelvin sign (`k`) and the capital I with a dot (`i` and a combining
/// dot). Every other character outside ASCII lowers to characters outside
/// ASCII only (a test checks every `char`), whose bytes are all above 0x7F;
/// so in a line without these two an ASCII key is found in the lowered line
/// exactly where [`contains_ascii_lowercase`] finds it in the line.
const LOWER_TO_ASCII: [&str; 2] = ["\u{212A}", "\u{130}"];

/// Whether `line` holds one of [`LOWER_TO_ASCII`]: each place holding the
/// first byte of either (0xE2, 0xC4; memchr) is compared with the rest of it.
fn lowers_to_ascii(line: &str) -> bool {
    let bytes = line.as_bytes();
    let [kelvin, dotted_i] = LOWER_TO_ASCII.map(str::as_bytes);
    let mut from = 0;
    while let Some(at) = memchr::memchr2(kelvin[0], dotted_i[0], &bytes[from..]) {
        let rest = &bytes[from + at..];
        if rest.starts_with(kelvin) || rest.starts_with(dotted_i) {
            return true;
        }
        from += at + 1;
    }
    false
}

/// A deterministic summariser that needs no model: it keeps the latest user
/// requests, decision and rule sentences, open tasks and the files touched.
/// Small but useful; the identifier ledger is added by the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Extractive;

impl Extractive {
    fn section(out: &mut String, title: &str, items: &[String]) {
        out.push_str(title);
        out.push('\n');
        if items.is_empty() {
            out.push_str("(none)\n");
        }
        for item in items {
            out.push_str("- ");
            out.push_str(item);
            out.push('\n');
        }
        out.push('\n');
    }
}

impl Summarizer for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn reads_conversation(&self) -> bool {
        false
    }

    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        let m = &request.messages;
        let clipped = |v: Vec<&str>| -> Vec<String> { v.into_iter().map(|l| clip(l, 200)).collect() };
        let [decisions, todos] = last_lines_matching(m, "assistant", &ASSISTANT, 5).map(clipped);
        let [rules] = last_lines_matching(m, "user", &USER, 5).map(clipped);
        let asks: Vec<String> = {
            let mut users: Vec<&SummaryMessage> =
                m.iter().rev().filter(|x| x.role == "user" || x.role == "summary").take(3).collect();
            users.reverse();
            users.into_iter().map(|x| clip(&x.text, 400)).collect()
        };
        let mut out = String::new();
        if let Some(prev) = request.previous_summary.as_deref().filter(|p| !p.trim().is_empty()) {
            out.push_str("## Earlier context\n");
            out.push_str(&clip(prev, 2000));
            out.push_str("\n\n");
        }
        Extractive::section(&mut out, "## Decisions", &decisions);
        Extractive::section(&mut out, "## Open TODOs", &todos);
        Extractive::section(&mut out, "## Constraints/Rules", &rules);
        Extractive::section(&mut out, "## Pending user asks", &asks);
        out.push_str(&format!("({} messages summarised)", m.len()));
        Ok(out)
    }
}

/// Replays recorded summaries: the summary of the recorded compaction whose
/// `firstKeptEntryId` equals the cut being made. Without a match it falls back
/// to [`Extractive`] and counts the miss.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    recorded: Vec<(String, String)>,
    current: Option<String>,
    /// Compactions whose cut matched a recorded one.
    pub hits: usize,
    /// Compactions that fell back to the extractive summary.
    pub misses: usize,
}

impl Recorded {
    /// A summariser over `(firstKeptEntryId, summary)` pairs of recorded compactions.
    pub fn new(recorded: Vec<(String, String)>) -> Recorded {
        Recorded { recorded, ..Recorded::default() }
    }
}

impl Summarizer for Recorded {
    fn name(&self) -> &str {
        "recorded"
    }

    fn reads_conversation(&self) -> bool {
        false
    }

    fn begin(&mut self, first_kept_entry_id: &str) {
        self.current = self.recorded.iter().find(|(id, _)| id == first_kept_entry_id).map(|(_, s)| s.clone());
        if self.current.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    fn whole_summary(&mut self) -> Option<String> {
        self.current.clone()
    }

    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        Extractive.summarize(request)
    }
}

/// Canned answers in order (the test double standing in for a model); an
/// exhausted script fails.
#[derive(Debug, Clone, Default)]
pub struct Scripted {
    answers: VecDeque<Result<String, SummarizerError>>,
    /// Every request received, in order.
    pub requests: Vec<SummaryRequest>,
}

impl Scripted {
    /// A script of answers.
    pub fn new(answers: impl IntoIterator<Item = Result<String, SummarizerError>>) -> Scripted {
        Scripted { answers: answers.into_iter().collect(), requests: Vec::new() }
    }
}

impl Summarizer for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, SummarizerError> {
        self.requests.push(request.clone());
        self.answers.pop_front().unwrap_or_else(|| Err(SummarizerError("script exhausted".to_owned())))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{
        clip, contains_ascii_lowercase, lowers_to_ascii, Extractive, Keys, RequestKind, Summarizer,
        SummaryMessage, SummaryRequest, DECISIONS, LOWER_TO_ASCII, RULES, TODOS,
    };

    /// The extractive summary written the plain way, as the reference: every
    /// matching line of the whole history collected (lowered, then searched),
    /// then the last ones kept.
    fn reference_summary(request: &SummaryRequest) -> String {
        fn lines_matching<'a>(messages: &'a [SummaryMessage], role: &str, keys: &[&str]) -> Vec<&'a str> {
            messages
                .iter()
                .filter(|m| m.role == role)
                .flat_map(|m| m.text.lines())
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .filter(|l| keys.iter().any(|k| l.to_lowercase().contains(k)))
                .collect()
        }
        fn last(v: Vec<&str>, n: usize, max: usize) -> Vec<String> {
            let skip = v.len().saturating_sub(n);
            v.iter().skip(skip).map(|l| clip(l, max)).collect()
        }
        let m = &request.messages;
        let decisions = last(
            lines_matching(m, "assistant", &["decid", "chose", "will use", "switch to", "instead"]),
            5,
            200,
        );
        let todos = last(
            lines_matching(m, "assistant", &["todo", "- [ ]", "next step", "remaining", "blocked"]),
            5,
            200,
        );
        let rules =
            last(lines_matching(m, "user", &["must", "never", "always", "don't", "do not", "only"]), 5, 200);
        let asks: Vec<&str> =
            m.iter().filter(|x| x.role == "user" || x.role == "summary").map(|x| &*x.text).collect();
        let asks = last(asks, 3, 400);
        let mut out = String::new();
        if let Some(prev) = request.previous_summary.as_deref().filter(|p| !p.trim().is_empty()) {
            out.push_str(&format!("## Earlier context\n{}\n\n", clip(prev, 2000)));
        }
        for (title, items) in [
            ("## Decisions", decisions),
            ("## Open TODOs", todos),
            ("## Constraints/Rules", rules),
            ("## Pending user asks", asks),
        ] {
            out.push_str(title);
            out.push('\n');
            if items.is_empty() {
                out.push_str("(none)\n");
            }
            for item in items {
                out.push_str(&format!("- {item}\n"));
            }
            out.push('\n');
        }
        out.push_str(&format!("({} messages summarised)", m.len()));
        out
    }

    /// A line of a message: key words in any case, around them other words,
    /// characters that lower to ASCII, long runs (clipped at 200), blank
    /// and indented lines, CRLF ends.
    fn text() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            Just("Decided"),
            Just("we CHOSE"),
            Just("will use"),
            Just("switch to"),
            Just("instead"),
            Just("TODO"),
            Just("- [ ]"),
            Just("next step"),
            Just("remaining"),
            Just("blocked"),
            Just("MUST"),
            Just("never"),
            Just("always"),
            Just("don't"),
            Just("do not"),
            Just("only"),
            Just("dec\u{130}d"),
            Just("\u{212A}"),
            Just("todö"),
            Just("bloc\u{212A}ed"),
            Just("\u{130}nstead"),
            Just("\u{17F}witch to"),
            Just("bloc"),
            Just("ed"),
            Just("plain"),
            Just("é日本"),
            Just(" "),
            Just("\t"),
            Just("\n"),
            Just("\r\n"),
            Just("\n\n"),
            Just("\r"),
        ];
        prop_oneof![
            8 => prop::collection::vec(word, 0..12).prop_map(|w| w.concat()),
            1 => (150usize..260, "[a-zé]{0,3}").prop_map(|(n, t)| format!("decided {}{t}", "x".repeat(n))),
        ]
    }

    fn request() -> impl Strategy<Value = SummaryRequest> {
        let role = prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("assistant"),
            Just("summary"),
            Just("toolResult")
        ];
        let message = (role, text()).prop_map(|(role, text)| SummaryMessage {
            entry_id: None,
            role: role.to_owned(),
            text: text.into(),
        });
        (prop::collection::vec(message, 0..24), prop::option::of(text())).prop_map(
            |(messages, previous_summary)| SummaryRequest {
                kind: RequestKind::Chunk { index: 0, count: 1 },
                messages,
                conversation: String::new(),
                previous_summary,
                instructions: String::new(),
                max_tokens: 1000,
            },
        )
    }

    /// The automaton by hand: a key that ends inside a longer key's path
    /// (`bc` in `abc` of `abcd`, `he` in `she`), capitals, keys that overlap
    /// across lines and a line with no key.
    #[test]
    fn lines_holding_keys_by_hand() {
        let keys = Keys::new(&[&["abcd", "she"], &["bc", "he", "- [ ]"]]);
        assert_eq!(keys.lines_holding("xabcx"), [("xabcx", 2)]);
        assert_eq!(
            keys.lines_holding("ABCD\nnone\nuSHEr\r\n- [ ] x"),
            [("ABCD", 3), ("uSHEr\r", 3), ("- [ ] x", 2)]
        );
        assert_eq!(keys.lines_holding("ab\ncd\nsh\ne"), []);
        assert_eq!(keys.lines_holding(&format!("{}\nab{}cd", "x".repeat(200), "y".repeat(100))), []);
        // A key across a stride of the sticky pass (bytes 126 to 129): the
        // whole line it is on, from the line's start (byte 61), not from the stride's.
        let line = format!("x{}abcd", "y".repeat(64));
        assert_eq!(keys.lines_holding(&format!("{}\n{line}", "x".repeat(60))), [(line.as_str(), 3)]);
        // A line longer than two strides before its key, after a line with none.
        let long = format!("{}she", "z".repeat(150));
        assert_eq!(keys.lines_holding(&format!("none\n{long}\nnone")), [(long.as_str(), 3)]);
    }

    /// The ground the extractive summariser's key search stands on.
    #[test]
    fn only_the_kelvin_sign_and_the_dotted_capital_i_lower_to_ascii() {
        let found: Vec<char> = (0..=u32::from(char::MAX))
            .filter_map(char::from_u32)
            .filter(|c| !c.is_ascii() && c.to_lowercase().any(|l| l.is_ascii()))
            .collect();
        assert_eq!(found, ['\u{130}', '\u{212A}']);
        assert!(LOWER_TO_ASCII.iter().all(|c| lowers_to_ascii(c)));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        /// The summary found from the last lines back is the one collected
        /// over the whole history.
        #[test]
        fn extractive_summary_equals_the_reference(request in request()) {
            prop_assert_eq!(Extractive.summarize(&request).ok(), Some(reference_summary(&request)));
        }

        #[test]
        fn ascii_matching_equals_lowering_then_searching(
            line in "[ -~]{0,40}",
            key in prop::sample::select(vec!["decid", "- [ ]", "don't", "todo", "will use", ""]),
        ) {
            prop_assert_eq!(contains_ascii_lowercase(&line, key), line.to_lowercase().contains(key));
        }

        /// Lines outside ASCII (the Kelvin sign and the dotted capital I
        /// among them) match a key as their lowered text does.
        #[test]
        fn a_line_matches_a_key_as_its_lowered_text_does(
            line in "[a-zA-Z ÄäÉéßİ\u{212A}Σσς日本-]{0,40}",
            key in prop::sample::select(vec!["decid", "kelvin", "k", "i", "do not", "- [ ]", ""]),
        ) {
            // What `lines_matching` decides: the byte search unless the line
            // holds a character that lowers to ASCII.
            let slow = line.to_lowercase().contains(key);
            let fast = if lowers_to_ascii(&line) { slow } else { contains_ascii_lowercase(&line, key) };
            prop_assert_eq!(fast, slow, "{:?} {:?}", line, key);
        }

        /// The automaton's lines against each line of `str::lines` searched
        /// key by key in the line lowered to ASCII: texts of keys, pieces of
        /// them and keys that overlap (`insteadecid`, `tododo not`), in any case.
        #[test]
        fn lines_holding_keys_equal_a_search_per_line_and_key(
            pieces in prop::collection::vec(
                prop::sample::select(vec![
                    "decid", "DeCiD", "chose", "will use", "WILL USE", "switch to", "instead", "insteadecid",
                    "todo", "tododo not", "- [ ]", "- [", "next step", "remaining", "blocked", "must",
                    "never", "always", "don't", "DON'T", "do not", "only", "de", "cid", "will", " use",
                    "to", "do", "st", "x", " ", "\n", "\r\n", "\r", "é", "\u{212A}", "日",
                ]),
                0..40,
            ),
        ) {
            let text = pieces.concat();
            for (sets, keys) in [(&[DECISIONS, TODOS][..], Keys::new(&[DECISIONS, TODOS])), (&[RULES][..], Keys::new(&[RULES]))] {
                let by_definition: Vec<(&str, u8)> = text
                    .lines()
                    .map(|line| {
                        let lower = line.to_ascii_lowercase();
                        let mask = sets
                            .iter()
                            .enumerate()
                            .filter(|(_, set)| set.iter().any(|k| lower.contains(k)))
                            .fold(0u8, |m, (k, _)| m | 1 << k);
                        (line.trim(), mask)
                    })
                    .filter(|&(_, mask)| mask != 0)
                    .collect();
                // Trimmed, as the summary reads them (`lines` takes a `\r` before the `\n` off).
                let found: Vec<(&str, u8)> = keys
                    .lines_holding(&text)
                    .into_iter()
                    .map(|(line, mask)| (line.trim(), mask))
                    .collect();
                prop_assert_eq!(found, by_definition, "{:?}", text);
            }
        }

        /// `clip` against its definition: all the trimmed text when it has at
        /// most `max` characters, else its first `max` and `…`.
        #[test]
        fn clip_cuts_at_max_characters(text in "[ a日🦀\n]{0,12}", max in 0usize..10) {
            let t = text.trim();
            let expected = if t.chars().count() <= max {
                t.to_owned()
            } else {
                format!("{}…", t.chars().take(max).collect::<String>())
            };
            prop_assert_eq!(clip(&text, max), expected);
        }

        /// `lowers_to_ascii` against its definition, character by character.
        #[test]
        fn lowers_to_ascii_finds_the_two_characters(line in "[a-zİ\u{212A}\u{2129}\u{212B}Āİıę—…日🦀 ]{0,24}") {
            let by_definition = line.chars().any(|c| !c.is_ascii() && c.to_lowercase().any(|l| l.is_ascii()));
            prop_assert_eq!(lowers_to_ascii(&line), by_definition, "{:?}", line);
        }

        #[test]
        fn planted_keys_are_found_in_any_case(prefix in "[ -~]{0,10}", upper in any::<bool>()) {
            let line = format!("{prefix}{}", if upper { "We DECIDED" } else { "we decided" });
            prop_assert!(contains_ascii_lowercase(&line, "decid"));
        }
    }
}
