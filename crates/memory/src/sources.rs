//! What is indexed: the workspace's Markdown memory files and session
//! transcripts (spec §1.2, §1.3).

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sessionlog_event_log::{Mode, Reader};
use sessionlog_events::{Content, Role};

/// The source a file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `MEMORY.md`, `memory.md`, `memory/**/*.md`.
    Memory,
    /// Session transcripts (`sessions/<name>.jsonl`).
    Sessions,
}

impl Source {
    /// The stored name (`memory` or `sessions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Memory => "memory",
            Source::Sessions => "sessions",
        }
    }
}

/// A memory file found in the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    /// Workspace-relative path with forward slashes.
    pub path: String,
    /// Where it is on disk.
    pub abs: PathBuf,
}

/// The memory files of a workspace: `MEMORY.md`, `memory.md` and every
/// `*.md` under `memory/`, symlinks skipped, de-duplicated by real path, in
/// a stable order (roots first, then `memory/` sorted by path).
pub fn memory_files(workspace: &Path) -> io::Result<Vec<MemoryFile>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |rel: String, abs: PathBuf, out: &mut Vec<MemoryFile>| {
        let real = fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
        if seen.insert(real) {
            out.push(MemoryFile { path: rel, abs });
        }
    };
    for name in ["MEMORY.md", "memory.md"] {
        let abs = workspace.join(name);
        if is_regular(&abs) {
            push(name.to_owned(), abs, &mut out);
        }
    }
    let dir = workspace.join("memory");
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        let mut found = Vec::new();
        walk(&dir, "memory", &mut found)?;
        found.sort();
        for (rel, abs) in found {
            push(rel, abs, &mut out);
        }
    }
    Ok(out)
}

fn is_regular(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = format!("{rel}/{name}");
        if ft.is_dir() {
            if matches!(
                name.as_str(),
                ".git" | "node_modules" | ".pnpm-store" | ".venv" | "venv" | ".tox" | "__pycache__"
            ) {
                continue;
            }
            walk(&entry.path(), &child_rel, out)?;
        } else if ft.is_file() && name.ends_with(".md") {
            out.push((child_rel, entry.path()));
        }
    }
    Ok(())
}

/// The transcripts (`*.jsonl` directly inside) of each directory, sorted;
/// symlinks skipped.
pub fn transcript_files(dirs: &[PathBuf]) -> io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for dir in dirs {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_file() && name.ends_with(".jsonl") {
                out.push((format!("sessions/{name}"), entry.path()));
            }
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

/// Text extracted from a transcript: one `User: …` / `Assistant: …` line per
/// message and, for each, the JSONL line it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flattened {
    /// The emitted lines.
    pub lines: Vec<String>,
    /// `line_map[i]` = 1-based JSONL line of `lines[i]`.
    pub line_map: Vec<u64>,
}

impl Flattened {
    /// The lines joined by `\n`.
    pub fn content(&self) -> String {
        self.lines.join("\n")
    }

    /// SHA-256 of `content + "\n" + lineMap joined by ","` (OpenClaw's file hash).
    pub fn hash(&self) -> String {
        let map: Vec<String> = self.line_map.iter().map(u64::to_string).collect();
        crate::chunk::sha256_hex(&format!("{}\n{}", self.content(), map.join(",")))
    }
}

/// Where the reading of a transcript stopped: after `line` complete lines,
/// at byte `offset` (the start of the next line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    /// Complete lines read.
    pub line: u64,
    /// Byte offset after the last complete line.
    pub offset: u64,
}

/// Reads the complete lines of a transcript after `from` through the event
/// log's reader (Pi's reading rules) and appends the messages' text to
/// `into`. Returns the new position. A last line without `\n` is left for
/// the next read (a writer may be in the middle of it).
pub fn read_transcript(
    path: &Path,
    from: Position,
    into: &mut Flattened,
) -> Result<Position, sessionlog_event_log::ReadError> {
    let io_err = |source| sessionlog_event_log::ReadError::Io { path: path.to_owned(), source };
    // Only the bytes after `from` are read.
    let mut file = fs::File::open(path).map_err(io_err)?;
    file.seek(SeekFrom::Start(from.offset)).map_err(io_err)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_err)?;
    let start = from.offset as usize;
    let end = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(p) => start + p + 1,
        None => return Ok(from),
    };
    let slice = &bytes[..end - start];
    let mut reader = Reader::new(slice, path, Mode::Lenient);
    if from.line > 0 {
        reader = reader.resume_at(from.line, from.offset);
    }
    for record in reader {
        let record = record?;
        let Some(message) = record.entry.message() else { continue };
        let label = match message.role() {
            Role::User => "User",
            Role::Assistant => "Assistant",
            _ => continue,
        };
        let text = match &message.content {
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Blocks(blocks)) => blocks
                .iter()
                .filter(|b| b.kind.as_deref() == Some("text"))
                .filter_map(|b| b.text.as_deref())
                .collect::<Vec<_>>()
                .join(" "),
            None => continue,
        };
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if collapsed.is_empty() {
            continue;
        }
        into.lines.push(format!("{label}: {collapsed}"));
        into.line_map.push(record.line);
    }
    let newlines = slice.iter().filter(|&&b| b == b'\n').count() as u64;
    Ok(Position { line: from.line + newlines, offset: end as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    fn msg(id: &str, role: &str, content: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"{role}","content":{content}}}}}"#
        )
    }

    #[test]
    fn flattens_user_and_assistant_text_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let lines = [
            HEADER.to_owned(),
            msg("a1", "user", r#""deploy  the\nbilling service""#),
            msg(
                "a2",
                "assistant",
                r#"[{"type":"thinking","thinking":"hidden"},{"type":"text","text":"Done."},{"type":"toolCall","id":"t","name":"x","arguments":{}}]"#,
            ),
            msg("a3", "toolResult", r#"[{"type":"text","text":"tool output"}]"#),
            "not json".to_owned(),
            msg("a4", "assistant", r#"[{"type":"text","text":"Second"},{"type":"text","text":"part"}]"#),
        ];
        fs::write(&path, lines.join("\n") + "\n" + &msg("a5", "user", r#""torn""#)).unwrap();
        let mut f = Flattened::default();
        let pos = read_transcript(&path, Position::default(), &mut f).unwrap();
        assert_eq!(
            f.lines,
            vec!["User: deploy the billing service", "Assistant: Done.", "Assistant: Second part"]
        );
        assert_eq!(f.line_map, vec![2, 3, 6]);
        assert_eq!(pos.line, 6);
        // The torn last line is read once it is complete, numbered 7.
        let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        io::Write::write_all(&mut file, b"\n").unwrap();
        let pos2 = read_transcript(&path, pos, &mut f).unwrap();
        assert_eq!(f.lines.last().unwrap(), "User: torn");
        assert_eq!(*f.line_map.last().unwrap(), 7);
        assert_eq!(pos2.line, 7);
        assert_eq!(pos2.offset, fs::metadata(&path).unwrap().len());
    }
}
