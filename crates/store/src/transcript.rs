//! Transcripts on disk: one function that turns a FILE argument into a
//! loaded transcript ([`load_transcript`]), and the write path
//! ([`TranscriptWriter`]): appends under the file's lock, each entry folded
//! into the in-memory transcript and its token counters as it is written.
//!
//! The path of one transcript entry written: built by `sessionlog-events`
//! (`write::message`, `write::compaction`, …, with an id from
//! [`TranscriptWriter::fresh_id`] and the current leaf as parent) →
//! [`TranscriptWriter::append`] writes its line durably under the lock →
//! pushes it onto the in-memory transcript → folds it into the counters
//! (incrementally when it continues the current path) → the caller records
//! changed counters in the store ([`crate::SessionWriter`] does both).
//!
//! A transcript inside OpenClaw's SQLite store is read-only everywhere but
//! in [`TranscriptWriter::open_in_database`], the live loop's storage: there
//! each append is one immediate transaction of `sessionlog-sqlite-store`'s
//! [`LiveDatabase`], the events numbered after whatever another writer
//! committed (whose events are folded in first, in `seq` order).

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use sessionlog_event_log::import::Format as ImportFormat;
use sessionlog_event_log::{
    self as log, pack, AppendOptions, Appender, FsyncPolicy, Loaded, LockOptions, Mode, PackReader,
    ReadError, Reader, TailRepair,
};
use sessionlog_events::PiRules;
use sessionlog_events::{Entry, EntryKind, Message, Role, Transcript};
use sessionlog_sqlite_store::{AgentDatabase, Error as DbError, LiveDatabase, TranscriptName};
use sessionlog_tokens::{ContextSize, PiEstimator};

use crate::counters::path_counters;
use crate::error::{io_at, StoreError};
use crate::exclusive::Exclusive;

/// The on-disk form a transcript was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Pi/OpenClaw JSONL.
    PiJsonl,
    /// A sessionlog MessagePack segment.
    Segment,
    /// Another agent's session (Claude Code, Codex), mapped to Pi entries; read only.
    Imported(ImportFormat),
    /// A transcript inside OpenClaw's SQLite store; read only.
    Sqlite,
}

impl Format {
    /// The name reports use (`pi-jsonl`, `sessionlog-msgpack`, `claude-code`, `codex-rollout`).
    pub fn name(self) -> &'static str {
        match self {
            Format::PiJsonl => "pi-jsonl",
            Format::Segment => "sessionlog-msgpack",
            Format::Imported(format) => format.name(),
            Format::Sqlite => "openclaw-sqlite",
        }
    }
}

/// A transcript read from a FILE argument.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The transcript and what was skipped on the way.
    pub loaded: Loaded,
    /// What the file was.
    pub format: Format,
}

impl Opened {
    /// The `inspect` document of the transcript read from `path`: format,
    /// versions, session, counts by type and role, leaf, branch points,
    /// leaves, and every line skipped or repaired on the way.
    pub fn report(&self, path: &Path) -> serde_json::Value {
        let t = &self.loaded.transcript;
        let stats = sessionlog_events::Stats::of(t);
        let counts = |map: &std::collections::BTreeMap<String, usize>| -> serde_json::Value {
            map.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(*v))).collect()
        };
        let skipped: Vec<serde_json::Value> = self
            .loaded
            .skipped
            .iter()
            .map(|s| serde_json::json!({"line": s.line, "offset": s.offset, "column": s.column, "reason": s.reason}))
            .collect();
        serde_json::json!({
            "file": path.display().to_string(),
            "format": self.format.name(),
            "version": t.original_version.map_or(serde_json::Value::from(1), sessionlog_events::json::js_number),
            "currentVersion": 3,
            "migrated": t.migrated,
            "sessionId": t.session_id(),
            "cwd": t.header.header().and_then(|h| h.cwd.clone()),
            "sessionName": t.session_name(),
            "entryCount": stats.entry_count,
            "byType": counts(&stats.by_type),
            "byRole": counts(&stats.by_role),
            "leafId": t.default_leaf().and_then(|e| e.id.clone()),
            "branchPoints": stats.branch_points,
            "leaves": stats.leaves,
            "entriesWithoutId": stats.without_id,
            "skippedLines": skipped,
            "invalidUtf8Lines": self.loaded.replaced_utf8,
        })
    }
}

/// A JSONL transcript as Pi opens it: read, migrated in memory, and the
/// bytes Pi leaves on disk afterwards.
#[derive(Debug, Clone)]
pub struct OpenedAsPi {
    /// The transcript and what was skipped.
    pub loaded: Loaded,
    /// The file after opening: rewritten when migration changed it, else as it was.
    pub bytes: Vec<u8>,
    /// Whether opening rewrites the file.
    pub rewritten: bool,
}

/// Opens `path` as Pi does (a version 1 or 2 file is rewritten with every
/// line re-encoded; here only in memory — the file is never touched). A
/// Claude Code or Codex session gives its mapped entries.
pub fn open_as_pi(path: &Path, mode: Mode) -> Result<OpenedAsPi, StoreError> {
    if let Some(name) = database_transcript(path) {
        // OpenClaw reads a database transcript as it is: nothing is rewritten.
        let bytes = AgentDatabase::open(&name.database)?.transcript_bytes(&name.session_id)?;
        let loaded = log::load_from(Reader::new(bytes.as_slice(), path, mode))?;
        return Ok(OpenedAsPi { loaded, bytes, rewritten: false });
    }
    let original = fs::read(path).map_err(io_at(path))?;
    let loaded = match log::load_from(Reader::new(original.as_slice(), path, mode)) {
        Ok(loaded) => loaded,
        // From the bytes read, not the path again: a pipe gives them once.
        Err(ReadError::NoHeader { .. }) => load_bytes(&original, path, mode)?.loaded,
        Err(err) => return Err(err.into()),
    };
    let imported = loaded.transcript.header.field_value("source").is_some();
    let mut rewritten = Vec::new();
    if loaded.transcript.migrated || imported {
        loaded.transcript.write_jsonl(&mut rewritten);
    }
    let changed = (loaded.transcript.migrated || imported) && rewritten != original;
    Ok(OpenedAsPi { loaded, bytes: if changed { rewritten } else { original }, rewritten: changed })
}

/// Whether `path` is a sessionlog MessagePack segment (by its magic bytes).
pub fn is_segment(path: &Path) -> Result<bool, StoreError> {
    let mut magic = [0u8; 8];
    let mut file = File::open(path).map_err(io_at(path))?;
    let n = file.read(&mut magic).map_err(io_at(path))?;
    Ok(n == magic.len() && &magic == pack::MAGIC)
}

/// `…/openclaw-agent.sqlite#<sessionId>`: a transcript inside OpenClaw's
/// SQLite store, when `path` names no file itself.
pub fn database_transcript(path: &Path) -> Option<TranscriptName> {
    if path.exists() {
        return None;
    }
    TranscriptName::parse(path.to_str()?)
}

/// Reads a transcript inside an agent database, opened read-only, as the
/// JSONL bytes its rows hold (one snapshot), named `path` in errors.
fn load_from_database(name: &TranscriptName, path: &Path, mode: Mode) -> Result<Loaded, StoreError> {
    let db = AgentDatabase::open(&name.database)?;
    let rows = db.transcript(&name.session_id)?;
    match log::load_from(Reader::new(rows, path, mode)) {
        Ok(loaded) => Ok(loaded),
        // A row that cannot be read reaches the reader as an I/O error; give its own.
        Err(ReadError::Io { path, source }) => match source.downcast::<DbError>() {
            Ok(inner) => Err(inner.into()),
            Err(source) => Err(ReadError::Io { path, source }.into()),
        },
        Err(err) => Err(err.into()),
    }
}

/// Reads a FILE argument as a transcript: Pi/OpenClaw JSONL or a MessagePack
/// segment, migrated to v3 in memory, a transcript inside OpenClaw's SQLite
/// store (`<path>/openclaw-agent.sqlite#<sessionId>`, opened read-only), or
/// a Claude Code or Codex session (recognised by content) mapped to Pi
/// entries by `event-log`'s import.
pub fn load_transcript(path: &Path, mode: Mode) -> Result<Opened, StoreError> {
    if let Some(name) = database_transcript(path) {
        let loaded = load_from_database(&name, path, mode)?;
        return Ok(Opened { loaded, format: Format::Sqlite });
    }
    if let Some(bytes) = read_once(path)? {
        return load_bytes(&bytes, path, mode);
    }
    if is_segment(path)? {
        let text = unpack(path)?;
        let loaded = log::load_from(Reader::new(text.as_slice(), path, mode))?;
        return Ok(Opened { loaded, format: Format::Segment });
    }
    match log::load(path, mode) {
        Ok(loaded) => Ok(Opened { loaded, format: Format::PiJsonl }),
        // Not a Pi transcript: a Claude Code or Codex session, recognised by content.
        Err(err @ ReadError::NoHeader { .. }) => match log::import::load_foreign(path, mode)? {
            Some((loaded, format)) => Ok(Opened { loaded, format: Format::Imported(format) }),
            None => Err(err.into()),
        },
        Err(err) => Err(err.into()),
    }
}

/// The whole content of a FILE argument that can be read once only (a pipe,
/// `/dev/stdin`, a FIFO, a character device: anything but a regular file
/// or a folder), so that telling its format does not eat the bytes the
/// reader needs; `None` for a regular file, which is opened by name.
fn read_once(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => fs::read(path).map(Some).map_err(io_at(path)),
        _ => Ok(None),
    }
}

/// [`load_transcript`] on bytes already read, named `path` in errors: a
/// segment by its magic bytes, Pi/OpenClaw JSONL, or a Claude Code or Codex
/// session recognised by content.
fn load_bytes(bytes: &[u8], path: &Path, mode: Mode) -> Result<Opened, StoreError> {
    if bytes.starts_with(pack::MAGIC) {
        let text = unpack_from(bytes, path)?;
        let loaded = log::load_from(Reader::new(text.as_slice(), path, mode))?;
        return Ok(Opened { loaded, format: Format::Segment });
    }
    match log::load_from(Reader::new(bytes, path, mode)) {
        Ok(loaded) => Ok(Opened { loaded, format: Format::PiJsonl }),
        Err(err @ ReadError::NoHeader { .. }) => match log::import::load_foreign_bytes(bytes, path, mode)? {
            Some((loaded, format)) => Ok(Opened { loaded, format: Format::Imported(format) }),
            None => Err(err.into()),
        },
        Err(err) => Err(err.into()),
    }
}

/// The refusal of a write to a transcript inside OpenClaw's database.
fn read_only(name: &TranscriptName) -> StoreError {
    StoreError::InDatabase {
        name: name.to_string(),
        what: "a transcript",
        hint: "a dry run shows what would be appended; `sessionlog import` makes a copy sessionlog can write",
    }
}

/// The bytes of a FILE argument that names a JSONL file (`None` for a
/// MessagePack segment or a transcript in OpenClaw's SQLite store, which
/// only [`load_transcript`] reads): for readers that parse the text
/// themselves, such as `context::fast`, and fall back to [`load_transcript`].
pub fn read_jsonl(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    if database_transcript(path).is_some() || is_segment(path)? {
        return Ok(None);
    }
    fs::read(path).map(Some).map_err(io_at(path))
}

/// A segment's records as JSONL bytes (one line per record).
pub fn unpack(path: &Path) -> Result<Vec<u8>, StoreError> {
    let file = File::open(path).map_err(io_at(path))?;
    unpack_from(BufReader::new(file), path)
}

/// A segment's records, read from `source`, as JSONL bytes; `path` names it in errors.
fn unpack_from(source: impl BufRead, path: &Path) -> Result<Vec<u8>, StoreError> {
    let pack_err = |source| StoreError::Pack { path: path.to_owned(), source };
    let reader = PackReader::new(source).map_err(pack_err)?;
    let mut buf = Vec::new();
    for line in reader {
        buf.extend_from_slice(
            line.map_err(|source| StoreError::Pack { path: path.to_owned(), source })?.as_bytes(),
        );
        buf.push(b'\n');
    }
    Ok(buf)
}

/// What [`pack()`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// Records written.
    pub records: u64,
    /// Lines skipped (lenient mode), with why.
    pub skipped: Vec<log::Skipped>,
}

/// Writes the transcript `path` as a MessagePack segment at `output`,
/// streamed into a temporary file beside it and renamed over it when
/// complete; strict mode refuses a line Pi would drop.
pub fn pack(path: &Path, output: &Path, mode: Mode) -> Result<Packed, StoreError> {
    let mut reader = Reader::open(path, mode)?;
    let (tmp, file) = sessionlog_event_log::create_temp_beside(output, "tmp").map_err(io_at(output))?;
    let result: Result<u64, StoreError> = (|| {
        let pack_err = |source| StoreError::Pack { path: output.to_owned(), source };
        let mut writer = log::PackWriter::new(std::io::BufWriter::new(file)).map_err(pack_err)?;
        let mut records = 0u64;
        for record in reader.by_ref() {
            let record = record?;
            writer
                .push_json(record.entry.raw())
                .map_err(|source| StoreError::Pack { path: path.to_owned(), source })?;
            records += 1;
        }
        let file =
            writer.finish().map_err(pack_err)?.into_inner().map_err(|e| io_at(&tmp)(e.into_error()))?;
        file.sync_all().map_err(io_at(&tmp))?;
        fs::rename(&tmp, output).map_err(io_at(output))?;
        Ok(records)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(Packed { records: result?, skipped: reader.skipped().to_vec() })
}

/// What [`append_jsonl`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendReport {
    /// Lines appended.
    pub appended: usize,
    /// What opening did to a torn tail.
    pub repair: Option<TailRepair>,
}

/// Appends the JSONL lines of `input` to `path` (created if missing), `batch`
/// lines per durable write, under the file's lock. Blank lines are skipped; a
/// line that is not JSON stops the append: earlier batches stay written, and
/// nothing of the batch holding the bad line is.
pub fn append_jsonl(
    path: &Path,
    input: impl BufRead,
    options: AppendOptions,
    batch: usize,
) -> Result<AppendReport, StoreError> {
    append_jsonl_acked(path, input, options, batch, &mut |_| {})
}

/// [`append_jsonl`], calling `written(n)` after each batch is written and
/// synced per `options.fsync`, with `n` the lines appended so far: the
/// acknowledgement that those lines are in the file.
pub fn append_jsonl_acked(
    path: &Path,
    input: impl BufRead,
    options: AppendOptions,
    batch: usize,
    written: &mut dyn FnMut(usize),
) -> Result<AppendReport, StoreError> {
    if let Some(name) = database_transcript(path) {
        return Err(read_only(&name));
    }
    if path.is_file() && is_segment(path)? {
        return Err(StoreError::Segment { path: path.to_owned(), what: "append writes JSONL lines" });
    }
    let mut log = Appender::open(path, options)?;
    let repair = log.tail_repair().cloned();
    let stdin = PathBuf::from("<stdin>");
    let batch = batch.max(1);
    let mut pending: Vec<Entry> = Vec::with_capacity(batch);
    let mut appended = 0;
    for (i, line) in input.split(b'\n').enumerate() {
        let mut line = line.map_err(io_at(&stdin))?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let line = String::from_utf8(line).map_err(|e| {
            let reason = format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to() + 1);
            io_at(format!("<stdin>:{}", i + 1))(std::io::Error::new(std::io::ErrorKind::InvalidData, reason))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = Entry::parse(&line).map_err(|source| StoreError::Line {
            path: stdin.clone(),
            line: i + 1,
            source,
        })?;
        pending.push(entry);
        if pending.len() >= batch {
            log.append_batch(&pending)?;
            appended += pending.len();
            pending.clear();
            written(appended);
        }
    }
    if !pending.is_empty() {
        log.append_batch(&pending)?;
        appended += pending.len();
        written(appended);
    }
    Ok(AppendReport { appended, repair })
}

/// How a transcript is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteOptions {
    /// When to sync (every entry by default: each append is durable when it returns).
    pub fsync: FsyncPolicy,
    /// How long to wait for another writer (OpenClaw: 10 s).
    pub lock: LockOptions,
    /// Which Pi release's rules the counters follow (which usage they trust).
    pub rules: PiRules,
    /// Refuse a transcript that is a symbolic link when opening it for
    /// writing (`O_NOFOLLOW`: the open itself refuses, so a link swapped in
    /// after a check is refused too). The store's session writers set it.
    pub no_follow: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            fsync: FsyncPolicy::EveryEntry,
            lock: LockOptions::default(),
            rules: PiRules::default(),
            no_follow: false,
        }
    }
}

/// The JSONL size (each line and its newline) of the model-visible window
/// of the path to `leaf`, as OpenClaw 2026.9 sizes a transcript in its
/// database for `forceFlushTranscriptBytes` (`readVisibleTranscriptStats`
/// over `session_transcript_active_events`): the entries of the path (the
/// header left out) that go into the context — all but a message marked
/// `excludeFromContext: true` — after the latest compaction or `reset`
/// entry on the path. A compaction counts itself and, of the path from its
/// `firstKeptEntryId` up to it, the `message` entries that go into the
/// context; a reset counts neither itself nor what precedes it but, from its
/// `firstKeptEntryId`, the user and assistant messages and the tool results
/// whose call is among them (OpenClaw pairs calls and results by order as
/// well; a result here needs only its call's id).
pub fn visible_window_bytes(transcript: &Transcript, leaf: Option<usize>) -> u64 {
    let Some(leaf) = leaf else { return 0 };
    let tree = transcript.tree();
    let path: Vec<&Entry> = match tree.path(leaf) {
        Ok(path) => path.into_iter().map(|i| &transcript.entries[i]).collect(),
        Err(_) => return 0,
    };
    let path: Vec<&Entry> = path.into_iter().filter(|e| !matches!(e.kind, EntryKind::Session(_))).collect();
    let size = |e: &Entry| e.raw().len() as u64 + 1;
    let eligible = |e: &Entry| in_context(e);
    let boundary = path.iter().rposition(|e| is_window_boundary(e));
    let Some(at) = boundary else {
        return path.iter().filter(|e| eligible(e)).map(|e| size(e)).sum();
    };
    let after: u64 = path[at + 1..].iter().filter(|e| eligible(e)).map(|e| size(e)).sum();
    let first_kept = match &path[at].kind {
        EntryKind::Compaction(c) => c.first_kept_entry_id.clone(),
        _ => serde_json::from_str::<serde_json::Value>(path[at].raw())
            .ok()
            .and_then(|v| v.get("firstKeptEntryId").and_then(|id| id.as_str().map(str::to_owned))),
    };
    let kept_from = first_kept.and_then(|id| path[..at].iter().position(|e| e.id.as_deref() == Some(&id)));
    let candidates: Vec<&Entry> = match kept_from {
        Some(from) => {
            path[from..at].iter().copied().filter(|e| matches!(e.kind, EntryKind::Message(_))).collect()
        }
        None => Vec::new(),
    };
    if is_reset(path[at]) {
        let calls: HashSet<String> = candidates
            .iter()
            .filter_map(|e| message_of(e))
            .filter(|m| m.role() == Role::Assistant)
            .flat_map(|m| {
                m.blocks()
                    .iter()
                    .filter(|b| b.kind.as_deref() == Some("toolCall"))
                    .filter_map(|b| b.id.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        let kept = candidates.iter().filter(|e| {
            message_of(e).is_some_and(|m| match m.role() {
                Role::User | Role::Assistant => true,
                Role::ToolResult => m.tool_call_id.as_ref().is_some_and(|id| calls.contains(id)),
                _ => false,
            })
        });
        return kept.map(|e| size(e)).sum::<u64>() + after;
    }
    let kept: u64 = candidates.iter().filter(|e| eligible(e)).map(|e| size(e)).sum();
    size(path[at]) + kept + after
}

/// A `reset` entry (OpenClaw 2026.9; an unknown type to Pi).
fn is_reset(e: &Entry) -> bool {
    matches!(&e.kind, EntryKind::Unknown { .. }) && e.type_name() == Some("reset")
}

/// An entry after which the visible window starts again.
fn is_window_boundary(e: &Entry) -> bool {
    matches!(e.kind, EntryKind::Compaction(_)) || is_reset(e)
}

/// Whether OpenClaw counts the entry as going into the context: all but a
/// message marked `excludeFromContext: true`.
fn in_context(e: &Entry) -> bool {
    match &e.kind {
        EntryKind::Message(m) => m.exclude_from_context != Some(true),
        EntryKind::Session(_) => false,
        _ => true,
    }
}

fn message_of(e: &Entry) -> Option<&Message> {
    match &e.kind {
        EntryKind::Message(m) => Some(m),
        _ => None,
    }
}

/// Where a [`TranscriptWriter`] appends.
enum Sink {
    /// A JSONL file, under its lock.
    File(Appender),
    /// A transcript inside an agent database.
    Database { db: Box<LiveDatabase>, session_id: String, next_seq: i64 },
}

/// A transcript open for writing: its lock, the transcript as it stands, the
/// ids it holds and its token counters along the current path.
pub struct TranscriptWriter {
    path: PathBuf,
    log: Sink,
    transcript: Transcript,
    ids: HashSet<String>,
    leaf: Option<usize>,
    counters: ContextSize,
    /// The entries' JSONL size (each line and its newline).
    jsonl_len: u64,
    /// In a database: [`visible_window_bytes`] of the current path, kept
    /// as entries are folded (added to while the path continues, computed
    /// again at a branch, a compaction or a reset).
    window_len: u64,
    _claim: Exclusive,
}

impl std::fmt::Debug for TranscriptWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptWriter")
            .field("path", &self.path)
            .field("entries", &self.transcript.entries.len())
            .finish()
    }
}

impl TranscriptWriter {
    /// Opens an existing JSONL transcript: it is read first (what is not a
    /// transcript is refused untouched, before the lock is taken or the tail
    /// looked at), then locked, its torn tail repaired, and read again under
    /// the lock, so what is appended is a child of the leaf it shows.
    pub fn open(path: &Path, options: WriteOptions) -> Result<TranscriptWriter, StoreError> {
        if let Some(name) = database_transcript(path) {
            return Err(read_only(&name));
        }
        if let (_, Format::Imported(format)) = TranscriptWriter::peek_format(path)? {
            return Err(StoreError::ReadOnly { path: path.to_owned(), format: format.name() });
        }
        let claim = Exclusive::acquire(path, options.lock.timeout)?;
        let log = Appender::open(
            path,
            AppendOptions { fsync: options.fsync, lock: options.lock, no_follow: options.no_follow },
        )?;
        let transcript = log::load(path, Mode::Lenient)?.transcript;
        let counters = path_counters(&transcript, options.rules, &PiEstimator)
            .map_err(|source| StoreError::Cycle { path: path.to_owned(), source })?;
        Ok(TranscriptWriter::new(path, Sink::File(log), transcript, counters, claim))
    }

    /// Opens the transcript `name` inside an agent database for writing (the
    /// database created for `agent_id` if missing), starting it with
    /// `header` when it has no events yet. Its session entry must be in the
    /// database already (that gives it its window). Another writer of this
    /// process holding the same name is waited for, then refused; another
    /// process's appends are serialised with ours by SQLite.
    pub fn open_in_database(
        name: &TranscriptName,
        agent_id: &str,
        header: &Entry,
        options: WriteOptions,
        now_ms: i64,
    ) -> Result<TranscriptWriter, StoreError> {
        let path = PathBuf::from(name.to_string());
        let claim = Exclusive::acquire(&path, options.lock.timeout)?;
        let mut db = LiveDatabase::open(&name.database, agent_id, now_ms)?;
        let mut snapshot = db.reader().transcript_snapshot(&name.session_id)?;
        if snapshot.0.is_empty() {
            // A new transcript: its header first, unless another writer
            // started it meanwhile (then theirs is the header); read back
            // with whatever the other writer put there.
            db.start(&name.session_id, header.raw(), now_ms)?;
            snapshot = db.reader().transcript_snapshot(&name.session_id)?;
        }
        let (bytes, last) = snapshot;
        let transcript = log::load_from(Reader::new(bytes.as_slice(), &path, Mode::Lenient))?.transcript;
        let counters = path_counters(&transcript, options.rules, &PiEstimator)
            .map_err(|source| StoreError::Cycle { path: path.clone(), source })?;
        let next_seq = last.map_or(0, |s| s + 1);
        let sink = Sink::Database { db: Box::new(db), session_id: name.session_id.clone(), next_seq };
        Ok(TranscriptWriter::new(&path, sink, transcript, counters, claim))
    }

    /// Reads the transcript [`TranscriptWriter::open`] would write to,
    /// without locking it (a dry run): refused when it is missing, a
    /// MessagePack segment, or not a transcript. A Claude Code or Codex
    /// session reads (mapped) here, but `open` refuses to write it.
    pub fn peek(path: &Path) -> Result<Transcript, StoreError> {
        Ok(TranscriptWriter::peek_format(path)?.0)
    }

    fn peek_format(path: &Path) -> Result<(Transcript, Format), StoreError> {
        if let Some(name) = database_transcript(path) {
            return Ok((load_from_database(&name, path, Mode::Lenient)?.transcript, Format::Sqlite));
        }
        if !path.is_file() {
            return Err(StoreError::NoTranscript { path: path.to_owned() });
        }
        if is_segment(path)? {
            return Err(StoreError::Segment {
                path: path.to_owned(),
                what: "transcripts are appended as JSONL",
            });
        }
        let opened = load_transcript(path, Mode::Lenient)?;
        Ok((opened.loaded.transcript, opened.format))
    }

    /// Starts a new transcript at `path` with `header` (see
    /// `sessionlog_events::write::header`); refused when the file exists and
    /// is not empty.
    pub fn create(
        path: &Path,
        header: &Entry,
        options: WriteOptions,
    ) -> Result<TranscriptWriter, StoreError> {
        if let Some(name) = database_transcript(path) {
            return Err(read_only(&name));
        }
        if path.metadata().is_ok_and(|m| m.len() > 0) {
            return Err(StoreError::Exists { path: path.to_owned() });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(io_at(dir))?;
        }
        let claim = Exclusive::acquire(path, options.lock.timeout)?;
        let mut log = Appender::open(
            path,
            AppendOptions { fsync: options.fsync, lock: options.lock, no_follow: options.no_follow },
        )?;
        if log.end()? > 0 {
            return Err(StoreError::Exists { path: path.to_owned() });
        }
        log.append(header)?;
        let transcript = Transcript::from_objects(header.clone(), Vec::new())
            .map_err(|source| StoreError::Line { path: path.to_owned(), line: 1, source })?;
        Ok(TranscriptWriter::new(path, Sink::File(log), transcript, ContextSize::new(options.rules), claim))
    }

    fn new(
        path: &Path,
        log: Sink,
        transcript: Transcript,
        counters: ContextSize,
        claim: Exclusive,
    ) -> TranscriptWriter {
        let ids = transcript.entries.iter().filter_map(|e| e.id.clone()).collect();
        let leaf = transcript.default_leaf_index();
        let jsonl_len = transcript.entries.iter().map(|e| e.raw().len() as u64 + 1).sum();
        let window_len =
            if matches!(log, Sink::Database { .. }) { visible_window_bytes(&transcript, leaf) } else { 0 };
        TranscriptWriter {
            path: path.to_owned(),
            log,
            transcript,
            ids,
            leaf,
            counters,
            jsonl_len,
            window_len,
            _claim: claim,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The transcript as written so far.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    /// What opening did to a torn tail, if anything.
    pub fn tail_repair(&self) -> Option<&TailRepair> {
        match &self.log {
            Sink::File(log) => log.tail_repair(),
            Sink::Database { .. } => None,
        }
    }

    /// The id of the current leaf (the parent of the next entry on this path).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.and_then(|i| self.transcript.entries[i].id.as_deref())
    }

    /// The token counters along the current path.
    pub fn counters(&self) -> &ContextSize {
        &self.counters
    }

    /// The transcript's size in bytes as the memory flush's
    /// `forceFlushTranscriptBytes` reads it: a JSONL file's length on disk;
    /// for a transcript in a database, the size OpenClaw 2026.9 gives it
    /// there — its model-visible window along the current path, see
    /// [`visible_window_bytes`].
    pub fn jsonl_bytes(&self) -> u64 {
        match &self.log {
            Sink::File(_) => fs::metadata(&self.path).map_or(self.jsonl_len, |m| m.len()),
            Sink::Database { .. } => self.window_len,
        }
    }

    /// An entry id for `seed` that no entry of this transcript has.
    pub fn fresh_id(&self, seed: &str) -> String {
        sessionlog_events::ids::entry_id(seed, |id| self.ids.contains(id))
    }

    /// Appends `entries` durably (one batch, synced per the options), then
    /// folds each into the transcript and the counters.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), StoreError> {
        let foreign = match &mut self.log {
            Sink::File(log) => {
                log.append_batch(entries)?;
                Vec::new()
            }
            Sink::Database { db, session_id, next_seq } => {
                let lines: Vec<&str> = entries.iter().map(Entry::raw).collect();
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                let appended = db.append(session_id, &lines, Some(*next_seq), now_ms)?;
                *next_seq = appended.next_seq;
                appended.foreign
            }
        };
        // Another writer's events come first in the transcript.
        for (seq, text) in foreign {
            match Entry::parse(&text) {
                Ok(entry) => self.fold(&entry),
                Err(e) => {
                    tracing::warn!(file = %self.path.display(), seq, "{e}: another writer's event left out")
                }
            }
        }
        for entry in entries {
            self.fold(entry);
        }
        Ok(())
    }

    fn fold(&mut self, entry: &Entry) {
        let index = self.transcript.entries.len();
        self.jsonl_len += entry.raw().len() as u64 + 1;
        let fresh_id = entry.id.as_ref().is_none_or(|id| !self.ids.contains(id));
        self.transcript.entries.push(entry.clone());
        if matches!(entry.kind, EntryKind::Session(_)) {
            return; // a stray header is not part of the tree
        }
        if let Some(id) = &entry.id {
            self.ids.insert(id.clone());
        }
        let leaf_id = self.leaf.and_then(|i| self.transcript.entries[i].id.as_deref());
        let continues = fresh_id
            && match (self.leaf, entry.parent_id.as_deref()) {
                (None, None) => true,
                (Some(_), Some(parent)) => leaf_id == Some(parent),
                _ => false,
            };
        self.leaf = Some(index);
        if matches!(self.log, Sink::Database { .. }) {
            self.window_len = if continues && !is_window_boundary(entry) {
                self.window_len + if in_context(entry) { entry.raw().len() as u64 + 1 } else { 0 }
            } else {
                visible_window_bytes(&self.transcript, self.leaf)
            };
        }
        if continues {
            self.counters.push_entry(entry, &PiEstimator);
            return;
        }
        // A new branch (or an odd tree): fold the new current path again.
        self.counters = match path_counters(&self.transcript, self.counters.rules(), &PiEstimator) {
            Ok(size) => size,
            Err(e) => {
                tracing::warn!(file = %self.path.display(), "{e}: counters reset");
                ContextSize::new(self.counters.rules())
            }
        };
    }
}
