//! Streaming log reader that accepts exactly what Pi accepts.
//!
//! Pi reads a file with `content.trim().split("\n")`, skips blank lines,
//! `JSON.parse`s each remaining line and silently drops the ones that fail; the
//! first surviving object must be a `session` header with a string `id`. This
//! reader reproduces that line by line, holding one line in memory at a time:
//!
//! * the JavaScript `trim()` of the whole text becomes "trim the start of the
//!   first non-blank line, and the end of the last one" (a line that only
//!   parses without its trailing Unicode spaces waits until the reader knows
//!   whether it is the last);
//! * invalid UTF-8 is replaced by U+FFFD as Node's `readFileSync(…, "utf8")`
//!   does, and reported;
//! * [`Mode::Lenient`] skips and records every dropped line; [`Mode::Strict`]
//!   stops at the first one with its line, column and reason.
//!
//! The same reader serves both streams ([`LogReader`] over a [`LogKind`]):
//! a transcript ([`Reader`]) must start with a `session` header, a store log
//! ([`StoreReader`]) has none, and its lines decode as store events.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use sessionlog_events::json::{js_trim, js_trim_end, js_trim_start};
use sessionlog_events::{Entry, LineError, Transcript};

use crate::kind::{LogKind, StoreLog, TranscriptLog};

/// How the reader treats lines Pi would drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Pi-compatible: skip the line and record it in [`Reader::skipped`].
    #[default]
    Lenient,
    /// Fail with [`ReadError::Malformed`] at the first such line.
    Strict,
}

/// A line the reader dropped (lenient mode), with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based line number (lines split on `\n`).
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// 1-based column of the failure, when known.
    pub column: Option<usize>,
    /// Why the line was dropped.
    pub reason: String,
}

/// One record read from a file, with where it came from.
#[derive(Debug, Clone)]
pub struct Record<T = Entry> {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// The parsed record (an entry's raw text is the line without `\n` or trimming).
    pub entry: T,
}

/// Errors from reading a transcript; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: io::Error,
    },
    /// Strict mode: a line Pi would drop.
    #[error("{path}:{line}:{column}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// 1-based column (1 when the whole line is at fault).
        column: usize,
        /// What is wrong.
        reason: String,
    },
    /// The first object is not a session header, so Pi sees no entries.
    #[error("{path}:{}: not a Pi transcript: {reason}", line.map_or("-".to_owned(), |l| l.to_string()))]
    NoHeader {
        /// The file.
        path: PathBuf,
        /// Line of the first object, if there is one.
        line: Option<u64>,
        /// What was found instead.
        reason: String,
    },
    /// The header names a version newer than any Pi writes (above 3): the
    /// file is refused rather than read as if it were version 3.
    #[error(
        "{path}:{line}: unsupported session version {version}: sessionlog reads versions 1 to 3 \
         (Pi 0.58.3 and 1.6.0 write 3) and will not read or append to a newer format"
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Line of the header.
        line: u64,
        /// The version as the header writes it (JavaScript number text).
        version: String,
    },
    /// Migration produced an unreadable entry (a bug, reported rather than hidden).
    #[error("{path}: migration failed: {source}")]
    Migration {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: LineError,
    },
}

struct Pending {
    line: u64,
    offset: u64,
    text: String,
    error: LineError,
}

/// Streaming reader of a log of kind `K`: yields every record in file
/// order (a transcript's header first).
pub struct LogReader<R, K: LogKind = TranscriptLog> {
    inner: R,
    path: PathBuf,
    mode: Mode,
    buf: Vec<u8>,
    line: u64,
    offset: u64,
    seen_content: bool,
    header_checked: bool,
    pending: Option<Pending>,
    skipped: Vec<Skipped>,
    replaced_utf8: Vec<u64>,
    finished: bool,
    kind: std::marker::PhantomData<K>,
}

/// The streaming reader of a transcript.
pub type Reader<R> = LogReader<R, TranscriptLog>;

/// The streaming reader of a store log.
pub type StoreReader<R> = LogReader<R, StoreLog>;

impl<K: LogKind> LogReader<BufReader<File>, K> {
    /// Opens `path` for streaming.
    pub fn open(path: &Path, mode: Mode) -> Result<Self, ReadError> {
        let file = File::open(path).map_err(|source| ReadError::Io { path: path.to_owned(), source })?;
        Ok(LogReader::new(BufReader::with_capacity(1 << 16, file), path, mode))
    }
}

impl<R: BufRead, K: LogKind> LogReader<R, K> {
    /// Wraps a buffered source; `path` names it in errors.
    pub fn new(inner: R, path: &Path, mode: Mode) -> Self {
        LogReader {
            inner,
            path: path.to_owned(),
            mode,
            buf: Vec::new(),
            line: 0,
            offset: 0,
            seen_content: false,
            header_checked: false,
            pending: None,
            skipped: Vec::new(),
            replaced_utf8: Vec::new(),
            finished: false,
            kind: std::marker::PhantomData,
        }
    }

    /// Continues a log already read up to `offset` (the start of line
    /// `line + 1`): line numbers and offsets count on from there, and the
    /// first record is not checked again.
    pub fn resume_at(mut self, line: u64, offset: u64) -> Self {
        self.line = line;
        self.offset = offset;
        self.seen_content = line > 0;
        self.header_checked = line > 0;
        self
    }

    /// Lines dropped so far (lenient mode).
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Line numbers whose invalid UTF-8 was replaced by U+FFFD.
    pub fn replaced_utf8(&self) -> &[u64] {
        &self.replaced_utf8
    }

    fn skip(&mut self, line: u64, offset: u64, error: &LineError) -> Result<(), ReadError> {
        let column = match error {
            LineError::Json { column, .. } => Some(*column),
            LineError::Null => None,
        };
        let reason = error.to_string();
        match self.mode {
            Mode::Strict => Err(ReadError::Malformed {
                path: self.path.clone(),
                line,
                column: column.unwrap_or(1),
                reason: match error {
                    LineError::Json { reason, .. } => reason.clone(),
                    other => other.to_string(),
                },
            }),
            Mode::Lenient => {
                self.skipped.push(Skipped { line, offset, column, reason });
                Ok(())
            }
        }
    }

    fn flush_pending(&mut self, at_eof: bool) -> Result<Option<Record<K::Record>>, ReadError> {
        let Some(p) = self.pending.take() else { return Ok(None) };
        if at_eof {
            // It was the last non-blank line: the whole-text trim applies.
            if let Ok(entry) = K::decode(js_trim_end(&p.text).into()) {
                return Ok(Some(Record { line: p.line, offset: p.offset, entry }));
            }
        }
        self.skip(p.line, p.offset, &p.error)?;
        Ok(None)
    }

    fn check_header(&mut self, record: Record<K::Record>) -> Result<Record<K::Record>, ReadError> {
        self.header_checked = true;
        if let Some(version) = K::unsupported_version(&record.entry) {
            self.finished = true;
            return Err(ReadError::UnsupportedVersion {
                path: self.path.clone(),
                line: record.line,
                version,
            });
        }
        match K::check_first(&record.entry) {
            Ok(()) => Ok(record),
            Err(reason) => {
                self.finished = true;
                Err(ReadError::NoHeader { path: self.path.clone(), line: Some(record.line), reason })
            }
        }
    }

    fn emit(&mut self, record: Record<K::Record>) -> Option<Result<Record<K::Record>, ReadError>> {
        if self.header_checked {
            Some(Ok(record))
        } else {
            Some(self.check_header(record))
        }
    }

    /// The next line (without its `\n`), decoded, and the bytes it took
    /// (0 at the end of the input). A line inside the source's buffer is
    /// decoded from there; one that spans buffers is gathered first.
    fn next_line(&mut self) -> io::Result<(usize, Decoded)> {
        let available = loop {
            match self.inner.fill_buf() {
                Ok(available) => break available,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        if let Some(at) = memchr::memchr(b'\n', available) {
            let decoded = Decoded::of(&available[..at]);
            self.inner.consume(at + 1);
            return Ok((at + 1, decoded));
        }
        // One reused buffer for a line that spans the source's buffers.
        let mut bytes = std::mem::take(&mut self.buf);
        bytes.clear();
        let line = read_line(&mut self.inner, &mut bytes)
            .map(|n| (n, Decoded::of(bytes.strip_suffix(b"\n").unwrap_or(&bytes))));
        self.buf = bytes;
        line
    }

    fn next_record(&mut self) -> Option<Result<Record<K::Record>, ReadError>> {
        loop {
            let (n, decoded) = match self.next_line() {
                Ok(line) => line,
                Err(source) => {
                    self.finished = true;
                    return Some(Err(ReadError::Io { path: self.path.clone(), source }));
                }
            };
            if n == 0 {
                self.finished = true;
                return match self.flush_pending(true) {
                    Ok(Some(record)) => self.emit(record),
                    Ok(None) if !self.header_checked && K::NEEDS_HEADER => Some(Err(ReadError::NoHeader {
                        path: self.path.clone(),
                        line: None,
                        reason: "no JSON object in the file".to_owned(),
                    })),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                };
            }
            self.line += 1;
            let line = self.line;
            let offset = self.offset;
            self.offset += n as u64;
            let text = match decoded {
                Decoded::Text(text) => text,
                Decoded::Lossy { text, column } => {
                    if self.mode == Mode::Strict {
                        self.finished = true;
                        return Some(Err(ReadError::Malformed {
                            path: self.path.clone(),
                            line,
                            column,
                            reason: "invalid UTF-8".to_owned(),
                        }));
                    }
                    self.replaced_utf8.push(line);
                    text
                }
            };
            if js_trim(&text).is_empty() {
                continue;
            }
            // A new non-blank line: a pending line was not the last one.
            if let Err(e) = self.flush_pending(false) {
                self.finished = true;
                return Some(Err(e));
            }
            let text = if self.seen_content { text } else { js_trim_start(&text).to_owned() };
            self.seen_content = true;
            let parsed = if js_trim_end(&text).len() != text.len() {
                // Keep the text: it may parse once known to be the last line.
                K::decode(text.as_str().into()).map_err(|error| (Some(text), error))
            } else {
                K::decode(text.into_boxed_str()).map_err(|error| (None, error))
            };
            match parsed {
                Ok(entry) => return self.emit(Record { line, offset, entry }),
                Err((Some(text), error)) => self.pending = Some(Pending { line, offset, text, error }),
                Err((None, error)) => {
                    if let Err(e) = self.skip(line, offset, &error) {
                        self.finished = true;
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}

/// A line's text: valid UTF-8, or with invalid bytes replaced by U+FFFD
/// (and the 1-based column of the first of them).
enum Decoded {
    Text(String),
    Lossy { text: String, column: usize },
}

impl Decoded {
    fn of(line: &[u8]) -> Decoded {
        match std::str::from_utf8(line) {
            Ok(text) => Decoded::Text(text.to_owned()),
            Err(err) => {
                let valid = err.valid_up_to();
                let column = String::from_utf8_lossy(&line[..valid]).chars().count() + 1;
                Decoded::Lossy { text: String::from_utf8_lossy(line).into_owned(), column }
            }
        }
    }
}

/// Appends the bytes of `inner` up to and including the next `\n` (or to
/// the end) to `out`, as [`BufRead::read_until`] does, searching with the
/// `memchr` crate; the number of bytes read.
fn read_line<R: BufRead>(inner: &mut R, out: &mut Vec<u8>) -> io::Result<usize> {
    let mut read = 0;
    loop {
        let available = match inner.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (done, used) = match memchr::memchr(b'\n', available) {
            Some(at) => (true, at + 1),
            None => (available.is_empty(), available.len()),
        };
        out.extend_from_slice(&available[..used]);
        inner.consume(used);
        read += used;
        if done {
            return Ok(read);
        }
    }
}

impl<R: BufRead, K: LogKind> Iterator for LogReader<R, K> {
    type Item = Result<Record<K::Record>, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        self.next_record()
    }
}

/// The version text of a valid `session` header newer than
/// [`sessionlog_events::CURRENT_VERSION`], or `None` for a readable file.
pub fn unsupported_version(header: &Entry) -> Option<String> {
    let h = header.header().filter(|_| header.is_valid_header())?;
    if !h.is_unsupported_version() {
        return None;
    }
    let raw = header.field_value("version").unwrap_or(serde_json::Value::Null);
    Some(sessionlog_events::json::to_js_string(&raw).unwrap_or_else(|_| raw.to_string()))
}

/// A whole transcript read into memory, with what was dropped on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The migrated transcript.
    pub transcript: Transcript,
    /// Source line of the header and of each object in `transcript.entries`.
    pub lines: Vec<u64>,
    /// Lines dropped (lenient mode).
    pub skipped: Vec<Skipped>,
    /// Lines whose invalid UTF-8 was replaced.
    pub replaced_utf8: Vec<u64>,
}

/// Reads and migrates a whole transcript.
pub fn load(path: &Path, mode: Mode) -> Result<Loaded, ReadError> {
    load_from(Reader::open(path, mode)?)
}

/// Reads and migrates a whole transcript from an open reader.
pub fn load_from<R: BufRead>(mut reader: Reader<R>) -> Result<Loaded, ReadError> {
    let mut header = None;
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for record in reader.by_ref() {
        let record = record?;
        lines.push(record.line);
        if header.is_none() {
            header = Some(record.entry);
        } else {
            entries.push(record.entry);
        }
    }
    let path = reader.path.clone();
    let Some(header) = header else {
        // The reader reports a missing header itself; this is unreachable in practice.
        return Err(ReadError::NoHeader {
            path,
            line: None,
            reason: "no JSON object in the file".to_owned(),
        });
    };
    let transcript =
        Transcript::from_objects(header, entries).map_err(|source| ReadError::Migration { path, source })?;
    Ok(Loaded { transcript, lines, skipped: reader.skipped, replaced_utf8: reader.replaced_utf8 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
    const ENTRY: &str =
        r#"{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"x","label":"y"}"#;

    fn read(text: &str, mode: Mode) -> (Vec<u64>, Vec<u64>, Option<String>) {
        let mut reader = Reader::new(text.as_bytes(), Path::new("t.jsonl"), mode);
        let mut lines = Vec::new();
        let mut error = None;
        for record in reader.by_ref() {
            match record {
                Ok(r) => lines.push(r.line),
                Err(e) => error = Some(e.to_string()),
            }
        }
        (lines, reader.skipped().iter().map(|s| s.line).collect(), error)
    }

    #[test]
    fn blank_lines_bom_and_crlf_are_accepted() {
        let text = format!("\u{FEFF}\n {HEADER}\r\n\n\u{A0}\n{ENTRY}\r\n");
        assert_eq!(read(&text, Mode::Strict), (vec![2, 5], vec![], None));
    }

    #[test]
    fn glued_objects_and_garbage_are_dropped_in_lenient_mode() {
        let text = format!("{HEADER}\n{ENTRY}{ENTRY}\nnot json\nnull\n[1]\n{ENTRY}\n");
        // `[1]` is kept as an entry without type or id, as Pi keeps it.
        assert_eq!(read(&text, Mode::Lenient), (vec![1, 5, 6], vec![2, 3, 4], None));
    }

    #[test]
    fn strict_mode_names_line_and_column() {
        let text = format!("{HEADER}\n{ENTRY}{ENTRY}\n");
        let (_, _, error) = read(&text, Mode::Strict);
        assert_eq!(
            error.as_deref(),
            Some(format!("t.jsonl:2:{}: trailing characters", ENTRY.len() + 1).as_str())
        );
    }

    #[test]
    fn trailing_unicode_space_only_counts_on_the_last_line() {
        let text = format!("{HEADER}\n{ENTRY}\u{A0}\n{ENTRY}\u{3000}\n\n");
        assert_eq!(read(&text, Mode::Lenient), (vec![1, 3], vec![2], None));
    }

    #[test]
    fn a_file_without_header_has_no_entries() {
        let (lines, _, error) = read(&format!("{ENTRY}\n{HEADER}\n"), Mode::Lenient);
        assert!(lines.is_empty());
        assert!(error.unwrap().contains("t.jsonl:1: not a Pi transcript"));
        let (_, _, error) = read("\n \n", Mode::Lenient);
        assert!(error.unwrap().contains("no JSON object"));
    }

    #[test]
    fn a_header_above_version_3_is_refused_in_either_mode() {
        for mode in [Mode::Lenient, Mode::Strict] {
            let text = format!("\n{}\n{ENTRY}\n", HEADER.replace("\"version\":3", "\"version\":4"));
            let (lines, _, error) = read(&text, mode);
            assert!(lines.is_empty(), "no record of a refused file is yielded");
            assert_eq!(
                error.as_deref().and_then(|e| e.split(": sessionlog").next()),
                Some("t.jsonl:2: unsupported session version 4")
            );
        }
        // Version 3 (and the migrated 1 and 2) still read.
        assert_eq!(read(&format!("{HEADER}\n{ENTRY}\n"), Mode::Strict).2, None);
    }

    #[test]
    fn lines_read_alike_whatever_the_source_buffers() {
        let mut bytes =
            format!("\u{FEFF}\n {HEADER}\r\n\n{ENTRY}{ENTRY}\nnull\n{ENTRY}\u{A0}\n").into_bytes();
        bytes.extend_from_slice(b"{\"type\":\"x\",\"id\":\"\xff\xfe\"}\n\n");
        bytes.extend_from_slice(format!("{ENTRY}\u{3000}").as_bytes());
        let summary = |reader: &mut dyn Iterator<Item = Result<Record, ReadError>>| {
            reader
                .map(|r| r.map(|r| (r.line, r.offset, r.entry.raw().to_owned())).map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
        };
        for mode in [Mode::Lenient, Mode::Strict] {
            let mut whole = Reader::new(bytes.as_slice(), Path::new("t"), mode);
            let expected = summary(&mut whole);
            assert!(mode == Mode::Strict || expected.len() >= 3, "{expected:?}");
            for capacity in 1..=40 {
                let source = io::BufReader::with_capacity(capacity, bytes.as_slice());
                let mut reader = Reader::new(source, Path::new("t"), mode);
                assert_eq!(summary(&mut reader), expected, "capacity {capacity}");
                assert_eq!(reader.skipped(), whole.skipped(), "capacity {capacity}");
                assert_eq!(reader.replaced_utf8(), whole.replaced_utf8(), "capacity {capacity}");
            }
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_and_reported() {
        let mut bytes = format!("{HEADER}\n").into_bytes();
        bytes.extend_from_slice(b"{\"type\":\"x\",\"id\":\"\xff\"}\n");
        let mut reader = Reader::new(bytes.as_slice(), Path::new("t"), Mode::Lenient);
        let records: Vec<_> = reader.by_ref().map(Result::unwrap).collect();
        assert_eq!(records[1].entry.id.as_deref(), Some("\u{FFFD}"));
        assert_eq!(reader.replaced_utf8(), &[2]);
        let strict: Vec<_> = Reader::new(bytes.as_slice(), Path::new("t"), Mode::Strict).collect();
        assert!(strict[1].as_ref().unwrap_err().to_string().starts_with("t:2:"));
    }
}
