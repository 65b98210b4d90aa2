//! Sample kernels owned by rtx-bench, generated with `CudaWriter` from typed parameters.
//!
//! They exist so the compile registry and the GEMM candidate hook have something real to run
//! before the template families land; they are deliberately simple and are labelled `sample`
//! everywhere they appear (never presented as rtx's tuned kernels).

use rtx_synthesis::templates::codegen::CudaWriter;
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::templates::{KernelSource, LaunchDims};
use rtx_synthesis::DType;

/// Version of the sample generators (bump on any change to the emitted code).
pub const SAMPLE_VERSION: u32 = 1;

/// Thread-block edge of the naive GEMM (BLOCK x BLOCK threads, one output each).
pub const NAIVE_GEMM_BLOCK: u32 = 16;

/// One sample kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKernel {
    /// `y = a * x + y` over `n` elements.
    Saxpy(DType),
    /// One thread per output, row-major A and B, the shared GEMM ABI (GEMM_ABI.md) with a
    /// plain `alpha * acc + beta * C` epilogue; f32 math (no tensor cores).
    NaiveGemm(DType),
}

fn to_float(d: DType, expr: &str) -> String {
    match d {
        DType::F32 | DType::Tf32 => format!("({expr})"),
        DType::F16 => format!("__half2float({expr})"),
        DType::Bf16 => format!("__bfloat162float({expr})"),
    }
}

fn from_float(d: DType, expr: &str) -> String {
    match d {
        DType::F32 | DType::Tf32 => format!("({expr})"),
        DType::F16 => format!("__float2half_rn({expr})"),
        DType::Bf16 => format!("__float2bfloat16_rn({expr})"),
    }
}

impl SampleKernel {
    /// Every sample instance.
    pub fn all() -> Vec<SampleKernel> {
        let mut v = Vec::new();
        for d in [DType::F32, DType::F16, DType::Bf16] {
            v.push(SampleKernel::Saxpy(d));
            v.push(SampleKernel::NaiveGemm(d));
        }
        v
    }

    /// Entry point name (encodes the parameters).
    pub fn entry(self) -> String {
        match self {
            SampleKernel::Saxpy(d) => format!("sample_saxpy_{}", d.name()),
            SampleKernel::NaiveGemm(d) => {
                format!("sample_naive_gemm_{}_nn_b{NAIVE_GEMM_BLOCK}", d.name())
            }
        }
    }

    /// Generates the translation unit.
    pub fn emit(self) -> KernelSource {
        let entry = self.entry();
        let mut w = CudaWriter::new();
        w.include("cuda_fp16.h").include("cuda_bf16.h");
        match self {
            SampleKernel::Saxpy(d) => {
                let t = d.cuda_type();
                w.block(format!("extern \"C\" __global__ void {entry}(const {t}* __restrict__ x, {t}* __restrict__ y, float a, int n)"), |w| {
                    w.line("int i = blockIdx.x * blockDim.x + threadIdx.x;");
                    w.line(format!(
                        "if (i < n) y[i] = {};",
                        from_float(d, &format!("a * {} + {}", to_float(d, "x[i]"), to_float(d, "y[i]")))
                    ));
                });
            }
            SampleKernel::NaiveGemm(d) => {
                let t = d.cuda_type();
                w.constant("int", "BLOCK", NAIVE_GEMM_BLOCK);
                w.block(
                    format!(
                        "extern \"C\" __global__ void __launch_bounds__(BLOCK * BLOCK) {entry}(const {t}* A, const {t}* B, {t}* C, const {t}* bias, const {t}* residual, int M, int N, int K, int lda, int ldb, int ldc, long long stride_a, long long stride_b, long long stride_c, float alpha, float beta)"
                    ),
                    |w| {
                        w.line("(void)bias; (void)residual;");
                        w.line("const int col = blockIdx.x * BLOCK + threadIdx.x;");
                        w.line("const int row = blockIdx.y * BLOCK + threadIdx.y;");
                        w.line("if (row >= M || col >= N) return;");
                        w.line("A += blockIdx.z * stride_a; B += blockIdx.z * stride_b; C += blockIdx.z * stride_c;");
                        w.line("float acc = 0.0f;");
                        w.block("for (int k = 0; k < K; ++k)", |w| {
                            w.line(format!(
                                "acc += {} * {};",
                                to_float(d, "A[(long long)row * lda + k]"),
                                to_float(d, "B[(long long)k * ldb + col]")
                            ));
                        });
                        w.line("const long long ci = (long long)row * ldc + col;");
                        w.line("float v = alpha * acc;");
                        w.line(format!("if (beta != 0.0f) v += beta * {};", to_float(d, "C[ci]")));
                        w.line(format!("C[ci] = {};", from_float(d, "v")));
                    },
                );
            }
        }
        KernelSource {
            entry,
            code: w.finish(),
            template: "sample".into(),
            template_version: SAMPLE_VERSION,
            options: vec![],
        }
    }

    /// Launch shape of the naive GEMM for `p` (one thread per output; batch in grid z).
    pub fn naive_gemm_launch(p: &GemmProblem) -> LaunchDims {
        let b = NAIVE_GEMM_BLOCK;
        LaunchDims {
            grid: [p.n.div_ceil(b), p.m.div_ceil(b), p.batch],
            block: [b, b, 1],
            dynamic_smem: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_and_in_the_code() {
        let all = SampleKernel::all();
        let mut names: Vec<_> = all.iter().map(|k| k.entry()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
        for k in all {
            let src = k.emit();
            assert!(
                src.code.contains(&format!(" {}(", k.entry())),
                "{}",
                src.code
            );
            assert_eq!(src.entry, k.entry());
        }
    }

    #[test]
    fn naive_gemm_follows_the_abi_order() {
        let src = SampleKernel::NaiveGemm(DType::Bf16).emit();
        let sig = "(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, const __nv_bfloat16* bias, const __nv_bfloat16* residual, int M, int N, int K, int lda, int ldb, int ldc, long long stride_a, long long stride_b, long long stride_c, float alpha, float beta)";
        assert!(src.code.contains(sig), "{}", src.code);
        let l =
            SampleKernel::naive_gemm_launch(&GemmProblem::nn(100, 33, 8, DType::Bf16).batched(3));
        assert_eq!(l.grid, [3, 7, 3]);
    }
}
