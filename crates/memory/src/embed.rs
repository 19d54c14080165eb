//! Embedding providers: the [`Embedder`] trait the index calls, and the
//! deterministic [`HashEmbedder`] used when no model is installed.

use std::fmt;

/// An embedding failure (network, model, or a malformed answer).
#[derive(Debug, thiserror::Error)]
#[error("embedding failed ({provider}): {message}")]
pub struct EmbedError {
    /// The provider id.
    pub provider: String,
    /// What went wrong.
    pub message: String,
}

/// Something that turns texts into vectors. Synchronous: a provider that
/// talks to a server blocks the calling thread.
pub trait Embedder: Send + Sync {
    /// Provider id (`hash`, `openai`, `ollama`, `local`).
    fn id(&self) -> &str;
    /// Model name, stored with every chunk; a change forces a full reindex.
    fn model(&self) -> &str;
    /// Vector length.
    fn dims(&self) -> usize;
    /// A key identifying everything besides the model that changes vectors
    /// (endpoint, options); part of the embedding cache key.
    fn provider_key(&self) -> String {
        format!("{}:{}", self.id(), self.model())
    }
    /// Embeds documents, one vector per text, in order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Embeds a search query.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut v = self.embed_batch(&[text])?;
        v.pop().ok_or_else(|| EmbedError {
            provider: self.id().to_owned(),
            message: "no vector returned".into(),
        })
    }
}

impl fmt::Debug for dyn Embedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Embedder({}/{}, {} dims)", self.id(), self.model(), self.dims())
    }
}

/// Non-finite components become 0, then the vector is divided by its norm
/// unless the norm is below 1e-10 (OpenClaw's sanitising of local vectors).
pub fn normalize(v: &mut [f32]) {
    for x in v.iter_mut() {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm >= 1e-10 {
        for x in v.iter_mut() {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// True for characters of scripts written without spaces between words
/// (Han, kana, Hangul): they are indexed by character n-grams.
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}'
        | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{2FA1F}')
}

/// Deterministic feature hashing: every lowercase word, every character
/// trigram of a word (padded with spaces) and, in CJK text, every character
/// and pair of characters adds ±1 (word features weigh 2) to one of `dims`
/// buckets chosen by FNV-1a; the vector is L2-normalised. No weights, no
/// network; identical on every machine. Similarity is lexical, not semantic.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dims: usize,
    model: String,
}

impl HashEmbedder {
    /// A hashing embedder of `dims` dimensions (model name `hash-v1-<dims>`).
    pub fn new(dims: usize) -> Self {
        let dims = dims.max(1);
        HashEmbedder { dims, model: format!("hash-v1-{dims}") }
    }

    /// The vector of one text.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        let mut add = |feature: &str, weight: f32| {
            let h = fnv1a(feature.as_bytes());
            let idx = (h % self.dims as u64) as usize;
            let sign = if h >> 63 == 1 { -1.0 } else { 1.0 };
            v[idx] += sign * weight;
        };
        for word in words(text) {
            let chars: Vec<char> = word.chars().collect();
            if chars.iter().all(|&c| is_cjk(c)) {
                for (i, c) in chars.iter().enumerate() {
                    add(&format!("c:{c}"), 1.0);
                    if let Some(d) = chars.get(i + 1) {
                        add(&format!("b:{c}{d}"), 1.5);
                    }
                }
                continue;
            }
            add(&format!("w:{word}"), 2.0);
            let padded: Vec<char> = std::iter::once(' ').chain(chars).chain(std::iter::once(' ')).collect();
            for t in padded.windows(3) {
                let s: String = t.iter().collect();
                add(&format!("t:{s}"), 1.0);
            }
        }
        normalize(&mut v);
        v
    }
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder::new(384)
    }
}

impl Embedder for HashEmbedder {
    fn id(&self) -> &str {
        "hash"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }
}

/// Lowercase words: runs of letters, digits and `_`, with every CJK run
/// split off from its neighbours.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_cjk = false;
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            let cjk = is_cjk(c);
            if !cur.is_empty() && cjk != cur_cjk {
                out.push(std::mem::take(&mut cur));
            }
            cur_cjk = cjk;
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::cosine;

    #[test]
    fn words_split_scripts() {
        assert_eq!(words("Postgres迁移计划, v2_beta!"), vec!["postgres", "迁移计划", "v2_beta"]);
    }

    #[test]
    fn fnv1a_known_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn hash_vectors_are_unit_and_lexical() {
        let e = HashEmbedder::new(384);
        let a = e.embed("the billing database runs on postgres");
        let b = e.embed("postgres billing");
        let c = e.embed("holiday in lisbon");
        let norm: f64 = a.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(cosine(&a, &b) > 0.4, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c) < 0.2, "{}", cosine(&a, &c));
        assert_eq!(e.embed("same text"), e.embed("same text"));
        // Chinese shares character features.
        assert!(cosine(&e.embed("数据库迁移计划"), &e.embed("迁移数据库")) > 0.4);
        assert!(e.embed("").iter().all(|&x| x == 0.0));
    }

    #[test]
    fn normalize_sanitises() {
        let mut v = vec![3.0, f32::NAN, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.0, 0.8]);
        let mut z = vec![0.0, 0.0];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
