//! The cuBLAS baseline: our `GemmProblem` as a `rtx_runtime::blas::BlasGemm` call.

use rtx_runtime::blas::{BlasDtype, BlasGemm};
use rtx_runtime::{DeviceBuffer, RuntimeError};
use rtx_synthesis::templates::gemm::{GemmProblem, Layout};
use rtx_synthesis::DType;

/// The cuBLAS input type for an rtx dtype.
pub fn blas_dtype(d: DType) -> BlasDtype {
    match d {
        DType::F32 => BlasDtype::F32,
        DType::Tf32 => BlasDtype::Tf32,
        DType::F16 => BlasDtype::F16,
        DType::Bf16 => BlasDtype::Bf16,
    }
}

/// The row-major cuBLAS call for `p` on these buffers (layouts map to transposes; C is written
/// in the problem's output dtype, which for f16/bf16 is the input dtype). Errors where
/// [`BlasGemm::new`] does (a matrix of more elements than an `i64` stride holds).
pub fn blas_call(
    p: &GemmProblem,
    a: &DeviceBuffer,
    b: &DeviceBuffer,
    c: &DeviceBuffer,
) -> Result<BlasGemm, RuntimeError> {
    let mut g = BlasGemm::new(
        blas_dtype(p.dtype),
        p.m as usize,
        p.n as usize,
        p.k as usize,
        a.ptr(),
        b.ptr(),
        c.ptr(),
    )?;
    g.transa = p.layout_a == Layout::Col;
    g.transb = p.layout_b == Layout::Col;
    g.c_f32 = matches!(p.dtype, DType::F16 | DType::Bf16) && p.epilogue.out_dtype == DType::F32;
    g.lda = p.lda as usize;
    g.ldb = p.ldb as usize;
    g.ldc = p.ldc as usize;
    g.alpha = p.epilogue.alpha;
    g.beta = p.epilogue.beta;
    g.batch = p.batch as usize;
    g.stride_a = p.stride_a as i64;
    g.stride_b = p.stride_b as i64;
    g.stride_c = p.stride_c as i64;
    Ok(g)
}
