//! The vector leg by sqlite-vec KNN equals the exact brute-force scan: same
//! candidate ids in the same order with the same scores, over a few hundred
//! distinct random vectors, after incremental syncs and after a change of
//! vector length; and the status names the path in use.

use std::fs;
use std::path::Path;

use sessionlog_memory::{EmbedError, Embedder, IndexConfig, MemoryIndex};

/// A seeded xorshift64* stream of floats in [-1, 1).
fn random_vector(seed: u64, dims: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..dims)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 bits
            (r as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// Each text's vector is the random vector seeded by the number in it
/// (`item 17` → seed 17), so the test knows every stored vector.
struct Table {
    dims: usize,
}

impl Embedder for Table {
    fn id(&self) -> &str {
        "table"
    }
    fn model(&self) -> &str {
        if self.dims == 384 {
            "table-384"
        } else {
            "table-other"
        }
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| random_vector(seed_of(t), self.dims)).collect())
    }
}

fn seed_of(text: &str) -> u64 {
    text.split_whitespace().find_map(|w| w.parse().ok()).expect("a number in the text")
}

/// The cosine similarity as the test computes it (f64 sums).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    dot / (na.sqrt() * nb.sqrt())
}

fn write_items(ws: &Path, items: impl Iterator<Item = u64>) {
    for n in items {
        fs::write(ws.join(format!("memory/item-{n:04}.md")), format!("item {n}\n")).unwrap();
    }
}

fn open(ws: &Path, dims: usize, sqlite_vec: bool) -> MemoryIndex {
    let mut config = IndexConfig::new(ws, None);
    config.sqlite_vec = sqlite_vec;
    config.knn_min_chunks = 0; // KNN at any size
    MemoryIndex::open(config, Box::new(Table { dims })).unwrap()
}

/// KNN and brute force agree with each other, and their scores are the test's
/// own top-`k` cosines over the stored items.
fn check(ws: &Path, dims: usize, items: &[u64]) {
    let knn = open(ws, dims, true);
    let brute = open(ws, dims, false);
    assert_eq!(brute.status().unwrap().vector.backend, "brute-force");
    if cfg!(feature = "sqlite-vec") {
        assert_eq!(knn.status().unwrap().vector.backend, "sqlite-vec");
    }
    for q in 0..12u64 {
        let query = random_vector(100_000 + q, dims);
        let mut expected: Vec<f64> = items.iter().map(|&n| cosine(&query, &random_vector(n, dims))).collect();
        expected.sort_by(|a, b| b.total_cmp(a));
        for k in [1, 7, 36, items.len(), items.len() + 5] {
            let a = knn.vector_candidates(&query, k).unwrap();
            let b = brute.vector_candidates(&query, k).unwrap();
            let ids = |v: &[(String, f64)]| v.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&a), ids(&b), "query {q}, k {k}: KNN and brute force differ");
            assert_eq!(a.len(), k.min(items.len()), "query {q}, k {k}");
            for (i, ((_, got), want)) in a.iter().zip(&expected).enumerate() {
                assert!((got - want).abs() < 1e-9, "query {q}, k {k}, rank {i}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn knn_and_brute_force_pick_the_same_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    let mut items: Vec<u64> = (1..=300).collect();
    write_items(&ws, items.iter().copied());
    open(&ws, 384, true).sync(false, 0).unwrap();
    check(&ws, 384, &items);

    // Incremental: 40 files removed, 25 rewritten with other vectors, 30 added.
    for n in 1..=40 {
        fs::remove_file(ws.join(format!("memory/item-{n:04}.md"))).unwrap();
    }
    for n in 41..=65u64 {
        fs::write(ws.join(format!("memory/item-{n:04}.md")), format!("item {}\n", n + 1000)).unwrap();
    }
    write_items(&ws, 301..=330);
    open(&ws, 384, true).sync(false, 0).unwrap();
    items = (66..=330).chain(1041..=1065).collect();
    check(&ws, 384, &items);

    // Another vector length: the table is rebuilt for it by the full reindex.
    open(&ws, 48, true).sync(false, 0).unwrap();
    check(&ws, 48, &items);
}

#[test]
fn a_sync_with_knn_forced_off_keeps_the_table_in_step() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    write_items(&ws, 1..=120);
    open(&ws, 384, true).sync(false, 0).unwrap();
    for n in 1..=30 {
        fs::remove_file(ws.join(format!("memory/item-{n:04}.md"))).unwrap();
    }
    write_items(&ws, 500..=520);
    open(&ws, 384, false).sync(false, 0).unwrap();
    let items: Vec<u64> = (31..=120).chain(500..=520).collect();
    check(&ws, 384, &items);
}

/// Another model with the same vector length (as the hashing embedder and
/// all-MiniLM-L6-v2 both give 384).
struct SameLength;

impl Embedder for SameLength {
    fn id(&self) -> &str {
        "same-length"
    }
    fn model(&self) -> &str {
        "same-length-384"
    }
    fn dims(&self) -> usize {
        384
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Table { dims: 384 }.embed_batch(texts)
    }
}

#[test]
fn knn_never_answers_with_another_models_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    write_items(&ws, 1..=50);
    open(&ws, 384, true).sync(false, 0).unwrap();
    // Opened for another model of the same length and not yet synced: no
    // stored vector is that model's, so both paths find nothing.
    for sqlite_vec in [true, false] {
        let mut config = IndexConfig::new(&ws, None);
        config.sqlite_vec = sqlite_vec;
        let index = MemoryIndex::open(config, Box::new(SameLength)).unwrap();
        let found = index.vector_candidates(&random_vector(100_001, 384), 10).unwrap();
        assert!(found.is_empty(), "sqlite_vec {sqlite_vec}: {found:?}");
    }
}

/// The index over `ws` with KNN from `knn_min_chunks` stored chunks on.
fn open_from(ws: &Path, knn_min_chunks: usize) -> MemoryIndex {
    let mut config = IndexConfig::new(ws, None);
    config.knn_min_chunks = knn_min_chunks;
    MemoryIndex::open(config, Box::new(Table { dims: 384 })).unwrap()
}

#[test]
fn the_default_leg_is_chosen_by_size_and_both_give_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    write_items(&ws, 1..=120);
    open_from(&ws, 0).sync(false, 0).unwrap();
    // The default: KNN only from 60,000 chunks on; 120 are searched exactly.
    assert_eq!(sessionlog_memory::DEFAULT_KNN_MIN_CHUNKS, 60_000);
    let by_default = MemoryIndex::open(IndexConfig::new(&ws, None), Box::new(Table { dims: 384 })).unwrap();
    assert_eq!(by_default.status().unwrap().vector.backend, "brute-force");
    // At the threshold, KNN; one chunk short of it, the exact scan.
    let at = open_from(&ws, 120);
    let below = open_from(&ws, 121);
    if cfg!(feature = "sqlite-vec") {
        assert_eq!(at.status().unwrap().vector.backend, "sqlite-vec");
    }
    assert_eq!(below.status().unwrap().vector.backend, "brute-force");
    // Whole searches (vector leg, keyword leg, fusion, MMR) give the same
    // results, scores included, whichever leg answers.
    let settings = sessionlog_memory::SearchSettings { min_score: 0.0, ..Default::default() };
    for q in 1..=40u64 {
        let query = format!("item {q}");
        let a = at.search(&query, &settings, 0).unwrap();
        let b = below.search(&query, &settings, 0).unwrap();
        assert!(!a.is_empty(), "{query}");
        let key = |v: &[sessionlog_memory::SearchResult]| {
            v.iter().map(|r| (r.path.clone(), r.start_line, r.score.to_bits())).collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b), "{query}");
    }
    // A sync drops the count: past the threshold after it, KNN answers.
    write_items(&ws, 121..=125);
    let mut grown = open_from(&ws, 125);
    assert_eq!(grown.status().unwrap().vector.backend, "brute-force");
    grown.sync(false, 0).unwrap();
    if cfg!(feature = "sqlite-vec") {
        assert_eq!(grown.status().unwrap().vector.backend, "sqlite-vec");
    }
}

/// The same text in many files ties on score: KNN keeps the ties the exact
/// scan keeps (smallest ids), whatever order sqlite-vec returns them in.
#[test]
fn knn_and_brute_force_agree_on_tied_scores() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    for d in 0..60 {
        fs::write(ws.join(format!("memory/dup-{d:04}.md")), "item 7\n").unwrap();
    }
    write_items(&ws, 8..=48);
    open(&ws, 384, true).sync(false, 0).unwrap();
    let knn = open(&ws, 384, true);
    let brute = open(&ws, 384, false);
    let query = random_vector(7, 384);
    for k in [1, 5, 10, 30, 59, 60, 61, 101, 120] {
        let a = knn.vector_candidates(&query, k).unwrap();
        let b = brute.vector_candidates(&query, k).unwrap();
        assert_eq!(a, b, "k {k}: KNN and brute force differ");
        assert_eq!(a.len(), k.min(101), "k {k}");
        // The first 60 are the duplicates, each with the query's own vector.
        for (id, score) in a.iter().take(60) {
            assert!((score - 1.0).abs() < 1e-9, "k {k}: {id} scored {score}");
        }
    }
}

/// sqlite-vec answers at most 4,096 rows: a larger limit (or a tie that
/// would need more) is answered by the exact scan, with the same rows.
#[test]
fn a_limit_past_sqlite_vecs_k_maximum_gives_the_scans_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("memory")).unwrap();
    write_items(&ws, 1..=4_200);
    open(&ws, 48, true).sync(false, 0).unwrap();
    let knn = open(&ws, 48, true);
    let brute = open(&ws, 48, false);
    let query = random_vector(100_001, 48);
    for k in [4_095, 4_096, 4_100, 4_200] {
        let a = knn.vector_candidates(&query, k).unwrap();
        let b = brute.vector_candidates(&query, k).unwrap();
        assert_eq!(a.len(), k, "k {k}");
        assert_eq!(a, b, "k {k}: KNN and brute force differ");
    }
}
