//! Import adapters: other agents' session files read as Pi v3 transcripts.
//!
//! Two formats are recognised **by content** (the first JSON object of the
//! file), never by name:
//!
//! * [`Format::ClaudeCode`] — Claude Code project transcripts
//!   (`~/.claude/projects/<dir>/<session>.jsonl`, sub-agent files too), see
//!   [`claude`];
//! * [`Format::Codex`] — Codex rollouts (`~/.codex/sessions/…/rollout-*.jsonl`),
//!   the current schema and the older one without `turn_context`, see [`codex`].
//!
//! Each file maps to a [`Transcript`] of ordinary Pi entries (messages,
//! compactions, `custom` entries for everything a model never sees), so every
//! projection — `inspect`, `context`, `cut`, `replay`, `sweep` — works on it
//! unchanged. The mapping is lossless: every entry carries the exact original
//! line(s) it was made from in a `source` field that Pi ignores,
//!
//! ```json
//! {"type":"message","id":"…","parentId":"…","timestamp":"…","message":{…},
//!  "source":{"format":"claude-code","lines":[12,13],"records":[{…line 12…},{…line 13…}]}}
//! ```
//!
//! where each record is the original line itself, embedded verbatim (or, for
//! a line that is not a bare JSON object — surrounding spaces, a `\r` — as a
//! JSON string of its text). A second entry made from the same line carries
//! `"part":N` instead of the records. The synthetic `session` header carries
//! what belongs to no entry: blank and unparseable lines (`"unmapped"`) and
//! whether the file ended with a newline. [`original_text`] puts the lines
//! back in order, byte for byte.
//!
//! Ids are deterministic: an original id where the format has one (Claude's
//! `uuid`), else `L<line>` (the first line an entry was made from), and
//! `<id>.<k>` for the k-th further entry made from one line.
//!
//! Recorded compactions become `compaction` entries with `tokensBefore` and
//! `details.trigger` (`auto`, `manual`, or absent when the file does not say),
//! and `firstKeptEntryId` naming the entry after the compaction: both tools
//! keep nothing of the summarised range verbatim, so nothing before the
//! compaction is in context afterwards, as Pi reads such an entry.
//!
//! The mapping is pure (text in, entries out); [`load_foreign`] adds the file.

pub mod claude;
pub mod codex;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sessionlog_events::{json, Entry, LineError, Transcript};

use crate::read::{Loaded, Mode, ReadError, Skipped};

/// An import format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// Claude Code project transcripts.
    ClaudeCode,
    /// Codex rollouts.
    Codex,
}

impl Format {
    /// The name reports use (`inspect`'s `format`, the sweep's `format` column).
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex-rollout",
        }
    }

    /// The `source.format` tag written into mapped entries.
    fn tag(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
        }
    }

    /// Recognises a format from a file's first JSON object.
    pub fn detect(first: &Value) -> Option<Format> {
        let obj = first.as_object()?;
        let ty = obj.get("type").and_then(Value::as_str);
        if obj.contains_key("payload")
            && matches!(
                ty,
                Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
            )
        {
            return Some(Format::Codex);
        }
        let claude_keys = obj.contains_key("parentUuid") || obj.contains_key("sessionId");
        let claude_types = matches!(ty, Some("summary" | "file-history-snapshot" | "queue-operation"));
        (claude_keys || claude_types).then_some(Format::ClaudeCode)
    }
}

/// One line of an imported file: its number, text (without the `\n`) and,
/// when it parsed, its value.
#[derive(Debug)]
pub(crate) struct Line {
    pub number: u64,
    pub text: String,
    pub value: Option<Value>,
}

impl Line {
    /// The line as a JSON object, if it is one.
    pub fn object(&self) -> Option<&Map<String, Value>> {
        self.value.as_ref().and_then(Value::as_object)
    }

    /// A string field of the object.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.object()?.get(key)?.as_str()
    }
}

/// A file split on `\n` (only), each line decoded and parsed once.
pub(crate) struct Lines {
    pub lines: Vec<Line>,
    /// Lines that are not JSON objects, with why (blank lines have no reason).
    pub unparsed: Vec<(u64, Option<Skipped>)>,
    pub replaced_utf8: Vec<u64>,
    pub final_newline: bool,
}

impl Lines {
    /// Splits and parses `bytes`. Strict mode fails at the first bad line.
    pub(crate) fn parse(bytes: &[u8], path: &Path, mode: Mode) -> Result<Lines, ReadError> {
        let final_newline = bytes.last() == Some(&b'\n');
        let body = if final_newline { &bytes[..bytes.len() - 1] } else { bytes };
        let mut out =
            Lines { lines: Vec::new(), unparsed: Vec::new(), replaced_utf8: Vec::new(), final_newline };
        if bytes.is_empty() {
            return Ok(out);
        }
        let mut offset = 0u64;
        for (i, raw) in body.split(|b| *b == b'\n').enumerate() {
            let number = i as u64 + 1;
            let text = match std::str::from_utf8(raw) {
                Ok(t) => t.to_owned(),
                Err(err) => {
                    if mode == Mode::Strict {
                        let column = String::from_utf8_lossy(&raw[..err.valid_up_to()]).chars().count() + 1;
                        return Err(ReadError::Malformed {
                            path: path.to_owned(),
                            line: number,
                            column,
                            reason: "invalid UTF-8".to_owned(),
                        });
                    }
                    out.replaced_utf8.push(number);
                    String::from_utf8_lossy(raw).into_owned()
                }
            };
            let line_offset = offset;
            offset += raw.len() as u64 + 1;
            if text.trim().is_empty() {
                out.unparsed.push((number, None));
                out.lines.push(Line { number, text, value: None });
                continue;
            }
            let parsed = serde_json::from_str::<Value>(&text);
            let error = match &parsed {
                Ok(Value::Object(_)) => None,
                Ok(_) => Some((1, "not a JSON object".to_owned())),
                Err(e) => {
                    let (column, reason) = json_error(e);
                    Some((column, format!("invalid JSON: {reason}")))
                }
            };
            if let Some((column, reason)) = error {
                if mode == Mode::Strict {
                    return Err(ReadError::Malformed { path: path.to_owned(), line: number, column, reason });
                }
                let skipped = Skipped { line: number, offset: line_offset, column: Some(column), reason };
                out.unparsed.push((number, Some(skipped)));
                out.lines.push(Line { number, text, value: None });
                continue;
            }
            out.lines.push(Line { number, text, value: parsed.ok() });
        }
        Ok(out)
    }
}

/// Where an entry came from: the lines it carries (or, for a second entry of
/// one line, which part it is).
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// Line numbers, in order.
    pub lines: Vec<u64>,
    /// 0: the entry carries the lines' text; k ≥ 1: the k-th further entry of the line.
    pub part: u32,
}

/// An entry being built: its Pi fields in Pi's key order, and its source.
#[derive(Debug)]
pub(crate) struct Pending {
    pub fields: Map<String, Value>,
    pub source: Source,
}

impl Pending {
    /// The entry's id.
    pub fn id(&self) -> Option<&str> {
        self.fields.get("id").and_then(Value::as_str)
    }
}

/// A line embedded in a `source.records` array: verbatim when it is exactly
/// one JSON object (it parsed as one, and nothing surrounds the braces), else
/// as a JSON string of its text.
fn record(line: &Line) -> Cow<'_, str> {
    let text = line.text.as_str();
    if line.value.as_ref().is_some_and(Value::is_object) && text.starts_with('{') && text.ends_with('}') {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(serde_json::to_string(text).unwrap_or_default())
    }
}

/// Writes `fields` as `JSON.stringify` would, then appends the `source` field.
fn with_source<'l>(
    fields: Map<String, Value>,
    format: Format,
    source: &Source,
    line_of: &dyn Fn(u64) -> Option<&'l Line>,
    extra: Option<&Map<String, Value>>,
) -> Result<String, LineError> {
    let empty = fields.is_empty();
    let mut out = json::to_js_string(&Value::Object(fields)).map_err(|e| line_error(&e))?;
    out.pop(); // the closing brace
    if !empty {
        out.push(',');
    }
    out.push_str(r#""source":{"format":""#);
    out.push_str(format.tag());
    out.push('"');
    if let Some(extra) = extra {
        for (k, v) in extra {
            out.push(',');
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push(':');
            out.push_str(&json::to_js_string(v).map_err(|e| line_error(&e))?);
        }
    }
    out.push_str(",\"lines\":[");
    for (i, n) in source.lines.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&n.to_string());
    }
    out.push(']');
    if source.part == 0 {
        out.push_str(",\"records\":[");
        for (i, n) in source.lines.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match line_of(*n) {
                Some(line) => out.push_str(&record(line)),
                None => out.push_str("\"\""),
            }
        }
        out.push(']');
    } else {
        out.push_str(&format!(",\"part\":{}", source.part));
    }
    out.push_str("}}");
    Ok(out)
}

/// What a mapper produced: the header fields and the entries, in order.
#[derive(Debug)]
pub(crate) struct Mapped {
    /// The header's Pi fields (`type`, `version`, `id`, `timestamp`, `cwd`).
    pub header: Map<String, Value>,
    /// Lines the header carries (Codex's `session_meta`).
    pub header_lines: Vec<u64>,
    /// Tool-specific file facts for the header's `source` (format version …).
    pub header_extra: Map<String, Value>,
    /// The entries.
    pub entries: Vec<Pending>,
}

/// Maps a whole file's text to a transcript (pure; `path` only names the file
/// in errors, `fallback_id` is the session id when the file names none).
pub fn map_bytes(
    bytes: &[u8],
    format: Format,
    path: &Path,
    mode: Mode,
    fallback_id: &str,
) -> Result<Loaded, ReadError> {
    let lines = Lines::parse(bytes, path, mode)?;
    let mapped = match format {
        Format::ClaudeCode => claude::map(&lines, fallback_id),
        Format::Codex => codex::map(&lines, fallback_id),
    };
    assemble(format, &lines, mapped, path)
}

/// Turns a mapper's result into a [`Loaded`] transcript.
fn assemble(format: Format, lines: &Lines, mapped: Mapped, path: &Path) -> Result<Loaded, ReadError> {
    // Lines are numbered from 1 in order.
    let line_of = |n: u64| lines.lines.get((n as usize).wrapping_sub(1)).filter(|l| l.number == n);
    let text_of = |n: u64| line_of(n).map_or("", |l| l.text.as_str());
    let migration = |source: LineError| ReadError::Migration { path: path.to_owned(), source };
    let mut extra = mapped.header_extra;
    extra.insert("finalNewline".to_owned(), Value::Bool(lines.final_newline));
    if !lines.unparsed.is_empty() {
        let unmapped: Vec<Value> =
            lines.unparsed.iter().map(|(n, _)| serde_json::json!({"line": n, "text": text_of(*n)})).collect();
        extra.insert("unmapped".to_owned(), Value::Array(unmapped));
    }
    let header_source = Source { lines: mapped.header_lines.clone(), part: 0 };
    let header_text =
        with_source(mapped.header, format, &header_source, &line_of, Some(&extra)).map_err(migration)?;
    let header = Entry::parse_owned(header_text.into_boxed_str()).map_err(migration)?;
    let mut entries = Vec::with_capacity(mapped.entries.len());
    let mut numbers = Vec::with_capacity(mapped.entries.len() + 1);
    numbers.push(mapped.header_lines.first().copied().unwrap_or(0));
    for pending in mapped.entries {
        numbers.push(pending.source.lines.first().copied().unwrap_or(0));
        let text = with_source(pending.fields, format, &pending.source, &line_of, None).map_err(migration)?;
        entries.push(Entry::parse_owned(text.into_boxed_str()).map_err(migration)?);
    }
    let transcript = Transcript::from_objects(header, entries).map_err(migration)?;
    let skipped = lines.unparsed.iter().filter_map(|(_, s)| s.clone()).collect();
    Ok(Loaded { transcript, lines: numbers, skipped, replaced_utf8: lines.replaced_utf8.clone() })
}

/// Reads `path` as a Claude Code or Codex session if its content says it is
/// one; `Ok(None)` when it is neither (the caller's own error stands).
pub fn load_foreign(path: &Path, mode: Mode) -> Result<Option<(Loaded, Format)>, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_owned(), source })?;
    load_foreign_bytes(&bytes, path, mode)
}

/// [`load_foreign`] on bytes already read (a pipe can be read once only),
/// named `path` in errors.
pub fn load_foreign_bytes(
    bytes: &[u8],
    path: &Path,
    mode: Mode,
) -> Result<Option<(Loaded, Format)>, ReadError> {
    // Detection only needs the first object; it is cheap to parse leniently.
    let Some(format) = sniff(bytes) else { return Ok(None) };
    let stem = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = stem.strip_suffix(".jsonl").unwrap_or(&stem).to_owned();
    map_bytes(bytes, format, path, mode, &stem).map(|loaded| Some((loaded, format)))
}

/// The format of a file from its first JSON object (blank and unparseable
/// lines before it are passed over, as a torn or damaged first line should not
/// hide the format).
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    bytes
        .split(|b| *b == b'\n')
        .take(64)
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .find(Value::is_object)
        .and_then(|v| Format::detect(&v))
}

/// Why [`original_text`] could not rebuild a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundTripError {
    /// The transcript was not made by an import adapter.
    #[error("not an imported transcript (the header has no `source`)")]
    NotImported,
    /// A line number is missing or carried twice.
    #[error("line {0} is missing or carried twice")]
    Lines(u64),
    /// A `source` field does not have the documented shape.
    #[error("entry {0}: malformed `source`")]
    Malformed(String),
}

#[derive(Deserialize)]
struct SourceWire<'a> {
    #[serde(default)]
    lines: Vec<u64>,
    #[serde(default, borrow)]
    records: Option<Vec<&'a RawValue>>,
    #[serde(default, rename = "finalNewline")]
    final_newline: Option<bool>,
    #[serde(default)]
    unmapped: Vec<UnmappedWire>,
}

#[derive(Deserialize)]
struct UnmappedWire {
    line: u64,
    text: String,
}

#[derive(Deserialize)]
struct EntryWire<'a> {
    #[serde(default, borrow)]
    source: Option<SourceWire<'a>>,
}

/// The original file, rebuilt from the lines an imported transcript carries:
/// every line in order, `\n` between them, and the final newline if the file
/// had one. Byte-identical to the file for valid UTF-8 input.
pub fn original_text(transcript: &Transcript) -> Result<String, RoundTripError> {
    let mut lines: BTreeMap<u64, Cow<'_, str>> = BTreeMap::new();
    let mut final_newline = None;
    for entry in std::iter::once(&transcript.header).chain(&transcript.entries) {
        let name = || entry.id.clone().unwrap_or_else(|| "(header)".to_owned());
        let wire: EntryWire<'_> =
            serde_json::from_str(entry.raw()).map_err(|_| RoundTripError::Malformed(name()))?;
        let Some(source) = wire.source else {
            if std::ptr::eq(entry, &transcript.header) {
                return Err(RoundTripError::NotImported);
            }
            return Err(RoundTripError::Malformed(name()));
        };
        if source.final_newline.is_some() {
            final_newline = source.final_newline;
        }
        for u in source.unmapped {
            if lines.insert(u.line, Cow::Owned(u.text)).is_some() {
                return Err(RoundTripError::Lines(u.line));
            }
        }
        let Some(records) = source.records else { continue };
        if records.len() != source.lines.len() {
            return Err(RoundTripError::Malformed(name()));
        }
        for (n, r) in source.lines.iter().zip(records) {
            let text = if r.get().starts_with('"') {
                Cow::Owned(
                    serde_json::from_str::<String>(r.get()).map_err(|_| RoundTripError::Malformed(name()))?,
                )
            } else {
                Cow::Borrowed(r.get())
            };
            if lines.insert(*n, text).is_some() {
                return Err(RoundTripError::Lines(*n));
            }
        }
    }
    let Some(final_newline) = final_newline else { return Err(RoundTripError::NotImported) };
    let mut out = String::new();
    for (i, (n, text)) in lines.iter().enumerate() {
        if *n != i as u64 + 1 {
            return Err(RoundTripError::Lines(i as u64 + 1));
        }
        if i > 0 {
            out.push('\n');
        }
        out.push_str(text);
    }
    if final_newline {
        out.push('\n');
    }
    Ok(out)
}

/// serde_json's column and reason (without its " at line L column C").
fn json_error(err: &serde_json::Error) -> (usize, String) {
    let reason = err.to_string();
    let reason = match reason.rfind(" at line ") {
        Some(i) => reason[..i].to_owned(),
        None => reason,
    };
    (err.column(), reason)
}

fn line_error(err: &serde_json::Error) -> LineError {
    let (column, reason) = json_error(err);
    LineError::Json { column, reason }
}

/// An ISO time as Unix milliseconds (`Date.parse`), when it parses.
pub(crate) fn ms(iso: Option<&str>) -> Option<i64> {
    iso?.parse::<jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}

/// Inserts `key` when `value` is not null.
pub(crate) fn put(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !value.is_null() {
        map.insert(key.to_owned(), value);
    }
}
