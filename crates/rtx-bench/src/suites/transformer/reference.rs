//! The f64 CPU reference of one post-norm encoder layer (PyTorch's `TransformerEncoderLayer`
//! with `norm_first=False`, ReLU, no dropout), for a few sampled rows.
//!
//! Every tensor the GPU stores in bf16 (qkv, the attention output, the two residual sums, the
//! FFN hidden, the outputs of both LayerNorms) is rounded to bf16 here at the same point, so the
//! only difference left is the GPU's f32 accumulation order; the comparison's bound is bf16's.

use rayon::prelude::*;
use rtx_synthesis::templates::elementwise::expr::round_to;
use rtx_synthesis::DType;

/// Shape of one encoder layer: `x` is `[batch * seq, d_model]`, row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderShape {
    /// Sequences.
    pub batch: u32,
    /// Tokens per sequence.
    pub seq: u32,
    /// Model width.
    pub d_model: u32,
    /// Attention heads (`d_model / heads` is the head size).
    pub heads: u32,
    /// Hidden width of the feed-forward block.
    pub ffn: u32,
}

impl EncoderShape {
    /// The anchor layer: B8 S512 d768 h12 ffn3072.
    pub const ANCHOR: EncoderShape = EncoderShape {
        batch: 8,
        seq: 512,
        d_model: 768,
        heads: 12,
        ffn: 3072,
    };

    /// Rows of every activation matrix (`batch * seq`).
    pub fn tokens(&self) -> u32 {
        self.batch * self.seq
    }

    /// Head size.
    pub fn head_dim(&self) -> u32 {
        self.d_model / self.heads
    }

    /// Shape in words, e.g. `B8 S512 d768 h12 ffn3072`.
    pub fn describe(&self) -> String {
        format!(
            "B{} S{} d{} h{} ffn{}",
            self.batch, self.seq, self.d_model, self.heads, self.ffn
        )
    }

    /// Floating-point operations of one forward pass: the four projections plus attention
    /// (`QK^T` and `PV`), as PyTorch's profiler would count them.
    pub fn flops(&self) -> f64 {
        let (t, d, f) = (self.tokens() as f64, self.d_model as f64, self.ffn as f64);
        let gemms = 2.0 * t * d * (3.0 * d) + 2.0 * t * d * d + 2.0 * 2.0 * t * d * f;
        let attn = 4.0 * self.batch as f64 * self.seq as f64 * self.seq as f64 * d;
        gemms + attn
    }

    /// Checks that the shape is usable (non-zero, heads divide the width).
    pub fn validate(&self) -> Result<(), String> {
        if self.batch == 0 || self.seq == 0 || self.d_model == 0 || self.heads == 0 || self.ffn == 0
        {
            return Err(format!(
                "encoder shape {}: every dimension must be at least 1",
                self.describe()
            ));
        }
        if !self.d_model.is_multiple_of(self.heads) {
            return Err(format!(
                "encoder shape {}: d_model must be a multiple of heads",
                self.describe()
            ));
        }
        Ok(())
    }
}

/// Host copies of the layer's parameters, values already representable in bf16.
/// Linear weights are `[out, in]` row-major, as in PyTorch.
#[derive(Debug, Clone)]
pub struct HostWeights {
    /// In-projection `[3d, d]` (q, k, v stacked).
    pub w_qkv: Vec<f32>,
    /// In-projection bias `[3d]`.
    pub b_qkv: Vec<f32>,
    /// Out-projection `[d, d]`.
    pub w_o: Vec<f32>,
    /// Out-projection bias `[d]`.
    pub b_o: Vec<f32>,
    /// First LayerNorm weight and bias `[d]`.
    pub ln1: (Vec<f32>, Vec<f32>),
    /// FFN up-projection `[ffn, d]`.
    pub w_1: Vec<f32>,
    /// FFN up-projection bias `[ffn]`.
    pub b_1: Vec<f32>,
    /// FFN down-projection `[d, ffn]`.
    pub w_2: Vec<f32>,
    /// FFN down-projection bias `[d]`.
    pub b_2: Vec<f32>,
    /// Second LayerNorm weight and bias `[d]`.
    pub ln2: (Vec<f32>, Vec<f32>),
}

/// LayerNorm epsilon (PyTorch's default).
pub const LN_EPS: f64 = 1e-5;

fn bf(x: f64) -> f64 {
    round_to(DType::Bf16, x)
}

/// `round(x[row] . w[j] + b[j])` for every `j` (a `[out, in]` weight).
fn linear(x: &[f64], w: &[f32], b: &[f32]) -> Vec<f64> {
    let n_in = x.len();
    b.iter()
        .enumerate()
        .map(|(j, bj)| {
            let row = &w[j * n_in..(j + 1) * n_in];
            x.iter().zip(row).map(|(a, w)| a * *w as f64).sum::<f64>() + *bj as f64
        })
        .collect()
}

fn layer_norm(h: &[f64], (w, b): &(Vec<f32>, Vec<f32>)) -> Vec<f64> {
    let n = h.len() as f64;
    let mean = h.iter().sum::<f64>() / n;
    let var = h.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let inv = 1.0 / (var + LN_EPS).sqrt();
    h.iter()
        .zip(w.iter().zip(b))
        .map(|(v, (w, b))| bf((v - mean) * inv * *w as f64 + *b as f64))
        .collect()
}

/// The layer's output rows `(batch, position)` of `y`, computed from `x` (`[tokens, d]`).
pub fn reference_rows(
    shape: &EncoderShape,
    w: &HostWeights,
    x: &[f32],
    rows: &[(u32, u32)],
) -> Vec<Vec<f64>> {
    let d = shape.d_model as usize;
    let (s_len, heads, hd) = (
        shape.seq as usize,
        shape.heads as usize,
        shape.head_dim() as usize,
    );
    let x_row = |b: usize, s: usize| -> Vec<f64> {
        let t = b * s_len + s;
        x[t * d..(t + 1) * d].iter().map(|v| *v as f64).collect()
    };
    // qkv of every position of each batch the samples touch (keys and values need all of them).
    let mut batches: Vec<usize> = rows.iter().map(|r| r.0 as usize).collect();
    batches.sort_unstable();
    batches.dedup();
    let qkv: Vec<(usize, Vec<Vec<f64>>)> = batches
        .iter()
        .map(|&b| {
            let all: Vec<Vec<f64>> = (0..s_len)
                .into_par_iter()
                .map(|s| {
                    linear(&x_row(b, s), &w.w_qkv, &w.b_qkv)
                        .into_iter()
                        .map(bf)
                        .collect()
                })
                .collect();
            (b, all)
        })
        .collect();
    let scale = 1.0 / (hd as f64).sqrt();
    rows.par_iter()
        .map(|&(b, s)| {
            let (b, s) = (b as usize, s as usize);
            let all = &qkv
                .iter()
                .find(|(bb, _)| *bb == b)
                .expect("batch computed above")
                .1;
            let q = &all[s];
            let mut o = vec![0.0f64; d];
            for h in 0..heads {
                let qh = &q[h * hd..(h + 1) * hd];
                let scores: Vec<f64> = all
                    .iter()
                    .map(|r| {
                        qh.iter()
                            .zip(&r[d + h * hd..d + (h + 1) * hd])
                            .map(|(a, k)| a * k)
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|v| (v - m).exp()).collect();
                let sum: f64 = p.iter().sum();
                for (t, pt) in p.iter().enumerate() {
                    let v = &all[t][2 * d + h * hd..2 * d + (h + 1) * hd];
                    for (k, vk) in v.iter().enumerate() {
                        o[h * hd + k] += pt / sum * vk;
                    }
                }
            }
            let o: Vec<f64> = o.into_iter().map(bf).collect();
            let xr = x_row(b, s);
            let a: Vec<f64> = linear(&o, &w.w_o, &w.b_o)
                .iter()
                .zip(&xr)
                .map(|(v, r)| bf(v + r))
                .collect();
            let h1 = layer_norm(&a, &w.ln1);
            let f: Vec<f64> = linear(&h1, &w.w_1, &w.b_1)
                .into_iter()
                .map(|v| bf(v.max(0.0)))
                .collect();
            let h2: Vec<f64> = linear(&f, &w.w_2, &w.b_2)
                .iter()
                .zip(&h1)
                .map(|(v, r)| bf(v + r))
                .collect();
            layer_norm(&h2, &w.ln2)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> (EncoderShape, HostWeights, Vec<f32>) {
        let shape = EncoderShape {
            batch: 2,
            seq: 3,
            d_model: 4,
            heads: 2,
            ffn: 8,
        };
        let v = |n: usize, k: f32| {
            (0..n)
                .map(|i| bf(((i as f32 * 0.37 + k).sin() * 0.5) as f64) as f32)
                .collect::<Vec<_>>()
        };
        let w = HostWeights {
            w_qkv: v(12 * 4, 0.1),
            b_qkv: v(12, 0.2),
            w_o: v(16, 0.3),
            b_o: v(4, 0.4),
            ln1: (vec![1.0; 4], vec![0.0; 4]),
            w_1: v(32, 0.5),
            b_1: v(8, 0.6),
            w_2: v(32, 0.7),
            b_2: v(4, 0.8),
            ln2: (vec![1.0; 4], vec![0.0; 4]),
        };
        (shape, w, v(24, 0.9))
    }

    #[test]
    fn output_rows_are_normalized() {
        let (shape, w, x) = tiny();
        let rows = reference_rows(&shape, &w, &x, &[(0, 0), (1, 2)]);
        assert_eq!(rows.len(), 2);
        for r in rows {
            assert_eq!(r.len(), 4);
            let mean = r.iter().sum::<f64>() / 4.0;
            let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0;
            assert!(mean.abs() < 1e-2, "mean {mean}");
            assert!((var - 1.0).abs() < 5e-2, "var {var}");
        }
    }

    #[test]
    fn rows_depend_on_their_own_batch_only() {
        let (shape, w, mut x) = tiny();
        let before = reference_rows(&shape, &w, &x, &[(0, 1)]);
        for v in &mut x[12..] {
            *v = -*v; // batch 1 only
        }
        assert_eq!(before, reference_rows(&shape, &w, &x, &[(0, 1)]));
        assert_ne!(
            reference_rows(&shape, &w, &x, &[(1, 1)]),
            reference_rows(&shape, &w, &tiny().2, &[(1, 1)])
        );
    }

    #[test]
    fn anchor_flops_and_validation() {
        let s = EncoderShape::ANCHOR;
        assert_eq!(s.tokens(), 4096);
        assert_eq!(s.head_dim(), 64);
        // 4 projections: 2*4096*768*(2304 + 768 + 2*3072) = 57.98 GFLOP; attention 6.44 GFLOP.
        assert!(
            (s.flops() / 1e9 - 64.42).abs() < 0.01,
            "{}",
            s.flops() / 1e9
        );
        assert!(s.validate().is_ok());
        assert!(EncoderShape { heads: 5, ..s }
            .validate()
            .unwrap_err()
            .contains("multiple of heads"));
        assert!(EncoderShape { seq: 0, ..s }.validate().is_err());
    }
}
