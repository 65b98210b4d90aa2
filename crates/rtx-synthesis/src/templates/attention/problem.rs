//! One fused-attention problem: `O = softmax(Q K^T * scale [+ causal mask]) V` over
//! `[batch, heads, seq, head_dim]` contiguous tensors.

use crate::DType;
use serde::{Deserialize, Serialize};

/// Head dimensions the template supports.
pub const HEAD_DIMS: [u32; 2] = [64, 128];

/// Largest batch or head count (each is a grid dimension of at most 65535 blocks).
pub const MAX_GRID_DIM: u32 = 65535;

/// A fused attention forward problem.
///
/// Q is `[batch, heads, seq_q, head_dim]`, K and V are `[batch, heads, seq_k, head_dim]`, O is
/// shaped like Q; all contiguous, in `dtype`, accumulation in f32. With `causal`, query row `i`
/// attends keys `j <= i` (top-left aligned, as PyTorch's `is_causal`), so every row has at
/// least key 0 and no row is empty.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AttentionProblem {
    /// Batch size (>= 1).
    pub batch: u32,
    /// Heads (>= 1).
    pub heads: u32,
    /// Query sequence length (>= 1; any length, tiles are masked).
    pub seq_q: u32,
    /// Key / value sequence length (>= 1).
    pub seq_k: u32,
    /// Head dimension (64 or 128).
    pub head_dim: u32,
    /// Causal (top-left aligned) mask.
    pub causal: bool,
    /// Storage dtype of Q, K, V and O (f16 or bf16).
    pub dtype: DType,
    /// Score scale (finite, > 0); usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

/// Why an attention problem is rejected; one variant per field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AttentionProblemError {
    /// A size is zero.
    #[error("attention `{field}` is 0 (must be >= 1)")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// A head dimension the template has no kernel for.
    #[error("attention head_dim = {0} is not supported (supported: 64, 128)")]
    HeadDim(u32),
    /// A dtype other than f16 / bf16.
    #[error("attention dtype {0} is not supported (f16 or bf16)")]
    DType(DType),
    /// The scale is not finite and positive.
    #[error("attention scale = {0} must be finite and > 0")]
    Scale(f32),
    /// A size overflows the kernel's index arithmetic or grid.
    #[error("attention `{field}` = {value} exceeds the limit {limit}")]
    TooLarge {
        /// The field (or product of fields).
        field: &'static str,
        /// Its value.
        value: u64,
        /// The largest allowed value.
        limit: u64,
    },
}

impl AttentionProblem {
    /// Self-attention (`seq_q = seq_k = seq`) with the usual `1 / sqrt(head_dim)` scale.
    pub fn new(
        batch: u32,
        heads: u32,
        seq: u32,
        head_dim: u32,
        causal: bool,
        dtype: DType,
    ) -> Self {
        AttentionProblem {
            batch,
            heads,
            seq_q: seq,
            seq_k: seq,
            head_dim,
            causal,
            dtype,
            scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
        }
    }

    /// Checks every field (see [`AttentionProblemError`]).
    ///
    /// Index limits: within one head the kernel indexes with `int`, so `seq * head_dim` must be
    /// below 2^31; batch and heads are grid dimensions (<= 65535); whole tensors must stay
    /// below 2^62 bytes.
    pub fn validate(&self) -> Result<(), AttentionProblemError> {
        use AttentionProblemError as E;
        for (field, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("seq_q", self.seq_q),
            ("seq_k", self.seq_k),
            ("head_dim", self.head_dim),
        ] {
            if v == 0 {
                return Err(E::Zero { field });
            }
        }
        if !HEAD_DIMS.contains(&self.head_dim) {
            return Err(E::HeadDim(self.head_dim));
        }
        if !matches!(self.dtype, DType::F16 | DType::Bf16) {
            return Err(E::DType(self.dtype));
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(E::Scale(self.scale));
        }
        for (field, v) in [("batch", self.batch), ("heads", self.heads)] {
            if v > MAX_GRID_DIM {
                return Err(E::TooLarge {
                    field,
                    value: v as u64,
                    limit: MAX_GRID_DIM as u64,
                });
            }
        }
        let int_max = i32::MAX as u64;
        for (field, seq) in [
            ("seq_q * head_dim", self.seq_q),
            ("seq_k * head_dim", self.seq_k),
        ] {
            let v = seq as u64 * self.head_dim as u64;
            if v > int_max {
                return Err(E::TooLarge {
                    field,
                    value: v,
                    limit: int_max,
                });
            }
        }
        let limit = 1u64 << 62;
        for (field, elems) in [("q bytes", self.q_elems()), ("k bytes", self.kv_elems())] {
            let bytes = elems.and_then(|e| e.checked_mul(self.dtype.size_bytes() as u64));
            match bytes {
                Some(b) if b < limit => {}
                _ => {
                    return Err(E::TooLarge {
                        field,
                        value: bytes.unwrap_or(u64::MAX),
                        limit,
                    })
                }
            }
        }
        Ok(())
    }

    /// Elements of Q (and O), `None` on overflow.
    pub fn q_elems(&self) -> Option<u64> {
        (self.batch as u64)
            .checked_mul(self.heads as u64)?
            .checked_mul(self.seq_q as u64)?
            .checked_mul(self.head_dim as u64)
    }

    /// Elements of K (and of V), `None` on overflow.
    pub fn kv_elems(&self) -> Option<u64> {
        (self.batch as u64)
            .checked_mul(self.heads as u64)?
            .checked_mul(self.seq_k as u64)?
            .checked_mul(self.head_dim as u64)
    }

    /// Whether query `i` attends key `j`.
    pub fn allowed(&self, i: u32, j: u32) -> bool {
        j < self.seq_k && (!self.causal || j <= i)
    }

    /// Keys query row `i` attends (`1..=seq_k`).
    pub fn keys_of_row(&self, i: u32) -> u32 {
        if self.causal {
            (i as u64 + 1).min(self.seq_k as u64) as u32
        } else {
            self.seq_k
        }
    }

    /// Multiply-add FLOPs actually needed (`4 * D` per attended (query, key) pair: QK^T and PV).
    pub fn flops(&self) -> f64 {
        let pairs: f64 = if self.causal {
            let (q, k) = (self.seq_q as f64, self.seq_k as f64);
            // rows i < seq_k attend i + 1 keys, the rest attend all seq_k.
            let tri = q.min(k);
            tri * (tri + 1.0) / 2.0 + (q - tri).max(0.0) * k
        } else {
            self.seq_q as f64 * self.seq_k as f64
        };
        4.0 * self.batch as f64 * self.heads as f64 * pairs * self.head_dim as f64
    }

    /// Bytes one launch must move at least (Q, K, V read once, O written once).
    pub fn bytes_moved(&self) -> u64 {
        let s = self.dtype.size_bytes() as u64;
        (2 * self.q_elems().unwrap_or(0) + 2 * self.kv_elems().unwrap_or(0)) * s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn validation_names_the_field() {
        let ok = AttentionProblem::new(2, 3, 17, 64, true, DType::Bf16);
        assert!(ok.validate().is_ok());
        assert!((ok.scale - 0.125).abs() < 1e-7);
        let e = AttentionProblem { seq_k: 0, ..ok }.validate().unwrap_err();
        assert_eq!(e, AttentionProblemError::Zero { field: "seq_k" });
        let e = AttentionProblem { batch: 0, ..ok }.validate().unwrap_err();
        assert_eq!(e, AttentionProblemError::Zero { field: "batch" });
        let e = AttentionProblem { head_dim: 96, ..ok }
            .validate()
            .unwrap_err();
        assert_eq!(e, AttentionProblemError::HeadDim(96));
        let e = AttentionProblem {
            dtype: DType::F32,
            ..ok
        }
        .validate()
        .unwrap_err();
        assert_eq!(e, AttentionProblemError::DType(DType::F32));
        for s in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(matches!(
                AttentionProblem { scale: s, ..ok }.validate(),
                Err(AttentionProblemError::Scale(_))
            ));
        }
        let e = AttentionProblem { heads: 70000, ..ok }
            .validate()
            .unwrap_err();
        assert!(
            matches!(e, AttentionProblemError::TooLarge { field: "heads", .. }),
            "{e}"
        );
        let e = AttentionProblem {
            seq_q: 1 << 25,
            ..ok
        }
        .validate()
        .unwrap_err();
        assert!(
            matches!(
                e,
                AttentionProblemError::TooLarge {
                    field: "seq_q * head_dim",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("seq_q"));
    }

    #[test]
    fn causal_flops_are_half_the_square_plus_the_diagonal() {
        let p = AttentionProblem::new(1, 1, 4, 64, true, DType::F16);
        assert_eq!(p.flops(), 4.0 * 10.0 * 64.0);
        let nc = AttentionProblem { causal: false, ..p };
        assert_eq!(nc.flops(), 4.0 * 16.0 * 64.0);
        let wide = AttentionProblem {
            seq_q: 6,
            seq_k: 3,
            ..p
        };
        // rows 0,1,2 attend 1,2,3 keys; rows 3,4,5 attend all 3.
        assert_eq!(wide.flops(), 4.0 * 15.0 * 64.0);
    }

    proptest! {
        #[test]
        fn validate_accepts_exactly_the_documented_domain(
            batch in 0u32..70000, heads in 0u32..70000, seq_q in 0u32..(1 << 25), seq_k in 0u32..(1 << 25),
            d in prop::sample::select(vec![0u32, 32, 64, 96, 128, 256]), causal: bool,
        ) {
            let p = AttentionProblem { batch, heads, seq_q, seq_k, head_dim: d, causal, dtype: DType::F16, scale: 0.1 };
            let ok = batch >= 1 && heads >= 1 && seq_q >= 1 && seq_k >= 1 && (d == 64 || d == 128)
                && batch <= MAX_GRID_DIM && heads <= MAX_GRID_DIM
                && (seq_q as u64) * (d as u64) <= i32::MAX as u64
                && (seq_k as u64) * (d as u64) <= i32::MAX as u64
                && (batch as u128 * heads as u128 * seq_q.max(seq_k) as u128 * d as u128 * 2) < (1u128 << 62);
            prop_assert_eq!(p.validate().is_ok(), ok, "{:?}: {:?}", p, p.validate());
        }

        #[test]
        fn keys_of_row_counts_allowed(seq_q in 1u32..40, seq_k in 1u32..40, causal: bool) {
            let p = AttentionProblem { seq_q, seq_k, causal, ..AttentionProblem::new(1, 1, 1, 64, causal, DType::F16) };
            for i in 0..seq_q {
                let n = (0..seq_k).filter(|&j| p.allowed(i, j)).count() as u32;
                prop_assert_eq!(n, p.keys_of_row(i));
                prop_assert!(n >= 1);
            }
        }
    }
}
