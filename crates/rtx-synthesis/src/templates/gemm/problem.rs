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
    /// Element stride between consecutive batch entries of B (0 broadcasts one B).
    pub stride_b: u64,
    /// Element stride between consecutive batch entries of C (and of the residual). When
    /// `batch > 1` it must be at least `(m - 1) * ldc + n`, the span of one C matrix: batch
    /// entries of the output may not overlap.
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

    /// The operands of `C^T = B^T A^T`: M and N, A and B (with their leading dimensions and
    /// batch strides) trade places, and each operand's layout flips, since a row-major B read
    /// as `B^T` is column-major over the same memory. C's fields (`ldc`, `stride_c`) and the
    /// epilogue are kept as they are: this is the view a kernel that stores its tile transposed
    /// computes on (wgmma's `swap_ab`), not a problem to validate on its own.
    pub fn transposed(&self) -> GemmProblem {
        let flip = |l: Layout| match l {
            Layout::Row => Layout::Col,
            Layout::Col => Layout::Row,
        };
        GemmProblem {
            m: self.n,
            n: self.m,
            layout_a: flip(self.layout_b),
            layout_b: flip(self.layout_a),
            lda: self.ldb,
            ldb: self.lda,
            stride_a: self.stride_b,
            stride_b: self.stride_a,
            ..*self
        }
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

    /// Elements one operand spans: `rows * ld` for the first batch entry plus `stride` for each
    /// further one; `None` when that overflows `u64`.
    fn span_elems(&self, rows: u32, ld: u32, stride: u64) -> Option<u64> {
        let one = u64::from(rows.max(1)) * u64::from(ld);
        stride
            .checked_mul(u64::from(self.batch.max(1)) - 1)?
            .checked_add(one)
    }

    /// Elements each operand buffer must hold: (A, B, C).
    ///
    /// An extent that overflows `u64` saturates to `u64::MAX`, so a size check against it fails
    /// rather than passing a short buffer; [`GemmProblem::validate`] rejects such problems, and
    /// [`GemmProblem::buffer_bytes`] reports them as an error.
    pub fn buffer_elems(&self) -> (u64, u64, u64) {
        let ((ar, _), (br, _)) = self.stored_dims();
        let span = |rows, ld, stride| self.span_elems(rows, ld, stride).unwrap_or(u64::MAX);
        (
            span(ar, self.lda, self.stride_a),
            span(br, self.ldb, self.stride_b),
            span(self.m, self.ldc, self.stride_c),
        )
    }

    /// Bytes each operand buffer must hold: (A, B, C); a residual needs as many bytes as C.
    ///
    /// Errors, naming the operand, when an extent does not fit in `i64` bytes (the kernels'
    /// signed 64-bit offsets): the problem is then invalid and [`GemmProblem::validate`] fails
    /// with the same error. For a valid problem this always succeeds.
    pub fn buffer_bytes(&self) -> Result<(u64, u64, u64), InvalidGemm> {
        let ((ar, _), (br, _)) = self.stored_dims();
        let isz = self.dtype.size_bytes() as u64;
        Ok((
            self.span_bytes("A", ar, self.lda, self.stride_a, isz)?,
            self.span_bytes("B", br, self.ldb, self.stride_b, isz)?,
            self.c_bytes()?,
        ))
    }

    /// Bytes the epilogue's extra operands must hold: (bias, residual), 0 for one the epilogue
    /// does not read. The bias is `n` elements of `out_dtype`; the residual is laid out like C,
    /// so it needs C's bytes, and errors as [`GemmProblem::buffer_bytes`] does for C.
    pub fn epilogue_operand_bytes(&self) -> Result<(u64, u64), InvalidGemm> {
        let osz = self.epilogue.out_dtype.size_bytes() as u64;
        let bias = if self.epilogue.bias {
            u64::from(self.n).saturating_mul(osz)
        } else {
            0
        };
        let residual = if self.epilogue.residual {
            self.c_bytes()?
        } else {
            0
        };
        Ok((bias, residual))
    }

    /// Bytes of C (and of a residual) in `out_dtype`, checked as [`GemmProblem::buffer_bytes`].
    fn c_bytes(&self) -> Result<u64, InvalidGemm> {
        let osz = self.epilogue.out_dtype.size_bytes() as u64;
        self.span_bytes("C", self.m, self.ldc, self.stride_c, osz)
    }

    /// [`GemmProblem::span_elems`] in `esz`-byte elements; errors, naming `operand`, when that
    /// overflows or exceeds `i64::MAX` bytes.
    fn span_bytes(
        &self,
        operand: &str,
        rows: u32,
        ld: u32,
        stride: u64,
        esz: u64,
    ) -> Result<u64, InvalidGemm> {
        self.span_elems(rows, ld, stride)
            .and_then(|e| e.checked_mul(esz))
            .filter(|&b| b <= i64::MAX as u64)
            .ok_or_else(|| {
                let o = operand.to_lowercase();
                InvalidGemm {
                    what: format!(
                        "{operand} extent: {rows} rows x ld{o}={ld}, plus stride_{o}={stride} for each of {} further batch entries, in {esz}-byte elements exceeds 2^63 - 1 bytes",
                        self.batch.max(1) - 1
                    ),
                }
            })
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
        // Every GEMM kernel takes its sizes and leading dimensions as `int`.
        for (name, v) in [
            ("m", self.m),
            ("n", self.n),
            ("k", self.k),
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("ldc", self.ldc),
        ] {
            if v > i32::MAX as u32 {
                return bad(format!(
                    "{name}={v} exceeds 2^31 - 1 (the kernels take sizes as 32-bit int)"
                ));
            }
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
        for (name, stride) in [
            ("stride_a", self.stride_a),
            ("stride_b", self.stride_b),
            ("stride_c", self.stride_c),
        ] {
            if stride > i64::MAX as u64 {
                return bad(format!(
                    "{name}={stride} exceeds 2^63 - 1 (the kernels take signed 64-bit strides)"
                ));
            }
        }
        self.buffer_bytes()?;
        if self.batch > 1 {
            // Row-major C: one matrix spans (m - 1) * ldc + n elements.
            let c_span = (u64::from(self.m) - 1) * u64::from(self.ldc) + u64::from(self.n);
            if self.stride_c < c_span {
                return bad(format!(
                    "stride_c={} < {c_span} = (m - 1) * ldc + n: the {} batch entries of C would overlap",
                    self.stride_c, self.batch
                ));
            }
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

    /// The transposed view swaps the operands (their buffers keep their sizes), flips their
    /// layouts, keeps C, and is its own inverse.
    #[test]
    fn transposed_swaps_the_operands_and_keeps_c() {
        let mut p =
            GemmProblem::new(160, 1000, 520, DType::Bf16, Layout::Row, Layout::Col).batched(3);
        p.lda = 528;
        p.stride_a = 160 * 528;
        p.epilogue.bias = true;
        let t = p.transposed();
        assert_eq!((t.m, t.n, t.k), (1000, 160, 520));
        assert_eq!((t.layout_a, t.layout_b), (Layout::Row, Layout::Col));
        assert_eq!(
            (t.lda, t.ldb, t.stride_a, t.stride_b),
            (p.ldb, p.lda, p.stride_b, p.stride_a)
        );
        assert_eq!(
            (t.ldc, t.stride_c, t.epilogue),
            (p.ldc, p.stride_c, p.epilogue)
        );
        let (a, b, _) = p.buffer_elems();
        let (ta, tb, _) = t.buffer_elems();
        assert_eq!((ta, tb), (b, a));
        assert_eq!(t.transposed(), p);
    }

    /// A batch stride whose extent overflows used to pass `validate` (and wrap in release, so a
    /// one-entry buffer passed the size checks); now the operand is named.
    #[test]
    fn batch_strides_whose_extent_overflows_are_rejected() {
        let mut p = GemmProblem::nn(64, 64, 64, DType::F32).batched(2);
        p.stride_a = 1 << 62;
        let e = p.validate().unwrap_err();
        assert!(
            e.what.contains("A extent") && e.what.contains("stride_a"),
            "{e}"
        );
        assert_eq!(p.buffer_bytes().unwrap_err(), e);
        // 2^61 elements of 4 bytes: 2^63 bytes, one past i64::MAX.
        p.stride_a = 1 << 61;
        assert!(p.validate().unwrap_err().what.contains("A extent"));
        p.stride_a = 1 << 60;
        p.validate().unwrap();
        // A stride the kernels' signed argument cannot carry.
        let mut b = GemmProblem::nn(128, 128, 128, DType::Bf16).batched(2);
        b.stride_b = 1 << 63;
        assert!(b.validate().unwrap_err().what.contains("stride_b"));
        // Element counts that overflow u64 saturate rather than wrap.
        let mut w = GemmProblem::nn(64, 64, 64, DType::F32).batched(3);
        w.stride_c = 1 << 63;
        assert_eq!(w.buffer_elems().2, u64::MAX);
        assert!(w.validate().unwrap_err().what.contains("stride_c"));
    }

    /// The one definition every launch path and `required_bytes` size bias and residual by.
    #[test]
    fn epilogue_operands_are_sized_like_n_outputs_and_like_c() {
        let mut p = GemmProblem::nn(64, 48, 32, DType::Bf16).batched(3);
        p.ldc = 56;
        p.stride_c = 64 * 56;
        assert_eq!(p.epilogue_operand_bytes(), Ok((0, 0)));
        p.epilogue.bias = true;
        p.epilogue.residual = true;
        let c = p.buffer_bytes().unwrap().2;
        assert_eq!(c, 3 * 64 * 56 * 2);
        assert_eq!(p.epilogue_operand_bytes(), Ok((48 * 2, c)));
        p.epilogue.out_dtype = DType::F32;
        let c = p.buffer_bytes().unwrap().2;
        assert_eq!(p.epilogue_operand_bytes(), Ok((48 * 4, c)));
        // A residual whose (C's) extent overflows is refused with C's error.
        p.stride_c = 1 << 62;
        let e = p.epilogue_operand_bytes().unwrap_err();
        assert!(e.what.contains("C extent"), "{e}");
        assert_eq!(p.buffer_bytes().unwrap_err(), e);
        p.epilogue.residual = false;
        assert_eq!(p.epilogue_operand_bytes(), Ok((48 * 4, 0)));
    }

    /// Sizes the kernels' `int` arguments cannot carry (wgmma wrapped K = 3e9 to a negative int).
    #[test]
    fn sizes_beyond_i32_are_rejected() {
        let mut p = GemmProblem::nn(64, 64, 3_000_000_000, DType::Bf16);
        assert!(p.validate().unwrap_err().what.contains("k=3000000000"));
        p.k = i32::MAX as u32;
        p.lda = p.k;
        p.validate().unwrap();
        let mut q = GemmProblem::nn(64, 64, 64, DType::F16);
        q.ldc = u32::MAX;
        assert!(q.validate().unwrap_err().what.contains("ldc="));
    }

    /// Overlapping output batch entries (a data race between blocks) used to be accepted.
    #[test]
    fn overlapping_c_batches_are_rejected_and_broadcast_inputs_kept() {
        let mut p = GemmProblem::nn(128, 96, 64, DType::Bf16).batched(4);
        p.ldc = 104;
        let span = 127 * 104 + 96;
        for stride_c in [0, 64, span - 1] {
            p.stride_c = stride_c;
            let e = p.validate().unwrap_err();
            assert!(
                e.what.contains("stride_c") && e.what.contains("overlap"),
                "{e}"
            );
        }
        p.stride_c = span;
        p.validate().unwrap();
        p.stride_a = 0;
        p.stride_b = 0;
        p.validate().unwrap();
        // One batch entry: stride_c is never used.
        let mut one = GemmProblem::nn(128, 96, 64, DType::Bf16);
        one.stride_c = 0;
        one.validate().unwrap();
    }

    proptest::proptest! {
        /// Every valid problem's elements lie inside `buffer_elems`, and its batch entries of C
        /// are disjoint.
        #[test]
        fn valid_problems_stay_in_bounds_and_c_entries_are_disjoint(
            m in 1u32..6, n in 1u32..6, k in 1u32..4, pad_c in 0u32..3,
            batch in 1u32..4, stride_c in 0u64..40, stride_a in 0u64..40,
        ) {
            let mut p = GemmProblem::nn(m, n, k, DType::F16).batched(batch);
            p.ldc += pad_c;
            p.stride_c = stride_c;
            p.stride_a = stride_a;
            if p.validate().is_ok() {
                let (ea, _, ec) = p.buffer_elems();
                let mut seen = std::collections::HashSet::new();
                for bt in 0..batch as u64 {
                    for i in 0..m as u64 {
                        for j in 0..n as u64 {
                            let c = bt * p.stride_c + i * p.ldc as u64 + j;
                            proptest::prop_assert!(c < ec);
                            proptest::prop_assert!(seen.insert(c), "C element {} written twice", c);
                        }
                        for kk in 0..k as u64 {
                            proptest::prop_assert!(bt * p.stride_a + i * p.lda as u64 + kk < ea);
                        }
                    }
                }
            }
        }
    }
}
