//! Where a state folder keeps each agent's sessions.
//!
//! OpenClaw's state folder holds `agents/<agentId>/…`. Before 2026.8.1 an
//! agent's sessions are files in `sessions/` (`sessions.json` and one
//! `<sessionId>.jsonl` per transcript) — the [`Layout::Jsonl`] layout, where
//! sessionlog keeps its store log `events.jsonl` beside them. From 2026.8.1
//! they live in one SQLite database, `agent/openclaw-agent.sqlite`
//! ([`Layout::Sqlite`]), which this crate reads (never writes). When a
//! migration left both, the database is the agent's store: OpenClaw reads
//! only the database after migrating.

use std::fs;
use std::path::{Path, PathBuf};

use sessionlog_sessions::keys::normalize_agent_id;
use sessionlog_sessions::paths::{SESSIONS_JSON, STORE_LOG};

use sessionlog_sqlite_store::{AgentDatabase, TranscriptName, DATABASE_FILE};

use crate::error::{io_at, StoreError};

/// The SQLite database of an agent (OpenClaw 2026.8.1 and later), inside `agents/<id>/`.
pub const SQLITE_DATABASE: &str = "agent/openclaw-agent.sqlite";

/// Where one agent's session index and transcripts live.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// A sessions folder: `sessions.json`, `<sessionId>.jsonl` transcripts and
    /// sessionlog's `events.jsonl`.
    Jsonl {
        /// The folder (`agents/<id>/sessions`).
        sessions_dir: PathBuf,
    },
    /// OpenClaw's SQLite database (`agents/<id>/agent/openclaw-agent.sqlite`).
    Sqlite {
        /// The database file.
        database: PathBuf,
    },
}

impl Layout {
    /// The folder the store log and its projection live in: the sessions
    /// folder, or the database's folder.
    pub fn dir(&self) -> &Path {
        match self {
            Layout::Jsonl { sessions_dir } => sessions_dir,
            Layout::Sqlite { database } => database.parent().unwrap_or(Path::new(".")),
        }
    }
}

/// One agent of a state folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The agent id (normalised as OpenClaw does).
    pub id: String,
    /// Where its sessions live.
    pub layout: Layout,
}

/// The agents of a state folder (`agents/<id>/agent/openclaw-agent.sqlite`,
/// else `agents/<id>/sessions/`, sorted by folder name), or the
/// one agent of a bare sessions folder (`agents/<id>/sessions`, else `main`).
pub fn discover(path: &Path) -> Result<Vec<Agent>, StoreError> {
    let agents = path.join("agents");
    if agents.is_dir() {
        let mut items: Vec<PathBuf> =
            fs::read_dir(&agents).map_err(io_at(&agents))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        items.sort();
        let mut out = Vec::new();
        for folder in items {
            let id = folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let (sessions, database) = (folder.join("sessions"), folder.join(SQLITE_DATABASE));
            let layout = if database.is_file() {
                Layout::Sqlite { database }
            } else if sessions.is_dir() {
                Layout::Jsonl { sessions_dir: sessions }
            } else {
                continue;
            };
            out.push(Agent { id: normalize_agent_id(&id), layout });
        }
        return Ok(out);
    }
    if path.join(SESSIONS_JSON).is_file() || path.join(STORE_LOG).is_file() {
        let id = path
            .parent()
            .filter(|p| p.parent().and_then(|pp| pp.file_name()).is_some_and(|n| n == "agents"))
            .and_then(|p| p.file_name())
            .map_or("main".to_owned(), |n| n.to_string_lossy().into_owned());
        return Ok(vec![Agent {
            id: normalize_agent_id(&id),
            layout: Layout::Jsonl { sessions_dir: path.to_owned() },
        }]);
    }
    Err(StoreError::NotAStore { path: path.to_owned() })
}

/// The agents of `state`, only `agent`'s when one is named.
pub fn discover_agent(state: &Path, agent: Option<&str>) -> Result<Vec<Agent>, StoreError> {
    let wanted = agent.map(normalize_agent_id);
    let mut agents = discover(state)?;
    agents.retain(|a| wanted.as_ref().is_none_or(|w| *w == a.id));
    Ok(agents)
}

/// The sessions folder of `agent` in a state folder (`agents/<id>/sessions`),
/// whether or not it exists yet.
pub fn sessions_dir(state: &Path, agent: &str) -> PathBuf {
    state.join("agents").join(normalize_agent_id(agent)).join("sessions")
}

/// The transcripts under `path`: a file named explicitly (whatever its
/// name; an agent database stands for each transcript in it), a transcript
/// inside a database (`<db>#<sessionId>`), or every transcript found
/// recursively in a folder, sorted (archives only when `archived` is asked
/// for). In a folder, each `openclaw-agent.sqlite` stands for its
/// transcripts, as `<db>#<sessionId>` names; an agent folder with a database
/// is read from it alone (the `sessions/` a migration left beside it is
/// what the database holds).
pub fn transcripts_under(path: &Path, archived: bool) -> Result<Vec<PathBuf>, StoreError> {
    fn walk(dir: &Path, archived: bool, out: &mut Vec<PathBuf>) -> Result<(), StoreError> {
        let mut items: Vec<PathBuf> =
            fs::read_dir(dir).map_err(io_at(dir))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        items.sort();
        let migrated = dir.join(SQLITE_DATABASE).is_file();
        for item in items {
            let name = item.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if item.is_dir() {
                if migrated && name == "sessions" {
                    continue;
                }
                walk(&item, archived, out)?;
            } else if name == DATABASE_FILE {
                out.extend(database_transcripts(&item)?);
            } else if sessionlog_sessions::paths::is_transcript_name(name, archived) {
                out.push(item);
            }
        }
        Ok(())
    }
    if !path.is_dir() {
        if path.is_file() && path.extension().is_some_and(|e| e == "sqlite") {
            return database_transcripts(path);
        }
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    walk(path, archived, &mut out)?;
    Ok(out)
}

/// The transcripts of an agent database, as `<db>#<sessionId>` names.
fn database_transcripts(database: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let ids = AgentDatabase::open(database)?.transcript_ids()?;
    Ok(ids
        .into_iter()
        .map(|session_id| {
            PathBuf::from(TranscriptName { database: database.to_owned(), session_id }.to_string())
        })
        .collect())
}

/// The transcripts of a corpus of files and folders ([`transcripts_under`]
/// each, in order); refused when a path does not exist or nothing is found.
pub fn transcripts_in(corpus: &[PathBuf], archived: bool) -> Result<Vec<PathBuf>, StoreError> {
    let mut files = Vec::new();
    for c in corpus {
        if !c.exists() && crate::database_transcript(c).is_none() {
            return Err(StoreError::NotFound { path: c.clone() });
        }
        files.extend(transcripts_under(c, archived)?);
    }
    if files.is_empty() {
        let under = corpus.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ");
        return Err(StoreError::NoTranscripts { under });
    }
    Ok(files)
}

/// Renames a session's transcript in `dir` to `<file>.<reason>.<time>` as
/// OpenClaw archives it; returns the archive's name, or `None` when there is
/// no such file inside the folder or the archive name is taken (the file
/// stays where it is: archived, never deleted).
pub fn archive_transcript(
    dir: &Path,
    session_id: &str,
    session_file: Option<&str>,
    reason: &str,
    now_ms: i64,
) -> Result<Option<String>, StoreError> {
    let Ok(path) = sessionlog_sessions::paths::transcript_path(dir, session_id, session_file) else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    let stamp = sessionlog_event_log::file_stamp(now_ms).ok_or(StoreError::Time(now_ms))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let archived = format!("{name}.{reason}.{stamp}");
    let target = path.with_file_name(&archived);
    if target.exists() {
        tracing::warn!("{}: archive exists, transcript left in place", target.display());
        return Ok(None);
    }
    fs::rename(&path, &target).map_err(io_at(&path))?;
    Ok(Some(archived))
}
