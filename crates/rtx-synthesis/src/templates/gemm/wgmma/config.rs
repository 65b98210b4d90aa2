//! The typed parameter space of the Hopper (wgmma + TMA) GEMM template, and the resources a
//! config needs (threads, shared memory, accumulator and `setmaxnreg` register budgets).

use serde::{Deserialize, Serialize};

/// K depth of one pipeline stage for 2-byte inputs (f16/bf16): 64 elements = 128 bytes, the
/// 128B-swizzle span.
pub const BLOCK_K: u32 = 64;
/// K depth of one pipeline stage for tf32 (4-byte f32 storage): 32 elements = 128 bytes.
pub const BLOCK_K_TF32: u32 = 32;
/// Threads in one warpgroup.
pub const WARPGROUP: u32 = 128;
/// Registers per thread the producer warpgroup keeps after `setmaxnreg.dec`.
pub const PRODUCER_REGS: u32 = 40;
/// Registers of one SM (and the most one block may use).
pub const REGS_PER_SM: u32 = 65_536;
/// Bytes one swizzle atom row spans: the K extent of one stage (`bk` elements) and the TMA box
/// inner extent, for every input type.
pub const SWIZZLE_BYTES: u32 = 128;
/// Bytes of one 64 x 64 two-byte TMA box (one MN-major swizzle column; 2-byte types only).
pub const BOX_BYTES: u32 = BLOCK_K * SWIZZLE_BYTES;
/// Rows of C one warp stores per epilogue box (its accumulator rows; the C map's box height).
pub const EPI_WARP_ROWS: u32 = 16;
/// Slack added to the dynamic shared memory so the kernel can align its base to 1024 bytes.
pub const SMEM_ALIGN_SLACK: u32 = 1024;

/// One point of the wgmma GEMM space.
///
/// A block computes a `bm x bn` tile of C with `consumers` consumer warpgroups (each owns
/// `bm / consumers` rows, i.e. `bm / consumers / 64` wgmma m64 instructions per k16 step) and
/// one producer warpgroup that streams `bm x 64` / `64 x bn` slabs of A and B through a ring of
/// `stages` shared-memory buffers with TMA. Each consumer issues `bn / wgmma_n` instructions
/// `wgmma.mma_async.m64n{wgmma_n}k16` (f16/bf16; `k8` for tf32) per m64 row block and 32-byte
/// K slice. One stage spans 128 bytes of K whatever the input type (`bk * element size == 128`,
/// enforced by `check`), so every byte count below is the same for f16/bf16 (`bk` 64) and
/// tf32 (`bk` 32).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WgmmaConfig {
    /// Block tile rows (64, 128 or 256; a multiple of `64 * consumers`).
    pub bm: u32,
    /// Block tile columns (64, 80, 128, 160, 192 or 256).
    pub bn: u32,
    /// Block tile depth in elements: [`BLOCK_K`] (64) for f16/bf16, [`BLOCK_K_TF32`] (32) for tf32.
    pub bk: u32,
    /// Consumer (MMA) warpgroups: 1 or 2.
    pub consumers: u32,
    /// N of each wgmma instruction (a multiple of 64 dividing `bn`).
    pub wgmma_n: u32,
    /// Shared-memory pipeline depth, 2..=`MAX_STAGES` (12), bounded by shared memory.
    pub stages: u32,
    /// Thread-block cluster size along M (1, or 2 with B multicast to both CTAs).
    pub cluster_m: u32,
    /// Launch at most one block (cluster) per SM and loop over tiles; otherwise one tile per block.
    /// Does not change the generated code, only [`crate::templates::Template::launch`].
    pub persistent: bool,
    /// Tile-order rasterization: blocks walk `raster_group` tile rows at a time (1 = row-major order).
    pub raster_group: u32,
    /// Split-K: each output tile's K range is cut into `split_k` contiguous slices computed by
    /// different blocks (work units); partial sums go through an f32 workspace and the last
    /// slice to finish a tile (per warp, counted with an atomic) adds them in slice order and
    /// applies the epilogue exactly once. 1 = off.
    #[serde(default = "one")]
    pub split_k: u32,
    /// Ping-pong consumers: the two consumer warpgroups work on different work units (each owns
    /// the whole `bm x bn` tile), alternating through the ring, so one's epilogue overlaps the
    /// other's mainloop. Needs `consumers == 2` and `persistent`.
    #[serde(default)]
    pub pingpong: bool,
    /// TMA-store epilogue: each consumer warpgroup writes its outputs, 64 rows x 128 bytes at a
    /// time, into one of two swizzled shared-memory boxes and one thread stores the box with
    /// `cp.async.bulk.tensor` (full-line writes, clipped at M/N by the copy engine), so the
    /// store drains while the consumer goes on. Needs `split_k == 1` (the split-K fix-up runs
    /// per warp) and a 16-byte-aligned C (pitch, batch stride, pointer).
    #[serde(default)]
    pub tma_store: bool,
    /// Column-split consumers: the two consumer warpgroups share all `bm` rows of the tile and
    /// each owns `bn / 2` columns (cuBLAS's arrangement of its 64x128 and 128x256 tiles), instead
    /// of each owning `bm / 2` rows. Needs `consumers == 2`, no ping-pong, and `bn / 2` a multiple
    /// of 64 (whole 64-column swizzle boxes of an MN-major B) divisible by `wgmma_n`.
    #[serde(default)]
    pub split_n: bool,
    /// Cluster split-K: a cluster of `cluster_k` CTAs (2) computes one tile, each CTA over its
    /// share of the k-blocks, and the partial sums meet in distributed shared memory instead of
    /// a global workspace: consumer `r` of CTA `r` owns its part of the tile, the other CTA's
    /// consumer `r` pushes its fp32 accumulators into the owner's reduction buffer
    /// (`st.async`, counted on an mbarrier), and the owner adds them and runs the epilogue.
    /// Halves each CTA's k-blocks with a tile twice as large, so per-SM operand traffic per
    /// FLOP drops where small grids would otherwise run small tiles. Needs `consumers == 2`,
    /// `cluster_m == 1`, `split_k == 1`, no ping-pong. 1 = off.
    #[serde(default = "one")]
    pub cluster_k: u32,
    /// Transposed problem: the kernel computes `C^T = B^T A^T`, so the problem's N runs along
    /// the tile's rows (`bm`) and its M along the columns (`bn`, where any multiple of 16 is a
    /// wgmma width): a small M fills one column tile instead of padding 64-row wgmma blocks.
    /// A and B swap roles (each keeps its memory layout, seen transposed) and the epilogue
    /// stores every element at its transposed place in the row-major C (pairs of output rows
    /// at one column; the bias runs along the tile's rows), after the split-K fix-up where
    /// `split_k > 1`. Needs direct stores (no `tma_store`), `cluster_k` 1 and no ping-pong; tf32
    /// needs a row-major A (see `WgmmaGemm::check`).
    #[serde(default)]
    pub swap_ab: bool,
    /// Thread-block cluster size along N (1, or 2 with A multicast to both CTAs): the pair
    /// computes two neighbouring column tiles of the same rows, each CTA loads half of the A
    /// tile's 64-row boxes and multicasts them to both. With `swap_ab` that shares the user's
    /// large B between two tiles of a small M (cuBLAS's `_1x2` small-M kernels). Needs `bm` a
    /// multiple of 128, `cluster_m` 1, `cluster_k` 1 and `split_k` 1. 1 = off.
    #[serde(default = "one")]
    pub cluster_n: u32,
    /// B's ring slot holds exactly `bn` rows of one 128-byte K span instead of whole 64-row
    /// boxes (a K-major B only: an MN-major one is loaded in 64-column boxes). Frees 6 KiB a
    /// stage at `bn` 80 and 4 KiB at 160, so 128 x 80 and 64 x 160 tiles fit 8 stages.
    #[serde(default)]
    pub tight_b: bool,
}

fn one() -> u32 {
    1
}

/// `x` rounded up to a multiple of `m` (> 0), saturating at the largest `u32` multiple of `m`.
fn round_up(x: u32, m: u32) -> u32 {
    x.checked_next_multiple_of(m).unwrap_or(u32::MAX / m * m)
}

impl WgmmaConfig {
    /// A persistent single-CTA config with row-major tile order and every option off (no
    /// cluster, split-K, ping-pong, TMA store, column split or transposition): the base the
    /// spaces vary with struct-update syntax.
    pub fn basic(bm: u32, bn: u32, bk: u32, consumers: u32, wgmma_n: u32, stages: u32) -> Self {
        WgmmaConfig {
            bm,
            bn,
            bk,
            consumers,
            wgmma_n,
            stages,
            cluster_m: 1,
            persistent: true,
            raster_group: 1,
            split_k: 1,
            pingpong: false,
            tma_store: false,
            split_n: false,
            cluster_k: 1,
            swap_ab: false,
            cluster_n: 1,
            tight_b: false,
        }
    }
}

/// Every helper below is total: a config far outside the space (an imported tuning database may
/// hold any field values; [`crate::templates::Template::check`] rejects it) gets sizes that
/// saturate near `u32::MAX` / `u64::MAX` and zero divisors read as 1, never an overflow panic
/// (debug) or a wrapped, small-looking value (release). For configs `check` accepts, every value
/// is the exact one the kernel is generated from.
impl WgmmaConfig {
    /// Threads per block: one producer warpgroup plus the consumers.
    pub fn threads(&self) -> u32 {
        WARPGROUP.saturating_mul(self.consumers.saturating_add(1))
    }

    /// Rows of C one consumer warpgroup owns (the whole tile in ping-pong or column-split mode).
    pub fn rows_per_consumer(&self) -> u32 {
        if self.pingpong || self.split_n {
            self.bm
        } else {
            self.bm / self.consumers.max(1)
        }
    }

    /// Columns of C one consumer warpgroup owns (`bn / consumers` in column-split mode, else `bn`).
    pub fn cols_per_consumer(&self) -> u32 {
        if self.split_n {
            self.bn / self.consumers.max(1)
        } else {
            self.bn
        }
    }

    /// Consumer warpgroups that share one work unit (and release each stage): 1 in ping-pong mode.
    pub fn consumers_per_unit(&self) -> u32 {
        if self.pingpong {
            1
        } else {
            self.consumers.max(1)
        }
    }

    /// Warps holding accumulators of one tile (each owns distinct rows): 4 per consumer warpgroup of a unit.
    pub fn warps_per_tile(&self) -> u32 {
        self.consumers_per_unit().saturating_mul(4)
    }

    /// wgmma m64 instructions per consumer per K slice along M.
    pub fn m_iters(&self) -> u32 {
        self.rows_per_consumer() / 64
    }

    /// wgmma instructions per m64 block per K slice along N.
    pub fn n_iters(&self) -> u32 {
        self.cols_per_consumer() / self.wgmma_n.max(1)
    }

    /// fp32 accumulator registers per consumer thread.
    pub fn acc_regs(&self) -> u32 {
        self.m_iters().saturating_mul(self.cols_per_consumer()) / 2
    }

    /// Bytes of A in one stage: `bm` rows of one 128-byte K span.
    pub fn a_stage_bytes(&self) -> u32 {
        self.bm.saturating_mul(SWIZZLE_BYTES)
    }

    /// Bytes of B in one stage: `bn` rows of one 128-byte K span, rounded up to whole 64-column
    /// boxes (an MN-major B with `bn` 160 loads three 64 x 64 boxes; a K-major one leaves the
    /// last 32 rows unused) unless [`WgmmaConfig::tight_b`].
    pub fn b_stage_bytes(&self) -> u32 {
        let rows = if self.tight_b {
            self.bn
        } else {
            round_up(self.bn, 64)
        };
        rows.saturating_mul(SWIZZLE_BYTES)
    }

    /// Bytes TMA delivers per stage (both operands, full boxes including zero fill).
    pub fn stage_bytes(&self) -> u32 {
        self.a_stage_bytes().saturating_add(self.b_stage_bytes())
    }

    /// Offset of the mbarriers from the aligned shared-memory base.
    pub fn barrier_offset(&self) -> u32 {
        self.stages.saturating_mul(self.stage_bytes())
    }

    /// Bytes of mbarriers: `full` and `empty` per stage, plus the reduction buffer's `full` and
    /// `empty` with cluster split-K.
    pub fn barrier_bytes(&self) -> u32 {
        let red = if self.cluster_k > 1 { 16 } else { 0 };
        self.stages.saturating_mul(16).saturating_add(red)
    }

    /// CTAs in one cluster: `cluster_m` (B multicast) times `cluster_n` (A multicast) times
    /// `cluster_k` (cluster split-K).
    pub fn cluster_size(&self) -> u32 {
        self.cluster_m
            .max(1)
            .saturating_mul(self.cluster_n.max(1))
            .saturating_mul(self.cluster_k.max(1))
    }

    /// CTAs that share each stage's loads through multicast (`cluster_m` x `cluster_n`): every
    /// one of them must release a stage before any rank refills it.
    pub fn multicast_size(&self) -> u32 {
        self.cluster_m.max(1).saturating_mul(self.cluster_n.max(1))
    }

    /// Offset of the TMA-store epilogue boxes (1024-aligned for the 128-byte swizzle).
    pub fn epi_offset(&self) -> u32 {
        round_up(
            self.barrier_offset().saturating_add(self.barrier_bytes()),
            1024,
        )
    }

    /// Bytes of the cluster split-K reduction buffer: one consumer warpgroup's fp32
    /// accumulators (0 without cluster split-K).
    pub fn red_bytes(&self) -> u32 {
        if self.cluster_k > 1 {
            self.acc_regs().saturating_mul(4 * WARPGROUP)
        } else {
            0
        }
    }

    /// End of the ring, the barriers and (with `tma_store`) the epilogue boxes.
    fn pipeline_end(&self) -> u32 {
        if self.tma_store {
            self.epi_offset().saturating_add(self.epi_bytes())
        } else {
            self.barrier_offset().saturating_add(self.barrier_bytes())
        }
    }

    /// Offset of the cluster split-K reduction buffer: after the epilogue boxes (or the
    /// barriers), 128-byte aligned.
    pub fn red_offset(&self) -> u32 {
        round_up(self.pipeline_end(), 128)
    }

    /// Bytes of one row of a TMA-store staging box: a 128-byte swizzle span when a consumer's
    /// columns are a multiple of 64, else a 64-byte span (160 columns of a 2-byte output = five
    /// 32-column boxes; `WgmmaGemm::check_config_for` refuses columns that are not whole boxes).
    pub fn epi_span_bytes(&self) -> u32 {
        if self.cols_per_consumer().is_multiple_of(64) {
            SWIZZLE_BYTES
        } else {
            SWIZZLE_BYTES / 2
        }
    }

    /// Bytes of one TMA-store staging box: 64 rows of one [`WgmmaConfig::epi_span_bytes`] span.
    pub fn epi_box_bytes(&self) -> u32 {
        64 * self.epi_span_bytes()
    }

    /// Bytes of the TMA-store epilogue boxes: two per consumer warpgroup (0 without `tma_store`).
    pub fn epi_bytes(&self) -> u32 {
        if self.tma_store {
            self.consumers.saturating_mul(2 * self.epi_box_bytes())
        } else {
            0
        }
    }

    /// Dynamic shared memory the kernel needs: the ring, 2 mbarriers per stage, the epilogue
    /// boxes (with `tma_store`), the reduction buffer (with cluster split-K) and alignment slack.
    pub fn smem_bytes(&self) -> u32 {
        let end = if self.cluster_k > 1 {
            self.red_offset().saturating_add(self.red_bytes())
        } else {
            self.pipeline_end()
        };
        end.saturating_add(SMEM_ALIGN_SLACK)
    }

    /// Registers per thread ptxas may use at launch with `__launch_bounds__(threads, 1)`.
    pub fn launch_regs(&self) -> u32 {
        ((REGS_PER_SM / self.threads().max(1)) / 8 * 8).min(248)
    }

    /// Registers per thread the consumers raise to with `setmaxnreg.inc` (multiple of 8, <= 240),
    /// chosen so producer + consumers fit in the block's launch allocation.
    pub fn consumer_regs(&self) -> u32 {
        let pool = self.launch_regs().saturating_mul(self.threads());
        let left = pool.saturating_sub(WARPGROUP * PRODUCER_REGS);
        (left / WARPGROUP.saturating_mul(self.consumers.max(1)) / 8 * 8).min(240)
    }

    /// Number of tile rows / columns of C for the kernel's `m x n` (the user's `n x m` under
    /// [`Self::swap_ab`]; `WgmmaGemm::view` gives it): `(tiles_m, tiles_n)`.
    pub fn tiles(&self, m: u32, n: u32) -> (u32, u32) {
        (m.div_ceil(self.bm.max(1)), n.div_ceil(self.bn.max(1)))
    }

    /// Work units of the kernel's `m x n` (per batch entry; the user's `n x m` under
    /// [`Self::swap_ab`]): cluster tiles times `split_k`.
    pub fn units(&self, m: u32, n: u32) -> u64 {
        let (tm, tn) = self.tiles(m, n);
        (tm.div_ceil(self.cluster_m.max(1)) as u64 * tn.div_ceil(self.cluster_n.max(1)) as u64)
            .saturating_mul(self.split_k.max(1) as u64)
    }

    /// Tile slots of the split-K workspace per batch entry (tile rows rounded up to whole
    /// clusters) of the kernel's `m x n`, as [`Self::tiles`].
    pub fn tile_slots(&self, m: u32, n: u32) -> u64 {
        let (tm, tn) = self.tiles(m, n);
        let cl = self.cluster_m.max(1) as u64;
        ((tm as u64).div_ceil(cl) * cl).saturating_mul(tn as u64)
    }

    /// The kernel's `m x n` for the user's: transposed with [`Self::swap_ab`].
    fn kernel_extents(&self, m: u32, n: u32) -> (u32, u32) {
        if self.swap_ab {
            (n, m)
        } else {
            (m, n)
        }
    }

    /// Bytes of f32 partial sums in the split-K workspace (0 when `split_k == 1`) of the user's
    /// `m x n` problem.
    pub fn workspace_partial_bytes(&self, m: u32, n: u32, batch: u32) -> u64 {
        if self.split_k <= 1 {
            return 0;
        }
        let (km, kn) = self.kernel_extents(m, n);
        let b = [
            self.tile_slots(km, kn),
            self.split_k as u64,
            self.bm as u64,
            self.bn as u64,
            4,
        ]
        .into_iter()
        .fold(batch.max(1) as u64, u64::saturating_mul);
        b.div_ceil(256).saturating_mul(256)
    }

    /// Bytes of the split-K workspace: the partials, then one u32 arrival counter per warp and
    /// tile, for the user's `m x n` problem (the kernel's tiles are of `n x m` with
    /// [`Self::swap_ab`]). The counters must be zero before the first launch; every launch leaves
    /// them zero.
    pub fn workspace_bytes(&self, m: u32, n: u32, batch: u32) -> u64 {
        if self.split_k <= 1 {
            return 0;
        }
        let (km, kn) = self.kernel_extents(m, n);
        let counters = [self.tile_slots(km, kn), self.warps_per_tile() as u64, 4]
            .into_iter()
            .fold(batch.max(1) as u64, u64::saturating_mul);
        self.workspace_partial_bytes(m, n, batch)
            .saturating_add(counters)
    }

    /// Short identifier of the code-relevant fields, used in the kernel entry name.
    pub fn tag(&self) -> String {
        let mut s = format!(
            "{}x{}x{}_c{}_n{}_s{}_cl{}_g{}",
            self.bm,
            self.bn,
            self.bk,
            self.consumers,
            self.wgmma_n,
            self.stages,
            self.cluster_m,
            self.raster_group
        );
        if self.split_k > 1 {
            s.push_str(&format!("_k{}", self.split_k));
        }
        if self.pingpong {
            s.push_str("_pp");
        }
        if self.tma_store {
            s.push_str("_ts");
        }
        if self.split_n {
            s.push_str("_sn");
        }
        if self.cluster_k > 1 {
            s.push_str(&format!("_ck{}", self.cluster_k));
        }
        if self.swap_ab {
            s.push_str("_sw");
        }
        if self.cluster_n > 1 {
            s.push_str(&format!("_cn{}", self.cluster_n));
        }
        if self.tight_b {
            s.push_str("_tb");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big() -> WgmmaConfig {
        WgmmaConfig {
            raster_group: 8,
            ..WgmmaConfig::basic(128, 256, 64, 2, 256, 4)
        }
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
        assert!(
            WARPGROUP * (PRODUCER_REGS + c.consumers * c.consumer_regs())
                <= c.launch_regs() * c.threads()
        );
    }

    #[test]
    fn one_consumer_gets_the_full_budget() {
        let c = WgmmaConfig {
            bm: 128,
            bn: 128,
            consumers: 1,
            wgmma_n: 128,
            ..big()
        };
        assert_eq!(c.threads(), 256);
        assert_eq!(c.m_iters(), 2);
        assert_eq!(c.acc_regs(), 128);
        assert_eq!(c.consumer_regs(), 240);
        assert_eq!(c.tiles(4000, 4000), (32, 32));
    }

    #[test]
    fn pingpong_gives_each_consumer_the_whole_tile() {
        let c = WgmmaConfig {
            bm: 128,
            bn: 128,
            wgmma_n: 128,
            pingpong: true,
            ..big()
        };
        assert_eq!(c.rows_per_consumer(), 128);
        assert_eq!(c.m_iters(), 2);
        assert_eq!(c.acc_regs(), 128);
        assert_eq!(c.consumers_per_unit(), 1);
        assert_eq!(c.warps_per_tile(), 4);
        assert!(c.tag().ends_with("_pp"));
    }

    #[test]
    fn split_k_workspace_holds_every_partial_and_counter() {
        let c = WgmmaConfig {
            bm: 64,
            bn: 128,
            consumers: 1,
            wgmma_n: 128,
            split_k: 2,
            ..big()
        };
        assert_eq!(c.units(64, 8192), 128);
        assert_eq!(c.tile_slots(64, 8192), 64);
        assert_eq!(
            c.workspace_partial_bytes(64, 8192, 1),
            64 * 2 * 64 * 128 * 4
        );
        assert_eq!(
            c.workspace_bytes(64, 8192, 1),
            64 * 2 * 64 * 128 * 4 + 64 * 4 * 4
        );
        assert_eq!(big().workspace_bytes(4096, 4096, 1), 0);
        // The transposed product tiles the user's N x M: at 300 x 2048 that is 32 x 3 tiles of
        // 64 x 128, where the user's own 300 x 2048 would take 5 x 16.
        let sw = WgmmaConfig { swap_ab: true, ..c };
        assert_eq!(sw.tile_slots(2048, 300), 32 * 3);
        assert_eq!(c.tile_slots(300, 2048), 5 * 16);
        assert_eq!(
            sw.workspace_bytes(300, 2048, 3),
            3 * (32 * 3 * 2 * 64 * 128 * 4 + 32 * 3 * 4 * 4)
        );
        let cl = WgmmaConfig {
            cluster_m: 2,
            split_k: 3,
            ..big()
        };
        // 3 tile rows round up to 4 (two clusters).
        assert_eq!(cl.tile_slots(300, 512), 4 * 2);
        assert!(cl.tag().ends_with("_k3"));
    }

    #[test]
    fn tf32_stages_hold_the_same_bytes_as_bf16() {
        // bk 32 tf32 elements = 128 bytes = bk 64 bf16 elements.
        let t = WgmmaConfig {
            bk: BLOCK_K_TF32,
            ..big()
        };
        assert_eq!(t.stage_bytes(), big().stage_bytes());
        assert_eq!(t.a_stage_bytes(), 128 * 32 * 4);
        assert_eq!(t.b_stage_bytes(), 256 * 32 * 4);
        assert!(t.smem_bytes() <= 227 * 1024);
    }

    #[test]
    fn tma_store_adds_two_aligned_boxes_per_consumer() {
        let c = WgmmaConfig {
            tma_store: true,
            ..big()
        };
        assert_eq!(c.epi_offset() % 1024, 0);
        assert!(c.epi_offset() >= c.barrier_offset() + 16 * c.stages);
        assert_eq!(c.epi_bytes(), 2 * 2 * 8192);
        assert_eq!(c.smem_bytes(), 4 * 48 * 1024 + 1024 + 32 * 1024 + 1024);
        assert!(
            c.smem_bytes() <= 227 * 1024,
            "the 128x256 4-stage config still fits"
        );
        assert_eq!(big().epi_bytes(), 0);
        assert!(c.tag().ends_with("_ts"));
    }

    #[test]
    fn cluster_split_k_adds_barriers_and_one_consumers_accumulators() {
        let c = WgmmaConfig {
            bm: 128,
            bn: 128,
            wgmma_n: 128,
            cluster_k: 2,
            ..big()
        };
        assert_eq!(c.cluster_size(), 2);
        assert_eq!(c.barrier_bytes(), 16 * 4 + 16);
        assert_eq!(
            c.red_bytes(),
            64 * 4 * 128,
            "64 accumulators per thread of one consumer"
        );
        assert_eq!(
            c.red_offset(),
            (c.barrier_offset() + c.barrier_bytes()).next_multiple_of(128)
        );
        assert_eq!(c.smem_bytes(), c.red_offset() + c.red_bytes() + 1024);
        let ts = WgmmaConfig {
            tma_store: true,
            ..c.clone()
        };
        assert_eq!(ts.red_offset(), ts.epi_offset() + ts.epi_bytes());
        assert!(ts.red_offset() >= ts.barrier_offset() + ts.barrier_bytes());
        assert!(c.tag().ends_with("_ck2"));
        // Without it nothing moves.
        let plain = WgmmaConfig { cluster_k: 1, ..c };
        assert_eq!(
            (
                plain.red_bytes(),
                plain.barrier_bytes(),
                plain.cluster_size()
            ),
            (0, 16 * 4, 1)
        );
        assert!(!plain.tag().contains("_ck"));
    }

    /// Configs may come from an imported tuning database with any field values: the helpers
    /// saturate (they used to overflow in debug builds and wrap in release, `launch_regs`
    /// dividing by a wrapped-to-0 thread count) and read zero divisors as 1.
    #[test]
    fn huge_and_zero_fields_saturate_instead_of_overflowing() {
        let huge = WgmmaConfig {
            bm: u32::MAX,
            bn: u32::MAX,
            consumers: u32::MAX,
            stages: u32::MAX,
            cluster_m: u32::MAX,
            split_k: u32::MAX,
            tma_store: true,
            cluster_k: u32::MAX,
            ..big()
        };
        assert_eq!(huge.threads(), u32::MAX);
        assert_eq!((huge.launch_regs(), huge.consumer_regs()), (0, 0));
        assert_eq!(huge.stage_bytes(), u32::MAX);
        assert_eq!(huge.barrier_bytes(), u32::MAX);
        assert_eq!(huge.epi_offset() % 1024, 0);
        assert_eq!(huge.red_offset() % 128, 0);
        assert_eq!(huge.smem_bytes(), u32::MAX);
        assert_eq!(huge.cluster_size(), u32::MAX);
        assert_eq!(huge.warps_per_tile(), u32::MAX);
        let (m, n) = (u32::MAX, u32::MAX);
        assert_eq!(huge.workspace_bytes(m, n, u32::MAX), u64::MAX);
        let tiny = WgmmaConfig {
            bm: 1,
            bn: 1,
            cluster_m: 1,
            ..huge.clone()
        };
        assert_eq!(tiny.units(m, n), u64::MAX);
        assert_eq!(
            tiny.tile_slots(m, n),
            u64::from(u32::MAX) * u64::from(u32::MAX)
        );
        // (2^25 - 1) + 1 consumers = 2^32 threads wrapped to 0 in release.
        let wide = WgmmaConfig {
            consumers: (1 << 25) - 1,
            ..big()
        };
        assert_eq!(wide.threads(), u32::MAX);
        assert_eq!(wide.launch_regs(), 0);
        let zero = WgmmaConfig {
            bm: 0,
            bn: 0,
            consumers: 0,
            wgmma_n: 0,
            stages: 0,
            cluster_m: 0,
            split_k: 0,
            cluster_k: 0,
            ..big()
        };
        assert_eq!(zero.tiles(100, 200), (100, 200));
        assert_eq!((zero.units(100, 200), zero.cluster_size()), (100 * 200, 1));
        assert_eq!((zero.m_iters(), zero.n_iters(), zero.acc_regs()), (0, 0, 0));
        assert_eq!(zero.smem_bytes(), SMEM_ALIGN_SLACK);
    }

    #[test]
    fn old_configs_without_new_fields_deserialize() {
        let json = r#"{"bm":128,"bn":256,"bk":64,"consumers":2,"wgmma_n":256,"stages":4,"cluster_m":1,"persistent":true,"raster_group":8}"#;
        let c: WgmmaConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c, big());
        assert_eq!(c.cluster_k, 1);
    }
}
