//! [`FmaKernel`]: independent fp32 FMA chains in registers, for the fp32 SIMT ceiling.

use super::{check_block, violation, MicroKernel};
use crate::templates::codegen::CudaWriter;
use crate::templates::ConstraintViolation;
use crate::Arch;
use serde::{Deserialize, Serialize};

/// Each thread runs `chains` independent chains `a = fmaf(a, b, c)`, `unroll` steps per loop trip
/// (fully unrolled), `iters` trips, then sums its chains.
///
/// Signature: `(float* out, int iters, float b, float c, float sentinel, int verify)`. The sum is
/// stored to `out[global thread]` when `verify != 0` or when it equals `sentinel` (pass NaN to
/// store nothing). Work counted: `2 * chains * unroll * iters` flops per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FmaKernel {
    /// Independent chains per thread (1..=32), the instruction-level parallelism.
    pub chains: u32,
    /// FMA steps per chain and loop trip, fully unrolled (1..=64).
    pub unroll: u32,
    /// Threads per block.
    pub block: u32,
    /// `__launch_bounds__` minimum resident blocks per SM (1..=32).
    pub min_blocks_per_sm: u32,
}

impl FmaKernel {
    /// Flops one thread performs in `iters` loop trips.
    pub fn flops_per_thread(&self, iters: u32) -> f64 {
        2.0 * self.chains as f64 * self.unroll as f64 * iters as f64
    }

    /// The initial value of chain `j` of global thread `gtid` (exact in f32).
    pub fn initial(&self, gtid: u32, j: u32) -> f32 {
        (gtid.wrapping_mul(self.chains).wrapping_add(j) & 1023) as f32 * (1.0 / 1024.0)
    }

    /// What global thread `gtid` stores in verify mode: the same fused multiply-adds on the host.
    pub fn expected(&self, gtid: u32, iters: u32, b: f32, c: f32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..self.chains {
            let mut a = self.initial(gtid, j);
            for _ in 0..iters as u64 * self.unroll as u64 {
                a = a.mul_add(b, c);
            }
            s += a;
        }
        s
    }
}

impl MicroKernel for FmaKernel {
    fn template(&self) -> &'static str {
        "profiler.fma"
    }

    fn entry(&self) -> String {
        format!(
            "rtx_micro_fma_c{}_u{}_b{}_m{}",
            self.chains, self.unroll, self.block, self.min_blocks_per_sm
        )
    }

    fn block_threads(&self) -> u32 {
        self.block
    }

    fn check(&self, _arch: Arch) -> Result<(), ConstraintViolation> {
        check_block(self, self.block)?;
        if !(1..=32).contains(&self.chains) {
            return Err(violation(
                self,
                format!("{} chains not in 1..=32", self.chains),
            ));
        }
        if !(1..=64).contains(&self.unroll) {
            return Err(violation(
                self,
                format!("unroll {} not in 1..=64", self.unroll),
            ));
        }
        if !(1..=32).contains(&self.min_blocks_per_sm) {
            return Err(violation(
                self,
                format!("min_blocks_per_sm {} not in 1..=32", self.min_blocks_per_sm),
            ));
        }
        if self.block * self.min_blocks_per_sm > 2048 {
            return Err(violation(
                self,
                format!(
                    "{} blocks of {} threads exceed 2048 resident threads per SM",
                    self.min_blocks_per_sm, self.block
                ),
            ));
        }
        Ok(())
    }

    fn write(&self, _arch: Arch, w: &mut CudaWriter) {
        w.constant("int", "CHAINS", self.chains);
        w.constant("int", "UNROLL", self.unroll);
        w.constant("unsigned", "BLOCK", self.block);
        w.constant("int", "MIN_BLOCKS", self.min_blocks_per_sm);
        w.block(
            format!(
                "extern \"C\" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) {}(float* out, int iters, float b, float c, float sentinel, int verify)",
                self.entry()
            ),
            |w| {
                w.lines(
                    r#"const unsigned gtid = blockIdx.x * BLOCK + threadIdx.x;
float a[CHAINS];
#pragma unroll
for (int j = 0; j < CHAINS; ++j) a[j] = (float)((gtid * (unsigned)CHAINS + (unsigned)j) & 1023u) * (1.0f / 1024.0f);
for (int it = 0; it < iters; ++it) {
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    #pragma unroll
    for (int j = 0; j < CHAINS; ++j) a[j] = fmaf(a[j], b, c);
  }
}
float s = 0.0f;
#pragma unroll
for (int j = 0; j < CHAINS; ++j) s += a[j];
if (verify != 0 || s == sentinel) out[gtid] = s;"#,
                );
            },
        );
    }
}
