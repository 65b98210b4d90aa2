//! Device-side reduction helpers of the row kernels (verbatim CUDA C++).
//!
//! Three partial-result payloads, each with an identity, a *commutative* combine (so every lane
//! of an xor butterfly ends with bit-identical results) and an xor shuffle:
//! - `RtxSum`: a sum.
//! - `RtxMaxSum`: softmax's online pair — the row max `m` (NaN-propagating) and the sum `s` of
//!   `exp(x - safe(m))` where `safe(-inf) = 0`, so partials of all `-inf` (or empty) slots
//!   carry `s = 0` and are scaled by 0 instead of by `exp(-inf - -inf) = NaN`.
//! - `RtxMoments`: count, mean and M2 (sum of squared deviations), merged with Chan et al.'s
//!   pairwise formula (the symmetric form `mean = (na ma + nb mb) / n`).
//!
//! `rtx_row_reduce<TPR, RPB>` reduces over the `TPR` threads of one row: xor shuffles inside a
//! (sub-)warp when `TPR <= 32`; otherwise a full-warp shuffle, one value per warp through
//! shared memory (one `__syncthreads`), and a second full-warp shuffle. Every thread of the
//! row gets the result. All threads of a warp (and, for `TPR > 32`, of the block) must call it.

use crate::templates::codegen::CudaWriter;

const REDUCE_PRELUDE: &str = r#"struct RtxSum { float a; };
__device__ __forceinline__ RtxSum rtx_identity(RtxSum*) { return RtxSum{0.0f}; }
__device__ __forceinline__ RtxSum rtx_combine(RtxSum x, RtxSum y) { return RtxSum{x.a + y.a}; }
__device__ __forceinline__ RtxSum rtx_shfl_xor(RtxSum x, int o) { return RtxSum{__shfl_xor_sync(0xffffffffu, x.a, o)}; }

// exp(mi - m) for a partial whose max is mi, 0 for an empty / all -inf partial.
__device__ __forceinline__ float rtx_rescale(float mi, float m) {
  return mi == -RTX_INF ? 0.0f : rtx_exp2((mi - m) * RTX_LOG2E);
}
struct RtxMaxSum { float m, s; };
__device__ __forceinline__ RtxMaxSum rtx_identity(RtxMaxSum*) { return RtxMaxSum{-RTX_INF, 0.0f}; }
__device__ __forceinline__ RtxMaxSum rtx_combine(RtxMaxSum x, RtxMaxSum y) {
  const float m = rtx_max(x.m, y.m);
  return RtxMaxSum{m, x.s * rtx_rescale(x.m, m) + y.s * rtx_rescale(y.m, m)};
}
__device__ __forceinline__ RtxMaxSum rtx_shfl_xor(RtxMaxSum x, int o) {
  return RtxMaxSum{__shfl_xor_sync(0xffffffffu, x.m, o), __shfl_xor_sync(0xffffffffu, x.s, o)};
}

struct RtxMoments { float n, mean, m2; };
__device__ __forceinline__ RtxMoments rtx_identity(RtxMoments*) { return RtxMoments{0.0f, 0.0f, 0.0f}; }
__device__ __forceinline__ RtxMoments rtx_combine(RtxMoments x, RtxMoments y) {
  const float n = x.n + y.n;
  if (n == 0.0f) return RtxMoments{0.0f, 0.0f, 0.0f};
  const float inv = 1.0f / n;
  const float d = y.mean - x.mean;
  return RtxMoments{n, (x.n * x.mean + y.n * y.mean) * inv, x.m2 + y.m2 + d * d * (x.n * y.n * inv)};
}
__device__ __forceinline__ RtxMoments rtx_shfl_xor(RtxMoments x, int o) {
  return RtxMoments{__shfl_xor_sync(0xffffffffu, x.n, o), __shfl_xor_sync(0xffffffffu, x.mean, o),
                    __shfl_xor_sync(0xffffffffu, x.m2, o)};
}

// Butterfly over aligned groups of W lanes (W a power of two <= 32); every lane gets its group's result.
template <int W, typename P> __device__ __forceinline__ P rtx_warp_reduce(P v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = rtx_combine(v, rtx_shfl_xor(v, o));
  return v;
}

// Reduction over the TPR threads of one row (see the module docs). smem holds RPB * TPR / 32
// payloads and is only touched when TPR > 32; each call needs its own array.
template <int TPR, int RPB, typename P> __device__ __forceinline__ P rtx_row_reduce(P v, P* smem) {
  if constexpr (TPR <= 32) {
    (void)smem;
    return rtx_warp_reduce<TPR>(v);
  } else {
    static_assert(TPR % 32 == 0 && TPR <= 1024, "threads per row");
    constexpr int WPR = TPR / 32;
    v = rtx_warp_reduce<32>(v);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    const int first = (warp / WPR) * WPR;
    const P u = lane < WPR ? smem[first + lane] : rtx_identity((P*)nullptr);
    return rtx_warp_reduce<32>(u);
  }
}
"#;

/// Writes the reduction payloads and `rtx_row_reduce`.
pub fn write_reduce_prelude(w: &mut CudaWriter) {
    w.lines(REDUCE_PRELUDE);
}
