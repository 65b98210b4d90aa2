//! Micro-benchmark kernels that measure a GPU's real ceilings, emitted as CUDA C++ from typed
//! parameters.
//!
//! | kernel | measures | work counted |
//! | --- | --- | --- |
//! | [`CopyKernel`] | device memory bandwidth | bytes read + bytes written |
//! | [`FmaKernel`] | fp32 SIMT throughput | 2 flops per FMA |
//! | [`MmaSyncKernel`] | warp-level tensor cores (`mma.sync`, sm_80+) | 2·M·N·K per instruction |
//! | [`WgmmaKernel`] | Hopper warpgroup tensor cores (`wgmma`, sm_90a only) | 2·M·N·K per instruction |
//! | [`EmptyKernel`] | launch overhead | one launch |
//!
//! Every compute kernel has a *verify* mode in which each thread stores its result, so the
//! profiler can check on the device that the counted work was really done (see each kernel's
//! `expected_*` helper); in timed mode results are stored only if they equal a runtime sentinel
//! (NaN, never equal), so nothing is dead-code-eliminated and nothing is written.

mod copy;
mod empty;
mod fma;
mod mma_sync;
mod suite;
mod wgmma;

pub use copy::{CacheHint, CopyKernel};
pub use empty::EmptyKernel;
pub use fma::FmaKernel;
pub use mma_sync::MmaSyncKernel;
pub use suite::{MicroSuite, SuiteEntry, TENSOR_DTYPES};
pub use wgmma::WgmmaKernel;

use crate::templates::codegen::CudaWriter;
use crate::templates::{ConstraintViolation, KernelSource};
use crate::Arch;

/// Version of the micro-benchmark kernels; bump on any change to the generated code.
pub const MICRO_VERSION: u32 = 1;

/// A micro-benchmark kernel: typed parameters, declared constraints, CUDA C++.
pub trait MicroKernel: std::fmt::Debug {
    /// Template name (`profiler.copy`, ...), used for caching.
    fn template(&self) -> &'static str;
    /// The `extern "C"` entry point; distinct for distinct parameters.
    fn entry(&self) -> String;
    /// Checks the declared constraints for `arch`.
    fn check(&self, arch: Arch) -> Result<(), ConstraintViolation>;
    /// Writes the kernel body (called only after [`MicroKernel::check`] passed).
    fn write(&self, arch: Arch, w: &mut CudaWriter);
    /// Threads per block the kernel is written for (its `__launch_bounds__`).
    fn block_threads(&self) -> u32;

    /// Checks the constraints, then generates the translation unit.
    fn emit(&self, arch: Arch) -> Result<KernelSource, ConstraintViolation> {
        self.check(arch)?;
        let mut w = CudaWriter::new();
        w.comment(format!(
            "rtx profiler micro-benchmark `{}` for {arch} (generated)",
            self.entry()
        ));
        self.write(arch, &mut w);
        Ok(KernelSource {
            entry: self.entry(),
            code: w.finish(),
            template: self.template().to_string(),
            template_version: MICRO_VERSION,
            options: vec![],
        })
    }
}

/// A [`ConstraintViolation`] for `kernel`.
pub(crate) fn violation(
    kernel: &dyn MicroKernel,
    reason: impl Into<String>,
) -> ConstraintViolation {
    ConstraintViolation {
        template: kernel.template().to_string(),
        config: format!("{kernel:?}"),
        reason: reason.into(),
    }
}

/// Fails unless `block` is a whole number of warps within 32..=1024.
pub(crate) fn check_block(kernel: &dyn MicroKernel, block: u32) -> Result<(), ConstraintViolation> {
    if block == 0 || !block.is_multiple_of(32) || block > 1024 {
        return Err(violation(
            kernel,
            format!("block of {block} threads is not a multiple of 32 in 32..=1024"),
        ));
    }
    Ok(())
}

/// Device helpers shared by the compute kernels: a 32-bit integer hash mapped to [-1, 1).
pub(crate) fn write_hash_helper(w: &mut CudaWriter) {
    w.lines(
        r#"__device__ __forceinline__ float rtx_unit(unsigned x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return (float)(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
}"#,
    );
}

/// Device helpers packing two floats into a 32-bit operand register of `dtype`
/// (`rtx_pack(lo, hi)`), plus `RTX_ONE`, the register holding ones. tf32 packs one value.
pub(crate) fn write_pack_helper(w: &mut CudaWriter, dtype: crate::DType) {
    use crate::DType;
    match dtype {
        DType::F16 => {
            w.include("cuda_fp16.h");
            w.constant("unsigned", "RTX_ONE", "0x3C003C00u");
            w.lines(
                r#"__device__ __forceinline__ unsigned rtx_pack(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}"#,
            );
        }
        DType::Bf16 => {
            w.include("cuda_bf16.h");
            w.constant("unsigned", "RTX_ONE", "0x3F803F80u");
            w.lines(
                r#"__device__ __forceinline__ unsigned rtx_pack(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}"#,
            );
        }
        DType::Tf32 | DType::F32 => {
            w.constant("unsigned", "RTX_ONE", "0x3F800000u");
            w.lines(
                r#"__device__ __forceinline__ unsigned rtx_pack(float lo, float) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(lo));
  return r;
}"#,
            );
        }
    }
}

#[cfg(test)]
mod tests;
