//! The tunable parameters of the fused attention kernel.

use serde::{Deserialize, Serialize};

/// One point of the attention parameter space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AttentionConfig {
    /// Head dimension the kernel is built for (must equal the problem's).
    pub head_dim: u32,
    /// Query rows per block (64 or 128).
    pub block_m: u32,
    /// Keys per K/V tile (32, 64 or 128).
    pub block_n: u32,
    /// Warps per block (4 or 8); each warp owns `block_m / warps` query rows (16 or 32).
    pub warps: u32,
    /// K/V shared-memory buffers: 1 (load of tile j+1 overlaps P.V / the next Q.K^T only) or 2
    /// (double-buffered: tile j+1 streams in while tile j is computed).
    pub stages: u32,
}

impl AttentionConfig {
    /// Threads per block (saturating at `u32::MAX` for configs far outside the space, which
    /// `check` rejects before any other arithmetic).
    pub fn threads(&self) -> u32 {
        self.warps.saturating_mul(32)
    }

    /// Query rows each warp owns.
    pub fn rows_per_warp(&self) -> u32 {
        self.block_m / self.warps.max(1)
    }

    /// 16-row mma tiles per warp (1 or 2).
    pub fn m_tiles_per_warp(&self) -> u32 {
        self.rows_per_warp() / 16
    }

    /// Whether Q fragments stay in registers for the whole key loop (one m tile per warp);
    /// otherwise they are re-read from shared memory with `ldmatrix` every tile.
    pub fn q_in_registers(&self) -> bool {
        self.m_tiles_per_warp() == 1
    }

    /// Dynamic shared memory in bytes for 16-bit elements: the Q tile plus `stages` K and V tiles
    /// (saturating at `u32::MAX`).
    pub fn smem_bytes(&self) -> u32 {
        let rows = (2 * self.stages as u64)
            .saturating_mul(self.block_n as u64)
            .saturating_add(self.block_m as u64);
        let bytes = rows.saturating_mul(self.head_dim as u64 * 2);
        bytes.min(u32::MAX as u64) as u32
    }

    /// Estimated registers per thread: O, S and (when kept) Q fragments plus a fixed overhead
    /// (addresses, softmax state, fragments in flight), 48 more with one stage, whose K copy is
    /// issued while P is live (fitted to ptxas on sm_80 / sm_90a / sm_120: every config whose
    /// estimate is at most 255 compiles without spills, see `tests/attention_compile.rs`).
    /// Saturates at `u32::MAX` for configs far outside the space.
    pub fn estimated_registers(&self) -> u32 {
        let mt = self.m_tiles_per_warp() as u64;
        let o = mt * self.head_dim as u64 / 2;
        let s = mt * self.block_n as u64 / 2;
        let q = if self.q_in_registers() {
            self.head_dim as u64 / 4
        } else {
            mt * 4
        };
        let overhead = if self.stages == 1 { 96 } else { 48 };
        (o + s + q + overhead).min(u32::MAX as u64) as u32
    }
}
