//! Memory benchmark (not a test): index about 10,000 chunks with the hashing
//! embedder (384 dimensions), then time queries over them.
//!
//! `cargo run --release -p sessionlog-memory --example bench -- DIR [CHUNK_TARGET]`
//! writes a synthetic workspace under DIR, indexes it, and prints one JSON
//! object: chunks, files, index time, peak resident memory (VmHWM), query
//! latency p50/p95/max over 200 queries (3 words of an 8,000-word
//! pseudo-word vocabulary with skewed frequencies), and the index file's size.

#![allow(clippy::print_stdout)]

use std::fs;
use std::path::Path;
use std::time::Instant;

use sessionlog_memory::{HashEmbedder, IndexConfig, MemoryIndex, SearchSettings};

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
    let config = IndexConfig::new(&ws, Some(&dir.join("state")));
    let db = config.db_path.clone();
    let mut index = MemoryIndex::open(config, Box::new(HashEmbedder::new(384))).unwrap();
    let t = Instant::now();
    let report = index.sync(false, 0).unwrap();
    let index_ms = t.elapsed().as_secs_f64() * 1000.0;
    let rss_after_index = peak_rss_kib();
    let status = index.status().unwrap();

    let settings = SearchSettings::default();
    let mut latencies = Vec::new();
    for q in 0..200 {
        let query = format!("{} {} {}", word(q * 37 % 2000), word(q * 101 % 4000), word(q * 13 % 1000));
        let t = Instant::now();
        let hits = index.search(&query, &settings, 0).unwrap();
        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(hits.len() <= settings.max_results);
    }
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() as f64 * p).ceil() as usize).min(latencies.len()) - 1];
    let out = serde_json::json!({
        "chunks": status.chunks,
        "files": status.files,
        "dims": status.dimensions,
        "embedded": report.embedded,
        "indexMs": index_ms.round(),
        "peakRssKiBIndex": rss_after_index,
        "peakRssKiBQueries": peak_rss_kib(),
        "queryMs": { "p50": pct(0.50), "p95": pct(0.95), "max": pct(1.0), "n": latencies.len() },
        "dbBytes": fs::metadata(&db).map(|m| m.len()).unwrap_or(0),
    });
    println!("{out}");
}
