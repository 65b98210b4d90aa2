//! Tensor-core GEMM with `mma.sync` (sm_80+: Ampere, Ada, Hopper, consumer Blackwell) for
//! f16 / bf16 (`m16n8k16`) and tf32 (`m16n8k8`) inputs, fp32 accumulation.
//!
//! Structure: a `BM x BN` block tile split over `warps_m x warps_n` warps; each warp owns
//! `MI x NI` mma tiles (16x8). Operands stream through a `stages`-deep `cp.async` ring (16-byte
//! copies, zero-filled outside the matrix). Fragments come from shared memory with `ldmatrix`:
//! a K-contiguous operand (row-major A, column-major B) is stored `[mn][k]` and loaded without
//! `.trans`; an M/N-contiguous one is stored `[k][mn]` and loaded with `.trans` (16-bit types).
//! tf32 M/N-contiguous operands use scalar shared loads instead (`.trans` moves 16-bit elements
//! only). Shared tiles are XOR-swizzled at 16-byte granularity (`swizzle = true`) or padded by
//! 16 bytes per row, both bank-conflict-free for `ldmatrix`. tf32 values are rounded with
//! `cvt.rna.tf32.f32`.
//!
//! Split-K (`split_k > 1`, `gridDim.y` slices): every slice writes its fp32 partial tile to a
//! workspace, then bumps a per-tile counter; the last-arriving block of a tile sums the slices
//! in slice order (deterministic), applies the epilogue exactly once, and resets the counter to
//! zero. So it is a "serial reduction in the last block", not atomics on the data and not a
//! second kernel. Such kernels take one extra argument after `beta`:
//! `unsigned char* workspace` of [`MmaGemm::workspace_bytes`] bytes whose first
//! [`MmaGemm::counter_bytes`] bytes must be zero before the first launch (the kernel leaves them
//! zero again). Concurrent launches must not share a workspace.
//!
//! Alignment (checked): `lda`, `ldb` and batch strides multiples of 16 bytes; base pointers
//! 16-byte aligned. C is written in pairs when `ldc` and `stride_c` are even (decided at run
//! time), else element by element.

use super::prelude::{self, EpilogueSpec};
use super::problem::{GemmProblem, Layout};
use super::space::{self, MmaConfig, MmaGeometry};
use crate::templates::codegen::CudaWriter;
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::{Arch, DType};

/// The fewest k-blocks a split-K slice of [`tf32_small_m_config`] keeps.
pub const SPLIT_K_MIN_K_TILES: u64 = 32;

/// tf32 configs for M <= 256: the winners of guided tuning at 64 / 128 / 256 x 8192^2 NN on an
/// H100 (call CL, `rtx-tune --family mma`, 30 s each): 107.0 us (1.02x cuBLAS), 161.3 us
/// (0.68x) and 265.9 us (0.47x), where the 128x128 default ran 303-308 us (call CK). As
/// defaults in the suite (call CM): 110.1 / 162.3 / 269.7 us, and 306.6 at 192 x 8192^2 (the
/// 128x128 default's 305 there, so no loss). Small tiles and split-K give the grid enough
/// blocks to stream B at these M; where the grid is still under one wave (a small N), split-K
/// doubles until it is not: one block per SM of a device with `sm_count` SMs. Call CQ (H100, 132
/// SMs): splitting toward 256 blocks won where the grid was under a wave (256 x 1024 x 8192
/// 200.2 -> 71.7 us, 64 x 512 x 16384 113.4 -> 49.8, 256 x 4096^2 103.6 -> 90.3) and lost where
/// it already filled one (224 x 6144^2, 192 blocks: 232.0 -> 246.4; 200 x 5000^2, 158: 193.2 ->
/// 201.2), so the target is one wave. Off Hopper these defaults, and a wave of another SM
/// count, serve every tf32 M <= 256 unmeasured. `None` for other dtypes and larger M.
pub fn tf32_small_m_config(p: &GemmProblem, sm_count: u32) -> Option<MmaConfig> {
    if p.dtype != DType::Tf32 {
        return None;
    }
    let (bm, bn, bk, warps_m, warps_n, stages, split_k) = match p.m {
        0..=64 => (64, 64, 32, 2, 2, 3, 2),
        65..=128 => (64, 128, 16, 1, 4, 5, 2),
        129..=256 => (128, 64, 16, 2, 2, 5, 1),
        _ => return None,
    };
    // A grid under one wave (a small N) leaves SMs idle while B streams: split K further, in
    // powers of two up to 8, until the grid has a block per SM or a slice would fall under
    // SPLIT_K_MIN_K_TILES k-blocks.
    let tiles = space::tile_count(p, bm, bn) * p.batch as u64;
    let k_tiles = space::tiles(p.k, bk);
    let mut split_k = split_k;
    while tiles * (split_k as u64) < u64::from(sm_count.max(1))
        && split_k < 8
        && k_tiles >= 2 * split_k as u64 * SPLIT_K_MIN_K_TILES
    {
        split_k *= 2;
    }
    Some(MmaConfig {
        bm,
        bn,
        bk,
        warps_m,
        warps_n,
        stages,
        split_k,
        swizzle: true,
        group_m: 8,
    })
}

/// The `mma.sync` tensor-core GEMM template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaGemm {
    /// SMs of the target device: the tf32 small-M default splits K toward one block per SM
    /// ([`tf32_small_m_config`]). Nothing else depends on it.
    pub sm_count: u32,
}

impl Default for MmaGemm {
    fn default() -> Self {
        MmaGemm::new(super::DEFAULT_SM_COUNT)
    }
}

/// Template name used in symbols, caches and the tuning database.
pub const MMA_NAME: &str = "gemm_mma";
/// Bump on any change to the generated code.
pub const MMA_VERSION: u32 = 3;

impl MmaGemm {
    /// A template for a device with `sm_count` SMs (at least 1).
    pub fn new(sm_count: u32) -> Self {
        MmaGemm {
            sm_count: sm_count.max(1),
        }
    }

    fn violation(&self, c: &MmaConfig, reason: String) -> ConstraintViolation {
        ConstraintViolation {
            template: MMA_NAME.to_string(),
            config: format!("{c:?}"),
            reason,
        }
    }

    /// The kernel's entry symbol for this problem and config (encodes everything baked in).
    pub fn entry_name(p: &GemmProblem, c: &MmaConfig) -> String {
        let l = |l: Layout| if l == Layout::Row { 'r' } else { 'c' };
        format!(
            "rtx_gemm_mma_{}_{}{}_{}_bm{}_bn{}_bk{}_w{}x{}_s{}_k{}_{}_g{}",
            p.dtype.name(),
            l(p.layout_a),
            l(p.layout_b),
            EpilogueSpec::of(p).tag(),
            c.bm,
            c.bn,
            c.bk,
            c.warps_m,
            c.warps_n,
            c.stages,
            c.split_k,
            if c.swizzle { "swz" } else { "pad" },
            c.group_m
        )
    }

    /// Bytes of tile counters at the start of the split-K workspace (0 without split-K).
    pub fn counter_bytes(p: &GemmProblem, c: &MmaConfig) -> u64 {
        if c.split_k <= 1 {
            return 0;
        }
        let counters = space::tile_count(p, c.bm.max(1), c.bn.max(1)) * p.batch as u64 * 4;
        counters.div_ceil(256) * 256
    }

    /// Total split-K workspace bytes: counters, then `batch * split_k * M * N` f32 partials
    /// (0 without split-K: such kernels take no workspace argument).
    pub fn workspace_bytes(p: &GemmProblem, c: &MmaConfig) -> u64 {
        if c.split_k <= 1 {
            return 0;
        }
        Self::counter_bytes(p, c) + p.batch as u64 * c.split_k as u64 * p.m as u64 * p.n as u64 * 4
    }
}

/// Writes the constants of one mma instance.
fn emit_constants(w: &mut CudaWriter, p: &GemmProblem, c: &MmaConfig, g: &MmaGeometry) {
    w.comment("---- configuration (from MmaConfig / MmaGeometry) ----");
    w.line(format!("using TIn = {};", p.dtype.cuda_type()));
    let kind = match p.dtype {
        DType::F16 => 0,
        DType::Bf16 => 1,
        _ => 2,
    };
    w.constant("int", "KIND", kind);
    w.constant("int", "BM", c.bm);
    w.constant("int", "BN", c.bn);
    w.constant("int", "BK", c.bk);
    w.constant("int", "WARPS_M", c.warps_m);
    w.constant("int", "WARPS_N", c.warps_n);
    w.constant("int", "STAGES", c.stages);
    w.constant("int", "SPLIT_K", c.split_k);
    w.constant("int", "GROUP_M", c.group_m);
    w.constant("bool", "A_K", g.a_kcontig);
    w.constant("bool", "B_K", g.b_kcontig);
    w.constant("bool", "A_SWZ", g.a_swizzle);
    w.constant("bool", "B_SWZ", g.b_swizzle);
    w.constant("int", "A_LD_S", g.a_ld_s);
    w.constant("int", "B_LD_S", g.b_ld_s);
    w.constant("int", "A_STAGE", g.a_stage);
    w.constant("int", "B_STAGE", g.b_stage);
}

/// Device code of the mma kernel helpers (reads the constants above).
const MMA_BODY: &str = r#"
constexpr int E = (int)sizeof(TIn);
constexpr int CE = 16 / E;                  // elements per 16-byte chunk
constexpr int KMMA = KIND == 2 ? 8 : 16;    // K of one mma instruction
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WM = BM / WARPS_M;
constexpr int WN = BN / WARPS_N;
constexpr int MI = WM / 16;
constexpr int NI = WN / 8;
constexpr int A_ROWS = A_K ? BM : BK;
constexpr int A_COLS = A_K ? BK : BM;
constexpr int B_ROWS = B_K ? BN : BK;
constexpr int B_COLS = B_K ? BK : BN;
static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % KMMA == 0, "tile shape");

// Element offset of (r, c) in a shared tile of COLS contiguous columns and row stride LD.
// Swizzled: the 16-byte chunk index is XORed with a row function so that the 8 rows one
// ldmatrix phase reads fall in 8 distinct bank groups.
template <int COLS, bool SWZ, int LD>
__device__ __forceinline__ int mma_soff(int r, int c) {
  if constexpr (SWZ) {
    constexpr int CPR = COLS / CE;
    int f;
    if constexpr (CPR >= 8) {
      f = r & 7;
    } else {
      f = (r / (8 / CPR)) & (CPR - 1);
    }
    return r * LD + (((c / CE) ^ f) * CE) + (c % CE);
  } else {
    return r * LD + c;
  }
}

// Global tile (ROWS x COLS, COLS contiguous) -> shared via 16-byte cp.async, zero-filling
// everything outside [0, row_lim) x [0, col_lim).
template <int ROWS, int COLS, bool SWZ, int LD>
__device__ __forceinline__ void mma_load_tile(TIn* s, const TIn* __restrict__ g, int ld, int row0, int col0,
                                              int row_lim, int col_lim, int tid) {
  constexpr int CPR = COLS / CE;
  constexpr int CHUNKS = ROWS * CPR;
  constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    const int idx = tid + i * THREADS;
    if (CHUNKS % THREADS == 0 || idx < CHUNKS) {
      const int r = idx / CPR;
      const int c = (idx % CPR) * CE;
      const int gr = row0 + r;
      const int gc = col0 + c;
      const int valid = gr < row_lim ? rtx_min(rtx_max(col_lim - gc, 0), CE) : 0;
      const TIn* src = valid > 0 ? g + (long long)gr * ld + gc : g;
      rtx_cp_async16(rtx_smem_addr(s + mma_soff<COLS, SWZ, LD>(r, c)), src, valid * E);
    }
  }
}

// Per-thread cp.async plan of one operand tile, computed once per block. When the chunks
// divide evenly (CPR | THREADS and THREADS | CHUNKS) chunk i of a thread sits at tile row
// r0 + i*RPI, column c0; the source pointer is loop-carried and advanced by one tile per load
// (tiles are loaded in order), so a k step costs a few instructions per copy. Interior tiles use
// unpredicated copies; edge tiles zero-fill. Otherwise it falls back to mma_load_tile.
// KC: the tile is [mn][k] (K-contiguous), else [k][mn].
template <int ROWS, int COLS, bool SWZ, int LD, bool KC>
struct MmaLoader {
  static constexpr int CPR = COLS / CE;
  static constexpr int CHUNKS = ROWS * CPR;
  static constexpr bool EVEN = (THREADS % CPR == 0) && (CHUNKS % THREADS == 0);
  static constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  static constexpr int RPI = EVEN ? THREADS / CPR : 1;
  static_assert(ITERS <= 32, "row mask holds 32 chunks");
  const TIn* g;        // matrix base (also the dummy source of fully masked copies)
  const TIn* cur;      // EVEN: chunk 0 of the next tile to load
  long long row_step;  // EVEN: elements between chunk i and i+1
  long long tile_step; // EVEN: elements between consecutive k tiles
  int ld, mn0, mn_lim, r0, c0;
  unsigned row_ok;     // EVEN && KC: bit i = chunk i's (M/N) row is inside the matrix
  int col_cnt;         // EVEN && !KC: valid elements of the chunk's (M/N) columns
  bool mn_full;        // the tile's whole M/N extent is inside the matrix (block-uniform)

  // k_begin: first K index of the first tile this block loads.
  __device__ __forceinline__ void init(const TIn* g_, int ld_, int mn0_, int mn_lim_, int k_begin, int tid) {
    g = g_; ld = ld_; mn0 = mn0_; mn_lim = mn_lim_;
    r0 = tid / CPR;
    c0 = (tid % CPR) * CE;
    row_step = (long long)RPI * ld;
    tile_step = KC ? (long long)BK : (long long)BK * ld;
    row_ok = 0u;
    col_cnt = 0;
    mn_full = mn0 + (KC ? ROWS : COLS) <= mn_lim;
    if constexpr (KC) {
      cur = g + (long long)(mn0 + r0) * ld + c0 + k_begin;
#pragma unroll
      for (int i = 0; i < ITERS; ++i) row_ok |= (mn0 + r0 + i * RPI < mn_lim ? 1u : 0u) << i;
    } else {
      cur = g + (long long)(r0 + k_begin) * ld + mn0 + c0;
      col_cnt = rtx_min(rtx_max(mn_lim - mn0 - c0, 0), CE);
    }
  }

  // Copies the next tile (first K index k0, valid K indices < kend) into stage `s`.
  __device__ __forceinline__ void load(TIn* s, int k0, int kend, int tid) {
    if constexpr (!EVEN) {
      if constexpr (KC) {
        mma_load_tile<ROWS, COLS, SWZ, LD>(s, g, ld, mn0, k0, mn_lim, kend, tid);
      } else {
        mma_load_tile<ROWS, COLS, SWZ, LD>(s, g, ld, k0, mn0, kend, mn_lim, tid);
      }
    } else {
      const TIn* p = cur;
      if (mn_full && k0 + BK <= kend) {
        // Interior tile (block-uniform branch): no bounds, no zero-fill.
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
          rtx_cp_async16_full(rtx_smem_addr(s + mma_soff<COLS, SWZ, LD>(r0 + i * RPI, c0)), p);
          p += row_step;
        }
      } else if constexpr (KC) {
        const int kcnt = rtx_min(rtx_max(kend - k0 - c0, 0), CE);
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
          const int valid = ((row_ok >> i) & 1u) ? kcnt : 0;
          rtx_cp_async16(rtx_smem_addr(s + mma_soff<COLS, SWZ, LD>(r0 + i * RPI, c0)), valid > 0 ? p : g, valid * E);
          p += row_step;
        }
      } else {
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
          const int valid = k0 + r0 + i * RPI < kend ? col_cnt : 0;
          rtx_cp_async16(rtx_smem_addr(s + mma_soff<COLS, SWZ, LD>(r0 + i * RPI, c0)), valid > 0 ? p : g, valid * E);
          p += row_step;
        }
      }
      cur += tile_step;
    }
  }
};

__device__ __forceinline__ void mma_ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void mma_ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ unsigned mma_tf32(float x) {
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
  return u;
}
__device__ __forceinline__ float mma_bits_f32(unsigned u) { return __uint_as_float(u); }

// D += A * B for one 16x8 tile (A: 4 regs, B: 2 regs, D: 4 f32).
__device__ __forceinline__ void mma_op(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  if constexpr (KIND == 0) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (KIND == 1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// Fragment layouts (PTX ISA, g = lane / 4, t = lane % 4):
//  m16n8k16 A: a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..); B: b0 (k 2t.., n g) b1 (k 2t+8.., n g)
//  m16n8k8 tf32 A: a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4); B: b0 (k t, n g) b1 (k t+4, n g)
//  C/D: c0,c1 (g, 2t..2t+1) c2,c3 (g+8, 2t..2t+1)
// ldmatrix.x4: lanes 8i..8i+7 give the 8 row addresses of matrix i, register i holds matrix i.
__device__ __forceinline__ void mma_compute(const TIn* sA, const TIn* sB, int wm0, int wn0, int lane,
                                            float (&acc)[MI][NI][4]) {
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int kk = 0; kk < BK; kk += KMMA) {
    unsigned af[MI][4];
    unsigned bf[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m = wm0 + mi * 16;
      if constexpr (A_K) {
        // [m][k]: matrices (rows 0-7 | 8-15) x (k 0.. | k KMMA/2..) -> a0..a3.
        mma_ldsm_x4(af[mi], rtx_smem_addr(sA + mma_soff<A_COLS, A_SWZ, A_LD_S>(m + (lane & 15), kk + (lane >> 4) * (KMMA / 2))));
        if constexpr (KIND == 2) {
#pragma unroll
          for (int j = 0; j < 4; ++j) af[mi][j] = mma_tf32(mma_bits_f32(af[mi][j]));
        }
      } else if constexpr (KIND != 2) {
        // [k][m] with .trans: matrix i = (m half i%2, k half i/2).
        mma_ldsm_x4_t(af[mi], rtx_smem_addr(sA + mma_soff<A_COLS, A_SWZ, A_LD_S>(kk + (lane & 7) + ((lane >> 4) << 3), m + (((lane >> 3) & 1) << 3))));
      } else {
        af[mi][0] = mma_tf32(sA[mma_soff<A_COLS, A_SWZ, A_LD_S>(kk + t, m + g)]);
        af[mi][1] = mma_tf32(sA[mma_soff<A_COLS, A_SWZ, A_LD_S>(kk + t, m + g + 8)]);
        af[mi][2] = mma_tf32(sA[mma_soff<A_COLS, A_SWZ, A_LD_S>(kk + t + 4, m + g)]);
        af[mi][3] = mma_tf32(sA[mma_soff<A_COLS, A_SWZ, A_LD_S>(kk + t + 4, m + g + 8)]);
      }
    }
#pragma unroll
    for (int np = 0; np < NI / 2; ++np) {
      const int n = wn0 + np * 16;
      if constexpr (B_K) {
        // [n][k]: matrix i = (n half i/2, k half i%2) -> b0, b1 of tile 2np, then of 2np+1.
        unsigned r[4];
        mma_ldsm_x4(r, rtx_smem_addr(sB + mma_soff<B_COLS, B_SWZ, B_LD_S>(n + (lane & 7) + ((lane >> 4) << 3), kk + ((lane >> 3) & 1) * (KMMA / 2))));
        if constexpr (KIND == 2) {
#pragma unroll
          for (int j = 0; j < 4; ++j) r[j] = mma_tf32(mma_bits_f32(r[j]));
        }
        bf[2 * np][0] = r[0];
        bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2];
        bf[2 * np + 1][1] = r[3];
      } else if constexpr (KIND != 2) {
        // [k][n] with .trans: matrix i = (k half i%2, n half i/2).
        unsigned r[4];
        mma_ldsm_x4_t(r, rtx_smem_addr(sB + mma_soff<B_COLS, B_SWZ, B_LD_S>(kk + (lane & 7) + (((lane >> 3) & 1) << 3), n + ((lane >> 4) << 3))));
        bf[2 * np][0] = r[0];
        bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2];
        bf[2 * np + 1][1] = r[3];
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          bf[2 * np + h][0] = mma_tf32(sB[mma_soff<B_COLS, B_SWZ, B_LD_S>(kk + t, n + h * 8 + g)]);
          bf[2 * np + h][1] = mma_tf32(sB[mma_soff<B_COLS, B_SWZ, B_LD_S>(kk + t + 4, n + h * 8 + g)]);
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma_op(acc[mi][ni], af[mi], bf[ni]);
    }
  }
}
"#;

/// The kernel's body after the signature.
const MMA_MAIN: &str = r#"
  extern __shared__ __align__(128) unsigned char smem_raw[];
  TIn* const sA0 = reinterpret_cast<TIn*>(smem_raw);
  TIn* const sB0 = sA0 + STAGES * A_STAGE;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wm0 = (warp / WARPS_N) * WM;
  const int wn0 = (warp % WARPS_N) * WN;
  const int tiles_m = (M + BM - 1) / BM;
  const int tiles_n = (N + BN - 1) / BN;
  int pm, pn;
  rtx_tile_coords(blockIdx.x, tiles_m, tiles_n, GROUP_M, pm, pn);
  const int m0 = pm * BM;
  const int n0 = pn * BN;
  const long long z = blockIdx.z;
  A += z * stride_a;
  B += z * stride_b;
  C += z * stride_c;
  if constexpr (EPI_RES) residual += z * stride_c;

  // K range of this block: all of K, or split-K slice blockIdx.y (whole BK tiles; may be empty).
  const int ktiles_all = (K + BK - 1) / BK;
  int kt0 = 0;
  int ntiles = ktiles_all;
  int kend = K;
  if constexpr (SPLIT_K > 1) {
    const int per = (ktiles_all + SPLIT_K - 1) / SPLIT_K;
    kt0 = blockIdx.y * per;
    const int kt1 = rtx_min(ktiles_all, kt0 + per);
    ntiles = rtx_max(kt1 - kt0, 0);
    kend = rtx_min(K, kt1 * BK);
  }

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
    }
  }

  MmaLoader<A_ROWS, A_COLS, A_SWZ, A_LD_S, A_K> a_ld;
  MmaLoader<B_ROWS, B_COLS, B_SWZ, B_LD_S, B_K> b_ld;
  a_ld.init(A, lda, m0, M, kt0 * BK, tid);
  b_ld.init(B, ldb, n0, N, kt0 * BK, tid);
  auto load_stage = [&](int stage, int j) {
    const int k0 = (kt0 + j) * BK;
    a_ld.load(sA0 + stage * A_STAGE, k0, kend, tid);
    b_ld.load(sB0 + stage * B_STAGE, k0, kend, tid);
  };

  // cp.async ring: one commit group per k tile (empty groups keep the count uniform).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles) load_stage(s, s);
    rtx_cp_async_commit();
  }
  for (int j = 0; j < ntiles; ++j) {
    rtx_cp_async_wait<STAGES - 2>();  // this thread's copies of tile j are done
    __syncthreads();                   // everyone's are; and stage (j-1) % STAGES is no longer read
    const int jn = j + STAGES - 1;
    if (jn < ntiles) load_stage(jn % STAGES, jn);
    rtx_cp_async_commit();
    const int s = j % STAGES;
    mma_compute(sA0 + s * A_STAGE, sB0 + s * B_STAGE, wm0, wn0, lane, acc);
  }
  rtx_cp_async_wait<0>();

  const int g = lane >> 2;
  const int t = lane & 3;
  if constexpr (SPLIT_K > 1) {
    // Serial split-K: publish this slice, the last block of the tile reduces in slice order.
    __shared__ unsigned rtx_is_last;
    unsigned* counters = reinterpret_cast<unsigned*>(workspace);
    const long long counter_bytes = (((long long)gridDim.x * gridDim.z * 4 + 255) / 256) * 256;
    float* part = reinterpret_cast<float*>(workspace + counter_bytes);
    const long long mn = (long long)M * N;
    float* zpart = part + z * SPLIT_K * mn;
    float* mine = zpart + (long long)blockIdx.y * mn;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + wm0 + mi * 16 + g + (e >> 1) * 8;
          const int col = n0 + wn0 + ni * 8 + 2 * t + (e & 1);
          if (row < M && col < N) mine[(long long)row * N + col] = acc[mi][ni][e];
        }
      }
    }
    __threadfence();
    __syncthreads();
    const unsigned counter = (unsigned)(blockIdx.z * gridDim.x + blockIdx.x);
    if (tid == 0) {
      const unsigned prev = atomicAdd(&counters[counter], 1u);
      rtx_is_last = prev == (unsigned)(SPLIT_K - 1) ? 1u : 0u;
    }
    __syncthreads();
    if (rtx_is_last == 0u) return;
    __threadfence();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + wm0 + mi * 16 + g + (e >> 1) * 8;
          const int col = n0 + wn0 + ni * 8 + 2 * t + (e & 1);
          if (row < M && col < N) {
            const float* p = zpart + (long long)row * N + col;
            float sum = 0.0f;
#pragma unroll
            for (int q = 0; q < SPLIT_K; ++q) sum += __ldcg(p + q * mn);
            acc[mi][ni][e] = sum;
          }
        }
      }
    }
    if (tid == 0) counters[counter] = 0u;
  }

  // Epilogue straight from the accumulator fragments: pairs (c0,c1) / (c2,c3) per row.
  const bool pair_ok = ((ldc | (int)(stride_c & 1)) & 1) == 0;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int col = n0 + wn0 + ni * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + wm0 + mi * 16 + g + h * 8;
        if (row < M) {
          const float* v = &acc[mi][ni][2 * h];
          const long long off = (long long)row * ldc + col;
          if (pair_ok && col + 1 < N) {
            rtx_epi_store<2>(C, bias, residual, off, col, v, alpha, beta);
          } else {
            if (col < N) rtx_epi_store<1>(C, bias, residual, off, col, v, alpha, beta);
            if (col + 1 < N) rtx_epi_store<1>(C, bias, residual, off + 1, col + 1, v + 1, alpha, beta);
          }
        }
      }
    }
  }
"#;

/// Generates the mma kernel for a checked config.
fn emit_source(p: &GemmProblem, c: &MmaConfig, g: &MmaGeometry) -> KernelSource {
    let entry = MmaGemm::entry_name(p, c);
    let mut w = CudaWriter::new();
    w.comment(format!("rtx {MMA_NAME} v{MMA_VERSION}: {entry}"));
    prelude::emit_common(&mut w);
    prelude::emit_epilogue(&mut w, EpilogueSpec::of(p));
    emit_constants(&mut w, p, c, g);
    w.lines(MMA_BODY);
    // One resident block per SM is the floor ptxas must plan for: without the explicit `, 1`
    // it trades registers for occupancy and spills some tf32 variants on sm_120.
    w.line(format!(
        "extern \"C\" __global__ void __launch_bounds__({}, 1) {entry}(",
        g.threads
    ));
    w.line(
        "    const TIn* __restrict__ A, const TIn* __restrict__ B, TOut* C, const TOut* bias, const TOut* residual,",
    );
    w.line("    int M, int N, int K, int lda, int ldb, int ldc,");
    w.line("    long long stride_a, long long stride_b, long long stride_c,");
    if c.split_k > 1 {
        w.line("    float alpha, float beta, unsigned char* workspace");
    } else {
        w.line("    float alpha, float beta");
    }
    w.open(")");
    if c.split_k <= 1 {
        w.line("unsigned char* const workspace = nullptr;  // no split-K: the reduction code is discarded");
    }
    w.lines(MMA_MAIN);
    w.close("");
    KernelSource {
        entry,
        code: w.finish(),
        template: MMA_NAME.to_string(),
        template_version: MMA_VERSION,
        options: vec!["-DNDEBUG".to_string()],
    }
}

impl Template for MmaGemm {
    type Problem = GemmProblem;
    type Config = MmaConfig;

    fn name(&self) -> &'static str {
        MMA_NAME
    }

    fn version(&self) -> u32 {
        MMA_VERSION
    }

    fn space(&self, problem: &GemmProblem, arch: Arch) -> Vec<MmaConfig> {
        space::mma_space(problem, arch)
    }

    fn check(
        &self,
        problem: &GemmProblem,
        config: &MmaConfig,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        space::check_mma(problem, config, arch)
            .map(|_| ())
            .map_err(|r| self.violation(config, r))
    }

    /// 128x128 block, 2x2 warps (64x64 warp tiles), 4 stages, swizzled, group 8; BK 32
    /// (16-bit inputs) or 16 (tf32) so the ring is 64-66 KiB on every sm_80+ part. tf32 with
    /// M <= 256 takes [`tf32_small_m_config`] where it is legal.
    fn default_config(&self, problem: &GemmProblem, arch: Arch) -> MmaConfig {
        if let Some(c) = tf32_small_m_config(problem, self.sm_count)
            .filter(|c| space::check_mma(problem, c, arch).is_ok())
        {
            return c;
        }
        let bk = if problem.dtype == DType::Tf32 { 16 } else { 32 };
        MmaConfig {
            bm: 128,
            bn: 128,
            bk,
            warps_m: 2,
            warps_n: 2,
            stages: 4,
            split_k: 1,
            swizzle: true,
            group_m: 8,
        }
    }

    fn emit(
        &self,
        problem: &GemmProblem,
        config: &MmaConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        let g = space::check_mma(problem, config, arch).map_err(|r| self.violation(config, r))?;
        Ok(emit_source(problem, config, &g))
    }

    fn launch(&self, problem: &GemmProblem, config: &MmaConfig) -> LaunchDims {
        let smem = MmaGeometry::new(problem, config).map_or(0, |g| g.smem_bytes as u32);
        LaunchDims {
            grid: [
                space::tile_count(problem, config.bm.max(1), config.bn.max(1)) as u32,
                config.split_k,
                problem.batch,
            ],
            block: [
                config
                    .warps_m
                    .saturating_mul(config.warps_n)
                    .saturating_mul(32),
                1,
                1,
            ],
            dynamic_smem: smem,
        }
    }

    fn complexity(&self, config: &MmaConfig) -> u64 {
        space::mma_complexity(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_small_m_defaults_are_call_cl_winners_and_legal() {
        let t = MmaGemm::default();
        for (m, want) in [
            (64, (64, 64, 32, 2)),
            (128, (64, 128, 16, 2)),
            (256, (128, 64, 16, 1)),
        ] {
            let p = GemmProblem::nn(m, 8192, 8192, DType::Tf32);
            let c = t.default_config(&p, Arch::Sm90a);
            assert_eq!((c.bm, c.bn, c.bk, c.split_k), want, "{m}");
            t.check(&p, &c, Arch::Sm90a).unwrap();
        }
        // Other dtypes and larger M keep 128x128.
        for p in [
            GemmProblem::nn(64, 8192, 8192, DType::Bf16),
            GemmProblem::nn(257, 8192, 8192, DType::Tf32),
        ] {
            let c = t.default_config(&p, Arch::Sm90a);
            assert_eq!((c.bm, c.bn, c.split_k), (128, 128, 1), "{p:?}");
        }
        // A grid under one wave splits K further, slices of at least 32 k-blocks; one wave or
        // more keeps the band's split (call CQ).
        for ((m, n, k), want) in [
            ((256, 1024, 8192), 8),
            ((256, 2048, 8192), 4),
            ((256, 4096, 4096), 2),
            ((128, 2048, 8192), 8),
            ((96, 4096, 4096), 4),
            ((64, 512, 16384), 8),
            ((64, 1024, 1024), 2),
            ((256, 1024, 1024), 2),
            ((224, 6144, 6144), 1),
            ((200, 5000, 5000), 1),
        ] {
            let p = GemmProblem::nn(m, n, k, DType::Tf32);
            let c = t.default_config(&p, Arch::Sm90a);
            assert_eq!(c.split_k, want, "{m}x{n}x{k}");
            t.check(&p, &c, Arch::Sm90a).unwrap();
        }
        // The wave is the device's: 200 x 5000^2 (158 blocks) splits on 170 SMs (an RTX 5090),
        // 256 x 1024 x 8192 (32 blocks) stops at 4 on 114 (an H100 PCIe).
        for (sms, (m, n, k), want) in [
            (170, (200, 5000, 5000), 2),
            (132, (200, 5000, 5000), 1),
            (114, (256, 1024, 8192), 4),
            (0, (256, 1024, 8192), 1),
        ] {
            let p = GemmProblem::nn(m, n, k, DType::Tf32);
            let c = MmaGemm::new(sms).default_config(&p, Arch::Sm90a);
            assert_eq!(c.split_k, want, "{sms} SMs, {m}x{n}x{k}");
        }
        // Where split-K is not legal (one k-block) the 128x128 default serves.
        let short = GemmProblem::nn(64, 8192, 16, DType::Tf32);
        let c = t.default_config(&short, Arch::Sm90a);
        t.check(&short, &c, Arch::Sm90a).unwrap();
    }

    #[test]
    fn default_is_valid_on_every_mma_arch_and_dtype() {
        let t = MmaGemm::default();
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90a, Arch::Sm120] {
            for d in [DType::F16, DType::Bf16, DType::Tf32] {
                for (la, lb) in [(Layout::Row, Layout::Row), (Layout::Col, Layout::Col)] {
                    let p = GemmProblem::new(512, 512, 512, d, la, lb);
                    let c = t.default_config(&p, arch);
                    t.check(&p, &c, arch).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
    }

    #[test]
    fn split_k_signature_and_workspace() {
        let t = MmaGemm::default();
        let p = GemmProblem::nn(256, 256, 4096, DType::Bf16).batched(2);
        let c = MmaConfig {
            split_k: 4,
            ..t.default_config(&p, Arch::Sm90a)
        };
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(src.code.contains("unsigned char* workspace"));
        assert_eq!(MmaGemm::counter_bytes(&p, &c), 256);
        assert_eq!(
            MmaGemm::workspace_bytes(&p, &c),
            256 + 2 * 4 * 256 * 256 * 4
        );
        assert_eq!(t.launch(&p, &c).grid, [4, 4, 2]);
        let plain = t
            .emit(&p, &t.default_config(&p, Arch::Sm90a), Arch::Sm90a)
            .unwrap();
        assert!(
            plain.code.contains("float alpha, float beta\n"),
            "no extra argument without split-K"
        );
    }
}
