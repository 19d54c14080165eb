//! Token counting for context sizes and cut points.
//!
//! * [`parts`] — what Pi counts of a message, per role (Pi's `estimateTokens`
//!   rules: which blocks, tool calls as `name` + `JSON.stringify(arguments)`,
//!   images 0 in user messages and 1200 tokens in tool results and custom
//!   messages); [`parts_for`] under either Pi release's rules (1.6 also
//!   counts system messages and images in user messages).
//! * [`TokenCounter`] — turns those parts into tokens. [`PiEstimator`] is
//!   Pi's `ceil(chars / 4)` over UTF-16 code units, exactly; [`Tiktoken`]
//!   counts real BPE tokens (o200k_base, cl100k_base; ranks ship in the crate).
//! * [`Memo`] — a counter that counts a fixed set of messages once (replays
//!   and sweeps count the same messages at every cut and for every policy).
//! * [`usage_tokens`], [`valid_usage`] — provider-reported usage as Pi reads it.
//! * [`ContextSize`] — Pi's context size as one fold: the last assistant
//!   usage the rules trust plus estimates of what follows it, fed message by
//!   message (a live session, a replay, a store's counters) or computed over
//!   a slice (`estimateContextTokens`), under either Pi release's rules.
//!
//! Pure: no I/O; the tiktoken tables are built once per process on first use.

use std::borrow::Cow;
use std::sync::OnceLock;

use rayon::prelude::*;

use sessionlog_events::json::canonicalize_js;
use sessionlog_events::{Content, Entry, EntryKind, Message, PiRules, Role, Usage};

/// Characters Pi charges per image in tool results and custom messages (1200 tokens).
pub const IMAGE_CHARS: u64 = 4800;

/// Length of `s` in UTF-16 code units (JavaScript's `length`), from its
/// bytes: one unit per byte that starts a character, one more for each
/// character of four bytes (a surrogate pair). Summed per 64-byte block in
/// a byte-sized counter (at most 128 a block), which the compiler
/// vectorises, where decoding the characters costs several instructions a
/// byte.
pub fn utf16_len(s: &str) -> u64 {
    s.as_bytes()
        .chunks(64)
        .map(|block| {
            let units =
                block.iter().fold(0u8, |n, &b| n + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xF0));
            u64::from(units)
        })
        .sum()
}

/// The first `max` UTF-16 units of `text` (JavaScript's `slice(0, max)`), or
/// `None` when the text is not longer; a surrogate pair cut in half becomes
/// U+FFFD, as Node writes the lone half.
pub fn utf16_prefix(text: &str, max: usize) -> Option<String> {
    // The first `max` bytes ASCII (most texts): each is a unit, so they are
    // the prefix when more follows (no pair is cut), and a shorter text is
    // ASCII throughout and not longer.
    let bytes = text.as_bytes();
    if bytes[..bytes.len().min(max)].is_ascii() {
        return (bytes.len() > max).then(|| text[..max].to_owned());
    }
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let n = c.len_utf16();
        if used + n > max {
            let mut out = text[..at].to_owned();
            if used < max {
                out.push('\u{FFFD}');
            }
            return Some(out);
        }
        used += n;
    }
    None
}

/// The text of a message that counts toward its size, plus its charged images.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Text pieces, in message order.
    pub texts: Vec<Cow<'a, str>>,
    /// Images charged at [`IMAGE_CHARS`] each.
    pub images: u64,
}

impl Parts<'_> {
    /// Total UTF-16 length of the text pieces.
    pub fn chars(&self) -> u64 {
        self.texts.iter().map(|t| utf16_len(t)).sum()
    }
}

/// `JSON.stringify(arguments)` of a tool call, from its raw JSON text.
pub fn stringify_arguments(raw: &str) -> String {
    let mut out = Vec::with_capacity(raw.len());
    match canonicalize_js(raw, &mut out) {
        // The serializer writes UTF-8 only.
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// What Pi 0.58's `estimateTokens` counts of `message`, by role.
pub fn parts(message: &Message) -> Parts<'_> {
    parts_for(message, PiRules::V0_58)
}

/// What `estimateTokens` of the given Pi release counts of `message`, by role.
pub fn parts_for(message: &Message, rules: PiRules) -> Parts<'_> {
    let mut parts = Parts::default();
    match message.role() {
        // Pi 1.6 counts images in user messages, as it does in tool results.
        Role::User if rules.is_v1() => text_and_images(&message.content, &mut parts),
        Role::User => match &message.content {
            Some(Content::Text(text)) => parts.texts.push(Cow::Borrowed(text)),
            Some(Content::Blocks(blocks)) => {
                for block in blocks {
                    if let (Some("text"), Some(text)) = (block.kind.as_deref(), &block.text) {
                        if !text.is_empty() {
                            parts.texts.push(Cow::Borrowed(text));
                        }
                    }
                }
            }
            None => {}
        },
        Role::System if rules.is_v1() => system_parts(message, &mut parts),
        Role::Assistant => {
            for block in message.blocks() {
                match block.kind.as_deref() {
                    Some("text") => parts.texts.extend(block.text.as_deref().map(Cow::Borrowed)),
                    Some("thinking") => parts.texts.extend(block.thinking.as_deref().map(Cow::Borrowed)),
                    Some("toolCall") => {
                        parts.texts.extend(block.name.as_deref().map(Cow::Borrowed));
                        if let Some(args) = block.canonical_arguments() {
                            // Already JSON.stringify's text (most calls Pi wrote).
                            parts.texts.push(Cow::Borrowed(args));
                        } else if let Some(args) = &block.arguments {
                            parts.texts.push(Cow::Owned(stringify_arguments(args.get())));
                        }
                    }
                    _ => {}
                }
            }
        }
        Role::Custom | Role::ToolResult => text_and_images(&message.content, &mut parts),
        Role::BashExecution => {
            parts.texts.extend(message.command.as_deref().map(Cow::Borrowed));
            parts.texts.extend(message.output.as_deref().map(Cow::Borrowed));
        }
        Role::BranchSummary | Role::CompactionSummary => {
            parts.texts.extend(message.summary.as_deref().map(Cow::Borrowed));
        }
        Role::HookMessage | Role::System | Role::Other => {}
    }
    parts
}

/// `estimateTextAndImageContentChars`: a string, or text blocks plus images.
fn text_and_images<'a>(content: &'a Option<Content>, parts: &mut Parts<'a>) {
    match content {
        Some(Content::Text(text)) => parts.texts.push(Cow::Borrowed(text)),
        Some(Content::Blocks(blocks)) => {
            for block in blocks {
                match (block.kind.as_deref(), &block.text) {
                    (Some("text"), Some(text)) if !text.is_empty() => parts.texts.push(Cow::Borrowed(text)),
                    (Some("image"), _) => parts.images += 1,
                    _ => {}
                }
            }
        }
        None => {}
    }
}

/// Pi 1.6's system message: content, then every non-empty section text,
/// then `JSON.stringify(toolsAdded)` when present.
fn system_parts<'a>(message: &'a Message, parts: &mut Parts<'a>) {
    text_and_images(&message.content, parts);
    if let Some(sections) = &message.sections {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(sections.get())
        {
            for value in map.values() {
                // `if (section)`: empty strings and null add nothing.
                if let Some(text) = value.as_str().filter(|t| !t.is_empty()) {
                    parts.texts.push(Cow::Owned(text.to_owned()));
                }
            }
        }
    }
    if let Some(tools) = &message.tools_added {
        // `if (system.toolsAdded)`: JavaScript truthiness.
        let truthy = match serde_json::from_str::<serde_json::Value>(tools.get()) {
            Ok(serde_json::Value::Null | serde_json::Value::Bool(false)) | Err(_) => false,
            Ok(serde_json::Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
            Ok(serde_json::Value::String(s)) => !s.is_empty(),
            Ok(_) => true,
        };
        if truthy {
            parts.texts.push(Cow::Owned(stringify_arguments(tools.get())));
        }
    }
}

/// Turns the counted parts of a message into tokens.
pub trait TokenCounter: Send + Sync {
    /// The counter's name as the CLI spells it (`pi`, `o200k`, `cl100k`).
    fn name(&self) -> &'static str;

    /// Tokens of one message's parts.
    fn count(&self, parts: &Parts<'_>) -> u64;

    /// Tokens of one message (Pi 0.58's rules).
    fn message_tokens(&self, message: &Message) -> u64 {
        self.count(&parts(message))
    }

    /// Tokens of one message under the given Pi release's rules.
    fn tokens_for(&self, message: &Message, rules: PiRules) -> u64 {
        match rules {
            PiRules::V0_58 => self.message_tokens(message),
            PiRules::V1_6 => self.count(&parts_for(message, rules)),
        }
    }
}

/// A token counter that remembers the counts of a fixed set of messages.
///
/// Replays and sweeps count the same transcript messages again and again (each
/// policy, each cut); a `Memo` counts them once. The messages are borrowed for
/// the memo's lifetime, so an address in its table always denotes the message
/// it was counted from; any other message is counted by the inner counter.
pub struct Memo<'t> {
    inner: &'t dyn TokenCounter,
    // Keyed by address, only looked up: foldhash rather than SipHash.
    counts: std::collections::HashMap<usize, u64, foldhash::fast::RandomState>,
    _messages: std::marker::PhantomData<&'t Message>,
}

impl<'t> Memo<'t> {
    /// Counts `messages` once with `inner`, on all cores.
    pub fn new(inner: &'t dyn TokenCounter, messages: impl IntoIterator<Item = &'t Message>) -> Memo<'t> {
        let messages: Vec<&Message> = messages.into_iter().collect();
        let counts =
            messages.par_iter().map(|&m| (std::ptr::from_ref(m) as usize, inner.message_tokens(m))).collect();
        Memo { inner, counts, _messages: std::marker::PhantomData }
    }
}

impl std::fmt::Debug for Memo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("inner", &self.inner.name())
            .field("messages", &self.counts.len())
            .finish()
    }
}

impl TokenCounter for Memo<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn count(&self, parts: &Parts<'_>) -> u64 {
        self.inner.count(parts)
    }

    fn message_tokens(&self, message: &Message) -> u64 {
        match self.counts.get(&(std::ptr::from_ref(message) as usize)) {
            Some(&n) => n,
            None => self.inner.message_tokens(message),
        }
    }

    fn tokens_for(&self, message: &Message, rules: PiRules) -> u64 {
        // The rule sets count only user and system messages differently.
        match (rules, message.role()) {
            (PiRules::V1_6, Role::User | Role::System) => self.inner.tokens_for(message, rules),
            _ => self.message_tokens(message),
        }
    }
}

/// Pi's estimator: `ceil(chars / 4)` over UTF-16 code units, images 4800 chars.
#[derive(Debug, Clone, Copy, Default)]
pub struct PiEstimator;

impl TokenCounter for PiEstimator {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn count(&self, parts: &Parts<'_>) -> u64 {
        (parts.chars() + parts.images * IMAGE_CHARS).div_ceil(4)
    }
}

/// A real BPE tokenizer; images cost 1200 tokens like Pi's estimate.
pub struct Tiktoken {
    name: &'static str,
    bpe: &'static tiktoken_rs::CoreBPE,
}

impl std::fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiktoken").field("name", &self.name).finish()
    }
}

impl TokenCounter for Tiktoken {
    fn name(&self) -> &'static str {
        self.name
    }

    fn count(&self, parts: &Parts<'_>) -> u64 {
        let text: u64 = parts.texts.iter().map(|t| self.bpe.encode_ordinary(t).len() as u64).sum();
        text + parts.images * (IMAGE_CHARS / 4)
    }
}

/// The token counters the CLI offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tokenizer {
    /// Pi's chars/4 estimate (what Pi and OpenClaw decide with).
    #[default]
    Pi,
    /// OpenAI's o200k_base (GPT-4o and later).
    O200k,
    /// OpenAI's cl100k_base (GPT-4, GPT-3.5).
    Cl100k,
}

impl Tokenizer {
    /// Every counter, in the order the CLI lists them.
    pub const ALL: [Tokenizer; 3] = [Tokenizer::Pi, Tokenizer::O200k, Tokenizer::Cl100k];

    /// The name the CLI and reports use for this counter.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Pi => "pi",
            Tokenizer::O200k => "o200k",
            Tokenizer::Cl100k => "cl100k",
        }
    }
}

impl std::str::FromStr for Tokenizer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Tokenizer::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown tokenizer `{s}` (pi, o200k, cl100k)"))
    }
}

/// A tokenizer's tables failed to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build tokenizer {name}: {reason}")]
pub struct TokenizerError {
    /// The tokenizer.
    pub name: &'static str,
    /// What failed.
    pub reason: String,
}

type Tables = OnceLock<Result<tiktoken_rs::CoreBPE, String>>;

fn tables(
    name: &'static str,
    cell: &'static Tables,
    build: fn() -> Result<tiktoken_rs::CoreBPE, String>,
) -> Result<&'static tiktoken_rs::CoreBPE, TokenizerError> {
    cell.get_or_init(build).as_ref().map_err(|reason| TokenizerError { name, reason: reason.clone() })
}

/// The counter for `tokenizer`, built once per process.
pub fn counter(tokenizer: Tokenizer) -> Result<&'static dyn TokenCounter, TokenizerError> {
    static PI: PiEstimator = PiEstimator;
    static O200K: Tables = OnceLock::new();
    static CL100K: Tables = OnceLock::new();
    static O200K_COUNTER: OnceLock<Tiktoken> = OnceLock::new();
    static CL100K_COUNTER: OnceLock<Tiktoken> = OnceLock::new();
    Ok(match tokenizer {
        Tokenizer::Pi => &PI,
        Tokenizer::O200k => {
            let bpe = tables("o200k", &O200K, || tiktoken_rs::o200k_base().map_err(|e| e.to_string()))?;
            O200K_COUNTER.get_or_init(|| Tiktoken { name: "o200k", bpe })
        }
        Tokenizer::Cl100k => {
            let bpe = tables("cl100k", &CL100K, || tiktoken_rs::cl100k_base().map_err(|e| e.to_string()))?;
            CL100K_COUNTER.get_or_init(|| Tiktoken { name: "cl100k", bpe })
        }
    })
}

/// The usage of an assistant message Pi trusts: not aborted, not an error,
/// with a `usage` object.
pub fn valid_usage(message: &Message) -> Option<&Usage> {
    if message.role() != Role::Assistant {
        return None;
    }
    match message.stop_reason.as_deref() {
        Some("aborted" | "error") => None,
        _ => message.usage.as_ref(),
    }
}

/// The usage of an assistant message the given Pi release trusts: 1.6 also
/// skips usage whose context size is 0 (or not a number).
pub fn valid_usage_for(message: &Message, rules: PiRules) -> Option<&Usage> {
    let usage = valid_usage(message)?;
    match rules {
        PiRules::V0_58 => Some(usage),
        PiRules::V1_6 => (usage_tokens(usage) > 0.0).then_some(usage),
    }
}

/// Context size of a usage record as Pi computes it (`calculateContextTokens`):
/// `totalTokens` when non-zero, else the sum of the parts. A missing part makes
/// the sum `NaN`, as in JavaScript.
pub fn usage_tokens(usage: &Usage) -> f64 {
    match usage.total_tokens {
        Some(total) if total != 0.0 && !total.is_nan() => total,
        _ => {
            let part = |p: Option<f64>| p.unwrap_or(f64::NAN);
            part(usage.input) + part(usage.output) + part(usage.cache_read) + part(usage.cache_write)
        }
    }
}

/// The usage a context size is anchored on.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The usage record as the message holds it.
    pub usage: Usage,
    /// Its context size ([`usage_tokens`]; NaN when a part is missing).
    pub tokens: f64,
    /// The reporting message's `timestamp` (Unix ms), when it has one.
    pub timestamp: Option<f64>,
    /// Position of the reporting item in what was folded (0-based).
    pub index: usize,
}

/// Pi's context size (`estimateContextTokens`) as one fold: the last usage
/// the release's rules trust ([`valid_usage_for`]), plus the estimates of the
/// messages after it ([`TokenCounter::tokens_for`]; of every message when
/// none reported usage). Under Pi 1.6 a `compaction` or `context_edit` entry
/// also discards the usage before it ([`ContextSize::push_entry`]), as
/// `estimateProjectedContextTokens` does; the projected estimate itself
/// (system message replayed) is `context::cut::projected`'s.
///
/// Feed it message by message ([`ContextSize::push`], [`ContextSize::push_entry`])
/// or build it over a slice ([`ContextSize::of`], which only estimates what
/// follows the last usage); both give the same value for the same sequence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextSize {
    rules: PiRules,
    last: Option<Reported>,
    trailing: u64,
    folded: usize,
}

impl ContextSize {
    /// An empty context under `rules`.
    pub fn new(rules: PiRules) -> ContextSize {
        ContextSize { rules, ..ContextSize::default() }
    }

    /// The size of `items` (messages, entries, ...): `message` picks each
    /// item's message. Only the items after the last reported usage are
    /// estimated.
    pub fn of<T>(
        rules: PiRules,
        items: &[T],
        message: impl Fn(&T) -> Option<&Message>,
        counter: &dyn TokenCounter,
    ) -> ContextSize {
        let anchor =
            items.iter().rposition(|item| message(item).is_some_and(|m| valid_usage_for(m, rules).is_some()));
        let start = anchor.unwrap_or(0);
        let mut size = ContextSize { rules, folded: start, ..ContextSize::default() };
        for item in &items[start..] {
            match message(item) {
                Some(m) => {
                    size.push(m, counter);
                }
                None => size.folded += 1,
            }
        }
        size
    }

    /// Folds one message, counting it with `counter` unless it reports usage.
    /// Returns what it reported when it is the new anchor.
    pub fn push(&mut self, message: &Message, counter: &dyn TokenCounter) -> Option<&Reported> {
        let rules = self.rules;
        self.fold(message, || counter.tokens_for(message, rules))
    }

    /// Folds one message whose estimate the caller already has.
    pub fn push_counted(&mut self, message: &Message, tokens: u64) -> Option<&Reported> {
        self.fold(message, || tokens)
    }

    /// Folds one entry of a path: a `message` entry's message; under Pi 1.6
    /// a `compaction` or `context_edit` discards the usage before it; other
    /// entries only take a position.
    pub fn push_entry(&mut self, entry: &Entry, counter: &dyn TokenCounter) -> Option<&Reported> {
        match &entry.kind {
            EntryKind::Message(m) => self.push(m, counter),
            other => {
                if matches!(other, EntryKind::Compaction(_) | EntryKind::ContextEdit(_)) && self.rules.is_v1()
                {
                    self.last = None;
                }
                self.folded += 1;
                None
            }
        }
    }

    fn fold(&mut self, message: &Message, tokens: impl FnOnce() -> u64) -> Option<&Reported> {
        let index = self.folded;
        self.folded += 1;
        match valid_usage_for(message, self.rules) {
            Some(usage) => {
                self.trailing = 0;
                let tokens = usage_tokens(usage);
                self.last =
                    Some(Reported { usage: usage.clone(), tokens, timestamp: message.timestamp, index });
                self.last.as_ref()
            }
            None => {
                self.trailing += tokens();
                None
            }
        }
    }

    /// The context size: the anchor's usage plus the trailing estimate (NaN
    /// when the anchor's usage record is incomplete, as in JavaScript).
    pub fn tokens(&self) -> f64 {
        self.usage_tokens() + self.trailing as f64
    }

    /// The anchor's context size (0 without one).
    pub fn usage_tokens(&self) -> f64 {
        self.last.as_ref().map_or(0.0, |r| r.tokens)
    }

    /// Estimated tokens after the anchor (of everything without one).
    pub fn trailing_tokens(&self) -> u64 {
        self.trailing
    }

    /// The usage the size is anchored on.
    pub fn last_usage(&self) -> Option<&Reported> {
        self.last.as_ref()
    }

    /// The rules in force.
    pub fn rules(&self) -> PiRules {
        self.rules
    }
}

#[cfg(test)]
mod tests {
    use sessionlog_events::Entry;

    use super::*;

    fn message(json: &str) -> Message {
        let line = format!(r#"{{"type":"message","message":{json}}}"#);
        Entry::parse(&line).unwrap().message().unwrap().clone()
    }

    fn check(json: &str, chars: u64, pi_tokens: u64) {
        let m = message(json);
        let p = parts(&m);
        assert_eq!(p.chars() + p.images * IMAGE_CHARS, chars, "{json}");
        assert_eq!(PiEstimator.message_tokens(&m), pi_tokens, "{json}");
    }

    #[test]
    fn utf16_len_is_javascript_s_length_for_every_character() {
        // The reference: Rust's UTF-16 encoder, over every scalar value, one
        // at a time and all of them in one string (a length is a sum).
        let mut all = String::new();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(utf16_len(c.encode_utf8(&mut [0; 4])), c.len_utf16() as u64, "{c:?}");
            all.push(c);
        }
        assert_eq!(utf16_len(&all), all.encode_utf16().count() as u64);
    }

    #[test]
    fn utf16_len_counts_units_by_hand() {
        // a (1) é (1) 日 (1) 🚀 (2): "aé日🚀".length === 5 in JavaScript.
        assert_eq!(utf16_len("aé日🚀"), 5);
        assert_eq!(utf16_len(""), 0);
    }

    /// `utf16_prefix` as first written, a character at a time: the
    /// reference of the ASCII path.
    fn utf16_prefix_by_chars(text: &str, max: usize) -> Option<String> {
        let mut used = 0;
        for (at, c) in text.char_indices() {
            let n = c.len_utf16();
            if used + n > max {
                let mut out = text[..at].to_owned();
                if used < max {
                    out.push('\u{FFFD}');
                }
                return Some(out);
            }
            used += n;
        }
        None
    }

    #[test]
    fn utf16_prefix_equals_the_character_walk() {
        // Every text of up to five pieces (ASCII, two- and three-byte
        // characters, a surrogate pair) cut at every length up to beyond its own.
        let pieces = ["a", "bc", "é", "日", "🚀", " "];
        let mut texts = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> =
                texts.iter().flat_map(|t| pieces.iter().map(move |p| format!("{t}{p}"))).collect();
            texts.extend(longer);
        }
        texts.sort();
        texts.dedup();
        let mut cut = 0;
        for text in &texts {
            for max in 0..=text.len() + 2 {
                let want = utf16_prefix_by_chars(text, max);
                cut += usize::from(want.is_some());
                assert_eq!(utf16_prefix(text, max), want, "{text:?} at {max}");
            }
        }
        assert!(cut > 10_000, "{cut} cut");
        assert_eq!(utf16_prefix("abc", usize::MAX), None);
    }

    #[test]
    fn a_cut_surrogate_pair_becomes_a_replacement_character() {
        assert_eq!(utf16_prefix("ab🚀c", 3).as_deref(), Some("ab\u{FFFD}"));
        assert_eq!(utf16_prefix("ab🚀c", 4).as_deref(), Some("ab🚀"));
        assert_eq!(utf16_prefix("ab🚀c", 5), None);
    }

    #[test]
    fn a_memo_counts_what_its_inner_counter_counts() {
        let known = [
            message(r#"{"role":"user","content":"héllo 🚀 and more"}"#),
            message(
                r#"{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"read","arguments":{"path":"a"}}]}"#,
            ),
        ];
        let stranger = message(r#"{"role":"user","content":"not remembered at all"}"#);
        let memo = Memo::new(&PiEstimator, known.iter());
        for m in known.iter().chain([&stranger]) {
            assert_eq!(memo.message_tokens(m), PiEstimator.message_tokens(m));
        }
        // An equal message elsewhere in memory is counted afresh, with the same result.
        let copy = known[0].clone();
        assert_eq!(memo.message_tokens(&copy), PiEstimator.message_tokens(&known[0]));
        assert_eq!(memo.name(), "pi");
    }

    /// Pi's estimate, counting how often it is asked.
    #[derive(Default)]
    struct Asked(std::sync::atomic::AtomicUsize);

    impl TokenCounter for Asked {
        fn name(&self) -> &'static str {
            "asked"
        }

        fn count(&self, parts: &Parts<'_>) -> u64 {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PiEstimator.count(parts)
        }
    }

    #[test]
    fn a_memo_of_many_messages_counts_each_once_and_answers_for_each() {
        // Message i is i `x`s: ceil(i / 4) tokens by Pi's estimate.
        let known: Vec<Message> = (0..1000)
            .map(|i| message(&format!(r#"{{"role":"user","content":"{}"}}"#, "x".repeat(i))))
            .collect();
        let asked = Asked::default();
        let memo = Memo::new(&asked, known.iter());
        assert_eq!(asked.0.load(std::sync::atomic::Ordering::Relaxed), known.len());
        for (i, m) in known.iter().enumerate() {
            assert_eq!(memo.message_tokens(m), i.div_ceil(4) as u64, "message {i}");
        }
        assert_eq!(asked.0.load(std::sync::atomic::Ordering::Relaxed), known.len(), "each counted once");
    }

    /// A tool call's arguments count as `JSON.stringify(JSON.parse(raw))`
    /// (written by hand), whether the reader marked the raw text as already
    /// that (then it is counted as it stands) or not (then it is re-encoded).
    #[test]
    fn tool_call_arguments_count_as_json_stringify_writes_them() {
        for (raw, js, canonical) in [
            (
                r#"{"path":"a.md","n":-12,"x":[true,null,{},0.5]}"#,
                r#"{"path":"a.md","n":-12,"x":[true,null,{},0.5]}"#,
                true,
            ),
            (r#"{"s":"a\"b\\c\nd\u001f é🚀"}"#, r#"{"s":"a\"b\\c\nd\u001f é🚀"}"#, true),
            (r#""text""#, r#""text""#, true),
            (r#"{"path": "a"}"#, r#"{"path":"a"}"#, false),
            (r#"{"n":1.0,"m":1e21,"k":-0}"#, r#"{"n":1,"m":1e+21,"k":0}"#, false),
            (r#"{"s":"\u00e9\/\u001F"}"#, r#"{"s":"é/\u001f"}"#, false),
            (r#"{"a":1,"b":3,"a":2}"#, r#"{"a":2,"b":3}"#, false),
            (r#"{"b":1,"0":2}"#, r#"{"0":2,"b":1}"#, false),
        ] {
            let m = message(&format!(
                r#"{{"role":"assistant","content":[{{"type":"toolCall","id":"t","name":"w","arguments":{raw}}}]}}"#
            ));
            assert_eq!(m.blocks()[0].arguments_canonical, canonical, "{raw}");
            let texts = parts(&m).texts;
            assert_eq!(texts, [Cow::Borrowed("w"), Cow::Borrowed(js)], "{raw}");
            let mut unmarked = m.clone();
            if let Some(Content::Blocks(blocks)) = &mut unmarked.content {
                blocks[0].arguments_canonical = false;
            }
            assert_eq!(parts(&unmarked).texts, texts, "{raw}");
        }
    }

    #[test]
    fn pi_rules_per_role() {
        // JS: "héllo 🚀".length === 8 (the emoji is two UTF-16 units).
        check(r#"{"role":"user","content":"héllo 🚀"}"#, 8, 2);
        check(
            r#"{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image","data":"x"},{"type":"text","text":""}]}"#,
            4,
            1,
        );
        check(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"ab"},{"type":"text","text":"c"},{"type":"toolCall","id":"t","name":"read","arguments":{"path": "a", "n": 1.0}}]}"#,
            // "ab" + "c" + "read" + {"path":"a","n":1}
            2 + 1 + 4 + 18,
            7,
        );
        check(
            r#"{"role":"toolResult","content":[{"type":"text","text":"12345"},{"type":"image"}]}"#,
            4805,
            1202,
        );
        check(r#"{"role":"custom","content":"abc"}"#, 3, 1);
        check(r#"{"role":"bashExecution","command":"ls","output":"a\nb"}"#, 5, 2);
        check(r#"{"role":"compactionSummary","summary":"12345678"}"#, 8, 2);
        check(r#"{"role":"hookMessage","content":"ignored"}"#, 0, 0);
    }

    #[test]
    fn pi_1_6_counts_system_messages_and_user_images() {
        let system = message(
            r#"{"role":"system","content":"ab","sections":{"x":"cdef","y":null,"z":""},"toolsAdded":[{"name": "r"}]}"#,
        );
        // "ab" + "cdef" + JSON.stringify([{name:"r"}]) = 2 + 4 + 14 = 20 chars.
        assert_eq!(PiEstimator.tokens_for(&system, PiRules::V1_6), 5);
        assert_eq!(PiEstimator.tokens_for(&system, PiRules::V0_58), 0, "0.58 has no system role");
        let user = message(r#"{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image"}]}"#);
        assert_eq!(PiEstimator.tokens_for(&user, PiRules::V0_58), 1);
        assert_eq!(PiEstimator.tokens_for(&user, PiRules::V1_6), 1201);
        // A memo answers for either rule set.
        let memo = Memo::new(&PiEstimator, [&system, &user]);
        assert_eq!(memo.tokens_for(&user, PiRules::V1_6), 1201);
        assert_eq!(memo.tokens_for(&system, PiRules::V0_58), 0);
    }

    #[test]
    fn pi_1_6_trusts_only_positive_usage() {
        let zero = message(
            r#"{"role":"assistant","content":[],"stopReason":"stop","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0}}"#,
        );
        assert!(valid_usage_for(&zero, PiRules::V0_58).is_some());
        assert!(valid_usage_for(&zero, PiRules::V1_6).is_none());
        let partial = message(r#"{"role":"assistant","content":[],"usage":{"input":1}}"#);
        assert!(valid_usage_for(&partial, PiRules::V1_6).is_none(), "NaN > 0 is false");
    }

    #[test]
    fn usage_follows_calculate_context_tokens() {
        let m = message(
            r#"{"role":"assistant","content":[],"stopReason":"stop","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":0}}"#,
        );
        assert_eq!(usage_tokens(valid_usage(&m).unwrap()), 10.0);
        let m = message(
            r#"{"role":"assistant","content":[],"stopReason":"stop","usage":{"input":1,"output":2}}"#,
        );
        assert!(usage_tokens(valid_usage(&m).unwrap()).is_nan());
        let m =
            message(r#"{"role":"assistant","content":[],"stopReason":"aborted","usage":{"totalTokens":5}}"#);
        assert!(valid_usage(&m).is_none());
    }

    #[test]
    fn the_context_size_is_the_last_usage_plus_estimates_after_it() {
        let user = |text: &str| message(&format!(r#"{{"role":"user","content":"{text}"}}"#));
        let reply = |stop: &str, total: u32| {
            message(&format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"stopReason":"{stop}","usage":{{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":{total}}},"timestamp":7}}"#
            ))
        };
        let messages =
            [user("12345678"), reply("stop", 100), user("1234"), reply("aborted", 900), user("12")];
        // By hand: usage 100 (the aborted 900 is not trusted), then ceil(4/4) + ceil(2/4)
        // for the users after it, and the aborted reply's "ok" = ceil(2/4).
        let by_hand = 100.0 + 1.0 + 1.0 + 1.0;
        let whole = ContextSize::of(PiRules::V0_58, &messages, |m| Some(m), &PiEstimator);
        assert_eq!(whole.tokens(), by_hand);
        assert_eq!((whole.usage_tokens(), whole.trailing_tokens()), (100.0, 3));
        let anchor = whole.last_usage().unwrap();
        assert_eq!((anchor.index, anchor.timestamp, anchor.usage.cache_read), (1, Some(7.0), Some(3.0)));
        let mut fed = ContextSize::new(PiRules::V0_58);
        for m in &messages {
            fed.push(m, &PiEstimator);
        }
        assert_eq!(fed, whole);
        // Without usage every message is estimated: 2 + 1 + 1.
        let none = ContextSize::of(
            PiRules::V0_58,
            &[user("12345678"), user("1234"), user("1")],
            |m| Some(m),
            &PiEstimator,
        );
        assert_eq!((none.tokens(), none.last_usage()), (4.0, None));
    }

    #[test]
    fn tiktoken_counts_real_tokens() {
        let o200k = counter(Tokenizer::O200k).unwrap();
        let m = message(r#"{"role":"user","content":"hello world"}"#);
        assert_eq!(o200k.message_tokens(&m), 2);
        let m = message(r#"{"role":"toolResult","content":[{"type":"image"}]}"#);
        assert_eq!(counter(Tokenizer::Cl100k).unwrap().message_tokens(&m), 1200);
        assert!(std::ptr::eq(o200k, counter(Tokenizer::O200k).unwrap()), "built once per process");
    }
}
