//! The typed parameter space of the Hopper (wgmma + TMA) GEMM template, and the resources a
//! config needs (threads, shared memory, accumulator and `setmaxnreg` register budgets).

use serde::{Deserialize, Serialize};

/// K depth of one pipeline stage: 64 two-byte elements = 128 bytes, the 128B-swizzle span.
pub const BLOCK_K: u32 = 64;
/// Threads in one warpgroup.
pub const WARPGROUP: u32 = 128;
/// Registers per thread the producer warpgroup keeps after `setmaxnreg.dec`.
pub const PRODUCER_REGS: u32 = 40;
/// Registers of one SM (and the most one block may use).
pub const REGS_PER_SM: u32 = 65_536;
/// Bytes one swizzle atom row spans (and the TMA box inner extent for 2-byte types).
pub const SWIZZLE_BYTES: u32 = 128;
/// Bytes of one 64 x 64 two-byte TMA box (one MN-major swizzle column).
pub const BOX_BYTES: u32 = BLOCK_K * SWIZZLE_BYTES;
/// Slack added to the dynamic shared memory so the kernel can align its base to 1024 bytes.
pub const SMEM_ALIGN_SLACK: u32 = 1024;

/// One point of the wgmma GEMM space.
///
/// A block computes a `bm x bn` tile of C with `consumers` consumer warpgroups (each owns
/// `bm / consumers` rows, i.e. `bm / consumers / 64` wgmma m64 instructions per k16 step) and
/// one producer warpgroup that streams `bm x 64` / `64 x bn` slabs of A and B through a ring of
/// `stages` shared-memory buffers with TMA. Each consumer issues `bn / wgmma_n` instructions
/// `wgmma.mma_async.m64n{wgmma_n}k16` per m64 row block and k16 step.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WgmmaConfig {
    /// Block tile rows (64, 128 or 256; a multiple of `64 * consumers`).
    pub bm: u32,
    /// Block tile columns (64, 128, 192 or 256).
    pub bn: u32,
    /// Block tile depth; must be [`BLOCK_K`] (64).
    pub bk: u32,
    /// Consumer (MMA) warpgroups: 1 or 2.
    pub consumers: u32,
    /// N of each wgmma instruction (a multiple of 64 dividing `bn`).
    pub wgmma_n: u32,
    /// Shared-memory pipeline depth, 2..=6.
    pub stages: u32,
    /// Thread-block cluster size along M (1, or 2 with B multicast to both CTAs).
    pub cluster_m: u32,
    /// Launch at most one block (cluster) per SM and loop over tiles; otherwise one tile per block.
    /// Does not change the generated code, only [`crate::templates::Template::launch`].
    pub persistent: bool,
    /// Tile-order rasterization: blocks walk `raster_group` tile rows at a time (1 = row-major order).
    pub raster_group: u32,
}

impl WgmmaConfig {
    /// Threads per block: one producer warpgroup plus the consumers.
    pub fn threads(&self) -> u32 {
        WARPGROUP * (1 + self.consumers)
    }

    /// Rows of C one consumer warpgroup owns.
    pub fn rows_per_consumer(&self) -> u32 {
        self.bm / self.consumers.max(1)
    }

    /// wgmma m64 instructions per consumer per k16 step along M.
    pub fn m_iters(&self) -> u32 {
        self.rows_per_consumer() / 64
    }

    /// wgmma instructions per m64 block per k16 step along N.
    pub fn n_iters(&self) -> u32 {
        self.bn / self.wgmma_n.max(1)
    }

    /// fp32 accumulator registers per consumer thread.
    pub fn acc_regs(&self) -> u32 {
        self.m_iters() * self.bn / 2
    }

    /// Bytes of A in one stage.
    pub fn a_stage_bytes(&self) -> u32 {
        self.bm * self.bk * 2
    }

    /// Bytes of B in one stage.
    pub fn b_stage_bytes(&self) -> u32 {
        self.bn * self.bk * 2
    }

    /// Bytes TMA delivers per stage (both operands, full boxes including zero fill).
    pub fn stage_bytes(&self) -> u32 {
        self.a_stage_bytes() + self.b_stage_bytes()
    }

    /// Offset of the mbarriers from the aligned shared-memory base.
    pub fn barrier_offset(&self) -> u32 {
        self.stages * self.stage_bytes()
    }

    /// Dynamic shared memory the kernel needs: the ring, 2 mbarriers per stage and alignment slack.
    pub fn smem_bytes(&self) -> u32 {
        self.barrier_offset() + 16 * self.stages + SMEM_ALIGN_SLACK
    }

    /// Registers per thread ptxas may use at launch with `__launch_bounds__(threads, 1)`.
    pub fn launch_regs(&self) -> u32 {
        ((REGS_PER_SM / self.threads()) / 8 * 8).min(248)
    }

    /// Registers per thread the consumers raise to with `setmaxnreg.inc` (multiple of 8, <= 240),
    /// chosen so producer + consumers fit in the block's launch allocation.
    pub fn consumer_regs(&self) -> u32 {
        let pool = self.launch_regs() * self.threads();
        let left = pool.saturating_sub(WARPGROUP * PRODUCER_REGS);
        (left / (WARPGROUP * self.consumers.max(1)) / 8 * 8).min(240)
    }

    /// Number of tile rows / columns of C for an `m x n` problem: `(tiles_m, tiles_n)`.
    pub fn tiles(&self, m: u32, n: u32) -> (u32, u32) {
        (m.div_ceil(self.bm.max(1)), n.div_ceil(self.bn.max(1)))
    }

    /// Short identifier of the code-relevant fields, used in the kernel entry name.
    pub fn tag(&self) -> String {
        format!(
            "{}x{}x{}_c{}_n{}_s{}_cl{}_g{}",
            self.bm, self.bn, self.bk, self.consumers, self.wgmma_n, self.stages, self.cluster_m, self.raster_group
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big() -> WgmmaConfig {
        WgmmaConfig { bm: 128, bn: 256, bk: 64, consumers: 2, wgmma_n: 256, stages: 4, cluster_m: 1, persistent: true, raster_group: 8 }
    }

    #[test]
    fn resources_of_the_128x256_config() {
        let c = big();
        assert_eq!(c.threads(), 384);
        assert_eq!(c.m_iters(), 1);
        assert_eq!(c.acc_regs(), 128);
        assert_eq!(c.stage_bytes(), 48 * 1024);
        assert_eq!(c.smem_bytes(), 4 * 48 * 1024 + 64 + 1024);
        assert_eq!(c.launch_regs(), 168);
        assert_eq!(c.consumer_regs(), 232);
        // The setmaxnreg budgets must fit in what the block holds at launch.
        assert!(WARPGROUP * (PRODUCER_REGS + c.consumers * c.consumer_regs()) <= c.launch_regs() * c.threads());
    }

    #[test]
    fn one_consumer_gets_the_full_budget() {
        let c = WgmmaConfig { bm: 128, bn: 128, consumers: 1, wgmma_n: 128, ..big() };
        assert_eq!(c.threads(), 256);
        assert_eq!(c.m_iters(), 2);
        assert_eq!(c.acc_regs(), 128);
        assert_eq!(c.consumer_regs(), 240);
        assert_eq!(c.tiles(4000, 4000), (32, 32));
    }
}
