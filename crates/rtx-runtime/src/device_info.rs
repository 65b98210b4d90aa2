//! [`DeviceInfo`]: the static properties of a GPU that kernels and launches are checked against.

use crate::error::RuntimeError;
use crate::raw;
use cudarc::driver::sys::{CUdevice, CUdevice_attribute as A};

/// Properties of one device, queried once when it is opened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// (major, minor) compute capability, e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Shared memory per block without opt-in (usually 48 KiB).
    pub smem_per_block: u32,
    /// Shared memory per block with `set_max_dynamic_smem` opt-in.
    pub smem_per_block_optin: u32,
    /// Shared memory per SM.
    pub smem_per_sm: u32,
    /// 32-bit registers per block.
    pub regs_per_block: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Threads per block limit.
    pub max_threads_per_block: u32,
    /// Block dimension limits (x, y, z).
    pub max_block_dims: [u32; 3],
    /// Grid dimension limits (x, y, z).
    pub max_grid_dims: [u32; 3],
    /// Threads per warp.
    pub warp_size: u32,
    /// Peak SM clock in kHz as reported by the driver (0 if not reported).
    pub clock_khz: u32,
    /// Peak memory clock in kHz as reported by the driver (0 if not reported).
    pub mem_clock_khz: u32,
    /// Memory bus width in bits.
    pub mem_bus_width_bits: u32,
    /// Total device memory in bytes.
    pub total_mem: u64,
    /// CUDA driver API version (major, minor), e.g. (13, 0).
    pub driver_version: (i32, i32),
    /// NVRTC version, `None` when libnvrtc is not loadable.
    pub nvrtc_version: Option<(i32, i32)>,
}

impl DeviceInfo {
    /// Queries everything from the driver (cuInit must have succeeded).
    pub(crate) fn query(ordinal: usize, dev: CUdevice) -> Result<DeviceInfo, RuntimeError> {
        let a = |attr: A| -> Result<u32, RuntimeError> {
            raw::device_attr(dev, attr).map(|v| v.max(0) as u32)
        };
        Ok(DeviceInfo {
            ordinal,
            name: raw::device_name(dev)?,
            compute_capability: (
                a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            sm_count: a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            l2_bytes: a(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            smem_per_block: a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            smem_per_block_optin: a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            smem_per_sm: a(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            regs_per_block: a(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            regs_per_sm: a(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            max_threads_per_block: a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dims: [
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dims: [
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            warp_size: a(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            // Deprecated attributes: some drivers may report 0 or refuse; treat refusal as 0.
            clock_khz: a(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).unwrap_or(0),
            mem_clock_khz: a(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0),
            mem_bus_width_bits: a(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            total_mem: raw::device_total_mem(dev)? as u64,
            driver_version: raw::driver_version()?,
            nvrtc_version: raw::nvrtc_version(),
        })
    }

    /// The `sm_XY` number, e.g. 90 for compute capability 9.0.
    pub fn sm(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }

    /// A hand-made description with the architectural limits of an sm_90 (H100/H200-class)
    /// device, for CPU-side tests of code that checks configurations against a `DeviceInfo`.
    /// Clocks, memory size and versions are 0 (unknown): it describes limits, not performance.
    pub fn example_sm90() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "example sm_90 (not a real device)".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            l2_bytes: 50 << 20,
            smem_per_block: 48 << 10,
            smem_per_block_optin: 227 << 10,
            smem_per_sm: 228 << 10,
            regs_per_block: 65536,
            regs_per_sm: 65536,
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 64],
            max_grid_dims: [i32::MAX as u32, 65535, 65535],
            warp_size: 32,
            clock_khz: 0,
            mem_clock_khz: 0,
            mem_bus_width_bits: 0,
            total_mem: 0,
            driver_version: (0, 0),
            nvrtc_version: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_round_trip_and_sm() {
        let i = DeviceInfo {
            nvrtc_version: Some((13, 0)),
            ..DeviceInfo::example_sm90()
        };
        assert_eq!(i.sm(), 90);
        let json = serde_json::to_string(&i).unwrap();
        let back: DeviceInfo = serde_json::from_str(&json).unwrap();
        assert_eq!(back, i);
        assert!(json.contains("\"smem_per_block_optin\":232448"), "{json}");
    }
}
