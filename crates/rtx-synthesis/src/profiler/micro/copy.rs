//! [`CopyKernel`]: a grid-stride device-to-device copy with 16-byte accesses and several loads in
//! flight per thread, for the memory-bandwidth ceiling.

use super::{check_block, violation, MicroKernel};
use crate::templates::codegen::CudaWriter;
use crate::templates::ConstraintViolation;
use crate::Arch;
use serde::{Deserialize, Serialize};

/// Cache policy of the copy's loads and stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheHint {
    /// Plain `ld.global` / `st.global`.
    Default,
    /// Streaming (`.cs`, evict-first) loads and stores: the data is touched once.
    Streaming,
}

impl CacheHint {
    fn name(self) -> &'static str {
        match self {
            CacheHint::Default => "def",
            CacheHint::Streaming => "cs",
        }
    }
}

/// `dst[i] = src[i]` over `n` 16-byte vectors (`uint4`), grid-stride: each thread issues `unroll`
/// independent loads before their stores.
///
/// Signature: `(const uint4* src, uint4* dst, unsigned long long n)`; any grid size works.
/// Traffic counted: `16 * n` bytes read plus `16 * n` bytes written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CopyKernel {
    /// Independent 16-byte loads in flight per thread and loop trip (1..=16).
    pub unroll: u32,
    /// Threads per block (a multiple of 32 up to 1024).
    pub block: u32,
    /// Cache policy.
    pub hint: CacheHint,
}

impl CopyKernel {
    /// Bytes moved per element: the kernel copies 16-byte vectors.
    pub const VECTOR_BYTES: usize = 16;
}

impl MicroKernel for CopyKernel {
    fn template(&self) -> &'static str {
        "profiler.copy"
    }

    fn entry(&self) -> String {
        format!(
            "rtx_micro_copy_u{}_b{}_{}",
            self.unroll,
            self.block,
            self.hint.name()
        )
    }

    fn block_threads(&self) -> u32 {
        self.block
    }

    fn check(&self, _arch: Arch) -> Result<(), ConstraintViolation> {
        check_block(self, self.block)?;
        if !(1..=16).contains(&self.unroll) {
            return Err(violation(
                self,
                format!("unroll {} not in 1..=16", self.unroll),
            ));
        }
        Ok(())
    }

    fn write(&self, _arch: Arch, w: &mut CudaWriter) {
        let (ld, st) = match self.hint {
            CacheHint::Default => ("rtx_ld", "rtx_st"),
            CacheHint::Streaming => ("__ldcs", "__stcs"),
        };
        w.constant("int", "UNROLL", self.unroll);
        w.constant("unsigned", "BLOCK", self.block);
        w.lines(
            r#"__device__ __forceinline__ uint4 rtx_ld(const uint4* p) { return *p; }
__device__ __forceinline__ void rtx_st(uint4* p, uint4 v) { *p = v; }"#,
        );
        w.block(
            format!(
                "extern \"C\" __global__ void __launch_bounds__(BLOCK) {}(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n)",
                self.entry()
            ),
            |w| {
                w.line("const unsigned long long stride = (unsigned long long)gridDim.x * BLOCK;");
                w.line("unsigned long long i = (unsigned long long)blockIdx.x * BLOCK + threadIdx.x;");
                w.block("for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride)", |w| {
                    w.line("uint4 v[UNROLL];");
                    w.line("#pragma unroll");
                    w.linef(format_args!("for (int u = 0; u < UNROLL; ++u) v[u] = {ld}(src + i + u * stride);"));
                    w.line("#pragma unroll");
                    w.linef(format_args!("for (int u = 0; u < UNROLL; ++u) {st}(dst + i + u * stride, v[u]);"));
                });
                w.linef(format_args!("for (; i < n; i += stride) {st}(dst + i, {ld}(src + i));"));
            },
        );
    }
}
