//! [`MmaSyncKernel`]: warp-level `mma.sync` tensor-core instructions in a register-only loop,
//! for the tensor ceilings of sm_80 and newer (and as the fallback figure on Hopper).

use super::{check_block, violation, write_hash_helper, write_pack_helper, MicroKernel};
use crate::templates::codegen::CudaWriter;
use crate::templates::ConstraintViolation;
use crate::{Arch, DType};
use serde::{Deserialize, Serialize};

/// Each warp keeps `accumulators` independent 16x8 f32 accumulators and, per loop trip, issues
/// `unroll` rounds of one `mma.sync` into each: `m16n8k16` for f16/bf16, `m16n8k8` for tf32
/// (row.col, f32 accumulate). A and B fragments stay in registers.
///
/// Signature: `(float* out, int iters, int ones, float sentinel, int verify)`. `ones != 0` sets
/// every A and B element to 1 (each instruction then adds K to every accumulator element),
/// otherwise pseudo-random values in [-1, 1). The per-thread sum of accumulators is stored to
/// `out[global thread]` when `verify != 0` or when it equals `sentinel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MmaSyncKernel {
    /// Input type: `Tf32`, `F16` or `Bf16`.
    pub dtype: DType,
    /// Independent accumulators per warp (1..=16).
    pub accumulators: u32,
    /// Rounds over all accumulators per loop trip, unrolled (1..=16).
    pub unroll: u32,
    /// Threads per block.
    pub block: u32,
    /// `__launch_bounds__` minimum resident blocks per SM (1..=16).
    pub min_blocks_per_sm: u32,
}

impl MmaSyncKernel {
    /// The instruction's K: 16 for f16/bf16, 8 for tf32.
    pub fn k(&self) -> u32 {
        if self.dtype == DType::Tf32 {
            8
        } else {
            16
        }
    }

    /// The PTX instruction used.
    pub fn instruction(&self) -> String {
        let ty = self.dtype.name();
        format!(
            "mma.sync.aligned.m16n8k{}.row.col.f32.{ty}.{ty}.f32",
            self.k()
        )
    }

    /// Flops one warp performs in `iters` loop trips.
    pub fn flops_per_warp(&self, iters: u32) -> f64 {
        let per_mma = 2.0 * 16.0 * 8.0 * self.k() as f64;
        per_mma * self.accumulators as f64 * self.unroll as f64 * iters as f64
    }

    /// What every thread stores in verify mode with `ones != 0`: each of its 4 elements per
    /// accumulator grew by K per instruction.
    pub fn expected_ones(&self, iters: u32) -> f32 {
        (self.accumulators * 4 * self.k() * self.unroll) as f32 * iters as f32
    }
}

impl MicroKernel for MmaSyncKernel {
    fn template(&self) -> &'static str {
        "profiler.mma_sync"
    }

    fn entry(&self) -> String {
        format!(
            "rtx_micro_mma_{}_a{}_u{}_b{}_m{}",
            self.dtype.name(),
            self.accumulators,
            self.unroll,
            self.block,
            self.min_blocks_per_sm
        )
    }

    fn block_threads(&self) -> u32 {
        self.block
    }

    fn check(&self, arch: Arch) -> Result<(), ConstraintViolation> {
        if !arch.has_mma_sync() {
            return Err(violation(
                self,
                format!("{arch} has no m16n8k16 bf16/tf32 mma.sync (needs sm_80+)"),
            ));
        }
        if !matches!(self.dtype, DType::Tf32 | DType::F16 | DType::Bf16) {
            return Err(violation(
                self,
                format!("dtype {} has no tensor-core mma.sync", self.dtype.name()),
            ));
        }
        check_block(self, self.block)?;
        if !(1..=16).contains(&self.accumulators) {
            return Err(violation(
                self,
                format!("{} accumulators not in 1..=16", self.accumulators),
            ));
        }
        if !(1..=16).contains(&self.unroll) {
            return Err(violation(
                self,
                format!("unroll {} not in 1..=16", self.unroll),
            ));
        }
        if !(1..=16).contains(&self.min_blocks_per_sm) || self.block * self.min_blocks_per_sm > 2048
        {
            return Err(violation(
                self,
                format!(
                    "{} resident blocks of {} threads per SM is not possible",
                    self.min_blocks_per_sm, self.block
                ),
            ));
        }
        Ok(())
    }

    fn write(&self, _arch: Arch, w: &mut CudaWriter) {
        write_pack_helper(w, self.dtype);
        write_hash_helper(w);
        w.constant("int", "ACC", self.accumulators);
        w.constant("int", "UNROLL", self.unroll);
        w.constant("unsigned", "BLOCK", self.block);
        w.constant("int", "MIN_BLOCKS", self.min_blocks_per_sm);
        w.block(
            "__device__ __forceinline__ void rtx_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])",
            |w| {
                w.linef(format_args!(
                    "asm volatile(\"{} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n\"",
                    self.instruction()
                ));
                w.line("  : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])");
                w.line("  : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));");
            },
        );
        w.block(
            format!(
                "extern \"C\" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) {}(float* out, int iters, int ones, float sentinel, int verify)",
                self.entry()
            ),
            |w| {
                w.lines(
                    r#"const unsigned gtid = blockIdx.x * BLOCK + threadIdx.x;
unsigned a[4], b[2];
#pragma unroll
for (int i = 0; i < 4; ++i) a[i] = ones ? RTX_ONE : rtx_pack(rtx_unit(gtid * 12u + 2u * i), rtx_unit(gtid * 12u + 2u * i + 1u));
#pragma unroll
for (int i = 0; i < 2; ++i) b[i] = ones ? RTX_ONE : rtx_pack(rtx_unit(gtid * 12u + 8u + 2u * i), rtx_unit(gtid * 12u + 9u + 2u * i));
float d[ACC][4];
#pragma unroll
for (int j = 0; j < ACC; ++j) { d[j][0] = 0.0f; d[j][1] = 0.0f; d[j][2] = 0.0f; d[j][3] = 0.0f; }
for (int it = 0; it < iters; ++it) {
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    #pragma unroll
    for (int j = 0; j < ACC; ++j) rtx_mma(d[j], a, b);
  }
}
float s = 0.0f;
#pragma unroll
for (int j = 0; j < ACC; ++j) s += (d[j][0] + d[j][1]) + (d[j][2] + d[j][3]);
if (verify != 0 || s == sentinel) out[gtid] = s;"#,
                );
            },
        );
    }
}
