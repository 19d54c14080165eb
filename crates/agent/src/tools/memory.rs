//! OpenClaw's memory tools over the workspace's memory index:
//! `memory_search` (hybrid search, synced first) and `memory_get` (lines of
//! `MEMORY.md` or a `memory/*.md` file). The memory crate is synchronous, so
//! both run on a blocking thread.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sessionlog_memory::local::auto_embedder;
use sessionlog_memory::{IndexConfig, MemoryIndex, SearchSettings};
use sessionlog_provider::CancellationToken;

use super::{number_prop, object_schema, string_prop, Tool, ToolFuture, ToolOutput};

/// The payload as OpenClaw's `jsonResult` returns it: pretty JSON text, the
/// value as details.
fn json_output(payload: Value) -> ToolOutput {
    let text = serde_json::to_string_pretty(&payload).unwrap_or_default();
    ToolOutput { content: vec![json!({"type": "text", "text": text})], details: Some(payload) }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// OpenClaw's `memory_search`: the index is opened on first use and synced
/// (incrementally) before every search.
pub struct MemorySearch {
    config: IndexConfig,
    index: Arc<Mutex<Option<MemoryIndex>>>,
}

impl MemorySearch {
    /// `memory_search` over `config`'s index, with the hashing embedder.
    pub fn new(config: IndexConfig) -> MemorySearch {
        MemorySearch { config, index: Arc::new(Mutex::new(None)) }
    }
}

impl Tool for MemorySearch {
    fn name(&self) -> &str {
        "memory_search"
    }

    fn description(&self) -> String {
        "Search the long-term memory (MEMORY.md and memory/*.md) by meaning and keywords. Use it before answering about earlier work, decisions, dates or preferences. Returns the best snippets with their file and line range.".to_owned()
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("query", string_prop("What to search for")),
                ("maxResults", number_prop("Results returned at most")),
                ("minScore", number_prop("Score floor (0..1)")),
            ],
            &["query"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err("Operation aborted".to_owned());
            }
            let query = args["query"].as_str().unwrap_or_default().to_owned();
            let mut settings = SearchSettings::default();
            if let Some(n) = args["maxResults"].as_f64() {
                // A fractional or negative count is floored, at least 1.
                settings.max_results = n.floor().clamp(1.0, 1000.0) as usize;
            }
            if let Some(s) = args["minScore"].as_f64() {
                settings.min_score = s.clamp(0.0, 1.0);
            }
            let config = self.config.clone();
            let slot = Arc::clone(&self.index);
            let payload = tokio::task::spawn_blocking(move || {
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                let run = |slot: &mut Option<MemoryIndex>| -> Result<Value, String> {
                    if slot.is_none() {
                        // The CLI's choice: all-MiniLM-L6-v2 when installed, else the hashing embedder.
                        let (embedder, fallback) = auto_embedder(None).map_err(|e| e.to_string())?;
                        let index = MemoryIndex::open(config, embedder).map_err(|e| e.to_string())?;
                        *slot = Some(match fallback {
                            Some(why) => index.with_fallback_reason(why),
                            None => index,
                        });
                    }
                    let index = slot.as_mut().ok_or("memory index unavailable")?;
                    let now = now_ms();
                    index.sync(false, now).map_err(|e| e.to_string())?;
                    let results = index.search(&query, &settings, now).map_err(|e| e.to_string())?;
                    let embedder = index.embedder();
                    Ok(json!({
                        "results": results,
                        "provider": embedder.id(),
                        "model": embedder.model(),
                        "fallback": index.fallback(),
                    }))
                };
                // OpenClaw answers a failure with an empty, disabled result, not an error.
                run(&mut slot).unwrap_or_else(
                    |error| json!({"results": [], "disabled": true, "unavailable": true, "error": error}),
                )
            })
            .await
            .map_err(|e| e.to_string())?;
            Ok(json_output(payload))
        })
    }
}

/// OpenClaw's `memory_get`: lines of `MEMORY.md`, `memory.md` or a `.md`
/// file under `memory/`; any other path is refused.
pub struct MemoryGet {
    workspace: PathBuf,
}

impl MemoryGet {
    /// `memory_get` rooted at `workspace`.
    pub fn new(workspace: PathBuf) -> MemoryGet {
        MemoryGet { workspace }
    }
}

impl Tool for MemoryGet {
    fn name(&self) -> &str {
        "memory_get"
    }

    fn description(&self) -> String {
        "Read lines of MEMORY.md or a memory/*.md file (from: first line, 1-based; lines: how many). Use it after memory_search to read just the lines a hit points at.".to_owned()
    }

    fn parameters(&self) -> Value {
        object_schema(
            &[
                ("path", string_prop("Workspace-relative path: MEMORY.md or memory/*.md")),
                ("from", number_prop("First line (1-based)")),
                ("lines", number_prop("Number of lines")),
            ],
            &["path"],
        )
    }

    fn call<'a>(&'a self, args: &'a Value, cancel: CancellationToken) -> ToolFuture<'a> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err("Operation aborted".to_owned());
            }
            let path = args["path"].as_str().unwrap_or_default().to_owned();
            let count = |key: &str| args[key].as_f64().map(|n| n.floor().max(1.0) as usize);
            let (from, lines) = (count("from"), count("lines"));
            let workspace = self.workspace.clone();
            let payload = tokio::task::spawn_blocking(move || {
                match sessionlog_memory::get(&workspace, &path, from, lines) {
                    Ok(got) => json!({"path": got.path, "text": got.text}),
                    Err(e) => json!({"path": path, "text": "", "disabled": true, "error": e.to_string()}),
                }
            })
            .await
            .map_err(|e| e.to_string())?;
            Ok(json_output(payload))
        })
    }
}
