//! The `context` document straight from a transcript's bytes.
//!
//! Each line is read once, on both cores, by a hand-written scanner that
//! validates it as JSON and finds its `type`, `id` and `parentId` and the
//! byte range of its `message` (any other line, a line with a token the
//! typed read may refuse, and a line the scanner leaves to serde_json are
//! parsed whole, as an [`Entry`]; so every line the general reader would
//! drop is known before anything is written). The context is chosen over
//! those ranges under either Pi release's rules, and each stored message is
//! written by re-indenting its raw slice ([`write_js_pretty_text_observed`]),
//! again on both cores, in bounded batches written as they are done. The
//! document is the one [`crate::context_doc`] and
//! [`crate::ContextDoc::write_json`] write, byte for byte: whatever this path
//! does not decide itself goes through the same functions on a parsed entry
//! (synthesised and edited messages, messages whose content Pi 1.6 fills in,
//! the provider wrappers), and a transcript it does not take on at all —
//! one that needs migration, has a line Pi or our reader would drop, a
//! line with CRs or spaces around it, a cycle, a leaf that does not exist
//! — makes [`render_context`] return `None`, so that the caller takes the
//! general path (which reports what is wrong).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sessionlog_events::json::{
    find_quote_or_backslash, write_js_pretty_at, write_js_pretty_text, write_js_pretty_text_observed,
};
use sessionlog_events::{Entry, EntryKind, PiRules, Role};

use crate::assemble::{compaction_summary_message, context_message, AgentMessage, Context, Leaf};
use crate::doc::{message_out, write_head, MessageOut};
use crate::llm::convert_to_llm_with;
use crate::projection::{apply_edit, entry_messages};

/// One line of the transcript.
struct Line<'a> {
    /// The line's text.
    text: &'a str,
    /// `id` (a `message` line's; a parsed entry has its own).
    id: Option<Cow<'a, str>>,
    /// `parentId`, `""` read as none (a `message` line's).
    parent: Option<Cow<'a, str>>,
    kind: Kind<'a>,
}

enum Kind<'a> {
    /// A `message` entry whose `message` is an object: that object's text.
    Message(&'a str),
    /// Any other line, parsed as the general reader parses it.
    Parsed(Box<Entry>),
}

impl Line<'_> {
    fn id(&self) -> Option<&str> {
        match &self.kind {
            Kind::Message(_) => self.id.as_deref(),
            Kind::Parsed(e) => e.id.as_deref(),
        }
    }

    fn parent(&self) -> Option<&str> {
        match &self.kind {
            Kind::Message(_) => self.parent.as_deref(),
            Kind::Parsed(e) => e.parent_id.as_deref(),
        }
    }

    fn parsed(&self) -> Option<&Entry> {
        match &self.kind {
            Kind::Parsed(e) => Some(e),
            Kind::Message(_) => None,
        }
    }

    fn is_session(&self) -> bool {
        self.parsed().is_some_and(|e| matches!(e.kind, EntryKind::Session(_)))
    }

    /// The stored message's role (`None` when the line cannot be read, which
    /// the general reader would drop).
    fn role(&self) -> Option<Role> {
        match &self.kind {
            Kind::Parsed(e) => Some(e.message().map_or(Role::Other, |m| m.role())),
            Kind::Message(message) => {
                #[derive(Deserialize)]
                struct R<'a> {
                    #[serde(borrow, default)]
                    role: Option<&'a RawValue>,
                }
                match serde_json::from_str::<R<'_>>(message) {
                    Ok(r) => Some(Role::parse(string(r.role).as_deref())),
                    // A repeated `role`: the last one counts, as the typed read has it.
                    Err(_) => {
                        Entry::parse(self.text).ok().map(|e| e.message().map_or(Role::Other, |m| m.role()))
                    }
                }
            }
        }
    }
}

/// A JSON string value, decoded (`None` for any other JSON value), as the
/// typed view's lenient strings read it.
fn string(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let text = raw?.get();
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        return Some(Cow::Borrowed(&text[1..text.len() - 1]));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// Reads one non-blank line; `None` when the general reader would drop it.
///
/// [`scan_line`] reads most lines; one it declines is read by serde_json
/// (`serde_skim`), the reference. A `message` line with a token the typed
/// read may refuse (see [`unusual`]) is parsed whole here, so whether the
/// general reader keeps it is known before anything is written.
fn parse_line(text: &str) -> Option<Line<'_>> {
    let skim = match scan_line(text) {
        Some(scanned) => Some(scanned),
        // Only a line the scanner declines can nest deeper than it follows;
        // one that deep may be too deep to print (Pi's `JSON.stringify`
        // fails there too), which the general path reports.
        None if deeper_than(text.as_bytes(), SCAN_DEPTH) => return None,
        None => serde_skim(text),
    };
    if let Some(skim) = skim.as_ref().filter(|s| !s.unusual) {
        if skim.kind.and_then(plain_string) == Some("message") {
            if let Some(message) = skim.message.filter(|m| m.starts_with('{')) {
                return Some(Line {
                    text,
                    id: skim.id.and_then(plain_string).map(Cow::Borrowed),
                    parent: skim
                        .parent_id
                        .and_then(plain_string)
                        .filter(|p| !p.is_empty())
                        .map(Cow::Borrowed),
                    kind: Kind::Message(message),
                });
            }
        }
    }
    let entry = Entry::parse(text).ok()?;
    // A flagged token the typed read keeps raw (a number beyond `f64`, a lone
    // surrogate in an image's `data` or a tool call's `arguments`) prints as
    // Pi prints it; should one not print, the general path reports it before
    // writing.
    let flagged = skim.as_ref().is_none_or(|s| s.unusual);
    if flagged && write_js_pretty_text(&mut Vec::new(), text, 0).is_err() {
        return None;
    }
    Some(Line { text, id: None, parent: None, kind: Kind::Parsed(Box::new(entry)) })
}

/// Whether arrays and objects in `text` nest more than `limit` deep
/// (brackets inside strings aside).
fn deeper_than(text: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// What a skim of a line found at its top level: the raw JSON text of the
/// values of `type`, `id`, `parentId` and `message`, and whether the line
/// holds a token the typed read may refuse.
#[derive(Debug, Default, PartialEq, Eq)]
struct Skimmed<'a> {
    kind: Option<&'a str>,
    id: Option<&'a str>,
    parent_id: Option<&'a str>,
    message: Option<&'a str>,
    unusual: bool,
}

/// The text of a JSON string token without escapes (`None` for any other
/// token; every string this path keys on is written without escapes, and
/// [`scan_line`] declines a line where one has them).
fn plain_string(token: &str) -> Option<&str> {
    let inner = token.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// serde_json's skim of a line (the reference [`scan_line`] is tested
/// against): `None` when serde_json refuses it, a key of interest is
/// repeated, or a string this path keys on has escapes.
fn serde_skim(text: &str) -> Option<Skimmed<'_>> {
    #[derive(Deserialize)]
    struct Skim<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<&'a RawValue>,
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(rename = "parentId", borrow, default)]
        parent_id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        message: Option<&'a RawValue>,
        // Named so that a repeated key sends the line to the full parse.
        #[serde(rename = "systemMessage", default)]
        _system_message: Option<serde::de::IgnoredAny>,
    }
    let skim = serde_json::from_str::<Skim<'_>>(text).ok()?;
    let escaped =
        |raw: Option<&RawValue>| raw.is_some_and(|r| r.get().starts_with('"') && r.get().contains('\\'));
    if escaped(skim.kind) || escaped(skim.id) || escaped(skim.parent_id) {
        return None;
    }
    Some(Skimmed {
        kind: skim.kind.map(RawValue::get),
        id: skim.id.map(RawValue::get),
        parent_id: skim.parent_id.map(RawValue::get),
        message: skim.message.map(RawValue::get),
        unusual: unusual(text.as_bytes()),
    })
}

/// True when `text` holds something serde_json's typed read may refuse
/// although a skim accepts it: a `\u` escape (a lone surrogate) or a number
/// that may be beyond `f64` (100 digits in a row, or a number token with an
/// exponent of three digits or more). A line with one is parsed whole to decide.
/// (The check of the lines [`scan_line`] declines; it flags more than the
/// scanner does.)
fn unusual(text: &[u8]) -> bool {
    let flagged = memchr::memchr3_iter(b'\\', b'e', b'E', text).any(|i| match text[i] {
        b'\\' => text.get(i + 1) == Some(&b'u'),
        _ => i > 0 && text[i - 1].is_ascii_digit() && big_exponent(text, i),
    });
    flagged || (text.len() >= 100 && text.split(|b| !b.is_ascii_digit()).any(|run| run.len() >= 100))
}

/// Whether the `e` at `at` (after a digit) is the exponent of a number
/// token, three digits or more (`:1e308,`, not a word such as `6e78835` or
/// `"732e5528"`): the token starts after `:`, `,` or `[` (spaces between)
/// and ends at `,`, `}`, `]` or a space.
fn big_exponent(text: &[u8], at: usize) -> bool {
    let rest = &text[at + 1..];
    let rest = rest.strip_prefix(b"+").or_else(|| rest.strip_prefix(b"-")).unwrap_or(rest);
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits < 3 || !rest.get(digits).is_none_or(|b| matches!(b, b',' | b'}' | b']' | b' ')) {
        return false;
    }
    let start = text[..at].iter().rposition(|b| !(b.is_ascii_digit() || *b == b'.')).map_or(0, |p| p + 1);
    let before = text[..start].strip_suffix(b"-").unwrap_or(&text[..start]);
    let before = before.iter().rposition(|b| *b != b' ').map(|p| before[p]);
    before.is_none_or(|b| matches!(b, b':' | b',' | b'['))
}

/// How deeply [`scan_line`] follows nested values before it declines the
/// line (below serde_json's typed read's limit of 128; a line it declines
/// that nests deeper goes to the general path).
const SCAN_DEPTH: usize = 96; // one bit per level in a `u128`

/// One pass over a line as JSON: validates it, finds the top-level values
/// [`Skimmed`] holds, and flags the tokens the typed read may refuse (a
/// `\u` escape of a surrogate; a number that may overflow `f64`: an
/// exponent of three digits or more, or integer digits and exponent adding
/// up to 300 or more). `None` — the line goes to [`serde_skim`] — for
/// anything it does not take on: not exactly one object, a control
/// character or whitespace other than a space, a key with escapes, a
/// repeated key of interest, a string of interest with escapes, nesting
/// deeper than [`SCAN_DEPTH`], invalid JSON. When it accepts a line,
/// serde_json's skim accepts it too and finds the same values.
fn scan_line(text: &str) -> Option<Skimmed<'_>> {
    let s = text.as_bytes();
    // Control characters (raw ones JSON refuses in strings, tabs and CRs as
    // whitespace) are left to serde_json: one pass that vectorises.
    if s.iter().fold(false, |seen, &b| seen | (b < 0x20)) {
        return None;
    }
    let mut found = Skimmed::default();
    let mut seen = [false; 5];
    let mut i = spaces(s, 1);
    if *s.first()? != b'{' {
        return None;
    }
    if s.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if s.get(i) != Some(&b'"') {
                return None;
            }
            let end = i + 1 + find_quote_or_backslash(&s[i + 1..])?;
            if s[end] != b'"' {
                return None;
            }
            let key = &s[i + 1..end];
            i = spaces(s, end + 1);
            if s.get(i) != Some(&b':') {
                return None;
            }
            i = spaces(s, i + 1);
            let start = i;
            i = skip_value(s, i, &mut found.unusual)?;
            // serde_json reads `null` as an absent value.
            let value = Some(&text[start..i]).filter(|v| *v != "null");
            let field = match key {
                b"type" => Some(0),
                b"id" => Some(1),
                b"parentId" => Some(2),
                b"message" => Some(3),
                b"systemMessage" => Some(4),
                _ => None,
            };
            if let Some(field) = field {
                // A repeated key of interest: serde_json refuses the skim.
                if std::mem::replace(&mut seen[field], true) {
                    return None;
                }
                let slot = match field {
                    0 => &mut found.kind,
                    1 => &mut found.id,
                    2 => &mut found.parent_id,
                    3 => &mut found.message,
                    _ => &mut None,
                };
                *slot = value;
            }
            i = spaces(s, i);
            match s.get(i) {
                Some(b',') => i = spaces(s, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if i != s.len() {
        return None;
    }
    let escaped = |v: Option<&str>| v.is_some_and(|v| v.starts_with('"') && v.contains('\\'));
    if escaped(found.kind) || escaped(found.id) || escaped(found.parent_id) {
        return None;
    }
    Some(found)
}

/// The first byte at or after `i` that is not a space.
fn spaces(s: &[u8], mut i: usize) -> usize {
    while s.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// Validates the JSON value at `i` (no control characters in `s`); the
/// position after it, or `None` for invalid JSON or nesting deeper than
/// [`SCAN_DEPTH`].
fn skip_value(s: &[u8], mut i: usize, unusual: &mut bool) -> Option<usize> {
    // Open containers, innermost in bit `depth - 1`: set for an object.
    let mut objects = 0u128;
    let mut depth = 0;
    loop {
        // A value at `i`.
        match *s.get(i)? {
            b'{' | b'[' => {
                let object = s[i] == b'{';
                i = spaces(s, i + 1);
                let close = if object { b'}' } else { b']' };
                if s.get(i) == Some(&close) {
                    i += 1;
                } else {
                    if depth == SCAN_DEPTH {
                        return None;
                    }
                    objects = objects & !(1 << depth) | u128::from(object) << depth;
                    depth += 1;
                    if object {
                        i = object_key(s, i, unusual)?;
                    }
                    continue;
                }
            }
            b'"' => i = skip_string(s, i, unusual)?,
            b't' => i = literal(s, i, b"true")?,
            b'f' => i = literal(s, i, b"false")?,
            b'n' => i = literal(s, i, b"null")?,
            b'-' | b'0'..=b'9' => i = skip_number(s, i, unusual)?,
            _ => return None,
        }
        // After a value: close what ends here, then the next value.
        loop {
            if depth == 0 {
                return Some(i);
            }
            i = spaces(s, i);
            let object = objects >> (depth - 1) & 1 == 1;
            match *s.get(i)? {
                b',' => {
                    i = spaces(s, i + 1);
                    if object {
                        i = object_key(s, i, unusual)?;
                    }
                    break;
                }
                b'}' if object => {
                    depth -= 1;
                    i += 1;
                }
                b']' if !object => {
                    depth -= 1;
                    i += 1;
                }
                _ => return None,
            }
        }
    }
}

/// A key and its `:` at `i`; the position of its value.
fn object_key(s: &[u8], i: usize, unusual: &mut bool) -> Option<usize> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let i = spaces(s, skip_string(s, i, unusual)?);
    (s.get(i) == Some(&b':')).then(|| spaces(s, i + 1))
}

fn literal(s: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    s[i..].starts_with(word).then_some(i + word.len())
}

/// A string token at `i`; the position after its closing quote.
fn skip_string(s: &[u8], mut i: usize, unusual: &mut bool) -> Option<usize> {
    i += 1;
    loop {
        i += find_quote_or_backslash(&s[i..])?;
        if s[i] == b'"' {
            return Some(i + 1);
        }
        match *s.get(i + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
            b'u' => {
                let hex = s.get(i + 2..i + 6)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                // A surrogate: a lone one is refused by the typed read.
                *unusual |= matches!(hex[0], b'd' | b'D')
                    && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F');
                i += 6;
            }
            _ => return None,
        }
    }
}

/// A number token at `i` (JSON's grammar); the position after it.
fn skip_number(s: &[u8], mut i: usize, unusual: &mut bool) -> Option<usize> {
    let digits = |s: &[u8], i: usize| s[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if s[i] == b'-' {
        i += 1;
    }
    let integer = match s.get(i)? {
        b'0' => 1,
        b'1'..=b'9' => digits(s, i),
        _ => return None,
    };
    i += integer;
    if s.get(i) == Some(&b'.') {
        let fraction = digits(s, i + 1);
        if fraction == 0 {
            return None;
        }
        i += 1 + fraction;
    }
    let mut exponent = 0usize;
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        let negative = s.get(i) == Some(&b'-');
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(s, i);
        if n == 0 {
            return None;
        }
        if n >= 3 {
            *unusual = true;
        } else if !negative {
            exponent = s[i..i + n].iter().fold(0, |e, d| e * 10 + usize::from(d - b'0'));
        }
        i += n;
    }
    *unusual |= integer + exponent >= 300;
    Some(i)
}

/// Splits `bytes` into pieces of whole lines, about `pieces` of them.
fn split_lines(bytes: &[u8], pieces: usize) -> Vec<&[u8]> {
    let step = bytes.len() / pieces.max(1) + 1;
    let mut out = Vec::with_capacity(pieces + 1);
    let mut at = 0;
    while at < bytes.len() {
        let next = (at + step).min(bytes.len());
        let end = memchr::memchr(b'\n', &bytes[next..]).map_or(bytes.len(), |i| next + i + 1);
        out.push(&bytes[at..end]);
        at = end;
    }
    out
}

/// Every non-blank line, parsed; `None` when one of them is not what this
/// path takes on.
fn read_lines(bytes: &[u8]) -> Option<Vec<Line<'_>>> {
    let pieces = split_lines(bytes, rayon::current_num_threads() * 8);
    let parts: Option<Vec<Vec<Line<'_>>>> = pieces
        .par_iter()
        .map(|piece| {
            // Invalid UTF-8 is replaced (and reported) by the general reader.
            let piece = std::str::from_utf8(piece).ok()?;
            let mut lines = Vec::with_capacity(piece.len() / 512 + 1);
            let mut start = 0;
            let ends = memchr::memchr_iter(b'\n', piece.as_bytes()).chain(std::iter::once(piece.len()));
            for end in ends {
                // Between newlines: a char boundary.
                let text = &piece[start..end];
                start = end + 1;
                if text.is_empty() {
                    continue;
                }
                // Spaces, CRs or anything else around a line: the general
                // reader's trimming rules decide.
                if !(text.starts_with('{') && text.ends_with('}')) {
                    return None;
                }
                lines.push(parse_line(text)?);
            }
            Some(lines)
        })
        .collect();
    let parts = parts?;
    let mut lines = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        lines.extend(part);
    }
    Some(lines)
}

/// What the document lists for a part of the context.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// The stored message of a `message` line, taken from its raw text.
    Stored(usize),
    /// Pi 0.58: what a parsed entry contributes (`buildSessionContext`).
    Emit(usize),
    /// Pi 0.58: a compaction's summary message.
    Summary(usize),
    /// Pi 1.6: what an entry contributes after the context edit `edit`.
    Projected { at: usize, edit: Option<usize> },
}

/// Which list of the document is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Messages,
    Llm,
}

/// The `context` document of a transcript, built from its bytes by
/// [`render_context`].
pub struct FastContext<'a> {
    lines: Vec<Line<'a>>,
    /// Lines parsed whole because this path needs their typed view.
    promoted: HashMap<usize, Entry>,
    leaf_id: Option<Value>,
    thinking_level: Option<Value>,
    model: Value,
    items: Vec<Item>,
    message_count: usize,
    llm: bool,
    rules: PiRules,
}

/// Builds the `context` document of the JSONL transcript `bytes` (as
/// `--at`, `--leaf`, `--llm` and `--pi-rules` ask) from raw slices, or
/// `None` when the transcript needs the general path.
pub fn render_context<'a>(
    bytes: &'a [u8],
    at: Option<usize>,
    leaf: Leaf<'_>,
    llm: bool,
    rules: PiRules,
) -> Option<FastContext<'a>> {
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let mut lines = read_lines(bytes)?;
    // The header: a version 3 `session` object (older versions migrate).
    let header = lines.first()?.parsed()?;
    if !header.is_valid_header() || header.header()?.version != Some(3.0) {
        return None;
    }
    lines.remove(0);
    if let Some(n) = at {
        lines.truncate(n);
    }
    // foldhash: a fraction of SipHash's cost per id, still seeded per process.
    let mut by_id: HashMap<&str, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(lines.len(), foldhash::fast::RandomState::default());
    for (i, line) in lines.iter().enumerate() {
        if !line.is_session() {
            if let Some(id) = line.id() {
                by_id.insert(id, i);
            }
        }
    }
    let default_leaf = lines.iter().rposition(|l| !l.is_session());
    let (leaf_index, leaf_id) = match leaf {
        Leaf::Null => (None, Some(Value::Null)),
        Leaf::Id(id) => (Some(*by_id.get(id)?), Some(Value::from(id))),
        Leaf::Default => match default_leaf {
            None => (None, Some(Value::Null)),
            Some(i) => (Some(i), lines[i].id().map(Value::from)),
        },
    };
    let mut path = Vec::new();
    if let Some(leaf) = leaf_index {
        path.push(leaf);
        let mut current = leaf;
        while let Some(&parent) = lines[current].parent().and_then(|p| by_id.get(p)) {
            if path.len() > lines.len() {
                return None; // a cycle: the general path reports it
            }
            path.push(parent);
            current = parent;
        }
        path.reverse();
    }
    drop(by_id);
    let mut doc = FastContext {
        lines,
        promoted: HashMap::new(),
        leaf_id,
        thinking_level: None,
        model: Value::Null,
        items: Vec::new(),
        message_count: 0,
        llm,
        rules,
    };
    doc.settings(&path)?;
    match rules {
        PiRules::V0_58 => doc.items_0_58(&path),
        PiRules::V1_6 => doc.items_1_6(&path)?,
    }
    Some(doc)
}

impl<'a> FastContext<'a> {
    /// The entry of line `i` when it has one parsed.
    fn entry(&self, i: usize) -> Option<&Entry> {
        self.lines[i].parsed().or_else(|| self.promoted.get(&i))
    }

    /// Thinking level and model from the path, as `buildSessionContext` finds them.
    fn settings(&mut self, path: &[usize]) -> Option<()> {
        let thinking = path.iter().rev().find(|&&i| {
            self.lines[i].parsed().is_some_and(|e| matches!(e.kind, EntryKind::ThinkingLevelChange { .. }))
        });
        let mut model = None;
        for &i in path.iter().rev() {
            let line = &self.lines[i];
            let is_model = match line.parsed() {
                Some(e) => matches!(e.kind, EntryKind::ModelChange { .. }),
                None => false,
            };
            if is_model || line.role()? == Role::Assistant {
                model = Some(i);
                break;
            }
        }
        let model_entry = match model.map(|i| (i, &self.lines[i].kind)) {
            Some((i, Kind::Message(_))) => Some(Entry::parse(self.lines[i].text).ok()?),
            _ => None,
        };
        let ctx = Context {
            path: Vec::new(),
            thinking_level: thinking.and_then(|&i| self.lines[i].parsed()),
            model: model_entry.as_ref().or_else(|| model.and_then(|i| self.lines[i].parsed())),
            messages: Vec::new(),
        };
        self.thinking_level = ctx.thinking_level_json();
        self.model = ctx.model_json();
        Some(())
    }

    /// Pi 0.58.3's `buildSessionContext` over the path.
    fn items_0_58(&mut self, path: &[usize]) {
        let emits = |lines: &[Line<'_>], i: usize| match &lines[i].kind {
            Kind::Message(_) => Some(Item::Stored(i)),
            Kind::Parsed(e) => context_message(e).map(|_| Item::Emit(i)),
        };
        let compaction =
            path.iter().rev().copied().find(|&i| {
                self.lines[i].parsed().is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_)))
            });
        let Some(c) = compaction else {
            self.items = path.iter().filter_map(|&i| emits(&self.lines, i)).collect();
            self.message_count = self.items.len();
            return;
        };
        let mut items = vec![Item::Summary(c)];
        let c_entry = self.lines[c].parsed();
        let c_id = self.lines[c].id();
        let at = path
            .iter()
            .position(|&i| {
                self.lines[i].parsed().is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_)))
                    && self.lines[i].id() == c_id
            })
            .unwrap_or(path.len());
        let first_kept = match c_entry.map(|e| &e.kind) {
            Some(EntryKind::Compaction(fields)) => fields.first_kept_entry_id.as_deref(),
            _ => None,
        };
        let mut keeping = false;
        for &i in &path[..at] {
            keeping |= self.lines[i].id() == first_kept;
            if keeping {
                items.extend(emits(&self.lines, i));
            }
        }
        items.extend(path.get(at + 1..).unwrap_or(&[]).iter().filter_map(|&i| emits(&self.lines, i)));
        self.message_count = items.len();
        self.items = items;
    }

    /// Pi 1.6.0's `buildSessionProjection` over the path.
    fn items_1_6(&mut self, path: &[usize]) -> Option<()> {
        let is_compaction = |lines: &[Line<'_>], i: usize| {
            lines[i].parsed().is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_)))
        };
        // `buildContextEntries`.
        let mut selected = Vec::with_capacity(path.len());
        match path.iter().rev().copied().find(|&i| is_compaction(&self.lines, i)) {
            None => selected.extend_from_slice(path),
            Some(c) => {
                let c_id = self.lines[c].id();
                match path.iter().position(|&i| self.lines[i].id() == c_id) {
                    None => selected.extend_from_slice(path),
                    Some(at) => {
                        let first_kept = match self.lines[c].parsed().map(|e| &e.kind) {
                            Some(EntryKind::Compaction(fields)) => fields.first_kept_entry_id.as_deref(),
                            _ => None,
                        };
                        selected.push(c);
                        let mut keeping = false;
                        for &i in &path[..at] {
                            keeping |= self.lines[i].id() == first_kept;
                            let system = match &self.lines[i].kind {
                                Kind::Message(_) => self.lines[i].role()? == Role::System,
                                Kind::Parsed(e) => e.message().is_some_and(|m| m.role() == Role::System),
                            };
                            if keeping && !system {
                                selected.push(i);
                            }
                        }
                        selected.extend_from_slice(&path[at + 1..]);
                    }
                }
            }
        }
        // The last context edit per target among the selected entries.
        let mut edits: HashMap<Option<&str>, usize> = HashMap::new();
        for &i in &selected {
            if let Some(EntryKind::ContextEdit(edit)) = self.lines[i].parsed().map(|e| &e.kind) {
                edits.insert(edit.target_id.as_deref(), i);
            }
        }
        let mut items = Vec::with_capacity(selected.len());
        let mut promote = Vec::new();
        for (k, &i) in selected.iter().enumerate() {
            if k > 0 && is_compaction(&self.lines, i) {
                continue; // an older compaction in the kept range contributes nothing
            }
            let edit = edits.get(&self.lines[i].id()).copied();
            match (&self.lines[i].kind, edit) {
                (Kind::Message(_), None) => items.push(Item::Stored(i)),
                (Kind::Message(_), Some(_)) => {
                    promote.push(i);
                    items.push(Item::Projected { at: i, edit });
                }
                (Kind::Parsed(_), _) => items.push(Item::Projected { at: i, edit }),
            }
        }
        drop(edits);
        for i in promote {
            let entry = Entry::parse(self.lines[i].text).ok()?;
            self.promoted.insert(i, entry);
        }
        let mut count = 0;
        for item in &items {
            count += match *item {
                Item::Projected { at, edit } => self.projected(at, edit)?.len(),
                _ => 1,
            };
        }
        self.message_count = count;
        self.items = items;
        Some(())
    }

    /// Pi 1.6: the messages entry `at` contributes after the edit `edit`.
    fn projected(&self, at: usize, edit: Option<usize>) -> Option<Vec<AgentMessage<'_>>> {
        let entry = self.entry(at)?;
        let own = entry_messages(entry);
        Some(match edit {
            Some(e) => apply_edit(own, self.entry(e)?),
            None => own,
        })
    }

    /// Writes the messages of a parsed entry (`message_out` and, for the
    /// provider list, `convertToLlm`), each after `,\n    `.
    fn write_exact(&self, messages: &[AgentMessage<'_>], list: List, out: &mut Vec<u8>) -> Option<()> {
        let mut one = |m: MessageOut<'_>| {
            out.extend_from_slice(b",\n    ");
            match m {
                MessageOut::Raw(text) => write_js_pretty_text(out, text, 2),
                MessageOut::Value(value) => write_js_pretty_at(out, &value, 2),
            }
            .ok()
        };
        match list {
            List::Messages => messages.iter().try_for_each(|m| one(message_out(m, None))),
            List::Llm => convert_to_llm_with(messages, self.rules)
                .iter()
                .try_for_each(|l| one(message_out(l.from, l.built.as_ref()))),
        }
    }

    /// Writes one item of the given list; `None` when the general path must decide.
    fn write_item(&self, item: Item, list: List, out: &mut Vec<u8>) -> Option<()> {
        match item {
            Item::Stored(i) => self.write_stored(i, list, out),
            Item::Emit(i) => {
                let message = context_message(self.entry(i)?);
                self.write_exact(message.as_slice(), list, out)
            }
            Item::Summary(i) => {
                let message = compaction_summary_message(self.entry(i)?);
                self.write_exact(message.as_slice(), list, out)
            }
            Item::Projected { at, edit } => self.write_exact(&self.projected(at, edit)?, list, out),
        }
    }

    /// A stored message from its raw text, unless something about it needs
    /// the typed view (content Pi 1.6 fills in, a role the provider list
    /// wraps or drops, a repeated key, an unusual token).
    fn write_stored(&self, i: usize, list: List, out: &mut Vec<u8>) -> Option<()> {
        let line = &self.lines[i];
        let Kind::Message(message) = line.kind else { return None };
        let start = out.len();
        out.extend_from_slice(b",\n    ");
        let seen = write_js_pretty_text_observed(out, message, 2).ok();
        let fast = seen.filter(|s| s.complete && !s.unusual).and_then(|s| {
            let role = Role::parse(Some(s.role?));
            let v1 = self.rules.is_v1();
            // Pi 1.6 gives a user, assistant, tool-result or system message without content one.
            let filled = v1
                && !s.content
                && matches!(role, Role::User | Role::Assistant | Role::ToolResult | Role::System);
            let passed = match list {
                List::Messages => true,
                List::Llm => {
                    matches!(role, Role::User | Role::Assistant | Role::ToolResult)
                        || (v1 && role == Role::System)
                }
            };
            (!filled && passed).then_some(())
        });
        if fast.is_some() {
            return Some(());
        }
        out.truncate(start);
        let entry = Entry::parse(line.text).ok()?;
        let messages = match self.rules {
            PiRules::V0_58 => context_message(&entry).into_iter().collect(),
            PiRules::V1_6 => entry_messages(&entry),
        };
        self.write_exact(&messages, list, out)
    }

    /// Writes one list after the document's head: the items in batches of
    /// [`BATCH_ITEMS`], each rendered on all cores into the reused buffers
    /// `bufs` and written in order, so memory holds one batch, not the
    /// document.
    fn write_list(
        &self,
        list: List,
        key: &str,
        bufs: &mut Vec<Vec<u8>>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut opened = false;
        for (b, batch) in self.items.chunks(BATCH_ITEMS).enumerate() {
            let n = batch.len().div_ceil(CHUNK_ITEMS);
            if bufs.len() < n {
                bufs.resize_with(n, Vec::new);
            }
            let failed =
                bufs[..n].par_iter_mut().zip(batch.par_chunks(CHUNK_ITEMS)).enumerate().find_map_any(
                    |(c, (buf, chunk))| {
                        buf.clear();
                        let k = chunk.iter().position(|&item| self.write_item(item, list, buf).is_none())?;
                        Some(b * BATCH_ITEMS + c * CHUNK_ITEMS + k)
                    },
                );
            if let Some(k) = failed {
                // Every line was checked when it was read: a bug, or a mapped file cut
                // short meanwhile (the caller checks `FileBytes::intact` first).
                return Err(io::Error::other(format!(
                    "context: item {k} of the context could not be written after its line was accepted"
                )));
            }
            for buf in &bufs[..n] {
                // Every message is written after `,`; the first one goes without it.
                let mut bytes = &buf[..];
                if !opened && !bytes.is_empty() {
                    write!(out, ",\n  \"{key}\": [")?;
                    bytes = &bytes[1..];
                    opened = true;
                }
                out.write_all(bytes)?;
            }
        }
        match opened {
            true => out.write_all(b"\n  ]"),
            false => write!(out, ",\n  \"{key}\": []"),
        }
    }

    /// Writes the whole document (`JSON.stringify(doc, null, 2)` and a
    /// newline) to `out`, in bounded batches. Every line was checked when it
    /// was read, so the general path is never needed once this starts.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut head = Vec::with_capacity(512);
        write_head(
            &mut head,
            self.leaf_id.as_ref(),
            self.thinking_level.as_ref(),
            &self.model,
            self.message_count,
        )?;
        out.write_all(&head)?;
        let lists: &[(List, &str)] = if self.llm {
            &[(List::Messages, "messages"), (List::Llm, "llmMessages")]
        } else {
            &[(List::Messages, "messages")]
        };
        let mut bufs = Vec::new();
        for &(list, key) in lists {
            self.write_list(list, key, &mut bufs, out)?;
        }
        out.write_all(b"\n}\n")
    }
}

/// Items rendered before a batch is written (about 2 MB of output for
/// the generated transcripts' messages).
const BATCH_ITEMS: usize = 2048;

/// Items one task of a batch renders.
const CHUNK_ITEMS: usize = 64;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sessionlog_events::gen::{generate, GenOptions};
    use sessionlog_events::Entry;

    use super::{scan_line, serde_skim, Skimmed};

    /// The scanner's law: when it takes a line on, serde_json reads it as
    /// JSON, its skim finds the same values, and — unless the scanner
    /// flagged a token — the typed read accepts the line.
    fn check(line: &str) -> Result<(), String> {
        let Some(scanned) = scan_line(line) else { return Ok(()) };
        if serde_json::from_str::<serde::de::IgnoredAny>(line).is_err() {
            return Err(format!("scanner took invalid JSON: {line:?}"));
        }
        let same = |s: &Skimmed<'_>| {
            (s.kind, s.id, s.parent_id, s.message)
                == (scanned.kind, scanned.id, scanned.parent_id, scanned.message)
        };
        match serde_skim(line) {
            Some(reference) if same(&reference) => {}
            other => return Err(format!("{line:?}: scanner {scanned:?}, serde_json {other:?}")),
        }
        if !scanned.unusual && Entry::parse(line).is_err() {
            return Err(format!("not flagged, but the typed read refuses it: {line:?}"));
        }
        Ok(())
    }

    fn lines(seed: u64) -> Vec<String> {
        generate(GenOptions { seed, entries: 40, branches: 1, compactions: 1, tool_output_chars: 120 })
    }

    /// Pieces an edit inserts: JSON's structure, escapes, number parts,
    /// whitespace and bytes JSON refuses.
    const PIECES: &[&str] = &[
        "\"",
        "\\",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        " ",
        "\t",
        "\r",
        "\u{1}",
        "e",
        "E",
        "-",
        "+",
        ".",
        "0",
        "9",
        "1e400",
        "1e99",
        "\\u",
        "\\ud800",
        "\\udc00x",
        "\\ud83d\\ude00",
        "\\u00e9",
        "\\/",
        "\\x",
        "null",
        "true",
        "fals",
        "\"type\":\"message\",",
        "\"id\":\"dup\",",
        "\"message\":{},",
        "\"systemMessage\":1,",
        "\"typ\\u0065\":\"message\",",
        "é",
        "\u{2028}",
    ];

    #[test]
    fn the_scanner_takes_on_every_generated_line() {
        for seed in 0..4 {
            for line in lines(seed) {
                let scanned = scan_line(&line).unwrap_or_else(|| panic!("declined {line}"));
                assert!(!scanned.unusual, "flagged {line}");
                check(&line).unwrap();
            }
        }
    }

    #[test]
    fn the_scanner_flags_what_the_typed_read_refuses() {
        let big = format!("{}e99", "1".repeat(250));
        for (line, flagged) in [
            (r#"{"type":"message","message":{"t":1e400}}"#.to_owned(), true),
            (r#"{"type":"message","message":{"t":1e-400}}"#.to_owned(), true),
            (r#"{"type":"message","message":{"t":1.5e99}}"#.to_owned(), false),
            (format!(r#"{{"type":"message","n":{big},"message":{{}}}}"#), true),
            (format!(r#"{{"type":"message","message":{{"n":[{}]}}}}"#, "9".repeat(299)), false),
            (format!(r#"{{"type":"message","message":{{"n":[{}]}}}}"#, "9".repeat(300)), true),
            (r#"{"type":"message","message":{"c":"\ud800"}}"#.to_owned(), true),
            (r#"{"type":"message","message":{"c":"\uDBFF\uDFFF"}}"#.to_owned(), true),
            (r#"{"type":"message","message":{"c":"\u00e9\u001b\uffff"}}"#.to_owned(), false),
        ] {
            assert_eq!(scan_line(&line).map(|s| s.unusual), Some(flagged), "{line}");
            check(&line).unwrap();
        }
        // The typed read refuses a number it cannot hold where it reads one.
        assert!(Entry::parse(&format!(
            r#"{{"type":"message","message":{{"role":"user","timestamp":{big}}}}}"#
        ))
        .is_err());
    }

    #[test]
    fn nesting_is_counted_outside_strings() {
        let text = br#"{"a":"[[[[\"{{","b":[[1],{}]}"#;
        assert!(!super::deeper_than(text, 3));
        assert!(super::deeper_than(text, 2));
    }

    #[test]
    fn the_scanner_declines_what_serde_json_decides() {
        for line in [
            "{\"type\":\"message\",\t\"message\":{}}",
            "{\"type\":\"message\",\"message\":{\"c\":\"a\u{1}b\"}}",
            r#"{"typ\u0065":"message","message":{}}"#,
            r#"{"type":"message","id":"a\"b","message":{}}"#,
            r#"{"type":"message","type":"message","message":{}}"#,
            r#"{"systemMessage":1,"systemMessage":2}"#,
            r#"{"type":"message","message":{}} {}"#,
            r#"{"type":"message","message":{"a":01}}"#,
            r#"{"type":"message","message":{"a":1.}}"#,
            r#"{"type":"message","message":{"a":[1,]}}"#,
            r#"{"type":"message","message":{"a":"\x"}}"#,
        ] {
            assert_eq!(scan_line(line), None, "{line}");
        }
        let deep = format!(r#"{{"message":{}{}}}"#, "[".repeat(120), "]".repeat(120));
        assert_eq!(scan_line(&deep), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn what_the_scanner_accepts_serde_json_reads_alike(
            seed in 0u64..50,
            pick in 0usize..1000,
            edits in proptest::collection::vec((0usize..3, 0usize..100_000, 0usize..PIECES.len()), 1..4),
        ) {
            let all = lines(seed);
            let mut line = all[pick % all.len()].clone();
            for (op, at, piece) in edits {
                let mut at = at % (line.len() + 1);
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                match op {
                    0 => line.insert_str(at, PIECES[piece]),
                    1 => {
                        if let Some(c) = line[at..].chars().next() {
                            line.replace_range(at..at + c.len_utf8(), "");
                        }
                    }
                    _ => {
                        if let Some(c) = line[at..].chars().next() {
                            line.replace_range(at..at + c.len_utf8(), PIECES[piece]);
                        }
                    }
                }
            }
            if let Err(e) = check(&line) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}
