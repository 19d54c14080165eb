//! Long-term memory of an agent (OpenClaw's builtin memory, spec `memory.md`).
//!
//! The Markdown files of a workspace (`MEMORY.md`, `memory/*.md`) and,
//! optionally, session transcripts are the truth; [`MemoryIndex`] is a
//! disposable projection of them in one SQLite file kept in the workspace's
//! state: chunks ([`chunk`]), their vectors from an [`Embedder`], FTS5 tables
//! (`unicode61 remove_diacritics 2`, and `trigram` for CJK text), and a
//! sqlite-vec KNN table when the `sqlite-vec` feature (default) loads, else
//! the exact brute-force scan (same results). [`MemoryIndex::sync`]
//! updates it incrementally (content hashes; transcripts read on from the
//! last indexed line through the event log's reader); [`MemoryIndex::search`]
//! scores as OpenClaw does ([`score`]: BM25 mapping, 0.7/0.3 fusion, candidate
//! pool, `minScore` with the keyword fallback, MMR, temporal decay);
//! [`get`] reads a memory file as the `memory_get` tool does.
//!
//! Synchronous; without network unless the `remote` feature adds the
//! OpenAI-compatible and Ollama providers (`remote`, blocking HTTP, no
//! tokio). The `local` feature (default) adds [`LocalEmbedder`]:
//! all-MiniLM-L6-v2 run in process from files installed by
//! `scripts/fetch-minilm.sh`; without them the deterministic
//! [`HashEmbedder`] is used. Clocks are inputs (`now_ms`).

pub mod chunk;
pub mod embed;
mod error;
mod get;
mod index;
#[cfg(feature = "local")]
pub mod local;
#[cfg(feature = "remote")]
pub mod remote;
pub mod score;
pub mod sources;

pub use chunk::{chunk_markdown, Chunk, ChunkSettings};
pub use embed::{EmbedError, Embedder, HashEmbedder};
pub use error::MemoryError;
pub use get::{get, GetResult};
pub use index::{
    default_db_path, fts_queries, Availability, FtsQueries, IndexConfig, MemoryIndex, SearchResult,
    SourceCount, Status, SyncReport, VectorStatus, DEFAULT_KNN_MIN_CHUNKS,
};
#[cfg(feature = "local")]
pub use local::LocalEmbedder;
pub use score::SearchSettings;
pub use sources::Source;
