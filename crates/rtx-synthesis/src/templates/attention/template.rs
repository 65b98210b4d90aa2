//! The fused attention template (FlashAttention-2 style forward), one kernel per
//! (dtype, head_dim, causal, config); sequence lengths, batch and heads are run-time.
//!
//! Block `(x, y, z)` computes query rows `[m0, m0 + block_m)` of head `y` of batch `z`, with
//! `m0 = (gridDim.x - 1 - x) * block_m` (heaviest causal tiles first). Each warp owns
//! `block_m / warps` query rows (one or two 16-row mma tiles) and walks all key tiles:
//! 1. `S = Q K^T` with `mma.sync.m16n8k16` (f16/bf16 in, f32 out); Q fragments stay in
//!    registers (one m tile per warp) or are re-read with `ldmatrix`, K fragments come from
//!    `ldmatrix` on the `[key][d]` tile (which is K^T in the mma's column-major B layout);
//! 2. masking (keys `>= seq_k`, and causal keys after the query) only on tiles that need it;
//! 3. online softmax in f32: running max and sum per row (rows live in quads of 4 lanes),
//!    `exp2` with the `log2(e)`-prescaled scale, rescale of O by `exp2(m_old - m_new)`;
//! 4. `O += P V`: P's accumulators packed to f16/bf16 in registers are the A fragments, V's
//!    fragments come from `ldmatrix.trans` on the `[key][d]` tile.
//!
//! K/V tiles stream through `cp.async` (16-byte copies, zero-filled past `seq_k`) into
//! 16-byte-chunk XOR-swizzled shared tiles (bank-conflict-free for `ldmatrix` and the copies),
//! single or double buffered (`stages`). Causal blocks stop at the last key tile their rows
//! reach. The output is normalized by the row sum, staged through the warp's own Q rows and
//! written with 16-byte stores.
//!
//! Kernel arguments: `(const T* Q, const T* K, const T* V, T* O, int seq_q, int seq_k,
//! float scale_log2, then (long long batch_stride, long long head_stride, int row_stride) for Q,
//! K, V and O)` with `scale_log2 = scale * log2(e)`, strides in elements (so packed layouts such
//! as a `[tokens, 3 * d_model]` QKV projection are read in place); every base pointer and stride
//! 16-byte aligned (see `launch::AttentionStrides`).

use super::config::AttentionConfig;
use super::device::{ATTN_BODY, ATTN_HELPERS, ATTN_PRIMITIVES};
use super::problem::AttentionProblem;
use crate::templates::codegen::CudaWriter;
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::{Arch, DType};

/// The fused attention template (stateless).
#[derive(Debug, Clone, Copy, Default)]
pub struct AttentionTemplate;

/// Template name used in symbols, caches and the tuning database.
pub const ATTN_NAME: &str = "attention_fwd";
/// Bump on any change to the generated code.
pub const ATTN_VERSION: u32 = 2;

/// `block_m` values of the space.
pub const BLOCK_M: [u32; 2] = [64, 128];
/// `block_n` values of the space.
pub const BLOCK_N: [u32; 3] = [32, 64, 128];
/// `warps` values of the space.
pub const WARPS: [u32; 2] = [4, 8];
/// `stages` values of the space.
pub const STAGES: [u32; 2] = [1, 2];

impl AttentionTemplate {
    fn violation(&self, c: &AttentionConfig, reason: impl Into<String>) -> ConstraintViolation {
        ConstraintViolation {
            template: ATTN_NAME.to_string(),
            config: format!("{c:?}"),
            reason: reason.into(),
        }
    }

    /// The kernel's entry symbol (encodes everything baked in).
    pub fn entry_name(p: &AttentionProblem, c: &AttentionConfig) -> String {
        format!(
            "rtx_attn_fwd_{}_d{}_{}_bm{}_bn{}_w{}_s{}",
            p.dtype.name(),
            c.head_dim,
            if p.causal { "causal" } else { "full" },
            c.block_m,
            c.block_n,
            c.warps,
            c.stages
        )
    }

    /// `scale * log2(e)`, the kernel's `scale_log2` argument.
    pub fn scale_log2(p: &AttentionProblem) -> f32 {
        (p.scale as f64 * std::f64::consts::LOG2_E) as f32
    }
}

impl Template for AttentionTemplate {
    type Problem = AttentionProblem;
    type Config = AttentionConfig;

    fn name(&self) -> &'static str {
        ATTN_NAME
    }

    fn version(&self) -> u32 {
        ATTN_VERSION
    }

    fn space(&self, problem: &AttentionProblem, _arch: Arch) -> Vec<AttentionConfig> {
        let mut v = Vec::new();
        for block_m in BLOCK_M {
            for block_n in BLOCK_N {
                for warps in WARPS {
                    for stages in STAGES {
                        v.push(AttentionConfig {
                            head_dim: problem.head_dim,
                            block_m,
                            block_n,
                            warps,
                            stages,
                        });
                    }
                }
            }
        }
        v
    }

    fn check(
        &self,
        problem: &AttentionProblem,
        c: &AttentionConfig,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        problem
            .validate()
            .map_err(|e| self.violation(c, e.to_string()))?;
        if c.head_dim != problem.head_dim {
            return Err(self.violation(
                c,
                format!(
                    "head_dim {} of the config does not match the problem's {}",
                    c.head_dim, problem.head_dim
                ),
            ));
        }
        if !arch.has_mma_sync() || !arch.has_cp_async() {
            return Err(self.violation(
                c,
                format!("{arch} has no mma.sync m16n8k16 / cp.async (needs sm_80+)"),
            ));
        }
        if !BLOCK_M.contains(&c.block_m) {
            return Err(self.violation(c, format!("block_m = {} (must be 64 or 128)", c.block_m)));
        }
        if !BLOCK_N.contains(&c.block_n) {
            return Err(self.violation(
                c,
                format!("block_n = {} (must be 32, 64 or 128)", c.block_n),
            ));
        }
        if !WARPS.contains(&c.warps) {
            return Err(self.violation(c, format!("warps = {} (must be 4 or 8)", c.warps)));
        }
        if !STAGES.contains(&c.stages) {
            return Err(self.violation(c, format!("stages = {} (must be 1 or 2)", c.stages)));
        }
        let rows = c.rows_per_warp();
        if rows != 16 && rows != 32 {
            return Err(self.violation(
                c,
                format!("block_m / warps = {rows} query rows per warp (must be 16 or 32)"),
            ));
        }
        let smem = c.smem_bytes();
        let max = arch.max_smem_per_block_optin();
        if smem > max {
            return Err(self.violation(
                c,
                format!("{smem} bytes of shared memory exceed the {max} of {arch}"),
            ));
        }
        let budget = (65536 / c.threads()).min(255);
        // sm_120's ptxas needs more registers for the same code: with v1's arguments the
        // 248-estimate configs spilled 4-64 bytes there (none on sm_80 / sm_90a); with v2's
        // per-tensor strides a 224-estimate one-stage config (d128 bm64 bn64 w4) spilled 16 bytes
        // while its sm_90a build used 255 registers without spills. 32 keeps every sm_120 config
        // that passes clear of 255 (tests/attention_compile.rs compiles them all).
        let est = c.estimated_registers() + if arch == Arch::Sm120 { 32 } else { 0 };
        if est > budget {
            return Err(self.violation(
                c,
                format!(
                    "~{est} registers per thread exceed the {budget}-register budget of {} threads",
                    c.threads()
                ),
            ));
        }
        Ok(())
    }

    /// 128 query rows over 8 warps (16 rows each, Q in registers), double-buffered K/V:
    /// 128-key tiles at head_dim 64 (80 KiB), 64-key tiles at head_dim 128 (96 KiB), both
    /// within the 99 KiB of sm_86/89/120. Falls back to the first valid config of the space.
    fn default_config(&self, problem: &AttentionProblem, arch: Arch) -> AttentionConfig {
        let block_n = if problem.head_dim <= 64 { 128 } else { 64 };
        let c = AttentionConfig {
            head_dim: problem.head_dim,
            block_m: 128,
            block_n,
            warps: 8,
            stages: 2,
        };
        if self.check(problem, &c, arch).is_ok() {
            return c;
        }
        self.valid_space(problem, arch)
            .into_iter()
            .next()
            .unwrap_or(c)
    }

    fn emit(
        &self,
        problem: &AttentionProblem,
        c: &AttentionConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(problem, c, arch)?;
        let entry = Self::entry_name(problem, c);
        let mut w = CudaWriter::new();
        w.comment(format!("rtx {ATTN_NAME} v{ATTN_VERSION}: {entry}"));
        w.include("cuda_fp16.h");
        w.include("cuda_bf16.h");
        w.comment("---- configuration (from AttentionProblem / AttentionConfig) ----");
        w.line(format!("typedef {} T;", problem.dtype.cuda_type()));
        w.constant(
            "int",
            "KIND",
            if problem.dtype == DType::F16 { 0 } else { 1 },
        );
        w.constant("int", "D", c.head_dim);
        w.constant("int", "BM", c.block_m);
        w.constant("int", "BN", c.block_n);
        w.constant("int", "WARPS", c.warps);
        w.constant("int", "STAGES", c.stages);
        w.constant("bool", "CAUSAL", problem.causal);
        w.line("#define ATTN_NEG_INF __uint_as_float(0xff800000u)");
        w.lines(ATTN_PRIMITIVES);
        w.lines(ATTN_HELPERS);
        w.line(format!(
            "extern \"C\" __global__ void __launch_bounds__({}, 1) {entry}(",
            c.threads()
        ));
        w.line("    const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V, T* __restrict__ O,");
        w.line("    int seq_q, int seq_k, float scale_log2,");
        w.line("    long long q_sb, long long q_sh, int q_ss, long long k_sb, long long k_sh, int k_ss,");
        w.line("    long long v_sb, long long v_sh, int v_ss, long long o_sb, long long o_sh, int o_ss");
        w.open(")");
        w.lines(ATTN_BODY);
        w.close("");
        Ok(KernelSource {
            entry,
            code: w.finish(),
            template: ATTN_NAME.to_string(),
            template_version: ATTN_VERSION,
            options: vec!["-DNDEBUG".to_string()],
        })
    }

    fn launch(&self, problem: &AttentionProblem, c: &AttentionConfig) -> LaunchDims {
        LaunchDims {
            grid: [
                problem.seq_q.div_ceil(c.block_m.max(1)).max(1),
                problem.heads.max(1),
                problem.batch.max(1),
            ],
            block: [c.threads(), 1, 1],
            dynamic_smem: c.smem_bytes(),
        }
    }

    fn complexity(&self, c: &AttentionConfig) -> u64 {
        (c.stages as u64) * 4
            + (c.block_n as u64 / 32)
            + (c.block_m as u64 / 64)
            + (c.warps as u64 / 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::test_checks::assert_refused;
    use crate::templates::test_strategies::field;
    use proptest::prelude::*;

    fn problems() -> Vec<AttentionProblem> {
        let mut v = Vec::new();
        for d in [64, 128] {
            for causal in [false, true] {
                for dtype in [DType::F16, DType::Bf16] {
                    v.push(AttentionProblem::new(2, 4, 1000, d, causal, dtype));
                }
            }
        }
        v
    }

    #[test]
    fn default_configs_are_valid_on_every_mma_arch() {
        let t = AttentionTemplate;
        for p in problems() {
            for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90a, Arch::Sm120] {
                let c = t.default_config(&p, arch);
                t.check(&p, &c, arch).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!((c.block_m, c.warps, c.stages), (128, 8, 2));
                let src = t.emit(&p, &c, arch).unwrap();
                assert!(src
                    .code
                    .contains(&format!("constexpr int D = {};", p.head_dim)));
                assert!(src
                    .code
                    .contains(&format!("constexpr bool CAUSAL = {};", p.causal)));
            }
        }
    }

    #[test]
    fn check_rejects_with_typed_reasons() {
        let t = AttentionTemplate;
        let p = AttentionProblem::new(1, 1, 64, 128, false, DType::Bf16);
        let ok = t.default_config(&p, Arch::Sm90a);
        for (bad, arch, word) in [
            (
                AttentionConfig { head_dim: 64, ..ok },
                Arch::Sm90a,
                "head_dim",
            ),
            (ok, Arch::Sm75, "sm_80"),
            (
                AttentionConfig { block_m: 96, ..ok },
                Arch::Sm90a,
                "block_m",
            ),
            (
                AttentionConfig { block_n: 16, ..ok },
                Arch::Sm90a,
                "block_n",
            ),
            (AttentionConfig { warps: 2, ..ok }, Arch::Sm90a, "warps"),
            (AttentionConfig { stages: 3, ..ok }, Arch::Sm90a, "stages"),
            (
                AttentionConfig {
                    block_m: 64,
                    warps: 8,
                    ..ok
                },
                Arch::Sm90a,
                "rows per warp",
            ),
            (
                AttentionConfig { block_n: 128, ..ok },
                Arch::Sm120,
                "shared memory",
            ),
            (
                AttentionConfig {
                    block_m: 128,
                    warps: 4,
                    block_n: 128,
                    stages: 1,
                    ..ok
                },
                Arch::Sm90a,
                "register",
            ),
        ] {
            assert_refused(&t, &p, &bad, arch, word);
            assert!(t.emit(&p, &bad, arch).is_err());
        }
        let bad_problem = AttentionProblem { seq_q: 0, ..p };
        assert_refused(&t, &bad_problem, &ok, Arch::Sm90a, "seq_q");
    }

    #[test]
    fn space_is_mostly_valid_and_launch_covers_every_row() {
        let t = AttentionTemplate;
        for p in problems() {
            let all = t.space(&p, Arch::Sm90a);
            assert_eq!(all.len(), 24);
            let valid = t.valid_space(&p, Arch::Sm90a);
            assert!(valid.len() >= 8, "{}", valid.len());
            for c in &valid {
                let d = t.launch(&p, c);
                assert!(d.grid[0] as u64 * c.block_m as u64 >= p.seq_q as u64);
                assert_eq!((d.grid[1], d.grid[2]), (p.heads, p.batch));
                assert!(d.dynamic_smem <= Arch::Sm90a.max_smem_per_block_optin());
            }
        }
    }

    proptest! {
        /// Any config fields: `check`, `launch` and `complexity` answer without panicking (the
        /// launch shape's threads and shared memory used to overflow for huge fields).
        #[test]
        fn check_and_launch_never_panic(
            head_dim in field(&[64, 128]),
            block_m in field(&BLOCK_M),
            block_n in field(&BLOCK_N),
            warps in field(&WARPS),
            stages in field(&STAGES),
            arch in proptest::sample::select(vec![Arch::Sm80, Arch::Sm90a, Arch::Sm120]),
        ) {
            let t = AttentionTemplate;
            let p = AttentionProblem::new(2, 4, 1000, 128, false, DType::Bf16);
            let c = AttentionConfig { head_dim, block_m, block_n, warps, stages };
            let d = t.launch(&p, &c);
            let _ = t.complexity(&c);
            let _ = c.estimated_registers();
            if t.check(&p, &c, arch).is_ok() {
                prop_assert_eq!(d.block[0], c.warps * 32);
                prop_assert!(d.dynamic_smem <= arch.max_smem_per_block_optin());
            }
        }
    }
}
