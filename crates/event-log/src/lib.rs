//! The log on disk: where sessionlog's events are read from and appended to.
//!
//! * [`read`] — a streaming JSONL reader that accepts exactly what Pi accepts
//!   ([`Reader`], [`Mode`], [`load`]); memory is bounded by the longest line.
//! * [`append`] — durable whole-line appends ([`Appender`]) with a named
//!   [`FsyncPolicy`], one writer per file through an OpenClaw-compatible
//!   [`lock`] file, poisoning on a failed sync, and torn-tail repair on open.
//! * [`pack`] — MessagePack segments with a length prefix and CRC-32 per
//!   record ([`PackWriter`], [`PackReader`]).
//!
//! * [`replace`] — atomic, durable replacement of projection files.
//! * [`import`] — Claude Code and Codex sessions read as Pi transcripts
//!   (recognised by content, mapped losslessly: each entry keeps its lines).
//!
//! Everything here is synchronous `std::io`; the pure entry model lives in
//! `sessionlog-events`.

pub mod append;
pub mod import;
pub mod lock;
pub mod pack;
pub mod read;
pub mod replace;

pub use append::{file_stamp, AppendError, AppendOptions, Appender, FsyncPolicy, TailRepair};
pub use lock::{FileLock, LockError, LockOptions};
pub use pack::{PackError, PackReader, PackWriter};
pub use read::{load, Loaded, Mode, ReadError, Reader, Record, Skipped};
pub use replace::replace_atomically;
