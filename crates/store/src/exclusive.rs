//! One writer per file inside this process too. The lock file keeps other
//! processes out; threads of one process share it (event-log's design), so a
//! read-modify-write (read the log, fold, append, project) also takes this
//! in-process claim on the file for as long as the writer lives.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sessionlog_event_log::LockError;

use crate::error::StoreError;

static HELD: LazyLock<(Mutex<HashSet<PathBuf>>, Condvar)> = LazyLock::new(Default::default);

fn held() -> MutexGuard<'static, HashSet<PathBuf>> {
    HELD.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The claim on one file; released when dropped.
#[derive(Debug)]
pub(crate) struct Exclusive {
    key: PathBuf,
}

fn key(path: &Path) -> PathBuf {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match (std::fs::canonicalize(parent), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => path.to_owned(),
    }
}

impl Exclusive {
    /// Waits up to `timeout` for no other writer of this process to hold `path`.
    pub(crate) fn acquire(path: &Path, timeout: Duration) -> Result<Exclusive, StoreError> {
        let key = key(path);
        let started = Instant::now();
        let mut set = held();
        while set.contains(&key) {
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(StoreError::Lock(LockError::Busy {
                    path: sessionlog_event_log::lock::lock_path(path),
                    timeout_ms: timeout.as_millis(),
                    holder: std::process::id().to_string(),
                }));
            }
            set = HELD.1.wait_timeout(set, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        set.insert(key.clone());
        Ok(Exclusive { key })
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        held().remove(&self.key);
        HELD.1.notify_all();
    }
}
