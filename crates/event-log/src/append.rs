//! Durable, whole-line appends to one log: a transcript ([`Appender`]) or a
//! store log ([`StoreAppender`]), the same writer over a [`LogKind`].
//!
//! * One writer per file: the OpenClaw-compatible lock file ([`FileLock`]) is
//!   held while any [`Appender`] of this process has the file open; threads
//!   of one process share it and are serialised by an in-process mutex.
//! * Every append writes whole lines with one `write` on an `O_APPEND`
//!   handle, then syncs according to [`FsyncPolicy`].
//! * A failed write or sync poisons the file for this process: later appends
//!   fail instead of writing after a hole.
//! * Opening repairs a torn tail first ([`TailRepair`]): a last line that does
//!   not parse is moved to a sibling file and reported, never dropped.
//! * Opening refuses a transcript whose `session` header names a version
//!   newer than any Pi writes ([`AppendError::UnsupportedVersion`]), before
//!   anything is written or repaired.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use sessionlog_events::json::js_trim;
use sessionlog_events::Entry;

use crate::kind::{LogKind, StoreLog, TranscriptLog};
use crate::lock::{FileLock, LockError, LockOptions};

/// When appended data is forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// `fsync` after every entry (each line is durable before the next is written).
    EveryEntry,
    /// Group commit: write a batch in one call, then one `fsync` for it.
    #[default]
    PerBatch,
    /// Never sync (the OS flushes eventually); for scratch data and benchmarks.
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "every-entry" => Ok(FsyncPolicy::EveryEntry),
            "per-batch" => Ok(FsyncPolicy::PerBatch),
            "never" => Ok(FsyncPolicy::Never),
            other => Err(format!("unknown fsync policy `{other}` (every-entry, per-batch, never)")),
        }
    }
}

/// Options for [`Appender::open`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AppendOptions {
    /// When to sync.
    pub fsync: FsyncPolicy,
    /// Lock timing.
    pub lock: LockOptions,
    /// Refuse `path` when it is a symbolic link, by the open itself
    /// (`O_NOFOLLOW`), so a link put in place after any earlier check is
    /// refused too: [`AppendError::Io`] saying so, nothing written.
    pub no_follow: bool,
}

/// What opening for append did to a damaged last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailRepair {
    /// The last line was a complete JSON object missing its `\n`; the `\n` was added.
    Terminated {
        /// 1-based line number of that line.
        line: u64,
    },
    /// The last line did not parse; it was moved to `aside` and cut from the file.
    MovedAside {
        /// 1-based line number of the fragment.
        line: u64,
        /// Byte offset where the fragment started (the new file length).
        offset: u64,
        /// Bytes moved.
        bytes: u64,
        /// The sibling file holding the fragment.
        aside: PathBuf,
    },
}

/// Errors from appending; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The lock could not be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// Opening, repairing, writing or syncing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// An earlier write or sync failed; the file is not written to again by this process.
    #[error("{}: poisoned by an earlier failed write or sync; reopen after checking the file", path.display())]
    Poisoned {
        /// The file.
        path: PathBuf,
    },
    /// The file's `session` header names a version above 3: appending to a
    /// format we do not know could corrupt it, so the file is left untouched.
    #[error(
        "{}:{line}: unsupported session version {version}: sessionlog reads versions 1 to 3 \
         (Pi 0.58.3 and 1.6.0 write 3) and will not read or append to a newer format",
        path.display()
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Line of the header.
        line: u64,
        /// The version as the header writes it.
        version: String,
    },
    /// The entry's text spans several lines and would break the JSONL framing.
    #[error("{}: entry text contains a newline; write entries as single-line JSON", path.display())]
    MultiLine {
        /// The file.
        path: PathBuf,
    },
    /// A record could not be written as a line.
    #[error("{}: cannot encode a record: {reason}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// How a writer forces written data to disk: `File::sync_data`, unless a
/// test puts a fault here ([`LogWriter::with_sync`]).
pub type SyncFn = fn(&File) -> io::Result<()>;

fn sync_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// Per-file state shared by every appender of this process.
struct Shared {
    path: PathBuf,
    write: Mutex<()>,
    poisoned: AtomicBool,
    _lock: FileLock,
}

static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = LazyLock::new(Default::default);

fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A log of kind `K` open for appending, holding its lock.
pub struct LogWriter<K: LogKind = TranscriptLog> {
    shared: Arc<Shared>,
    file: File,
    fsync: FsyncPolicy,
    repair: Option<TailRepair>,
    buf: Vec<u8>,
    sync: SyncFn,
    kind: std::marker::PhantomData<K>,
}

/// A transcript open for appending.
pub type Appender = LogWriter<TranscriptLog>;

/// A store log open for appending.
pub type StoreAppender = LogWriter<StoreLog>;

impl<K: LogKind> std::fmt::Debug for LogWriter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("kind", &K::NAME)
            .field("path", &self.shared.path)
            .field("fsync", &self.fsync)
            .finish()
    }
}

fn canonical(path: &Path) -> io::Result<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    Ok(fs::canonicalize(parent)?.join(name))
}

/// Opens `path` to read and append, created if missing; with `no_follow`, a
/// symbolic link at `path` is refused by the kernel (`O_NOFOLLOW`).
fn open_for_append(path: &Path, no_follow: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).create(true).append(true);
    #[cfg(unix)]
    if no_follow {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    match options.open(path) {
        // Linux says ELOOP for a link under O_NOFOLLOW (the BSDs EMLINK or ELOOP).
        Err(e) if no_follow && path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) => {
            Err(io::Error::new(e.kind(), format!("a symbolic link; not written through ({e})")))
        }
        other => other,
    }
}

impl<K: LogKind> LogWriter<K> {
    /// Opens (creating if missing) `path` for appending: takes the lock,
    /// repairs a torn tail, and positions at the end.
    pub fn open(path: &Path, options: AppendOptions) -> Result<LogWriter<K>, AppendError> {
        let io_err = |source| AppendError::Io { path: path.to_owned(), source };
        let key = canonical(path).map_err(io_err)?;
        let shared = {
            let mut open = lock_ignoring_poison(&OPEN);
            match open.get(&key).and_then(Weak::upgrade) {
                Some(shared) => shared,
                None => {
                    let lock = FileLock::acquire(&key, options.lock)?;
                    let shared = Arc::new(Shared {
                        path: path.to_owned(),
                        write: Mutex::new(()),
                        poisoned: AtomicBool::new(false),
                        _lock: lock,
                    });
                    open.retain(|_, w| w.strong_count() > 0);
                    open.insert(key.clone(), Arc::downgrade(&shared));
                    shared
                }
            }
        };
        let guard = lock_ignoring_poison(&shared.write);
        let mut file = open_for_append(&key, options.no_follow).map_err(io_err)?;
        if let Some((line, version)) = newer_header_version(&mut file).map_err(io_err)? {
            return Err(AppendError::UnsupportedVersion { path: path.to_owned(), line, version });
        }
        let repair = repair_tail(&mut file, &key, K::is_whole).map_err(io_err)?;
        if let Some(repair) = &repair {
            tracing::warn!(file = %path.display(), ?repair, "repaired torn tail");
        }
        drop(guard);
        Ok(LogWriter {
            shared,
            file,
            fsync: options.fsync,
            repair,
            buf: Vec::new(),
            sync: sync_data,
            kind: std::marker::PhantomData,
        })
    }

    /// Replaces how this writer syncs (the fault seam: a test injects `EIO`
    /// or `ENOSPC` here). A failing sync poisons the file like a failing write.
    pub fn with_sync(mut self, sync: SyncFn) -> LogWriter<K> {
        self.sync = sync;
        self
    }

    /// What opening did to a torn tail, if anything.
    pub fn tail_repair(&self) -> Option<&TailRepair> {
        self.repair.as_ref()
    }

    /// The file being appended to.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The file's length: where the next line will start.
    pub fn end(&self) -> Result<u64, AppendError> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|source| AppendError::Io { path: self.shared.path.clone(), source })
    }

    /// Appends one record as one line.
    pub fn append(&mut self, record: &K::Record) -> Result<(), AppendError> {
        self.append_batch(std::slice::from_ref(record))
    }

    /// Appends records as whole lines; with [`FsyncPolicy::PerBatch`] they are
    /// written in one call and synced once (group commit).
    pub fn append_batch(&mut self, records: &[K::Record]) -> Result<(), AppendError> {
        let path = self.shared.path.clone();
        let lines = records
            .iter()
            .map(|r| K::encode(r).map_err(|reason| AppendError::Encode { path: path.clone(), reason }))
            .collect::<Result<Vec<_>, _>>()?;
        if lines.iter().any(|l| l.contains('\n')) {
            return Err(AppendError::MultiLine { path });
        }
        let _guard = lock_ignoring_poison(&self.shared.write);
        if self.shared.poisoned.load(Ordering::SeqCst) {
            return Err(AppendError::Poisoned { path });
        }
        let sync = self.sync;
        let result = match self.fsync {
            FsyncPolicy::EveryEntry => lines.iter().try_for_each(|l| {
                self.buf.clear();
                push_line(&mut self.buf, l);
                self.file.write_all(&self.buf).and_then(|()| sync(&self.file))
            }),
            FsyncPolicy::PerBatch | FsyncPolicy::Never => {
                self.buf.clear();
                lines.iter().for_each(|l| push_line(&mut self.buf, l));
                let written = self.file.write_all(&self.buf);
                match self.fsync {
                    FsyncPolicy::PerBatch => written.and_then(|()| sync(&self.file)),
                    _ => written,
                }
            }
        };
        result.map_err(|source| {
            self.shared.poisoned.store(true, Ordering::SeqCst);
            AppendError::Io { path, source }
        })
    }

    /// Forces everything written so far to disk.
    pub fn sync(&mut self) -> Result<(), AppendError> {
        let _guard = lock_ignoring_poison(&self.shared.write);
        if self.shared.poisoned.load(Ordering::SeqCst) {
            return Err(AppendError::Poisoned { path: self.shared.path.clone() });
        }
        (self.sync)(&self.file).map_err(|source| {
            self.shared.poisoned.store(true, Ordering::SeqCst);
            AppendError::Io { path: self.shared.path.clone(), source }
        })
    }
}

/// How far into a file the header is looked for (Pi 1.6 scans 1 MiB).
const HEADER_SCAN_BYTES: u64 = 1 << 20;

/// The line and version of the file's `session` header when it names a
/// version newer than any Pi writes: the first object that parses, as the
/// reader finds it (blank and malformed lines before it are skipped). A
/// store log's first object is a store event, never such a header.
fn newer_header_version(file: &mut File) -> io::Result<Option<(u64, String)>> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = io::BufReader::new(Read::take(&mut *file, HEADER_SCAN_BYTES));
    let mut line = Vec::new();
    for number in 1u64.. {
        line.clear();
        if io::BufRead::read_until(&mut reader, b'\n', &mut line)? == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let Ok(entry) = Entry::parse(js_trim(&text)) else { continue };
        return Ok(crate::read::unsupported_version(&entry).map(|version| (number, version)));
    }
    Ok(None)
}

fn push_line(buf: &mut Vec<u8>, line: &str) {
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
}

/// Reads backwards from the end to the start of the last line.
fn last_line_start(file: &mut File, search_end: u64) -> io::Result<u64> {
    let mut end = search_end;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk[..n])?;
        if let Some(i) = chunk[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn count_newlines(file: &mut File, upto: u64) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = io::BufReader::with_capacity(1 << 16, Read::take(&mut *file, upto));
    let mut count = 0u64;
    loop {
        let buf = io::BufRead::fill_buf(&mut reader)?;
        if buf.is_empty() {
            return Ok(count);
        }
        count += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let n = buf.len();
        io::BufRead::consume(&mut reader, n);
    }
}

fn line_is_whole(bytes: &[u8], is_whole: fn(&str) -> bool) -> bool {
    let text = String::from_utf8_lossy(bytes);
    sessionlog_events::json::js_trim(&text).is_empty() || is_whole(&text)
}

/// Checks the last line and repairs it if needed. Only a damaged tail costs
/// more than reading the last line (the line count for the report).
fn repair_tail(file: &mut File, path: &Path, is_whole: fn(&str) -> bool) -> io::Result<Option<TailRepair>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    let terminated = last[0] == b'\n';
    let content_end = if terminated { len - 1 } else { len };
    let start = last_line_start(file, content_end)?;
    let mut fragment = vec![0u8; (len - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut fragment)?;
    let body = if terminated { &fragment[..fragment.len() - 1] } else { &fragment[..] };
    let whole = line_is_whole(body, is_whole);
    if terminated && whole {
        return Ok(None);
    }
    let line = count_newlines(file, start)? + 1;
    if whole {
        file.write_all(b"\n")?;
        file.sync_data()?;
        return Ok(Some(TailRepair::Terminated { line }));
    }
    let aside = write_aside(path, &fragment)?;
    file.set_len(start)?;
    file.sync_data()?;
    Ok(Some(TailRepair::MovedAside { line, offset: start, bytes: fragment.len() as u64, aside }))
}

/// A time as OpenClaw writes it into archive and side-file names: ISO 8601
/// with milliseconds and `:` as `-` (`2026-02-17T16-56-06.939Z`); `None` out
/// of range.
pub fn file_stamp(ms: i64) -> Option<String> {
    let t = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(t.strftime("%Y-%m-%dT%H-%M-%S%.3fZ").to_string())
}

/// Writes `bytes` to `<file>.torn.<ISO time with ':' as '-'>` (plus `-N` if taken), durably.
fn write_aside(path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let stamp = file_stamp(jiff::Timestamp::now().as_millisecond()).unwrap_or_default();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for n in 0u32.. {
        let suffix = if n == 0 { String::new() } else { format!("-{n}") };
        let aside = path.with_file_name(format!("{name}.torn.{stamp}{suffix}"));
        match OpenOptions::new().write(true).create_new(true).open(&aside) {
            Ok(mut f) => {
                f.write_all(bytes)?;
                f.sync_all()?;
                if let Some(dir) = aside.parent() {
                    File::open(dir)?.sync_all()?;
                }
                return Ok(aside);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free name for the torn fragment"))
}

#[cfg(test)]
mod tests {
    use sessionlog_events::Entry;

    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;

    fn entry(i: usize) -> Entry {
        Entry::parse(&format!(
            r#"{{"type":"custom","customType":"t","data":{i},"id":"{i:08x}","parentId":null}}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_newer_format_is_refused_before_anything_is_written_or_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        // A blank line and a malformed one before the header, and a torn tail
        // that opening would otherwise move aside.
        let v4 = HEADER.replace("\"version\":3", "\"version\":4");
        let original = format!("\n{{oops\n{v4}\n{}\n{{\"type\":\"cus", entry(1).raw());
        fs::write(&path, &original).unwrap();
        let err = Appender::open(&path, AppendOptions::default()).unwrap_err();
        assert!(
            matches!(&err, AppendError::UnsupportedVersion { line: 3, version, .. } if version == "4"),
            "{err}"
        );
        assert!(err.to_string().contains("s.jsonl:3: unsupported session version 4"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), original, "the file is untouched");
        let siblings = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(siblings, 1, "nothing moved aside, no lock left behind");
        // A version 3 file (or a store stream without a header) opens as before.
        fs::write(&path, format!("{HEADER}\n")).unwrap();
        Appender::open(&path, AppendOptions::default()).unwrap();
        fs::write(&path, format!("{}\n", entry(1).raw())).unwrap();
        Appender::open(&path, AppendOptions::default()).unwrap();
    }

    #[test]
    fn appends_whole_lines_and_reports_clean_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, format!("{HEADER}\n")).unwrap();
        let mut app = Appender::open(&path, AppendOptions::default()).unwrap();
        assert_eq!(app.tail_repair(), None);
        app.append_batch(&[entry(1), entry(2)]).unwrap();
        app.append(&entry(3)).unwrap();
        drop(app);
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(text.ends_with("\"id\":\"00000003\",\"parentId\":null}\n"));
    }

    #[test]
    fn multi_line_text_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut app = Appender::open(&path, AppendOptions::default()).unwrap();
        let pretty = Entry::parse("{\n\"type\":\"x\"}").unwrap();
        assert!(matches!(app.append(&pretty), Err(AppendError::MultiLine { .. })));
        assert_eq!(fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn complete_object_without_newline_is_terminated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, HEADER).unwrap();
        let mut app = Appender::open(&path, AppendOptions::default()).unwrap();
        assert_eq!(app.tail_repair(), Some(&TailRepair::Terminated { line: 1 }));
        app.append(&entry(1)).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 2);
    }

    #[test]
    fn unparseable_terminated_last_line_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, format!("{HEADER}\n{{\"type\":\"mess\n")).unwrap();
        let app = Appender::open(&path, AppendOptions::default()).unwrap();
        let Some(TailRepair::MovedAside { line, offset, bytes, aside }) = app.tail_repair() else {
            panic!("expected a repair, got {:?}", app.tail_repair());
        };
        assert_eq!((*line, *offset, *bytes), (2, HEADER.len() as u64 + 1, 14));
        assert_eq!(fs::read_to_string(aside).unwrap(), "{\"type\":\"mess\n");
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{HEADER}\n"));
    }

    fn eio(_: &File) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(5))
    }

    #[test]
    fn an_fsync_failure_poisons_the_log_and_acknowledges_nothing_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, format!("{HEADER}\n")).unwrap();
        let options = AppendOptions { fsync: FsyncPolicy::EveryEntry, ..AppendOptions::default() };
        let mut good = Appender::open(&path, options).unwrap();
        good.append(&entry(1)).unwrap();
        let mut app = Appender::open(&path, options).unwrap().with_sync(eio);
        // A batch of three: the first line is written, its sync fails, the
        // rest is never written and none of it is acknowledged.
        let err = app.append_batch(&[entry(2), entry(3), entry(4)]).unwrap_err();
        assert!(matches!(&err, AppendError::Io { source, .. } if source.raw_os_error() == Some(5)), "{err}");
        assert!(err.to_string().ends_with("s.jsonl: Input/output error (os error 5)"), "{err}");
        // Poisoned for every writer of this process, including `sync`.
        assert!(matches!(app.append(&entry(5)), Err(AppendError::Poisoned { .. })));
        assert!(matches!(good.append(&entry(5)), Err(AppendError::Poisoned { .. })));
        let poisoned = good.sync().unwrap_err();
        assert!(poisoned.to_string().contains("poisoned by an earlier failed write or sync"), "{poisoned}");
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{HEADER}\n{}\n{}\n", entry(1).raw(), entry(2).raw()), "whole lines only");
        // Per-batch: the whole batch is written, one sync fails, same outcome.
        drop((app, good));
        let options = AppendOptions { fsync: FsyncPolicy::PerBatch, ..AppendOptions::default() };
        let mut app = Appender::open(&path, options).unwrap().with_sync(eio);
        assert!(matches!(app.append_batch(&[entry(6), entry(7)]), Err(AppendError::Io { .. })));
        assert!(matches!(app.append(&entry(8)), Err(AppendError::Poisoned { .. })));
        drop(app);
        // A later open (the poison lives as long as the file is open here) appends again.
        let mut app = Appender::open(&path, options).unwrap();
        app.append(&entry(9)).unwrap();
        assert!(fs::read_to_string(&path).unwrap().ends_with(&format!("{}\n", entry(9).raw())));
    }

    #[test]
    fn threads_sharing_a_file_never_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, format!("{HEADER}\n")).unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    let mut app = Appender::open(path, AppendOptions::default()).unwrap();
                    for i in 0..200 {
                        app.append(&entry(t * 1000 + i)).unwrap();
                    }
                });
            }
        });
        let text = fs::read_to_string(&path).unwrap();
        let mut seen: Vec<String> =
            text.lines().skip(1).map(|l| Entry::parse(l).unwrap().id.unwrap()).collect();
        assert_eq!(seen.len(), 1600);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 1600);
        assert!(!crate::lock::lock_path(&path).exists());
    }

    #[test]
    fn no_follow_refuses_a_link_in_the_open_itself() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim.jsonl");
        fs::write(&victim, format!("{HEADER}\n")).unwrap();
        let link = dir.path().join("s.jsonl");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let refuse = AppendOptions { no_follow: true, ..AppendOptions::default() };
        let err = Appender::open(&link, refuse).unwrap_err();
        assert!(err.to_string().contains("s.jsonl: a symbolic link; not written through"), "{err}");
        // A dangling link: O_CREAT alone would create its target.
        let dangling = dir.path().join("d.jsonl");
        std::os::unix::fs::symlink(dir.path().join("made.jsonl"), &dangling).unwrap();
        let err = Appender::open(&dangling, refuse).unwrap_err();
        assert!(err.to_string().contains("d.jsonl: a symbolic link; not written through"), "{err}");
        assert!(!dir.path().join("made.jsonl").exists());
        assert_eq!(fs::read_to_string(&victim).unwrap(), format!("{HEADER}\n"));
        // Without it a link is written through (the user named it, as `>>` does).
        let mut app = Appender::open(&link, AppendOptions::default()).unwrap();
        app.append(&entry(1)).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap().lines().count(), 2);
    }
}
