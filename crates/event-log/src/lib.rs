//! The log on disk: where sessionlog's events are read from and appended to.
//!
//! One abstraction for both streams: a [`LogKind`] says what a file holds —
//! a transcript ([`TranscriptLog`]: Pi entries, header first) or an agent's
//! store log ([`StoreLog`]: store events, no header) — and the same reader and
//! writer serve both.
//!
//! * [`read`] — a streaming JSONL reader that accepts exactly what Pi accepts
//!   ([`LogReader`]: [`Reader`] for transcripts, [`StoreReader`] for store
//!   logs; [`Mode`], [`load`]); memory is bounded by the longest line.
//! * `append` — durable whole-line appends ([`LogWriter`]: [`Appender`],
//!   [`StoreAppender`]) with a named [`FsyncPolicy`], one writer per file
//!   through an OpenClaw-compatible [`lock`] file, poisoning on a failed
//!   write or sync (a [`SyncFn`] seam lets tests inject the failure), and
//!   torn-tail repair on open.
//! * [`map`] — a whole file's bytes for readers that parse them in place,
//!   memory-mapped when it is a regular file ([`map::read_file`]).
//! * [`pack`] — MessagePack segments with a length prefix and CRC-32 per
//!   record ([`PackWriter`], [`PackReader`]).
//!
//! * `replace` — atomic, durable replacement of projection files, and
//!   creation of output files that never replaces one.
//! * [`import`] — Claude Code and Codex sessions read as Pi transcripts
//!   (recognised by content, mapped losslessly: each entry keeps its lines).
//!
//! Everything here is synchronous `std::io`; the pure entry model lives in
//! `sessionlog-events`.

mod append;
pub mod import;
mod kind;
pub mod lock;
pub mod map;
pub mod pack;
pub mod read;
mod replace;

pub use append::{
    file_stamp, AppendError, AppendOptions, Appender, FsyncPolicy, LogWriter, StoreAppender, SyncFn,
    TailRepair,
};
pub use kind::{LogKind, StoreLog, TranscriptLog};
pub use lock::{FileLock, LockError, LockOptions};
pub use pack::{PackError, PackReader, PackWriter};
pub use read::{load, load_from, Loaded, LogReader, Mode, ReadError, Reader, Record, Skipped, StoreReader};
pub use replace::{
    create_atomically, create_temp_beside, link_into_place, replace, replace_atomically, temp_beside,
};
