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
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
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
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to a new file at `path`, atomically and durably, and never
/// replaces anything: a file (or link) already at `path` is left as it was and
/// the call fails with [`io::ErrorKind::AlreadyExists`].
pub fn create_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_beside(path, "new")?;
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = result {
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

/// A temporary name beside `path` (same folder, so a link or rename stays on one file system).
pub fn temp_beside(path: &Path, what: &str) -> io::Result<std::path::PathBuf> {
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    Ok(folder(path).join(format!(".{}.{}.{what}", name.to_string_lossy(), std::process::id())))
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
}
