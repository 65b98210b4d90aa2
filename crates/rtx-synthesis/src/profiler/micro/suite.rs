//! [`MicroSuite`]: the micro-benchmark kernels (and their launch shapes) the profiler runs on one
//! architecture.

use super::{
    CacheHint, CopyKernel, EmptyKernel, FmaKernel, MicroKernel, MmaSyncKernel, WgmmaKernel,
};
use crate::{Arch, DType};

/// A kernel plus the number of blocks per SM its grid gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteEntry<K> {
    /// The kernel.
    pub kernel: K,
    /// Grid size = SM count x this.
    pub blocks_per_sm: u32,
}

/// Everything the profiler measures on one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MicroSuite {
    /// The target.
    pub arch: Arch,
    /// Copy variants; the best one (and the driver's own copy) gives the bandwidth figure.
    pub copies: Vec<SuiteEntry<CopyKernel>>,
    /// The fp32 FMA kernel.
    pub fma: SuiteEntry<FmaKernel>,
    /// One `mma.sync` kernel per tensor dtype (tf32, f16, bf16); empty below sm_80.
    pub mma_sync: Vec<SuiteEntry<MmaSyncKernel>>,
    /// One `wgmma` kernel per tensor dtype; only on sm_90a.
    pub wgmma: Vec<SuiteEntry<WgmmaKernel>>,
    /// The launch-overhead kernel.
    pub empty: EmptyKernel,
}

/// The tensor dtypes measured, in report order.
pub const TENSOR_DTYPES: [DType; 3] = [DType::Tf32, DType::F16, DType::Bf16];

impl MicroSuite {
    /// The suite for `arch`.
    pub fn for_arch(arch: Arch) -> MicroSuite {
        let copy = |unroll, block, hint, blocks_per_sm| SuiteEntry {
            kernel: CopyKernel {
                unroll,
                block,
                hint,
            },
            blocks_per_sm,
        };
        let mma_sync = if arch.has_mma_sync() {
            TENSOR_DTYPES
                .iter()
                .map(|&dtype| SuiteEntry {
                    kernel: MmaSyncKernel {
                        dtype,
                        accumulators: 8,
                        unroll: 2,
                        block: 256,
                        min_blocks_per_sm: 4,
                    },
                    blocks_per_sm: 4,
                })
                .collect()
        } else {
            Vec::new()
        };
        let wgmma = if arch.has_wgmma() {
            TENSOR_DTYPES
                .iter()
                .map(|&dtype| SuiteEntry {
                    kernel: WgmmaKernel {
                        dtype,
                        n: 256,
                        unroll: 8,
                        min_blocks_per_sm: 2,
                    },
                    blocks_per_sm: 2,
                })
                .collect()
        } else {
            Vec::new()
        };
        MicroSuite {
            arch,
            copies: vec![
                copy(4, 256, CacheHint::Default, 8),
                copy(8, 256, CacheHint::Streaming, 4),
                copy(4, 512, CacheHint::Streaming, 4),
                copy(2, 1024, CacheHint::Default, 2),
            ],
            fma: SuiteEntry {
                kernel: FmaKernel {
                    chains: 16,
                    unroll: 16,
                    block: 256,
                    min_blocks_per_sm: 4,
                },
                blocks_per_sm: 4,
            },
            mma_sync,
            wgmma,
            empty: EmptyKernel,
        }
    }

    /// Every kernel of the suite, in a fixed order (copies, fma, mma.sync, wgmma, empty).
    pub fn kernels(&self) -> Vec<&dyn MicroKernel> {
        let mut v: Vec<&dyn MicroKernel> = Vec::new();
        v.extend(self.copies.iter().map(|c| &c.kernel as &dyn MicroKernel));
        v.push(&self.fma.kernel);
        v.extend(self.mma_sync.iter().map(|c| &c.kernel as &dyn MicroKernel));
        v.extend(self.wgmma.iter().map(|c| &c.kernel as &dyn MicroKernel));
        v.push(&self.empty);
        v
    }
}
