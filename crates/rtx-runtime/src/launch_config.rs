//! [`LaunchConfig`]: grid, block and dynamic shared memory of a launch, checked against a
//! [`DeviceInfo`] before the driver sees it.

use crate::device_info::DeviceInfo;
use crate::error::RuntimeError;

/// Grid and block dimensions and dynamic shared memory of one kernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A config from its parts.
    pub fn new(grid: [u32; 3], block: [u32; 3], shared_mem_bytes: u32) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes,
        }
    }

    /// A 1-D launch covering `n` elements with `block` threads per block (one thread per
    /// element; at least one block). Fails if the grid would exceed `u32`.
    pub fn for_elements(n: u64, block: u32) -> Result<Self, RuntimeError> {
        if block == 0 {
            return Err(RuntimeError::InvalidLaunch {
                reason: "block size 0".into(),
            });
        }
        let blocks = n.div_ceil(block as u64).max(1);
        let grid = u32::try_from(blocks).map_err(|_| RuntimeError::InvalidLaunch {
            reason: format!("{n} elements need {blocks} blocks of {block}, more than u32"),
        })?;
        Ok(LaunchConfig::new([grid, 1, 1], [block, 1, 1], 0))
    }

    /// Threads per block.
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|&d| d as u64).product()
    }

    /// Total blocks.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }

    /// Checks the config against the device's limits: every dimension >= 1 and within
    /// `max_block_dims` / `max_grid_dims`, threads per block within `max_threads_per_block`,
    /// and dynamic shared memory within the opt-in limit. Pure (no driver call).
    pub fn validate(&self, info: &DeviceInfo) -> Result<(), RuntimeError> {
        const AXES: [&str; 3] = ["x", "y", "z"];
        let bad = |reason: String| Err(RuntimeError::InvalidLaunch { reason });
        for (i, axis) in AXES.iter().enumerate() {
            if self.block[i] == 0 {
                return bad(format!("block.{} is 0", axis));
            }
            if self.grid[i] == 0 {
                return bad(format!("grid.{} is 0", axis));
            }
            if self.block[i] > info.max_block_dims[i] {
                return bad(format!(
                    "block.{} = {} exceeds the device limit {} (block {:?})",
                    axis, self.block[i], info.max_block_dims[i], self.block
                ));
            }
            if self.grid[i] > info.max_grid_dims[i] {
                return bad(format!(
                    "grid.{} = {} exceeds the device limit {} (grid {:?})",
                    axis, self.grid[i], info.max_grid_dims[i], self.grid
                ));
            }
        }
        let threads = self.threads_per_block();
        if threads > info.max_threads_per_block as u64 {
            return bad(format!(
                "{} threads per block (block {:?}) exceed the device limit {}",
                threads, self.block, info.max_threads_per_block
            ));
        }
        if self.shared_mem_bytes > info.smem_per_block_optin {
            return bad(format!(
                "{} bytes of dynamic shared memory exceed the opt-in limit of {} bytes per block",
                self.shared_mem_bytes, info.smem_per_block_optin
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info() -> DeviceInfo {
        DeviceInfo {
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 64],
            max_grid_dims: [2_147_483_647, 65535, 65535],
            smem_per_block: 48 * 1024,
            smem_per_block_optin: 227 * 1024,
            ..DeviceInfo::example_sm90()
        }
    }

    fn reason(r: Result<(), RuntimeError>) -> String {
        match r {
            Err(RuntimeError::InvalidLaunch { reason }) => reason,
            other => panic!("expected InvalidLaunch, got {other:?}"),
        }
    }

    #[test]
    fn accepts_limits_exactly() {
        let i = info();
        assert!(LaunchConfig::new([1, 1, 1], [1024, 1, 1], 0)
            .validate(&i)
            .is_ok());
        assert!(
            LaunchConfig::new([2_147_483_647, 65535, 65535], [32, 32, 1], 227 * 1024)
                .validate(&i)
                .is_ok()
        );
        assert!(LaunchConfig::new([1, 1, 1], [1, 1, 64], 0)
            .validate(&i)
            .is_ok());
    }

    #[test]
    fn refuses_each_limit_with_a_named_reason() {
        let i = info();
        let r = reason(LaunchConfig::new([1, 1, 1], [2048, 1, 1], 0).validate(&i));
        assert!(r.contains("block.x") && r.contains("2048"), "{r}");
        let r = reason(LaunchConfig::new([1, 1, 1], [64, 32, 1], 0).validate(&i));
        assert!(r.contains("2048 threads"), "{r}");
        let r = reason(LaunchConfig::new([1, 1, 1], [1, 1, 65], 0).validate(&i));
        assert!(r.contains("block.z"), "{r}");
        let r = reason(LaunchConfig::new([1, 65536, 1], [1, 1, 1], 0).validate(&i));
        assert!(r.contains("grid.y"), "{r}");
        let r = reason(LaunchConfig::new([0, 1, 1], [1, 1, 1], 0).validate(&i));
        assert!(r.contains("grid.x is 0"), "{r}");
        let r = reason(LaunchConfig::new([1, 1, 1], [0, 1, 1], 0).validate(&i));
        assert!(r.contains("block.x is 0"), "{r}");
        let r = reason(LaunchConfig::new([1, 1, 1], [128, 1, 1], 227 * 1024 + 1).validate(&i));
        assert!(r.contains("opt-in"), "{r}");
    }

    #[test]
    fn for_elements_covers_n() {
        let c = LaunchConfig::for_elements(1 << 20, 256).unwrap();
        assert_eq!(c.grid, [4096, 1, 1]);
        assert_eq!(LaunchConfig::for_elements(0, 256).unwrap().grid, [1, 1, 1]);
        assert_eq!(
            LaunchConfig::for_elements(257, 256).unwrap().grid,
            [2, 1, 1]
        );
        assert!(LaunchConfig::for_elements(1, 0).is_err());
        assert!(LaunchConfig::for_elements(u64::MAX, 1).is_err());
    }

    proptest! {
        #[test]
        fn validate_matches_definition(bx in 0u32..2100, by in 0u32..40, bz in 0u32..70,
                                       gx in 0u32..4, gy in 0u32..70000, smem in 0u32..300_000) {
            let i = info();
            let c = LaunchConfig::new([gx, gy, 1], [bx, by, bz], smem);
            let ok = bx >= 1 && by >= 1 && bz >= 1 && gx >= 1 && gy >= 1
                && bx <= 1024 && by <= 1024 && bz <= 64 && gy <= 65535
                && (bx as u64) * (by as u64) * (bz as u64) <= 1024
                && smem <= 227 * 1024;
            prop_assert_eq!(c.validate(&i).is_ok(), ok);
        }
    }
}
