//! Memory benchmark (not a test): index about 10,000 chunks with the hashing
//! embedder (384 dimensions), then time queries over them.
//!
//! `cargo run --release -p sessionlog-memory --example bench -- DIR [CHUNK_TARGET]`
//! writes a synthetic workspace under DIR, indexes it, and prints one JSON
//! object: chunks, files, index time, peak resident memory (VmHWM), query
//! latency p50/p95/max over 200 queries (3 words of an 8,000-word
//! pseudo-word vocabulary with skewed frequencies), and the index file's size;
//! the same queries again with the exact brute-force vector leg, and each
//! backend's vector leg alone (`vectorLegMs`), to compare as ratios.
//! When all-MiniLM-L6-v2 is installed (`scripts/fetch-minilm.sh`; folder as
//! the CLI finds it), `local` adds its load time, its indexing rate on
//! LOCAL_SAMPLE chunks of the workspace (default 40) extrapolated to 10,000,
//! one chunk after another and as indexing embeds them (one parallel batch),
//! and per query its embedding time apart from the search time.

#![allow(clippy::print_stdout)]

use std::fs;
use std::path::Path;
use std::time::Instant;

use sessionlog_memory::local::{is_installed, model_dir};
use sessionlog_memory::{
    chunk_markdown, ChunkSettings, EmbedError, Embedder, HashEmbedder, IndexConfig, LocalEmbedder,
    MemoryIndex, SearchSettings,
};

const SYLLABLES: &[&str] = &[
    "ba", "ko", "ri", "tem", "lu", "sa", "vin", "do", "pe", "gor", "mi", "ta", "zen", "fu", "la", "ner",
    "qui", "so", "da", "wel",
];

/// Word `i` of a 8,000-word vocabulary of pseudo-words (three syllables).
fn word(i: usize) -> String {
    let n = SYLLABLES.len();
    format!("{}{}{}", SYLLABLES[i % n], SYLLABLES[i / n % n], SYLLABLES[i / n / n % n])
}

/// A deterministic pseudo-random stream (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
}

fn line(rng: &mut Lcg, n: usize) -> String {
    // Skewed towards the first words, as word frequencies are.
    let mut s = format!("- item {n}:");
    while s.len() < 110 {
        let (a, b) = (rng.next() % 8000, rng.next() % 8000);
        s.push(' ');
        s.push_str(&word(a * b / 8000));
    }
    s
}

fn peak_rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: bench DIR [CHUNK_TARGET]");
    let target: usize = args.next().map_or(10_000, |s| s.parse().expect("a number"));
    let dir = Path::new(&dir);
    let ws = dir.join("ws");
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(ws.join("memory")).unwrap();
    // ~13 lines of 111 characters per 1,600-character chunk, 2–3 of them
    // carried over: about 10.5 new lines per chunk; 50 chunks per file.
    let files = target.div_ceil(50);
    let lines_per_file = 50 * 21 / 2;
    let mut rng = Lcg(42);
    for f in 0..files {
        let day = format!("2026-{:02}-{:02}", 1 + f / 28 % 12, 1 + f % 28);
        let mut text = format!("# {day} ({f})\n");
        for n in 0..lines_per_file {
            text.push_str(&line(&mut rng, n));
            text.push('\n');
        }
        fs::write(ws.join(format!("memory/{day}-{f:04}.md")), text).unwrap();
    }
    let mut config = IndexConfig::new(&ws, Some(&dir.join("state")));
    // The first pass times sqlite-vec KNN at any size (the default picks it
    // only from DEFAULT_KNN_MIN_CHUNKS on), the second the exact scan.
    config.knn_min_chunks = 0;
    let db = config.db_path.clone();
    let mut index = MemoryIndex::open(config, Box::new(HashEmbedder::new(384))).unwrap();
    let t = Instant::now();
    let report = index.sync(false, 0).unwrap();
    let index_ms = t.elapsed().as_secs_f64() * 1000.0;
    let rss_after_index = peak_rss_kib();
    let status = index.status().unwrap();

    let settings = SearchSettings::default();
    let mut latencies = Vec::new();
    let queries: Vec<String> = (0..200)
        .map(|q| format!("{} {} {}", word(q * 37 % 2000), word(q * 101 % 4000), word(q * 13 % 1000)))
        .collect();
    for query in &queries {
        let t = Instant::now();
        let hits = index.search(query, &settings, 0).unwrap();
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(hits.len() <= settings.max_results);
    }
    let rss_queries = peak_rss_kib();
    // The same queries with the exact brute-force vector leg (same index file),
    // and each backend's vector leg alone, in this run: compare them as ratios.
    let mut brute_config = IndexConfig::new(&ws, Some(&dir.join("state")));
    brute_config.sqlite_vec = false;
    let brute = MemoryIndex::open(brute_config, Box::new(HashEmbedder::new(384))).unwrap();
    let mut brute_ms = Vec::new();
    for query in &queries {
        let t = Instant::now();
        std::hint::black_box(brute.search(query, &settings, 0).unwrap());
        brute_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let embedder = HashEmbedder::new(384);
    let vectors: Vec<Vec<f32>> = queries.iter().map(|q| embedder.embed_query(q).unwrap()).collect();
    let leg = |idx: &MemoryIndex| {
        let mut ms = Vec::new();
        for v in &vectors {
            let t = Instant::now();
            std::hint::black_box(idx.vector_candidates(v, settings.leg_limit()).unwrap());
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        percentiles(&mut ms)
    };
    let (leg_knn, leg_brute) = (leg(&index), leg(&brute));
    drop(brute);
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() as f64 * p).ceil() as usize).min(latencies.len()) - 1];
    let local = model_dir(None).filter(|d| is_installed(d)).map(|d| {
        let sample: usize = std::env::var("LOCAL_SAMPLE").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
        let mut texts = Vec::new();
        let mut files: Vec<_> = fs::read_dir(ws.join("memory")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            let content = fs::read_to_string(f).unwrap();
            texts.extend(chunk_markdown(&content, ChunkSettings::default()).into_iter().map(|c| c.text));
            if texts.len() >= sample {
                break;
            }
        }
        texts.truncate(sample);
        local_model(&d, index, &queries, &texts)
    });
    let out = serde_json::json!({
        "chunks": status.chunks,
        "files": status.files,
        "dims": status.dimensions,
        "embedded": report.embedded,
        "indexMs": index_ms.round(),
        "peakRssKiBIndex": rss_after_index,
        "peakRssKiBQueries": rss_queries,
        "queryMs": { "p50": pct(0.50), "p95": pct(0.95), "max": pct(1.0), "n": latencies.len() },
        "vectorBackend": status.vector.backend,
        "queryMsBruteForce": percentiles(&mut brute_ms),
        "vectorLegMs": leg_knn,
        "vectorLegMsBruteForce": leg_brute,
        "dbBytes": fs::metadata(&db).map(|m| m.len()).unwrap_or(0),
        "local": local,
    });
    println!("{out}");
}

/// An embedder answering each query with a vector computed beforehand (the
/// search leg timed without the embedding), under the index's model name.
struct Precomputed {
    model: String,
    vectors: std::collections::HashMap<String, Vec<f32>>,
}

impl Embedder for Precomputed {
    fn id(&self) -> &str {
        "hash"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn dims(&self) -> usize {
        384
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vectors[*t].clone()).collect())
    }
}

/// The local model's part: its indexing rate on `sample` chunk texts of the
/// benchmark workspace, and per query the embedding time and the search time
/// over the same index (its stored vectors are the hashing embedder's: the
/// exact cosine pass costs the same whatever the values).
fn local_model(
    model_dir: &Path,
    index: MemoryIndex,
    queries: &[String],
    texts: &[String],
) -> serde_json::Value {
    let t = Instant::now();
    let model = LocalEmbedder::load(model_dir).unwrap();
    let load_ms = t.elapsed().as_secs_f64() * 1000.0;
    let tokens: usize = texts.iter().map(|s| model.token_ids(s).len()).sum();
    let (t, cpu) = (Instant::now(), cpu_ms());
    for s in texts {
        std::hint::black_box(model.embed(s));
    }
    let sample_ms = t.elapsed().as_secs_f64() * 1000.0;
    let sample_cpu = cpu_ms() - cpu;
    let per_chunk = sample_ms / texts.len() as f64;
    // The same chunks as indexing embeds them: one batch, in parallel.
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (t, cpu) = (Instant::now(), cpu_ms());
    std::hint::black_box(model.embed_batch(&refs).unwrap());
    let batch_ms = t.elapsed().as_secs_f64() * 1000.0;
    let batch_cpu = cpu_ms() - cpu;
    let mut embed_ms = Vec::new();
    let mut vectors = std::collections::HashMap::new();
    let cpu = cpu_ms();
    for q in queries {
        let t = Instant::now();
        let v = model.embed(q);
        embed_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        vectors.insert(q.clone(), v);
    }
    let embed_cpu = (cpu_ms() - cpu) / queries.len() as f64;
    let model_name = index.embedder().model().to_owned();
    let config = index.config().clone();
    drop(index);
    let index = MemoryIndex::open(config, Box::new(Precomputed { model: model_name, vectors })).unwrap();
    let settings = SearchSettings::default();
    let mut search_ms = Vec::new();
    let mut total_ms = Vec::new();
    std::hint::black_box(index.search(&queries[0], &settings, 0).unwrap()); // loads the vectors
    let cpu = cpu_ms();
    for (q, e) in queries.iter().zip(&embed_ms) {
        let t = Instant::now();
        std::hint::black_box(index.search(q, &settings, 0).unwrap());
        let s = t.elapsed().as_secs_f64() * 1000.0;
        search_ms.push(s);
        total_ms.push(s + e);
    }
    let search_cpu = (cpu_ms() - cpu) / queries.len() as f64;
    serde_json::json!({
        "model": "all-MiniLM-L6-v2",
        "loadMs": load_ms.round(),
        "indexSample": { "chunks": texts.len(), "tokens": tokens, "ms": sample_ms.round(), "msPerChunk": per_chunk.round(), "cpuMs": sample_cpu },
        "indexSampleParallel": { "ms": batch_ms.round(), "cpuMs": batch_cpu, "threads": rayon::current_num_threads(), "speedup": sample_ms / batch_ms },
        "indexMsFor10000ChunksExtrapolated": (per_chunk * 10_000.0).round(),
        "indexMsFor10000ChunksParallelExtrapolated": (batch_ms / texts.len() as f64 * 10_000.0).round(),
        "indexCpuMsFor10000ChunksExtrapolated": (sample_cpu / texts.len() as f64 * 10_000.0).round(),
        "queryEmbedCpuMsMean": embed_cpu,
        "searchCpuMsMean": search_cpu,
        "queryEmbedMs": percentiles(&mut embed_ms),
        "searchMs": percentiles(&mut search_ms),
        "totalMs": percentiles(&mut total_ms),
        "peakRssKiB": peak_rss_kib(),
    })
}

/// CPU time of this process (user + system), ms, from /proc (10 ms ticks):
/// on a shared machine the wall clock also counts other processes' turns.
fn cpu_ms() -> f64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) * 10.0
}

fn percentiles(v: &mut [f64]) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let pct = |p: f64| v[((v.len() as f64 * p).ceil() as usize).min(v.len()) - 1];
    serde_json::json!({ "p50": pct(0.50), "p95": pct(0.95), "max": pct(1.0), "n": v.len() })
}
