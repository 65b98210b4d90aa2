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

    /// Checks shapes, leading dimensions and pointers (pure).
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
