//! The local embedder against an independent reference
//! (`fixtures/minilm-reference.json`, made by `scripts/minilm-reference.py`:
//! token ids from Hugging Face's `tokenizers`, embeddings from a numpy float64
//! forward pass over the same weights; its "hello world" vector is the
//! published sentence-transformers one). Token ids must be equal, each
//! embedding within cosine 0.999 of the reference.
//!
//! The model is not in the repository: these tests read it from
//! `$SESSIONLOG_MINILM_DIR` or the default folder (`scripts/fetch-minilm.sh`
//! installs it; CI does) and skip, saying so, when it is not there.

#![cfg(feature = "local")]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs;

use sessionlog_memory::local::{is_installed, model_dir, LocalEmbedder};
use sessionlog_memory::score::cosine;
use sessionlog_memory::Embedder;
use sessionlog_test_support::fixtures::project_dir;

/// The installed model, or `None` after printing why the test is skipped.
fn model() -> Option<LocalEmbedder> {
    let dir = model_dir(None)?;
    if !is_installed(&dir) {
        eprintln!(
            "SKIPPED: all-MiniLM-L6-v2 is not installed in {} (run scripts/fetch-minilm.sh)",
            dir.display()
        );
        return None;
    }
    Some(LocalEmbedder::load(&dir).unwrap())
}

struct Reference {
    text: String,
    ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn reference() -> Vec<Reference> {
    let text = fs::read_to_string(project_dir().join("fixtures/minilm-reference.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| Reference {
            text: r["text"].as_str().unwrap().to_owned(),
            ids: r["ids"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as u32).collect(),
            embedding: r["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect()
}

#[test]
fn token_ids_equal_the_reference_tokenizer() {
    let Some(m) = model() else { return };
    let refs = reference();
    assert_eq!(refs.len(), 10);
    for r in &refs {
        assert_eq!(m.token_ids(&r.text), r.ids, "{:?}", r.text);
    }
    // The long text is cut at 256 tokens, [SEP] last.
    assert_eq!(refs[9].ids.len(), 256);
}

#[test]
fn embeddings_match_the_reference_forward_pass() {
    let Some(m) = model() else { return };
    assert_eq!((m.id(), m.model(), m.dims()), ("local", "all-MiniLM-L6-v2", 384));
    for r in reference() {
        let v = m.embed(&r.text);
        assert_eq!(v.len(), 384);
        let c = cosine(&v, &r.embedding);
        println!("cosine {c:.7} {:?}", r.text.chars().take(30).collect::<String>());
        assert!(c >= 0.999, "cosine {c} for {:?}", r.text);
        let max_diff = v.iter().zip(&r.embedding).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(max_diff < 1e-3, "largest component difference {max_diff} for {:?}", r.text);
    }
}

#[test]
fn vectors_are_the_same_alone_and_in_a_batch_and_similar_texts_are_near() {
    let Some(m) = model() else { return };
    let texts =
        ["The billing database runs on Postgres 16.", "hello world", "Which database does billing use?"];
    let batch = m.embed_batch(&texts).unwrap();
    for (t, v) in texts.iter().zip(&batch) {
        assert_eq!(&m.embed(t), v, "{t}");
    }
    // A question is nearer its answer than an unrelated text (semantic, few shared words).
    assert!(cosine(&batch[2], &batch[0]) > cosine(&batch[2], &batch[1]) + 0.2);
}

#[test]
fn a_parallel_batch_gives_the_serial_vectors_bit_for_bit_on_any_pool() {
    let Some(m) = model() else { return };
    // The reference texts (one cut at 256 tokens) and some of other lengths.
    let mut texts: Vec<String> = reference().into_iter().map(|r| r.text).collect();
    texts
        .extend((0..6).map(|i| format!("note {i}: {}", "the deploy key rotates weekly. ".repeat(i * 7 + 1))));
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bits = |vs: &[Vec<f32>]| -> Vec<Vec<u32>> {
        vs.iter().map(|v| v.iter().map(|x| x.to_bits()).collect()).collect()
    };
    let serial: Vec<Vec<f32>> = refs.iter().map(|t| m.embed(t)).collect();
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let batch = pool.install(|| m.embed_batch(&refs)).unwrap();
        assert_eq!(batch.len(), refs.len());
        assert_eq!(bits(&batch), bits(&serial), "{threads} threads");
    }
}
