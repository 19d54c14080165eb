//! One writer per file inside this process too. The lock file keeps other
//! processes out; threads of one process share it (event-log's design), so a
//! read-modify-write (read the log, fold, append, project) also takes this
//! in-process claim on the file for as long as the writer lives.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sessionlog_event_log::LockError;

use crate::error::StoreError;

/// The claimed files, and how many writers wait for each.
#[derive(Default)]
struct Claims {
    held: HashSet<PathBuf>,
    waiting: HashMap<PathBuf, usize>,
}

static HELD: LazyLock<(Mutex<Claims>, Condvar)> = LazyLock::new(Default::default);

fn held() -> MutexGuard<'static, Claims> {
    HELD.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many writers of this process are waiting for another's claim on
/// `path` to end (what a test needs to act while a writer waits).
#[doc(hidden)]
pub fn waiting_for(path: &Path) -> usize {
    held().waiting.get(&key(path)).copied().unwrap_or(0)
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
        let mut claims = held();
        let mut counted = false;
        while claims.held.contains(&key) {
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                if counted {
                    stop_waiting(&mut claims, &key);
                }
                return Err(StoreError::Lock(LockError::Busy {
                    path: sessionlog_event_log::lock::lock_path(path),
                    timeout_ms: timeout.as_millis(),
                    holder: std::process::id().to_string(),
                }));
            }
            if !counted {
                *claims.waiting.entry(key.clone()).or_default() += 1;
                counted = true;
            }
            claims = HELD.1.wait_timeout(claims, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        if counted {
            stop_waiting(&mut claims, &key);
        }
        claims.held.insert(key.clone());
        Ok(Exclusive { key })
    }
}

fn stop_waiting(claims: &mut Claims, key: &Path) {
    if let Some(n) = claims.waiting.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            claims.waiting.remove(key);
        }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        held().held.remove(&self.key);
        HELD.1.notify_all();
    }
}
