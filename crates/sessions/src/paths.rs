//! Transcript paths inside a sessions folder, which files there are
//! transcripts, and archive names (spec sessions §4).

use std::path::{Component, Path, PathBuf};

use crate::keys::validate_session_id;

/// The store log in a sessions folder (sessionlog's own file).
pub const STORE_LOG: &str = "events.jsonl";
/// The session index OpenClaw reads, the store log's projection.
pub const SESSIONS_JSON: &str = "sessions.json";

/// Whether a file named `name` in a sessions folder is a session transcript:
/// `*.jsonl` except the store log and OpenClaw's `*.trajectory.jsonl` run
/// traces, and, when `archived` is asked for, the archives OpenClaw leaves
/// on reset, delete or repair (`*.jsonl.<reset|deleted|bak>.<time>`).
pub fn is_transcript_name(name: &str, archived: bool) -> bool {
    if name.ends_with(".jsonl") {
        return name != STORE_LOG && !name.ends_with(".trajectory.jsonl");
    }
    archived && is_archived_transcript(name)
}

/// Why a transcript path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The session id cannot name a file.
    #[error("{0}")]
    InvalidSessionId(String),
    /// The stored `sessionFile` would leave the sessions folder.
    #[error("sessionFile {0:?} escapes the sessions folder")]
    Escapes(String),
}

/// Where an entry's transcript lives: its `sessionFile` when that stays
/// inside `sessions_dir` (relative paths resolved against it, absolute ones
/// accepted only below it), else `<sessionId>.jsonl`.
pub fn transcript_path(
    sessions_dir: &Path,
    session_id: &str,
    session_file: Option<&str>,
) -> Result<PathBuf, PathError> {
    let id = validate_session_id(session_id).map_err(|e| PathError::InvalidSessionId(e.to_string()))?;
    let Some(file) = session_file.map(str::trim).filter(|f| !f.is_empty()) else {
        return Ok(sessions_dir.join(format!("{id}.jsonl")));
    };
    let p = Path::new(file);
    let relative = if p.is_absolute() {
        p.strip_prefix(sessions_dir).map_err(|_| PathError::Escapes(file.to_owned()))?.to_owned()
    } else {
        p.to_owned()
    };
    if relative.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(PathError::Escapes(file.to_owned()));
    }
    Ok(sessions_dir.join(relative))
}

/// Why a transcript was archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveReason {
    /// `/new`, `/reset` or an automatic reset.
    Reset,
    /// The session was deleted.
    Deleted,
    /// A backup (legacy line truncation, store rotation).
    Bak,
}

/// Recognises `<file>.<reset|deleted|bak>.<ISO time with ':' as '-'>[.zst]`;
/// returns the original file name, the reason and the time text.
pub fn parse_archive_name(name: &str) -> Option<(&str, ArchiveReason, &str)> {
    let name = name.strip_suffix(".zst").unwrap_or(name);
    for (marker, reason) in [
        (".reset.", ArchiveReason::Reset),
        (".deleted.", ArchiveReason::Deleted),
        (".bak.", ArchiveReason::Bak),
    ] {
        if let Some(at) = name.rfind(marker) {
            let (base, ts) = (&name[..at], &name[at + marker.len()..]);
            let looks_like_time =
                ts.len() >= 10 && ts.as_bytes()[..4].iter().all(u8::is_ascii_digit) && !ts.contains(':');
            let digits_only = !ts.is_empty() && ts.bytes().all(|b| b.is_ascii_digit());
            if !base.is_empty() && (looks_like_time || digits_only) {
                return Some((base, reason, ts));
            }
        }
    }
    None
}

/// A transcript OpenClaw archived on reset, delete or repair:
/// `<id>.jsonl.<reset|deleted|bak>.<time>`.
pub fn is_archived_transcript(name: &str) -> bool {
    parse_archive_name(name).is_some_and(|(base, _, _)| base.ends_with(".jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_sessions_folder() {
        let dir = Path::new("/state/agents/build/sessions");
        assert_eq!(transcript_path(dir, "abc", None), Ok(dir.join("abc.jsonl")));
        assert_eq!(transcript_path(dir, "abc", Some("abc-topic-7.jsonl")), Ok(dir.join("abc-topic-7.jsonl")));
        assert_eq!(
            transcript_path(dir, "abc", Some("/state/agents/build/sessions/x.jsonl")),
            Ok(dir.join("x.jsonl"))
        );
        assert!(matches!(
            transcript_path(dir, "abc", Some("../../../etc/passwd")),
            Err(PathError::Escapes(_))
        ));
        assert!(matches!(transcript_path(dir, "abc", Some("/etc/passwd")), Err(PathError::Escapes(_))));
        assert!(matches!(transcript_path(dir, "../abc", None), Err(PathError::InvalidSessionId(_))));
    }

    #[test]
    fn archive_names_are_recognised() {
        let name = "d6e7ae87-232c-44c3-a1f5-1194d5162b92.jsonl.deleted.2026-02-17T16-56-06.939Z";
        assert_eq!(
            parse_archive_name(name),
            Some((
                "d6e7ae87-232c-44c3-a1f5-1194d5162b92.jsonl",
                ArchiveReason::Deleted,
                "2026-02-17T16-56-06.939Z"
            ))
        );
        assert_eq!(
            parse_archive_name("a.jsonl.reset.2026-03-01T10-00-00.000Z.zst").map(|a| a.1),
            Some(ArchiveReason::Reset)
        );
        assert_eq!(
            parse_archive_name("sessions.json.bak.1767225600000").map(|a| a.1),
            Some(ArchiveReason::Bak)
        );
        assert_eq!(parse_archive_name("a.jsonl"), None);
        assert_eq!(parse_archive_name("notes.deleted.txt"), None);
        assert!(is_archived_transcript("d6e7.jsonl.deleted.2026-02-17T16-56-06.939Z"));
        assert!(!is_archived_transcript("sessions.json.bak.1767225600000"));
        assert!(!is_archived_transcript("d6e7.jsonl"));
    }

    #[test]
    fn only_transcripts_count_as_transcripts() {
        assert!(is_transcript_name("d6e7.jsonl", false));
        assert!(!is_transcript_name("events.jsonl", true));
        assert!(!is_transcript_name("d6e7.trajectory.jsonl", true));
        assert!(!is_transcript_name("sessions.json", true));
        let archive = "d6e7.jsonl.reset.2026-02-17T16-56-06.939Z";
        assert!(is_transcript_name(archive, true) && !is_transcript_name(archive, false));
    }
}
