//! What a log file holds: the two streams differ only in their records and
//! their first line, so one reader ([`crate::LogReader`]) and one writer
//! ([`crate::LogWriter`]) serve both, parameterised by a [`LogKind`].
//!
//! * [`TranscriptLog`] — a Pi transcript: [`Entry`] lines, a `session`
//!   header first (Pi sees no entries without one).
//! * [`StoreLog`] — an agent's store log (`events.jsonl`): [`StoreEvent`]
//!   lines, no header; an unknown event type is a malformed line.

use std::borrow::Cow;

use sessionlog_events::{Entry, LineError, StoreEvent};

/// The rules of one stream's files.
pub trait LogKind {
    /// One line's record.
    type Record;

    /// What the file is, for messages (`transcript`, `store log`).
    const NAME: &'static str;

    /// A file without a record is not of this kind (a transcript needs its header).
    const NEEDS_HEADER: bool;

    /// Decodes one line (without its `\n`).
    fn decode(line: Box<str>) -> Result<Self::Record, LineError>;

    /// The line a record is written as (no `\n`).
    fn encode(record: &Self::Record) -> Result<Cow<'_, str>, String>;

    /// Checks the first record of a file: `Err(reason)` when the file cannot
    /// be of this kind. Store logs accept any first record.
    fn check_first(_record: &Self::Record) -> Result<(), String> {
        Ok(())
    }

    /// The version of a first record that names a format newer than this
    /// reader knows (a transcript header above version 3), to refuse the file.
    fn unsupported_version(_record: &Self::Record) -> Option<String> {
        None
    }

    /// Whether a last line is complete (torn-tail repair keeps it and only
    /// adds its `\n`) or a fragment (moved aside). Complete JSON counts as
    /// whole whatever it holds, so a record this version cannot decode is
    /// never moved away as if it were torn.
    fn is_whole(line: &str) -> bool {
        Entry::parse(line).is_ok()
    }
}

/// A Pi transcript: entries, header first.
#[derive(Debug, Clone, Copy, Default)]
pub struct TranscriptLog;

impl LogKind for TranscriptLog {
    type Record = Entry;
    const NAME: &'static str = "transcript";
    const NEEDS_HEADER: bool = true;

    fn decode(line: Box<str>) -> Result<Entry, LineError> {
        Entry::parse_owned(line)
    }

    fn encode(record: &Entry) -> Result<Cow<'_, str>, String> {
        Ok(Cow::Borrowed(record.raw()))
    }

    fn unsupported_version(record: &Entry) -> Option<String> {
        crate::read::unsupported_version(record)
    }

    fn check_first(record: &Entry) -> Result<(), String> {
        if record.is_valid_header() {
            return Ok(());
        }
        Err(match record.type_name() {
            Some("session") => "the session header has no string `id`".to_owned(),
            Some(other) => format!("the first object is a `{other}` entry, not a `session` header"),
            None => "the first object has no `type`; expected a `session` header".to_owned(),
        })
    }
}

/// An agent's store log: store events, no header.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreLog;

impl LogKind for StoreLog {
    type Record = StoreEvent;
    const NAME: &'static str = "store log";
    const NEEDS_HEADER: bool = false;

    fn decode(line: Box<str>) -> Result<StoreEvent, LineError> {
        StoreEvent::parse(&line)
    }

    fn encode(record: &StoreEvent) -> Result<Cow<'_, str>, String> {
        record.to_line().map(Cow::Owned).map_err(|e| e.to_string())
    }
}
