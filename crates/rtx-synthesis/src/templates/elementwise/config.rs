//! The tunable parameters of the elementwise kernel.

use serde::{Deserialize, Serialize};

/// How blocks cover the iteration space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GridMode {
    /// One tile per block; the grid covers the whole space.
    OneShot,
    /// A fixed grid of `blocks` blocks loops over the tiles (capped at the one-shot grid).
    Stride {
        /// Blocks launched.
        blocks: u32,
    },
}

/// One point of the elementwise parameter space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ElementwiseConfig {
    /// Elements per access on the vector path (1, 2, 4 or 8; `vec * size <= 32` bytes, i.e.
    /// one or two 16-byte accesses). 1 means the scalar path only.
    pub vec: u32,
    /// Threads per block (a multiple of 32, 32..=1024).
    pub threads: u32,
    /// Vector chunks per thread per tile, all loaded before the first is used (1..=8).
    pub unroll: u32,
    /// One-shot or grid-stride.
    pub grid: GridMode,
}

impl ElementwiseConfig {
    /// Chunks (of `vec` elements) one block covers per tile.
    pub fn tile_chunks(&self) -> u64 {
        self.threads as u64 * self.unroll as u64
    }
}
