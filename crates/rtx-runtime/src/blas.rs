//! cuBLAS GEMM baseline over raw device pointers, in a **row-major** convention.
//!
//! `C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C[m, n]`, every matrix row-major:
//! - `A` is stored `m x k` (`lda >= k`), or `k x m` when `transa` (`lda >= m`);
//! - `B` is stored `k x n` (`ldb >= n`), or `n x k` when `transb` (`ldb >= k`);
//! - `C` is stored `m x n` (`ldc >= n`).
//!
//! cuBLAS is column-major; a row-major `X` with leading dimension `ld` is the column-major
//! `X^T`, so we compute `C^T = op(B)^T * op(A)^T` by calling cuBLAS with `(n, m, k)` and the
//! operands swapped. Batched calls use `cublasGemmStridedBatchedEx` with element strides.
//! Accumulation is always fp32 (`CUBLAS_COMPUTE_32F`; `_FAST_TF32` for [`BlasDtype::Tf32`]).

use crate::device::Device;
use crate::error::RuntimeError;
use crate::raw::{self, cublas};
use crate::stream::Stream;
use cudarc::cublas::sys::{cublasComputeType_t as CT, cudaDataType as DT};
use std::sync::Mutex;

/// Input type of a GEMM (accumulation is fp32 in every case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BlasDtype {
    /// fp32 in, fp32 out, full fp32 math.
    F32,
    /// fp32 in/out, tensor cores with tf32 inputs.
    Tf32,
    /// fp16 in; C is fp16 (or fp32 with `c_f32`).
    F16,
    /// bf16 in; C is bf16 (or fp32 with `c_f32`).
    Bf16,
}

impl BlasDtype {
    /// Bytes per input element.
    pub fn size(self) -> usize {
        match self {
            BlasDtype::F32 | BlasDtype::Tf32 => 4,
            BlasDtype::F16 | BlasDtype::Bf16 => 2,
        }
    }
}

/// One (possibly batched) row-major GEMM; pointers are device addresses.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlasGemm {
    /// Input type.
    pub dtype: BlasDtype,
    /// For F16/Bf16: write C as fp32 instead of the input type.
    pub c_f32: bool,
    /// Use `A^T` (A stored `k x m`).
    pub transa: bool,
    /// Use `B^T` (B stored `n x k`).
    pub transb: bool,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the existing C.
    pub beta: f32,
    /// A's address.
    pub a: u64,
    /// A's row stride in elements.
    pub lda: usize,
    /// B's address.
    pub b: u64,
    /// B's row stride in elements.
    pub ldb: usize,
    /// C's address.
    pub c: u64,
    /// C's row stride in elements.
    pub ldc: usize,
    /// Number of GEMMs (>= 1).
    pub batch: usize,
    /// Elements between consecutive A matrices (batched only).
    pub stride_a: i64,
    /// Elements between consecutive B matrices.
    pub stride_b: i64,
    /// Elements between consecutive C matrices.
    pub stride_c: i64,
}

impl BlasGemm {
    /// A single dense GEMM with tight leading dimensions, alpha = 1, beta = 0.
    ///
    /// Errors with [`RuntimeError::InvalidArgument`] when a matrix's element count (its batch
    /// stride) does not fit in `i64`, rather than wrapping to a wrong stride.
    pub fn new(
        dtype: BlasDtype,
        m: usize,
        n: usize,
        k: usize,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<Self, RuntimeError> {
        let elems = |what: &str, rows: usize, cols: usize| {
            rows.checked_mul(cols)
                .and_then(|e| i64::try_from(e).ok())
                .ok_or_else(|| RuntimeError::InvalidArgument {
                    op: "BlasGemm::new",
                    reason: format!(
                        "{what} has {rows} x {cols} elements, more than an i64 batch stride holds"
                    ),
                })
        };
        let (stride_a, stride_b, stride_c) =
            (elems("A", m, k)?, elems("B", k, n)?, elems("C", m, n)?);
        Ok(BlasGemm {
            dtype,
            c_f32: false,
            transa: false,
            transb: false,
            m,
            n,
            k,
            alpha: 1.0,
            beta: 0.0,
            a,
            lda: k,
            b,
            ldb: n,
            c,
            ldc: n,
            batch: 1,
            stride_a,
            stride_b,
            stride_c,
        })
    }

    /// Bytes per element of C.
    pub fn c_size(&self) -> usize {
        if self.c_f32 {
            4
        } else {
            self.dtype.size()
        }
    }

    /// Checks shapes, leading dimensions, batch strides (when `batch > 1`) and pointers (pure).
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |status: String| Err(RuntimeError::Blas { op: "gemm", status });
        if self.m == 0 || self.n == 0 || self.k == 0 || self.batch == 0 {
            return bad(format!(
                "empty problem m={} n={} k={} batch={}",
                self.m, self.n, self.k, self.batch
            ));
        }
        let (a_cols, b_cols) = (
            if self.transa { self.m } else { self.k },
            if self.transb { self.k } else { self.n },
        );
        if self.lda < a_cols {
            return bad(format!("lda {} < {a_cols} (A row length)", self.lda));
        }
        if self.ldb < b_cols {
            return bad(format!("ldb {} < {b_cols} (B row length)", self.ldb));
        }
        if self.ldc < self.n {
            return bad(format!("ldc {} < n {}", self.ldc, self.n));
        }
        for (name, v) in [
            ("m", self.m),
            ("n", self.n),
            ("k", self.k),
            ("lda", self.lda),
            ("ldb", self.ldb),
            ("ldc", self.ldc),
            ("batch", self.batch),
        ] {
            if v > i32::MAX as usize {
                return bad(format!("{name} = {v} exceeds i32"));
            }
        }
        if self.batch > 1 {
            // With one matrix the strides are unused; otherwise cuBLAS adds `stride * i` (i64) to
            // each base pointer, so every batch entry's last element must be addressable in i64.
            let (a_rows, b_rows) = (
                if self.transa { self.k } else { self.m },
                if self.transb { self.n } else { self.k },
            );
            let further = self.batch as i128 - 1;
            for (name, stride, rows, ld, cols) in [
                ("stride_a", self.stride_a, a_rows, self.lda, a_cols),
                ("stride_b", self.stride_b, b_rows, self.ldb, b_cols),
                ("stride_c", self.stride_c, self.m, self.ldc, self.n),
            ] {
                if stride < 0 {
                    return bad(format!("{name} {stride} < 0"));
                }
                // Elements one row-major matrix spans: (rows - 1) * ld + cols (under 2^62 after
                // the i32 checks; saturating, so a reordering of the checks cannot overflow).
                let extent = (rows as i128 - 1)
                    .saturating_mul(ld as i128)
                    .saturating_add(cols as i128);
                // A and B may broadcast (stride 0); batch entries of C must be disjoint, or
                // concurrent writes to the same output would race.
                if name == "stride_c" && i128::from(stride) < extent {
                    return bad(format!(
                        "stride_c {stride} < {extent} = (m - 1) * ldc + n: the {} batch entries of C would overlap",
                        self.batch
                    ));
                }
                let end = i128::from(stride)
                    .checked_mul(further)
                    .and_then(|s| s.checked_add(extent));
                if end.is_none_or(|e| e > i128::from(i64::MAX)) {
                    return bad(format!(
                        "{name} {stride} x {further} further batch entries + {extent} elements overflows i64"
                    ));
                }
            }
        }
        if self.a == 0 || self.b == 0 || self.c == 0 {
            return bad("null matrix pointer".into());
        }
        Ok(())
    }

    fn to_col_major(self) -> cublas::ColGemm {
        let (ab, c, compute) = match (self.dtype, self.c_f32) {
            (BlasDtype::F32, _) => (DT::CUDA_R_32F, DT::CUDA_R_32F, CT::CUBLAS_COMPUTE_32F),
            (BlasDtype::Tf32, _) => (
                DT::CUDA_R_32F,
                DT::CUDA_R_32F,
                CT::CUBLAS_COMPUTE_32F_FAST_TF32,
            ),
            (BlasDtype::F16, f) => (
                DT::CUDA_R_16F,
                if f { DT::CUDA_R_32F } else { DT::CUDA_R_16F },
                CT::CUBLAS_COMPUTE_32F,
            ),
            (BlasDtype::Bf16, f) => (
                DT::CUDA_R_16BF,
                if f { DT::CUDA_R_32F } else { DT::CUDA_R_16BF },
                CT::CUBLAS_COMPUTE_32F,
            ),
        };
        // Column-major C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m).
        cublas::ColGemm {
            transa: self.transb,
            transb: self.transa,
            m: self.n as i32,
            n: self.m as i32,
            k: self.k as i32,
            alpha: self.alpha,
            a: self.b,
            a_type: ab,
            lda: self.ldb as i32,
            stride_a: self.stride_b,
            b: self.a,
            b_type: ab,
            ldb: self.lda as i32,
            stride_b: self.stride_a,
            beta: self.beta,
            c: self.c,
            c_type: c,
            ldc: self.ldc as i32,
            stride_c: self.stride_c,
            batch: self.batch as i32,
            compute,
        }
    }
}

/// A cuBLAS handle bound to one stream.
pub struct Blas {
    device: Device,
    stream: Stream,
    handle: Mutex<cublas::Handle>,
}

impl std::fmt::Debug for Blas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blas")
            .field("device", &self.device.ordinal())
            .field("stream", &self.stream.id())
            .finish()
    }
}

impl Blas {
    /// Creates a handle whose work goes to `stream` (kept alive by the handle).
    pub fn new(device: &Device, stream: &Stream) -> Result<Blas, RuntimeError> {
        if !raw::cublas_present() {
            return Err(RuntimeError::NoLibrary { lib: "cublas" });
        }
        if stream.device().ordinal() != device.ordinal() {
            return Err(RuntimeError::InvalidArgument {
                op: "Blas::new",
                reason: "stream belongs to another device".into(),
            });
        }
        device.bind()?;
        let handle = cublas::create(stream.raw())?;
        Ok(Blas {
            device: device.clone(),
            stream: stream.clone(),
            handle: Mutex::new(handle),
        })
    }

    /// The stream the GEMMs run on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Enqueues the GEMM on the handle's stream (asynchronous). Shapes and leading dimensions are
    /// checked; the pointers must address allocations large enough for them.
    pub fn gemm(&self, p: &BlasGemm) -> Result<(), RuntimeError> {
        p.validate()?;
        let g = p.to_col_major();
        self.device.bind()?;
        let h = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: shapes validated; the caller supplies live device allocations.
        unsafe { cublas::gemm(&h, &g) }
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            let h = self.handle.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = cublas::destroy(&h) {
                tracing::warn!("destroying a cuBLAS handle failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn swap_trick_maps_row_major_to_column_major() {
        let mut p = BlasGemm::new(BlasDtype::Bf16, 64, 48, 32, 0xa00, 0xb00, 0xc00).unwrap();
        p.transa = true;
        p.lda = 64;
        let g = p.to_col_major();
        assert_eq!((g.m, g.n, g.k), (48, 64, 32));
        assert_eq!((g.a, g.b, g.c), (0xb00, 0xa00, 0xc00));
        assert_eq!((g.lda, g.ldb, g.ldc), (48, 64, 48));
        assert!(!g.transa && g.transb);
        assert_eq!(g.c_type, DT::CUDA_R_16BF);
        assert_eq!(g.compute, CT::CUBLAS_COMPUTE_32F);
        assert_eq!(
            BlasGemm::new(BlasDtype::Tf32, 1, 1, 1, 1, 1, 1)
                .unwrap()
                .to_col_major()
                .compute,
            CT::CUBLAS_COMPUTE_32F_FAST_TF32
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let ok = BlasGemm::new(BlasDtype::F32, 64, 48, 32, 16, 16, 16).unwrap();
        assert!(ok.validate().is_ok());
        let msg = |p: BlasGemm| match p.validate() {
            Err(RuntimeError::Blas { status, .. }) => status,
            other => panic!("expected Blas error, got {other:?}"),
        };
        assert!(msg(BlasGemm { lda: 31, ..ok }).contains("lda"));
        assert!(msg(BlasGemm { ldb: 47, ..ok }).contains("ldb"));
        assert!(msg(BlasGemm { ldc: 47, ..ok }).contains("ldc"));
        assert!(msg(BlasGemm { transa: true, ..ok }).contains("lda"));
        assert!(msg(BlasGemm { k: 0, ..ok }).contains("empty"));
        assert!(msg(BlasGemm { a: 0, ..ok }).contains("null"));
        assert!(msg(BlasGemm { m: 1 << 31, ..ok }).contains("i32"));
    }

    /// Batch strides used to go unchecked: a negative one, overlapping C entries (racing writes)
    /// or an offset past i64 reached cuBLAS.
    #[test]
    fn validate_checks_batch_strides() {
        let msg = |p: BlasGemm| match p.validate() {
            Err(RuntimeError::Blas { status, .. }) => status,
            other => panic!("expected Blas error for {p:?}, got {other:?}"),
        };
        let ok = BlasGemm {
            batch: 3,
            ..BlasGemm::new(BlasDtype::F32, 64, 48, 32, 16, 16, 16).unwrap()
        };
        ok.validate().unwrap();
        for (name, p) in [
            ("stride_a", BlasGemm { stride_a: -1, ..ok }),
            (
                "stride_b",
                BlasGemm {
                    stride_b: i64::MIN,
                    ..ok
                },
            ),
            (
                "stride_c",
                BlasGemm {
                    stride_c: -64,
                    ..ok
                },
            ),
        ] {
            let m = msg(p);
            assert!(m.starts_with(name) && m.contains("< 0"), "{m}");
        }
        // Broadcast A or B to every batch entry is legal.
        BlasGemm {
            stride_a: 0,
            stride_b: 0,
            ..ok
        }
        .validate()
        .unwrap();
        // C entries must be disjoint: one spans (m - 1) * ldc + n elements.
        let padded = BlasGemm { ldc: 50, ..ok };
        let span = 63 * 50 + 48;
        for stride_c in [0, 48, span - 1] {
            let m = msg(BlasGemm { stride_c, ..padded });
            assert!(m.contains("stride_c") && m.contains("overlap"), "{m}");
        }
        BlasGemm {
            stride_c: span,
            ..padded
        }
        .validate()
        .unwrap();
        // Offsets past i64: stride * (batch - 1) + extent. A transposed is 32 x 64 as stored.
        let at = BlasGemm {
            transa: true,
            lda: 64,
            batch: 2,
            ..ok
        };
        let a_extent = 31 * 64 + 64;
        BlasGemm {
            stride_a: i64::MAX - a_extent,
            ..at
        }
        .validate()
        .unwrap();
        let m = msg(BlasGemm {
            stride_a: i64::MAX - a_extent + 1,
            ..at
        });
        assert!(
            m.starts_with("stride_a") && m.contains("overflows i64"),
            "{m}"
        );
        for (name, p) in [
            (
                "stride_a",
                BlasGemm {
                    stride_a: i64::MAX / 2,
                    ..ok
                },
            ),
            (
                "stride_b",
                BlasGemm {
                    stride_b: i64::MAX,
                    ..ok
                },
            ),
            (
                "stride_c",
                BlasGemm {
                    stride_c: i64::MAX / 2 + 1,
                    ..ok
                },
            ),
            (
                "stride_c",
                BlasGemm {
                    stride_c: 1 << 40,
                    batch: i32::MAX as usize,
                    ..ok
                },
            ),
        ] {
            let m = msg(p);
            assert!(m.starts_with(name) && m.contains("overflows i64"), "{m}");
        }
        // One matrix: the strides are unused, whatever they hold.
        BlasGemm {
            batch: 1,
            stride_a: -1,
            stride_b: i64::MAX,
            stride_c: 0,
            ..ok
        }
        .validate()
        .unwrap();
    }

    /// Mostly small values (to reach the later checks), some huge ones.
    fn dim() -> impl Strategy<Value = usize> {
        prop_oneof![1usize..80, 0usize..=(1 << 40), any::<usize>()]
    }

    fn stride() -> impl Strategy<Value = i64> {
        prop_oneof![0i64..20_000, any::<i64>()]
    }

    proptest! {
        /// `validate` is total: any field values give `Ok` or a `Blas` error, never a panic; and an
        /// accepted batched call has non-negative strides and disjoint C entries.
        #[test]
        fn validate_never_panics(
            (m, n, k) in (dim(), dim(), dim()),
            (lda, ldb, ldc) in (dim(), dim(), dim()),
            batch in prop_oneof![1usize..5, dim()],
            (stride_a, stride_b, stride_c) in (stride(), stride(), stride()),
            (transa, transb) in (any::<bool>(), any::<bool>()),
        ) {
            let p = BlasGemm {
                transa, transb, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c,
                ..BlasGemm::new(BlasDtype::Bf16, 1, 1, 1, 16, 16, 16).unwrap()
            };
            match p.validate() {
                Ok(()) => {
                    if batch > 1 {
                        prop_assert!(stride_a >= 0 && stride_b >= 0);
                        prop_assert!(stride_c as u128 >= ((m - 1) * ldc + n) as u128);
                    }
                }
                Err(RuntimeError::Blas { op, .. }) => prop_assert_eq!(op, "gemm"),
                Err(e) => prop_assert!(false, "unexpected error {e:?}"),
            }
        }

        /// The tight strides `BlasGemm::new` produces are accepted for any batch count.
        #[test]
        fn tight_strides_from_new_are_accepted(
            m in 1usize..5000, n in 1usize..5000, k in 1usize..5000, batch in 1usize..64,
        ) {
            let p = BlasGemm { batch, ..BlasGemm::new(BlasDtype::F16, m, n, k, 16, 16, 16).unwrap() };
            prop_assert!(p.validate().is_ok(), "{:?}", p.validate());
            let p3 = BlasGemm { batch: 3, ..p };
            prop_assert!(p3.validate().is_ok(), "{:?}", p3.validate());
        }
    }

    /// `m * k` used to overflow (debug panic) or wrap to a wrong batch stride (release).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn new_refuses_element_counts_past_i64() {
        for (m, n, k, what) in [
            (1usize << 32, 1, 1 << 31, "A"),
            (1, 1 << 33, 1 << 31, "B"),
            (usize::MAX, 2, 1, "A"),
        ] {
            match BlasGemm::new(BlasDtype::F32, m, n, k, 16, 16, 16) {
                Err(RuntimeError::InvalidArgument { op, reason }) => {
                    assert_eq!(op, "BlasGemm::new");
                    assert!(reason.starts_with(what), "{reason}");
                }
                other => panic!("{m}x{n}x{k}: {other:?}"),
            }
        }
        let g = BlasGemm::new(BlasDtype::F32, 1 << 31, 1, 1 << 31, 16, 16, 16).unwrap();
        assert_eq!(g.stride_a, 1 << 62);
    }
}
