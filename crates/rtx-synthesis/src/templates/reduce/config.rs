//! The tunable parameters of the row-reduction kernels.

use serde::{Deserialize, Serialize};

/// Where a row lives between the statistics pass and the output pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RowStrategy {
    /// The whole row is held in registers: each thread caches `chunks` chunks of `vec`
    /// elements (capacity `threads_per_row * vec * chunks >= cols`), one read of global memory.
    Registers {
        /// Chunks per thread.
        chunks: u32,
    },
    /// Any row length: a statistics pass and an output pass over global memory, `unroll`
    /// chunks of `vec` elements per thread in flight per iteration (the second read usually
    /// hits L2).
    Looped {
        /// Chunks per thread per iteration.
        unroll: u32,
    },
}

/// One point of the row-reduction parameter space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RowConfig {
    /// Elements per access on the vector path (1, 2, 4, 8 with `vec * size <= 16` bytes).
    pub vec: u32,
    /// Threads cooperating on one row: 1, 2, 4, 8, 16 or 32 (a (sub-)warp, shuffles only) or a
    /// multiple of 32 up to 1024 (warp shuffles plus a small shared-memory exchange).
    pub threads_per_row: u32,
    /// Rows per block (`threads_per_row * rows_per_block` is the block size, a multiple of 32).
    pub rows_per_block: u32,
    /// Register-cached or looped.
    pub strategy: RowStrategy,
}

impl RowConfig {
    /// Threads per block (saturating at `u32::MAX` for configs far outside the space, which
    /// `check` rejects).
    pub fn block_threads(&self) -> u32 {
        self.threads_per_row.saturating_mul(self.rows_per_block)
    }

    /// Longest row the register-cached strategy holds (`None` for the looped strategy).
    pub fn capacity(&self) -> Option<u64> {
        match self.strategy {
            RowStrategy::Registers { chunks } => {
                Some(self.threads_per_row as u64 * self.vec as u64 * chunks as u64)
            }
            RowStrategy::Looped { .. } => None,
        }
    }

    /// Values each thread keeps in registers at once (saturating at `u32::MAX`).
    pub fn cached_per_thread(&self) -> u32 {
        match self.strategy {
            RowStrategy::Registers { chunks } => chunks.saturating_mul(self.vec),
            RowStrategy::Looped { unroll } => unroll.saturating_mul(self.vec),
        }
    }
}
