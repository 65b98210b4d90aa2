//! TEMPORARY mirror of `rtx_runtime::DeviceInfo` (RUNTIME_API.md) until the runtime lands in
//! `main`; replaced by `pub use rtx_runtime::DeviceInfo` on merge. Same fields, same serde form.

use serde::{Deserialize, Serialize};

/// Properties of one device (mirror of the runtime contract's `DeviceInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// (major, minor) compute capability.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Shared memory per block without opt-in.
    pub smem_per_block: u32,
    /// Shared memory per block with opt-in.
    pub smem_per_block_optin: u32,
    /// Shared memory per SM.
    pub smem_per_sm: u32,
    /// Registers per block.
    pub regs_per_block: u32,
    /// Registers per SM.
    pub regs_per_sm: u32,
    /// Threads per block limit.
    pub max_threads_per_block: u32,
    /// Block dimension limits.
    pub max_block_dims: [u32; 3],
    /// Grid dimension limits.
    pub max_grid_dims: [u32; 3],
    /// Threads per warp.
    pub warp_size: u32,
    /// Peak SM clock, kHz.
    pub clock_khz: u32,
    /// Peak memory clock, kHz.
    pub mem_clock_khz: u32,
    /// Memory bus width, bits.
    pub mem_bus_width_bits: u32,
    /// Total device memory, bytes.
    pub total_mem: u64,
    /// CUDA driver API version.
    pub driver_version: (i32, i32),
    /// NVRTC version.
    pub nvrtc_version: Option<(i32, i32)>,
}
