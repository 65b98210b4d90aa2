//! Hopper GEMM template: `wgmma.mma_async` + TMA + mbarriers, warp-specialized, f16/bf16/tf32
//! inputs, fp32 accumulation, fused epilogue, sm_90a only.
//!
//! # Kernel ABI
//! The common GEMM parameters of `GEMM_ABI.md`, followed by two by-value tensor maps:
//! ```text
//! extern "C" __global__ void <entry>(const TIn* A, const TIn* B, TOut* C, const TOut* bias,
//!     const TOut* residual, int M, int N, int K, int lda, int ldb, int ldc,
//!     long long stride_a, long long stride_b, long long stride_c, float alpha, float beta,
//!     const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
//!     float* ws, unsigned* counters
//!     [, TIn* stage_a, TIn* stage_b, int prepass])   // tf32 with an M/N-major operand only
//! ```
//! `tmA`/`tmB` are 128-byte `CUtensorMap`s (128-byte aligned parameters) encoded from [`tma_desc_a`] /
//! [`tma_desc_b`] plus the A/B base addresses (`cuTensorMapEncodeTiled`, rank 3, 128B swizzle,
//! zero out-of-bounds fill). The kernel reads A and B only through the maps; the `A`/`B`
//! pointers are still passed for ABI uniformity. Batch index = `blockIdx.z` in both launch modes;
//! within a batch entry a block (or a cluster of `cluster_m` blocks along `x`) loops over work
//! units `u = blockIdx.x / cluster_m, u += gridDim.x / cluster_m` (unit = tile `u / split_k`,
//! K slice `u % split_k`; in ping-pong mode the two consumer warpgroups take alternate units).
//! With cluster split-K (`cluster_k` 2) the two CTAs of a cluster along `x` share one work unit
//! and split its k-blocks; their partial sums meet in shared memory (no workspace).
//! `ws`/`counters` are the split-K workspace ([`WgmmaConfig::workspace_bytes`]: f32 partials,
//! then u32 per-warp arrival counters that must be zero before the first launch and are left
//! zero by every launch); null when `split_k == 1`. The block needs
//! [`WgmmaConfig::smem_bytes`] of dynamic shared memory (above 48 KiB: opt in with
//! `cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)`). Cluster dims are compiled in with
//! `__cluster_dims__`, so a plain `cuLaunchKernel` launches clusters.
//!
//! # tf32
//! f32 storage, tf32 math (`wgmma ... m64nNk8.f32.tf32.tf32`: the tensor cores read the top 19
//! bits of each f32), f32 accumulation. A stage is still 128 bytes of K (`bk` = 32 elements),
//! the 128B swizzle, descriptors and TMA boxes are byte-for-byte those of the 16-bit K-major
//! path, and one wgmma consumes 32 bytes of K as before (k8 instead of k16). tf32 wgmma has no
//! transpose immediates: both operands must be K-major in shared memory. Row-major A and
//! column-major B (NT) are read in place; an M/N-major tf32 operand (column-major A, row-major
//! B: NN, TN, TT) is transposed into a K-major staging buffer by a pre-pass launch of the same
//! kernel ([`mod@staging`]), which such kernels take as three extra trailing parameters
//! `TIn* stage_a, TIn* stage_b, int prepass`. [`WgmmaGemm::enqueue`] issues both launches, so
//! the transpose is part of the GEMM's time. (The alternative, rejecting those layouts so the
//! mma.sync family serves them, runs at ~0.37x cuBLAS on the H200; the transpose costs one read
//! and one write of the operand, ~10% of a 4096^3 GEMM and ~5% at 8192^3.)
//!
//! # Constraints (`check`)
//! sm_90a; f16/bf16/tf32 inputs; output f32/f16/bf16; `bk * element size == 128` (64 for
//! f16/bf16, 32 for tf32); the leading dimension of every operand TMA reads in place a multiple
//! of 16 bytes (TMA global strides; a staged tf32 operand may have any leading dimension);
//! batch strides of those operands multiples of 16 bytes that do not overlap, < 2^40 bytes;
//! batch <= 65535; `split_k <= ceil(K / bk)` (every K slice has a k-block); with the staging
//! pre-pass, split-K only below the register boundary (`acc + 40 < launch registers`: the
//! 128-accumulator ping-pong split-K configs spill there); the split-K
//! workspace below 2^31 float4s; with cluster split-K, at least `cluster_k` k-blocks; and the
//! config rules of [`WgmmaGemm::check_config`]. At launch
//! the A/B base addresses (and the workspaces) must be 16-byte aligned (TMA). All four A/B
//! layouts are supported (row-major A is K-major; column-major f16/bf16 operands use the wgmma
//! transpose bits; M/N-major tf32 operands are staged).
//!
//! # Modules
//! - [`config`]: the typed config and its resources (threads, smem, register budgets).
//! - [`layout`]: where each TMA box lands and where each wgmma descriptor points (model-checked).
//! - [`ptx`]: inline-PTX helpers, descriptor encoding, the `wgmma.mma_async` wrapper built from N.
//! - [`codegen`]: the kernel source. [`tma`]: tensor-map descriptions. [`host`]: [`WgmmaGemm::enqueue`].
//! - [`mod@staging`]: the tf32 transpose pre-pass (which operands, the staging buffer, its code).

pub mod codegen;
pub mod config;
pub mod cost;
pub mod host;
pub mod layout;
pub mod ptx;
pub mod staging;
pub mod tma;

pub use config::WgmmaConfig;
pub use host::{encode_tensor_map, WgmmaBuffers, WgmmaLaunchError};
pub use staging::{kernel_problem, staging, staging_bytes, staging_for, Staging};
pub use tma::{
    epi_box_cols, l2_promotion, tma_desc_a, tma_desc_b, tma_desc_c, TmaDesc, TmaDescError,
    TmaSwizzle,
};

use super::{Activation, GemmProblem, Layout};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::{Arch, DType};
use config::{BLOCK_K, BLOCK_K_TF32, SWIZZLE_BYTES};

/// Template name (symbols, caches, tuning database).
pub const NAME: &str = "gemm_wgmma";
/// Bump on any change to the generated code or to how its launch encodes the tensor maps (5: the
/// maps' L2 promotion follows [`tma::l2_promotion`], so tuned winners of 4 are re-tuned; 6: the
/// tile order divides once, so timings and winners of 5 are measured again; 7: a K-major A tile
/// loads in 64-row boxes and skips those past M).
pub const VERSION: u32 = 7;
/// One rung of the default-config ladder ([`Template::default_config`] of [`WgmmaGemm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultRung {
    /// Tile rows.
    pub bm: u32,
    /// Tile columns.
    pub bn: u32,
    /// Consumer warpgroups.
    pub consumers: u32,
    /// N of each wgmma instruction.
    pub wgmma_n: u32,
    /// Ring depth.
    pub stages: u32,
    /// Persistent launch (and so the TMA-store epilogue for f16/bf16).
    pub persistent: bool,
    /// Rasterization group.
    pub raster_group: u32,
    /// The most waves (work units per SM, rounded up) where the model may pick this rung;
    /// `None`: no limit.
    pub max_waves: Option<u32>,
    /// The rasterization group this rung takes instead where B streams from DRAM
    /// ([`WgmmaGemm::b_streams`]); `None`: it keeps `raster_group`.
    pub streaming_raster_group: Option<u32>,
    /// The model may pick this rung only where B streams from DRAM ([`WgmmaGemm::b_streams`]).
    pub only_where_b_streams: bool,
    /// The most rows of tiles where the model may pick this rung; `None`: no limit.
    pub max_tile_rows: Option<u32>,
}

/// The rung (bm, bn) tf32 is not offered below two waves of 128 x 256 (see `model_pick`).
const TF32_SMALL_SKIPS: (u32, u32) = (192, 160);

/// The largest M the transposed defaults serve: [`WgmmaGemm::tf32_register_a_config`] (tf32 NN)
/// and [`WgmmaGemm::thin_grid_transposed_config`] (f16 / bf16 NN).
pub const TRANSPOSED_MAX_M: u32 = 256;

/// A transposed tile: `(bm, bn, consumers, stages, tight_b)` of the transposed product (`bm` of
/// the user's N by `bn` of its M).
pub type TransposedTile = (u32, u32, u32, u32, bool);

/// The tilings the transposed defaults pick from: one consumer of 64 rows with 64-192
/// columns, or two of 64 rows sharing 128 columns (at 256 x 8192^2 114.8 us against 151.5 for
/// 64 x 128, tf32, H100 call DG). The stage depths are those measured (a stage holds 128 bytes
/// of K per row for tf32 and f16 / bf16 alike).
pub const TRANSPOSED_TILES: [TransposedTile; 6] = [
    (64, 64, 1, 8, false),
    (64, 80, 1, 8, false),
    (64, 128, 1, 8, false),
    (64, 160, 1, 6, true),
    (64, 192, 1, 6, false),
    (128, 128, 2, 6, false),
];

/// The `swap_ab` config of a [`TransposedTile`], `bk` deep, in `split_k` K slices (one wgmma of
/// the tile's width per consumer).
fn transposed_config(t: &TransposedTile, bk: u32, split_k: u32) -> WgmmaConfig {
    let &(bm, bn, consumers, stages, tight_b) = t;
    WgmmaConfig {
        swap_ab: true,
        tight_b,
        split_k,
        ..WgmmaConfig::basic(bm, bn, bk, consumers, bn, stages)
    }
}

/// Whether `p` is in the transposed defaults' band: NN (both operands row-major) with M <=
/// [`TRANSPOSED_MAX_M`].
fn in_transposed_band(p: &GemmProblem) -> bool {
    p.layout_a == Layout::Row && p.layout_b == Layout::Row && p.m <= TRANSPOSED_MAX_M
}

/// Tiles of `t` over `p`'s transposed product (N x M), times its batch.
fn transposed_tiles(p: &GemmProblem, t: &TransposedTile) -> u64 {
    u64::from(p.n.div_ceil(t.0)) * u64::from(p.m.div_ceil(t.1)) * u64::from(p.batch.max(1))
}

/// The most K slices the transposed defaults split a thin grid into.
pub const TRANSPOSED_MAX_SPLIT: u32 = 4;

/// The fewest k-blocks (128 bytes of K each) a K slice of the transposed defaults keeps.
pub const TRANSPOSED_MIN_SLICE_KBLOCKS: u32 = 8;

/// Default configs from the largest tile to the smallest (see `default_config`).
pub const DEFAULT_LADDER: [DefaultRung; 7] = [
    DefaultRung {
        bm: 128,
        bn: 256,
        consumers: 2,
        wgmma_n: 256,
        stages: 4,
        persistent: true,
        raster_group: 8,
        max_waves: None,
        streaming_raster_group: None,
        only_where_b_streams: false,
        max_tile_rows: None,
    },
    DefaultRung {
        bm: 192,
        bn: 160,
        consumers: 3,
        wgmma_n: 160,
        stages: 4,
        persistent: true,
        raster_group: 1,
        max_waves: None,
        streaming_raster_group: None,
        only_where_b_streams: false,
        max_tile_rows: None,
    },
    // Two 64 x 192 consumers, up to three waves of them. H100, bf16 against the ladder
    // without it: call BK (layer shapes) 4096 x 768 x 3072 0.85x -> 0.97x cuBLAS,
    // 4096 x 2304 x 768 0.92x -> 0.98x, 4096 x 768 x 768 0.93x -> 0.98x; call BL 1024 x 3072 x
    // 4096 0.60x -> 0.96x, 3072^2 x 4096 0.82x -> 0.94x, 4096 x 1536 x 4096 0.86x -> 1.00x,
    // 11008 x 512 x 4096 0.82x -> 0.99x (at most 2.9 waves); but at 5.9 waves 2304 x 8192 x
    // 4096 0.90x -> 0.83x and 6144 x 3072 x 4096 0.93x -> 0.93x.
    DefaultRung {
        bm: 128,
        bn: 192,
        consumers: 2,
        wgmma_n: 192,
        stages: 4,
        persistent: true,
        raster_group: 1,
        max_waves: Some(3),
        streaming_raster_group: None,
        only_where_b_streams: false,
        max_tile_rows: None,
    },
    DefaultRung {
        bm: 128,
        bn: 128,
        consumers: 1,
        wgmma_n: 128,
        stages: 6,
        persistent: true,
        raster_group: 8,
        max_waves: None,
        streaming_raster_group: None,
        only_where_b_streams: false,
        max_tile_rows: None,
    },
    // One 64 x 192 consumer where its tiles fit one wave in at most three rows and B streams
    // from DRAM: 129 tiles at 160 and 192 x 8192^2, where the 128 x 128 rung makes 128. H100,
    // call CF (3 rounds, bf16 / f16 against the ladder without it, cuBLAS alternating):
    // 160 x 8192^2 0.96x -> 0.99 / 0.98x, 192 x 8192^2 1.02 -> 1.03x, 192 x 6144 x 4096
    // 1.04 -> 1.06x, 96 x 11008 x 4096 0.99 -> 1.04x; 384 x 4096^2 (6 rows) flat. It won at
    // 1024 x 1536 x 1024 (0.92 -> 1.03x), 4096 x 384 x 4096 and 8192 x 192 x 8192 too, but lost
    // at 512 x 3072 x 1000 (8 rows, 0.98 -> 0.78x) and 768 x 2048 x 4096 (12 rows, 0.91 ->
    // 0.76x, pulling 9.1 TB/s from L2 into the SMs, what looked like the card's ceiling), so
    // the model is not offered the rung there.
    DefaultRung {
        bm: 64,
        bn: 192,
        consumers: 1,
        wgmma_n: 192,
        stages: 6,
        persistent: true,
        raster_group: 1,
        max_waves: Some(1),
        streaming_raster_group: Some(STREAM_RASTER_GROUP),
        only_where_b_streams: true,
        max_tile_rows: Some(3),
    },
    DefaultRung {
        bm: 64,
        bn: 128,
        consumers: 1,
        wgmma_n: 128,
        stages: 8,
        persistent: true,
        raster_group: 1,
        max_waves: None,
        streaming_raster_group: Some(STREAM_RASTER_GROUP),
        only_where_b_streams: false,
        max_tile_rows: None,
    },
    DefaultRung {
        bm: 64,
        bn: 64,
        consumers: 1,
        wgmma_n: 64,
        stages: 10,
        persistent: true,
        raster_group: 1,
        max_waves: None,
        streaming_raster_group: None,
        only_where_b_streams: false,
        max_tile_rows: None,
    },
];
/// B operand size from which a rung with a `streaming_raster_group` (the 64 x 192 and 64 x 128
/// rungs) groups its tile rows ([`WgmmaGemm::b_streams`]):
/// 32 MiB, under the H100's 50 MB and the H200's 60 MB of L2 that B shares with A and C.
pub const STREAM_B_BYTES: u64 = 32 << 20;
/// The raster group the 64 x 192 and 64 x 128 rungs take where B streams (the large rungs' group).
pub const STREAM_RASTER_GROUP: u32 = 8;
/// Deepest shared-memory ring a config may ask for (shared memory bounds it first for most tiles).
pub const MAX_STAGES: u32 = 12;
/// Ring depths the search space offers. Deep rings pay off where a block runs only a few k-blocks
/// (512^3 and 1024^3 on the H200: 6 stages beat 5, which beat 4, in every measured table of
/// 2026-12-04), so past 6 the space goes on to 8, 10 and 12 where shared memory allows.
const SPACE_STAGES: [u32; 8] = [2, 3, 4, 5, 6, 8, 10, 12];

/// The Hopper wgmma GEMM template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgmmaGemm {
    /// SMs of the target device: the persistent launch starts at most this many blocks.
    pub sm_count: u32,
    /// Also offer the configs kept out of the default space ([`WgmmaGemm::experimental_space`]:
    /// cluster split-K, correct on the H200 but slower than the rungs at 1024^3) in
    /// [`Template::space`]. Off by default; [`EXPERIMENTAL_ENV`] turns it on for
    /// [`WgmmaGemm::for_env`] (the tuner's and `rtx-tune --experimental`'s template).
    pub experimental: bool,
}

/// Environment variable that adds the experimental configs to the tuning space when set to `1`.
pub const EXPERIMENTAL_ENV: &str = "RTX_EXPERIMENTAL";

impl Default for WgmmaGemm {
    fn default() -> Self {
        WgmmaGemm::new(super::DEFAULT_SM_COUNT)
    }
}

fn short_layout(l: Layout) -> &'static str {
    match l {
        Layout::Row => "r",
        Layout::Col => "c",
    }
}

fn activation_tag(a: Activation) -> Option<&'static str> {
    match a {
        Activation::None => None,
        Activation::Relu => Some("relu"),
        Activation::GeluTanh => Some("gelutanh"),
        Activation::GeluErf => Some("geluerf"),
        Activation::Silu => Some("silu"),
    }
}

impl WgmmaGemm {
    /// A template for a device with `sm_count` SMs.
    pub fn new(sm_count: u32) -> Self {
        WgmmaGemm {
            sm_count: sm_count.max(1),
            experimental: false,
        }
    }

    /// [`WgmmaGemm::new`], with [`WgmmaGemm::experimental`] set when [`EXPERIMENTAL_ENV`] is `1`.
    pub fn for_env(sm_count: u32) -> Self {
        WgmmaGemm {
            experimental: std::env::var(EXPERIMENTAL_ENV).is_ok_and(|v| v.trim() == "1"),
            ..WgmmaGemm::new(sm_count)
        }
    }

    /// Configs the template supports but keeps out of the default space (none has won a
    /// measurement), offered by [`Template::space`] only with [`WgmmaGemm::experimental`]:
    /// cluster split-K (`cluster_k` 2) with two consumers splitting rows or columns, every ring
    /// depth, both launch modes and epilogues; one 192 x 128 tile row with split-K 2..4 (three
    /// consumers, or two splitting columns; H200 call CV: 56.0 us at 160 x 8192^2 against 50 for
    /// the 64 x 192 default); and the transposed product (`swap_ab`: tiles of 64 or 128 of N by
    /// 64-256 of M, alone or in a 2-CTA cluster splitting the K-major A^T tile, or as cuBLAS's
    /// `_1x2` kernels: 128 of N by 64 / 80 of M in a pair along M sharing the B tile,
    /// `cluster_n` 2; or two consumers splitting a tile's columns). `check` filters them like
    /// the rest of the space.
    pub fn experimental_space(&self, problem: &GemmProblem, arch: Arch) -> Vec<WgmmaConfig> {
        let mut v = Vec::new();
        if arch != Arch::Sm90a {
            return v;
        }
        let bk = Self::block_k(problem.dtype).unwrap_or(BLOCK_K);
        for (bm, bn) in [(128u32, 64u32), (128, 128), (128, 256), (256, 128)] {
            for split_n in [false, true] {
                let cols = if split_n { bn / 2 } else { bn };
                for stages in SPACE_STAGES {
                    for persistent in [false, true] {
                        for raster_group in [1u32, 8] {
                            for tma_store in [false, true] {
                                v.push(WgmmaConfig {
                                    persistent,
                                    raster_group,
                                    tma_store,
                                    split_n,
                                    cluster_k: 2,
                                    ..WgmmaConfig::basic(bm, bn, bk, 2, cols, stages)
                                });
                            }
                        }
                    }
                }
            }
        }
        // The transposed product (swap_ab): tiles of `bm` of the user's N by `bn` of its M (the
        // whole of a small M in one column tile), alone or in a 2-CTA cluster sharing the user's
        // A tile (the kernel's B; bn 160 splits it in 80-row halves), direct transposed stores.
        // cuBLAS runs this arrangement at 128 and 160 x 8192^2 (H200, call CV:
        // nvjet_sm90_tst_128x64_64x8_1x2 and _128x80_64x8_1x2). A K-major B^T (the user's
        // row-major A) may take a tight ring slot (`tight_b`) where `bn` is not whole 64-row
        // boxes: 8 stages of 128 x 80 or 64 x 160 then fit.
        let tight = |bn: u32| {
            if bn.is_multiple_of(64) {
                vec![false]
            } else {
                vec![false, true]
            }
        };
        for (bm, consumers) in [(64u32, 1u32), (128, 1), (128, 2)] {
            for bn in [64u32, 80, 128, 160, 192, 256] {
                for stages in [4u32, 6, 8] {
                    for cluster_m in [1u32, 2] {
                        for tight_b in tight(bn) {
                            v.push(WgmmaConfig {
                                cluster_m,
                                swap_ab: true,
                                tight_b,
                                ..WgmmaConfig::basic(bm, bn, bk, consumers, bn, stages)
                            });
                        }
                    }
                }
            }
        }
        // The transposed product with split-K, for thin grids (a small M and N): each tile's K
        // in 2-4 slices, summed by the fix-up before the transposed stores.
        for (bm, consumers) in [(64u32, 1u32), (128, 2)] {
            for bn in [64u32, 80, 128, 160, 192, 256] {
                for stages in [6u32, 8] {
                    for split_k in [2u32, 3, 4] {
                        for tight_b in tight(bn) {
                            v.push(WgmmaConfig {
                                split_k,
                                swap_ab: true,
                                tight_b,
                                ..WgmmaConfig::basic(bm, bn, bk, consumers, bn, stages)
                            });
                        }
                    }
                }
            }
        }
        // cuBLAS's own small-M arrangement: 128-row tiles of N in a 2-CTA cluster along the
        // small M, the pair sharing (multicasting) the user's B tile, each CTA a column tile of
        // 64 / 80 of M (128 = 2 x 64, 160 = 2 x 80) with one or two consumers; and two
        // consumers splitting the columns of a 64-row tile covering all of a small M.
        for consumers in [1u32, 2] {
            for bn in [64u32, 80, 128, 160] {
                for stages in [4u32, 6, 8] {
                    for tight_b in tight(bn) {
                        v.push(WgmmaConfig {
                            cluster_n: 2,
                            swap_ab: true,
                            tight_b,
                            ..WgmmaConfig::basic(128, bn, bk, consumers, bn, stages)
                        });
                    }
                }
            }
        }
        for bn in [128u32, 160, 192, 256] {
            for stages in [4u32, 6, 8] {
                for tight_b in tight(bn) {
                    v.push(WgmmaConfig {
                        split_n: true,
                        swap_ab: true,
                        tight_b,
                        ..WgmmaConfig::basic(64, bn, bk, 2, bn / 2, stages)
                    });
                }
            }
        }
        // One 192-row tile over small M (129..192 rows) with split-K: three 64 x 128 consumers,
        // or two 192 x 64 column-split ones. 128 work units at N = 8192 with split-K 2, each
        // reading (192 + 128) x K/2 operand bytes, against 64 x 192 tiles reading (64 + 192) x K:
        // a third less traffic from L2 into the SMs.
        for (consumers, wgmma_n, split_n) in [(3u32, 128u32, false), (2, 64, true)] {
            for split_k in [2u32, 3, 4] {
                for stages in [4u32, 5] {
                    for raster_group in [1u32, 8] {
                        v.push(WgmmaConfig {
                            raster_group,
                            split_k,
                            split_n,
                            ..WgmmaConfig::basic(192, 128, bk, consumers, wgmma_n, stages)
                        });
                    }
                }
            }
        }
        v
    }

    /// The kernel entry point name, encoding dtype, layouts, config and epilogue.
    pub fn entry_name(&self, p: &GemmProblem, c: &WgmmaConfig) -> String {
        let e = &p.epilogue;
        let mut s = format!(
            "rtx_wgmma_{}_{}{}_{}",
            p.dtype.name(),
            short_layout(p.layout_a),
            short_layout(p.layout_b),
            c.tag()
        );
        if e.beta != 0.0 {
            s.push_str("_beta");
        }
        if e.bias {
            s.push_str("_bias");
        }
        if let Some(a) = activation_tag(e.activation) {
            s.push('_');
            s.push_str(a);
        }
        if e.residual {
            s.push_str("_res");
        }
        s.push_str("_o");
        s.push_str(e.out_dtype.name());
        s
    }

    /// The two tensor-map descriptions (A, B) the launch wrapper encodes.
    pub fn tensor_maps(&self, p: &GemmProblem, c: &WgmmaConfig) -> (TmaDesc, TmaDesc) {
        let v = Self::view(p, c);
        (tma_desc_a(&v, c), tma_desc_b(&v, c))
    }

    /// The problem the kernel computes: `p`, or with [`WgmmaConfig::swap_ab`] its transposed
    /// view ([`GemmProblem::transposed`]: A is the user's B, B the user's A, M and N swapped).
    pub fn view(p: &GemmProblem, c: &WgmmaConfig) -> GemmProblem {
        if c.swap_ab {
            p.transposed()
        } else {
            *p
        }
    }

    /// The stage depth `bk` (elements) of `dtype`: 128 bytes of K, i.e. 64 for f16/bf16 and 32
    /// for tf32; `None` for input types the template does not take.
    pub fn block_k(dtype: DType) -> Option<u32> {
        match dtype {
            DType::F16 | DType::Bf16 => Some(BLOCK_K),
            DType::Tf32 => Some(BLOCK_K_TF32),
            DType::F32 => None,
        }
    }

    /// Bytes of the staging buffer a launch of `c` for `p` needs (the K-major copies of its
    /// M/N-major tf32 operands; 0 for f16/bf16, for tf32 NT and for the transposed product).
    /// See [`mod@staging`].
    pub fn staging_bytes(p: &GemmProblem, c: &WgmmaConfig) -> u64 {
        if staging_for(p, c).any() {
            staging::staging_bytes(p)
        } else {
            0
        }
    }

    /// Launch dimensions of the tf32 staging pre-pass for `p` (`None` when nothing is staged):
    /// the kernel's block size, one warp-sized 64 x 33 float tile of dynamic shared memory per
    /// warp, at most one block per SM along `x` (a whole number of clusters), `batch` along `z`.
    /// Total for any config (sizes saturate; `check` rejects the configs where they would).
    pub fn prepass_launch(&self, p: &GemmProblem, c: &WgmmaConfig) -> Option<LaunchDims> {
        if !staging_for(p, c).any() {
            return None;
        }
        let (ta, tb) = staging::prepass_tiles(p);
        let warps = c.threads() / 32;
        let cl = c.cluster_size();
        let blocks = ta
            .saturating_add(tb)
            .div_ceil(warps.max(1) as u64)
            .clamp(1, self.sm_count.max(1) as u64) as u32;
        Some(LaunchDims {
            grid: [
                blocks
                    .checked_next_multiple_of(cl)
                    .unwrap_or(u32::MAX / cl * cl),
                1,
                p.batch.max(1),
            ],
            block: [c.threads(), 1, 1],
            dynamic_smem: warps.saturating_mul(staging::WARP_TILE_BYTES),
        })
    }

    /// The TMA rule on the row pitch `ld` (elements of `esz` bytes) of an operand read in place:
    /// a multiple of 16 bytes.
    fn check_tma_pitch(name: &str, ld: u32, esz: u64) -> Result<(), String> {
        if (ld as u64 * esz).is_multiple_of(16) {
            return Ok(());
        }
        Err(format!(
            "{name}={ld}: TMA needs the row pitch ({} bytes) to be a multiple of 16",
            ld as u64 * esz
        ))
    }

    /// The TMA rules on the batch stride of an operand read in place (0 broadcasts one entry):
    /// a multiple of 16 bytes, no smaller than one entry's `span` of elements (overlapping
    /// entries), below 2^40 bytes.
    fn check_tma_batch_stride(name: &str, stride: u64, span: u64, esz: u64) -> Result<(), String> {
        if stride == 0 {
            return Ok(());
        }
        let bytes = stride.checked_mul(esz);
        if let Some(b) = bytes.filter(|b| !b.is_multiple_of(16)) {
            return Err(format!(
                "{name}={stride}: TMA needs the batch stride ({b} bytes) to be a multiple of 16"
            ));
        }
        if stride < span {
            return Err(format!("{name}={stride} < {span}: overlapping batch entries cannot be described by a TMA map"));
        }
        if bytes.is_none_or(|b| b >= 1 << 40) {
            return Err(format!(
                "{name}={stride}: TMA strides must be below 2^40 bytes"
            ));
        }
        Ok(())
    }

    /// The transposed product of a tf32 problem (`swap_ab`) stages nothing: its B, the user's A,
    /// must be K-major (row-major), and its A, the user's B, is read in place by TMA (K-major,
    /// or M-major into registers), so the user's B needs the TMA pitch and batch-stride rules
    /// that a staged B is spared in [`Self::check_problem`].
    fn check_tf32_swap(p: &GemmProblem) -> Result<(), String> {
        if p.layout_a != Layout::Row {
            return Err(format!(
                "swap_ab with tf32 needs a row-major A (got {:?}): a column-major A would be the transposed product's M/N-major B, which tf32 wgmma cannot read",
                p.layout_a
            ));
        }
        let in_place = |e: String| format!("swap_ab reads tf32 B in place: {e}");
        Self::check_tma_pitch("ldb", p.ldb, 4).map_err(in_place)?;
        if p.batch > 1 {
            let rows = if p.layout_b == Layout::Row { p.k } else { p.n } as u64;
            Self::check_tma_batch_stride("stride_b", p.stride_b, rows * p.ldb as u64, 4)
                .map_err(in_place)?;
        }
        Ok(())
    }

    /// Rules of a config that depend on the problem. An MN-major B (row-major B of f16/bf16) is
    /// loaded in 64-column swizzle boxes and a wgmma reads it from a box's first column, so each
    /// wgmma's first column (every `wgmma_n`-th column of a consumer's part) and a column-split
    /// consumer's first column must be a multiple of 64; a tile whose last box is partial
    /// (`bn` 160 = 64 + 64 + 32, one m64n160 wgmma per consumer) loads that box whole. A K-major
    /// B takes any multiple of 16 (160 = 2 x 80 is cuBLAS's tile at 4000 x 4000). The TMA-store
    /// epilogue stores whole boxes of one swizzle span ([`WgmmaConfig::epi_span_bytes`]) of a
    /// consumer's columns. A tight B slot ([`WgmmaConfig::tight_b`]) needs a K-major B.
    pub fn check_config_for(p: &GemmProblem, c: &WgmmaConfig) -> Result<(), String> {
        if !tma::b_is_k_major(p, c)
            && ((c.n_iters() > 1 && !c.wgmma_n.is_multiple_of(64))
                || (c.split_n && !c.cols_per_consumer().is_multiple_of(64)))
        {
            return Err(format!(
                "bn={} (wgmma_n={}, {} columns per consumer): an MN-major B (layout {:?}) is loaded in 64-column swizzle boxes, so every wgmma and every consumer must start on a multiple of 64 columns",
                c.bn,
                c.wgmma_n,
                c.cols_per_consumer(),
                p.layout_b
            ));
        }
        if c.tight_b && !tma::b_is_k_major(p, c) {
            return Err(format!(
                "tight_b: an MN-major B (layout {:?}) is loaded in whole 64-column boxes, so its ring slot cannot be cut to bn={} rows",
                p.layout_b, c.bn
            ));
        }
        if c.cluster_m == 2 && !c.bn.is_multiple_of(128) && !tma::b_is_k_major(p, c) {
            return Err(format!(
                "cluster_m=2 with bn={}: an MN-major B (layout {:?}) splits between the pair in whole 64-column boxes, so bn must be a multiple of 128",
                c.bn, p.layout_b
            ));
        }
        let cols = tma::epi_box_cols(p, c);
        if c.tma_store && !c.cols_per_consumer().is_multiple_of(cols) {
            return Err(format!(
                "tma_store: a consumer's {} columns must be whole {cols}-column boxes of {} output",
                c.cols_per_consumer(),
                p.epilogue.out_dtype
            ));
        }
        Ok(())
    }

    /// Problem-independent rules of a config on `arch`, as a reason string.
    ///
    /// `bk` 64 or 32 (one 128-byte swizzle span of 2- or 4-byte elements; which one is the
    /// problem's dtype's, see [`WgmmaGemm::block_k`]); `consumers` 1, 2 or 3 (3 only splitting rows); `bm` in {64, 128, 192, 256} and a multiple of `64 * consumers`
    /// (of 64 with `split_n`, whose consumers split the columns: `bn / 2`, a multiple of 16);
    /// `bn` in {64, 80, 128, 160, 192, 256}; `wgmma_n` a multiple of 16 in 16..=256 dividing a consumer's columns
    /// (multiples of 64 where B is MN-major: [`WgmmaGemm::check_config_for`]); at most
    /// 128 fp32 accumulators per consumer thread; `stages` in 2..=[`MAX_STAGES`]; `cluster_m` 1 or 2 (2 needs
    /// `bn` a multiple of 128, or 160 for a K-major B: B is split between the pair); `raster_group` in 1..=64; `split_k`
    /// in 1..=16, and split-K only where the fix-up fits beside the accumulators (not 128 of them
    /// in a 384-thread block: ptxas spills); `pingpong` needs 2 consumers and `persistent` (each
    /// consumer then owns the whole tile, so `bm` only needs to be a multiple of 64); `cluster_k`
    /// 1 or 2 (2 needs 2 consumers, no ping-pong, `cluster_m` 1 and `split_k` 1; the problem
    /// check adds at least 2 k-blocks); `cluster_n` 1 or 2 (2 needs `bm` a multiple of 128 to
    /// split A between the pair, `cluster_m` 1, `cluster_k` 1, `split_k` 1); shared memory within
    /// the arch's opt-in limit.
    pub fn check_config(c: &WgmmaConfig, arch: Arch) -> Result<(), String> {
        if c.bk != BLOCK_K && c.bk != BLOCK_K_TF32 {
            return Err(format!(
                "bk={} must be {BLOCK_K} (f16/bf16) or {BLOCK_K_TF32} (tf32): one {SWIZZLE_BYTES}-byte swizzle span",
                c.bk
            ));
        }
        if !(1..=3).contains(&c.consumers) {
            return Err(format!("consumers={} must be 1, 2 or 3", c.consumers));
        }
        if c.consumers == 3 && (c.pingpong || c.split_n) {
            return Err(
                "consumers=3 split the tile's rows only (no pingpong, no split_n)".to_string(),
            );
        }
        if c.pingpong && (c.consumers != 2 || !c.persistent) {
            return Err(format!(
                "pingpong needs consumers=2 (got {}) and persistent=true (got {}): the two consumers alternate work units",
                c.consumers, c.persistent
            ));
        }
        if c.split_n && (c.consumers != 2 || c.pingpong) {
            return Err(format!(
                "split_n needs consumers=2 (got {}) without pingpong (got {}): the two consumers split one tile's columns",
                c.consumers, c.pingpong
            ));
        }
        let row_split = if c.split_n { 1 } else { c.consumers_per_unit() };
        if ![64, 128, 192, 256].contains(&c.bm) || !c.bm.is_multiple_of(64 * row_split) {
            return Err(format!(
                "bm={} must be 64, 128, 192 or 256 and a multiple of 64 x the consumers splitting its rows ({row_split})",
                c.bm
            ));
        }
        if ![64, 80, 128, 160, 192, 256].contains(&c.bn) {
            return Err(format!("bn={} must be 64, 80, 128, 160, 192 or 256", c.bn));
        }
        if c.split_n && !c.cols_per_consumer().is_multiple_of(16) {
            return Err(format!(
                "split_n: each consumer's bn/2={} columns must be a multiple of 16",
                c.cols_per_consumer()
            ));
        }
        if !c.wgmma_n.is_multiple_of(16)
            || !(16..=256).contains(&c.wgmma_n)
            || !c.cols_per_consumer().is_multiple_of(c.wgmma_n)
        {
            return Err(format!(
                "wgmma_n={} must be a multiple of 16 in 16..=256 that divides a consumer's {} columns",
                c.wgmma_n,
                c.cols_per_consumer()
            ));
        }
        if c.acc_regs() > 128 {
            return Err(format!(
                "{} fp32 accumulators per consumer thread ({} rows x {} columns) exceed 128",
                c.acc_regs(),
                c.rows_per_consumer(),
                c.cols_per_consumer()
            ));
        }
        if !(2..=MAX_STAGES).contains(&c.stages) {
            return Err(format!("stages={} must be in 2..={MAX_STAGES}", c.stages));
        }
        if !(1..=2).contains(&c.cluster_m) {
            return Err(format!("cluster_m={} must be 1 or 2", c.cluster_m));
        }
        if c.cluster_m == 2 && !c.bn.is_multiple_of(128) && c.bn != 160 {
            return Err(format!("cluster_m=2 splits the B tile in halves: bn={} must be a multiple of 128 (or 160 for a K-major B)", c.bn));
        }
        if !(1..=2).contains(&c.cluster_n) {
            return Err(format!("cluster_n={} must be 1 or 2", c.cluster_n));
        }
        if c.cluster_n == 2
            && (!c.bm.is_multiple_of(128) || c.cluster_m != 1 || c.cluster_k != 1 || c.split_k != 1)
        {
            return Err(format!(
                "cluster_n=2 splits the A tile's 64-row boxes between the pair and needs bm a multiple of 128 (got {}), cluster_m=1 (got {}), cluster_k=1 (got {}) and split_k=1 (got {})",
                c.bm, c.cluster_m, c.cluster_k, c.split_k
            ));
        }
        if !(1..=16).contains(&c.split_k) {
            return Err(format!("split_k={} must be in 1..=16", c.split_k));
        }
        if c.split_k > 1 && c.acc_regs().saturating_add(40) >= c.launch_regs() {
            return Err(format!(
                "split_k={} with {} accumulators per thread in a {}-thread block ({} registers at launch): the fix-up spills",
                c.split_k,
                c.acc_regs(),
                c.threads(),
                c.launch_regs()
            ));
        }
        if c.tma_store && c.split_k > 1 {
            return Err(format!(
                "tma_store with split_k={}: the split-K fix-up finishes tiles per warp, the TMA-store epilogue per warpgroup",
                c.split_k
            ));
        }
        if !(1..=2).contains(&c.cluster_k) {
            return Err(format!("cluster_k={} must be 1 or 2", c.cluster_k));
        }
        if c.cluster_k == 2
            && (c.consumers != 2 || c.pingpong || c.cluster_m != 1 || c.split_k != 1)
        {
            return Err(format!(
                "cluster_k=2 needs consumers=2 (got {}), no pingpong (got {}), cluster_m=1 (got {}) and split_k=1 (got {}): consumer r of CTA r owns its part of the tile and the other CTA's consumer r sends it its partial sums",
                c.consumers, c.pingpong, c.cluster_m, c.split_k
            ));
        }
        if !(1..=64).contains(&c.raster_group) {
            return Err(format!("raster_group={} must be in 1..=64", c.raster_group));
        }
        let limit = arch.max_smem_per_block_optin();
        if c.smem_bytes() > limit {
            return Err(format!(
                "shared memory {} bytes ({} stages x {} bytes + barriers + 1 KiB alignment) exceeds {limit} on {arch}",
                c.smem_bytes(),
                c.stages,
                c.stage_bytes()
            ));
        }
        if c.consumer_regs() < c.acc_regs().saturating_add(64) {
            return Err(format!(
                "consumer register budget {} leaves too little beside {} accumulators",
                c.consumer_regs(),
                c.acc_regs()
            ));
        }
        Ok(())
    }

    /// The default of tf32 with row-major A and B (NN) and M <= [`TRANSPOSED_MAX_M`]: the
    /// transposed product (`swap_ab`) with the user's B read into registers, so no pre-pass
    /// stages B. Each tile is 64 (one consumer) or 128 (two) of N by `bn` of M. The pick fills at
    /// most one wave: of the [`TRANSPOSED_TILES`] whose tiles number at most the SM count,
    /// the one with the most tiles, then the least padding past M. `None` outside that band or
    /// where `check` refuses the pick (a B pitch TMA cannot read in place).
    ///
    /// Where that pick fills at most three quarters of a wave (a small N too), K is split
    /// (`split_transposed`): of the tilings with 1..=[`TRANSPOSED_MAX_SPLIT`] slices of at
    /// least [`TRANSPOSED_MIN_SLICE_KBLOCKS`] k-blocks and at most one wave of (tile,
    /// slice) units, the one with the most units, then the fewest operand rows per unit
    /// ((bm + bn) x its k-blocks), then the fewest slices. H100, call DJ (session 33), tf32 NN,
    /// rtx-tune slices of every split transposed tile, against the unsplit default of the same
    /// build in rtx-bench (cuBLAS in the same process): 128 x 2048 x 8192 61.6 -> 39.7 us
    /// (0.73x -> 1.15x cuBLAS), 240 x 1536 x 8192 60.6 -> 41.4 (0.77x -> 1.13x), 128 x 1024 x
    /// 4096 32.6 -> 17.2 (0.59x -> 1.10x), 64 x 1024 x 8192 60.0 -> 26.0 (0.46x -> 1.08x),
    /// 256 x 1024 x 8192 60.2 -> 34.6 (0.67x -> 1.18x), 160 x 2048 x 4096 34.2 -> 27.8 (1.06x
    /// -> 1.32x); each pick the winner of its slices or within 5% of it. Split 2 at full grids
    /// lost or tied (128 x 8192^2 105.7 against 104.6 us unsplit, 256 x 8192^2 128.6 against
    /// 115.7).
    ///
    /// H100, call DG (session 32), tf32 NN, rtx-tune slices of every `swap_ab` config with cuBLAS
    /// in the same process, against what was served (mma.sync split-K, or wgmma through the
    /// pre-pass), each pick timed as the rule picked it before split-K (3a3fdb8): 64 / 128 /
    /// 160 / 192 / 256 x 8192^2 100.7 / 103.1 / 104.3 / 107.6 / 114.8 us (1.09 / 1.08 / 1.51 /
    /// 2.05 / 1.08x cuBLAS;
    /// served at 128 / 160 / 256: 163.3 / 305.6 / 271.3 us); 96 x 4096^2 42.9 us (1.01x; served
    /// 64.7), 144 x 3072^2 64 x 80 31.6 us (1.11x; served 65.3), 128 x 2048 x 8192 60.9 (0.76x;
    /// served 75.2), 240 x 1536 x 8192 61.5 (0.77x; served 95.0), 128 x 1024^2 12.1 (1.02x;
    /// served 17.4), 256 x 4096^2 64 x 128 45.5 (1.12x; served 89.2). Each pick is the slice's
    /// winner or within 2% of it (96 x 11008 x 4096, 128 x 128, was not timed); the rule's
    /// alternatives lost where they run more than one wave (64 x 64 at 128 x 8192^2: 126.3 us,
    /// 64 x 128 at 256 x 8192^2: 151.5) or leave it half empty (64 x 128 at 96 x 4096^2: 48.0).
    pub fn tf32_register_a_config(&self, p: &GemmProblem) -> Option<WgmmaConfig> {
        if p.dtype != DType::Tf32 || !in_transposed_band(p) {
            return None;
        }
        let sms = u64::from(self.sm_count.max(1));
        let tiles = |t: &TransposedTile| transposed_tiles(p, t);
        let pad = |t: &TransposedTile| p.m.div_ceil(t.1) * t.1 - p.m;
        let pick = TRANSPOSED_TILES
            .iter()
            .filter(|t| tiles(t) <= sms)
            .max_by_key(|t| (tiles(t), std::cmp::Reverse(pad(t))))
            .or_else(|| {
                // Every tiling runs more than one wave: the one with the fewest tiles.
                TRANSPOSED_TILES.iter().min_by_key(|t| (tiles(t), pad(t)))
            })?;
        let c = transposed_config(pick, BLOCK_K_TF32, 1);
        self.check(p, &c, Arch::Sm90a).ok()?;
        // A thin grid (at most three quarters of a wave): split K where that gives more work
        // units, or as many with fewer operand bytes per unit.
        if 4 * tiles(pick) > 3 * sms {
            return Some(c);
        }
        Some(self.split_transposed(p, BLOCK_K_TF32).unwrap_or(c))
    }

    /// The default of f16 / bf16 NN with M <= [`TRANSPOSED_MAX_M`] at a thin grid: where the
    /// ladder's pick (`ladder`) fills at most three quarters of a wave, the transposed product
    /// split as `split_transposed` chooses, if that runs at least twice as many work
    /// units; else `None` (the ladder's pick stays).
    ///
    /// H100, bf16 / f16 NN, against the ladder's 64 x 64 (cuBLAS in the same process). Call DL
    /// (session 33), rtx-tune slices of the split transposed tiles; call DM, this default
    /// through rtx-bench, two rounds: 128 x 2048 x 8192 29.6 -> 25.9 us (0.83x -> 0.96x
    /// cuBLAS), 64 x 1024 x 8192 23.5 -> 16.4 (0.65x -> 0.94x), 256 x 1024 x 8192 24.4 -> 21.2
    /// (0.79x -> 0.91x), 128 x 1024 x 4096 14.0 -> 12.6-13.3 (0.84x -> 0.92-0.94x), each with
    /// twice the ladder's units or more. Where the split ran fewer than twice as many the
    /// ladder stays: at 160 x 2048 x 4096 (128 units against 96) call DM lost 5-7% (17.6-18.3
    /// -> 18.9-19.6 us), at 240 x 1536 x 8192 (96 against 96) call DL's slice lost 3%.
    pub fn thin_grid_transposed_config(
        &self,
        p: &GemmProblem,
        ladder: &WgmmaConfig,
    ) -> Option<WgmmaConfig> {
        if !matches!(p.dtype, DType::F16 | DType::Bf16) || !in_transposed_band(p) {
            return None;
        }
        let sms = u64::from(self.sm_count.max(1));
        let batch = u64::from(p.batch.max(1));
        let ladder_units = ladder.units(p.m, p.n).saturating_mul(batch);
        if 4 * ladder_units > 3 * sms {
            return None;
        }
        let c = self.split_transposed(p, BLOCK_K)?;
        (c.units(p.n, p.m).saturating_mul(batch) >= 2 * ladder_units).then_some(c)
    }

    /// Of the [`TRANSPOSED_TILES`] (transposed, `bk` deep) with 1..=[`TRANSPOSED_MAX_SPLIT`]
    /// K slices of at least [`TRANSPOSED_MIN_SLICE_KBLOCKS`] k-blocks and at most one wave
    /// of (tile, slice) units: the one with the most units, then the fewest operand rows per
    /// unit ((bm + bn) x its k-blocks), then the fewest slices; `None` where `check` refuses
    /// every one.
    fn split_transposed(&self, p: &GemmProblem, bk: u32) -> Option<WgmmaConfig> {
        let sms = u64::from(self.sm_count.max(1));
        let kblocks = p.k.div_ceil(bk);
        TRANSPOSED_TILES
            .iter()
            .flat_map(|t| (1..=TRANSPOSED_MAX_SPLIT).map(move |s| (t, s)))
            .filter(|&(_, s)| s == 1 || kblocks / s >= TRANSPOSED_MIN_SLICE_KBLOCKS)
            .map(|(t, s)| {
                let units = transposed_tiles(p, t) * u64::from(s);
                let rows_per_unit = u64::from(t.0 + t.1) * u64::from(kblocks.div_ceil(s));
                (units, rows_per_unit, s, transposed_config(t, bk, s))
            })
            .filter(|x| x.0 <= sms && self.check(p, &x.3, Arch::Sm90a).is_ok())
            .max_by_key(|x| (x.0, std::cmp::Reverse(x.1), std::cmp::Reverse(x.2)))
            .map(|x| x.3)
    }

    /// The config of one [`DEFAULT_LADDER`] rung for `problem` (the TMA-store epilogue for
    /// f16/bf16 on a persistent rung where C allows it; tf32 stores directly; the rung's
    /// `streaming_raster_group` where B streams).
    pub fn rung_config(&self, problem: &GemmProblem, rung: &DefaultRung) -> WgmmaConfig {
        let sixteen_bit = matches!(problem.dtype, DType::F16 | DType::Bf16);
        let bk = Self::block_k(problem.dtype).unwrap_or(BLOCK_K);
        let mut c = WgmmaConfig {
            persistent: rung.persistent,
            raster_group: rung.raster_group,
            tma_store: sixteen_bit && rung.persistent && Self::check_tma_store(problem).is_ok(),
            ..WgmmaConfig::basic(
                rung.bm,
                rung.bn,
                bk,
                rung.consumers,
                rung.wgmma_n,
                rung.stages,
            )
        };
        if let Some(g) = rung.streaming_raster_group {
            if Self::b_streams(problem, &c) {
                c.raster_group = g;
            }
        }
        c
    }

    /// The default (see [`Template::default_config`]): the ladder rung the cost model predicts
    /// fastest (tf32: of the first two rungs where the first fills two waves, else of the ladder
    /// less 192 x 160), ties within 0.5% going to more work units, then the larger tile. `None`
    /// for f32, or without H200 facts in the hardware database.
    fn model_pick(&self, problem: &GemmProblem) -> Option<WgmmaConfig> {
        // tf32 chooses only between the two large tiles where 128 x 256 fills at least two
        // waves: there the choice is wave quantization, which the model gets right (192 x 160
        // ran 368.7 us against 396.1 for 128 x 256 at 4000^2 x 4096, call V, and 438.5 against
        // 386.5 at 4096^3, call X). Below that the model mispredicted 192 x 160 (call AD,
        // against call AC's 128 x 256: 512^3 24.5 vs 23.8 us, 256 x 8192^2 370.4 vs 321.3 us,
        // where the model said 4% faster), so there tf32 is offered the rest of the ladder.
        // H100, call CK (3 rounds, against 128 x 256 everywhere below two waves, cuBLAS
        // alternating): 512^3 24.1 -> 14.9 us (0.40x -> 0.66x cuBLAS), 1024^3 34.5 -> 22.1 us
        // (0.50x -> 0.78x), 64..256 x 8192^2 359-361 -> 336-346 us (the staging pre-pass of B
        // bounds those); 2048^3, 4096^3 and 4096^2 x 1000 unchanged.
        let units = |c: &WgmmaConfig| {
            c.units(problem.m, problem.n)
                .saturating_mul(u64::from(problem.batch.max(1)))
        };
        let sms = u64::from(self.sm_count.max(1));
        let rungs: Vec<&DefaultRung> = match problem.dtype {
            DType::F16 | DType::Bf16 => DEFAULT_LADDER.iter().collect(),
            DType::Tf32 if units(&self.rung_config(problem, &DEFAULT_LADDER[0])) >= 2 * sms => {
                DEFAULT_LADDER[..2].iter().collect()
            }
            // Below two waves of 128 x 256, the ladder less 192 x 160 (TF32_SMALL_SKIPS).
            DType::Tf32 => DEFAULT_LADDER
                .iter()
                .filter(|r| (r.bm, r.bn) != TF32_SMALL_SKIPS)
                .collect(),
            DType::F32 => return None,
        };
        let facts = crate::tuner::DeviceFacts {
            sm_count: self.sm_count.max(1),
            ..crate::tuner::DeviceFacts::lookup("NVIDIA H200", (9, 0))?
        };
        let scored: Vec<(WgmmaConfig, f64, u64)> = rungs
            .iter()
            .filter_map(|r| {
                let c = self.rung_config(problem, r);
                let n = units(&c);
                if r.max_waves.is_some_and(|w| n > u64::from(w) * sms)
                    || (r.only_where_b_streams && !Self::b_streams(problem, &c))
                    || r.max_tile_rows
                        .is_some_and(|t| c.tiles(problem.m, problem.n).0 > t)
                {
                    return None;
                }
                let us = cost::estimate_us(problem, &c, &facts)?;
                Some((c, us, n))
            })
            .collect();
        let best = scored.iter().map(|s| s.1).min_by(f64::total_cmp)?;
        let mut pick: Option<&(WgmmaConfig, f64, u64)> = None;
        for s in scored.iter().filter(|s| s.1 <= best * 1.005) {
            if pick.is_none_or(|p| s.2 > p.2) {
                pick = Some(s);
            }
        }
        pick.map(|p| p.0.clone())
    }

    /// Whether B is read from DRAM rather than L2 under row-major tile order: more than one row
    /// of tiles and a B operand of at least [`STREAM_B_BYTES`]. Row-major order then runs the
    /// readers of one B column block a whole row of tiles apart, and each brings it from DRAM
    /// again; groups of rows run them next to each other. H100, bf16 NN, the 64 x 128 rung
    /// (8 stages), `rtx-tune --strategy exhaustive --where` (call CB, cuBLAS in the same
    /// process): 128 x 8192^2 69.7 us row-major against 58.1 us in groups of 8 (cuBLAS 58.2);
    /// 192 x 8192^2 121.5 against 72.4 us (cuBLAS 62.5); at 1024^3 (B 2 MiB) row-major stays
    /// ahead, 9.3 against 9.4 us.
    pub fn b_streams(problem: &GemmProblem, c: &WgmmaConfig) -> bool {
        let (tiles_m, _) = c.tiles(problem.m, problem.n);
        let b_bytes =
            (problem.k as u64 * problem.n as u64).saturating_mul(problem.dtype.size_bytes() as u64);
        tiles_m > 1 && b_bytes >= STREAM_B_BYTES
    }

    /// What the TMA-store epilogue needs of C: a 16-byte row pitch and, when batched, a 16-byte
    /// batch stride below 2^40 bytes (the C pointer's 16-byte alignment is checked at launch).
    pub fn check_tma_store(p: &GemmProblem) -> Result<(), String> {
        let osz = p.epilogue.out_dtype.size_bytes() as u64;
        if !(p.ldc as u64 * osz).is_multiple_of(16) {
            return Err(format!(
                "tma_store: ldc={} gives a {}-byte row pitch of C; the TMA store needs a multiple of 16",
                p.ldc,
                p.ldc as u64 * osz
            ));
        }
        if p.batch > 1 && p.stride_c != 0 {
            let bytes = p.stride_c.checked_mul(osz);
            if !bytes.is_some_and(|b| b.is_multiple_of(16) && b < 1 << 40) {
                return Err(format!(
                    "tma_store: stride_c={} ({} bytes) must be a multiple of 16 bytes below 2^40 for the TMA store",
                    p.stride_c,
                    bytes.map_or_else(|| "over 2^64".to_string(), |b| b.to_string())
                ));
            }
        }
        Ok(())
    }

    /// Problem rules (dtype, alignment, batching), as a reason string.
    ///
    /// Operands TMA reads in place (all f16/bf16 operands, K-major tf32 operands) need 16-byte
    /// row pitches and, when batched, 16-byte batch strides that do not overlap and stay below
    /// 2^40 bytes. Staged tf32 operands (M/N-major) are read by the pre-pass with plain loads,
    /// so only their staged copy's batch stride has to fit a TMA map.
    pub fn check_problem(p: &GemmProblem) -> Result<(), String> {
        p.validate().map_err(|e| e.to_string())?;
        if !matches!(p.dtype, DType::F16 | DType::Bf16 | DType::Tf32) {
            return Err(format!(
                "dtype {}: the wgmma template handles f16, bf16 and tf32 inputs only (use the SIMT template for f32)",
                p.dtype
            ));
        }
        if !matches!(p.epilogue.out_dtype, DType::F32 | DType::F16 | DType::Bf16) {
            return Err(format!(
                "out_dtype {}: must be f32, f16 or bf16",
                p.epilogue.out_dtype
            ));
        }
        let st = staging(p);
        let esz = p.dtype.size_bytes() as u64;
        for (name, ld, staged) in [("lda", p.lda, st.a), ("ldb", p.ldb, st.b)] {
            if !staged {
                Self::check_tma_pitch(name, ld, esz)?;
            }
        }
        if p.batch > 65_535 {
            return Err(format!("batch={} exceeds gridDim.z (65535)", p.batch));
        }
        if p.batch > 1 {
            let rows_a = if p.layout_a == Layout::Row { p.m } else { p.k } as u64;
            let rows_b = if p.layout_b == Layout::Row { p.k } else { p.n } as u64;
            for (name, stride, span, staged) in [
                ("stride_a", p.stride_a, rows_a * p.lda as u64, st.a),
                ("stride_b", p.stride_b, rows_b * p.ldb as u64, st.b),
            ] {
                if !staged {
                    Self::check_tma_batch_stride(name, stride, span, esz)?;
                }
            }
        }
        if st.any() {
            if staging::checked_staged_ld(p.k).is_none() {
                return Err(format!(
                    "K={}: the staged tf32 copies' row pitch (K rounded up to 4 elements) exceeds 2^32 - 1",
                    p.k
                ));
            }
            let q = staging::kernel_problem(p);
            for (name, stride) in [("A", q.stride_a), ("B", q.stride_b)] {
                if stride.checked_mul(esz).is_none_or(|b| b >= 1 << 40) {
                    return Err(format!(
                        "staged tf32 {name}: its batch stride ({stride} elements of {esz} bytes) must be below 2^40 bytes (TMA)"
                    ));
                }
            }
            let (ta, tb) = staging::prepass_tiles(p);
            if ta + tb >= (i32::MAX / 2) as u64 {
                return Err(format!(
                    "{} staging pre-pass tiles per batch entry exceed the 32-bit tile index",
                    ta + tb
                ));
            }
        }
        Ok(())
    }
}

impl Template for WgmmaGemm {
    type Problem = GemmProblem;
    type Config = WgmmaConfig;

    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> u32 {
        VERSION
    }

    fn space(&self, problem: &GemmProblem, arch: Arch) -> Vec<WgmmaConfig> {
        let mut v = if self.experimental {
            self.experimental_space(problem, arch)
        } else {
            Vec::new()
        };
        if arch != Arch::Sm90a {
            return v;
        }
        // One stage is 128 bytes of K: 64 f16/bf16 or 32 tf32 elements (f32 problems are
        // rejected by check; give them the 16-bit depth).
        let bk = Self::block_k(problem.dtype).unwrap_or(BLOCK_K);
        // cuBLAS's tile at 4000 x 4000 (nvjet 160x192 coopB, H200 call M): 192 x 160, 525 tiles
        // = 3.98 waves of 132 SMs there. Three consumers of 64 x 160 each (m64n160 wgmmas, 512
        // threads), with or without the TMA-store epilogue (64-byte boxes), for either B; or,
        // for a K-major B only, two consumers splitting the columns (192 x 80 each: three m64
        // n80 wgmmas; an MN-major B cannot start a wgmma at column 80 of a 64-column box).
        let mut forms = vec![(3u32, 160u32, false, false), (3, 160, false, true)];
        // (These forms are not transposed: B as the problem, or its staged copy, gives it.)
        if staging::kernel_problem(problem).layout_b == Layout::Col {
            forms.push((2, 80, true, false));
        }
        for (consumers, wgmma_n, split_n, tma_store) in forms {
            for stages in [3u32, 4] {
                for raster_group in [1u32, 8] {
                    v.push(WgmmaConfig {
                        raster_group,
                        tma_store,
                        split_n,
                        ..WgmmaConfig::basic(192, 160, bk, consumers, wgmma_n, stages)
                    });
                }
            }
        }
        for bm in [64u32, 128, 256] {
            for bn in [64u32, 128, 192, 256] {
                for consumers in [1u32, 2] {
                    let mut ns = vec![bn];
                    if bn == 256 || bn == 128 {
                        ns.push(bn / 2);
                    }
                    for wgmma_n in ns {
                        for stages in SPACE_STAGES {
                            for cluster_m in [1u32, 2] {
                                for persistent in [false, true] {
                                    for raster_group in [1u32, 8] {
                                        for split_k in [1u32, 2, 4] {
                                            for (pingpong, tma_store, split_n) in [
                                                (false, false, false),
                                                (true, false, false),
                                                (false, true, false),
                                                (true, true, false),
                                                (false, false, true),
                                                (false, true, true),
                                            ] {
                                                // Split-K and ping-pong only in the persistent single-CTA
                                                // form (the code supports more; this bounds the space);
                                                // the TMA-store epilogue only where a persistent block
                                                // has a next tile to overlap it with.
                                                if (split_k > 1 && (cluster_m > 1 || !persistent))
                                                    || (pingpong && (consumers != 2 || !persistent))
                                                    || (tma_store && (split_k > 1 || !persistent))
                                                    || (split_n && consumers != 2)
                                                {
                                                    continue;
                                                }
                                                v.push(WgmmaConfig {
                                                    cluster_m,
                                                    persistent,
                                                    raster_group,
                                                    split_k,
                                                    pingpong,
                                                    tma_store,
                                                    split_n,
                                                    ..WgmmaConfig::basic(
                                                        bm, bn, bk, consumers, wgmma_n, stages,
                                                    )
                                                });
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        v
    }

    fn check(
        &self,
        problem: &GemmProblem,
        config: &WgmmaConfig,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        let fail = |reason: String| ConstraintViolation {
            template: NAME.to_string(),
            config: format!("{config:?}"),
            reason,
        };
        if arch != Arch::Sm90a {
            return Err(fail(format!(
                "arch {arch}: wgmma.mma_async and setmaxnreg need sm_90a (Hopper)"
            )));
        }
        Self::check_problem(problem).map_err(fail)?;
        Self::check_config(config, arch).map_err(fail)?;
        if config.swap_ab && (config.tma_store || config.cluster_k != 1 || config.pingpong) {
            return Err(fail(
                "swap_ab stores the transposed tile straight from the fragments: it needs no tma_store, cluster_k 1 and no pingpong".to_string(),
            ));
        }
        if config.swap_ab && problem.dtype == DType::Tf32 {
            Self::check_tf32_swap(problem).map_err(fail)?;
        }
        // Everything below is about the product the kernel computes (transposed with swap_ab).
        let user = problem;
        let view = Self::view(problem, config);
        let problem = &view;
        if let Some(bk) = Self::block_k(problem.dtype) {
            if config.bk != bk {
                return Err(fail(format!(
                    "bk={} must be {bk} for {} ({bk} x {}-byte elements = one {SWIZZLE_BYTES}-byte swizzle span per stage)",
                    config.bk,
                    problem.dtype,
                    problem.dtype.size_bytes()
                )));
            }
        }
        let blocks = config
            .units(problem.m, problem.n)
            .saturating_mul(config.cluster_size() as u64);
        if blocks > i32::MAX as u64 {
            return Err(fail(format!(
                "{blocks} work units exceed the 2^31-1 grid limit"
            )));
        }
        Self::check_config_for(problem, config).map_err(fail)?;
        if staging::a_from_registers(problem, config) && config.m_iters() > 1 {
            return Err(fail(format!(
                "a tf32 A read into registers (swap_ab over a row-major B) takes one m64 block per consumer: {} rows each need {} fragment registers per k-block beside the accumulators, and spill",
                config.rows_per_consumer(),
                16 * config.m_iters()
            )));
        }
        // ptxas (CUDA 13.0, sm_90a) spills 16 bytes at 64 x 192 with split-K 4 and none at
        // 64 x 160 or below, whatever the split.
        if staging::a_from_registers(problem, config)
            && config.split_k > 1
            && config.acc_regs() > 80
        {
            return Err(fail(format!(
                "a tf32 A read into registers with split_k={} takes at most 80 accumulators per thread (wgmma_n <= 160; got {}): the fragments, the accumulators and the fix-up spill",
                config.split_k,
                config.acc_regs()
            )));
        }
        if config.tma_store {
            Self::check_tma_store(problem).map_err(fail)?;
        }
        let kblocks = problem.k.div_ceil(config.bk);
        if config.split_k > kblocks {
            return Err(fail(format!(
                "split_k={} exceeds the {kblocks} k-blocks of K={}",
                config.split_k, problem.k
            )));
        }
        if config.cluster_k > kblocks {
            return Err(fail(format!("cluster_k={} exceeds the {kblocks} k-blocks of K={}: every CTA of the cluster needs one", config.cluster_k, problem.k)));
        }
        // The kernel indexes the partials (float4s) and counters with 32-bit unsigned math.
        // (`workspace_bytes` takes the user's extents.)
        if config.workspace_bytes(user.m, user.n, user.batch) / 16 >= i32::MAX as u64 {
            return Err(fail(
                "split-K workspace exceeds 2^31 float4s (32 GiB): too large to index".to_string(),
            ));
        }
        Ok(())
    }

    /// Shape-aware: the [`DEFAULT_LADDER`] rung the analytic cost model ([`cost::estimate_us`],
    /// H200 datasheet facts with this template's SM count) predicts fastest for the problem;
    /// rungs within 0.5% of the fastest tie, and a tie goes to the rung with more work units
    /// (DRAM-bound skinny shapes), then the larger tile. The ladder holds the configs that won
    /// guided tuning on the H200 (2026-12-04, bf16 NN, cuBLAS in the same process): 128 x 256
    /// at 4096^3 / 8192^3 / 4096^2 x 1000 (0.96x / 0.99x / 0.90x), 128 x 128 one consumer at
    /// 256 x 8192^2 (1.01x), 64 x 128 at 1024^3 (0.89x), 64 x 64 at 64 x 8192^2 (0.98x) and
    /// 512^3 (0.98x), and the model picks exactly those rungs at those shapes (a test pins it);
    /// the 192 x 160 rung (three consumers) won where it quantizes better: 4000^2 x 4096 (call
    /// AB, 1.01x in rtx-bench call AC); the 128 x 192 rung (two consumers) won guided tuning at
    /// 4096 x 768 x 3072 (call AF) and, as a default, the layer's N <= 2304 projections (call BK)
    /// and other shapes of at most three waves of it (call BL), the limit its rung states; the
    /// 64 x 192 rung (one consumer) won guided tuning at 192 x 8192^2 (call CC, H100) and, as a
    /// default, where one wave of it covers at most three tile rows and B streams (call CF).
    /// f16/bf16 store through the TMA-store epilogue where the rung is persistent and C allows
    /// it. tf32 (32-element stages, direct stores) picks between the two large tiles where 128 x
    /// 256 fills two waves, and from the ladder less 192 x 160 below that (call CK).
    ///
    /// The 64 x 192 and 64 x 128 rungs (row-major tile order) switch to groups of
    /// [`STREAM_RASTER_GROUP`] tile rows where B streams: see [`Self::b_streams`].
    ///
    /// tf32 NN with M <= 256 takes the transposed product with its A (the user's B) read into
    /// registers instead: [`Self::tf32_register_a_config`]; f16 / bf16 NN with M <= 256 take the
    /// split transposed product where the ladder leaves most SMs idle:
    /// [`Self::thin_grid_transposed_config`].
    fn default_config(&self, problem: &GemmProblem, _arch: Arch) -> WgmmaConfig {
        if let Some(c) = self.tf32_register_a_config(problem) {
            return c;
        }
        let ladder = self
            .model_pick(problem)
            .unwrap_or_else(|| self.rung_config(problem, &DEFAULT_LADDER[0]));
        self.thin_grid_transposed_config(problem, &ladder)
            .unwrap_or(ladder)
    }

    fn emit(
        &self,
        problem: &GemmProblem,
        config: &WgmmaConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(problem, config, arch)?;
        let entry = self.entry_name(problem, config);
        let code = codegen::kernel_source(&Self::view(problem, config), config, &entry);
        Ok(KernelSource {
            entry,
            code,
            template: NAME.to_string(),
            template_version: VERSION,
            options: vec![],
        })
    }

    /// Total for any config: a config `check` rejects gets a saturated grid and block.
    fn launch(&self, problem: &GemmProblem, config: &WgmmaConfig) -> LaunchDims {
        let cl = config.cluster_size();
        let view = Self::view(problem, config);
        let units = config.units(view.m, view.n).clamp(1, i32::MAX as u64) as u32;
        let clusters = if config.persistent {
            let per_batch = (self.sm_count / cl / problem.batch.max(1)).max(1);
            units.min(per_batch)
        } else {
            units
        };
        LaunchDims {
            grid: [clusters.saturating_mul(cl), 1, problem.batch.max(1)],
            block: [config.threads(), 1, 1],
            dynamic_smem: config.smem_bytes(),
        }
    }

    fn estimate_us(
        &self,
        problem: &GemmProblem,
        config: &WgmmaConfig,
        device: &crate::tuner::cost::DeviceFacts,
    ) -> Option<f64> {
        let device = crate::tuner::cost::DeviceFacts {
            sm_count: self.sm_count,
            ..device.clone()
        };
        cost::estimate_us(&Self::view(problem, config), config, &device)
    }

    /// Total for any config: computed in `u64` from the fields, with `cluster_m` / `cluster_n` /
    /// `split_k` of 0 counting as 1.
    fn complexity(&self, c: &WgmmaConfig) -> u64 {
        let f = u64::from;
        f(c.stages)
            + 2 * f(c.consumers)
            + 4 * f(c.cluster_m.saturating_sub(1))
            + 4 * f(c.cluster_k.saturating_sub(1))
            + 4 * f(c.cluster_n.saturating_sub(1))
            + f(u32::from(c.persistent))
            + f(u32::from(c.raster_group > 1))
            + 2 * f(c.split_k.saturating_sub(1).min(4))
            + 2 * f(u32::from(c.pingpong))
            + f(u32::from(c.tma_store))
            + 2 * f(u32::from(c.swap_ab))
            + f(u32::from(c.tight_b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::test_checks::assert_refused;
    use crate::templates::test_strategies::field;
    use proptest::prelude::*;

    #[test]
    fn default_config_is_valid_for_every_layout_and_dtype() {
        let t = WgmmaGemm::default();
        for dtype in [DType::F16, DType::Bf16, DType::Tf32] {
            for la in [Layout::Row, Layout::Col] {
                for lb in [Layout::Row, Layout::Col] {
                    let p = GemmProblem::new(4096, 4096, 4096, dtype, la, lb);
                    let c = t.default_config(&p, Arch::Sm90a);
                    t.check(&p, &c, Arch::Sm90a).unwrap();
                    assert_eq!(c.bk * dtype.size_bytes() as u32, 128);
                    assert!(c.smem_bytes() <= 227 * 1024);
                }
            }
        }
    }

    /// `swap_ab` runs the transposed product: its kernel's tile rows walk the user's N, its
    /// tensor maps read B as the first operand, it stores every element transposed, and only
    /// swap_ab kernels carry that store (the others' source is unchanged by it). Refused where
    /// it needs what it does not support.
    #[test]
    fn swap_ab_computes_the_transposed_product() {
        let mut t = WgmmaGemm::new(132);
        t.experimental = true;
        let p = GemmProblem::nn(160, 8192, 1024, DType::Bf16);
        let space = t.space(&p, Arch::Sm90a);
        let sw = space
            .iter()
            .find(|c| c.swap_ab && c.bm == 64 && c.bn == 160 && c.cluster_m == 2)
            .unwrap()
            .clone();
        t.check(&p, &sw, Arch::Sm90a).unwrap();
        // 8192 / 64 tile rows along N, one 160-column tile over M, in pairs.
        assert_eq!(t.launch(&p, &sw).grid[0], 128);
        let (a, b) = t.tensor_maps(&p, &sw);
        let (ua, ub) = t.tensor_maps(
            &p,
            &WgmmaConfig {
                swap_ab: false,
                ..sw.clone()
            },
        );
        assert_eq!(
            a.dims[..2],
            [8192, 1024],
            "the kernel's A is the user's row-major B"
        );
        assert_eq!(
            b.dims[..2],
            [1024, 160],
            "the kernel's B is the user's row-major A"
        );
        assert_ne!((a.dims, b.dims), (ua.dims, ub.dims));
        let code = t.emit(&p, &sw, Arch::Sm90a).unwrap().code;
        assert!(code.contains("epi_store_t(Cb, bias, Rb, (long long)col * ldc + row"));
        let plain = t
            .emit(&p, &t.default_config(&p, Arch::Sm90a), Arch::Sm90a)
            .unwrap()
            .code;
        assert!(!plain.contains("epi_store_t"));
        for bad in [
            WgmmaConfig {
                tma_store: true,
                ..sw.clone()
            },
            WgmmaConfig {
                cluster_k: 2,
                consumers: 2,
                wgmma_n: 80,
                split_n: true,
                cluster_m: 1,
                ..sw.clone()
            },
        ] {
            assert_refused(&t, &p, &bad, Arch::Sm90a, "swap_ab");
        }
        // Split-K sums the slices in the kernel's (transposed) tiles, then stores transposed.
        let sk = WgmmaConfig {
            split_k: 2,
            cluster_m: 1,
            ..sw.clone()
        };
        t.check(&p, &sk, Arch::Sm90a).unwrap();
        let code = t.emit(&p, &sk, Arch::Sm90a).unwrap().code;
        let (fix, store) = (
            code.find("Split-K fix-up").unwrap(),
            code.find("epi_store_t(Cb, bias, Rb, (long long)col * ldc + row")
                .unwrap(),
        );
        assert!(fix < store);
        // tf32: the user's row-major B is read into registers (no pre-pass); a column-major A
        // (the kernel's M/N-major B) is refused.
        let tf = GemmProblem::nn(160, 8192, 1024, DType::Tf32);
        let c = WgmmaConfig {
            bk: BLOCK_K_TF32,
            ..sw
        };
        t.check(&tf, &c, Arch::Sm90a).unwrap();
        assert_eq!(WgmmaGemm::staging_bytes(&tf, &c), 0);
        let code = t.emit(&tf, &c, Arch::Sm90a).unwrap().code;
        assert!(code.contains("wgmma_m64n160k8_rs(") && !code.contains("int prepass"));
        let tn = GemmProblem::new(160, 8192, 1024, DType::Tf32, Layout::Col, Layout::Row);
        assert_refused(&t, &tn, &c, Arch::Sm90a, "row-major A");
    }

    /// A swap_ab kernel is the kernel of the transposed problem (same config without swap_ab)
    /// up to its epilogue: the same loads, ring and wgmmas; only the stores differ.
    #[test]
    fn swap_ab_kernels_differ_from_the_transposed_problems_only_in_the_stores() {
        let mut t = WgmmaGemm::new(132);
        t.experimental = true;
        let mut n = 0;
        for p in [
            GemmProblem::nn(160, 8192, 1024, DType::Bf16),
            GemmProblem::new(100, 520, 264, DType::F16, Layout::Row, Layout::Col),
            GemmProblem::new(64, 256, 128, DType::Bf16, Layout::Col, Layout::Col).batched(3),
        ] {
            for sw in t
                .space(&p, Arch::Sm90a)
                .into_iter()
                .filter(|c| c.swap_ab && c.stages == 4 && t.check(&p, c, Arch::Sm90a).is_ok())
            {
                let plain = WgmmaConfig {
                    swap_ab: false,
                    ..sw.clone()
                };
                // As a problem of its own, with a C of its shape (ldc is a kernel argument).
                let q = GemmProblem {
                    ldc: p.m,
                    stride_c: u64::from(p.m) * u64::from(p.n),
                    ..p.transposed()
                };
                let a = t.emit(&p, &sw, Arch::Sm90a).unwrap();
                let b = t.emit(&q, &plain, Arch::Sm90a).unwrap();
                // The entry name and the header comment name the config; the rest must match.
                let mainloop = |src: &KernelSource, c: &WgmmaConfig| {
                    let code = src
                        .code
                        .replace(&src.entry, "ENTRY")
                        .replace(&c.tag(), "TAG");
                    let end = code.find("Epilogue straight from the fragments").unwrap();
                    code[..end].replace(codegen::T_STORE_FN, "")
                };
                assert!(a.code.contains(codegen::T_STORE_FN), "{}", a.entry);
                let (ma, mb) = (mainloop(&a, &sw), mainloop(&b, &plain));
                assert_eq!(ma.lines().count(), mb.lines().count(), "{}", a.entry);
                let first = ma.lines().zip(mb.lines()).find(|(x, y)| x != y);
                assert!(
                    first.is_none(),
                    "{}: differs before the epilogue at {first:?}",
                    a.entry
                );
                n += 1;
            }
        }
        assert!(n >= 20, "only {n} swap_ab configs compared");
    }

    /// The suite times kernels after flushing the L2 with a memset; an `evict_last` (or any
    /// `createpolicy`) hint on the loads lets inputs survive that flush (call BF, session 14:
    /// 4-8% "faster" for that reason alone), so no config of the space may emit one.
    #[test]
    fn no_config_emits_an_l2_eviction_hint() {
        let t = WgmmaGemm::default();
        for dtype in [DType::F16, DType::Bf16, DType::Tf32] {
            let p = GemmProblem::nn(1024, 1024, 1024, dtype);
            // The space holds configs `check` rejects; every valid one is emitted.
            let valid: Vec<_> = t
                .space(&p, Arch::Sm90a)
                .into_iter()
                .filter_map(|c| t.emit(&p, &c, Arch::Sm90a).ok().map(|k| (c, k.code)))
                .collect();
            assert!(valid.len() > 10, "{dtype}: {} valid configs", valid.len());
            for (c, code) in valid.iter().step_by(5) {
                assert!(
                    !code.contains("createpolicy") && !code.contains("evict_"),
                    "{c:?}"
                );
            }
        }
    }

    #[test]
    fn the_producer_skips_a_boxes_past_m() {
        // A 192-row tile of a row-major A loads three 64-row boxes, each behind its own test
        // against M, and the stage's transaction bytes count only those loaded.
        let t = WgmmaGemm::default();
        let p = GemmProblem::nn(160, 1024, 1024, DType::Bf16);
        let c = WgmmaConfig {
            bm: 192,
            bn: 160,
            consumers: 3,
            wgmma_n: 160,
            ..t.rung_config(&p, &DEFAULT_LADDER[1])
        };
        let code = t.emit(&p, &c, Arch::Sm90a).unwrap().code;
        for j in 0..3u32 {
            assert!(
                code.contains(&format!("const bool la{j} = m0 + {} < M;", 64 * j)),
                "box {j}"
            );
            assert!(
                code.contains(&format!(
                    "if (la{j}) tma_load_3d(sa + {}u, &tmA, full, k0 + 0, m0 + {}, bA);",
                    64 * 128 * j,
                    64 * j
                )),
                "box {j}"
            );
        }
        assert!(code.contains("(la2 ? 8192u : 0u)"));
        assert_eq!(tma_desc_a(&p, &c).box_dims, [64, 64, 1]);
    }

    #[test]
    fn tf32_rules() {
        let t = WgmmaGemm::default();
        let nt = GemmProblem::new(4096, 4096, 4096, DType::Tf32, Layout::Row, Layout::Col);
        let c = t.default_config(&nt, Arch::Sm90a);
        assert_eq!(
            (c.bm, c.bn, c.bk, c.consumers, c.stages),
            (128, 256, 32, 2, 4)
        );
        t.check(&nt, &c, Arch::Sm90a).unwrap();
        // bk is the dtype's: 64 tf32 elements would be 256 bytes (two swizzle spans).
        let wide = WgmmaConfig {
            bk: 64,
            ..c.clone()
        };
        assert_refused(&t, &nt, &wide, Arch::Sm90a, "bk=64 must be 32 for tf32");
        let bf = GemmProblem::new(4096, 4096, 4096, DType::Bf16, Layout::Row, Layout::Col);
        assert_refused(&t, &bf, &c, Arch::Sm90a, "bk=32 must be 64 for bf16");
        assert_refused(
            &t,
            &nt,
            &WgmmaConfig {
                bk: 16,
                ..c.clone()
            },
            Arch::Sm90a,
            "bk=16",
        );
        // K-major tf32 operands are read by TMA in place: 16-byte pitches (4 elements).
        let odd = GemmProblem::new(256, 256, 1002, DType::Tf32, Layout::Row, Layout::Col);
        assert_refused(&t, &odd, &c, Arch::Sm90a, "lda=1002");
        // A staged (row-major) B may have any pitch; A is still read in place.
        let nn = GemmProblem {
            lda: 1004,
            ldb: 1001,
            ..GemmProblem::nn(256, 1001, 1002, DType::Tf32)
        };
        t.check(&nn, &c, Arch::Sm90a).unwrap();
        let tt = GemmProblem::new(999, 1001, 1003, DType::Tf32, Layout::Col, Layout::Row);
        t.check(&tt, &c, Arch::Sm90a).unwrap();
        // split_k is bounded by K / 32 k-blocks.
        let short = GemmProblem::new(64, 4096, 96, DType::Tf32, Layout::Row, Layout::Col);
        let sk = WgmmaConfig {
            bm: 64,
            bn: 128,
            consumers: 1,
            wgmma_n: 128,
            split_k: 3,
            ..c.clone()
        };
        t.check(&short, &sk, Arch::Sm90a).unwrap();
        let sk4 = WgmmaConfig { split_k: 4, ..sk };
        assert_refused(&t, &short, &sk4, Arch::Sm90a, "3 k-blocks");
        // Split-K with 128 accumulators at 384 threads spills (seen for bf16 NN 256x64 ping-pong
        // and beside the tf32 pre-pass), so it is refused for every layout.
        let pp = WgmmaConfig {
            bm: 256,
            bn: 64,
            consumers: 2,
            wgmma_n: 64,
            stages: 4,
            split_k: 2,
            pingpong: true,
            ..c.clone()
        };
        let nn4 = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
        for p in [&nt, &nn4] {
            assert_refused(&t, p, &pp, Arch::Sm90a, "the fix-up spills");
        }
        t.check(
            &nt,
            &WgmmaConfig {
                bn: 32 * 2,
                bm: 128,
                ..pp.clone()
            },
            Arch::Sm90a,
        )
        .unwrap();
        // Every space config carries the tf32 depth.
        let space = t.valid_space(&nt, Arch::Sm90a);
        assert!(space.len() > 100 && space.iter().all(|c| c.bk == 32));
        assert!(space
            .iter()
            .any(|c| c.bm == 128 && c.bn == 256 && c.stages == 4));
        assert!(
            !space
                .iter()
                .any(|c| c.bm == 128 && c.bn == 256 && c.stages == 5),
            "5 x 48 KiB exceeds 227 KiB"
        );
    }

    #[test]
    fn default_config_follows_the_measured_ladder() {
        let t = WgmmaGemm::new(132);
        let pick = |m, n, k| {
            let p = GemmProblem::nn(m, n, k, DType::Bf16);
            let c = t.default_config(&p, Arch::Sm90a);
            t.check(&p, &c, Arch::Sm90a)
                .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
            (c.bm, c.bn, c.consumers, c.stages, c.persistent, c.tma_store)
        };
        assert_eq!(pick(4096, 4096, 4096), (128, 256, 2, 4, true, true));
        assert_eq!(pick(4096, 4096, 1000), (128, 256, 2, 4, true, true));
        assert_eq!(pick(256, 8192, 8192), (128, 128, 1, 6, true, true));
        assert_eq!(pick(1024, 1024, 1024), (64, 128, 1, 8, true, true));
        assert_eq!(pick(64, 8192, 8192), (64, 64, 1, 10, true, true));
        assert_eq!(pick(512, 512, 512), (64, 64, 1, 10, true, true));
        assert_eq!(pick(8, 16, 8), (64, 64, 1, 10, true, true));
        assert_eq!(pick(8192, 8192, 8192), (128, 256, 2, 4, true, true));
        // cuBLAS's tile where it quantizes better: 525 tiles of 192 x 160 (3.98 waves) against
        // 512 of 128 x 256 (3.88 waves with 7.5% of the work padding). H200, call AB: 170.0 us
        // against 176.9 (bf16 NN), cuBLAS 172.9.
        assert_eq!(pick(4000, 4000, 4096), (192, 160, 3, 4, true, true));
        assert_eq!(pick(4096, 4096, 4096 + 64), (128, 256, 2, 4, true, true));
        // Where B streams from DRAM the 64 x 128 rung groups its tile rows (call CB, H100: 128 x
        // 8192^2 69.7 -> 58.1 us, cuBLAS 58.2); with one row of tiles, or B in L2, it keeps
        // row-major order, and so does the 64 x 64 rung (not measured in groups).
        let raster = |m, n, k| {
            t.default_config(&GemmProblem::nn(m, n, k, DType::Bf16), Arch::Sm90a)
                .raster_group
        };
        assert_eq!(pick(128, 8192, 8192), (64, 128, 1, 8, true, true));
        assert_eq!(raster(128, 8192, 8192), STREAM_RASTER_GROUP);
        assert_eq!(raster(1024, 1024, 1024), 1);
        assert_eq!(raster(512, 512, 512), 1);
        assert_eq!(raster(64, 8192, 8192), 1);
        assert_eq!(raster(4000, 4000, 4096), 1);
        // (The ladder's pick at a thin grid; the default there is the split transposed product:
        // `thin_grids_of_16_bit_inputs_take_the_split_transposed_product`.)
        let thin = t
            .model_pick(&GemmProblem::nn(128, 2048, 8192, DType::Bf16))
            .unwrap();
        assert_eq!((thin.bm, thin.bn, thin.stages), (64, 64, 10));
        // The 64 x 192 rung: one wave in at most three tile rows where B streams (call CF, H100:
        // 160 x 8192^2 0.96x -> 0.99x cuBLAS, 192 x 8192^2 1.02 -> 1.03x), in groups of 8; not
        // at six rows (384 x 4096^2, flat), eight or twelve (512 x 3072 x 1000 and 768 x 2048 x
        // 4096, where it lost 21% and 16%), or with B in L2 (1024 x 1536 x 1024).
        for (m, n, k) in [
            (160, 8192, 8192),
            (192, 8192, 8192),
            (192, 6144, 4096),
            (96, 11008, 4096),
        ] {
            assert_eq!(pick(m, n, k), (64, 192, 1, 6, true, true), "{m}x{n}x{k}");
            assert_eq!(raster(m, n, k), STREAM_RASTER_GROUP, "{m}x{n}x{k}");
        }
        for (m, n, k) in [
            (384, 4096, 4096),
            (512, 3072, 1000),
            (768, 2048, 4096),
            (1024, 1536, 1024),
        ] {
            assert_eq!(pick(m, n, k), (128, 128, 1, 6, true, true), "{m}x{n}x{k}");
        }
        assert_eq!(raster(128, 2048, 8192), 1);
        // The encoder layer's projections take the 128 x 192 rung (128 tiles at N = 768, one
        // 97%-full wave). H100, call BK: FFN-down 4096 x 768 x 3072 bf16 35.9 -> 31.6 us
        // (cuBLAS 30.6), QKV 4096 x 2304 x 768 29.2 -> 27.4 us, out-proj 4096 x 768 x 768
        // 14.5 -> 13.7 us; FFN-up 4096 x 3072 x 768 keeps 128 x 256 (33.4 us, 1.00x).
        assert_eq!(pick(4096, 768, 3072), (128, 192, 2, 4, true, true));
        assert_eq!(pick(4096, 2304, 768), (128, 192, 2, 4, true, true));
        assert_eq!(pick(4096, 768, 768), (128, 192, 2, 4, true, true));
        assert_eq!(pick(4096, 3072, 768), (128, 256, 2, 4, true, true));
        // Call BL: where the rung fills at most three waves it won; beyond, it lost (2304 x 8192
        // x 4096: 241 us against 226 for 192 x 160) or tied, so those shapes keep 192 x 160.
        for (m, n, k) in [
            (1024, 3072, 4096),
            (3072, 3072, 4096),
            (4096, 1536, 4096),
            (11008, 512, 4096),
        ] {
            assert_eq!(pick(m, n, k), (128, 192, 2, 4, true, true), "{m}x{n}x{k}");
        }
        assert_eq!(pick(2304, 8192, 4096), (192, 160, 3, 4, true, true));
        assert_eq!(pick(6144, 3072, 4096), (192, 160, 3, 4, true, true));
        // A batch of small products fills the GPU like one large one.
        let b = GemmProblem::nn(512, 512, 512, DType::F16).batched(8);
        assert_eq!(t.default_config(&b, Arch::Sm90a).bm, 128);
        // Every rung is a valid config of every 16-bit layout, and tf32 keeps the 128 x 256 tile.
        for r in DEFAULT_LADDER {
            assert!(r.bm % (64 * r.consumers) == 0 && r.bn % r.wgmma_n == 0);
            for dtype in [DType::F16, DType::Bf16] {
                for la in [Layout::Row, Layout::Col] {
                    for lb in [Layout::Row, Layout::Col] {
                        let p = GemmProblem::new(1000, 1000, 1000, dtype, la, lb);
                        t.check(&p, &t.rung_config(&p, &r), Arch::Sm90a)
                            .unwrap_or_else(|e| panic!("{r:?} {dtype} {la:?}{lb:?}: {e}"));
                    }
                }
            }
        }
        let nt = GemmProblem::new(64, 64, 64, DType::Tf32, Layout::Row, Layout::Col);
        let tf = t.default_config(&nt, Arch::Sm90a);
        assert_eq!((tf.bm, tf.bn, tf.stages, tf.tma_store), (64, 64, 10, false));
        // tf32 chooses between the two large tiles by the same model: 192 x 160 at 4000^2 (call
        // V: 368.7 vs 396.1 us), 128 x 256 at 4096^3 (call X: 386.5 vs 438.5) and 8192^3.
        let tf_pick = |m, n, k| {
            let c = t.default_config(&GemmProblem::nn(m, n, k, DType::Tf32), Arch::Sm90a);
            (c.bm, c.bn, c.bk, c.tma_store)
        };
        assert_eq!(tf_pick(4000, 4000, 4096), (192, 160, 32, false));
        assert_eq!(tf_pick(4096, 4096, 4096), (128, 256, 32, false));
        assert_eq!(tf_pick(8192, 8192, 8192), (128, 256, 32, false));
        // Fewer than two waves of 128 x 256: the ladder less 192 x 160 (call AD: slower at
        // 512^3 and 256 x 8192^2 where the model said faster), so the small rungs the tuner
        // found at 512^3 and 1024^3 (call CJ), and never 192 x 160; each passes `check` with
        // the staged (row-major) B. (At M <= 256 a row-major A, NN, takes the register-A
        // transposed product instead: the column-major A keeps the ladder there.)
        for (m, n, k, tile) in [
            (512, 512, 512, (64, 64)),
            (1024, 1024, 1024, (64, 128)),
            (2048, 2048, 2048, (128, 256)),
            (256, 8192, 8192, (128, 128)),
            (192, 8192, 8192, (64, 192)),
            (128, 8192, 8192, (64, 128)),
            (64, 8192, 8192, (64, 64)),
        ] {
            let p = GemmProblem::new(m, n, k, DType::Tf32, Layout::Col, Layout::Row);
            let c = t.default_config(&p, Arch::Sm90a);
            t.check(&p, &c, Arch::Sm90a)
                .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
            assert_eq!(
                (c.bm, c.bn, c.bk, c.tma_store),
                (tile.0, tile.1, 32, false),
                "{m}x{n}x{k}"
            );
        }
        for m in [16, 64, 100, 128, 160, 200, 256, 384, 512, 768, 1024, 1536] {
            for n in [64, 128, 1000, 4096, 8192] {
                let c = t.default_config(&GemmProblem::nn(m, n, 4096, DType::Tf32), Arch::Sm90a);
                if (c.bm, c.bn) == TF32_SMALL_SKIPS {
                    let units = c.units(m, n);
                    assert!(units >= 2 * 132, "{m}x{n}: 192 x 160 below two waves");
                }
            }
        }
    }

    /// tf32 NN at M <= 256: the register-A transposed product's picks at the shapes measured
    /// (H100: calls DG and DI unsplit, call DJ with split-K), as (bm, bn, consumers, split_k).
    #[test]
    fn tf32_register_a_default_picks_the_measured_tiles() {
        let t = WgmmaGemm::new(132);
        for (m, n, k, want) in [
            // Full grids: one wave of unsplit tiles.
            (64, 8192, 8192, (64, 64, 1, 1)),
            (128, 8192, 8192, (64, 128, 1, 1)),
            (160, 8192, 8192, (64, 160, 1, 1)),
            (192, 8192, 8192, (64, 192, 1, 1)),
            (256, 8192, 8192, (128, 128, 2, 1)),
            (96, 4096, 4096, (64, 64, 1, 1)),
            (256, 4096, 4096, (64, 128, 1, 1)),
            (96, 11008, 4096, (128, 128, 2, 1)),
            // Thin grids: split K (call DJ, rtx-tune slices against the unsplit default).
            (128, 2048, 8192, (64, 128, 1, 4)),
            (240, 1536, 8192, (128, 128, 2, 4)),
            (128, 1024, 4096, (64, 64, 1, 4)),
            (64, 1024, 8192, (64, 64, 1, 4)),
            (256, 1024, 8192, (64, 128, 1, 4)),
            (160, 2048, 4096, (64, 160, 1, 4)),
        ] {
            let p = GemmProblem::nn(m, n, k, DType::Tf32);
            let c = t.tf32_register_a_config(&p).unwrap();
            assert!(c.swap_ab, "{m}x{n}x{k}");
            assert_eq!((c.bm, c.bn, c.consumers, c.split_k), want, "{m}x{n}x{k}");
            assert!(c.units(n, m) <= 132, "{m}x{n}x{k}");
        }
        // Short K keeps whole slices of at least 8 k-blocks: K = 256 is not split.
        let c = t
            .tf32_register_a_config(&GemmProblem::nn(128, 1024, 256, DType::Tf32))
            .unwrap();
        assert_eq!(c.split_k, 1);
        // The rule also splits here (64 x 160 split 2 instead of 64 x 80; 64 x 64 split 4).
        for (m, n, k, want) in [
            (144, 3072, 3072, (64, 160, 1, 2)),
            (128, 1024, 1024, (64, 64, 1, 4)),
        ] {
            let c = t
                .tf32_register_a_config(&GemmProblem::nn(m, n, k, DType::Tf32))
                .unwrap();
            assert_eq!((c.bm, c.bn, c.consumers, c.split_k), want, "{m}x{n}x{k}");
        }
    }

    /// f16 / bf16 NN at M <= 256: the split transposed product only where the ladder leaves
    /// most SMs idle and the split runs at least twice as many units (calls DL / DM, H100).
    #[test]
    fn thin_grids_of_16_bit_inputs_take_the_split_transposed_product() {
        let t = WgmmaGemm::new(132);
        for dtype in [DType::Bf16, DType::F16] {
            for (m, n, k, want) in [
                (128, 2048, 8192, Some((64, 128, 1, 4))),
                (256, 1024, 8192, Some((64, 128, 1, 4))),
                (128, 1024, 4096, Some((64, 64, 1, 4))),
                (64, 1024, 8192, Some((64, 64, 1, 4))),
                // Fewer than twice the units of the ladder's 64 x 64 (96): the ladder stays
                // (call DM: the split lost 5-7% at 160 x 2048 x 4096).
                (160, 2048, 4096, None),
                (240, 1536, 8192, None),
                // Full grids and issue 4's shapes keep their (unsplit) defaults.
                (64, 8192, 8192, None),
                (128, 8192, 8192, None),
                (160, 8192, 8192, None),
                (256, 8192, 8192, None),
                (512, 512, 512, None),
                (96, 11008, 4096, None),
            ] {
                let p = GemmProblem::nn(m, n, k, dtype);
                let c = t.default_config(&p, Arch::Sm90a);
                t.check(&p, &c, Arch::Sm90a).unwrap();
                let got =
                    (c.swap_ab && c.split_k > 1).then_some((c.bm, c.bn, c.consumers, c.split_k));
                assert_eq!(got, want, "{dtype} {m}x{n}x{k}");
            }
        }
        // Other layouts keep the ladder.
        let nt = GemmProblem::new(128, 2048, 8192, DType::Bf16, Layout::Row, Layout::Col);
        assert_eq!(t.default_config(&nt, Arch::Sm90a).split_k, 1);
    }

    #[test]
    fn tma_store_rules_are_checked_before_compiling() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::nn(512, 520, 512, DType::Bf16);
        let c = WgmmaConfig {
            tma_store: true,
            ..t.default_config(&p, Arch::Sm90a)
        };
        t.check(&p, &c, Arch::Sm90a).unwrap();
        let sk = WgmmaConfig {
            split_k: 2,
            cluster_m: 1,
            ..c.clone()
        };
        assert_refused(&t, &p, &sk, Arch::Sm90a, "split_k=2");
        let mut odd = p;
        odd.ldc = 524; // 1048 bytes
        assert_refused(&t, &odd, &c, Arch::Sm90a, "ldc=524");
        odd.ldc = 528;
        t.check(&odd, &c, Arch::Sm90a).unwrap();
        let mut b = GemmProblem::nn(64, 520, 64, DType::Bf16).batched(2);
        b.stride_c = 64 * 520 + 4; // 8-byte aligned only
        assert_refused(&t, &b, &c, Arch::Sm90a, "stride_c");
        let space = t.valid_space(&p, Arch::Sm90a);
        assert!(space.iter().any(|c| c.tma_store && c.pingpong));
        assert!(space
            .iter()
            .filter(|c| c.tma_store)
            .all(|c| c.persistent && c.split_k == 1));
    }

    #[test]
    fn sixteen_bit_tma_store_kernels_defer_their_stores_behind_the_next_tiles_wgmmas() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::nn(4096, 4096, 1000, DType::Bf16);
        let c = t.default_config(&p, Arch::Sm90a);
        assert!(c.tma_store && !c.pingpong);
        assert!(codegen::defers_epilogue(&p, &c));
        let code = t.emit(&p, &c, Arch::Sm90a).unwrap().code;
        // The first k-block is peeled (scale-d 0), the loop starts at the second one, and the
        // packed outputs are stored twice: inside the peeled k-block and after the unit loop.
        assert_eq!(
            code.matches("const int sc = 0;").count(),
            1,
            "one peeled first k-block"
        );
        assert!(code.contains("for (int kb = kb0 + 1; kb < kb1; ++kb)"));
        assert_eq!(
            code.matches("if (it > 0)").count(),
            2,
            "stores in the peeled k-block and after the loop"
        );
        assert_eq!(
            code.matches("= pack_out2(v);").count() as u32,
            c.acc_regs() / 2,
            "every accumulator pair packed once"
        );
        assert_eq!(c.acc_regs(), 128);
        assert!(
            code.contains("unsigned pk_0_0[64];"),
            "half the accumulator registers"
        );
        // The others keep the epilogue in place: f32 outputs (packing would not save a register),
        // ping-pong (its other consumer already hides the epilogue) and register stores.
        let mut f32_out = p;
        f32_out.epilogue.out_dtype = DType::F32;
        let pp = WgmmaConfig {
            bm: 128,
            bn: 128,
            wgmma_n: 128,
            pingpong: true,
            ..c.clone()
        };
        let direct = WgmmaConfig {
            tma_store: false,
            ..c.clone()
        };
        for (q, k) in [(&f32_out, &c), (&p, &pp), (&p, &direct)] {
            t.check(q, k, Arch::Sm90a).unwrap();
            assert!(!codegen::defers_epilogue(q, k));
            let code = t.emit(q, k, Arch::Sm90a).unwrap().code;
            assert!(
                !code.contains("pk_0_0") && code.contains("const int sc = kb > kb0 ? 1 : 0;"),
                "{}",
                k.tag()
            );
        }
    }

    #[test]
    fn tf32_prepass_launch_covers_the_staged_tiles() {
        let t = WgmmaGemm::new(132);
        let nn = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
        let c = t.default_config(&nn, Arch::Sm90a);
        let d = t.prepass_launch(&nn, &c).unwrap();
        assert_eq!(d.grid, [132, 1, 1]);
        assert_eq!(d.block, [384, 1, 1]);
        assert_eq!(d.dynamic_smem, 12 * 64 * 33 * 4);
        let small = GemmProblem::nn(64, 64, 64, DType::Tf32).batched(3);
        let cl = WgmmaConfig {
            cluster_m: 2,
            ..c.clone()
        };
        let d = t.prepass_launch(&small, &cl).unwrap();
        assert_eq!(
            d.grid,
            [2, 1, 3],
            "one block's worth of tiles, rounded to a cluster"
        );
        let nt = GemmProblem::new(4096, 4096, 4096, DType::Tf32, Layout::Row, Layout::Col);
        assert!(t.prepass_launch(&nt, &c).is_none());
        assert_eq!(WgmmaGemm::staging_bytes(&nt, &c), 0);
        let src = t.emit(&nn, &c, Arch::Sm90a).unwrap();
        assert!(
            src.code.contains("int prepass)")
                && src.code.contains("stage_operands(A, B, stage_a, stage_b")
        );
        assert!(src.code.contains("m64n256k8.f32.tf32.tf32") && !src.code.contains("k16"));
        let nt_src = t.emit(&nt, &c, Arch::Sm90a).unwrap();
        assert!(
            !nt_src.code.contains("prepass"),
            "NT reads both operands in place"
        );
    }

    #[test]
    fn rejections_name_the_reason() {
        let t = WgmmaGemm::default();
        let p = GemmProblem::nn(256, 256, 256, DType::Bf16);
        let c = t.rung_config(&p, &DEFAULT_LADDER[0]);
        assert_refused(&t, &p, &c, Arch::Sm120, "sm_90a");
        assert_refused(&t, &p, &c, Arch::Sm80, "sm_90a");
        let f32p = GemmProblem::nn(256, 256, 256, DType::F32);
        assert_refused(&t, &f32p, &c, Arch::Sm90a, "dtype f32");
        let odd = GemmProblem::new(256, 256, 1001, DType::F16, Layout::Row, Layout::Col);
        assert_refused(&t, &odd, &c, Arch::Sm90a, "lda=1001");
        let big = WgmmaConfig {
            stages: 5,
            ..c.clone()
        };
        assert_refused(&t, &p, &big, Arch::Sm90a, "shared memory");
        let fat = WgmmaConfig { bm: 256, ..c };
        assert_refused(&t, &p, &fat, Arch::Sm90a, "accumulators");
    }

    /// Batch strides whose byte size overflows used to panic (debug) or wrap (release) in
    /// `check_problem` / `check_tma_store`; now they are refused with a reason.
    #[test]
    fn overflowing_batch_strides_are_refused_not_wrapped() {
        let t = WgmmaGemm::default();
        let mut p = GemmProblem::nn(128, 128, 128, DType::Bf16).batched(2);
        p.stride_a = 1 << 63;
        let c = t.default_config(&p, Arch::Sm90a);
        assert_refused(&t, &p, &c, Arch::Sm90a, "stride_a");
        // check_tma_store is public and takes unvalidated problems: 2^62 f32 elements of C.
        let mut q = GemmProblem::nn(128, 128, 128, DType::Bf16).batched(2);
        q.epilogue.out_dtype = DType::F32;
        q.stride_c = 1 << 62;
        let e = WgmmaGemm::check_tma_store(&q).unwrap_err();
        assert!(e.contains("stride_c") && e.contains("over 2^64"), "{e}");
        // Overlapping C batch entries (all templates refuse them through `validate`).
        let mut o = GemmProblem::nn(128, 128, 128, DType::Bf16).batched(4);
        o.stride_c = 64;
        let e = t.check(&o, &c, Arch::Sm90a).unwrap_err().reason;
        assert!(e.contains("stride_c") && e.contains("overlap"), "{e}");
    }

    #[test]
    fn space_has_valid_configs_of_every_shape_family() {
        let t = WgmmaGemm::default();
        let p = GemmProblem::new(4000, 4000, 4096, DType::Bf16, Layout::Row, Layout::Col);
        let valid = t.valid_space(&p, Arch::Sm90a);
        for (bm, bn) in [(128, 256), (128, 128), (64, 256), (64, 64), (256, 128)] {
            assert!(
                valid.iter().any(|c| c.bm == bm && c.bn == bn),
                "{bm}x{bn} missing"
            );
        }
        assert!(valid.iter().any(|c| c.cluster_m == 2));
        assert!(valid
            .iter()
            .any(|c| c.pingpong && c.bm == 64 && c.bn == 256));
        assert!(valid
            .iter()
            .any(|c| c.pingpong && c.bm == 128 && c.bn == 128));
        assert!(valid.iter().any(|c| c.split_k == 4 && c.bm == 64));
        assert!(valid
            .iter()
            .all(|c| !c.pingpong || (c.consumers == 2 && c.persistent)));
        assert!(t.space(&p, Arch::Sm120).is_empty());
    }

    #[test]
    fn launch_dims_cover_every_tile() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::nn(4000, 4000, 4096, DType::Bf16).batched(2);
        let c = WgmmaConfig {
            persistent: false,
            ..t.rung_config(&p, &DEFAULT_LADDER[0])
        };
        let d = t.launch(&p, &c);
        assert_eq!(d.grid, [32 * 16, 1, 2]);
        assert_eq!(d.block, [384, 1, 1]);
        let pc = WgmmaConfig {
            persistent: true,
            cluster_m: 2,
            ..c
        };
        let d = t.launch(&p, &pc);
        assert_eq!(d.grid, [66, 1, 2]);
        assert_eq!(d.grid[0] % 2, 0, "grid is a whole number of clusters");
    }

    #[test]
    fn split_k_and_pingpong_rules() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::new(64, 8192, 8192, DType::Bf16, Layout::Row, Layout::Col);
        let base = t.rung_config(&p, &DEFAULT_LADDER[0]);
        let sk = WgmmaConfig {
            bm: 64,
            bn: 128,
            consumers: 1,
            wgmma_n: 128,
            stages: 6,
            split_k: 2,
            tma_store: false,
            ..base.clone()
        };
        t.check(&p, &sk, Arch::Sm90a).unwrap();
        assert_eq!(t.launch(&p, &sk).grid, [128, 1, 1], "64 tiles x 2 slices");
        let deep = WgmmaConfig {
            split_k: 17,
            ..sk.clone()
        };
        assert_refused(&t, &p, &deep, Arch::Sm90a, "split_k=17");
        let short = GemmProblem::new(64, 8192, 128, DType::Bf16, Layout::Row, Layout::Col);
        let four = WgmmaConfig {
            split_k: 4,
            ..sk.clone()
        };
        assert_refused(&t, &short, &four, Arch::Sm90a, "k-blocks");
        let pp = WgmmaConfig {
            bm: 64,
            bn: 256,
            consumers: 2,
            wgmma_n: 256,
            stages: 4,
            pingpong: true,
            ..base.clone()
        };
        t.check(&p, &pp, Arch::Sm90a).unwrap();
        let pp1 = WgmmaConfig {
            consumers: 1,
            ..pp.clone()
        };
        assert_refused(&t, &p, &pp1, Arch::Sm90a, "pingpong");
        let ppn = WgmmaConfig {
            persistent: false,
            ..pp.clone()
        };
        assert_refused(&t, &p, &ppn, Arch::Sm90a, "persistent");
        let ppfat = WgmmaConfig { bm: 128, ..pp };
        assert_refused(&t, &p, &ppfat, Arch::Sm90a, "accumulators");
    }

    #[test]
    fn cluster_split_k_rules_launch_and_space() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        let base = t.rung_config(&p, &DEFAULT_LADDER[0]);
        let ck = WgmmaConfig {
            bm: 128,
            bn: 128,
            wgmma_n: 128,
            stages: 4,
            persistent: false,
            tma_store: false,
            cluster_k: 2,
            ..base.clone()
        };
        t.check(&p, &ck, Arch::Sm90a).unwrap();
        // 64 tiles, two CTAs each; persistent: at most 66 pairs on 132 SMs.
        assert_eq!(t.launch(&p, &ck).grid, [128, 1, 1]);
        let wide = GemmProblem::nn(4096, 4096, 1024, DType::Bf16);
        assert_eq!(
            t.launch(
                &wide,
                &WgmmaConfig {
                    persistent: true,
                    ..ck.clone()
                }
            )
            .grid,
            [132, 1, 1]
        );
        for (bad, word) in [
            (
                WgmmaConfig {
                    cluster_k: 3,
                    ..ck.clone()
                },
                "cluster_k=3",
            ),
            (
                WgmmaConfig {
                    consumers: 1,
                    ..ck.clone()
                },
                "consumers=2",
            ),
            (
                WgmmaConfig {
                    cluster_m: 2,
                    ..ck.clone()
                },
                "cluster_m=1",
            ),
            (
                WgmmaConfig {
                    split_k: 2,
                    ..ck.clone()
                },
                "split_k=1",
            ),
            (
                WgmmaConfig {
                    pingpong: true,
                    persistent: true,
                    ..ck.clone()
                },
                "pingpong",
            ),
        ] {
            assert_refused(&t, &p, &bad, Arch::Sm90a, word);
        }
        // Each CTA of the pair needs a k-block.
        let one_kblock = GemmProblem::nn(1024, 1024, 64, DType::Bf16);
        assert_refused(
            &t,
            &one_kblock,
            &ck,
            Arch::Sm90a,
            "cluster_k=2 exceeds the 1 k-blocks",
        );
        // The reduction buffer (one consumer's 64 accumulators x 128 threads) no longer fits
        // beside 6 stages and the TMA-store boxes.
        let fat = WgmmaConfig {
            stages: 6,
            tma_store: true,
            persistent: true,
            ..ck.clone()
        };
        assert_refused(&t, &p, &fat, Arch::Sm90a, "shared memory");
        // Slower where measured (call AQ): only the experimental template offers them.
        assert!(!t.space(&p, Arch::Sm90a).iter().any(|c| c.cluster_k > 1));
        let x = WgmmaGemm {
            experimental: true,
            ..t
        };
        let valid = x.valid_space(&p, Arch::Sm90a);
        assert!(valid
            .iter()
            .any(|c| c.cluster_k == 2 && c.tma_store && c.bm == 128 && c.bn == 128));
        assert!(valid.iter().any(|c| c.cluster_k == 2 && c.split_n));
        assert_eq!(
            x.space(&p, Arch::Sm90a).len(),
            t.space(&p, Arch::Sm90a).len() + x.experimental_space(&p, Arch::Sm90a).len()
        );
        assert!(x.space(&p, Arch::Sm90).is_empty());
    }

    #[test]
    fn entry_name_encodes_config_and_epilogue() {
        let t = WgmmaGemm::default();
        let mut p = GemmProblem::new(64, 64, 64, DType::F16, Layout::Row, Layout::Col);
        p.epilogue.bias = true;
        p.epilogue.activation = Activation::GeluErf;
        p.epilogue.out_dtype = DType::F32;
        let c = t.rung_config(&p, &DEFAULT_LADDER[0]);
        assert_eq!(
            t.entry_name(&p, &c),
            "rtx_wgmma_f16_rc_128x256x64_c2_n256_s4_cl1_g8_ts_bias_geluerf_of32"
        );
        // C with a pitch the TMA store cannot take: the default stores directly.
        p.ldc = 66;
        let direct = t.rung_config(&p, &DEFAULT_LADDER[0]);
        assert!(!direct.tma_store);
        t.check(&p, &direct, Arch::Sm90a).unwrap();
        assert!(
            !t.default_config(&GemmProblem::nn(64, 64, 64, DType::Tf32), Arch::Sm90a)
                .tma_store
        );
    }

    /// Configs from an imported tuning database may hold any field values: `complexity`
    /// underflowed on `cluster_m` / `split_k` 0, the thread count of 2^25 - 1 consumers and the
    /// cluster size of `cluster_m` 2^31 x `cluster_k` 2 overflowed in `launch` and
    /// `prepass_launch` (panics in debug, wraps in release). Now they saturate, and `check`
    /// refuses the configs.
    #[test]
    fn out_of_space_configs_saturate_in_launch_and_complexity() {
        let t = WgmmaGemm::new(132);
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
        let base = t.default_config(&p, Arch::Sm90a);
        let zero = WgmmaConfig {
            cluster_m: 0,
            split_k: 0,
            ..base.clone()
        };
        assert_eq!(t.complexity(&zero), t.complexity(&base));
        let wide = WgmmaConfig {
            consumers: (1 << 25) - 1,
            ..base.clone()
        };
        assert_eq!(t.launch(&p, &wide).block, [u32::MAX, 1, 1]);
        assert_eq!(t.prepass_launch(&p, &wide).unwrap().block, [u32::MAX, 1, 1]);
        let cluster = WgmmaConfig {
            cluster_m: 1 << 31,
            cluster_k: 2,
            ..base.clone()
        };
        assert_eq!(t.launch(&p, &cluster).grid[0], u32::MAX);
        assert_eq!(t.prepass_launch(&p, &cluster).unwrap().grid[0], u32::MAX);
        for c in [&zero, &wide, &cluster] {
            assert!(t.check(&p, c, Arch::Sm90a).is_err(), "{c:?}");
        }
        // A staged tf32 K within 3 of 2^32: its staged row pitch (K rounded up to 4) overflowed
        // in `check` and in the tensor maps; the maps and sizes saturate, and `check` refuses K
        // (beyond the kernels' int; the row-pitch check behind it names the overflow).
        let k = GemmProblem::new(64, 64, u32::MAX, DType::Tf32, Layout::Col, Layout::Row);
        let _ = (
            t.tensor_maps(&k, &base),
            WgmmaGemm::staging_bytes(&k, &base),
        );
        assert_refused(&t, &k, &base, Arch::Sm90a, "k=4294967295");
    }

    /// A few problems: each dtype, an M/N-major operand (tf32: staged), batched, skinny, and one
    /// at the extremes of every extent.
    fn problems() -> Vec<GemmProblem> {
        vec![
            GemmProblem::nn(4096, 4096, 4096, DType::Bf16),
            GemmProblem::new(64, 8192, 8192, DType::F16, Layout::Row, Layout::Col),
            GemmProblem::nn(4000, 4000, 4096, DType::Tf32),
            GemmProblem::new(1000, 1000, 1000, DType::Bf16, Layout::Col, Layout::Row).batched(3),
            GemmProblem::nn(u32::MAX, u32::MAX, u32::MAX, DType::Tf32).batched(u32::MAX),
        ]
    }

    /// Calls everything public that takes a config: `check`, `launch`, `complexity`, the cost
    /// model, the default config, the pre-pass launch, the tensor maps, the shared-memory layout
    /// and every resource helper must answer without panicking (in debug builds: without
    /// overflowing). A config `check` accepts launches its block with the shared memory it asks
    /// for, on whole clusters, and emits.
    fn exercise(
        t: WgmmaGemm,
        p: &GemmProblem,
        c: &WgmmaConfig,
        arch: Arch,
        rank: u32,
    ) -> Result<(), TestCaseError> {
        let (m, n, b) = (p.m, p.n, p.batch);
        let _ = (c.threads(), c.rows_per_consumer(), c.cols_per_consumer());
        let _ = (
            c.consumers_per_unit(),
            c.warps_per_tile(),
            c.m_iters(),
            c.n_iters(),
        );
        let _ = (
            c.acc_regs(),
            c.a_stage_bytes(),
            c.b_stage_bytes(),
            c.stage_bytes(),
        );
        let _ = (
            c.barrier_offset(),
            c.barrier_bytes(),
            c.cluster_size(),
            c.epi_offset(),
        );
        let _ = c.multicast_size();
        let _ = (
            c.red_bytes(),
            c.red_offset(),
            c.epi_span_bytes(),
            c.epi_box_bytes(),
        );
        let _ = (
            c.epi_bytes(),
            c.smem_bytes(),
            c.launch_regs(),
            c.consumer_regs(),
        );
        let _ = (c.tiles(m, n), c.units(m, n), c.tile_slots(m, n), c.tag());
        let _ = (
            c.workspace_partial_bytes(m, n, b),
            c.workspace_bytes(m, n, b),
        );
        let _ = (layout::a_consumer_offset(c), layout::b_consumer_offset(c));
        let _ = layout::b_desc_offset(c, rank == 0, rank, 3);
        let _ = (layout::a_boxes(c, true), layout::a_boxes(c, false));
        let _ = (
            layout::b_boxes(c, true, rank),
            layout::b_boxes(c, false, rank),
        );
        let _ = (t.tensor_maps(p, c), tma_desc_c(p, c), t.entry_name(p, c));
        let _ = (
            WgmmaGemm::check_config_for(p, c),
            WgmmaGemm::b_streams(p, c),
        );
        let facts = crate::tuner::DeviceFacts::lookup("NVIDIA H200", (9, 0)).unwrap();
        let _ = (
            t.estimate_us(p, c, &facts),
            t.complexity(c),
            t.default_config(p, arch),
        );
        let pre = t.prepass_launch(p, c);
        let d = t.launch(p, c);
        if t.check(p, c, arch).is_ok() {
            prop_assert_eq!(d.block, [c.threads(), 1, 1]);
            prop_assert_eq!(d.dynamic_smem, c.smem_bytes());
            prop_assert!(d.dynamic_smem <= arch.max_smem_per_block_optin());
            prop_assert!(d.grid[0] > 0 && d.grid[0].is_multiple_of(c.cluster_size()));
            prop_assert!(pre.is_none_or(|q| q.grid[0].is_multiple_of(c.cluster_size())));
            prop_assert!(t.emit(p, c, arch).is_ok());
        }
        Ok(())
    }

    /// Valid configs of the (in-range) problems of [`problems`], with their problem.
    fn valid_pairs() -> Vec<(GemmProblem, WgmmaConfig)> {
        let t = WgmmaGemm {
            experimental: true,
            ..WgmmaGemm::new(132)
        };
        problems()
            .into_iter()
            .flat_map(|p| {
                let v = t.valid_space(&p, Arch::Sm90a);
                v.into_iter().step_by(7).map(move |c| (p, c))
            })
            .collect()
    }

    proptest! {
        /// Any config fields (configs may come from an imported tuning database with any
        /// values): see [`exercise`].
        #[test]
        fn any_config_fields_never_panic(
            p in proptest::sample::select(problems()),
            sm_count in field(&[132]),
            bm in field(&[64, 128, 192, 256]),
            bn in field(&[64, 80, 128, 160, 192, 256]),
            bk in field(&[BLOCK_K, BLOCK_K_TF32]),
            consumers in field(&[1, 2, 3]),
            wgmma_n in field(&[64, 80, 128, 160, 256]),
            stages in field(&[2, 4, 6, MAX_STAGES]),
            cluster_m in field(&[1, 2]),
            persistent in any::<bool>(),
            raster_group in field(&[1, 8]),
            split_k in field(&[1, 2, 4]),
            pingpong in any::<bool>(),
            tma_store in any::<bool>(),
            split_n in any::<bool>(),
            cluster_k in field(&[1, 2]),
            swap_ab in any::<bool>(),
            cluster_n in field(&[1, 2]),
            tight_b in any::<bool>(),
            rank in field(&[0, 1]),
            arch in proptest::sample::select(vec![Arch::Sm80, Arch::Sm90a, Arch::Sm120]),
        ) {
            let c = WgmmaConfig {
                bm, bn, bk, consumers, wgmma_n, stages, cluster_m, persistent, raster_group,
                split_k, pingpong, tma_store, split_n, cluster_k, swap_ab, cluster_n, tight_b,
            };
            exercise(WgmmaGemm::new(sm_count), &p, &c, arch, rank)?;
        }

        /// A valid config with one field replaced by any value (near the space, so that some
        /// still pass `check`): see [`exercise`].
        #[test]
        fn one_field_off_a_valid_config_never_panics(
            (p, valid) in proptest::sample::select(valid_pairs()),
            which in 0usize..11,
            value in field(&[0, 1, 2, 3, 64, 128, 256, 512]),
            rank in field(&[0, 1]),
        ) {
            let mut c = valid;
            *[
                &mut c.bm, &mut c.bn, &mut c.bk, &mut c.consumers, &mut c.wgmma_n,
                &mut c.stages, &mut c.cluster_m, &mut c.raster_group, &mut c.split_k,
                &mut c.cluster_k, &mut c.cluster_n,
            ][which] = value;
            exercise(WgmmaGemm::new(132), &p, &c, Arch::Sm90a, rank)?;
        }
    }
}
