//! tf32 operand staging: the pre-pass that makes every tf32 operand K-major.
//!
//! `wgmma` reads tf32 operands from shared memory only K-major (the transpose immediates exist
//! for 16-bit types only), so a tf32 operand stored with M/N contiguous (column-major A, row-major
//! B) cannot be fed to the tensor cores as TMA lands it. Such an operand is first transposed
//! into a K-major copy in a staging buffer by a pre-pass launch of the *same* kernel entry (the
//! `prepass` argument selects it), then the GEMM launch reads the copy through its tensor map.
//! [`super::WgmmaGemm::enqueue`] issues both launches in stream order, so a GEMM's measured
//! time includes the transpose. K-major tf32 operands (row-major A, column-major B: the "NT"
//! case) are read in place and need no pre-pass.
//!
//! The staged copy of an operand is `mn x K` with row pitch [`staged_ld`] (K rounded up to 4
//! elements: 16-byte rows for TMA), one copy per batch entry (one in total when the operand is
//! broadcast, batch stride 0). Elements are copied bit for bit (the tensor cores read the top 19
//! bits of each f32 in both paths, so NN and NT give the same products).
//!
//! Pre-pass schedule: each warp transposes 64 (K) x 32 (M/N) tiles through a padded 64 x 33
//! shared-memory tile (conflict-free both ways): 64 independent coalesced 128-byte row loads per
//! lane in flight, then 32 coalesced 256-byte row stores. Warps walk the tiles of A then B of
//! their batch entry (`blockIdx.z`) with a grid stride.

use super::config::WgmmaConfig;
use crate::templates::codegen::CudaWriter;
use crate::templates::gemm::{GemmProblem, Layout};
use crate::DType;

/// K rows of one pre-pass tile.
pub const TILE_K: u32 = 64;
/// M/N columns of one pre-pass tile (one warp's lanes).
pub const TILE_MN: u32 = 32;
/// Shared memory of one warp's tile in bytes (`TILE_K x (TILE_MN + 1)` floats).
pub const WARP_TILE_BYTES: u32 = TILE_K * (TILE_MN + 1) * 4;
/// Alignment of the staged regions inside the staging buffer (bytes).
pub const REGION_ALIGN: u64 = 256;

/// Which operands of a problem are staged (transposed to K-major) before the GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Staging {
    /// Column-major tf32 A: staged as `M x K` row-major.
    pub a: bool,
    /// Row-major tf32 B: staged as `N x K` (column-major `K x N`).
    pub b: bool,
}

impl Staging {
    /// Whether the problem needs the pre-pass at all.
    pub fn any(&self) -> bool {
        self.a || self.b
    }
}

/// The staging a problem needs: M/N-major operands of tf32 problems; none for f16/bf16 (their
/// M/N-major operands use the wgmma transpose bits).
pub fn staging(p: &GemmProblem) -> Staging {
    if p.dtype != DType::Tf32 {
        return Staging::default();
    }
    Staging {
        a: p.layout_a == Layout::Col,
        b: p.layout_b == Layout::Row,
    }
}

/// The staging a launch of config `c` needs for the user's problem `p`: [`staging`], except
/// that a transposed product (`swap_ab`) stages nothing. Its tf32 kernels take only a row-major
/// user A (`WgmmaGemm::check`), which is their K-major B; their A, the user's B, is read
/// K-major in place (column-major B) or, M-major (row-major B), from registers
/// ([`a_from_registers`]).
pub fn staging_for(p: &GemmProblem, c: &WgmmaConfig) -> Staging {
    if c.swap_ab {
        Staging::default()
    } else {
        staging(p)
    }
}

/// Whether the kernel of config `c` for the problem it computes, `v` (the view: transposed
/// with `swap_ab`), loads its A fragments from shared memory into registers and runs the
/// register-A form of wgmma: a tf32 A that is M-major (the transposed product of a user's
/// row-major tf32 B). wgmma reads tf32 from shared memory only K-major, but takes A from
/// registers in any order the threads load it.
pub fn a_from_registers(v: &GemmProblem, c: &WgmmaConfig) -> bool {
    c.swap_ab && v.dtype == DType::Tf32 && v.layout_a == Layout::Col
}

/// [`kernel_problem`] of the problem `v` a kernel of config `c` computes (the view), with
/// [`staging_for`]'s staging: `v` itself for a transposed product.
pub fn kernel_problem_for(v: &GemmProblem, c: &WgmmaConfig) -> GemmProblem {
    if c.swap_ab {
        *v
    } else {
        kernel_problem(v)
    }
}

/// Row pitch (elements) of a staged copy: K rounded up to a multiple of 4 (16-byte rows);
/// `None` where that overflows `u32` (K within 3 of `u32::MAX`).
pub fn checked_staged_ld(k: u32) -> Option<u32> {
    k.checked_next_multiple_of(4)
}

/// [`checked_staged_ld`], saturating at the largest multiple of 4 (`WgmmaGemm::check` refuses
/// staged problems whose pitch overflows).
pub fn staged_ld(k: u32) -> u32 {
    checked_staged_ld(k).unwrap_or(u32::MAX / 4 * 4)
}

/// Staged copies of an operand with batch stride `stride`: one per batch entry, or one in
/// total when the operand is broadcast (stride 0) or the problem is unbatched.
fn copies(p: &GemmProblem, stride: u64) -> u64 {
    if p.batch > 1 && stride != 0 {
        p.batch as u64
    } else {
        1
    }
}

/// `bytes` rounded up to [`REGION_ALIGN`] (saturating at `u64::MAX`).
fn round_region(bytes: u64) -> u64 {
    bytes.div_ceil(REGION_ALIGN).saturating_mul(REGION_ALIGN)
}

/// Bytes of `copies` staged copies of an `mn x K` operand (saturating at `u64::MAX`).
fn staged_bytes(copies: u64, mn: u32, k: u32) -> u64 {
    let bytes = [mn as u64, staged_ld(k) as u64, 4]
        .into_iter()
        .fold(copies, u64::saturating_mul);
    round_region(bytes)
}

/// Bytes of the staged copy of A (0 when A is not staged), rounded up to [`REGION_ALIGN`].
pub fn staged_a_bytes(p: &GemmProblem) -> u64 {
    if !staging(p).a {
        return 0;
    }
    staged_bytes(copies(p, p.stride_a), p.m, p.k)
}

/// Bytes of the staged copy of B (0 when B is not staged), rounded up to [`REGION_ALIGN`].
pub fn staged_b_bytes(p: &GemmProblem) -> u64 {
    if !staging(p).b {
        return 0;
    }
    staged_bytes(copies(p, p.stride_b), p.n, p.k)
}

/// Bytes of the staging buffer: the staged A region, then the staged B region (offset
/// [`staged_a_bytes`]). 0 when nothing is staged; saturates at `u64::MAX` for problems `check`
/// rejects.
pub fn staging_bytes(p: &GemmProblem) -> u64 {
    staged_a_bytes(p).saturating_add(staged_b_bytes(p))
}

/// The problem the GEMM launch of the kernel computes: `p` with every staged operand replaced by
/// its K-major copy (layout, leading dimension and batch stride of the staging buffer). Equal
/// to `p` when nothing is staged; every operand of the result is K-major for tf32.
pub fn kernel_problem(p: &GemmProblem) -> GemmProblem {
    let s = staging(p);
    let mut q = *p;
    let ld = staged_ld(p.k);
    if s.a {
        q.layout_a = Layout::Row;
        q.lda = ld;
        q.stride_a = if copies(p, p.stride_a) > 1 {
            p.m as u64 * ld as u64
        } else {
            0
        };
    }
    if s.b {
        q.layout_b = Layout::Col;
        q.ldb = ld;
        q.stride_b = if copies(p, p.stride_b) > 1 {
            p.n as u64 * ld as u64
        } else {
            0
        };
    }
    q
}

/// Pre-pass tiles of one batch entry: `(tiles of A, tiles of B)` (0 for an unstaged operand).
pub fn prepass_tiles(p: &GemmProblem) -> (u64, u64) {
    let s = staging(p);
    let tk = p.k.div_ceil(TILE_K) as u64;
    let a = if s.a {
        tk * p.m.div_ceil(TILE_MN) as u64
    } else {
        0
    };
    let b = if s.b {
        tk * p.n.div_ceil(TILE_MN) as u64
    } else {
        0
    };
    (a, b)
}

/// Emits `STAGE_A` / `STAGE_B` and the pre-pass device functions (tf32 kernels only).
pub fn emit_prepass_fns(w: &mut CudaWriter, s: Staging) {
    w.constant("bool", "STAGE_A", s.a);
    w.constant("bool", "STAGE_B", s.b);
    w.constant("int", "STAGE_TILE_K", TILE_K);
    w.constant("int", "STAGE_TILE_MN", TILE_MN);
    w.lines(
        r#"// Pre-pass: transposes the 64 x 32 tile at (r0, c0) of `src` (rows x cols, row pitch ld) into
// `dst` (cols x rows, row pitch ldt) through the warp's padded 64 x 33 shared tile `sm`.
__device__ __forceinline__ void stage_tile(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols,
                                           long long ld, long long ldt, int r0, int c0, float* sm, int lane) {
  float v[STAGE_TILE_K];
  const int c = c0 + lane;
#pragma unroll
  for (int i = 0; i < STAGE_TILE_K; ++i) {
    v[i] = (r0 + i < rows && c < cols) ? __ldg(src + (long long)(r0 + i) * ld + c) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < STAGE_TILE_K; ++i) sm[i * (STAGE_TILE_MN + 1) + lane] = v[i];
  __syncwarp();
#pragma unroll 8
  for (int j = 0; j < STAGE_TILE_MN; ++j) {
    if (c0 + j < cols) {
      float* d = dst + (long long)(c0 + j) * ldt + r0;
      if (r0 + lane < rows) __stcg(d + lane, sm[lane * (STAGE_TILE_MN + 1) + j]);
      if (r0 + 32 + lane < rows) __stcg(d + 32 + lane, sm[(lane + 32) * (STAGE_TILE_MN + 1) + j]);
    }
  }
  __syncwarp();
}
// Pre-pass launch: stages the M/N-major operands of batch entry blockIdx.z into K-major copies.
// A (column-major, K x M as stored) -> stage_a (M x K); B (row-major, K x N) -> stage_b (N x K).
__device__ __noinline__ void stage_operands(const float* A, const float* B, float* stage_a, float* stage_b,
                                               int M, int N, int K, int lda, int ldb,
                                               long long stride_a, long long stride_b, unsigned char* smem_raw) {
  const int warps = THREADS / 32;
  const int lane = threadIdx.x % 32;
  float* sm = reinterpret_cast<float*>(smem_raw) + (threadIdx.x / 32) * (STAGE_TILE_K * (STAGE_TILE_MN + 1));
  const int bt = blockIdx.z;
  const long long ldt = (K + 3) & ~3;
  const int tk = (K + STAGE_TILE_K - 1) / STAGE_TILE_K;
  // A broadcast operand (batch stride 0) has one copy, staged by batch entry 0.
  const int ta = (STAGE_A && (bt == 0 || stride_a != 0)) ? tk * ((M + STAGE_TILE_MN - 1) / STAGE_TILE_MN) : 0;
  const int tb = (STAGE_B && (bt == 0 || stride_b != 0)) ? tk * ((N + STAGE_TILE_MN - 1) / STAGE_TILE_MN) : 0;
  for (int t = blockIdx.x * warps + (int)(threadIdx.x / 32); t < ta + tb; t += gridDim.x * warps) {
    if (t < ta) {
      const float* src = A + (long long)bt * stride_a;
      float* dst = stage_a + (stride_a != 0 ? (long long)bt * M * ldt : 0ll);
      stage_tile(src, dst, K, M, lda, ldt, (t % tk) * STAGE_TILE_K, (t / tk) * STAGE_TILE_MN, sm, lane);
    } else {
      const int u = t - ta;
      const float* src = B + (long long)bt * stride_b;
      float* dst = stage_b + (stride_b != 0 ? (long long)bt * N * ldt : 0ll);
      stage_tile(src, dst, K, N, ldb, ldt, (u % tk) * STAGE_TILE_K, (u / tk) * STAGE_TILE_MN, sm, lane);
    }
  }
}"#,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU model of the emitted pre-pass (same tile walk and index math) applied to `src`.
    fn model_stage(p: &GemmProblem, a: &[f32], b: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let s = staging(p);
        let ldt = staged_ld(p.k) as usize;
        let mut sa = vec![f32::NAN; staged_a_bytes(p) as usize / 4];
        let mut sb = vec![f32::NAN; staged_b_bytes(p) as usize / 4];
        let tk = p.k.div_ceil(TILE_K) as usize;
        for bt in 0..p.batch as usize {
            let (ta, tb) = prepass_tiles(p);
            let ta = if s.a && (bt == 0 || p.stride_a != 0) {
                ta as usize
            } else {
                0
            };
            let tb = if s.b && (bt == 0 || p.stride_b != 0) {
                tb as usize
            } else {
                0
            };
            for t in 0..ta + tb {
                let (src, dst, cols, ld, stride, u) = if t < ta {
                    (
                        a,
                        &mut sa,
                        p.m as usize,
                        p.lda as usize,
                        p.stride_a as usize,
                        t,
                    )
                } else {
                    (
                        b,
                        &mut sb,
                        p.n as usize,
                        p.ldb as usize,
                        p.stride_b as usize,
                        t - ta,
                    )
                };
                let (r0, c0) = ((u % tk) * TILE_K as usize, (u / tk) * TILE_MN as usize);
                let dbase = if stride != 0 { bt * cols * ldt } else { 0 };
                for i in 0..TILE_K as usize {
                    for j in 0..TILE_MN as usize {
                        let (r, c) = (r0 + i, c0 + j);
                        if r < p.k as usize && c < cols {
                            dst[dbase + c * ldt + r] = src[bt * stride + r * ld + c];
                        }
                    }
                }
            }
        }
        (sa, sb)
    }

    #[test]
    fn staged_copies_hold_every_operand_element_k_major() {
        // TT, batched, odd sizes and padded leading dimensions; B broadcast.
        let mut p = GemmProblem::new(70, 45, 131, DType::Tf32, Layout::Col, Layout::Row);
        p.lda = 73;
        p.ldb = 50;
        p.batch = 3;
        p.stride_a = 131 * 73 + 5;
        p.stride_b = 0;
        let a: Vec<f32> = (0..3 * p.stride_a as usize).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..131 * 50).map(|i| -(i as f32)).collect();
        let (sa, sb) = model_stage(&p, &a, &b);
        let q = kernel_problem(&p);
        assert_eq!((q.layout_a, q.layout_b), (Layout::Row, Layout::Col));
        assert_eq!((q.lda, q.ldb), (132, 132));
        assert_eq!((q.stride_a, q.stride_b), (70 * 132, 0));
        q.validate().unwrap();
        for bt in 0..3usize {
            for m in 0..70usize {
                for k in 0..131usize {
                    // Original: column-major A, element (m, k) at k * lda + m.
                    let want = a[bt * p.stride_a as usize + k * 73 + m];
                    assert_eq!(sa[bt * q.stride_a as usize + m * q.lda as usize + k], want);
                }
            }
        }
        for n in 0..45usize {
            for k in 0..131usize {
                assert_eq!(sb[n * q.ldb as usize + k], b[k * 50 + n]);
            }
        }
        assert_eq!(staging_bytes(&p), staged_a_bytes(&p) + staged_b_bytes(&p));
        assert_eq!(
            staged_a_bytes(&p),
            (3 * 70 * 132 * 4u64).div_ceil(256) * 256
        );
    }

    #[test]
    fn only_mn_major_tf32_operands_are_staged() {
        for (la, lb, a, b) in [
            (Layout::Row, Layout::Col, false, false),
            (Layout::Row, Layout::Row, false, true),
            (Layout::Col, Layout::Col, true, false),
            (Layout::Col, Layout::Row, true, true),
        ] {
            let p = GemmProblem::new(256, 256, 256, DType::Tf32, la, lb);
            assert_eq!(staging(&p), Staging { a, b });
            let bf = GemmProblem::new(256, 256, 256, DType::Bf16, la, lb);
            assert!(!staging(&bf).any());
            assert_eq!(kernel_problem(&bf), bf);
            assert_eq!(staging_bytes(&bf), 0);
        }
        let nt = GemmProblem::new(256, 256, 256, DType::Tf32, Layout::Row, Layout::Col);
        assert_eq!(kernel_problem(&nt), nt);
        let nn = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
        assert_eq!(staging_bytes(&nn), 4096 * 4096 * 4);
        assert_eq!(prepass_tiles(&nn), (0, 64 * 128));
    }
}
