//! [`WgmmaKernel`]: Hopper warpgroup MMA (`wgmma.mma_async`, both operands from shared memory
//! through matrix descriptors) in a tight loop, for the sm_90a tensor ceilings that `mma.sync`
//! cannot reach.

use super::{violation, write_hash_helper, write_pack_helper, MicroKernel};
use crate::templates::codegen::CudaWriter;
use crate::templates::ConstraintViolation;
use crate::{Arch, DType};
use serde::{Deserialize, Serialize};

/// Threads of one warpgroup, the block size of this kernel.
pub const WARPGROUP_THREADS: u32 = 128;

/// Bytes of one K-slab row: K elements of the instruction (16 x 2-byte or 8 x 4-byte) = 32 bytes.
const ROW_BYTES: u32 = 32;

/// One warpgroup per block repeats `wgmma.mma_async.sync.aligned.m64n{n}k{K}.f32.{t}.{t}` into a
/// single 64 x `n` f32 accumulator (`n / 2` registers per thread): `unroll` instructions per
/// commit group, then `wgmma.wait_group 0`, `iters` times. A (64 x K) and B (`n` x K) live in
/// shared memory, K-major, without swizzle: 8-row x 16-byte core matrices, K-neighbours 128 bytes
/// apart (leading byte offset), M/N-neighbours 256 bytes apart (stride byte offset).
///
/// Signature: `(float* out, int iters, int ones, float sentinel, int verify)`, block of 128
/// threads; `ones` and the stores as for [`super::MmaSyncKernel`]. Work counted:
/// `2 * 64 * n * K * unroll * iters` flops per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WgmmaKernel {
    /// Input type: `Tf32`, `F16` or `Bf16` (f32 accumulate).
    pub dtype: DType,
    /// The instruction's N: a multiple of 8 in 8..=256.
    pub n: u32,
    /// Instructions per commit group (1..=32).
    pub unroll: u32,
    /// `__launch_bounds__` minimum resident blocks (warpgroups) per SM (1..=4).
    pub min_blocks_per_sm: u32,
}

impl WgmmaKernel {
    /// The instruction's K: 16 for f16/bf16, 8 for tf32 (32 bytes of K either way).
    pub fn k(&self) -> u32 {
        if self.dtype == DType::Tf32 {
            8
        } else {
            16
        }
    }

    /// The PTX instruction used.
    pub fn instruction(&self) -> String {
        let t = self.dtype.name();
        format!(
            "wgmma.mma_async.sync.aligned.m64n{}k{}.f32.{t}.{t}",
            self.n,
            self.k()
        )
    }

    /// Accumulator registers per thread.
    pub fn accumulators_per_thread(&self) -> u32 {
        self.n / 2
    }

    /// Static shared memory per block: the A and B tiles.
    pub fn smem_bytes(&self) -> u32 {
        64 * ROW_BYTES + self.n * ROW_BYTES
    }

    /// Flops one block (warpgroup) performs in `iters` loop trips.
    pub fn flops_per_block(&self, iters: u32) -> f64 {
        2.0 * 64.0 * self.n as f64 * self.k() as f64 * self.unroll as f64 * iters as f64
    }

    /// What every thread stores in verify mode with `ones != 0`: each of its `n / 2` accumulator
    /// elements grew by K per instruction.
    pub fn expected_ones(&self, iters: u32) -> f32 {
        (self.accumulators_per_thread() * self.k() * self.unroll) as f32 * iters as f32
    }
}

impl MicroKernel for WgmmaKernel {
    fn template(&self) -> &'static str {
        "profiler.wgmma"
    }

    fn entry(&self) -> String {
        format!(
            "rtx_micro_wgmma_{}_n{}_u{}_m{}",
            self.dtype.name(),
            self.n,
            self.unroll,
            self.min_blocks_per_sm
        )
    }

    fn block_threads(&self) -> u32 {
        WARPGROUP_THREADS
    }

    fn check(&self, arch: Arch) -> Result<(), ConstraintViolation> {
        if !arch.has_wgmma() {
            return Err(violation(
                self,
                format!("wgmma needs the arch-specific sm_90a target, not {arch}"),
            ));
        }
        if !matches!(self.dtype, DType::Tf32 | DType::F16 | DType::Bf16) {
            return Err(violation(
                self,
                format!("dtype {} has no f32-accumulate wgmma", self.dtype.name()),
            ));
        }
        if self.n == 0 || !self.n.is_multiple_of(8) || self.n > 256 {
            return Err(violation(
                self,
                format!("n {} is not a multiple of 8 in 8..=256", self.n),
            ));
        }
        if !(1..=32).contains(&self.unroll) {
            return Err(violation(
                self,
                format!("unroll {} not in 1..=32", self.unroll),
            ));
        }
        if !(1..=4).contains(&self.min_blocks_per_sm) {
            return Err(violation(
                self,
                format!("min_blocks_per_sm {} not in 1..=4", self.min_blocks_per_sm),
            ));
        }
        Ok(())
    }

    fn write(&self, _arch: Arch, w: &mut CudaWriter) {
        let nacc = self.accumulators_per_thread();
        write_pack_helper(w, self.dtype);
        write_hash_helper(w);
        w.constant("int", "NACC", nacc);
        w.constant("int", "UNROLL", self.unroll);
        w.constant("int", "MIN_BLOCKS", self.min_blocks_per_sm);
        w.constant("unsigned", "A_BYTES", 64 * ROW_BYTES);
        w.constant("unsigned", "B_BYTES", self.n * ROW_BYTES);
        w.comment("Matrix descriptor: no swizzle, start address >> 4 in bits 0-13, leading byte");
        w.comment("offset (K-neighbour core matrices, 128 B) >> 4 in 16-29, stride byte offset");
        w.comment("(M/N-neighbour core matrices, 256 B) >> 4 in 32-45.");
        w.lines(
            r#"__device__ __forceinline__ unsigned long long rtx_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4)
       | ((unsigned long long)(128u >> 4) << 16)
       | ((unsigned long long)(256u >> 4) << 32);
}"#,
        );
        // The accumulator operand list {%0, ..., %(nacc-1)} and its constraints, from `n`.
        let regs: Vec<String> = (0..nacc).map(|i| format!("%{i}")).collect();
        let tail = if self.dtype == DType::Tf32 {
            "p, 1, 1"
        } else {
            "p, 1, 1, 0, 0"
        };
        w.block(
            "__device__ __forceinline__ void rtx_wgmma(float (&d)[NACC], unsigned long long da, unsigned long long db)",
            |w| {
                w.line("asm volatile(");
                w.line("  \"{\\n\"");
                w.line("  \".reg .pred p;\\n\"");
                w.linef(format_args!("  \"setp.ne.b32 p, %{}, 0;\\n\"", nacc + 2));
                w.linef(format_args!("  \"{} \"", self.instruction()));
                let chunks: Vec<String> = regs.chunks(16).map(|c| c.join(", ")).collect();
                for (i, c) in chunks.iter().enumerate() {
                    let open = if i == 0 { "{" } else { "" };
                    let close = if i + 1 == chunks.len() { "}" } else { ", " };
                    w.linef(format_args!("  \"{open}{c}{close}\""));
                }
                w.linef(format_args!(
                    "  \", %{}, %{}, {tail};\\n\"",
                    nacc,
                    nacc + 1
                ));
                w.line("  \"}\\n\"");
                let outs: Vec<String> = (0..nacc).map(|i| format!("\"+f\"(d[{i}])")).collect();
                for (i, chunk) in outs.chunks(8).enumerate() {
                    let lead = if i == 0 { ": " } else { "  " };
                    let sep = if (i + 1) * 8 < outs.len() { "," } else { "" };
                    w.linef(format_args!("  {lead}{}{sep}", chunk.join(", ")));
                }
                w.line("  : \"l\"(da), \"l\"(db), \"r\"(1));");
            },
        );
        w.block(
            format!(
                "extern \"C\" __global__ void __launch_bounds__(128, MIN_BLOCKS) {}(float* out, int iters, int ones, float sentinel, int verify)",
                self.entry()
            ),
            |w| {
                w.lines(
                    r#"__shared__ __align__(1024) unsigned rtx_smem[(A_BYTES + B_BYTES) / 4];
const unsigned gtid = blockIdx.x * 128u + threadIdx.x;
for (unsigned i = threadIdx.x; i < (A_BYTES + B_BYTES) / 4; i += 128u)
  rtx_smem[i] = ones ? RTX_ONE : rtx_pack(rtx_unit(2u * i + 7919u * blockIdx.x), rtx_unit(2u * i + 1u + 7919u * blockIdx.x));
// Generic-proxy writes must be made visible to the async proxy that wgmma reads through.
asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
__syncthreads();
const unsigned base = (unsigned)__cvta_generic_to_shared(rtx_smem);
const unsigned long long da = rtx_desc(base);
const unsigned long long db = rtx_desc(base + A_BYTES);
float d[NACC];
#pragma unroll
for (int i = 0; i < NACC; ++i) d[i] = 0.0f;
for (int it = 0; it < iters; ++it) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u) rtx_wgmma(d, da, db);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
float s = 0.0f;
#pragma unroll
for (int i = 0; i < NACC; ++i) s += d[i];
if (verify != 0 || s == sentinel) out[gtid] = s;"#,
                );
            },
        );
    }
}
