//! The `context` document straight from a transcript's bytes.
//!
//! Each line is parsed once, on both cores: its `type`, `id` and `parentId`
//! and the byte range of its `message` (any other line is parsed whole, as
//! an [`Entry`]). The context is chosen over those ranges under either Pi
//! release's rules, and each stored message is written by re-indenting its
//! raw slice ([`write_js_pretty_text_observed`]), again on both cores. The
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
use std::io::Write;

use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sessionlog_events::json::{write_js_pretty_at, write_js_pretty_text, write_js_pretty_text_observed};
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
fn parse_line(text: &str) -> Option<Line<'_>> {
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
    if let Ok(skim) = serde_json::from_str::<Skim<'_>>(text) {
        if string(skim.kind).as_deref() == Some("message") {
            if let Some(message) = skim.message.filter(|m| m.get().starts_with('{')) {
                return Some(Line {
                    text,
                    id: string(skim.id),
                    parent: string(skim.parent_id).filter(|p| !p.is_empty()),
                    kind: Kind::Message(message.get()),
                });
            }
        }
    }
    let entry = Entry::parse(text).ok()?;
    Some(Line { text, id: None, parent: None, kind: Kind::Parsed(Box::new(entry)) })
}

/// True when `text` holds something serde_json's typed read may refuse
/// although a skim accepts it: a `\u` escape (a lone surrogate) or a number
/// that may be beyond `f64` (300 digits in a row, or a number token with an
/// exponent of three digits or more). A line with one is parsed whole to decide.
fn unusual(text: &[u8]) -> bool {
    let flagged = memchr::memchr3_iter(b'\\', b'e', b'E', text).any(|i| match text[i] {
        b'\\' => text.get(i + 1) == Some(&b'u'),
        _ => i > 0 && text[i - 1].is_ascii_digit() && big_exponent(text, i),
    });
    flagged || (text.len() >= 300 && text.split(|b| !b.is_ascii_digit()).any(|run| run.len() >= 300))
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
            for text in piece.split('\n').filter(|l| !l.is_empty()) {
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
    doc.check_unrendered()?;
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

    /// Every `message` line this document does not write must still be one
    /// the general reader keeps (the written ones are checked as they are written).
    fn check_unrendered(&self) -> Option<()> {
        let mut written = vec![false; self.lines.len()];
        for item in &self.items {
            if let Item::Stored(i) = item {
                written[*i] = true;
            }
        }
        let fine = self.lines.par_iter().zip(written.par_iter()).all(|(line, &written)| match line.kind {
            Kind::Message(_) if !written => !unusual(line.text.as_bytes()) || Entry::parse(line.text).is_ok(),
            _ => true,
        });
        fine.then_some(())
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
            let role = Role::parse(Some(s.role.as_deref()?));
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
        // What surrounds `message` in the line is checked like an unwritten line.
        let offset = message.as_ptr() as usize - line.text.as_ptr() as usize;
        let around =
            |t: &str| unusual(&t.as_bytes()[..offset]) || unusual(&t.as_bytes()[offset + message.len()..]);
        if fast.is_some() && !around(line.text) {
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

    /// One list, written by pieces on all cores; `None` when an item needs the general path.
    fn write_list(&self, list: List) -> Option<Vec<Vec<u8>>> {
        self.items
            .par_chunks(64)
            .map(|chunk| {
                let guess: usize = chunk
                    .iter()
                    .map(|item| match *item {
                        Item::Stored(i) => self.lines[i].text.len() + self.lines[i].text.len() / 4,
                        _ => 1024,
                    })
                    .sum();
                let mut buf = Vec::with_capacity(guess);
                for &item in chunk {
                    self.write_item(item, list, &mut buf)?;
                }
                Some(buf)
            })
            .collect()
    }

    /// Renders the whole document (`JSON.stringify(doc, null, 2)` and a
    /// newline) as pieces to write in order; `None` when an item needs the
    /// general path (nothing has been written then).
    pub fn render(&self) -> Option<Vec<Vec<u8>>> {
        let mut head = Vec::with_capacity(512);
        write_head(
            &mut head,
            self.leaf_id.as_ref(),
            self.thinking_level.as_ref(),
            &self.model,
            self.message_count,
        )
        .ok()?;
        let mut pieces = vec![head];
        let lists: &[(List, &str)] = if self.llm {
            &[(List::Messages, "messages"), (List::Llm, "llmMessages")]
        } else {
            &[(List::Messages, "messages")]
        };
        for &(list, key) in lists {
            let mut body = self.write_list(list)?;
            // Every message was written after `,`; the first one goes without it.
            let open = format!(",\n  \"{key}\": [");
            match body.iter_mut().find(|b| !b.is_empty()) {
                None => pieces.push(format!(",\n  \"{key}\": []").into_bytes()),
                Some(first) => {
                    first.remove(0);
                    pieces.push(open.into_bytes());
                    pieces.append(&mut body);
                    pieces.push(b"\n  ]".to_vec());
                }
            }
        }
        pieces.push(b"\n}\n".to_vec());
        Some(pieces)
    }

    /// Writes pieces from [`FastContext::render`] in order.
    pub fn write_pieces(pieces: &[Vec<u8>], out: &mut dyn Write) -> std::io::Result<()> {
        pieces.iter().try_for_each(|p| out.write_all(p))
    }
}
