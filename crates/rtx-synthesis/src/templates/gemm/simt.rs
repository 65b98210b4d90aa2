//! fp32 SIMT (CUDA-core) GEMM for every architecture from sm_70.
//!
//! Design (the classic high-throughput SGEMM): a `BM x BN` block tile per thread block, a
//! `TM x TN` register tile per thread made of 4x4 sub-tiles spread `BM/(TM/4)` rows apart so that
//! a warp's `float4` shared-memory reads hit distinct banks, and both operand tiles stored K-major
//! (`[k][m]`, `[k][n]`) so each k step is `TM/4 + TN/4` `LDS.128` feeding `TM*TN` FFMAs.
//!
//! Pipelines (`SimtConfig::stages`):
//! - `2`: register-staged double buffer (every arch): the next tile's global loads are issued
//!   into registers before computing the current tile, then stored (transposing a K-contiguous
//!   operand) into the other shared buffer; one `__syncthreads` per k tile.
//! - `3`, `4`: a `cp.async` ring of that many stages (sm_80+). A K-contiguous operand
//!   (row-major A, column-major B) is transposed by the copy itself (one 4-byte `cp.async` per
//!   element into the padded `[k][mn]` tile), so both pipelines read `LDS.128` fragments.
//!
//! Fragments are double buffered in registers (k row `kk + 1` is loaded before the FFMAs of
//! row `kk`).
//!
//! Any M/N/K is correct: loads are predicated and zero-filled, stores are guarded. Batch index
//! is `blockIdx.z`; `blockIdx.x` walks the output tiles in `group_m`-grouped order.
//! Entry arguments follow `GEMM_ABI.md` with no extras.

use super::prelude::{self, EpilogueSpec};
use super::problem::GemmProblem;
use super::space::{self, SimtConfig, SimtGeometry};
use crate::templates::codegen::CudaWriter;
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::Arch;

/// The SIMT fp32 GEMM template.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimtGemm;

/// Template name used in symbols, caches and the tuning database.
pub const SIMT_NAME: &str = "gemm_simt";
/// Bump on any change to the generated code.
pub const SIMT_VERSION: u32 = 2;

impl SimtGemm {
    fn violation(&self, c: &SimtConfig, reason: String) -> ConstraintViolation {
        ConstraintViolation {
            template: SIMT_NAME.to_string(),
            config: format!("{c:?}"),
            reason,
        }
    }

    /// The kernel's entry symbol for this problem and config (encodes everything baked in).
    pub fn entry_name(p: &GemmProblem, c: &SimtConfig) -> String {
        format!(
            "rtx_gemm_simt_{}_{}{}_{}_bm{}_bn{}_bk{}_tm{}_tn{}_s{}_v{}_g{}_mb{}",
            p.dtype.name(),
            layout_char(p.layout_a),
            layout_char(p.layout_b),
            EpilogueSpec::of(p).tag(),
            c.bm,
            c.bn,
            c.bk,
            c.tm,
            c.tn,
            c.stages,
            c.vec,
            c.group_m,
            c.min_blocks
        )
    }
}

fn layout_char(l: super::problem::Layout) -> char {
    match l {
        super::problem::Layout::Row => 'r',
        super::problem::Layout::Col => 'c',
    }
}

/// Writes the constants of one SIMT instance.
fn emit_constants(w: &mut CudaWriter, c: &SimtConfig, g: &SimtGeometry) {
    w.comment("---- configuration (from SimtConfig / SimtGeometry) ----");
    w.constant("int", "BM", c.bm);
    w.constant("int", "BN", c.bn);
    w.constant("int", "BK", c.bk);
    w.constant("int", "TM", c.tm);
    w.constant("int", "TN", c.tn);
    w.constant("int", "STAGES", c.stages);
    w.constant("int", "VEC", c.vec);
    w.constant("int", "GROUP_M", c.group_m);
    w.constant("int", "WTM", g.warp_tm);
    w.constant("int", "WTN", g.warp_tn);
    w.constant("bool", "A_K", g.a_kcontig);
    w.constant("bool", "B_K", g.b_kcontig);
    w.constant("int", "SBUF", g.buffers);
    w.constant("int", "A_LD_S", g.a_ld_s);
    w.constant("int", "B_LD_S", g.b_ld_s);
    w.constant("int", "A_STAGE", g.a_stage);
    w.constant("int", "B_STAGE", g.b_stage);
}

/// Device code of the SIMT kernel body (reads the constants above).
const SIMT_BODY: &str = r#"
constexpr int THREADS_M = BM / TM;
constexpr int THREADS_N = BN / TN;
constexpr int THREADS = THREADS_M * THREADS_N;
constexpr int WARPS_N = THREADS_N / WTN;
constexpr bool ASYNC = STAGES >= 3;
// Global tile of each operand as rows x cols, cols contiguous in memory.
constexpr int A_ROWS = A_K ? BM : BK;
constexpr int A_COLS = A_K ? BK : BM;
constexpr int B_ROWS = B_K ? BN : BK;
constexpr int B_COLS = B_K ? BK : BN;
constexpr int A_LOADS = (A_ROWS * A_COLS / VEC + THREADS - 1) / THREADS;
constexpr int B_LOADS = (B_ROWS * B_COLS / VEC + THREADS - 1) / THREADS;
// Both shared tiles are K-major ([k][mn]) in both pipelines.
// Distance between a thread's 4-wide sub-tiles.
constexpr int A_CS = BM / (TM / 4);
constexpr int B_CS = BN / (TN / 4);
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile must be made of 4x4 sub-tiles");
static_assert(THREADS_N % WTN == 0 && (BM / TM) % WTM == 0 && WTM * WTN == 32, "warp thread grid");

// Global -> registers (register-staged pipeline). Out-of-range elements read as 0.
template <int ROWS, int COLS, int LOADS>
__device__ __forceinline__ void simt_ldg(float (&r)[LOADS][VEC], const float* __restrict__ g, int ld, int row0,
                                         int col0, int row_lim, int col_lim, int tid) {
  constexpr int VPR = COLS / VEC;
  constexpr int TOTAL = ROWS * VPR;
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = tid + i * THREADS;
    const int rr = idx / VPR;
    const int cc = (idx % VPR) * VEC;
    const int gr = row0 + rr;
    const int gc = col0 + cc;
    const bool live = (TOTAL % THREADS == 0 || idx < TOTAL) && gr < row_lim;
    const float* p = g + (long long)gr * ld + gc;
    if (live && gc + VEC <= col_lim) {
      if constexpr (VEC == 4) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        r[i][0] = v.x; r[i][1] = v.y; r[i][2] = v.z; r[i][3] = v.w;
      } else if constexpr (VEC == 2) {
        const float2 v = *reinterpret_cast<const float2*>(p);
        r[i][0] = v.x; r[i][1] = v.y;
      } else {
        r[i][0] = *p;
      }
    } else {
#pragma unroll
      for (int v = 0; v < VEC; ++v) r[i][v] = (live && gc + v < col_lim) ? p[v] : 0.0f;
    }
  }
}

// Registers -> shared ([k][mn]); a K-contiguous tile (rows = mn, cols = k) is transposed.
template <int ROWS, int COLS, int LOADS, bool KCONTIG, int LD_S>
__device__ __forceinline__ void simt_sts(float* s, const float (&r)[LOADS][VEC], int tid) {
  constexpr int VPR = COLS / VEC;
  constexpr int TOTAL = ROWS * VPR;
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int idx = tid + i * THREADS;
    if (TOTAL % THREADS == 0 || idx < TOTAL) {
      const int rr = idx / VPR;
      const int cc = (idx % VPR) * VEC;
      if constexpr (KCONTIG) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) s[(cc + v) * LD_S + rr] = r[i][v];
      } else {
        float* d = s + rr * LD_S + cc;
        if constexpr (VEC == 4) {
          *reinterpret_cast<float4*>(d) = make_float4(r[i][0], r[i][1], r[i][2], r[i][3]);
        } else if constexpr (VEC == 2) {
          *reinterpret_cast<float2*>(d) = make_float2(r[i][0], r[i][1]);
        } else {
          *d = r[i][0];
        }
      }
    }
  }
}

// Global -> shared ([k][mn]) with cp.async; zero-fills out-of-range elements. A K-contiguous
// tile (rows = mn, cols = k) is transposed on the way in with one 4-byte copy per element
// (lanes walk k fastest: coalesced reads, conflict-free writes into the padded [k][mn] rows);
// an MN-contiguous tile is copied VEC elements at a time.
template <int ROWS, int COLS, bool KCONTIG, int LD_S>
__device__ __forceinline__ void simt_cp_async(float* s, const float* __restrict__ g, int ld, int row0, int col0,
                                              int row_lim, int col_lim, int tid) {
  if constexpr (KCONTIG) {
    constexpr int TOTAL = ROWS * COLS;
    constexpr int LOADS = (TOTAL + THREADS - 1) / THREADS;
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int idx = tid + i * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int rr = idx / COLS;
        const int cc = idx % COLS;
        const int gr = row0 + rr;
        const int gc = col0 + cc;
        const bool valid = gr < row_lim && gc < col_lim;
        const float* src = valid ? g + (long long)gr * ld + gc : g;
        rtx_cp_async4(rtx_smem_addr(s + cc * LD_S + rr), src, valid ? 4 : 0);
      }
    }
  } else {
    constexpr int VPR = COLS / VEC;
    constexpr int TOTAL = ROWS * VPR;
    constexpr int LOADS = (TOTAL + THREADS - 1) / THREADS;
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int idx = tid + i * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int rr = idx / VPR;
        const int cc = (idx % VPR) * VEC;
        const int gr = row0 + rr;
        const int gc = col0 + cc;
        const int valid = gr < row_lim ? rtx_min(rtx_max(col_lim - gc, 0), VEC) : 0;
        const float* src = valid > 0 ? g + (long long)gr * ld + gc : g;
        const unsigned dst = rtx_smem_addr(s + rr * LD_S + cc);
        if constexpr (VEC == 4) {
          rtx_cp_async16(dst, src, valid * 4);
        } else if constexpr (VEC == 2) {
          rtx_cp_async8(dst, src, valid * 4);
        } else {
          rtx_cp_async4(dst, src, valid * 4);
        }
      }
    }
  }
}

// The thread's fragments of k row `kk`: TM/4 + TN/4 float4 shared loads (LDS.128).
__device__ __forceinline__ void simt_frag(const float* sA, const float* sB, int kk, int trow, int tcol, float (&a)[TM],
                                          float (&b)[TN]) {
#pragma unroll
  for (int c = 0; c < TM / 4; ++c) {
    const float4 v = *reinterpret_cast<const float4*>(sA + kk * A_LD_S + c * A_CS + trow * 4);
    a[c * 4 + 0] = v.x; a[c * 4 + 1] = v.y; a[c * 4 + 2] = v.z; a[c * 4 + 3] = v.w;
  }
#pragma unroll
  for (int c = 0; c < TN / 4; ++c) {
    const float4 v = *reinterpret_cast<const float4*>(sB + kk * B_LD_S + c * B_CS + tcol * 4);
    b[c * 4 + 0] = v.x; b[c * 4 + 1] = v.y; b[c * 4 + 2] = v.z; b[c * 4 + 3] = v.w;
  }
}

// One shared stage: BK rank-1 updates of the TM x TN register tile. Fragments are double
// buffered: row kk + 1 is loaded before the FFMAs of row kk.
__device__ __forceinline__ void simt_compute(const float* sA, const float* sB, int trow, int tcol, float (&acc)[TM][TN]) {
  float a[2][TM];
  float b[2][TN];
  simt_frag(sA, sB, 0, trow, tcol, a[0], b[0]);
#pragma unroll
  for (int kk = 0; kk < BK; ++kk) {
    if (kk + 1 < BK) simt_frag(sA, sB, kk + 1, trow, tcol, a[(kk + 1) & 1], b[(kk + 1) & 1]);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[kk & 1][i], b[kk & 1][j], acc[i][j]);
    }
  }
}
"#;

/// The kernel's body after the signature.
const SIMT_MAIN: &str = r#"
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
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

  const int warp = tid / 32;
  const int lane = tid % 32;
  const int trow = (warp / WARPS_N) * WTM + lane / WTN;
  const int tcol = (warp % WARPS_N) * WTN + lane % WTN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  }

  float* const sA0 = smem;
  float* const sB0 = smem + SBUF * A_STAGE;
  const int ktiles = (K + BK - 1) / BK;
  // Tile origin of each operand (rows/cols as stored in global memory).
  auto a_row0 = [&](int k0) { return A_K ? m0 : k0; };
  auto a_col0 = [&](int k0) { return A_K ? k0 : m0; };
  auto b_row0 = [&](int k0) { return B_K ? n0 : k0; };
  auto b_col0 = [&](int k0) { return B_K ? k0 : n0; };
  const int a_rlim = A_K ? M : K, a_clim = A_K ? K : M;
  const int b_rlim = B_K ? N : K, b_clim = B_K ? K : N;

  if constexpr (ASYNC) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < ktiles) {
        simt_cp_async<A_ROWS, A_COLS, A_K, A_LD_S>(sA0 + s * A_STAGE, A, lda, a_row0(s * BK), a_col0(s * BK), a_rlim, a_clim, tid);
        simt_cp_async<B_ROWS, B_COLS, B_K, B_LD_S>(sB0 + s * B_STAGE, B, ldb, b_row0(s * BK), b_col0(s * BK), b_rlim, b_clim, tid);
      }
      rtx_cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
      rtx_cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread)
      __syncthreads();                   // ... for every thread; and stage (kt-1) is free
      const int nt = kt + STAGES - 1;
      if (nt < ktiles) {
        const int s = nt % STAGES;
        simt_cp_async<A_ROWS, A_COLS, A_K, A_LD_S>(sA0 + s * A_STAGE, A, lda, a_row0(nt * BK), a_col0(nt * BK), a_rlim, a_clim, tid);
        simt_cp_async<B_ROWS, B_COLS, B_K, B_LD_S>(sB0 + s * B_STAGE, B, ldb, b_row0(nt * BK), b_col0(nt * BK), b_rlim, b_clim, tid);
      }
      rtx_cp_async_commit();
      const int s = kt % STAGES;
      simt_compute(sA0 + s * A_STAGE, sB0 + s * B_STAGE, trow, tcol, acc);
    }
    rtx_cp_async_wait<0>();
  } else {
    float ra[A_LOADS][VEC];
    float rb[B_LOADS][VEC];
    simt_ldg<A_ROWS, A_COLS, A_LOADS>(ra, A, lda, a_row0(0), a_col0(0), a_rlim, a_clim, tid);
    simt_ldg<B_ROWS, B_COLS, B_LOADS>(rb, B, ldb, b_row0(0), b_col0(0), b_rlim, b_clim, tid);
    simt_sts<A_ROWS, A_COLS, A_LOADS, A_K, A_LD_S>(sA0, ra, tid);
    simt_sts<B_ROWS, B_COLS, B_LOADS, B_K, B_LD_S>(sB0, rb, tid);
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
      const bool more = kt + 1 < ktiles;
      if (more) {
        const int k1 = (kt + 1) * BK;
        simt_ldg<A_ROWS, A_COLS, A_LOADS>(ra, A, lda, a_row0(k1), a_col0(k1), a_rlim, a_clim, tid);
        simt_ldg<B_ROWS, B_COLS, B_LOADS>(rb, B, ldb, b_row0(k1), b_col0(k1), b_rlim, b_clim, tid);
      }
      const int s = kt & 1;
      simt_compute(sA0 + s * A_STAGE, sB0 + s * B_STAGE, trow, tcol, acc);
      if (more) {
        simt_sts<A_ROWS, A_COLS, A_LOADS, A_K, A_LD_S>(sA0 + (s ^ 1) * A_STAGE, ra, tid);
        simt_sts<B_ROWS, B_COLS, B_LOADS, B_K, B_LD_S>(sB0 + (s ^ 1) * B_STAGE, rb, tid);
      }
      __syncthreads();
    }
  }

  // Epilogue: each thread owns rows m0 + c*A_CS + trow*4 + (0..3) and the 4-wide column groups
  // n0 + c*B_CS + tcol*4; VEC-wide vector stores where the whole vector is in range.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + (i / 4) * A_CS + trow * 4 + (i % 4);
    if (row < M) {
      const long long roff = (long long)row * ldc;
#pragma unroll
      for (int c = 0; c < TN / 4; ++c) {
#pragma unroll
        for (int v0 = 0; v0 < 4; v0 += VEC) {
          const int col = n0 + c * B_CS + tcol * 4 + v0;
          const float* vals = &acc[i][c * 4 + v0];
          if (col + VEC <= N) {
            rtx_epi_store<VEC>(C, bias, residual, roff + col, col, vals, alpha, beta);
          } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
              if (col + v < N) rtx_epi_store<1>(C, bias, residual, roff + col + v, col + v, vals + v, alpha, beta);
            }
          }
        }
      }
    }
  }
"#;

/// Generates the SIMT kernel for a checked config.
fn emit_source(p: &GemmProblem, c: &SimtConfig, g: &SimtGeometry) -> KernelSource {
    let entry = SimtGemm::entry_name(p, c);
    let mut w = CudaWriter::new();
    w.comment(format!("rtx {SIMT_NAME} v{SIMT_VERSION}: {entry}"));
    prelude::emit_common(&mut w);
    prelude::emit_epilogue(&mut w, EpilogueSpec::of(p));
    emit_constants(&mut w, c, g);
    w.lines(SIMT_BODY);
    w.line(format!(
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {entry}(",
        g.threads, c.min_blocks
    ));
    w.lines(SIGNATURE_ARGS);
    w.open(")");
    w.lines(SIMT_MAIN);
    w.close("");
    KernelSource {
        entry,
        code: w.finish(),
        template: SIMT_NAME.to_string(),
        template_version: SIMT_VERSION,
        options: vec!["-DNDEBUG".to_string()],
    }
}

/// The ABI argument list (GEMM_ABI.md), `TIn = float`.
const SIGNATURE_ARGS: &str = r#"    const float* __restrict__ A, const float* __restrict__ B, TOut* C, const TOut* bias, const TOut* residual,
    int M, int N, int K, int lda, int ldb, int ldc,
    long long stride_a, long long stride_b, long long stride_c,
    float alpha, float beta"#;

impl Template for SimtGemm {
    type Problem = GemmProblem;
    type Config = SimtConfig;

    fn name(&self) -> &'static str {
        SIMT_NAME
    }

    fn version(&self) -> u32 {
        SIMT_VERSION
    }

    fn space(&self, problem: &GemmProblem, arch: Arch) -> Vec<SimtConfig> {
        space::simt_space(problem, arch)
    }

    fn check(
        &self,
        problem: &GemmProblem,
        config: &SimtConfig,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        space::check_simt(problem, config, arch)
            .map(|_| ())
            .map_err(|r| self.violation(config, r))
    }

    /// Large outputs (at least 2048x2048 elements over the batch, `m >= 128`, `n >= 256`):
    /// 128x256x8 blocks of 256 threads with 8x16 register tiles (the fastest point of an H200
    /// sweep at 2048/4096/8192 NN: 0.90-0.94x of cuBLAS SGEMM, `scripts/h200/simt_sweep.py`).
    /// Smaller outputs: 128x128x8 with 8x8 tiles (more blocks for the SMs). Both use the
    /// register-staged double buffer, the widest legal vector width and group 8.
    /// `min_blocks = 1`: the 8x16 tile needs ~230 registers; capping the 8x8 one at 128 spills
    /// in some layout / epilogue combinations, so that is left to the tuner.
    fn default_config(&self, problem: &GemmProblem, _arch: Arch) -> SimtConfig {
        let outputs = problem.m as u64 * problem.n as u64 * problem.batch as u64;
        let large = outputs >= 2048 * 2048 && problem.m >= 128 && problem.n >= 256;
        let (bn, tn) = if large { (256, 16) } else { (128, 8) };
        SimtConfig {
            bm: 128,
            bn,
            bk: 8,
            tm: 8,
            tn,
            stages: 2,
            vec: space::simt_max_vec(problem),
            group_m: 8,
            min_blocks: 1,
        }
    }

    fn emit(
        &self,
        problem: &GemmProblem,
        config: &SimtConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        let g = space::check_simt(problem, config, arch).map_err(|r| self.violation(config, r))?;
        Ok(emit_source(problem, config, &g))
    }

    fn launch(&self, problem: &GemmProblem, config: &SimtConfig) -> LaunchDims {
        let threads = (config.bm / config.tm.max(1)).saturating_mul(config.bn / config.tn.max(1));
        let smem = SimtGeometry::new(problem, config).map_or(0, |g| g.smem_bytes as u32);
        LaunchDims {
            grid: [
                space::tile_count(problem, config.bm.max(1), config.bn.max(1)) as u32,
                1,
                problem.batch,
            ],
            block: [threads, 1, 1],
            dynamic_smem: smem,
        }
    }

    fn complexity(&self, config: &SimtConfig) -> u64 {
        space::simt_complexity(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::test_checks::assert_refused;
    use crate::DType;

    #[test]
    fn emits_entry_and_constants() {
        let p = GemmProblem::nn(1000, 1000, 1000, DType::F32);
        let t = SimtGemm;
        let c = t.default_config(&p, Arch::Sm90a);
        assert_eq!(c.vec, 4);
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(src
            .code
            .contains(&format!("void __launch_bounds__(256, 1) {}(", src.entry)));
        assert!(src.code.contains("constexpr int BM = 128;"));
        let l = t.launch(&p, &c);
        assert_eq!(l.grid, [64, 1, 1]);
        assert_eq!(l.block, [256, 1, 1]);
    }

    #[test]
    fn large_outputs_get_the_wide_tile() {
        let t = SimtGemm;
        let p = GemmProblem::nn(4096, 4096, 4096, DType::F32);
        let c = t.default_config(&p, Arch::Sm90a);
        assert_eq!((c.bm, c.bn, c.tm, c.tn), (128, 256, 8, 16));
        t.check(&p, &c, Arch::Sm90a).unwrap();
        assert_eq!(t.launch(&p, &c).grid, [32 * 16, 1, 1]);
        let thin = GemmProblem::nn(64, 65536, 4096, DType::F32);
        assert_eq!(t.default_config(&thin, Arch::Sm90a).bn, 128);
    }

    #[test]
    fn cp_async_transposes_k_contiguous_tiles() {
        // Row-major A is K-contiguous: the cp.async ring still stores it [k][m + 4].
        let p = GemmProblem::nn(512, 512, 512, DType::F32);
        let c = SimtConfig {
            stages: 3,
            bk: 16,
            ..SimtGemm.default_config(&p, Arch::Sm90a)
        };
        let g = space::check_simt(&p, &c, Arch::Sm90a).unwrap();
        assert_eq!((g.a_ld_s, g.a_stage), (132, 16 * 132));
        let src = SimtGemm.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(src
            .code
            .contains("rtx_cp_async4(rtx_smem_addr(s + cc * LD_S + rr)"));
    }

    #[test]
    fn odd_leading_dimension_forces_scalar_access() {
        let p = GemmProblem::nn(33, 33, 33, DType::F32);
        let t = SimtGemm;
        let c = t.default_config(&p, Arch::Sm80);
        assert_eq!(c.vec, 1);
        t.check(&p, &c, Arch::Sm80).unwrap();
        let bad = SimtConfig { vec: 4, ..c };
        assert_refused(&t, &p, &bad, Arch::Sm80, "lda");
    }
}
