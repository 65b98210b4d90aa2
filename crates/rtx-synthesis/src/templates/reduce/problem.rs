//! One row-reduction problem: softmax, LayerNorm or RMSNorm over every row of a matrix.

use crate::DType;
use serde::{Deserialize, Serialize};

/// Longest row the templates accept (counts stay exact in f32).
pub const MAX_COLS: u32 = 1 << 24;

/// Which row operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RowOp {
    /// `y = exp(x - max) / sum(exp(x - max))` per row.
    Softmax,
    /// `y = (x - mean) / sqrt(var + eps) [* weight] [+ bias]` (biased variance).
    LayerNorm {
        /// Multiply by a per-column weight (length `cols`).
        weight: bool,
        /// Add a per-column bias (length `cols`).
        bias: bool,
    },
    /// `y = x / sqrt(mean(x^2) + eps) [* weight]`.
    RmsNorm {
        /// Multiply by a per-column weight (length `cols`).
        weight: bool,
    },
}

impl RowOp {
    /// Short name used in kernel symbols.
    pub fn name(self) -> &'static str {
        match self {
            RowOp::Softmax => "softmax",
            RowOp::LayerNorm { .. } => "layernorm",
            RowOp::RmsNorm { .. } => "rmsnorm",
        }
    }

    /// Whether the op reads a weight vector.
    pub fn has_weight(self) -> bool {
        matches!(
            self,
            RowOp::LayerNorm { weight: true, .. } | RowOp::RmsNorm { weight: true }
        )
    }

    /// Whether the op reads a bias vector.
    pub fn has_bias(self) -> bool {
        matches!(self, RowOp::LayerNorm { bias: true, .. })
    }

    /// Whether the op takes `eps`.
    pub fn is_norm(self) -> bool {
        !matches!(self, RowOp::Softmax)
    }
}

/// A row operation over a `rows x cols` row-major contiguous matrix.
///
/// Kernel arguments, in order: `x`, `residual` (if `residual`), `weight` (if the op has one),
/// `bias` (if it has one), `y`, `residual_out` (if `residual`), then `int rows, int cols` and,
/// for the norms, `float eps`. With `residual`, the kernel first forms
/// `h = round_to_dtype(x + residual)`, writes `h` to `residual_out` and normalizes `h`
/// (exactly what an unfused `h = x + r; y = norm(h)` computes in the storage dtype).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RowProblem {
    /// The operation.
    pub op: RowOp,
    /// Rows (>= 1).
    pub rows: u32,
    /// Row length (1..=[`MAX_COLS`]); a kernel argument, the templates size their configs by it.
    pub cols: u32,
    /// Storage dtype of every tensor (f32, f16 or bf16); accumulation is f32.
    pub dtype: DType,
    /// Fused residual add (norms only).
    pub residual: bool,
    /// Epsilon of the norms (ignored by softmax).
    pub eps: f32,
}

/// Why a row problem cannot be compiled; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid row problem: {what}")]
pub struct RowProblemError {
    /// What is wrong.
    pub what: String,
}

impl RowProblem {
    /// Softmax over `rows x cols`.
    pub fn softmax(rows: u32, cols: u32, dtype: DType) -> Self {
        RowProblem {
            op: RowOp::Softmax,
            rows,
            cols,
            dtype,
            residual: false,
            eps: 0.0,
        }
    }

    /// LayerNorm with optional affine weight/bias.
    pub fn layernorm(
        rows: u32,
        cols: u32,
        dtype: DType,
        weight: bool,
        bias: bool,
        eps: f32,
    ) -> Self {
        RowProblem {
            op: RowOp::LayerNorm { weight, bias },
            rows,
            cols,
            dtype,
            residual: false,
            eps,
        }
    }

    /// RMSNorm with optional weight.
    pub fn rmsnorm(rows: u32, cols: u32, dtype: DType, weight: bool, eps: f32) -> Self {
        RowProblem {
            op: RowOp::RmsNorm { weight },
            rows,
            cols,
            dtype,
            residual: false,
            eps,
        }
    }

    /// The same norm with a fused residual add (writing the summed stream out).
    pub fn with_residual(mut self) -> Self {
        self.residual = true;
        self
    }

    /// Checks the fields.
    pub fn validate(&self) -> Result<(), RowProblemError> {
        let bad = |what: String| Err(RowProblemError { what });
        if self.rows == 0 || self.rows > i32::MAX as u32 {
            return bad(format!("rows = {} (must be in 1..=2^31-1)", self.rows));
        }
        if self.cols == 0 || self.cols > MAX_COLS {
            return bad(format!("cols = {} (must be in 1..={MAX_COLS})", self.cols));
        }
        if !matches!(self.dtype, DType::F32 | DType::F16 | DType::Bf16) {
            return bad(format!(
                "dtype = {} (row kernels store f32, f16 or bf16)",
                self.dtype
            ));
        }
        if self.residual && !self.op.is_norm() {
            return bad("residual: only LayerNorm and RMSNorm fuse a residual add".into());
        }
        if self.op.is_norm() && !(self.eps.is_finite() && self.eps >= 0.0) {
            return bad(format!("eps = {} (must be finite and >= 0)", self.eps));
        }
        Ok(())
    }

    /// Element counts of the tensors in kernel-argument order, with whether each is written.
    pub fn tensors(&self) -> Vec<(&'static str, u64, bool)> {
        let full = self.rows as u64 * self.cols as u64;
        let mut v = vec![("x", full, false)];
        if self.residual {
            v.push(("residual", full, false));
        }
        if self.op.has_weight() {
            v.push(("weight", self.cols as u64, false));
        }
        if self.op.has_bias() {
            v.push(("bias", self.cols as u64, false));
        }
        v.push(("y", full, true));
        if self.residual {
            v.push(("residual_out", full, true));
        }
        v
    }

    /// Bytes one launch must move at least (every tensor once).
    pub fn bytes_moved(&self) -> u64 {
        self.tensors().iter().map(|t| t.1).sum::<u64>() * self.dtype.size_bytes() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        assert!(RowProblem::softmax(4, 64, DType::Bf16).validate().is_ok());
        let e = RowProblem::softmax(4, 0, DType::Bf16)
            .validate()
            .unwrap_err();
        assert!(e.what.contains("cols"), "{e}");
        let e = RowProblem::softmax(4, 8, DType::Tf32)
            .validate()
            .unwrap_err();
        assert!(e.what.contains("dtype"), "{e}");
        let e = RowProblem::softmax(4, 8, DType::F32)
            .with_residual()
            .validate()
            .unwrap_err();
        assert!(e.what.contains("residual"), "{e}");
        let e = RowProblem::layernorm(4, 8, DType::F32, true, true, f32::NAN)
            .validate()
            .unwrap_err();
        assert!(e.what.contains("eps"), "{e}");
        assert!(RowProblem::rmsnorm(1, 1, DType::F16, true, 1e-6)
            .with_residual()
            .validate()
            .is_ok());
    }

    #[test]
    fn tensors_follow_the_argument_order() {
        let p = RowProblem::layernorm(2, 8, DType::Bf16, true, true, 1e-5).with_residual();
        let names: Vec<_> = p.tensors().iter().map(|t| t.0).collect();
        assert_eq!(
            names,
            ["x", "residual", "weight", "bias", "y", "residual_out"]
        );
        assert_eq!(p.bytes_moved(), (16 * 4 + 16) * 2);
    }
}
