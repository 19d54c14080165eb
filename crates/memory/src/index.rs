//! The index: one SQLite file (tables `meta`, `files`, `chunks`,
//! `embedding_cache`, `session_state`, FTS5 tables `chunks_fts` and
//! `chunks_cjk`, the sqlite-vec table `chunks_vec` when the extension loads),
//! the sync that keeps it a projection of the files, and the hybrid search
//! over it.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::chunk::{chunk_markdown, sha256_hex, ChunkSettings};
use crate::embed::{is_cjk, Embedder};
use crate::error::MemoryError;
use crate::score::{self, bm25_score, cosine, decay_multiplier, fuse, Fused, SearchSettings};
use crate::sources::{memory_files, read_transcript, transcript_files, Flattened, Position, Source};

/// Inline embedding batches hold at most this many UTF-8 bytes (OpenClaw's 8000).
const BATCH_BYTES: usize = 8000;
const META_KEY: &str = "memory_index_meta_v1";
/// The `meta` key holding the vector length `chunks_vec` was built for; absent
/// when the table is missing or stale (a sync without the extension removes it).
const VEC_META_KEY: &str = "chunks_vec_dims_v1";

/// Where the index is and what it covers.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// The agent workspace (holds `MEMORY.md` and `memory/`).
    pub workspace: PathBuf,
    /// The SQLite file of the index (see [`default_db_path`]).
    pub db_path: PathBuf,
    /// Directories whose `*.jsonl` transcripts are indexed (source `sessions`);
    /// empty = memory files only.
    pub sessions_dirs: Vec<PathBuf>,
    /// Chunk size and overlap.
    pub chunking: ChunkSettings,
    /// Use sqlite-vec KNN for the vector leg when the extension loads (default);
    /// `false` forces the exact brute-force scan (same results).
    pub sqlite_vec: bool,
    /// KNN answers only once the index holds this many chunks of the model;
    /// below, the exact scan of the vectors cached in memory is faster
    /// ([`DEFAULT_KNN_MIN_CHUNKS`]). 0 = KNN at any size.
    pub knn_min_chunks: usize,
}

/// Cosine scores closer than this to the last one kept are taken as ties by
/// the KNN leg (sqlite-vec ranks in single precision, the rescoring in double).
pub const KNN_TIE_TOLERANCE: f64 = 1e-5;

/// The most rows sqlite-vec's KNN answers (`SQLITE_VEC_VEC0_K_MAX`); past
/// it the KNN leg hands over to the exact scan.
const KNN_K_MAX: usize = 4096;

/// Chunks from which sqlite-vec KNN is the vector leg. Measured with
/// `scripts/bench-memory.sh` (384 dimensions, both legs in one run): the
/// exact scan of the vectors cached in memory was faster at every size
/// tried, 928 to 27,910 chunks (the `vec0` KNN leg 4 to 28 times slower, no
/// crossover), so KNN is kept for large indexes, where the cached vectors
/// (1.5 KiB a chunk, 88 MiB at this threshold) cost more memory than the
/// scan's speed is worth.
pub const DEFAULT_KNN_MIN_CHUNKS: usize = 60_000;

impl IndexConfig {
    /// Memory files only, the index in the workspace's state (`state` or
    /// `<workspace>/.sessionlog`), default chunking.
    pub fn new(workspace: &Path, state: Option<&Path>) -> Self {
        IndexConfig {
            workspace: workspace.to_owned(),
            db_path: default_db_path(workspace, state),
            sessions_dirs: Vec::new(),
            chunking: ChunkSettings::default(),
            sqlite_vec: true,
            knn_min_chunks: DEFAULT_KNN_MIN_CHUNKS,
        }
    }
}

/// `<state>/memory/index.sqlite`, the state defaulting to `<workspace>/.sessionlog`:
/// never among the user's memory files.
pub fn default_db_path(workspace: &Path, state: Option<&Path>) -> PathBuf {
    let state = state.map_or_else(|| workspace.join(".sessionlog"), Path::to_path_buf);
    state.join("memory").join("index.sqlite")
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// Everything was rebuilt (no index yet, forced, or the model or chunking changed).
    pub full_reindex: bool,
    /// Files (re)indexed.
    pub files_indexed: usize,
    /// Files unchanged since the last sync.
    pub files_unchanged: usize,
    /// Files gone from disk and removed from the index.
    pub files_removed: usize,
    /// Texts sent to the embedder.
    pub embedded: usize,
    /// Chunks whose vector came from the embedding cache.
    pub cached: usize,
    /// Files skipped, with why (unreadable transcripts).
    pub warnings: Vec<String>,
}

/// One search hit, as OpenClaw's `memory_search` returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    /// Workspace-relative path (`sessions/<file>.jsonl` for transcripts).
    pub path: String,
    /// First line (1-based; JSONL lines for transcripts).
    pub start_line: u64,
    /// Last line (inclusive).
    pub end_line: u64,
    /// Fused score in [0, 1].
    pub score: f64,
    /// The chunk text, at most `snippet_chars` characters.
    pub snippet: String,
    /// `memory` or `sessions`.
    pub source: String,
}

/// The index's state, as OpenClaw's status reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Provider id (`hash` when no model is installed).
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Vector length.
    pub dimensions: usize,
    /// Why a fallback provider is in use, if it is.
    pub fallback: Option<String>,
    /// Files in the index.
    pub files: u64,
    /// Chunks in the index.
    pub chunks: u64,
    /// Files on disk that the next sync would (re)index or remove.
    pub dirty_files: Vec<String>,
    /// The model the index was built with, when it differs from the provider's
    /// (the next sync rebuilds everything).
    pub index_model: Option<String>,
    /// Per source: files and chunks.
    pub sources: Vec<SourceCount>,
    /// Embedding cache entries.
    pub cache_entries: u64,
    /// The workspace.
    pub workspace: String,
    /// The index file.
    pub db_path: String,
    /// Full-text search.
    pub fts: Availability,
    /// Vector search.
    pub vector: VectorStatus,
}

/// Files and chunks of one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    /// `memory` or `sessions`.
    pub source: String,
    /// Files.
    pub files: u64,
    /// Chunks.
    pub chunks: u64,
}

/// Whether a search leg works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Availability {
    /// Enabled by configuration.
    pub enabled: bool,
    /// Usable.
    pub available: bool,
    /// Why not, when not.
    pub error: Option<String>,
    /// The FTS5 tokenizers in use.
    pub tokenizers: Vec<String>,
}

/// The vector leg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VectorStatus {
    /// Enabled.
    pub enabled: bool,
    /// Usable.
    pub available: bool,
    /// `sqlite-vec` (KNN over the `vec0` table `chunks_vec`, candidates
    /// rescored exactly) or `brute-force` (exact cosine over every stored vector).
    pub backend: String,
    /// Vector length.
    pub dims: usize,
    /// Why sqlite-vec is not used, when it is not.
    #[serde(rename = "loadError")]
    pub load_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    model: String,
    provider: String,
    provider_key: String,
    sources: Vec<String>,
    chunk_tokens: usize,
    chunk_overlap: usize,
    vector_dims: usize,
}

/// The memory index: an open SQLite file plus the embedder that fills it.
pub struct MemoryIndex {
    config: IndexConfig,
    conn: Connection,
    embedder: Box<dyn Embedder>,
    fallback: Option<String>,
    fts_error: Option<String>,
    /// Why the `chunks_vec` table cannot be kept (the extension did not load);
    /// `None` = it is kept in step with `chunks`.
    vec_error: Option<String>,
    /// Whether searches use KNN (the table is kept and the config allows it).
    knn: bool,
    /// Every stored vector of the current model, loaded at the first search
    /// and dropped by `sync` (ids in row order, vectors end to end).
    vectors: std::cell::RefCell<Option<(Vec<String>, Vec<f32>)>>,
    /// The number of chunks with a vector, counted at the first search and
    /// dropped by `sync`.
    stored: std::cell::Cell<Option<usize>>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryIndex")
            .field("db", &self.config.db_path)
            .field("embedder", &self.embedder)
            .finish()
    }
}

impl MemoryIndex {
    /// Opens (creating if needed) the index file and its tables.
    pub fn open(config: IndexConfig, embedder: Box<dyn Embedder>) -> Result<Self, MemoryError> {
        if let Some(parent) = config.db_path.parent() {
            fs::create_dir_all(parent)
                .map_err(|source| MemoryError::Io { path: parent.to_owned(), source })?;
        }
        let path = config.db_path.clone();
        let sql = |source| MemoryError::Sqlite { path: path.clone(), source };
        // Before the connection opens: auto-extensions load into later connections.
        #[cfg(feature = "sqlite-vec")]
        let registered = register_sqlite_vec();
        #[cfg(not(feature = "sqlite-vec"))]
        let registered: Result<(), String> = Err("built without the sqlite-vec feature".into());
        let conn = Connection::open(&config.db_path).map_err(sql)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, source TEXT NOT NULL DEFAULT 'memory',
               hash TEXT NOT NULL, mtime INTEGER NOT NULL, size INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS chunks (id TEXT PRIMARY KEY, path TEXT NOT NULL,
               source TEXT NOT NULL DEFAULT 'memory', start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
               hash TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER, text TEXT NOT NULL, embedding BLOB,
               updated_at INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);
             CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);
             CREATE TABLE IF NOT EXISTS embedding_cache (provider TEXT NOT NULL, model TEXT NOT NULL,
               provider_key TEXT NOT NULL, hash TEXT NOT NULL, embedding BLOB NOT NULL, dims INTEGER,
               updated_at INTEGER NOT NULL, PRIMARY KEY (provider, model, provider_key, hash));
             CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
             CREATE TABLE IF NOT EXISTS session_state (path TEXT PRIMARY KEY, line INTEGER NOT NULL,
               byte_offset INTEGER NOT NULL, head TEXT NOT NULL, lines TEXT NOT NULL, line_map TEXT NOT NULL);",
        )
        .map_err(sql)?;
        let fts_error = conn
            .execute_batch(
                "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, id UNINDEXED, path UNINDEXED,
                   source UNINDEXED, model UNINDEXED, start_line UNINDEXED, end_line UNINDEXED,
                   tokenize = 'unicode61 remove_diacritics 2');
                 CREATE VIRTUAL TABLE IF NOT EXISTS chunks_cjk USING fts5(text, id UNINDEXED, path UNINDEXED,
                   model UNINDEXED, tokenize = 'trigram');",
            )
            .err()
            .map(|e| e.to_string());
        let vec_error = registered.and_then(|()| vec_table(&conn, embedder.model(), embedder.dims())).err();
        let knn = vec_error.is_none() && config.sqlite_vec;
        Ok(MemoryIndex {
            config,
            conn,
            embedder,
            fallback: None,
            fts_error,
            vec_error,
            knn,
            vectors: Default::default(),
            stored: Default::default(),
        })
    }

    /// Records why the embedder is a fallback (reported by [`status`](Self::status)).
    pub fn with_fallback_reason(mut self, reason: impl Into<String>) -> Self {
        self.fallback = Some(reason.into());
        self
    }

    /// Why the embedder is a fallback, if it is.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The configuration.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// The embedder.
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> MemoryError + '_ {
        move |source| MemoryError::Sqlite { path: self.config.db_path.clone(), source }
    }

    fn meta(&self) -> Meta {
        let mut sources = vec!["memory".to_owned()];
        if !self.config.sessions_dirs.is_empty() {
            sources.push("sessions".to_owned());
        }
        Meta {
            model: self.embedder.model().to_owned(),
            provider: self.embedder.id().to_owned(),
            provider_key: self.embedder.provider_key(),
            sources,
            chunk_tokens: self.config.chunking.tokens,
            chunk_overlap: self.config.chunking.overlap,
            vector_dims: self.embedder.dims(),
        }
    }

    fn stored_meta(&self) -> Result<Option<Meta>, MemoryError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [META_KEY], |r| r.get(0))
            .optional()
            .map_err(self.sql())?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Brings the index up to date with the files: unchanged files are
    /// skipped, transcripts are read from where the last sync stopped, vanished
    /// files leave the index; everything is rebuilt when `force` is set or the
    /// embedder, its model, the sources or the chunking changed. Chunks whose
    /// text was embedded before (same provider, model and key) reuse the cached
    /// vector. `now_ms` stamps the rows.
    pub fn sync(&mut self, force: bool, now_ms: i64) -> Result<SyncReport, MemoryError> {
        let mut report = SyncReport::default();
        let meta = self.meta();
        let full = force || self.stored_meta()?.as_ref() != Some(&meta);
        report.full_reindex = full;
        self.vectors.replace(None);
        self.stored.set(None);
        let tx = self.conn.unchecked_transaction().map_err(self.sql())?;
        if full {
            tx.execute_batch(
                "DELETE FROM chunks; DELETE FROM files; DELETE FROM session_state;
                 DELETE FROM chunks_fts; DELETE FROM chunks_cjk;",
            )
            .map_err(self.sql())?;
            if self.vec_error.is_none() {
                tx.execute_batch("DELETE FROM chunks_vec;").map_err(self.sql())?;
            }
        }
        if self.vec_error.is_some() {
            // `chunks_vec` will not follow this sync: mark it stale so that a
            // connection with the extension rebuilds it from `chunks`.
            tx.execute("DELETE FROM meta WHERE key = ?1", [VEC_META_KEY]).map_err(self.sql())?;
        }
        let mut seen: HashSet<String> = HashSet::new();

        let files = memory_files(&self.config.workspace)
            .map_err(|source| MemoryError::Io { path: self.config.workspace.join("memory"), source })?;
        for file in files {
            seen.insert(file.path.clone());
            let bytes =
                fs::read(&file.abs).map_err(|source| MemoryError::Io { path: file.abs.clone(), source })?;
            let content = String::from_utf8_lossy(&bytes).into_owned();
            let hash = sha256_hex(&content);
            if self.file_hash(&file.path)?.as_deref() == Some(hash.as_str()) {
                report.files_unchanged += 1;
                continue;
            }
            let (mtime, size) = stat(&file.abs);
            self.index_text(&file.path, Source::Memory, &content, None, now_ms, &mut report)?;
            self.upsert_file(&file.path, Source::Memory, &hash, mtime, size)?;
            report.files_indexed += 1;
        }

        let transcripts = transcript_files(&self.config.sessions_dirs)
            .map_err(|source| MemoryError::Io { path: self.config.sessions_dirs[0].clone(), source })?;
        for (rel, abs) in transcripts {
            match self.sync_transcript(&rel, &abs, now_ms, &mut report) {
                Ok(()) => {
                    seen.insert(rel);
                }
                Err(MemoryError::Transcript(e)) => report.warnings.push(e.to_string()),
                Err(e) => return Err(e),
            }
        }

        let indexed: Vec<String> = {
            let mut stmt = self.conn.prepare("SELECT path FROM files").map_err(self.sql())?;
            let rows = stmt.query_map([], |r| r.get(0)).map_err(self.sql())?;
            rows.collect::<Result<_, _>>().map_err(self.sql())?
        };
        for path in indexed.into_iter().filter(|p| !seen.contains(p)) {
            self.delete_rows(&path)?;
            self.conn.execute("DELETE FROM files WHERE path = ?1", [&path]).map_err(self.sql())?;
            self.conn.execute("DELETE FROM session_state WHERE path = ?1", [&path]).map_err(self.sql())?;
            report.files_removed += 1;
        }
        let meta_json = serde_json::to_string(&meta).expect("meta serialises");
        self.conn
            .execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![META_KEY, meta_json])
            .map_err(self.sql())?;
        tx.commit().map_err(self.sql())?;
        Ok(report)
    }

    fn sync_transcript(
        &self,
        rel: &str,
        abs: &Path,
        now_ms: i64,
        report: &mut SyncReport,
    ) -> Result<(), MemoryError> {
        type State = (i64, i64, String, String, String);
        let state: Option<State> = self
            .conn
            .query_row(
                "SELECT line, byte_offset, head, lines, line_map FROM session_state WHERE path = ?1",
                [rel],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()
            .map_err(self.sql())?;
        let (mtime, size) = stat(abs);
        let head = first_line_hash(abs).map_err(|source| MemoryError::Io { path: abs.to_owned(), source })?;
        let (mut pos, mut flat) = match state {
            Some((line, offset, stored_head, lines, map)) if offset as u64 <= size && stored_head == head => {
                (
                    Position { line: line as u64, offset: offset as u64 },
                    Flattened {
                        lines: serde_json::from_str(&lines).unwrap_or_default(),
                        line_map: serde_json::from_str(&map).unwrap_or_default(),
                    },
                )
            }
            // New, shrunk, or its first line changed (rewritten): read from the start.
            _ => (Position::default(), Flattened::default()),
        };
        let before = pos;
        pos = read_transcript(abs, pos, &mut flat)?;
        let indexed = self.file_hash(rel)?.is_some();
        if pos == before && indexed {
            report.files_unchanged += 1;
            return Ok(());
        }
        let content = flat.content();
        self.index_text(rel, Source::Sessions, &content, Some(&flat.line_map), now_ms, report)?;
        self.upsert_file(rel, Source::Sessions, &flat.hash(), mtime, size)?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO session_state (path, line, byte_offset, head, lines, line_map) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    rel,
                    pos.line as i64,
                    pos.offset as i64,
                    head,
                    serde_json::to_string(&flat.lines).expect("strings serialise"),
                    serde_json::to_string(&flat.line_map).expect("numbers serialise")
                ],
            )
            .map_err(self.sql())?;
        report.files_indexed += 1;
        Ok(())
    }

    fn file_hash(&self, path: &str) -> Result<Option<String>, MemoryError> {
        self.conn
            .query_row("SELECT hash FROM files WHERE path = ?1", [path], |r| r.get(0))
            .optional()
            .map_err(self.sql())
    }

    fn upsert_file(
        &self,
        path: &str,
        source: Source,
        hash: &str,
        mtime: i64,
        size: u64,
    ) -> Result<(), MemoryError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO files (path, source, hash, mtime, size) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![path, source.as_str(), hash, mtime, size as i64],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    fn delete_rows(&self, path: &str) -> Result<(), MemoryError> {
        if self.vec_error.is_none() {
            let ids: Vec<String> = {
                let mut stmt =
                    self.conn.prepare_cached("SELECT id FROM chunks WHERE path = ?1").map_err(self.sql())?;
                let rows = stmt.query_map([path], |r| r.get(0)).map_err(self.sql())?;
                rows.collect::<Result<_, _>>().map_err(self.sql())?
            };
            let mut del =
                self.conn.prepare_cached("DELETE FROM chunks_vec WHERE id = ?1").map_err(self.sql())?;
            for id in ids {
                del.execute([id]).map_err(self.sql())?;
            }
        }
        for table in ["chunks", "chunks_fts", "chunks_cjk"] {
            self.conn.execute(&format!("DELETE FROM {table} WHERE path = ?1"), [path]).map_err(self.sql())?;
        }
        Ok(())
    }

    /// Chunks `content`, embeds what the cache lacks, and replaces the rows of `path`.
    fn index_text(
        &self,
        path: &str,
        source: Source,
        content: &str,
        line_map: Option<&[u64]>,
        now_ms: i64,
        report: &mut SyncReport,
    ) -> Result<(), MemoryError> {
        let chunks = chunk_markdown(content, self.config.chunking);
        let vectors = self.embeddings(
            &chunks.iter().map(|c| (c.hash.as_str(), c.text.as_str())).collect::<Vec<_>>(),
            now_ms,
            report,
        )?;
        self.delete_rows(path)?;
        let model = self.embedder.model();
        let dims = self.embedder.dims();
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO chunks (id, path, source, start_line, end_line, hash, model, dims, text, embedding, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .map_err(self.sql())?;
        let mut fts = self
            .conn
            .prepare_cached(
                "INSERT INTO chunks_fts (text, id, path, source, model, start_line, end_line) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(self.sql())?;
        let mut cjk = self
            .conn
            .prepare_cached("INSERT INTO chunks_cjk (text, id, path, model) VALUES (?1, ?2, ?3, ?4)")
            .map_err(self.sql())?;
        let map_line = |l: usize| -> u64 {
            match line_map {
                Some(m) => m.get(l - 1).copied().unwrap_or(l as u64),
                None => l as u64,
            }
        };
        let mut ids = HashSet::new();
        for (chunk, vector) in chunks.iter().zip(vectors) {
            let (start, end) = (map_line(chunk.start_line), map_line(chunk.end_line));
            let id = sha256_hex(&format!(
                "{}:{}:{}:{}:{}:{}",
                source.as_str(),
                path,
                start,
                end,
                chunk.hash,
                model
            ));
            if !ids.insert(id.clone()) {
                continue;
            }
            insert
                .execute(params![
                    id,
                    path,
                    source.as_str(),
                    start as i64,
                    end as i64,
                    chunk.hash,
                    model,
                    dims as i64,
                    chunk.text,
                    to_blob(&vector),
                    now_ms
                ])
                .map_err(self.sql())?;
            if self.vec_error.is_none() && vector.len() == dims {
                let mut vec = self
                    .conn
                    .prepare_cached("INSERT INTO chunks_vec (id, embedding) VALUES (?1, ?2)")
                    .map_err(self.sql())?;
                vec.execute(params![id, to_blob(&vector)]).map_err(self.sql())?;
            }
            fts.execute(params![chunk.text, id, path, source.as_str(), model, start as i64, end as i64])
                .map_err(self.sql())?;
            if chunk.text.chars().any(is_cjk) {
                cjk.execute(params![chunk.text, id, path, model]).map_err(self.sql())?;
            }
        }
        Ok(())
    }

    /// Vectors for `(hash, text)` pairs: cached ones first, the rest embedded
    /// in batches of at most [`BATCH_BYTES`] and cached.
    fn embeddings(
        &self,
        items: &[(&str, &str)],
        now_ms: i64,
        report: &mut SyncReport,
    ) -> Result<Vec<Vec<f32>>, MemoryError> {
        let (provider, model, key) =
            (self.embedder.id(), self.embedder.model(), self.embedder.provider_key());
        let mut out: Vec<Option<Vec<f32>>> = Vec::with_capacity(items.len());
        let mut lookup = self
            .conn
            .prepare_cached(
                "SELECT embedding FROM embedding_cache WHERE provider = ?1 AND model = ?2 AND provider_key = ?3 AND hash = ?4",
            )
            .map_err(self.sql())?;
        let mut missing: Vec<usize> = Vec::new();
        let mut pending: HashMap<&str, usize> = HashMap::new();
        for (i, (hash, _)) in items.iter().enumerate() {
            let blob: Option<Vec<u8>> = lookup
                .query_row(params![provider, model, key, hash], |r| r.get(0))
                .optional()
                .map_err(self.sql())?;
            match blob {
                Some(b) => {
                    report.cached += 1;
                    out.push(Some(from_blob(&b)));
                }
                None => {
                    out.push(None);
                    if pending.insert(hash, i).is_none() {
                        missing.push(i);
                    }
                }
            }
        }
        let mut store = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO embedding_cache (provider, model, provider_key, hash, embedding, dims, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(self.sql())?;
        let mut start = 0;
        while start < missing.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < missing.len() && (end == start || bytes + items[missing[end]].1.len() <= BATCH_BYTES)
            {
                bytes += items[missing[end]].1.len();
                end += 1;
            }
            let texts: Vec<&str> = missing[start..end].iter().map(|&i| items[i].1).collect();
            let vectors = self.embedder.embed_batch(&texts)?;
            if vectors.len() != texts.len() {
                return Err(MemoryError::Embed(crate::embed::EmbedError {
                    provider: provider.to_owned(),
                    message: format!("{} vectors for {} texts", vectors.len(), texts.len()),
                }));
            }
            report.embedded += texts.len();
            for (&i, v) in missing[start..end].iter().zip(vectors) {
                store
                    .execute(params![provider, model, key, items[i].0, to_blob(&v), v.len() as i64, now_ms])
                    .map_err(self.sql())?;
                out[i] = Some(v);
            }
            start = end;
        }
        // Duplicated texts take the vector of their first occurrence.
        let resolved: Vec<Vec<f32>> = (0..items.len())
            .map(|i| match &out[i] {
                Some(v) => v.clone(),
                None => out[pending[items[i].0]].clone().unwrap_or_default(),
            })
            .collect();
        Ok(resolved)
    }

    /// Hybrid search (spec §3.2): keyword and vector legs, fusion, optional
    /// decay and MMR, the score floor with the relaxed keyword floor, the top
    /// `max_results`. `now_ms` is the clock temporal decay measures age by.
    pub fn search(
        &self,
        query: &str,
        settings: &SearchSettings,
        now_ms: i64,
    ) -> Result<Vec<SearchResult>, MemoryError> {
        let query = query.trim();
        if query.is_empty() || settings.max_results == 0 {
            return Ok(Vec::new());
        }
        let limit = settings.leg_limit();
        let model = self.embedder.model().to_owned();
        let keyword =
            if self.fts_error.is_none() { self.keyword_leg(query, &model, limit)? } else { Vec::new() };
        let (vector, weights) = match self.embedder.embed_query(query) {
            Ok(q) if q.iter().any(|&x| x != 0.0) => (self.vector_leg(&q, &model, limit)?, settings.weights()),
            Ok(_) => (Vec::new(), settings.weights()),
            Err(e) => {
                tracing::warn!(error = %e, "query embedding failed; keyword results only");
                (Vec::new(), (0.0, 1.0))
            }
        };
        let mut fused = fuse(&vector, &keyword, weights);
        let rows = self.rows(fused.iter().map(|f| f.id.as_str()))?;
        if settings.decay {
            let mtimes = self.mtimes()?;
            for f in &mut fused {
                let row = &rows[&f.id];
                let born = if score::is_evergreen(&row.source, &row.path) && row.source == "memory" {
                    None
                } else {
                    score::dated_path_ms(&row.path).or_else(|| mtimes.get(&row.path).copied())
                };
                if let Some(born) = born {
                    f.score *= decay_multiplier(now_ms - born, settings.half_life_days);
                }
            }
        }
        score::sort_by_score(&mut fused);
        if settings.mmr && fused.len() > 1 {
            let scores: Vec<f64> = fused.iter().map(|f| f.score).collect();
            let snippets: Vec<&str> = fused.iter().map(|f| rows[&f.id].text.as_str()).collect();
            let order = score::mmr_order(&scores, &snippets, settings.mmr_lambda);
            fused = order.into_iter().map(|i| fused[i].clone()).collect();
        }
        let floor = settings.min_score();
        let mut picked: Vec<&Fused> =
            fused.iter().filter(|f| f.score >= floor).take(settings.max_results).collect();
        if picked.is_empty() && !keyword.is_empty() {
            // Relaxed keyword floor (OpenClaw since 2026.2.27, floor 0 in later
            // releases): a keyword-only hit scores at most textWeight, below the
            // default minScore, so when nothing passes, the keyword-backed rows
            // are returned rather than nothing.
            picked = fused.iter().filter(|f| f.text_score > 0.0).take(settings.max_results).collect();
        }
        Ok(picked
            .into_iter()
            .map(|f| {
                let row = &rows[&f.id];
                SearchResult {
                    path: row.path.clone(),
                    start_line: row.start_line,
                    end_line: row.end_line,
                    score: f.score,
                    snippet: score::snippet(&row.text, settings.snippet_chars),
                    source: row.source.clone(),
                }
            })
            .collect())
    }

    /// The keyword leg: `(chunk id, mapped BM25 score)`, best first.
    fn keyword_leg(&self, query: &str, model: &str, limit: usize) -> Result<Vec<(String, f64)>, MemoryError> {
        let q = fts_queries(query);
        let mut best: HashMap<String, f64> = HashMap::new();
        let mut run = |table: &str, expr: &str| -> Result<usize, MemoryError> {
            let sql = format!("SELECT id, bm25({table}) FROM {table} WHERE {table} MATCH ?1 AND model = ?2 ORDER BY bm25({table}) LIMIT ?3");
            let mut stmt = self.conn.prepare_cached(&sql).map_err(self.sql())?;
            let rows = stmt
                .query_map(params![expr, model, limit as i64], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?))
                })
                .map_err(self.sql())?;
            let mut n = 0;
            for row in rows {
                let (id, rank) = row.map_err(self.sql())?;
                let s = bm25_score(rank);
                let e = best.entry(id).or_insert(0.0);
                *e = e.max(s);
                n += 1;
            }
            Ok(n)
        };
        if let Some((and, or)) = &q.words {
            if run("chunks_fts", and)? == 0 {
                if let Some(or) = or {
                    run("chunks_fts", or)?;
                }
            }
        }
        if let Some(cjk) = &q.cjk {
            run("chunks_cjk", cjk)?;
        }
        let mut out: Vec<(String, f64)> = best.into_iter().collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(limit);
        Ok(out)
    }

    /// The vector leg alone: the ids of the `limit` chunks nearest to `query`
    /// with their cosine similarity, best first (ties by id), by sqlite-vec
    /// KNN or by the exact scan, whichever [`status`](Self::status) reports.
    pub fn vector_candidates(&self, query: &[f32], limit: usize) -> Result<Vec<(String, f64)>, MemoryError> {
        self.vector_leg(query, self.embedder.model(), limit)
    }

    /// The vector leg: `(chunk id, cosine similarity)`, best first, the
    /// `limit` nearest. With sqlite-vec, KNN over `chunks_vec` picks the
    /// candidates; otherwise every stored vector is scanned.
    fn vector_leg(
        &self,
        query: &[f32],
        model: &str,
        limit: usize,
    ) -> Result<Vec<(String, f64)>, MemoryError> {
        // KNN ranks every vector in `chunks_vec`: only when all are `model`'s.
        if self.uses_knn()? && query.len() == self.embedder.dims() && !self.holds_other_models(model)? {
            self.knn_leg(query, model, limit)
        } else {
            self.brute_force_leg(query, model, limit)
        }
    }

    /// Whether the vector leg goes to sqlite-vec KNN: it is available and
    /// allowed, and the index holds at least `knn_min_chunks` vectors.
    fn uses_knn(&self) -> Result<bool, MemoryError> {
        if !self.knn {
            return Ok(false);
        }
        let stored = match self.stored.get() {
            Some(n) => n,
            None => {
                let n: i64 = self
                    .conn
                    .query_row("SELECT COUNT(*) FROM chunks WHERE embedding IS NOT NULL", [], |r| r.get(0))
                    .map_err(self.sql())?;
                self.stored.set(Some(n as usize));
                n as usize
            }
        };
        Ok(stored >= self.config.knn_min_chunks)
    }

    /// Whether chunks embedded by a model other than `model` are stored (an
    /// index not yet synced after a change of model of the same length).
    fn holds_other_models(&self, model: &str) -> Result<bool, MemoryError> {
        self.conn
            .query_row("SELECT EXISTS(SELECT 1 FROM chunks WHERE model <> ?1)", [model], |r| r.get(0))
            .map_err(self.sql())
    }

    /// KNN candidates (`MATCH ? AND k = ?`, cosine distance), rescored with
    /// the exact cosine of the stored vectors and ordered as
    /// [`brute_force_leg`](Self::brute_force_leg) orders them (score, then id).
    /// sqlite-vec returns `k` rows in its own order among equal distances, so
    /// while the worst row returned is within [`KNN_TIE_TOLERANCE`] of the
    /// `limit`-th score (a tie, such as the same text in two files, or a
    /// single-precision near-tie), `k` is doubled: the rows kept are those the
    /// exact scan keeps.
    fn knn_leg(&self, query: &[f32], model: &str, limit: usize) -> Result<Vec<(String, f64)>, MemoryError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT v.id, c.embedding FROM chunks_vec v JOIN chunks c ON c.id = v.id
                 WHERE v.embedding MATCH ?1 AND k = ?2",
            )
            .map_err(self.sql())?;
        let blob = to_blob(query);
        // One row past `limit` shows whether the boundary is a tie.
        let mut k = limit.saturating_add(1).min(KNN_K_MAX);
        loop {
            let rows = stmt
                .query_map(params![blob, k as i64], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))
                .map_err(self.sql())?;
            let mut scored = Vec::new();
            for row in rows {
                let (id, blob) = row.map_err(self.sql())?;
                scored.push((id, cosine(query, &from_blob(&blob))));
            }
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let returned = scored.len();
            // Every row came back, or one past `limit` that is clearly worse.
            let boundary_clear = match (scored.get(limit - 1), scored.last()) {
                (Some((_, kth)), Some((_, worst))) if returned > limit => worst + KNN_TIE_TOLERANCE < *kth,
                _ => false,
            };
            if returned < k || boundary_clear {
                scored.truncate(limit);
                return Ok(scored);
            }
            if k >= KNN_K_MAX {
                // sqlite-vec answers at most KNN_K_MAX rows: the exact scan decides.
                return self.brute_force_leg(query, model, limit);
            }
            k = k.saturating_mul(2).min(KNN_K_MAX);
        }
    }

    /// The exact vector leg: cosine against every stored vector of the model.
    fn brute_force_leg(
        &self,
        query: &[f32],
        model: &str,
        limit: usize,
    ) -> Result<Vec<(String, f64)>, MemoryError> {
        if self.vectors.borrow().is_none() {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id, embedding FROM chunks WHERE model = ?1 ORDER BY id")
                .map_err(self.sql())?;
            let mut rows = stmt.query([model]).map_err(self.sql())?;
            let (mut ids, mut data) = (Vec::new(), Vec::new());
            let dims = self.embedder.dims();
            while let Some(row) = rows.next().map_err(self.sql())? {
                let blob = row
                    .get_ref(1)
                    .map_err(self.sql())?
                    .as_blob_or_null()
                    .map_err(|e| self.sql()(e.into()))?;
                let Some(blob) = blob else { continue };
                if blob.len() != dims * 4 {
                    continue;
                }
                data.extend(blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                ids.push(row.get(0).map_err(self.sql())?);
            }
            self.vectors.replace(Some((ids, data)));
        }
        let cache = self.vectors.borrow();
        let (ids, data) = cache.as_ref().expect("loaded above");
        let dims = self.embedder.dims().max(1);
        let mut scored: Vec<(usize, f64)> =
            data.chunks_exact(dims).map(|v| cosine(query, v)).enumerate().collect();
        // Ids are sorted, so the index breaks ties as the id would.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(limit);
        let scored: Vec<(String, f64)> = scored.into_iter().map(|(i, s)| (ids[i].clone(), s)).collect();
        Ok(scored)
    }

    fn rows<'a>(&self, ids: impl Iterator<Item = &'a str>) -> Result<HashMap<String, Row>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT path, source, start_line, end_line, text FROM chunks WHERE id = ?1")
            .map_err(self.sql())?;
        let mut out = HashMap::new();
        for id in ids {
            let row = stmt
                .query_row([id], |r| {
                    Ok(Row {
                        path: r.get(0)?,
                        source: r.get(1)?,
                        start_line: r.get::<_, i64>(2)? as u64,
                        end_line: r.get::<_, i64>(3)? as u64,
                        text: r.get(4)?,
                    })
                })
                .map_err(self.sql())?;
            out.insert(id.to_owned(), row);
        }
        Ok(out)
    }

    fn mtimes(&self) -> Result<HashMap<String, i64>, MemoryError> {
        let mut stmt = self.conn.prepare_cached("SELECT path, mtime FROM files").map_err(self.sql())?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The index's state: provider, counts, dirty files, FTS and vector availability.
    pub fn status(&self) -> Result<Status, MemoryError> {
        let count = |sql: &str| -> Result<u64, MemoryError> {
            self.conn.query_row(sql, [], |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(self.sql())
        };
        let mut sources = Vec::new();
        for s in ["memory", "sessions"] {
            let files: i64 = self
                .conn
                .query_row("SELECT COUNT(*) FROM files WHERE source = ?1", [s], |r| r.get(0))
                .map_err(self.sql())?;
            let chunks: i64 = self
                .conn
                .query_row("SELECT COUNT(*) FROM chunks WHERE source = ?1", [s], |r| r.get(0))
                .map_err(self.sql())?;
            if files > 0 || s == "memory" || !self.config.sessions_dirs.is_empty() {
                sources.push(SourceCount {
                    source: s.to_owned(),
                    files: files as u64,
                    chunks: chunks as u64,
                });
            }
        }
        let stored = self.stored_meta()?;
        let index_model =
            stored.as_ref().filter(|m| m.model != self.embedder.model()).map(|m| m.model.clone());
        Ok(Status {
            provider: self.embedder.id().to_owned(),
            model: self.embedder.model().to_owned(),
            dimensions: self.embedder.dims(),
            fallback: self.fallback.clone(),
            files: count("SELECT COUNT(*) FROM files")?,
            chunks: count("SELECT COUNT(*) FROM chunks")?,
            dirty_files: self.dirty_files(stored.as_ref())?,
            index_model,
            sources,
            cache_entries: count("SELECT COUNT(*) FROM embedding_cache")?,
            workspace: self.config.workspace.display().to_string(),
            db_path: self.config.db_path.display().to_string(),
            fts: Availability {
                enabled: true,
                available: self.fts_error.is_none(),
                error: self.fts_error.clone(),
                tokenizers: vec!["unicode61 remove_diacritics 2".into(), "trigram".into()],
            },
            vector: VectorStatus {
                enabled: true,
                available: true,
                backend: if self.uses_knn()? { "sqlite-vec" } else { "brute-force" }.into(),
                dims: self.embedder.dims(),
                load_error: if self.config.sqlite_vec { self.vec_error.clone() } else { None },
            },
        })
    }

    /// Files the next sync would index or remove (all of them when the index
    /// identity changed).
    fn dirty_files(&self, stored: Option<&Meta>) -> Result<Vec<String>, MemoryError> {
        let identity_changed = stored != Some(&self.meta());
        let indexed: HashMap<String, (String, i64)> = {
            let mut stmt = self.conn.prepare("SELECT path, hash, size FROM files").map_err(self.sql())?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))).map_err(self.sql())?;
            rows.collect::<Result<_, _>>().map_err(self.sql())?
        };
        let mut dirty = Vec::new();
        let mut seen = HashSet::new();
        let files = memory_files(&self.config.workspace)
            .map_err(|source| MemoryError::Io { path: self.config.workspace.clone(), source })?;
        for f in files {
            seen.insert(f.path.clone());
            let hash = fs::read(&f.abs).map(|b| sha256_hex(&String::from_utf8_lossy(&b))).unwrap_or_default();
            if identity_changed || indexed.get(&f.path).map(|x| &x.0) != Some(&hash) {
                dirty.push(f.path);
            }
        }
        let transcripts = transcript_files(&self.config.sessions_dirs)
            .map_err(|source| MemoryError::Io { path: self.config.workspace.clone(), source })?;
        for (rel, abs) in transcripts {
            seen.insert(rel.clone());
            let (_, size) = stat(&abs);
            if identity_changed || indexed.get(&rel).map(|x| x.1) != Some(size as i64) {
                dirty.push(rel);
            }
        }
        for path in indexed.keys() {
            if !seen.contains(path) {
                dirty.push(path.clone());
            }
        }
        dirty.sort();
        Ok(dirty)
    }
}

struct Row {
    path: String,
    source: String,
    start_line: u64,
    end_line: u64,
    text: String,
}

/// FTS5 queries for one search query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsQueries {
    /// Over `chunks_fts`: the words AND-joined, and OR-joined when there are several.
    pub words: Option<(String, Option<String>)>,
    /// Over `chunks_cjk` (trigram): every three-character window of each CJK
    /// run, OR-joined. Runs shorter than three characters are left to the
    /// vector leg (a trigram index cannot match them).
    pub cjk: Option<String>,
}

/// Builds the FTS5 expressions for a query: Unicode word tokens, each quoted.
pub fn fts_queries(query: &str) -> FtsQueries {
    let mut words = Vec::new();
    let mut grams = Vec::new();
    for w in crate::embed::words(query) {
        let chars: Vec<char> = w.chars().collect();
        if chars.iter().all(|&c| is_cjk(c)) {
            for win in chars.windows(3) {
                let g: String = win.iter().collect();
                if !grams.contains(&g) {
                    grams.push(g);
                }
            }
        } else if !words.contains(&w) {
            words.push(w);
        }
    }
    let quote = |w: &String| format!("\"{}\"", w.replace('"', ""));
    let words = if words.is_empty() {
        None
    } else {
        let quoted: Vec<String> = words.iter().map(quote).collect();
        let or = (quoted.len() > 1).then(|| quoted.join(" OR "));
        Some((quoted.join(" AND "), or))
    };
    let cjk = (!grams.is_empty()).then(|| grams.iter().map(quote).collect::<Vec<_>>().join(" OR "));
    FtsQueries { words, cjk }
}

/// Makes sure `chunks_vec` (a sqlite-vec `vec0` table, cosine distance, one
/// row per chunk of `model`) exists for `dims` and holds what `chunks` holds:
/// (re)created and filled from `chunks` when missing, built for another
/// length, or marked stale. `Err` says why it cannot be kept.
fn vec_table(conn: &Connection, model: &str, dims: usize) -> Result<(), String> {
    {
        conn.query_row("SELECT vec_version()", [], |r| r.get::<_, String>(0)).map_err(|e| e.to_string())?;
        if dims == 0 {
            return Err("the embedder reports no vector length".into());
        }
        let stored: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [VEC_META_KEY], |r| r.get(0))
            .optional()
            .map_err(|e| e.to_string())?;
        if stored.as_deref() == Some(dims.to_string().as_str()) {
            return Ok(());
        }
        let tx = conn.unchecked_transaction().map_err(|e| e.to_string())?;
        tx.execute_batch(&format!(
            "DROP TABLE IF EXISTS chunks_vec;
             CREATE VIRTUAL TABLE chunks_vec USING vec0(id TEXT PRIMARY KEY,
               embedding float[{dims}] distance_metric=cosine);"
        ))
        .map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT INTO chunks_vec (id, embedding) SELECT id, embedding FROM chunks
             WHERE model = ?1 AND length(embedding) = ?2",
            params![model, (dims * 4) as i64],
        )
        .map_err(|e| e.to_string())?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![VEC_META_KEY, dims.to_string()],
        )
        .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())
    }
}

/// Registers sqlite-vec as an automatic extension of every SQLite connection
/// this process opens afterwards (once).
#[cfg(feature = "sqlite-vec")]
#[allow(unsafe_code)] // the one FFI call registering the extension
fn register_sqlite_vec() -> Result<(), String> {
    static RC: std::sync::OnceLock<std::os::raw::c_int> = std::sync::OnceLock::new();
    let rc = *RC.get_or_init(|| {
        type Init = unsafe extern "C" fn(
            *mut rusqlite::ffi::sqlite3,
            *mut *mut std::os::raw::c_char,
            *const rusqlite::ffi::sqlite3_api_routines,
        ) -> std::os::raw::c_int;
        // SAFETY: `sqlite3_vec_init` is sqlite-vec's extension entry point,
        // compiled (with SQLITE_CORE, against the SQLite linked here) with
        // exactly the `Init` signature; the crate declares it without
        // parameters, so only the pointer's type is restored. Registering an
        // auto-extension has no other precondition.
        unsafe {
            let init = std::mem::transmute::<*const (), Init>(sqlite_vec::sqlite3_vec_init as *const ());
            rusqlite::ffi::sqlite3_auto_extension(Some(init))
        }
    });
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!("sqlite3_auto_extension failed with code {rc}"))
    }
}

/// SHA-256 of a file's first line (at most 64 KiB): a transcript replaced by
/// another one is read again from the start.
fn first_line_hash(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    fs::File::open(path)?.take(64 * 1024).read_to_end(&mut buf)?;
    let end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    Ok(sha256_hex(&String::from_utf8_lossy(&buf[..end])))
}

fn stat(path: &Path) -> (i64, u64) {
    match fs::metadata(path) {
        Ok(m) => {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            (mtime, m.len())
        }
        Err(_) => (0, 0),
    }
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_queries_quote_words_and_window_cjk() {
        let q = fts_queries("Postgres \"billing\" 数据库迁移 and 好");
        assert_eq!(
            q.words,
            Some((
                "\"postgres\" AND \"billing\" AND \"and\"".to_owned(),
                Some("\"postgres\" OR \"billing\" OR \"and\"".to_owned())
            ))
        );
        assert_eq!(q.cjk.as_deref(), Some("\"数据库\" OR \"据库迁\" OR \"库迁移\""));
        assert_eq!(fts_queries("?!").words, None);
    }
}
