//! `sessionlog memory`: index a workspace's memory, search it, read a memory
//! file, report the index's state.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use sessionlog_memory::remote::{RemoteConfig, RemoteEmbedder};
use sessionlog_memory::{get, local, IndexConfig, LocalEmbedder, MemoryIndex, SearchSettings};

/// Memory: the index over a workspace's MEMORY.md, memory/*.md and transcripts.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Bring the index up to date (only changed files are re-read and only new chunks embedded).
    Index(IndexArgs),
    /// Hybrid search (keywords and vectors, scored as OpenClaw's memory_search).
    Search(SearchArgs),
    /// Read a memory file, or some of its lines (as OpenClaw's memory_get).
    Get(GetArgs),
    /// The index's provider, model, counts, dirty files, FTS and vector availability.
    Status(StatusArgs),
}

/// Where the workspace and its index are.
#[derive(Debug, clap::Args)]
pub(crate) struct Workspace {
    /// The agent workspace (holds MEMORY.md and memory/).
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// The state folder holding the index (`<STATE_DIR>/memory/index.sqlite`);
    /// default `<workspace>/.sessionlog`.
    #[arg(long, value_name = "STATE_DIR")]
    state: Option<PathBuf>,
    /// A folder of session transcripts (`*.jsonl`) to index as source `sessions` (repeatable).
    #[arg(long = "sessions", value_name = "DIR")]
    sessions: Vec<PathBuf>,
    /// The embedding provider: `auto` (`local` when its model is installed,
    /// else `hash`, and status says so), `local` (all-MiniLM-L6-v2 in process,
    /// offline), `hash` (deterministic feature hashing, offline), `openai` (any
    /// OpenAI-compatible `/v1/embeddings`, key in OPENAI_API_KEY), `ollama`.
    #[arg(long, default_value = "auto", value_parser = ["auto", "local", "hash", "openai", "ollama"])]
    provider: String,
    /// The local model's folder (model.safetensors, tokenizer.json,
    /// config.json); default $SESSIONLOG_MINILM_DIR, else
    /// $XDG_DATA_HOME/sessionlog/models/all-MiniLM-L6-v2 (~/.local/share/…),
    /// where scripts/fetch-minilm.sh installs it.
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// The provider's model (default: text-embedding-3-small, nomic-embed-text).
    #[arg(long)]
    model: Option<String>,
    /// The provider's base URL (default: https://api.openai.com/v1, http://127.0.0.1:11434).
    #[arg(long)]
    base_url: Option<String>,
    /// Requested vector length (OpenAI `dimensions`).
    #[arg(long)]
    dimensions: Option<usize>,
    /// Scan every vector exactly instead of sqlite-vec KNN (same results;
    /// status then reports `brute-force`).
    #[arg(long)]
    brute_force: bool,
    /// Use sqlite-vec KNN once the index holds this many chunks (below, the
    /// exact scan of the vectors cached in memory, which measured faster);
    /// 0 = KNN at any size.
    #[arg(long, value_name = "N", default_value_t = sessionlog_memory::DEFAULT_KNN_MIN_CHUNKS)]
    knn_min_chunks: usize,
}

impl Workspace {
    fn config(&self) -> IndexConfig {
        let mut c = IndexConfig::new(&self.workspace, self.state.as_deref());
        c.sessions_dirs.clone_from(&self.sessions);
        c.sqlite_vec = !self.brute_force;
        c.knn_min_chunks = self.knn_min_chunks;
        c
    }

    fn open(&self) -> Result<MemoryIndex> {
        let remote = |base: &str, model: &str| {
            let mut c = RemoteConfig::new(
                self.base_url.as_deref().unwrap_or(base),
                self.model.as_deref().unwrap_or(model),
            );
            c.dimensions = self.dimensions;
            c
        };
        let index = match self.provider.as_str() {
            "openai" => {
                let mut c = remote("https://api.openai.com/v1", "text-embedding-3-small");
                c.api_key = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty());
                MemoryIndex::open(self.config(), Box::new(RemoteEmbedder::openai(c)?))?
            }
            "ollama" => MemoryIndex::open(
                self.config(),
                Box::new(RemoteEmbedder::ollama(remote("http://127.0.0.1:11434", "nomic-embed-text"))?),
            )?,
            "hash" => MemoryIndex::open(self.config(), Box::new(sessionlog_memory::HashEmbedder::default()))?,
            "local" => {
                let dir = local::model_dir(self.model_dir.as_deref()).ok_or_else(|| {
                    anyhow::anyhow!("no model folder: pass --model-dir or set {}", local::MODEL_DIR_ENV)
                })?;
                if !local::is_installed(&dir) {
                    anyhow::bail!(
                        "all-MiniLM-L6-v2 is not installed in {} (scripts/fetch-minilm.sh installs it)",
                        dir.display()
                    );
                }
                MemoryIndex::open(self.config(), Box::new(LocalEmbedder::load(&dir)?))?
            }
            _ => {
                let (embedder, fallback) = local::auto_embedder(self.model_dir.as_deref())?;
                let index = MemoryIndex::open(self.config(), embedder)?;
                match fallback {
                    Some(why) => index.with_fallback_reason(why),
                    None => index,
                }
            }
        };
        Ok(index)
    }
}

/// `memory index`.
#[derive(Debug, clap::Args)]
pub(crate) struct IndexArgs {
    #[command(flatten)]
    ws: Workspace,
    /// Rebuild everything.
    #[arg(long)]
    force: bool,
    /// Print the sync report as JSON.
    #[arg(long)]
    json: bool,
}

/// `memory search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    #[command(flatten)]
    ws: Workspace,
    /// The query.
    query: String,
    /// Results returned.
    #[arg(long, default_value_t = 6)]
    max_results: usize,
    /// Score floor (a keyword-only hit is kept down to the text weight when nothing passes).
    #[arg(long, default_value_t = 0.35)]
    min_score: f64,
    /// Re-rank with MMR (diversity).
    #[arg(long)]
    mmr: bool,
    /// MMR λ (1 = relevance only).
    #[arg(long, default_value_t = 0.7)]
    mmr_lambda: f64,
    /// Decay dated memory files and transcripts by age.
    #[arg(long)]
    decay: bool,
    /// Decay half-life in days.
    #[arg(long, default_value_t = 30.0)]
    half_life_days: f64,
    /// Print `{"results":[…]}` as JSON.
    #[arg(long)]
    json: bool,
}

/// `memory get`.
#[derive(Debug, clap::Args)]
pub(crate) struct GetArgs {
    /// The agent workspace.
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// Workspace-relative path: MEMORY.md, memory.md or memory/….md.
    path: String,
    /// First line (1-based).
    #[arg(long)]
    from: Option<usize>,
    /// Number of lines.
    #[arg(long)]
    lines: Option<usize>,
    /// Print `{"path","text"}` as JSON.
    #[arg(long)]
    json: bool,
}

/// `memory status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    ws: Workspace,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn run(command: Command, out: &mut dyn Write) -> Result<()> {
    match command {
        Command::Index(a) => {
            let mut index = a.ws.open()?;
            let report = index.sync(a.force, now_ms())?;
            for w in &report.warnings {
                tracing::warn!("{w}");
            }
            if a.json {
                serde_json::to_writer(&mut *out, &report)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "indexed {} files ({} unchanged, {} removed); {} chunks embedded, {} from cache{}",
                    report.files_indexed,
                    report.files_unchanged,
                    report.files_removed,
                    report.embedded,
                    report.cached,
                    if report.full_reindex { "; full reindex" } else { "" }
                )?;
            }
        }
        Command::Search(a) => {
            let fresh = !a.ws.config().db_path.exists();
            let mut index = a.ws.open()?;
            if fresh {
                index.sync(false, now_ms())?;
            }
            let settings = SearchSettings {
                max_results: a.max_results,
                min_score: a.min_score,
                mmr: a.mmr,
                mmr_lambda: a.mmr_lambda,
                decay: a.decay,
                half_life_days: a.half_life_days,
                ..SearchSettings::default()
            };
            let results = index.search(&a.query, &settings, now_ms())?;
            if a.json {
                serde_json::to_writer(&mut *out, &serde_json::json!({ "results": results }))?;
                writeln!(out)?;
            } else {
                for r in &results {
                    writeln!(out, "{:.3} {}:{}-{}", r.score, r.path, r.start_line, r.end_line)?;
                    let first = r.snippet.lines().next().unwrap_or("");
                    writeln!(out, "      {first}")?;
                }
            }
        }
        Command::Get(a) => {
            let got = get(&a.workspace, &a.path, a.from, a.lines)?;
            if a.json {
                serde_json::to_writer(&mut *out, &got)?;
                writeln!(out)?;
            } else {
                out.write_all(got.text.as_bytes())?;
                if !got.text.is_empty() && !got.text.ends_with('\n') {
                    writeln!(out)?;
                }
            }
        }
        Command::Status(a) => {
            let status = a.ws.open()?.status()?;
            if a.json {
                serde_json::to_writer_pretty(&mut *out, &status)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "provider: {} ({}, {} dims)",
                    status.provider, status.model, status.dimensions
                )?;
                if let Some(f) = &status.fallback {
                    writeln!(out, "fallback: {f}")?;
                }
                writeln!(
                    out,
                    "index: {} ({} files, {} chunks)",
                    status.db_path, status.files, status.chunks
                )?;
                writeln!(out, "dirty: {}", status.dirty_files.len())?;
                writeln!(
                    out,
                    "fts: {}; vector: {} ({})",
                    status.fts.available, status.vector.available, status.vector.backend
                )?;
            }
        }
    }
    Ok(())
}
