//! The write lock file, compatible with OpenClaw's `session-write-lock`.
//!
//! `<file>.lock` is created exclusively and holds
//! `{"pid": …, "createdAt": "<ISO>", "starttime": …}` (2-space JSON;
//! `starttime` is the process start time in clock ticks from
//! `/proc/<pid>/stat`, Linux only). A holder is stale when its pid is missing
//! or dead, its pid was recycled (start time differs), its `createdAt` is
//! invalid, or the lock is older than `stale_after`; a missing pid or invalid
//! time alone also needs the lock file's mtime to be older than `stale_after`.
//! A stale lock is removed and acquisition retried; otherwise the acquirer
//! sleeps `min(1000, 50·attempt)` ms until the timeout. Removing a stale lock
//! happens under an advisory lock on the folder and only if the lock file is
//! still the one judged stale, so of several processes taking over one stale
//! lock exactly one gets it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// Errors from taking a lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds the lock past the timeout (OpenClaw's `session_busy`).
    #[error("session file locked (timeout {timeout_ms}ms): pid={holder} {}", path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// The acquire timeout.
        timeout_ms: u128,
        /// The holder's pid, or `unknown`.
        holder: String,
    },
    /// The lock file could not be created, read or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

/// Lock timing: how long to wait and when a holder counts as stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockOptions {
    /// Give up acquiring after this long (OpenClaw: 10 s).
    pub timeout: Duration,
    /// A lock older than this is stale (OpenClaw: 30 min).
    pub stale_after: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions { timeout: Duration::from_secs(10), stale_after: Duration::from_secs(30 * 60) }
    }
}

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Payload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    starttime: Option<serde_json::Value>,
}

/// A held lock file; removed when dropped.
#[derive(Debug)]
pub struct FileLock {
    path: PathBuf,
    contents: Vec<u8>,
}

/// The lock path for a file: `<file>.lock` beside it.
pub fn lock_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    file.with_file_name(name)
}

fn now_iso() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) is parenthesised and may contain spaces; fields after it
    // start at field 3, so starttime (field 22) is the 20th after ")".
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        // Without /proc there is no cheap liveness check; rely on age.
        true
    }
}

impl FileLock {
    /// Acquires `<file>.lock`, waiting up to `options.timeout`.
    pub fn acquire(file: &Path, options: LockOptions) -> Result<FileLock, LockError> {
        let path = lock_path(file);
        let io_err = |source| LockError::Io { path: path.clone(), source };
        let pid = std::process::id();
        let payload = Payload {
            pid: Some(pid.into()),
            created_at: Some(now_iso().into()),
            starttime: process_start_ticks(pid).map(Into::into),
        };
        let mut contents = serde_json::to_vec_pretty(&payload).map_err(|e| io_err(e.into()))?;
        contents.push(b'\n');
        let started = Instant::now();
        let mut attempt: u64 = 0;
        loop {
            match create_with(&path, &contents) {
                Ok(()) => return Ok(FileLock { path, contents }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(e)),
            }
            let holder = Holder::read(&path);
            if holder.is_stale(options.stale_after) {
                takeover_pause();
                remove_if_still_stale(&path, &holder, options.stale_after).map_err(io_err)?;
                continue;
            }
            let elapsed = started.elapsed();
            if elapsed >= options.timeout {
                return Err(LockError::Busy {
                    path,
                    timeout_ms: options.timeout.as_millis(),
                    holder: holder.pid.map_or("unknown".to_owned(), |p| p.to_string()),
                });
            }
            attempt += 1;
            let pause = Duration::from_millis((50 * attempt).min(1000)).min(options.timeout - elapsed);
            thread::sleep(pause);
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates `path` holding `contents`, or fails with `AlreadyExists`. The
/// contents are written and synced under a private name first and then
/// linked into place, so the lock file never exists without its holder's pid:
/// a process killed half-way leaves no lock (only its private file), never an
/// empty one that others must respect until it is old. The private file is
/// created fresh under a random name ([`crate::create_temp_beside`]), so a
/// file or link planted at a name guessed in advance is never written.
fn create_with(path: &Path, contents: &[u8]) -> io::Result<()> {
    let (tmp, mut file) = crate::create_temp_beside(path, "tmp")?;
    let linked =
        file.write_all(contents).and_then(|()| file.sync_all()).and_then(|()| fs::hard_link(&tmp, path));
    drop(file);
    let _ = fs::remove_file(&tmp);
    linked
}

/// Removes the lock file judged stale as `judged`, unless a peer took it over
/// meanwhile. Takeovers of the locks of one folder are serialised by an
/// advisory lock (`flock`) on the folder itself, released by the kernel when
/// its holder exits however it exits; under it the lock file is read again
/// and removed only when it is the same file with the same bytes and still
/// stale. Without this, two processes that both judged one lock stale could
/// each remove it in turn, the second removing the lock the first had just
/// created, and both would hold the file.
fn remove_if_still_stale(path: &Path, judged: &Holder, stale_after: Duration) -> io::Result<()> {
    let _guard = FolderGuard::take(path)?;
    let now = Holder::read(path);
    if now.identity.is_none() || now.identity != judged.identity || !now.is_stale(stale_after) {
        // Gone, or replaced by a peer's lock: look again from the start.
        return Ok(());
    }
    tracing::warn!(lock = %path.display(), reasons = ?now.stale_reasons(stale_after), "removing stale lock");
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// An exclusive `flock` on the folder that holds a lock file (Unix); held until dropped.
struct FolderGuard {
    #[cfg(unix)]
    _folder: fs::File,
}

impl FolderGuard {
    fn take(lock: &Path) -> io::Result<FolderGuard> {
        #[cfg(unix)]
        {
            let folder = match lock.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let folder = fs::File::open(folder)?;
            rustix::fs::flock(&folder, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(FolderGuard { _folder: folder })
        }
        #[cfg(not(unix))]
        {
            let _ = lock;
            Ok(FolderGuard {})
        }
    }
}

/// Test seam: a pause between judging a lock stale and taking it over, so a
/// test can make two processes judge the same lock stale at once. Set by
/// `SESSIONLOG_TEST_TAKEOVER_PAUSE_MS` (in milliseconds); no pause otherwise.
fn takeover_pause() {
    static PAUSE: LazyLock<Option<Duration>> = LazyLock::new(|| {
        std::env::var("SESSIONLOG_TEST_TAKEOVER_PAUSE_MS").ok()?.parse().ok().map(Duration::from_millis)
    });
    if let Some(pause) = *PAUSE {
        thread::sleep(pause);
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Remove the file only if it is still ours (a peer may have judged it
        // stale and taken it over).
        if fs::read(&self.path).is_ok_and(|c| c == self.contents) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(unix)]
fn file_id(m: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(_: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// What the current lock file says about its holder.
struct Holder {
    /// The lock file's bytes and (on Unix) its device and inode: which file was judged.
    identity: Option<(Vec<u8>, u64, u64)>,
    pid: Option<u32>,
    created_at: Option<SystemTime>,
    starttime: Option<u64>,
    mtime: Option<SystemTime>,
}

impl Holder {
    fn read(path: &Path) -> Holder {
        let bytes = fs::read(path).ok();
        let payload: Payload =
            bytes.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
        let metadata = fs::metadata(path).ok();
        let identity = bytes.zip(metadata.as_ref()).map(|(b, m)| (b, file_id(m).0, file_id(m).1));
        let created_at = payload
            .created_at
            .as_ref()
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(SystemTime::from);
        Holder {
            pid: payload.pid.as_ref().and_then(|v| v.as_u64()).and_then(|p| u32::try_from(p).ok()),
            created_at,
            starttime: payload.starttime.as_ref().and_then(|v| v.as_u64()),
            mtime: metadata.and_then(|m| m.modified().ok()),
            identity,
        }
    }

    fn stale_reasons(&self, stale_after: Duration) -> Vec<&'static str> {
        let older = |t: Option<SystemTime>| {
            t.and_then(|t| SystemTime::now().duration_since(t).ok()).is_some_and(|age| age > stale_after)
        };
        let mut reasons = Vec::new();
        match self.pid {
            None => reasons.push("missing-pid"),
            Some(pid) if !pid_alive(pid) => reasons.push("dead-pid"),
            Some(pid) => {
                if let (Some(theirs), Some(now)) = (self.starttime, process_start_ticks(pid)) {
                    if theirs != now {
                        reasons.push("recycled-pid");
                    }
                }
            }
        }
        match self.created_at {
            None => reasons.push("invalid-createdAt"),
            Some(t) if older(Some(t)) => reasons.push("too-old"),
            Some(_) => {}
        }
        let weak_only = reasons.iter().all(|r| matches!(*r, "missing-pid" | "invalid-createdAt"));
        if !reasons.is_empty() && weak_only && !older(self.mtime) {
            // A lock being written right now looks like this: wait for it.
            reasons.clear();
        }
        reasons
    }

    fn is_stale(&self, stale_after: Duration) -> bool {
        !self.stale_reasons(stale_after).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_times_out_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let held = FileLock::acquire(&file, LockOptions::default()).unwrap();
        let text = fs::read_to_string(held.path()).unwrap();
        let payload: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(payload["pid"], serde_json::json!(std::process::id()));
        assert!(text.starts_with("{\n  \"pid\""), "2-space JSON: {text}");
        let quick = LockOptions { timeout: Duration::from_millis(120), ..LockOptions::default() };
        let err = FileLock::acquire(&file, quick).unwrap_err();
        assert!(err
            .to_string()
            .starts_with(&format!("session file locked (timeout 120ms): pid={}", std::process::id())));
        drop(held);
        assert!(!lock_path(&file).exists());
        FileLock::acquire(&file, quick).unwrap();
    }

    #[test]
    fn dead_and_too_old_holders_are_stale() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let quick = LockOptions { timeout: Duration::from_millis(200), ..LockOptions::default() };
        // A pid above the kernel's maximum is never alive.
        fs::write(lock_path(&file), r#"{"pid": 4294967295, "createdAt": "2026-01-01T00:00:00.000Z"}"#)
            .unwrap();
        FileLock::acquire(&file, quick).unwrap();
        let me = std::process::id();
        fs::write(lock_path(&file), format!(r#"{{"pid": {me}, "createdAt": "2020-01-01T00:00:00.000Z"}}"#))
            .unwrap();
        FileLock::acquire(&file, quick).unwrap();
    }

    #[test]
    fn a_fresh_lock_without_pid_is_respected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        fs::write(lock_path(&file), "{}").unwrap();
        let quick = LockOptions { timeout: Duration::from_millis(100), ..LockOptions::default() };
        let err = FileLock::acquire(&file, quick).unwrap_err();
        assert!(err.to_string().contains("pid=unknown"), "{err}");
    }

    /// A link planted in the folder at a name a process could have guessed
    /// (the lock's name with a pid and a counter, as private files were once
    /// named) is never written through: the lock is made under a fresh name.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_a_guessable_private_name_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep me").unwrap();
        let lock = lock_path(&file);
        for attempt in 0..4 {
            let mut name = lock.as_os_str().to_owned();
            name.push(format!(".{}.{attempt}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, PathBuf::from(name)).unwrap();
        }
        let held = FileLock::acquire(&file, LockOptions::default()).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(!fs::symlink_metadata(held.path()).unwrap().file_type().is_symlink());
        // Nothing of the lock's own is left beside it but the lock itself.
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.retain(|n| !n.starts_with("s.jsonl.lock.") && n != "victim");
        assert_eq!(names, ["s.jsonl.lock"]);
    }
}
