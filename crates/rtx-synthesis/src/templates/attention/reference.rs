//! f64 CPU reference of fused attention.
//!
//! Per query row `i` of head `(b, h)`: scores `s_j = scale * q_i . k_j` over the allowed keys
//! (`j < seq_k`, and `j <= i` when causal), `m = max_j s_j`, `p_j = exp(s_j - m)`,
//! `o_i = sum_j p_j v_j / sum_j p_j`. Inputs are the stored values widened to f64, so the only
//! differences to the kernel are its f32 accumulation, the f16/bf16 rounding of P before P.V
//! and the rounding of O.

use super::problem::{AttentionProblem, AttentionProblemError};

/// The stored inputs widened to f64 (`[batch, heads, seq, head_dim]` contiguous).
#[derive(Debug, Clone, Copy)]
pub struct AttentionInputs<'a> {
    /// Q, `batch * heads * seq_q * head_dim` values.
    pub q: &'a [f64],
    /// K, `batch * heads * seq_k * head_dim` values.
    pub k: &'a [f64],
    /// V, shaped like K.
    pub v: &'a [f64],
}

/// Why the reference cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    /// The problem is invalid.
    #[error(transparent)]
    Problem(#[from] AttentionProblemError),
    /// An input slice has the wrong length.
    #[error("attention reference: `{tensor}` holds {got} values, the problem needs {needed}")]
    Length {
        /// Q, K or V.
        tensor: &'static str,
        /// Values needed.
        needed: u64,
        /// Values given.
        got: u64,
    },
    /// A row index outside the problem.
    #[error("attention reference: row ({b}, {h}, {i}) is outside the problem")]
    Row {
        /// Batch index.
        b: u32,
        /// Head index.
        h: u32,
        /// Query index.
        i: u32,
    },
}

fn check_inputs(p: &AttentionProblem, x: &AttentionInputs<'_>) -> Result<(), ReferenceError> {
    p.validate()?;
    let nq = p.q_elems().unwrap_or(u64::MAX);
    let nk = p.kv_elems().unwrap_or(u64::MAX);
    for (tensor, needed, got) in [
        ("q", nq, x.q.len()),
        ("k", nk, x.k.len()),
        ("v", nk, x.v.len()),
    ] {
        if got as u64 != needed {
            return Err(ReferenceError::Length {
                tensor,
                needed,
                got: got as u64,
            });
        }
    }
    Ok(())
}

/// The output row `o_i` (`head_dim` values) of query `i` in head `(b, h)`.
pub fn attention_row_f64(
    p: &AttentionProblem,
    x: &AttentionInputs<'_>,
    b: u32,
    h: u32,
    i: u32,
) -> Result<Vec<f64>, ReferenceError> {
    check_inputs(p, x)?;
    if b >= p.batch || h >= p.heads || i >= p.seq_q {
        return Err(ReferenceError::Row { b, h, i });
    }
    Ok(row_unchecked(p, x, b, h, i))
}

fn row_unchecked(
    p: &AttentionProblem,
    x: &AttentionInputs<'_>,
    b: u32,
    h: u32,
    i: u32,
) -> Vec<f64> {
    let d = p.head_dim as usize;
    let head = b as usize * p.heads as usize + h as usize;
    let q0 = (head * p.seq_q as usize + i as usize) * d;
    let k_head = head * p.seq_k as usize * d;
    let q = &x.q[q0..q0 + d];
    let keys = p.keys_of_row(i) as usize;
    let scale = p.scale as f64;
    let s: Vec<f64> = (0..keys)
        .map(|j| {
            let k = &x.k[k_head + j * d..k_head + (j + 1) * d];
            scale * q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>()
        })
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|&v| (v - m).exp()).collect();
    let l: f64 = e.iter().sum();
    let mut o = vec![0.0f64; d];
    for (j, &pj) in e.iter().enumerate() {
        let v = &x.v[k_head + j * d..k_head + (j + 1) * d];
        for (oc, vc) in o.iter_mut().zip(v) {
            *oc += pj * vc;
        }
    }
    o.iter_mut().for_each(|v| *v /= l);
    o
}

/// The whole output O (`batch * heads * seq_q * head_dim` values).
pub fn attention_f64(
    p: &AttentionProblem,
    x: &AttentionInputs<'_>,
) -> Result<Vec<f64>, ReferenceError> {
    check_inputs(p, x)?;
    let mut out = Vec::with_capacity(p.q_elems().unwrap_or(0) as usize);
    for b in 0..p.batch {
        for h in 0..p.heads {
            for i in 0..p.seq_q {
                out.extend(row_unchecked(p, x, b, h, i));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use proptest::prelude::*;

    /// The textbook formula: full score matrix, mask with -inf, softmax by exp / sum (no max).
    fn naive(p: &AttentionProblem, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
        let (sq, sk, d) = (p.seq_q as usize, p.seq_k as usize, p.head_dim as usize);
        let mut out = Vec::new();
        for head in 0..(p.batch * p.heads) as usize {
            for i in 0..sq {
                let w: Vec<f64> = (0..sk)
                    .map(|j| {
                        if p.causal && j > i {
                            return 0.0;
                        }
                        let dot: f64 = (0..d)
                            .map(|c| q[(head * sq + i) * d + c] * k[(head * sk + j) * d + c])
                            .sum();
                        (p.scale as f64 * dot).exp()
                    })
                    .collect();
                let total: f64 = w.iter().sum();
                for c in 0..d {
                    out.push(
                        (0..sk)
                            .map(|j| w[j] * v[(head * sk + j) * d + c])
                            .sum::<f64>()
                            / total,
                    );
                }
            }
        }
        out
    }

    fn rand_vec(n: usize, seed: u64, amp: f64) -> Vec<f64> {
        // xorshift: deterministic inputs without an RNG dependency in the proptest body.
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * amp
            })
            .collect()
    }

    #[test]
    fn causal_row_zero_is_v_row_zero() {
        let p = AttentionProblem::new(2, 2, 5, 64, true, DType::F16);
        let n = p.q_elems().unwrap() as usize;
        let (q, k, v) = (
            rand_vec(n, 1, 2.0),
            rand_vec(n, 2, 2.0),
            rand_vec(n, 3, 1.0),
        );
        let x = AttentionInputs {
            q: &q,
            k: &k,
            v: &v,
        };
        for b in 0..2 {
            for h in 0..2 {
                let o = attention_row_f64(&p, &x, b, h, 0).unwrap();
                let v0 = ((b * 2 + h) * 5 * 64) as usize;
                for c in 0..64 {
                    assert!((o[c] - v[v0 + c]).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn equal_keys_average_the_values() {
        let mut p = AttentionProblem::new(1, 1, 3, 64, false, DType::Bf16);
        p.seq_k = 4;
        let q = rand_vec(3 * 64, 5, 1.0);
        let k = vec![0.25; 4 * 64];
        let v = rand_vec(4 * 64, 6, 1.0);
        let o = attention_f64(
            &p,
            &AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
            },
        )
        .unwrap();
        for i in 0..3 {
            for c in 0..64 {
                let mean = (0..4).map(|j| v[j * 64 + c]).sum::<f64>() / 4.0;
                assert!((o[i * 64 + c] - mean).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn errors_are_typed() {
        let p = AttentionProblem::new(1, 1, 2, 64, false, DType::F16);
        let q = vec![0.0; 128];
        let short = vec![0.0; 64];
        let e = attention_f64(
            &p,
            &AttentionInputs {
                q: &q,
                k: &short,
                v: &q,
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            ReferenceError::Length {
                tensor: "k",
                needed: 128,
                got: 64
            }
        );
        let e = attention_row_f64(
            &p,
            &AttentionInputs {
                q: &q,
                k: &q,
                v: &q,
            },
            0,
            0,
            2,
        )
        .unwrap_err();
        assert_eq!(e, ReferenceError::Row { b: 0, h: 0, i: 2 });
        let bad = AttentionProblem { head_dim: 32, ..p };
        assert!(matches!(
            attention_f64(
                &bad,
                &AttentionInputs {
                    q: &q,
                    k: &q,
                    v: &q
                }
            ),
            Err(ReferenceError::Problem(AttentionProblemError::HeadDim(32)))
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn matches_the_naive_formula(
            batch in 1u32..3, heads in 1u32..3, seq_q in 1u32..20, seq_k in 1u32..20,
            d in prop::sample::select(vec![64u32, 128]), causal: bool, seed in 1u64..1000, amp in 0.1f64..3.0,
        ) {
            let p = AttentionProblem {
                batch, heads, seq_q, seq_k, head_dim: d, causal, dtype: DType::F16,
                scale: 1.0 / (d as f32).sqrt(),
            };
            let nq = p.q_elems().unwrap() as usize;
            let nk = p.kv_elems().unwrap() as usize;
            let (q, k, v) = (rand_vec(nq, seed, amp), rand_vec(nk, seed + 7, amp), rand_vec(nk, seed + 13, 1.0));
            let got = attention_f64(&p, &AttentionInputs { q: &q, k: &k, v: &v }).unwrap();
            let want = naive(&p, &q, &k, &v);
            prop_assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                prop_assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{} vs {}", g, w);
            }
            // Outputs are convex combinations of the values: inside their range per column.
            prop_assert!(got.iter().all(|o| o.abs() <= 1.0 + 1e-12));
        }
    }
}
