//! The GEMM operation signature: shapes, dtypes, layouts, batching and the fused epilogue.

use crate::DType;
use serde::{Deserialize, Serialize};

/// Storage order of a matrix operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Layout {
    /// Row-major: element (r, c) at `r * ld + c`.
    Row,
    /// Column-major: element (r, c) at `c * ld + r`.
    Col,
}

/// Elementwise activation applied in the epilogue.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
pub enum Activation {
    /// Identity.
    #[default]
    None,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation.
    GeluTanh,
    /// GELU, exact erf form.
    GeluErf,
    /// x * sigmoid(x).
    Silu,
}

/// Fused epilogue: `out = act(alpha * acc + beta * C + bias[col]) + residual`, cast to `out_dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Epilogue {
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the existing C (0 means C is not read).
    pub beta: f32,
    /// Add a per-column (length N) bias vector, stored in `out_dtype`.
    pub bias: bool,
    /// Activation after bias.
    pub activation: Activation,
    /// Add a residual matrix (M x N, same layout/dtype as the output) after the activation.
    pub residual: bool,
    /// Output element type (defaults to the input dtype; F32 for Tf32 inputs).
    pub out_dtype: DType,
}

impl Epilogue {
    /// Plain `C = A * B` in `out_dtype`.
    pub fn plain(out_dtype: DType) -> Self {
        Epilogue {
            alpha: 1.0,
            beta: 0.0,
            bias: false,
            activation: Activation::None,
            residual: false,
            out_dtype,
        }
    }
}

/// One GEMM: `C[b] (M x N) = A[b] (M x K) * B[b] (K x N)` for `b` in `0..batch`.
///
/// C is always row-major with leading dimension `ldc`. A and B may each be row- or
/// column-major (`Row, Row` is "NN", `Row, Col` is "NT", ...).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmProblem {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Inner dimension.
    pub k: u32,
    /// Number of independent products (strided batch); 1 for a plain GEMM.
    pub batch: u32,
    /// Input element type of A and B (Tf32 means f32 storage with TF32 tensor-core math).
    pub dtype: DType,
    /// Layout of A.
    pub layout_a: Layout,
    /// Layout of B.
    pub layout_b: Layout,
    /// Leading dimension of A, in elements.
    pub lda: u32,
    /// Leading dimension of B, in elements.
    pub ldb: u32,
    /// Leading dimension of C (row-major), in elements.
    pub ldc: u32,
    /// Element stride between consecutive batch entries of A (0 broadcasts one A).
    pub stride_a: u64,
    /// Element stride between consecutive batch entries of B.
    pub stride_b: u64,
    /// Element stride between consecutive batch entries of C.
    pub stride_c: u64,
    /// The fused epilogue.
    pub epilogue: Epilogue,
}

/// A GEMM problem that cannot exist (zero dims, leading dimension too small, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid GEMM {what}")]
pub struct InvalidGemm {
    /// What is wrong, naming the field.
    pub what: String,
}

impl GemmProblem {
    /// A dense, packed, unbatched problem with a plain epilogue.
    pub fn new(m: u32, n: u32, k: u32, dtype: DType, layout_a: Layout, layout_b: Layout) -> Self {
        let lda = match layout_a {
            Layout::Row => k,
            Layout::Col => m,
        };
        let ldb = match layout_b {
            Layout::Row => n,
            Layout::Col => k,
        };
        let out = if dtype == DType::Tf32 {
            DType::F32
        } else {
            dtype
        };
        GemmProblem {
            m,
            n,
            k,
            batch: 1,
            dtype,
            layout_a,
            layout_b,
            lda,
            ldb,
            ldc: n,
            stride_a: m as u64 * k as u64,
            stride_b: k as u64 * n as u64,
            stride_c: m as u64 * n as u64,
            epilogue: Epilogue::plain(out),
        }
    }

    /// Row-major A and B ("NN").
    pub fn nn(m: u32, n: u32, k: u32, dtype: DType) -> Self {
        Self::new(m, n, k, dtype, Layout::Row, Layout::Row)
    }

    /// Makes it a strided batch of `batch` packed problems.
    pub fn batched(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// Floating-point operations (2*M*N*K per batch entry).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Rows x cols of A and B as stored.
    fn stored_dims(&self) -> ((u32, u32), (u32, u32)) {
        let a = match self.layout_a {
            Layout::Row => (self.m, self.k),
            Layout::Col => (self.k, self.m),
        };
        let b = match self.layout_b {
            Layout::Row => (self.k, self.n),
            Layout::Col => (self.n, self.k),
        };
        (a, b)
    }

    /// Elements each operand buffer must hold: (A, B, C).
    pub fn buffer_elems(&self) -> (u64, u64, u64) {
        let ((ar, _), (br, _)) = self.stored_dims();
        let span = |rows: u32, ld: u32, stride: u64| -> u64 {
            let one = (rows.max(1) as u64 - 1) * ld as u64 + ld as u64;
            one + stride * (self.batch.max(1) as u64 - 1)
        };
        (
            span(ar, self.lda, self.stride_a),
            span(br, self.ldb, self.stride_b),
            span(self.m, self.ldc, self.stride_c),
        )
    }

    /// Checks that the problem is well-formed; every template calls this first.
    pub fn validate(&self) -> Result<(), InvalidGemm> {
        let bad = |what: String| Err(InvalidGemm { what });
        if self.m == 0 || self.n == 0 || self.k == 0 || self.batch == 0 {
            return bad(format!(
                "shape: m={}, n={}, k={}, batch={} (all must be >= 1)",
                self.m, self.n, self.k, self.batch
            ));
        }
        let ((_, ac), (_, bc)) = self.stored_dims();
        if self.lda < ac {
            return bad(format!(
                "lda={} < {} (columns of A as stored)",
                self.lda, ac
            ));
        }
        if self.ldb < bc {
            return bad(format!(
                "ldb={} < {} (columns of B as stored)",
                self.ldb, bc
            ));
        }
        if self.ldc < self.n {
            return bad(format!("ldc={} < n={}", self.ldc, self.n));
        }
        if self.dtype == DType::Tf32 && self.epilogue.out_dtype != DType::F32 {
            return bad("out_dtype: tf32 GEMMs write f32".to_string());
        }
        if self.dtype == DType::F32 && self.epilogue.out_dtype != DType::F32 {
            return bad("out_dtype: f32 GEMMs write f32".to_string());
        }
        if !self.epilogue.alpha.is_finite() || !self.epilogue.beta.is_finite() {
            return bad("epilogue: alpha and beta must be finite".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_problem_is_valid_and_sized() {
        let p = GemmProblem::new(4000, 4000, 4096, DType::Bf16, Layout::Row, Layout::Col);
        p.validate().unwrap();
        assert_eq!(p.buffer_elems(), (4000 * 4096, 4096 * 4000, 4000 * 4000));
        assert_eq!(p.flops(), 2.0 * 4000.0 * 4000.0 * 4096.0);
    }

    #[test]
    fn bad_problems_name_the_field() {
        let mut p = GemmProblem::nn(64, 64, 64, DType::F16);
        p.lda = 10;
        assert!(p.validate().unwrap_err().what.contains("lda"));
        let z = GemmProblem::nn(0, 64, 64, DType::F16);
        assert!(z.validate().unwrap_err().what.contains("m=0"));
    }
}
