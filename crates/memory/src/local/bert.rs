//! A BERT encoder's forward pass in plain Rust (f32), as Hugging Face's
//! `BertModel` computes it with no padding: word + token-type + position
//! embeddings and LayerNorm, then per layer self-attention (scores divided by
//! √head size, softmax) with an output projection, residual and LayerNorm,
//! and a GELU (erf) feed-forward with residual and LayerNorm.
//!
//! Every output element is a sum in one fixed order (bias last, products
//! rounded before they are added — Rust never fuses them), `exp` and `erf`
//! come from `libm` (the same bits on every platform), and the pass runs on
//! the calling thread: the same text gives the same vector, bit for bit, on
//! every machine, whether it is embedded alone or among others.

use std::collections::HashMap;

/// Columns per packed panel of a weight matrix.
const PANEL: usize = 8;
/// Rows computed together by the matrix kernel.
const ROWS: usize = 4;

/// A `k × m` matrix stored as panels of [`PANEL`] columns (each panel row
/// contiguous, the last panel padded with zeros), the layout the kernel reads.
#[derive(Debug, Clone)]
struct Packed {
    k: usize,
    m: usize,
    data: Vec<f32>,
}

impl Packed {
    /// Packs the matrix whose element at row `kk`, column `j` is `at(kk, j)`.
    fn new(k: usize, m: usize, at: impl Fn(usize, usize) -> f32) -> Self {
        let panels = m.div_ceil(PANEL);
        let mut data = vec![0f32; panels * k * PANEL];
        for p in 0..panels {
            for kk in 0..k {
                for c in 0..PANEL {
                    let j = p * PANEL + c;
                    if j < m {
                        data[(p * k + kk) * PANEL + c] = at(kk, j);
                    }
                }
            }
        }
        Packed { k, m, data }
    }
}

/// `out[n × m] = x[n × k] · w (+ bias)`; each element is the products summed
/// in order of `k`, then the bias added.
fn matmul(x: &[f32], n: usize, w: &Packed, bias: Option<&[f32]>, out: &mut [f32]) {
    let (k, m) = (w.k, w.m);
    debug_assert_eq!(x.len(), n * k);
    debug_assert_eq!(out.len(), n * m);
    for (p, panel) in w.data.chunks_exact(k * PANEL).enumerate() {
        let j0 = p * PANEL;
        let width = PANEL.min(m - j0);
        let mut i = 0;
        while i + ROWS <= n {
            let rows: [&[f32]; ROWS] = std::array::from_fn(|r| &x[(i + r) * k..(i + r + 1) * k]);
            let mut acc = [[0f32; PANEL]; ROWS];
            for (kk, b) in panel.chunks_exact(PANEL).enumerate() {
                for r in 0..ROWS {
                    let a = rows[r][kk];
                    for c in 0..PANEL {
                        acc[r][c] += a * b[c];
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                store(
                    &mut out[(i + r) * m + j0..(i + r) * m + j0 + width],
                    acc,
                    bias.map(|b| &b[j0..j0 + width]),
                );
            }
            i += ROWS;
        }
        for i in i..n {
            let row = &x[i * k..(i + 1) * k];
            let mut acc = [0f32; PANEL];
            for (kk, b) in panel.chunks_exact(PANEL).enumerate() {
                let a = row[kk];
                for c in 0..PANEL {
                    acc[c] += a * b[c];
                }
            }
            store(&mut out[i * m + j0..i * m + j0 + width], &acc, bias.map(|b| &b[j0..j0 + width]));
        }
    }
}

fn store(out: &mut [f32], acc: &[f32; PANEL], bias: Option<&[f32]>) {
    for (c, o) in out.iter_mut().enumerate() {
        *o = acc[c] + bias.map_or(0.0, |b| b[c]);
    }
}

/// A dense layer `y = x·Wᵀ + b` (W stored `[out, in]` as PyTorch does).
#[derive(Debug, Clone)]
struct Linear {
    w: Packed,
    b: Vec<f32>,
}

impl Linear {
    /// From PyTorch's `[out, in]` weights (several stacked along `out`).
    fn new(parts: &[(&[f32], &[f32])], inputs: usize) -> Self {
        let w: Vec<f32> = parts.iter().flat_map(|p| p.0.iter().copied()).collect();
        let b: Vec<f32> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        let outputs = b.len();
        Linear { w: Packed::new(inputs, outputs, |kk, j| w[j * inputs + kk]), b }
    }

    fn forward(&self, x: &[f32], n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n * self.w.m];
        matmul(x, n, &self.w, Some(&self.b), &mut out);
        out
    }
}

#[derive(Debug, Clone)]
struct LayerNorm {
    w: Vec<f32>,
    b: Vec<f32>,
    eps: f64,
}

impl LayerNorm {
    /// Normalises every row of `x` in place (mean and biased variance in f64).
    fn apply(&self, x: &mut [f32]) {
        let d = self.w.len();
        for row in x.chunks_exact_mut(d) {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d as f64;
            let inv = 1.0 / (var + self.eps).sqrt();
            for (i, v) in row.iter_mut().enumerate() {
                *v = ((f64::from(*v) - mean) * inv) as f32 * self.w[i] + self.b[i];
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Layer {
    qkv: Linear,
    out: Linear,
    ln1: LayerNorm,
    up: Linear,
    down: Linear,
    ln2: LayerNorm,
}

/// Named tensors: shape and f32 values.
pub type Tensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// Takes a tensor of the expected shape out of the set.
type Take<'a> = dyn FnMut(&str, &[usize]) -> Result<Vec<f32>, String> + 'a;

/// The shape of a BERT model (`config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Hidden size (the embedding length).
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Feed-forward size.
    pub intermediate: usize,
    /// Longest input in tokens.
    pub max_positions: usize,
    /// Vocabulary size.
    pub vocab: usize,
}

/// A loaded BERT encoder.
#[derive(Debug, Clone)]
pub struct Bert {
    shape: Shape,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    ln: LayerNorm,
    layers: Vec<Layer>,
}

impl Bert {
    /// Builds the encoder from named f32 tensors (Hugging Face `BertModel`
    /// names, an optional `bert.` prefix); names the first missing or
    /// misshapen tensor.
    pub fn new(shape: Shape, eps: f64, mut tensors: Tensors) -> Result<Self, String> {
        let h = shape.hidden;
        if h == 0 || shape.heads == 0 || h % shape.heads != 0 {
            return Err(format!("hidden size {h} is not a multiple of {} heads", shape.heads));
        }
        let mut take = |name: &str, dims: &[usize]| -> Result<Vec<f32>, String> {
            let (got, data) = tensors
                .remove(name)
                .or_else(|| tensors.remove(&format!("bert.{name}")))
                .ok_or_else(|| format!("tensor {name} is missing"))?;
            if got != dims {
                return Err(format!("tensor {name} has shape {got:?}, expected {dims:?}"));
            }
            Ok(data)
        };
        let ln = |take: &mut Take<'_>, p: &str| -> Result<LayerNorm, String> {
            Ok(LayerNorm {
                w: take(&format!("{p}.weight"), &[h])?,
                b: take(&format!("{p}.bias"), &[h])?,
                eps,
            })
        };
        let word = take("embeddings.word_embeddings.weight", &[shape.vocab, h])?;
        let position = take("embeddings.position_embeddings.weight", &[shape.max_positions, h])?;
        let token_type = take("embeddings.token_type_embeddings.weight", &[2, h])?;
        let emb_ln = ln(&mut take, "embeddings.LayerNorm")?;
        let mut layers = Vec::new();
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}");
            let mut lin = |name: &str, out: usize, inp: usize| -> Result<(Vec<f32>, Vec<f32>), String> {
                Ok((
                    take(&format!("{p}.{name}.weight"), &[out, inp])?,
                    take(&format!("{p}.{name}.bias"), &[out])?,
                ))
            };
            let q = lin("attention.self.query", h, h)?;
            let k = lin("attention.self.key", h, h)?;
            let v = lin("attention.self.value", h, h)?;
            let o = lin("attention.output.dense", h, h)?;
            let up = lin("intermediate.dense", shape.intermediate, h)?;
            let down = lin("output.dense", h, shape.intermediate)?;
            layers.push(Layer {
                qkv: Linear::new(&[(&q.0, &q.1), (&k.0, &k.1), (&v.0, &v.1)], h),
                out: Linear::new(&[(&o.0, &o.1)], h),
                ln1: ln(&mut take, &format!("{p}.attention.output.LayerNorm"))?,
                up: Linear::new(&[(&up.0, &up.1)], h),
                down: Linear::new(&[(&down.0, &down.1)], shape.intermediate),
                ln2: ln(&mut take, &format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Bert { shape, word, position, token_type, ln: emb_ln, layers })
    }

    /// The model's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The last hidden state, `ids.len() × hidden`, for one unpadded
    /// sequence (ids past the vocabulary read as 0, positions past the
    /// model's limit are cut).
    pub fn forward(&self, ids: &[u32]) -> Vec<f32> {
        let h = self.shape.hidden;
        let n = ids.len().min(self.shape.max_positions);
        let mut x = vec![0f32; n * h];
        for (i, &id) in ids[..n].iter().enumerate() {
            let id = if (id as usize) < self.shape.vocab { id as usize } else { 0 };
            let row = &mut x[i * h..(i + 1) * h];
            for (d, v) in row.iter_mut().enumerate() {
                *v = (self.word[id * h + d] + self.token_type[d]) + self.position[i * h + d];
            }
        }
        self.ln.apply(&mut x);
        for layer in &self.layers {
            let ctx = self.attention(layer, &x, n);
            let mut a = layer.out.forward(&ctx, n);
            for (v, r) in a.iter_mut().zip(&x) {
                *v += r;
            }
            layer.ln1.apply(&mut a);
            let mut up = layer.up.forward(&a, n);
            for v in &mut up {
                *v = 0.5 * *v * (1.0 + libm::erff(*v / std::f32::consts::SQRT_2));
            }
            let mut y = layer.down.forward(&up, n);
            for (v, r) in y.iter_mut().zip(&a) {
                *v += r;
            }
            layer.ln2.apply(&mut y);
            x = y;
        }
        x
    }

    /// Multi-head self-attention: the heads' contexts side by side, `n × hidden`.
    fn attention(&self, layer: &Layer, x: &[f32], n: usize) -> Vec<f32> {
        let h = self.shape.hidden;
        let dh = h / self.shape.heads;
        let qkv = layer.qkv.forward(x, n); // n × 3h: queries, keys, values
        let scale = (dh as f32).sqrt();
        let mut ctx = vec![0f32; n * h];
        let mut q = vec![0f32; n * dh];
        let mut scores = vec![0f32; n * n];
        let mut head_ctx = vec![0f32; n * dh];
        for head in 0..self.shape.heads {
            let col = head * dh;
            for i in 0..n {
                q[i * dh..(i + 1) * dh].copy_from_slice(&qkv[i * 3 * h + col..i * 3 * h + col + dh]);
            }
            let keys_t = Packed::new(dh, n, |d, j| qkv[j * 3 * h + h + col + d]);
            matmul(&q, n, &keys_t, None, &mut scores);
            for row in scores.chunks_exact_mut(n) {
                let mut max = f32::NEG_INFINITY;
                for v in row.iter_mut() {
                    *v /= scale;
                    max = max.max(*v);
                }
                let mut sum = 0f32;
                for v in row.iter_mut() {
                    *v = libm::expf(*v - max);
                    sum += *v;
                }
                for v in row.iter_mut() {
                    *v /= sum;
                }
            }
            let values = Packed::new(n, dh, |j, d| qkv[j * 3 * h + 2 * h + col + d]);
            matmul(&scores, n, &values, None, &mut head_ctx);
            for i in 0..n {
                ctx[i * h + col..i * h + col + dh].copy_from_slice(&head_ctx[i * dh..(i + 1) * dh]);
            }
        }
        ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_by_hand_on_every_path() {
        // x (5×3) · w (3×10) + b, computed by hand row by row; 5 rows take the
        // 4-row kernel and the 1-row tail, 10 columns a full and a padded panel.
        let x: Vec<f32> = (0..15).map(|v| v as f32).collect();
        let w = Packed::new(3, 10, |kk, j| {
            if j == kk {
                1.0
            } else if j == 9 {
                2.0
            } else {
                0.0
            }
        });
        let b: Vec<f32> = (0..10).map(|j| j as f32 * 10.0).collect();
        let mut out = vec![0f32; 50];
        matmul(&x, 5, &w, Some(&b), &mut out);
        for i in 0..5 {
            let row = &x[i * 3..i * 3 + 3];
            let sum = row[0] + row[1] + row[2];
            let expect =
                [row[0], 10.0 + row[1], 20.0 + row[2], 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0 + 2.0 * sum];
            assert_eq!(&out[i * 10..i * 10 + 10], &expect[..10], "row {i}");
        }
    }

    #[test]
    fn a_row_is_the_same_alone_or_in_a_block() {
        let k = 37;
        let x: Vec<f32> = (0..4 * k).map(|v| ((v * 7919) % 113) as f32 / 13.0 - 4.0).collect();
        let w = Packed::new(k, 11, |kk, j| ((kk * 31 + j * 17) % 29) as f32 / 7.0 - 2.0);
        let mut block = vec![0f32; 4 * 11];
        matmul(&x, 4, &w, None, &mut block);
        for i in 0..4 {
            let mut one = vec![0f32; 11];
            matmul(&x[i * k..(i + 1) * k], 1, &w, None, &mut one);
            assert_eq!(one, block[i * 11..(i + 1) * 11]);
        }
    }
}
