//! Typed parameter spaces of the SIMT and `mma.sync` GEMM templates, the derived kernel
//! geometry (threads, shared-memory strides and exact bytes, register estimates) and the
//! constraint checks every config must pass before code is generated.
//!
//! The geometry structs are the single source of truth: the emitters bake their numbers into
//! the generated code, and `check()` tests the same numbers against the architecture's limits.

use super::problem::{GemmProblem, Layout};
use crate::{Arch, DType};
use serde::{Deserialize, Serialize};

/// Registers one SM partition gives a block (every supported architecture).
pub const REGS_PER_BLOCK: u64 = 65536;
/// Most registers one thread may use.
pub const MAX_REGS_PER_THREAD: u64 = 255;
/// Largest `gridDim.y` / `gridDim.z`.
pub const MAX_GRID_YZ: u64 = 65535;

/// One point of the SIMT (CUDA-core fp32) GEMM space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SimtConfig {
    /// Block tile rows (of C).
    pub bm: u32,
    /// Block tile columns (of C).
    pub bn: u32,
    /// K depth of one shared-memory stage.
    pub bk: u32,
    /// Rows of C per thread (multiple of 4).
    pub tm: u32,
    /// Columns of C per thread (multiple of 4).
    pub tn: u32,
    /// 2: register-staged double buffer (any arch); 3..=4: `cp.async` ring of that many stages (sm_80+).
    pub stages: u32,
    /// Elements per global access (1, 2 or 4 floats); needs every leading dimension and batch stride divisible by it.
    pub vec: u32,
    /// Rasterization group: tile rows walked together (1 = plain row order).
    pub group_m: u32,
    /// `__launch_bounds__` minimum resident blocks per SM (1 or 2): 2 caps registers at
    /// `65536 / (2 * threads)` so two blocks fit on one SM.
    pub min_blocks: u32,
}

/// One point of the tensor-core (`mma.sync`) GEMM space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MmaConfig {
    /// Block tile rows.
    pub bm: u32,
    /// Block tile columns.
    pub bn: u32,
    /// K depth of one pipeline stage.
    pub bk: u32,
    /// Warps along M.
    pub warps_m: u32,
    /// Warps along N.
    pub warps_n: u32,
    /// `cp.async` pipeline depth (2..=5).
    pub stages: u32,
    /// K slices computed by separate blocks (`gridDim.y`); see `mma.rs` for the reduction.
    pub split_k: u32,
    /// XOR-swizzled shared memory (true) or padded rows (false) for the `ldmatrix` operands.
    pub swizzle: bool,
    /// Rasterization group: tile rows walked together (1 = plain row order).
    pub group_m: u32,
}

/// What the SIMT kernel looks like for one config (all sizes exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimtGeometry {
    /// Threads per block.
    pub threads: u32,
    /// Thread rows / columns of the block's thread grid.
    pub threads_m: u32,
    /// See `threads_m`.
    pub threads_n: u32,
    /// Thread rows of one warp's thread grid.
    pub warp_tm: u32,
    /// Thread columns of one warp's thread grid.
    pub warp_tn: u32,
    /// A is contiguous along K in global memory (row-major A).
    pub a_kcontig: bool,
    /// B is contiguous along K in global memory (column-major B).
    pub b_kcontig: bool,
    /// `cp.async` pipeline (otherwise register-staged).
    pub async_copy: bool,
    /// Shared-memory buffers (stages) allocated.
    pub buffers: u32,
    /// Row stride of A's shared tile, in elements.
    pub a_ld_s: u32,
    /// Row stride of B's shared tile, in elements.
    pub b_ld_s: u32,
    /// Elements of one A stage.
    pub a_stage: u32,
    /// Elements of one B stage.
    pub b_stage: u32,
    /// Dynamic shared memory, bytes.
    pub smem_bytes: u64,
    /// Estimated registers per thread.
    pub est_regs: u64,
}

/// What the `mma.sync` kernel looks like for one config (all sizes exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaGeometry {
    /// Threads per block.
    pub threads: u32,
    /// Bytes per input element.
    pub elem: u32,
    /// Elements per 16-byte chunk (one `cp.async`).
    pub chunk: u32,
    /// K of one `mma` instruction (16 for f16/bf16, 8 for tf32).
    pub kmma: u32,
    /// 16-row mma tiles per warp.
    pub mi: u32,
    /// 8-column mma tiles per warp.
    pub ni: u32,
    /// A is contiguous along K (row-major A): `ldmatrix` without `.trans`.
    pub a_kcontig: bool,
    /// B is contiguous along K (column-major B).
    pub b_kcontig: bool,
    /// A's shared tile is XOR-swizzled.
    pub a_swizzle: bool,
    /// B's shared tile is XOR-swizzled.
    pub b_swizzle: bool,
    /// Row stride of A's shared tile, in elements.
    pub a_ld_s: u32,
    /// Row stride of B's shared tile, in elements.
    pub b_ld_s: u32,
    /// Elements of one A stage.
    pub a_stage: u32,
    /// Elements of one B stage.
    pub b_stage: u32,
    /// Dynamic shared memory, bytes.
    pub smem_bytes: u64,
    /// Estimated registers per thread.
    pub est_regs: u64,
}

/// Tiles of `t` covering `x` (rounded up).
pub(crate) fn tiles(x: u32, t: u32) -> u64 {
    (x as u64).div_ceil(t as u64)
}

/// Number of output tiles (`gridDim.x`) for a block tile of `bm x bn`.
pub fn tile_count(p: &GemmProblem, bm: u32, bn: u32) -> u64 {
    tiles(p.m, bm) * tiles(p.n, bn)
}

impl SimtGeometry {
    /// Derives the geometry; `None` when the config is structurally impossible
    /// (zero or non-dividing sizes, or sizes that overflow), which `check` reports in words.
    pub fn new(p: &GemmProblem, c: &SimtConfig) -> Option<Self> {
        if [c.bm, c.bn, c.bk, c.tm, c.tn, c.vec].contains(&0)
            || !c.bm.is_multiple_of(c.tm)
            || !c.bn.is_multiple_of(c.tn)
        {
            return None;
        }
        let threads_m = c.bm / c.tm;
        let threads_n = c.bn / c.tn;
        let threads = threads_m.checked_mul(threads_n)?;
        let warp_tn = threads_n.min(8);
        let warp_tm = 32 / warp_tn.max(1);
        let a_kcontig = p.layout_a == Layout::Row;
        let b_kcontig = p.layout_b == Layout::Col;
        let async_copy = c.stages >= 3;
        let buffers = if async_copy { c.stages } else { 2 };
        // Both pipelines store both tiles K-major ([k][mn]); a K-contiguous operand is
        // transposed on the way in and its rows padded by 4 floats against bank conflicts
        // (keeps the float4 fragment reads 16-byte aligned).
        let lay = |mn: u32, kcontig: bool| -> Option<(u32, u32)> {
            let ld = mn.checked_add(if kcontig { 4 } else { 0 })?;
            Some((ld, c.bk.checked_mul(ld)?))
        };
        let (a_ld_s, a_stage) = lay(c.bm, a_kcontig)?;
        let (b_ld_s, b_stage) = lay(c.bn, b_kcontig)?;
        let smem_bytes = (buffers as u64)
            .checked_mul(a_stage as u64 + b_stage as u64)?
            .checked_mul(4)?;
        let loads = |mn: u32| -> u64 {
            (mn as u64 * c.bk as u64 / c.vec as u64).div_ceil(threads.max(1) as u64)
        };
        let staging = if async_copy {
            0
        } else {
            (loads(c.bm) + loads(c.bn)).checked_mul(c.vec as u64)?
        };
        let est_regs = (c.tm as u64 * c.tn as u64 + c.tm as u64 + c.tn as u64)
            .checked_add(staging)?
            .checked_add(28)?;
        Some(SimtGeometry {
            threads,
            threads_m,
            threads_n,
            warp_tm,
            warp_tn,
            a_kcontig,
            b_kcontig,
            async_copy,
            buffers,
            a_ld_s,
            b_ld_s,
            a_stage,
            b_stage,
            smem_bytes,
            est_regs,
        })
    }
}

/// Bytes per element of an `mma` input dtype, its 16-byte chunk and instruction K; `None` for F32.
pub fn mma_dtype_shape(d: DType) -> Option<(u32, u32, u32)> {
    match d {
        DType::F16 | DType::Bf16 => Some((2, 8, 16)),
        DType::Tf32 => Some((4, 4, 8)),
        DType::F32 => None,
    }
}

impl MmaGeometry {
    /// Derives the geometry; `None` for a dtype without tensor-core support or zero,
    /// non-dividing or overflowing sizes.
    pub fn new(p: &GemmProblem, c: &MmaConfig) -> Option<Self> {
        let (elem, chunk, kmma) = mma_dtype_shape(p.dtype)?;
        if [c.bm, c.bn, c.bk, c.warps_m, c.warps_n].contains(&0)
            || !c.bm.is_multiple_of(c.warps_m)
            || !c.bn.is_multiple_of(c.warps_n)
        {
            return None;
        }
        let threads = c.warps_m.checked_mul(c.warps_n)?.checked_mul(32)?;
        let mi = c.bm / c.warps_m / 16;
        let ni = c.bn / c.warps_n / 8;
        let a_kcontig = p.layout_a == Layout::Row;
        let b_kcontig = p.layout_b == Layout::Col;
        // tf32 operands that are contiguous along M/N cannot use ldmatrix (.trans is 16-bit only):
        // they are read with scalar loads from rows padded to 8 words mod 32 (conflict-free).
        let lay = |mn: u32, kcontig: bool| -> Option<(bool, u32, u32)> {
            let (rows, cols) = if kcontig { (mn, c.bk) } else { (c.bk, mn) };
            let ldmatrix = kcontig || p.dtype != DType::Tf32;
            let swz = c.swizzle && ldmatrix;
            let ld = if swz {
                cols
            } else if ldmatrix {
                cols.checked_add(chunk)?
            } else {
                cols.checked_add(8)?
            };
            Some((swz, ld, rows.checked_mul(ld)?))
        };
        let (a_swizzle, a_ld_s, a_stage) = lay(c.bm, a_kcontig)?;
        let (b_swizzle, b_ld_s, b_stage) = lay(c.bn, b_kcontig)?;
        let smem_bytes = (c.stages as u64)
            .checked_mul(a_stage as u64 + b_stage as u64)?
            .checked_mul(elem as u64)?;
        let acc = mi as u64 * ni as u64 * 4;
        let frags = mi as u64 * 4 + ni as u64 * 2;
        let est_regs = acc + frags + 48;
        Some(MmaGeometry {
            threads,
            elem,
            chunk,
            kmma,
            mi,
            ni,
            a_kcontig,
            b_kcontig,
            a_swizzle,
            b_swizzle,
            a_ld_s,
            b_ld_s,
            a_stage,
            b_stage,
            smem_bytes,
            est_regs,
        })
    }
}

/// Problem-level limits shared by both templates: the problem is valid (which includes the
/// ABI's `int` sizes, see [`GemmProblem::validate`]) and its batch fits the grid.
fn check_problem_limits(p: &GemmProblem) -> Result<(), String> {
    p.validate().map_err(|e| e.to_string())?;
    if p.batch as u64 > MAX_GRID_YZ {
        return Err(format!(
            "batch={} exceeds gridDim.z limit {MAX_GRID_YZ}",
            p.batch
        ));
    }
    Ok(())
}

/// Leading dimensions / batch strides that are not multiples of `v` elements, named.
fn misaligned(p: &GemmProblem, v: u32, with_c: bool) -> Option<String> {
    let v64 = v as u64;
    let mut items: Vec<(&str, u64)> = vec![("lda", p.lda as u64), ("ldb", p.ldb as u64)];
    if with_c {
        items.push(("ldc", p.ldc as u64));
    }
    if p.batch > 1 {
        items.push(("stride_a", p.stride_a));
        items.push(("stride_b", p.stride_b));
        if with_c {
            items.push(("stride_c", p.stride_c));
        }
    }
    items
        .into_iter()
        .find(|(_, x)| x % v64 != 0)
        .map(|(n, x)| format!("{n}={x} is not a multiple of {v} elements (vector access width)"))
}

fn check_budgets(threads: u32, smem: u64, regs: u64, arch: Arch) -> Result<(), String> {
    if threads == 0 || !threads.is_multiple_of(32) || threads > 1024 {
        return Err(format!(
            "{threads} threads per block (need a multiple of 32 in 32..=1024)"
        ));
    }
    let limit = arch.max_smem_per_block_optin() as u64;
    if smem > limit {
        return Err(format!(
            "needs {smem} bytes of shared memory, {arch} allows {limit} per block"
        ));
    }
    if regs > MAX_REGS_PER_THREAD {
        return Err(format!(
            "estimated {regs} registers per thread > {MAX_REGS_PER_THREAD}"
        ));
    }
    if threads as u64 * regs > REGS_PER_BLOCK {
        return Err(format!(
            "{threads} threads x ~{regs} registers > {REGS_PER_BLOCK} per block"
        ));
    }
    Ok(())
}

/// Checks a SIMT config against `p` on `arch`; the error names the broken rule.
pub fn check_simt(p: &GemmProblem, c: &SimtConfig, arch: Arch) -> Result<SimtGeometry, String> {
    check_problem_limits(p)?;
    if !matches!(p.dtype, DType::F32 | DType::Tf32) {
        return Err(format!(
            "dtype {} (the SIMT template computes f32 inputs only)",
            p.dtype
        ));
    }
    if !c.tm.is_multiple_of(4) || !c.tn.is_multiple_of(4) || c.tm == 0 || c.tn == 0 {
        return Err(format!(
            "thread tile {}x{} (both must be positive multiples of 4)",
            c.tm, c.tn
        ));
    }
    if c.bm == 0 || c.bn == 0 || !c.bm.is_multiple_of(c.tm) || !c.bn.is_multiple_of(c.tn) {
        return Err(format!(
            "block tile {}x{} is not a multiple of the thread tile {}x{}",
            c.bm, c.bn, c.tm, c.tn
        ));
    }
    // u64 throughout: configs may come from an imported tuning database with any field values.
    if c.tm as u64 * c.tn as u64 > 128 {
        return Err(format!(
            "thread tile {}x{} holds more than 128 accumulators",
            c.tm, c.tn
        ));
    }
    if !matches!(c.vec, 1 | 2 | 4) {
        return Err(format!("vec={} (must be 1, 2 or 4)", c.vec));
    }
    if c.bk == 0 || !c.bk.is_multiple_of(c.vec) || c.bk > 64 {
        return Err(format!(
            "bk={} (must be a multiple of vec={} and at most 64)",
            c.bk, c.vec
        ));
    }
    if c.group_m == 0 {
        return Err("group_m=0 (must be >= 1)".into());
    }
    match c.stages {
        2 => {}
        3 | 4 if arch.has_cp_async() => {}
        3 | 4 => {
            return Err(format!(
                "stages={} uses cp.async, which {arch} lacks (use stages=2)",
                c.stages
            ))
        }
        s => return Err(format!("stages={s} (must be 2, 3 or 4)")),
    }
    let g = SimtGeometry::new(p, c).ok_or_else(|| format!("degenerate config {c:?}"))?;
    if !g.threads_n.is_power_of_two() || !g.threads_m.is_power_of_two() {
        return Err(format!(
            "thread grid {}x{} must be powers of two",
            g.threads_m, g.threads_n
        ));
    }
    if g.threads_m % g.warp_tm != 0 {
        return Err(format!(
            "thread rows {} not a multiple of a warp's {} rows",
            g.threads_m, g.warp_tm
        ));
    }
    if let Some(why) = misaligned(p, c.vec, true) {
        return Err(why);
    }
    if tile_count(p, c.bm, c.bn) > i32::MAX as u64 {
        return Err("more than i32::MAX output tiles".into());
    }
    if !matches!(c.min_blocks, 1 | 2) {
        return Err(format!("min_blocks={} (must be 1 or 2)", c.min_blocks));
    }
    if g.threads as u64 * c.min_blocks as u64 > max_threads_per_sm(arch) as u64 {
        return Err(format!(
            "min_blocks={} x {} threads exceeds {arch}'s {} threads per SM",
            c.min_blocks,
            g.threads,
            max_threads_per_sm(arch)
        ));
    }
    let reg_cap =
        (REGS_PER_BLOCK / (g.threads as u64 * c.min_blocks as u64)).min(MAX_REGS_PER_THREAD);
    if reg_cap < g.est_regs {
        return Err(format!(
            "min_blocks={} caps registers at {reg_cap} < estimated {}",
            c.min_blocks, g.est_regs
        ));
    }
    check_budgets(g.threads, g.smem_bytes, g.est_regs, arch)?;
    Ok(g)
}

/// Resident threads one SM holds (datasheet).
pub fn max_threads_per_sm(arch: Arch) -> u32 {
    match arch {
        Arch::Sm75 => 1024,
        Arch::Sm86 | Arch::Sm89 | Arch::Sm120 => 1536,
        Arch::Sm70 | Arch::Sm80 | Arch::Sm90 | Arch::Sm90a => 2048,
    }
}

/// Checks an `mma.sync` config against `p` on `arch`; the error names the broken rule.
pub fn check_mma(p: &GemmProblem, c: &MmaConfig, arch: Arch) -> Result<MmaGeometry, String> {
    check_problem_limits(p)?;
    if !arch.has_mma_sync() {
        return Err(format!("mma.sync needs sm_80 or newer, target is {arch}"));
    }
    let Some((_, chunk, kmma)) = mma_dtype_shape(p.dtype) else {
        return Err(format!(
            "dtype {} has no tensor-core path (use f16, bf16 or tf32)",
            p.dtype
        ));
    };
    if c.warps_m == 0 || c.warps_n == 0 || c.bm == 0 || c.bn == 0 {
        return Err("zero tile or warp count".into());
    }
    // u64: configs may come from an imported tuning database with any field values.
    let (warp_rows, warp_cols) = (c.warps_m as u64 * 16, c.warps_n as u64 * 16);
    if !(c.bm as u64).is_multiple_of(warp_rows) {
        return Err(format!(
            "bm={} is not a multiple of warps_m*16={warp_rows}",
            c.bm
        ));
    }
    if !(c.bn as u64).is_multiple_of(warp_cols) {
        return Err(format!(
            "bn={} is not a multiple of warps_n*16={warp_cols}",
            c.bn
        ));
    }
    if c.bk == 0 || !c.bk.is_multiple_of(kmma) || c.bk > 128 {
        return Err(format!(
            "bk={} (must be a positive multiple of {kmma} for {}, at most 128)",
            c.bk, p.dtype
        ));
    }
    if !c.bm.is_power_of_two() || !c.bn.is_power_of_two() || !c.bk.is_power_of_two() {
        return Err(format!(
            "tile {}x{}x{} must be powers of two (swizzle and chunk mapping)",
            c.bm, c.bn, c.bk
        ));
    }
    if !(2..=5).contains(&c.stages) {
        return Err(format!("stages={} (must be 2..=5)", c.stages));
    }
    if c.group_m == 0 {
        return Err("group_m=0 (must be >= 1)".into());
    }
    let k_tiles = tiles(p.k, c.bk);
    if c.split_k == 0 || c.split_k as u64 > k_tiles || c.split_k as u64 > MAX_GRID_YZ {
        return Err(format!(
            "split_k={} (must be in 1..=ceil(K/bk)={k_tiles})",
            c.split_k
        ));
    }
    if let Some(why) = misaligned(p, chunk, false) {
        return Err(why);
    }
    if tile_count(p, c.bm, c.bn) > i32::MAX as u64 {
        return Err("more than i32::MAX output tiles".into());
    }
    let g = MmaGeometry::new(p, c).ok_or_else(|| format!("degenerate config {c:?}"))?;
    // Split-K kernels add one static shared word (the last-block flag), 16 bytes with alignment.
    let static_smem = if c.split_k > 1 { 16 } else { 0 };
    check_budgets(g.threads, g.smem_bytes + static_smem, g.est_regs, arch)?;
    Ok(g)
}

/// Largest vector width in {4, 2, 1} the problem's leading dimensions and strides allow.
pub fn simt_max_vec(p: &GemmProblem) -> u32 {
    [4, 2, 1]
        .into_iter()
        .find(|&v| misaligned(p, v, true).is_none())
        .unwrap_or(1)
}

/// The discrete SIMT space (structurally sensible points; `check_simt` filters the rest).
/// Only the widest vector width the problem's alignment allows is offered (narrower ones are
/// never faster on the same data).
pub fn simt_space(p: &GemmProblem, arch: Arch) -> Vec<SimtConfig> {
    let mut v = Vec::new();
    let stages: &[u32] = if arch.has_cp_async() {
        &[2, 3, 4]
    } else {
        &[2]
    };
    let vec = simt_max_vec(p);
    for bm in [32, 64, 128, 256] {
        for bn in [32, 64, 128, 256] {
            for bk in [8, 16] {
                for tm in [4, 8, 16] {
                    for tn in [4, 8, 16] {
                        if bm % tm != 0 || bn % tn != 0 || tm * tn > 128 {
                            continue;
                        }
                        let threads = (bm / tm) * (bn / tn);
                        if !(64..=512).contains(&threads) {
                            continue;
                        }
                        for &stages in stages {
                            for group_m in [1, 8] {
                                for min_blocks in [1, 2] {
                                    v.push(SimtConfig {
                                        bm,
                                        bn,
                                        bk,
                                        tm,
                                        tn,
                                        stages,
                                        vec,
                                        group_m,
                                        min_blocks,
                                    });
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

/// The discrete `mma.sync` space. Split-K points are offered only when the output has few
/// tiles (at most 256 blocks for that tile shape) and K spans at least two tiles per slice.
pub fn mma_space(p: &GemmProblem, arch: Arch) -> Vec<MmaConfig> {
    let _ = arch;
    let bks: &[u32] = if p.dtype == DType::Tf32 {
        &[16, 32]
    } else {
        &[32, 64]
    };
    let warps: [(u32, u32); 5] = [(2, 2), (1, 4), (4, 1), (2, 4), (4, 2)];
    let mut v = Vec::new();
    for bm in [64, 128, 256] {
        for bn in [64, 128, 256] {
            for &bk in bks {
                for (warps_m, warps_n) in warps {
                    for stages in 2..=5 {
                        for split_k in [1, 2, 4, 8] {
                            if split_k > 1 {
                                let few = tile_count(p, bm, bn) * p.batch as u64 <= 256;
                                if !few || tiles(p.k, bk) < 2 * split_k as u64 {
                                    continue;
                                }
                            }
                            for swizzle in [true, false] {
                                for group_m in [1, 8] {
                                    v.push(MmaConfig {
                                        bm,
                                        bn,
                                        bk,
                                        warps_m,
                                        warps_n,
                                        stages,
                                        split_k,
                                        swizzle,
                                        group_m,
                                    });
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

/// Simplicity score of a SIMT config (lower is simpler; saturates for configs far outside the
/// space).
pub fn simt_complexity(c: &SimtConfig) -> u64 {
    [
        (c.stages as u64).saturating_sub(2) * 100_000,
        (c.bm as u64 * c.bn as u64) / 64 * 10,
        c.bk as u64 * 4,
        c.tm as u64 * c.tn as u64,
        (c.vec != 4) as u64,
        (c.group_m > 1) as u64,
        (c.min_blocks > 1) as u64,
    ]
    .into_iter()
    .fold(0, u64::saturating_add)
}

/// Simplicity score of an `mma.sync` config (lower is simpler; saturates for configs far
/// outside the space).
pub fn mma_complexity(c: &MmaConfig) -> u64 {
    [
        (c.split_k as u64).saturating_sub(1) * 1_000_000,
        (c.stages as u64).saturating_sub(2) * 100_000,
        (c.bm as u64 * c.bn as u64) / 64 * 10,
        c.bk as u64 * 4,
        c.warps_m as u64 * c.warps_n as u64,
        (!c.swizzle) as u64,
        (c.group_m > 1) as u64,
    ]
    .into_iter()
    .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::test_strategies::field;
    use proptest::prelude::*;

    #[test]
    fn simt_default_shape_geometry() {
        let p = GemmProblem::nn(4096, 4096, 4096, DType::F32);
        let c = SimtConfig {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
            stages: 2,
            vec: 4,
            group_m: 8,
            min_blocks: 2,
        };
        let g = check_simt(&p, &c, Arch::Sm90a).unwrap();
        assert_eq!(g.threads, 256);
        assert_eq!((g.warp_tm, g.warp_tn), (4, 8));
        // A is row-major: transposed into [8][128 + 4]; B row-major stays [8][128].
        assert_eq!(g.a_ld_s, 132);
        assert_eq!(g.smem_bytes, 2 * (8 * 132 + 8 * 128) * 4);
    }

    #[test]
    fn mma_default_shape_geometry() {
        let p = GemmProblem::new(4096, 4096, 4096, DType::F16, Layout::Row, Layout::Col);
        let c = MmaConfig {
            bm: 128,
            bn: 128,
            bk: 32,
            warps_m: 2,
            warps_n: 2,
            stages: 4,
            split_k: 1,
            swizzle: true,
            group_m: 8,
        };
        let g = check_mma(&p, &c, Arch::Sm90a).unwrap();
        assert_eq!(g.threads, 128);
        assert_eq!((g.mi, g.ni), (4, 8));
        assert_eq!(g.smem_bytes, 4 * (128 * 32 + 128 * 32) * 2);
        let padded = MmaConfig {
            swizzle: false,
            ..c
        };
        let gp = check_mma(&p, &padded, Arch::Sm90a).unwrap();
        assert_eq!(gp.a_ld_s, 40);
    }

    #[test]
    fn constraints_name_the_rule() {
        let p = GemmProblem::nn(100, 100, 100, DType::F16);
        let c = MmaConfig {
            bm: 128,
            bn: 128,
            bk: 32,
            warps_m: 2,
            warps_n: 2,
            stages: 4,
            split_k: 1,
            swizzle: true,
            group_m: 8,
        };
        assert!(check_mma(&p, &c, Arch::Sm75).unwrap_err().contains("sm_80"));
        // lda = 100 is not a multiple of 8 halves.
        assert!(check_mma(&p, &c, Arch::Sm90a).unwrap_err().contains("lda"));
        let p = GemmProblem::nn(128, 128, 64, DType::F16);
        let too_split = MmaConfig { split_k: 3, ..c };
        assert!(check_mma(&p, &too_split, Arch::Sm90a)
            .unwrap_err()
            .contains("split_k"));
        let pf = GemmProblem::nn(64, 64, 64, DType::F32);
        let s = SimtConfig {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
            stages: 3,
            vec: 4,
            group_m: 1,
            min_blocks: 1,
        };
        assert!(check_simt(&pf, &s, Arch::Sm75)
            .unwrap_err()
            .contains("cp.async"));
    }

    #[test]
    fn overflowing_config_fields_are_rejected_not_wrapped() {
        // tm * tn = 2^32 used to overflow (0 in release: "fits" 128 accumulators).
        let p = GemmProblem::nn(64, 64, 64, DType::F32);
        let s = SimtConfig {
            bm: 1 << 16,
            bn: 1 << 16,
            bk: 8,
            tm: 1 << 16,
            tn: 1 << 16,
            stages: 2,
            vec: 4,
            group_m: 1,
            min_blocks: 1,
        };
        assert!(check_simt(&p, &s, Arch::Sm90a)
            .unwrap_err()
            .contains("accumulators"));
        // A 2^16 x 2^15 thread grid (2^31 threads) x min_blocks 2 used to overflow.
        let wide = SimtConfig {
            bm: 1 << 18,
            bn: 1 << 17,
            tm: 4,
            tn: 4,
            min_blocks: 2,
            ..s
        };
        assert!(check_simt(&p, &wide, Arch::Sm90a).is_err());
        // warps_m * 16 = 2^32 used to overflow.
        let pb = GemmProblem::nn(64, 64, 64, DType::Bf16);
        let m = MmaConfig {
            bm: 64,
            bn: 64,
            bk: 32,
            warps_m: 1 << 28,
            warps_n: 1,
            stages: 2,
            split_k: 1,
            swizzle: false,
            group_m: 1,
        };
        assert!(check_mma(&pb, &m, Arch::Sm90a)
            .unwrap_err()
            .contains("warps_m"));
        // A 2^31-row tile: its shared-memory stage (rows x padded stride) overflows u32.
        let tall = MmaConfig {
            bm: 1 << 31,
            warps_m: 1,
            ..m
        };
        assert!(MmaGeometry::new(&pb, &tall).is_none());
        assert!(check_mma(&pb, &tall, Arch::Sm90a).is_err());
    }

    fn problems() -> impl Strategy<Value = GemmProblem> {
        (
            prop_oneof![any::<u32>(), 1u32..4096],
            prop_oneof![any::<u32>(), 1u32..4096],
            prop_oneof![any::<u32>(), 1u32..4096],
            proptest::sample::select(vec![DType::F32, DType::Tf32, DType::F16, DType::Bf16]),
        )
            .prop_map(|(m, n, k, d)| GemmProblem::nn(m, n, k, d))
    }

    proptest! {
        /// Any SIMT config fields: the check, the template's launch shape and the complexity
        /// score answer without panicking; an accepted config has a legal block.
        #[test]
        fn simt_check_never_panics(
            p in problems(),
            bm in field(&[32, 64, 128, 256]),
            bn in field(&[32, 64, 128, 256]),
            bk in field(&[8, 16]),
            tm in field(&[4, 8, 16]),
            tn in field(&[4, 8, 16]),
            stages in field(&[2, 3, 4]),
            vec in field(&[1, 2, 4]),
            group_m in field(&[1, 8]),
            min_blocks in field(&[1, 2]),
            arch in proptest::sample::select(vec![Arch::Sm75, Arch::Sm90a]),
        ) {
            use crate::templates::Template;
            let c = SimtConfig { bm, bn, bk, tm, tn, stages, vec, group_m, min_blocks };
            let t = super::super::SimtGemm;
            let _ = t.launch(&p, &c);
            let _ = simt_complexity(&c);
            if let Ok(g) = check_simt(&p, &c, arch) {
                prop_assert!(g.threads.is_multiple_of(32) && (32..=1024).contains(&g.threads));
                prop_assert_eq!(t.launch(&p, &c).block[0], g.threads);
            }
        }

        /// Any `mma.sync` config fields: as for SIMT.
        #[test]
        fn mma_check_never_panics(
            p in problems(),
            bm in field(&[64, 128, 256]),
            bn in field(&[64, 128, 256]),
            bk in field(&[16, 32, 64]),
            warps_m in field(&[1, 2, 4]),
            warps_n in field(&[1, 2, 4]),
            stages in field(&[2, 3, 4, 5]),
            split_k in field(&[1, 2, 4]),
            swizzle in any::<bool>(),
            group_m in field(&[1, 8]),
        ) {
            use crate::templates::Template;
            let c = MmaConfig { bm, bn, bk, warps_m, warps_n, stages, split_k, swizzle, group_m };
            let t = super::super::MmaGemm::default();
            let _ = t.launch(&p, &c);
            let _ = mma_complexity(&c);
            if let Ok(g) = check_mma(&p, &c, Arch::Sm90a) {
                prop_assert!(g.threads.is_multiple_of(32) && (32..=1024).contains(&g.threads));
                prop_assert_eq!(t.launch(&p, &c).block[0], g.threads);
            }
        }
    }

    #[test]
    fn complexity_prefers_fewer_stages_no_split_and_smaller_tiles() {
        let c = MmaConfig {
            bm: 128,
            bn: 128,
            bk: 32,
            warps_m: 2,
            warps_n: 2,
            stages: 3,
            split_k: 1,
            swizzle: true,
            group_m: 8,
        };
        let deeper = MmaConfig { stages: 4, ..c };
        let split = MmaConfig {
            split_k: 2,
            stages: 2,
            ..c
        };
        let smaller = MmaConfig { bm: 64, ..c };
        assert!(mma_complexity(&c) < mma_complexity(&deeper));
        assert!(mma_complexity(&deeper) < mma_complexity(&split));
        assert!(mma_complexity(&smaller) < mma_complexity(&c));
        let s = SimtConfig {
            bm: 128,
            bn: 128,
            bk: 8,
            tm: 8,
            tn: 8,
            stages: 2,
            vec: 4,
            group_m: 8,
            min_blocks: 1,
        };
        assert!(simt_complexity(&s) < simt_complexity(&SimtConfig { stages: 3, ..s }));
        assert!(simt_complexity(&SimtConfig { bm: 64, ..s }) < simt_complexity(&s));
    }
}
