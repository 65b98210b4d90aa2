//! Device code shared by the GEMM templates: element conversions, `cp.async` wrappers,
//! thread-block rasterization and the fused epilogue (`alpha`/`beta`, bias, activation,
//! residual, output cast).
//!
//! Everything the epilogue needs to know at compile time comes from [`EpilogueSpec`], which is
//! derived from the typed [`GemmProblem`]; the snippets themselves are fixed C++ that reads those
//! constants.

use super::problem::{Activation, GemmProblem};
use crate::templates::codegen::CudaWriter;
use crate::DType;

/// The compile-time part of a problem's epilogue (what the generated code bakes in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpilogueSpec {
    /// A per-column bias is added.
    pub bias: bool,
    /// Activation after the bias.
    pub activation: Activation,
    /// A residual (laid out like C) is added after the activation.
    pub residual: bool,
    /// Element type of C, bias and residual.
    pub out_dtype: DType,
}

impl EpilogueSpec {
    /// The baked part of `p.epilogue` (alpha and beta stay run-time kernel arguments).
    pub fn of(p: &GemmProblem) -> Self {
        let e = &p.epilogue;
        EpilogueSpec {
            bias: e.bias,
            activation: e.activation,
            residual: e.residual,
            out_dtype: e.out_dtype,
        }
    }

    /// Activation code used by the device snippet (`EPI_ACT`).
    fn act_code(self) -> u32 {
        match self.activation {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::GeluTanh => 2,
            Activation::GeluErf => 3,
            Activation::Silu => 4,
        }
    }

    /// Short identifier fragment for kernel entry names, e.g. `of16_b1_agelut_r0`.
    pub fn tag(self) -> String {
        let act = match self.activation {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::GeluTanh => "gelut",
            Activation::GeluErf => "gelue",
            Activation::Silu => "silu",
        };
        format!(
            "o{}_b{}_a{}_r{}",
            self.out_dtype.name(),
            self.bias as u8,
            act,
            self.residual as u8
        )
    }
}

/// Writes the includes and the shared helper functions (no problem-specific constants).
pub fn emit_common(w: &mut CudaWriter) {
    w.include("cuda_fp16.h");
    w.include("cuda_bf16.h");
    w.lines(COMMON);
}

/// Writes `TOut`, the epilogue constants and the epilogue functions for `spec`.
pub fn emit_epilogue(w: &mut CudaWriter, spec: EpilogueSpec) {
    w.line(format!("using TOut = {};", spec.out_dtype.cuda_type()));
    w.constant("bool", "EPI_BIAS", spec.bias);
    w.constant("int", "EPI_ACT", spec.act_code());
    w.constant("bool", "EPI_RES", spec.residual);
    w.lines(EPILOGUE);
}

/// Element conversions, vectors, cp.async, rasterization.
const COMMON: &str = r#"
__device__ __forceinline__ int rtx_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int rtx_max(int a, int b) { return a > b ? a : b; }

__device__ __forceinline__ float rtx_to_f32(float x) { return x; }
__device__ __forceinline__ float rtx_to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float rtx_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T rtx_from_f32(float x);
template <> __device__ __forceinline__ float rtx_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half rtx_from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 rtx_from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// N elements moved as one aligned access.
template <typename T, int N> struct alignas(sizeof(T) * N) RtxVec { T v[N]; };

__device__ __forceinline__ unsigned rtx_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// Asynchronous global->shared copies; bytes past `src_bytes` are zero-filled (src_bytes == 0 reads nothing).
__device__ __forceinline__ void rtx_cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// Unpredicated 16-byte copy (the whole chunk is known to be inside the matrix).
__device__ __forceinline__ void rtx_cp_async16_full(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void rtx_cp_async8(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void rtx_cp_async4(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void rtx_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void rtx_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// Grouped rasterization: consecutive block ids walk `group_m` tile rows column by column,
// so blocks running together share A and B tiles in L2.
__device__ __forceinline__ void rtx_tile_coords(int pid, int tiles_m, int tiles_n, int group_m, int& pm, int& pn) {
  const int width = group_m * tiles_n;
  const int group = pid / width;
  const int first_m = group * group_m;
  const int gsz = rtx_min(tiles_m - first_m, group_m);
  const int in_group = pid - group * width;
  pm = first_m + in_group % gsz;
  pn = in_group / gsz;
}
"#;

/// The fused epilogue over `N` consecutive output columns of one row.
const EPILOGUE: &str = r#"
__device__ __forceinline__ float rtx_act(float x) {
  if constexpr (EPI_ACT == 1) {
    return fmaxf(x, 0.0f);
  } else if constexpr (EPI_ACT == 2) {
    const float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);
    return 0.5f * x * (1.0f + tanhf(u));
  } else if constexpr (EPI_ACT == 3) {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  } else if constexpr (EPI_ACT == 4) {
    return x / (1.0f + expf(-x));
  } else {
    return x;
  }
}

// out[off + i] = act(alpha * acc[i] + beta * C[off + i] + bias[col + i]) + residual[off + i], i < N.
// `off` and `col` must be multiples of N (aligned vector access). C is read only when beta != 0.
template <int N>
__device__ __forceinline__ void rtx_epi_store(TOut* C, const TOut* bias, const TOut* residual, long long off, int col,
                                              const float* acc, float alpha, float beta) {
  float v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = alpha * acc[i];
  if (beta != 0.0f) {
    const RtxVec<TOut, N> c = *reinterpret_cast<const RtxVec<TOut, N>*>(C + off);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = fmaf(beta, rtx_to_f32(c.v[i]), v[i]);
  }
  if constexpr (EPI_BIAS) {
    const RtxVec<TOut, N> b = *reinterpret_cast<const RtxVec<TOut, N>*>(bias + col);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += rtx_to_f32(b.v[i]);
  }
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = rtx_act(v[i]);
  if constexpr (EPI_RES) {
    const RtxVec<TOut, N> r = *reinterpret_cast<const RtxVec<TOut, N>*>(residual + off);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += rtx_to_f32(r.v[i]);
  }
  RtxVec<TOut, N> o;
#pragma unroll
  for (int i = 0; i < N; ++i) o.v[i] = rtx_from_f32<TOut>(v[i]);
  *reinterpret_cast<RtxVec<TOut, N>*>(C + off) = o;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::gemm::problem::Epilogue;

    #[test]
    fn tag_names_every_baked_field() {
        let mut p = GemmProblem::nn(8, 8, 8, DType::F16);
        p.epilogue = Epilogue {
            alpha: 1.0,
            beta: 0.5,
            bias: true,
            activation: Activation::GeluTanh,
            residual: false,
            out_dtype: DType::F32,
        };
        let s = EpilogueSpec::of(&p);
        assert_eq!(s.tag(), "of32_b1_agelut_r0");
        let mut w = CudaWriter::new();
        emit_epilogue(&mut w, s);
        let code = w.finish();
        assert!(code.contains("using TOut = float;"));
        assert!(code.contains("constexpr int EPI_ACT = 2;"));
        assert!(code.contains("constexpr bool EPI_BIAS = true;"));
    }
}
