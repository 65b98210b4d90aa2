//! Device-side helper code shared by the memory-bound templates (elementwise and row reductions).
//!
//! Verbatim CUDA C++ snippets: storage <-> f32 conversion, vector loads/stores of `V` elements
//! through 2/4/8/16-byte accesses (several 16-byte accesses when `V * sizeof(T) > 16`), a
//! run-time pointer-alignment test, and the scalar math functions with the NaN/Inf semantics
//! the f64 references in `reference.rs` model.

use super::expr::ExprGraph;
use crate::templates::codegen::CudaWriter;
use crate::{Arch, DType};

/// Headers, constants, conversions and vector load/store helpers.
const MEMORY_PRELUDE: &str = r#"#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define RTX_INF __uint_as_float(0x7f800000u)
#define RTX_NAN __uint_as_float(0x7fffffffu)
#define RTX_LOG2E 1.4426950408889634f

__device__ __forceinline__ float rtx_f32(float x) { return x; }
__device__ __forceinline__ float rtx_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float rtx_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T rtx_from_f32(float x);
template <> __device__ __forceinline__ float rtx_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half rtx_from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 rtx_from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Two floats to one 32-bit word of two 16-bit values (low half = a), one cvt on sm_80+.
__device__ __forceinline__ unsigned rtx_pack2(__half*, float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  unsigned u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ unsigned rtx_pack2(__nv_bfloat16*, float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  unsigned u;
  memcpy(&u, &h, 4);
  return u;
}

// Rounds an f32 value to the precision of T (identity for float).
template <typename T> __device__ __forceinline__ float rtx_round(float x) { return rtx_f32(rtx_from_f32<T>(x)); }

// True when p is a multiple of A bytes (A a power of two).
template <int A> __device__ __forceinline__ bool rtx_aligned(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & (unsigned long long)(A - 1)) == 0ull;
}

// Loads V consecutive elements of T starting at p (which must be aligned to min(16, V*sizeof(T)))
// and widens them to f32. Plain loads on purpose: NVVM turns them into ld.global.nc when the
// data is only read through `const __restrict__` kernel parameters, and (unlike __ldg, which
// is inline asm) folds constant offsets into the instruction, so unrolled loads share one base
// register. Data the kernel itself writes is read coherently.
template <typename T, int V>
__device__ __forceinline__ void rtx_ld(const T* p, float (&f)[V]) {
  constexpr int B = V * (int)sizeof(T);
  T t[V];
  if constexpr (B >= 16) {
    static_assert(B % 16 == 0, "vector width");
    uint4 r[B / 16];
#pragma unroll
    for (int k = 0; k < B / 16; ++k) r[k] = reinterpret_cast<const uint4*>(p)[k];
    memcpy(t, r, B);
  } else if constexpr (B == 8) {
    const uint2 r = *reinterpret_cast<const uint2*>(p);
    memcpy(t, &r, 8);
  } else if constexpr (B == 4) {
    const unsigned r = *reinterpret_cast<const unsigned*>(p);
    memcpy(t, &r, 4);
  } else {
    static_assert(B == 2, "vector width");
    const unsigned short r = *reinterpret_cast<const unsigned short*>(p);
    memcpy(t, &r, 2);
  }
#pragma unroll
  for (int j = 0; j < V; ++j) f[j] = rtx_f32(t[j]);
}

// One element, widened to f32.
template <typename T> __device__ __forceinline__ float rtx_ld1(const T* p) {
  float f[1];
  rtx_ld<T, 1>(p, f);
  return f[0];
}

// Rounds V floats to T (round to nearest even) and stores them at p (aligned as for rtx_ld).
template <typename T, int V>
__device__ __forceinline__ void rtx_st(T* p, const float (&f)[V]) {
  constexpr int B = V * (int)sizeof(T);
  T t[V];
  if constexpr (sizeof(T) == 2 && V % 2 == 0) {
#pragma unroll
    for (int j = 0; j < V; j += 2) {
      const unsigned u = rtx_pack2((T*)nullptr, f[j], f[j + 1]);
      memcpy(&t[j], &u, 4);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) t[j] = rtx_from_f32<T>(f[j]);
  }
  if constexpr (B >= 16) {
    uint4 r[B / 16];
    memcpy(r, t, B);
#pragma unroll
    for (int k = 0; k < B / 16; ++k) reinterpret_cast<uint4*>(p)[k] = r[k];
  } else if constexpr (B == 8) {
    uint2 r;
    memcpy(&r, t, 8);
    *reinterpret_cast<uint2*>(p) = r;
  } else if constexpr (B == 4) {
    unsigned r;
    memcpy(&r, t, 4);
    *reinterpret_cast<unsigned*>(p) = r;
  } else {
    unsigned short r;
    memcpy(&r, t, 2);
    *reinterpret_cast<unsigned short*>(p) = r;
  }
}

// One element.
template <typename T> __device__ __forceinline__ void rtx_st1(T* p, float x) {
  const float f[1] = {x};
  rtx_st<T, 1>(p, f);
}

// NaN-propagating max / min: NaN if either operand is NaN (fmaxf/fminf would ignore it).
__device__ __forceinline__ float rtx_max(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fmaxf(a, b);
#endif
}
__device__ __forceinline__ float rtx_min(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? a + b : fminf(a, b);
#endif
}

// 2^x on the SFU (relative error ~2 ulp; results below 2^-126 flush to zero).
__device__ __forceinline__ float rtx_exp2(float x) {
#ifdef __CUDA_ARCH__
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);  // host emulation (see host_emulation.rs)
#endif
}
"#;

/// Scalar math functions of the elementwise IR (one per op).
const MATH_PRELUDE: &str = r#"__device__ __forceinline__ float rtx_add(float a, float b) { return a + b; }
__device__ __forceinline__ float rtx_sub(float a, float b) { return a - b; }
__device__ __forceinline__ float rtx_mul(float a, float b) { return a * b; }
__device__ __forceinline__ float rtx_div(float a, float b) { return a / b; }
__device__ __forceinline__ float rtx_neg(float x) { return -x; }
__device__ __forceinline__ float rtx_abs(float x) { return fabsf(x); }
__device__ __forceinline__ float rtx_exp(float x) {
#if defined(__CUDA_ARCH__) && RTX_APPROX_SFU
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
#else
  return expf(x);
#endif
}
__device__ __forceinline__ float rtx_log(float x) { return logf(x); }
__device__ __forceinline__ float rtx_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float rtx_rsqrt(float x) { return rsqrtf(x); }
// RTX_APPROX_SFU (set per kernel, see `uses_approx_sfu`): tanh and exp on the special function
// unit. tanh.approx.f32 has a relative error of about 2^-11, ex2.approx.f32 about 2 ulp of f32:
// both below a quarter of bf16's half-ulp (2^-9), so bf16 results are unchanged in accuracy.
__device__ __forceinline__ float rtx_tanh(float x) {
#if defined(__CUDA_ARCH__) && RTX_APPROX_SFU
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return tanhf(x);
#endif
}
__device__ __forceinline__ float rtx_sigmoid(float x) { return 1.0f / (1.0f + rtx_exp(-x)); }
__device__ __forceinline__ float rtx_silu(float x) { return x / (1.0f + rtx_exp(-x)); }
__device__ __forceinline__ float rtx_relu(float x) { return rtx_max(x, 0.0f); }
__device__ __forceinline__ float rtx_gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float rtx_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + rtx_tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float rtx_cast_f32(float x) { return x; }
__device__ __forceinline__ float rtx_cast_f16(float x) { return rtx_round<__half>(x); }
__device__ __forceinline__ float rtx_cast_bf16(float x) { return rtx_round<__nv_bfloat16>(x); }
"#;

/// Writes the shared headers and load/store/conversion helpers.
pub fn write_memory_prelude(w: &mut CudaWriter) {
    w.lines(MEMORY_PRELUDE);
}

/// Writes the per-op scalar math helpers of the elementwise IR; `approx_sfu` selects the
/// special-function-unit forms of tanh and exp (see [`uses_approx_sfu`]).
pub fn write_math_prelude(w: &mut CudaWriter, approx_sfu: bool) {
    w.line(format!("#define RTX_APPROX_SFU {}", approx_sfu as u32));
    w.lines(MATH_PRELUDE);
}

/// Whether a kernel may use the approximate tanh/exp of the special function unit: only when
/// every output is bf16, where their error (about 2^-11 relative) is under a quarter of the
/// format's half-ulp. f32 and f16 outputs keep the precise libdevice forms.
pub fn uses_approx_sfu(graph: &ExprGraph) -> bool {
    !graph.outputs.is_empty() && graph.outputs.iter().all(|o| o.dtype == DType::Bf16)
}

/// Most resident threads per SM on `arch` (datasheet values).
pub fn max_threads_per_sm(arch: Arch) -> u32 {
    match arch {
        Arch::Sm75 => 1024,
        Arch::Sm86 | Arch::Sm89 | Arch::Sm120 => 1536,
        _ => 2048,
    }
}

/// The `minBlocksPerSM` of `__launch_bounds__` for blocks of `threads` threads needing about
/// `est_registers` registers each: as many blocks as that register use allows, capped by the
/// architecture's resident-thread limit and 16 blocks, so ptxas neither spills to reach a
/// higher occupancy target nor hoards registers.
pub fn min_blocks_per_sm(threads: u32, est_registers: u32, arch: Arch) -> u32 {
    let threads = threads.max(32);
    let by_regs = 65536 / (threads as u64 * est_registers.max(1) as u64);
    let by_threads = (max_threads_per_sm(arch) / threads) as u64;
    by_regs.min(by_threads).clamp(1, 16) as u32
}

/// Alignment in bytes the vector path needs for a tensor of `dtype` accessed `vec` elements
/// at a time: `min(16, vec * size)`.
pub fn vector_alignment(dtype: DType, vec: u32) -> u32 {
    (vec * dtype.size_bytes() as u32).min(16)
}

/// Sum of the spill store and spill load byte counts in a ptxas `-v` log (`None` if the log
/// has no spill line at all).
pub fn ptxas_spill_bytes(log: &str) -> Option<u64> {
    let mut found = false;
    let mut total = 0u64;
    for line in log.lines() {
        for key in ["bytes spill stores", "bytes spill loads"] {
            if let Some(pos) = line.find(key) {
                found = true;
                let before = line[..pos].trim_end();
                let num = before
                    .rsplit(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("");
                total += num.parse::<u64>().unwrap_or(0);
            }
        }
    }
    found.then_some(total)
}

/// Registers per thread reported by ptxas for the (single) kernel in a `-v` log.
pub fn ptxas_registers(log: &str) -> Option<u32> {
    log.lines().find_map(|line| {
        let pos = line.find(" registers")?;
        let before = line[..pos].trim_end();
        before
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_resource_lines() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
                   ptxas info    : Function properties for k\n    \
                   24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 40 registers, used 0 barriers, 368 bytes cmem[0]\n";
        assert_eq!(ptxas_spill_bytes(log), Some(20));
        assert_eq!(ptxas_registers(log), Some(40));
        assert_eq!(ptxas_spill_bytes("nothing"), None);
    }

    #[test]
    fn min_blocks_respect_registers_and_resident_threads() {
        assert_eq!(min_blocks_per_sm(256, 64, Arch::Sm90a), 4);
        assert_eq!(min_blocks_per_sm(128, 24, Arch::Sm90a), 16);
        assert_eq!(min_blocks_per_sm(128, 24, Arch::Sm120), 12);
        assert_eq!(min_blocks_per_sm(1024, 255, Arch::Sm90a), 1);
    }

    #[test]
    fn alignment_is_capped_at_16_bytes() {
        assert_eq!(vector_alignment(DType::Bf16, 8), 16);
        assert_eq!(vector_alignment(DType::F32, 8), 16);
        assert_eq!(vector_alignment(DType::F32, 2), 8);
        assert_eq!(vector_alignment(DType::F16, 1), 2);
    }
}
