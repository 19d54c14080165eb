//! The folder the tools may touch. A path argument is resolved as Pi
//! resolves it (`@` prefix dropped, `~` expanded, relative to the
//! workspace), then `..` is applied and symbolic links are followed as far
//! as the path exists; a path whose real location is outside the
//! workspace is refused before anything is read or written.

use std::path::{Component, Path, PathBuf};

/// A path argument the workspace refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path (or a link on it) leads outside the workspace.
    #[error("Path escapes the workspace: {0}")]
    Escapes(String),
    /// The path names a link that leads nowhere.
    #[error("Path is a dangling link: {0}")]
    Dangling(String),
}

/// The root every built-in tool is confined to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
    read_only: bool,
}

fn normalize_spaces(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// `path` with `.` and `..` applied lexically (a `..` above the root stays at the root).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

impl Workspace {
    /// The workspace at `root` (which must exist; it is resolved to its real path).
    pub fn new(root: &Path) -> std::io::Result<Workspace> {
        Ok(Workspace { root: root.canonicalize()?, read_only: false })
    }

    /// The same workspace, marked read-only (the memory flush is skipped;
    /// the tools still refuse nothing more — the sandbox decides that).
    pub fn read_only(mut self, read_only: bool) -> Workspace {
        self.read_only = read_only;
        self
    }

    /// Whether the workspace is read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The real path of the root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real location of the path argument `arg`, inside the workspace.
    pub fn resolve(&self, arg: &str) -> Result<PathBuf, PathError> {
        let spaced = normalize_spaces(arg);
        let expanded = spaced.strip_prefix('@').unwrap_or(&spaced);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let joined = match (expanded, home) {
            ("~", Some(home)) => home,
            (p, Some(home)) if p.starts_with("~/") => home.join(&p[2..]),
            (p, _) if Path::new(p).is_absolute() => PathBuf::from(p),
            (p, _) => self.root.join(p),
        };
        let lexical = lexical(&joined);
        // Follow links as far as the path exists; what does not exist yet
        // (a file to write) cannot be a link.
        let mut existing = lexical.as_path();
        let mut rest = Vec::new();
        while std::fs::symlink_metadata(existing).is_err() {
            match (existing.parent(), existing.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_owned());
                    existing = parent;
                }
                _ => break,
            }
        }
        let mut real = existing.canonicalize().map_err(|_| PathError::Dangling(arg.to_owned()))?;
        for name in rest.iter().rev() {
            real.push(name);
        }
        if real.starts_with(&self.root) {
            Ok(real)
        } else {
            Err(PathError::Escapes(arg.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_inside_and_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub/out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("in")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let root = ws.root().to_owned();
        assert_eq!(ws.resolve("sub/../a.txt").unwrap(), root.join("a.txt"));
        assert_eq!(ws.resolve("@sub/new/b.txt").unwrap(), root.join("sub/new/b.txt"));
        assert_eq!(ws.resolve("in/c").unwrap(), root.join("sub/c"));
        assert_eq!(ws.resolve(&root.join("x").to_string_lossy()).unwrap(), root.join("x"));
        for bad in ["../x", "sub/../../x", "/etc/passwd", "sub/out/secret", "sub/out/new-file"] {
            assert_eq!(ws.resolve(bad), Err(PathError::Escapes(bad.to_owned())), "{bad}");
        }
        std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("dangling")).unwrap();
        assert_eq!(ws.resolve("dangling"), Err(PathError::Dangling("dangling".to_owned())));
    }
}
