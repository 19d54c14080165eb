//! `memory_get`: reading a memory file, or some of its lines (spec §1.5).

use std::fs;
use std::path::{Component, Path};

use serde::Serialize;

use crate::error::MemoryError;

/// The text read by [`get`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GetResult {
    /// The path as given (workspace-relative).
    pub path: String,
    /// The lines read, joined by `\n` (empty for a file that does not exist yet).
    pub text: String,
}

/// Reads `path` (workspace-relative: `MEMORY.md`, `memory.md` or a `.md`
/// file under `memory/`), from 1-based line `from` for `lines` lines (the
/// whole file by default). A file that does not exist yet reads as empty;
/// symlinks and paths leaving the workspace are refused.
pub fn get(
    workspace: &Path,
    path: &str,
    from: Option<usize>,
    lines: Option<usize>,
) -> Result<GetResult, MemoryError> {
    let refuse = |reason: &str| MemoryError::Path { path: path.to_owned(), reason: reason.to_owned() };
    let rel = Path::new(path);
    if path.is_empty() || rel.is_absolute() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(refuse("path required: a workspace-relative path without '..'"));
    }
    let allowed = path == "MEMORY.md" || path == "memory.md" || path.starts_with("memory/");
    if !allowed || !path.ends_with(".md") {
        return Err(refuse("path required: MEMORY.md, memory.md or a .md file under memory/"));
    }
    // No component may be a symlink, and the file must be a regular file.
    let mut at = workspace.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse("path required: symlinks are not read"))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(GetResult { path: path.to_owned(), text: String::new() })
            }
            Err(source) => return Err(MemoryError::Io { path: at, source }),
        }
    }
    if !fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_file()) {
        return Err(refuse("path required: not a regular file"));
    }
    let bytes = fs::read(&at).map_err(|source| MemoryError::Io { path: at.clone(), source })?;
    let content = String::from_utf8_lossy(&bytes);
    let text = match (from, lines) {
        (None, None) => content.into_owned(),
        (from, lines) => {
            let start = from.unwrap_or(1).max(1) - 1;
            let n = lines.unwrap_or(usize::MAX).max(1);
            content.split('\n').skip(start).take(n).collect::<Vec<_>>().join("\n")
        }
    };
    Ok(GetResult { path: path.to_owned(), text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_refuses_other_paths() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("memory")).unwrap();
        fs::write(dir.path().join("memory/notes.md"), "one\ntwo\nthree\nfour").unwrap();
        fs::write(dir.path().join("secret.md"), "no").unwrap();
        let g = |p: &str, f, l| get(dir.path(), p, f, l);
        assert_eq!(g("memory/notes.md", Some(2), Some(2)).unwrap().text, "two\nthree");
        assert_eq!(g("memory/notes.md", Some(3), None).unwrap().text, "three\nfour");
        assert_eq!(g("memory/notes.md", None, None).unwrap().text, "one\ntwo\nthree\nfour");
        assert_eq!(g("memory/2030-01-01.md", None, None).unwrap().text, "");
        for bad in ["secret.md", "../x.md", "memory/../secret.md", "/etc/passwd", "memory/notes.txt", ""] {
            assert!(matches!(g(bad, None, None), Err(MemoryError::Path { .. })), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.md"), dir.path().join("memory/link.md"))
                .unwrap();
            assert!(matches!(g("memory/link.md", None, None), Err(MemoryError::Path { .. })));
        }
    }
}
