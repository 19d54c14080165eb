//! Atomic replacement of a projection file: a temporary file in the same
//! folder, written and synced, renamed over the target, then the folder synced.
//! Readers see the old file or the new one, never a partial one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably.
pub fn replace_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// Replaces `path` with `bytes` atomically; synced (file and folder) when
/// `durable`, else left to the OS (scratch data, benchmarks).
pub fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = folder(path);
    let (tmp, mut f) = create_temp_beside(path, "tmp")?;
    let result = (|| {
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        // Ours: created above under a fresh name.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to a new file at `path`, atomically and durably, and never
/// replaces anything: a file (or link) already at `path` is left as it was and
/// the call fails with [`io::ErrorKind::AlreadyExists`].
pub fn create_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (tmp, mut f) = create_temp_beside(path, "new")?;
    if let Err(e) = f.write_all(bytes).and_then(|()| f.sync_all()) {
        // Ours: created above under a fresh name; nothing else is removed.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    link_into_place(&tmp, path)
}

/// Moves the finished file `tmp` to `path` (same folder) only if nothing is
/// at `path`: a hard link, which the kernel refuses when the name exists,
/// then `tmp` is removed and the folder synced. On failure `tmp` is removed.
pub fn link_into_place(tmp: &Path, path: &Path) -> io::Result<()> {
    let linked = fs::hard_link(tmp, path);
    let _ = fs::remove_file(tmp);
    linked?;
    File::open(folder(path))?.sync_all()
}

/// A fresh temporary name beside `path` (same folder, so a link or rename
/// stays on one file system): the process id and a random part, so another
/// process (or an earlier run) cannot predict it. [`create_temp_beside`]
/// also creates the file, refusing any name already taken.
pub fn temp_beside(path: &Path, what: &str) -> io::Result<std::path::PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    // A `RandomState` is keyed from the OS's random source (then advanced per
    // instance); the time and a counter set apart names drawn in one instant.
    static DRAWN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(DRAWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
    );
    let random = h.finish();
    Ok(folder(path).join(format!(".{}.{}.{random:016x}.{what}", name.to_string_lossy(), std::process::id())))
}

/// Creates a new temporary file beside `path` under a fresh name
/// ([`temp_beside`]) with `O_EXCL` (`create_new`): the file returned is one
/// this call created, never a file or link that was already there (a taken
/// name is drawn again), so removing it on failure removes only what the
/// caller made.
pub fn create_temp_beside(path: &Path, what: &str) -> io::Result<(std::path::PathBuf, File)> {
    let mut tries = 0;
    loop {
        let tmp = temp_beside(path, what)?;
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        fs::write(&path, "old").unwrap();
        replace_atomically(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["sessions.json"]);
    }

    #[test]
    fn creating_never_replaces_a_file_or_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        create_atomically(&path, b"first").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "first");
        let err = create_atomically(&path, b"second").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&path).unwrap(), "first");
        // A dangling link is something at the name too.
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        let err = create_atomically(&link, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("nowhere").exists());
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["link.jsonl", "out.jsonl"], "no temporary file is left");
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creating_leaves_a_file_at_a_guessable_temporary_name_alone() {
        // The name a temporary file had before it drew a random part
        // (`.<name>.<pid>.new`): another process may own a file there.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let theirs = dir.path().join(format!(".out.jsonl.{}.new", std::process::id()));
        fs::write(&theirs, "not ours").unwrap();
        create_atomically(&path, b"first").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "first");
        // A failing create (the name is taken) removes only its own temporary file.
        assert_eq!(create_atomically(&path, b"second").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&theirs).unwrap(), "not ours");
        let pid = std::process::id();
        assert_eq!(names(dir.path()), [format!(".out.jsonl.{pid}.new"), "out.jsonl".to_owned()]);
    }

    #[test]
    fn replacing_never_writes_through_a_link_at_a_guessable_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.json");
        fs::write(&path, "old").unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "victim").unwrap();
        let link = dir.path().join(format!(".sessions.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        replace_atomically(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "victim");
        assert!(!path.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink(), "the link is left as it was");
    }

    #[test]
    fn a_temporary_file_is_always_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        let (a, _) = create_temp_beside(&path, "t").unwrap();
        let (b, _) = create_temp_beside(&path, "t").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(dir.path()));
        assert!(a.file_name().unwrap().to_string_lossy().starts_with(&format!(".x.{}.", std::process::id())));
    }
}
