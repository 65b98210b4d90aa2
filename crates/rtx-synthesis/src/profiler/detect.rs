//! What the GPU is: architecture, tensor-core generation, async-copy features and limits, derived
//! from the driver's [`DeviceInfo`] without touching the device.

use crate::{Arch, DType};
use rtx_runtime::DeviceInfo;
use serde::{Deserialize, Serialize};

/// Which tensor-core instructions rtx can use on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TensorCoreGen {
    /// None that rtx uses: Volta's `m8n8k4` and Turing's f16-only `m16n8k8` predate the
    /// bf16/tf32 `mma.sync` shapes rtx's kernels are written for.
    None,
    /// Warp-level `mma.sync` (`m16n8k16` f16/bf16, `m16n8k8` tf32): Ampere, Ada, and Hopper
    /// compiled without the arch-specific target.
    MmaSync,
    /// Hopper sm_90a: `mma.sync` plus warpgroup `wgmma.mma_async` from shared-memory descriptors
    /// (needed to reach Hopper's tensor peak), TMA and thread-block clusters.
    Wgmma,
    /// Consumer Blackwell sm_120: `mma.sync` (no `wgmma`, no `tcgen05`) extended with fp8 and
    /// block-scaled fp8/fp6/fp4 (`kind::mxf8f6f4`), plus TMA and clusters.
    Sm120,
}

impl TensorCoreGen {
    /// The generation available on `arch`.
    pub fn for_arch(arch: Arch) -> TensorCoreGen {
        match arch {
            Arch::Sm70 | Arch::Sm75 => TensorCoreGen::None,
            Arch::Sm80 | Arch::Sm86 | Arch::Sm89 | Arch::Sm90 => TensorCoreGen::MmaSync,
            Arch::Sm90a => TensorCoreGen::Wgmma,
            Arch::Sm120 => TensorCoreGen::Sm120,
        }
    }

    /// Whether `mma.sync` with f16/bf16/tf32 inputs is available.
    pub fn has_mma_sync(self) -> bool {
        self != TensorCoreGen::None
    }

    /// Whether `wgmma.mma_async` is available.
    pub fn has_wgmma(self) -> bool {
        self == TensorCoreGen::Wgmma
    }
}

/// A device's capabilities as rtx's code generators see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Driver-reported name.
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// The compile target (sm_90a on Hopper).
    pub arch: Arch,
    /// Tensor-core generation.
    pub tensor_cores: TensorCoreGen,
    /// Input dtypes the tensor cores take with f32 accumulate (empty without tensor cores).
    pub tensor_dtypes: Vec<DType>,
    /// fp8 (e4m3 / e5m2) tensor-core inputs (sm_89 and newer).
    pub has_fp8_mma: bool,
    /// Block-scaled fp8/fp6/fp4 `mma.sync` (sm_120).
    pub has_block_scaled_mma: bool,
    /// TMA bulk tensor copies (`cp.async.bulk.tensor`) and mbarrier transaction counts.
    pub has_tma: bool,
    /// Ampere-style `cp.async` global-to-shared copies.
    pub has_cp_async: bool,
    /// Thread-block clusters and distributed shared memory (sm_90 and newer).
    pub has_clusters: bool,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache, bytes.
    pub l2_bytes: u64,
    /// Shared memory per block without opt-in, bytes.
    pub smem_per_block: u32,
    /// Largest shared memory one block may opt in to, bytes (the driver's figure).
    pub smem_optin: u32,
    /// Shared memory per SM, bytes.
    pub smem_per_sm: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// 32-bit registers per block.
    pub regs_per_block: u32,
    /// Threads per block limit.
    pub max_threads_per_block: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Peak SM clock, kHz (0 when the driver does not say).
    pub clock_khz: u32,
    /// Device memory, bytes.
    pub total_mem: u64,
    /// CUDA driver version `(major, minor)`.
    pub driver_version: (i32, i32),
}

/// Why a device's capabilities could not be derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DetectError {
    /// The compute capability is not one rtx targets.
    #[error("device `{name}` has compute capability {}.{}, which rtx has no target for: {source}", .compute_capability.0, .compute_capability.1)]
    UnknownArch {
        /// Device name.
        name: String,
        /// Its compute capability.
        compute_capability: (u32, u32),
        /// The target lookup's error.
        #[source]
        source: crate::target::UnknownArch,
    },
    /// The driver reported a limit that makes no sense (e.g. 0 SMs).
    #[error("device `{name}` reports {field} = {value}, which is not a usable device")]
    BadInfo {
        /// Device name.
        name: String,
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
}

/// The capabilities of the device `info` describes.
pub fn detect(info: &DeviceInfo) -> Result<Capabilities, DetectError> {
    let (major, minor) = info.compute_capability;
    let arch =
        Arch::for_compute_capability(major, minor).map_err(|source| DetectError::UnknownArch {
            name: info.name.clone(),
            compute_capability: info.compute_capability,
            source,
        })?;
    for (field, value) in [
        ("sm_count", info.sm_count as u64),
        ("warp_size", info.warp_size as u64),
        ("max_threads_per_block", info.max_threads_per_block as u64),
        ("regs_per_sm", info.regs_per_sm as u64),
    ] {
        if value == 0 {
            return Err(DetectError::BadInfo {
                name: info.name.clone(),
                field,
                value,
            });
        }
    }
    if info.smem_per_block_optin != arch.max_smem_per_block_optin() {
        tracing::debug!(
            device = %info.name,
            driver = info.smem_per_block_optin,
            table = arch.max_smem_per_block_optin(),
            "driver's opt-in shared memory differs from the architecture table; using the driver's"
        );
    }
    let tensor_cores = TensorCoreGen::for_arch(arch);
    let tensor_dtypes = if tensor_cores.has_mma_sync() {
        vec![DType::Tf32, DType::F16, DType::Bf16]
    } else {
        Vec::new()
    };
    Ok(Capabilities {
        name: info.name.clone(),
        compute_capability: info.compute_capability,
        arch,
        tensor_cores,
        tensor_dtypes,
        has_fp8_mma: arch >= Arch::Sm89,
        has_block_scaled_mma: arch == Arch::Sm120,
        has_tma: arch.has_tma(),
        has_cp_async: arch.has_cp_async(),
        has_clusters: arch >= Arch::Sm90,
        sm_count: info.sm_count,
        l2_bytes: info.l2_bytes,
        smem_per_block: info.smem_per_block,
        smem_optin: info.smem_per_block_optin,
        smem_per_sm: info.smem_per_sm,
        regs_per_sm: info.regs_per_sm,
        regs_per_block: info.regs_per_block,
        max_threads_per_block: info.max_threads_per_block,
        warp_size: info.warp_size,
        clock_khz: info.clock_khz,
        total_mem: info.total_mem,
        driver_version: info.driver_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> DeviceInfo {
        DeviceInfo {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            l2_bytes: 60 << 20,
            clock_khz: 1_980_000,
            total_mem: 150_000_000_000,
            driver_version: (13, 0),
            ..DeviceInfo::example_sm90()
        }
    }

    fn with_cc(name: &str, cc: (u32, u32), sms: u32, optin: u32) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            compute_capability: cc,
            sm_count: sms,
            smem_per_block_optin: optin,
            smem_per_sm: optin + 1024,
            ..h200()
        }
    }

    #[test]
    fn hopper_gets_wgmma_tma_and_clusters() {
        let c = detect(&h200()).unwrap();
        assert_eq!(c.arch, Arch::Sm90a);
        assert_eq!(c.tensor_cores, TensorCoreGen::Wgmma);
        assert!(c.tensor_cores.has_wgmma() && c.tensor_cores.has_mma_sync());
        assert!(c.has_tma && c.has_cp_async && c.has_clusters && c.has_fp8_mma);
        assert!(!c.has_block_scaled_mma);
        assert_eq!(c.tensor_dtypes, vec![DType::Tf32, DType::F16, DType::Bf16]);
        assert_eq!((c.sm_count, c.l2_bytes), (132, 60 << 20));
        assert_eq!(c.smem_optin, 227 * 1024);
        assert_eq!(c.driver_version, (13, 0));
    }

    #[test]
    fn blackwell_consumer_has_its_own_feature_set() {
        let c = detect(&with_cc("NVIDIA GeForce RTX 5090", (12, 0), 170, 99 * 1024)).unwrap();
        assert_eq!(c.arch, Arch::Sm120);
        assert_eq!(c.tensor_cores, TensorCoreGen::Sm120);
        assert!(!c.tensor_cores.has_wgmma() && c.tensor_cores.has_mma_sync());
        assert!(c.has_tma && c.has_clusters && c.has_fp8_mma && c.has_block_scaled_mma);
        assert_eq!((c.sm_count, c.smem_optin), (170, 99 * 1024));
    }

    #[test]
    fn ampere_has_mma_sync_and_cp_async_but_no_tma() {
        let c = detect(&with_cc("NVIDIA A100-SXM4-80GB", (8, 0), 108, 163 * 1024)).unwrap();
        assert_eq!(c.arch, Arch::Sm80);
        assert_eq!(c.tensor_cores, TensorCoreGen::MmaSync);
        assert!(c.has_cp_async && !c.has_tma && !c.has_clusters && !c.has_fp8_mma);
        assert_eq!(c.tensor_dtypes.len(), 3);
    }

    #[test]
    fn turing_has_no_tensor_cores_rtx_uses() {
        let c = detect(&with_cc("Tesla T4", (7, 5), 40, 64 * 1024)).unwrap();
        assert_eq!(c.arch, Arch::Sm75);
        assert_eq!(c.tensor_cores, TensorCoreGen::None);
        assert!(!c.tensor_cores.has_mma_sync());
        assert!(c.tensor_dtypes.is_empty());
        assert!(!c.has_cp_async && !c.has_tma);
    }

    #[test]
    fn the_driver_figure_wins_over_the_table() {
        // A driver reporting less opt-in shared memory than the architecture table is believed.
        let c = detect(&with_cc("odd H100", (9, 0), 114, 200 * 1024)).unwrap();
        assert_eq!(c.smem_optin, 200 * 1024);
    }

    #[test]
    fn unknown_or_broken_devices_are_refused_with_the_reason() {
        let e = detect(&with_cc("Pascal", (6, 1), 20, 48 * 1024)).unwrap_err();
        assert!(matches!(
            e,
            DetectError::UnknownArch {
                compute_capability: (6, 1),
                ..
            }
        ));
        assert!(e.to_string().contains("6.1"), "{e}");
        let e = detect(&DeviceInfo {
            sm_count: 0,
            ..h200()
        })
        .unwrap_err();
        assert_eq!(
            e,
            DetectError::BadInfo {
                name: "NVIDIA H200".into(),
                field: "sm_count",
                value: 0
            }
        );
    }

    #[test]
    fn every_known_arch_maps_consistently() {
        for arch in Arch::ALL {
            let g = TensorCoreGen::for_arch(arch);
            assert_eq!(g.has_mma_sync(), arch.has_mma_sync(), "{arch}");
            assert_eq!(g.has_wgmma(), arch.has_wgmma(), "{arch}");
        }
    }
}
