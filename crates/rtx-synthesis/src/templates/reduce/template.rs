//! The row-reduction template: softmax, LayerNorm and RMSNorm (optionally with a fused
//! residual add), one kernel per (problem, config).
//!
//! Mapping: a block holds `rows_per_block` rows of `threads_per_row` threads each; thread `t`
//! of a row owns the slots `(k, j)`, `k < chunks` (or `unroll` per iteration), `j < VEC`:
//! - vector path (`cols % VEC == 0` and every pointer aligned, tested at run time): slot
//!   `(k, j)` is element `(k * TPR + t) * VEC + j`, loaded 16 bytes (VEC elements) at a time;
//! - scalar path: slot `(k, j)` is element `(k * VEC + j) * TPR + t` (coalesced scalar
//!   accesses, same capacity, any alignment and any row length).
//!
//! All loads of a row (or of an iteration) are issued before their first use. Statistics are
//! accumulated in f32 per thread, then combined across the row's threads with
//! `rtx_row_reduce` (shuffles; shared memory only when a row spans several warps).

use super::config::{RowConfig, RowStrategy};
use super::device::write_reduce_prelude;
use super::problem::{RowOp, RowProblem};
use crate::templates::codegen::CudaWriter;
use crate::templates::elementwise::device::{vector_alignment, write_memory_prelude};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::Arch;

/// The row-reduction template (stateless).
#[derive(Debug, Clone, Copy, Default)]
pub struct RowReduceTemplate;

/// Registers per thread beyond the cached values.
const REGISTER_OVERHEAD: u32 = 32;
/// Threads-per-row values of the parameter space.
const TPR_CHOICES: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// How the emitted row function walks its slots.
struct Walk {
    /// Whether slot indices depend on a loop variable `base`.
    looped: bool,
    /// Slots per thread per pass (`chunks` or `unroll`).
    slots: u32,
}

impl RowReduceTemplate {
    fn violation(&self, config: &RowConfig, reason: impl Into<String>) -> ConstraintViolation {
        ConstraintViolation {
            template: self.name().to_string(),
            config: format!("{config:?}"),
            reason: reason.into(),
        }
    }

    /// Estimated registers per thread (cached values, the residual operand while it is live,
    /// one chunk of weight and bias, plus overhead), rounded up to 8; saturates at `u32::MAX`.
    pub fn estimated_registers(problem: &RowProblem, config: &RowConfig) -> u32 {
        let cached = config.cached_per_thread() as u64;
        let affine =
            (problem.op.has_weight() as u64 + problem.op.has_bias() as u64) * config.vec as u64;
        let live = cached * (1 + problem.residual as u64) + affine;
        let regs = (live + REGISTER_OVERHEAD as u64).div_ceil(8) * 8;
        regs.min(u32::MAX as u64) as u32
    }

    /// `minBlocksPerSM` for `__launch_bounds__` (see
    /// [`crate::templates::elementwise::device::min_blocks_per_sm`]).
    pub fn min_blocks_per_sm(problem: &RowProblem, config: &RowConfig, arch: Arch) -> u32 {
        crate::templates::elementwise::device::min_blocks_per_sm(
            config.block_threads(),
            Self::estimated_registers(problem, config),
            arch,
        )
    }

    /// The kernel's entry-point name.
    pub fn entry_name(problem: &RowProblem, config: &RowConfig) -> String {
        let mut op = problem.op.name().to_string();
        if problem.op.has_weight() {
            op.push('w');
        }
        if problem.op.has_bias() {
            op.push('b');
        }
        if problem.residual {
            op.push_str("_res");
        }
        let strat = match config.strategy {
            RowStrategy::Registers { chunks } => format!("r{chunks}"),
            RowStrategy::Looped { unroll } => format!("l{unroll}"),
        };
        format!(
            "rtx_row_{op}_{}_v{}_t{}_r{}_{strat}",
            problem.dtype.name(),
            config.vec,
            config.threads_per_row,
            config.rows_per_block
        )
    }

    fn identity(problem: &RowProblem) -> &'static str {
        match problem.op {
            RowOp::Softmax => "-RTX_INF",
            _ => "0.0f",
        }
    }

    /// `float arr[S][VEC]` loaded from `ptr` at the walk's slots (masked slots get `ident`).
    fn load(w: &mut CudaWriter, arr: &str, ptr: &str, ident: &str, walk: &Walk) {
        let base = if walk.looped { "base" } else { "0" };
        w.line(format!("float {arr}[{}][VEC];", walk.slots));
        w.line("#pragma unroll");
        w.open(format!("for (int k = 0; k < {}; ++k)", walk.slots));
        w.open("if constexpr (VECP)");
        w.line(format!(
            "if (inb({base}, k, 0)) rtx_ld<T, VEC>({ptr}_r + {base} + rel(k, 0), {arr}[k]);"
        ));
        w.line(format!(
            "else for (int j = 0; j < VEC; ++j) {arr}[k][j] = {ident};"
        ));
        w.close("");
        w.open("else");
        w.line("#pragma unroll");
        w.line(format!(
            "for (int j = 0; j < VEC; ++j) {arr}[k][j] = inb({base}, k, j) ? rtx_ld1<T>({ptr}_r + {base} + rel(k, j)) : {ident};"
        ));
        w.close("");
        w.close("");
    }

    /// Stores `expr` (an expression of `v[k][j]`, `wv[j]`, `bv[j]`) to `ptr` at the walk's slots.
    fn store(
        w: &mut CudaWriter,
        problem: &RowProblem,
        ptr: &str,
        expr: &str,
        affine: bool,
        walk: &Walk,
    ) {
        let base = if walk.looped { "base" } else { "0" };
        let has_w = affine && problem.op.has_weight();
        let has_b = affine && problem.op.has_bias();
        w.line("#pragma unroll");
        w.open(format!("for (int k = 0; k < {}; ++k)", walk.slots));
        w.open("if constexpr (VECP)");
        w.open(format!("if (inb({base}, k, 0))"));
        if has_w {
            w.line("float wv[VEC];");
            w.line(format!(
                "rtx_ld<T, VEC>(weight_r + {base} + rel(k, 0), wv);"
            ));
        }
        if has_b {
            w.line("float bv[VEC];");
            w.line(format!("rtx_ld<T, VEC>(bias_r + {base} + rel(k, 0), bv);"));
        }
        w.line("float o[VEC];");
        w.line("#pragma unroll");
        w.line(format!("for (int j = 0; j < VEC; ++j) o[j] = {expr};"));
        w.line(format!("rtx_st<T, VEC>({ptr}_r + {base} + rel(k, 0), o);"));
        w.close("");
        w.close("");
        w.open("else");
        w.line("#pragma unroll");
        w.open("for (int j = 0; j < VEC; ++j)");
        w.open(format!("if (inb({base}, k, j))"));
        if has_w || has_b {
            w.line("float wv[VEC], bv[VEC];");
            w.line("(void)wv; (void)bv;");
        }
        if has_w {
            w.line(format!(
                "wv[j] = rtx_ld1<T>(weight_r + {base} + rel(k, j));"
            ));
        }
        if has_b {
            w.line(format!("bv[j] = rtx_ld1<T>(bias_r + {base} + rel(k, j));"));
        }
        w.line(format!("rtx_st1<T>({ptr}_r + {base} + rel(k, j), {expr});"));
        w.close("");
        w.close("");
        w.close("");
        w.close("");
    }

    /// Loads x (and the residual, forming and writing `h`) into `v`.
    fn load_input(w: &mut CudaWriter, problem: &RowProblem, walk: &Walk) {
        let ident = Self::identity(problem);
        Self::load(w, "v", "x", ident, walk);
        if problem.residual {
            Self::load(w, "r", "residual", "0.0f", walk);
            w.comment(
                "h = round(x + residual): normalized, and written out as the new residual stream.",
            );
            w.line("#pragma unroll");
            w.line(format!(
                "for (int k = 0; k < {}; ++k) for (int j = 0; j < VEC; ++j) v[k][j] = rtx_round<T>(v[k][j] + r[k][j]);",
                walk.slots
            ));
            Self::store(w, problem, "residual_out", "v[k][j]", false, walk);
        }
    }

    fn for_slots(walk: &Walk, body: &str) -> String {
        format!(
            "for (int k = 0; k < {}; ++k) for (int j = 0; j < VEC; ++j) {body}",
            walk.slots
        )
    }

    fn norm_output_expr(problem: &RowProblem) -> String {
        let mut e = match problem.op {
            RowOp::RmsNorm { .. } => "v[k][j] * rstd".to_string(),
            _ => "(v[k][j] - mu) * rstd".to_string(),
        };
        if problem.op.has_weight() {
            e = format!("{e} * wv[j]");
        }
        if problem.op.has_bias() {
            e = format!("{e} + bv[j]");
        }
        e
    }

    fn write_norm_finish(w: &mut CudaWriter, problem: &RowProblem) {
        if let RowOp::LayerNorm { .. } = problem.op {
            w.line("const float rstd = rsqrtf(var + eps);");
            w.comment("A non-finite input makes the whole row NaN (as the f64 formula gives).");
            w.line("const float mu = (fabsf(mean) < RTX_INF && var < RTX_INF) ? mean : RTX_NAN;");
        } else {
            w.line("const float rstd = rsqrtf(ms + eps);");
        }
    }

    fn write_registers_body(w: &mut CudaWriter, problem: &RowProblem, chunks: u32) {
        let walk = Walk {
            looped: false,
            slots: chunks,
        };
        Self::load_input(w, problem, &walk);
        match problem.op {
            RowOp::Softmax => {
                w.line("float mt = -RTX_INF;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(&walk, "mt = rtx_max(mt, v[k][j]);"));
                w.line("const float ms = mt == -RTX_INF ? 0.0f : mt;");
                w.line("float st = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(
                    &walk,
                    "{ v[k][j] = rtx_exp2((v[k][j] - ms) * RTX_LOG2E); st += v[k][j]; }",
                ));
                w.line("const RtxMaxSum tot = rtx_row_reduce<TPR, RPB>(RtxMaxSum{mt, st}, smem0);");
                w.line("const float scale = rtx_rescale(mt, tot.m) / tot.s;");
                Self::store(w, problem, "y", "v[k][j] * scale", false, &walk);
            }
            RowOp::LayerNorm { .. } => {
                w.line("float st = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(&walk, "st += v[k][j];"));
                w.line("const float mean = rtx_row_reduce<TPR, RPB>(RtxSum{st}, smem0).a / (float)cols;");
                w.line("float qt = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(
                    &walk,
                    "if (inb(0, k, j)) { const float d = v[k][j] - mean; qt += d * d; }",
                ));
                w.line("const float var = rtx_row_reduce<TPR, RPB>(RtxSum{qt}, smem1).a / (float)cols;");
                Self::write_norm_finish(w, problem);
                Self::store(
                    w,
                    problem,
                    "y",
                    &Self::norm_output_expr(problem),
                    true,
                    &walk,
                );
            }
            RowOp::RmsNorm { .. } => {
                w.line("float qt = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(&walk, "qt += v[k][j] * v[k][j];"));
                w.line(
                    "const float ms = rtx_row_reduce<TPR, RPB>(RtxSum{qt}, smem0).a / (float)cols;",
                );
                Self::write_norm_finish(w, problem);
                Self::store(
                    w,
                    problem,
                    "y",
                    &Self::norm_output_expr(problem),
                    true,
                    &walk,
                );
            }
        }
    }

    fn write_looped_body(w: &mut CudaWriter, problem: &RowProblem, unroll: u32) {
        let walk = Walk {
            looped: true,
            slots: unroll,
        };
        w.comment("Pass 1: statistics.");
        match problem.op {
            RowOp::Softmax => w.line("float mt = -RTX_INF, st = 0.0f;"),
            RowOp::LayerNorm { .. } => w.line("RtxMoments acc = RtxMoments{0.0f, 0.0f, 0.0f};"),
            RowOp::RmsNorm { .. } => w.line("float qt = 0.0f;"),
        };
        w.open("for (int base = 0; base < cols; base += STEP)");
        Self::load_input(w, problem, &walk);
        match problem.op {
            RowOp::Softmax => {
                w.line("float mc = -RTX_INF;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(&walk, "mc = rtx_max(mc, v[k][j]);"));
                w.line("const float mn = rtx_max(mt, mc);");
                w.line("const float msn = mn == -RTX_INF ? 0.0f : mn;");
                w.line("float sc = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(
                    &walk,
                    "sc += rtx_exp2((v[k][j] - msn) * RTX_LOG2E);",
                ));
                w.line("st = st * rtx_rescale(mt, msn) + sc;");
                w.line("mt = mn;");
            }
            RowOp::LayerNorm { .. } => {
                w.line("float cn = 0.0f, cs = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(
                    &walk,
                    "if (inb(base, k, j)) { cn += 1.0f; cs += v[k][j]; }",
                ));
                w.line("const float cm = cn > 0.0f ? cs / cn : 0.0f;");
                w.line("float cq = 0.0f;");
                w.line("#pragma unroll");
                w.line(Self::for_slots(
                    &walk,
                    "if (inb(base, k, j)) { const float d = v[k][j] - cm; cq += d * d; }",
                ));
                w.line("acc = rtx_combine(acc, RtxMoments{cn, cm, cq});");
            }
            RowOp::RmsNorm { .. } => {
                w.line("#pragma unroll");
                w.line(Self::for_slots(&walk, "qt += v[k][j] * v[k][j];"));
            }
        }
        w.close("");
        let expr = match problem.op {
            RowOp::Softmax => {
                w.line("const RtxMaxSum tot = rtx_row_reduce<TPR, RPB>(RtxMaxSum{mt, st}, smem0);");
                w.line("const float rs = 1.0f / tot.s;");
                "rtx_exp2((v[k][j] - tot.m) * RTX_LOG2E) * rs".to_string()
            }
            RowOp::LayerNorm { .. } => {
                w.line("const RtxMoments tot = rtx_row_reduce<TPR, RPB>(acc, smem0);");
                w.line("const float mean = tot.mean;");
                w.line("const float var = tot.m2 / (float)cols;");
                Self::write_norm_finish(w, problem);
                Self::norm_output_expr(problem)
            }
            RowOp::RmsNorm { .. } => {
                w.line(
                    "const float ms = rtx_row_reduce<TPR, RPB>(RtxSum{qt}, smem0).a / (float)cols;",
                );
                Self::write_norm_finish(w, problem);
                Self::norm_output_expr(problem)
            }
        };
        w.comment(
            "Pass 2: outputs (re-reading h, which this thread wrote, through the coherent path).",
        );
        w.open("for (int base = 0; base < cols; base += STEP)");
        if problem.residual {
            Self::load(w, "v", "residual_out", "0.0f", &walk);
        } else {
            Self::load(w, "v", "x", Self::identity(problem), &walk);
        }
        Self::store(w, problem, "y", &expr, true, &walk);
        w.close("");
    }

    fn tensor_params(problem: &RowProblem) -> (Vec<String>, Vec<String>) {
        let mut params = vec!["const T* __restrict__ x".to_string()];
        let mut names = vec!["x".to_string()];
        if problem.residual {
            params.push("const T* __restrict__ residual".into());
            names.push("residual".into());
        }
        if problem.op.has_weight() {
            params.push("const T* __restrict__ weight".into());
            names.push("weight".into());
        }
        if problem.op.has_bias() {
            params.push("const T* __restrict__ bias".into());
            names.push("bias".into());
        }
        params.push("T* __restrict__ y".into());
        names.push("y".into());
        if problem.residual {
            params.push("T* __restrict__ residual_out".into());
            names.push("residual_out".into());
        }
        (params, names)
    }

    fn write_row_fn(w: &mut CudaWriter, problem: &RowProblem, config: &RowConfig) {
        let (mut params, _) = Self::tensor_params(problem);
        params.push("const int cols".into());
        if problem.op.is_norm() {
            params.push("const float eps".into());
        }
        params.extend([
            "const int t".into(),
            "const long long off".into(),
            "const bool valid".into(),
        ]);
        w.line("template <bool VECP>");
        w.open(format!(
            "__device__ __forceinline__ void rtx_row({})",
            params.join(", ")
        ));
        w.comment("Slot (base, k, j) is element base + o0 + rel(k, j) of the row (see the template docs);");
        w.comment(
            "rel() is a compile-time constant after unrolling, so accesses use immediate offsets.",
        );
        w.line("const int o0 = VECP ? t * VEC : t;");
        w.line("auto rel = [&](int k, int j) -> int { return VECP ? k * (TPR * VEC) + j : (k * VEC + j) * TPR; };");
        w.line("auto inb = [&](int base, int k, int j) -> bool { return valid && rel(k, j) < cols - o0 - base; };");
        let (_, names) = Self::tensor_params(problem);
        for n in &names {
            let constness = if matches!(n.as_str(), "y" | "residual_out") {
                ""
            } else {
                "const "
            };
            let row = if matches!(n.as_str(), "weight" | "bias") {
                ""
            } else {
                " + off"
            };
            w.line(format!("{constness}T* const {n}_r = {n}{row} + o0;"));
        }
        let payload = match (problem.op, config.strategy) {
            (RowOp::Softmax, _) => "RtxMaxSum",
            (RowOp::LayerNorm { .. }, RowStrategy::Looped { .. }) => "RtxMoments",
            _ => "RtxSum",
        };
        let slots = match (problem.op, config.strategy) {
            (RowOp::LayerNorm { .. }, RowStrategy::Registers { .. }) => 2,
            _ => 1,
        };
        for s in 0..slots {
            if config.threads_per_row > 32 {
                w.line(format!("__shared__ {payload} smem{s}[RPB * (TPR / 32)];"));
            } else {
                w.line(format!("{payload}* smem{s} = nullptr;"));
            }
        }
        match config.strategy {
            RowStrategy::Registers { chunks } => Self::write_registers_body(w, problem, chunks),
            RowStrategy::Looped { unroll } => Self::write_looped_body(w, problem, unroll),
        }
        w.close("");
    }

    fn write_kernel(w: &mut CudaWriter, entry: &str, problem: &RowProblem, config: &RowConfig) {
        let (mut params, names) = Self::tensor_params(problem);
        params.push("const int rows".into());
        params.push("const int cols".into());
        let mut args = names.clone();
        args.push("cols".into());
        if problem.op.is_norm() {
            params.push("const float eps".into());
            args.push("eps".into());
        }
        args.extend(["t".into(), "off".into(), "valid".into()]);
        let args = args.join(", ");
        w.open(format!(
            "extern \"C\" __global__ void __launch_bounds__(TPR * RPB, MIN_BLOCKS) {entry}({})",
            params.join(", ")
        ));
        w.line("const int t = (int)(threadIdx.x % TPR);");
        w.line(
            "const long long row = (long long)blockIdx.x * RPB + (long long)(threadIdx.x / TPR);",
        );
        w.line("const bool valid = row < (long long)rows;");
        w.line("const long long off = row * (long long)cols;");
        if config.vec > 1 {
            let align = vector_alignment(problem.dtype, config.vec);
            let mut conds = vec!["(cols % VEC) == 0".to_string()];
            conds.extend(names.iter().map(|n| format!("rtx_aligned<{align}>({n})")));
            w.comment("Vector path only when rows start aligned (a launch-time property).");
            w.open(format!("if ({})", conds.join(" && ")));
            w.line(format!("rtx_row<true>({args});"));
            w.line("return;");
            w.close("");
        }
        w.line(format!("rtx_row<false>({args});"));
        w.close("");
    }
}

impl Template for RowReduceTemplate {
    type Problem = RowProblem;
    type Config = RowConfig;

    fn name(&self) -> &'static str {
        "row_reduce"
    }

    fn version(&self) -> u32 {
        1
    }

    fn space(&self, problem: &RowProblem, _arch: Arch) -> Vec<RowConfig> {
        let mut v = Vec::new();
        let size = problem.dtype.size_bytes() as u32;
        for vec in [1u32, 2, 4, 8] {
            if vec * size > 16 {
                continue;
            }
            for tpr in TPR_CHOICES {
                for rpb in [1u32, 2, 4, 8, 16, 32, 64, 128] {
                    let block = tpr * rpb;
                    if !(32..=1024).contains(&block) || (tpr > 32 && rpb > 2) {
                        continue;
                    }
                    let chunks = (problem.cols as u64).div_ceil(tpr as u64 * vec as u64);
                    if chunks as u32 as u64 == chunks && chunks * vec as u64 <= 64 {
                        v.push(RowConfig {
                            vec,
                            threads_per_row: tpr,
                            rows_per_block: rpb,
                            strategy: RowStrategy::Registers {
                                chunks: chunks as u32,
                            },
                        });
                    }
                    for unroll in [1, 2, 4, 8] {
                        v.push(RowConfig {
                            vec,
                            threads_per_row: tpr,
                            rows_per_block: rpb,
                            strategy: RowStrategy::Looped { unroll },
                        });
                    }
                }
            }
        }
        v
    }

    fn check(
        &self,
        problem: &RowProblem,
        config: &RowConfig,
        _arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        problem
            .validate()
            .map_err(|e| self.violation(config, e.to_string()))?;
        let size = problem.dtype.size_bytes() as u32;
        if ![1, 2, 4, 8].contains(&config.vec) || config.vec * size > 16 {
            return Err(self.violation(
                config,
                format!(
                    "vec = {} must be 1, 2, 4 or 8 with vec * {size} bytes <= 16",
                    config.vec
                ),
            ));
        }
        let tpr = config.threads_per_row;
        if !(TPR_CHOICES.contains(&tpr) || (tpr.is_multiple_of(32) && (64..=1024).contains(&tpr))) {
            return Err(self.violation(config, format!("threads_per_row = {tpr} must be 1..=32 (a power of two) or a multiple of 32 up to 1024")));
        }
        // Saturating: an imported config may carry any rows_per_block; u32::MAX fails the bound.
        let block = config.block_threads();
        if config.rows_per_block == 0 || !block.is_multiple_of(32) || block > 1024 {
            return Err(self.violation(config, format!("block = threads_per_row x rows_per_block = {block} must be a multiple of 32 up to 1024")));
        }
        match config.strategy {
            RowStrategy::Registers { chunks } => {
                if chunks == 0 {
                    return Err(self.violation(config, "chunks = 0"));
                }
                let cap = config.capacity().unwrap_or(0);
                if cap < problem.cols as u64 {
                    return Err(self.violation(
                        config,
                        format!("register capacity {cap} < cols = {}", problem.cols),
                    ));
                }
                let cached = config.cached_per_thread();
                if cached > 64 {
                    return Err(self.violation(
                        config,
                        format!("{cached} cached values per thread (max 64)"),
                    ));
                }
            }
            RowStrategy::Looped { unroll } => {
                if unroll == 0 || unroll > 8 || unroll * config.vec > 32 {
                    return Err(self.violation(
                        config,
                        format!("unroll = {unroll} must be 1..=8 with unroll * vec <= 32"),
                    ));
                }
            }
        }
        let budget = (65536 / block).min(255);
        let est = Self::estimated_registers(problem, config);
        if est > budget {
            return Err(self.violation(config, format!("~{est} registers per thread exceed the {budget}-register budget of a {block}-thread block")));
        }
        Ok(())
    }

    fn default_config(&self, problem: &RowProblem, arch: Arch) -> RowConfig {
        let size = problem.dtype.size_bytes() as u32;
        let vec = (16 / size).clamp(1, 8);
        let chunks_total = (problem.cols.max(1) as u64).div_ceil(vec as u64);
        let rpb_for = |tpr: u32| {
            if tpr <= 32 {
                256 / tpr
            } else if tpr == 64 {
                2
            } else {
                1
            }
        };
        let regs = |tpr: u32, chunks: u32| RowConfig {
            vec,
            threads_per_row: tpr,
            rows_per_block: rpb_for(tpr),
            strategy: RowStrategy::Registers { chunks },
        };
        // Short rows: a (sub-)warp per row, 2 chunks (32 bytes) per thread in flight.
        // Longer rows: 4 chunks (64 bytes) per thread, up to 512 threads per row.
        // Longest rows: looped.
        let cfg = if chunks_total.div_ceil(2) <= 32 {
            let tpr = (chunks_total.div_ceil(2).next_power_of_two() as u32).clamp(2, 32);
            regs(tpr, chunks_total.div_ceil(tpr as u64) as u32)
        } else if chunks_total.div_ceil(4) <= 512 {
            let tpr = (chunks_total.div_ceil(4).next_power_of_two() as u32).max(32);
            regs(tpr, chunks_total.div_ceil(tpr as u64) as u32)
        } else {
            let unroll = if problem.residual { 2 } else { 4 };
            RowConfig {
                vec,
                threads_per_row: 512,
                rows_per_block: 1,
                strategy: RowStrategy::Looped { unroll },
            }
        };
        if self.check(problem, &cfg, arch).is_ok() {
            cfg
        } else {
            RowConfig {
                vec,
                threads_per_row: 256,
                rows_per_block: 1,
                strategy: RowStrategy::Looped { unroll: 2 },
            }
        }
    }

    fn emit(
        &self,
        problem: &RowProblem,
        config: &RowConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(problem, config, arch)?;
        let entry = Self::entry_name(problem, config);
        let mut w = CudaWriter::new();
        w.comment(format!(
            "rtx row kernel: {:?}, dtype {}, residual {}; config {config:?}",
            problem.op, problem.dtype, problem.residual
        ));
        write_memory_prelude(&mut w);
        write_reduce_prelude(&mut w);
        w.line("");
        w.line(format!("typedef {} T;", problem.dtype.cuda_type()));
        w.constant("int", "TPR", config.threads_per_row);
        w.constant("int", "RPB", config.rows_per_block);
        w.constant("int", "VEC", config.vec);
        w.constant(
            "int",
            "MIN_BLOCKS",
            Self::min_blocks_per_sm(problem, config, arch),
        );
        if let RowStrategy::Looped { unroll } = config.strategy {
            w.constant("int", "STEP", format!("TPR * VEC * {unroll}"));
        }
        w.line("");
        Self::write_row_fn(&mut w, problem, config);
        w.line("");
        Self::write_kernel(&mut w, &entry, problem, config);
        Ok(KernelSource {
            entry,
            code: w.finish(),
            template: self.name().to_string(),
            template_version: self.version(),
            options: vec![],
        })
    }

    fn launch(&self, problem: &RowProblem, config: &RowConfig) -> LaunchDims {
        let rpb = config.rows_per_block.max(1);
        LaunchDims {
            grid: [problem.rows.div_ceil(rpb).max(1), 1, 1],
            block: [config.block_threads(), 1, 1],
            dynamic_smem: 0,
        }
    }

    fn complexity(&self, config: &RowConfig) -> u64 {
        let s = match config.strategy {
            RowStrategy::Registers { chunks } => chunks as u64,
            RowStrategy::Looped { unroll } => 8 + unroll as u64,
        };
        s + (config.threads_per_row as u64 > 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::test_checks::assert_refused;
    use crate::templates::test_strategies::field;
    use crate::DType;
    use proptest::prelude::*;

    fn problems() -> Vec<RowProblem> {
        let mut v = Vec::new();
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            for cols in [1, 3, 64, 1000, 3072, 4097, 65536] {
                v.push(RowProblem::softmax(1024, cols, dtype));
                v.push(RowProblem::layernorm(1024, cols, dtype, true, true, 1e-5));
                v.push(RowProblem::rmsnorm(1024, cols, dtype, true, 1e-6).with_residual());
            }
        }
        v
    }

    #[test]
    fn default_configs_are_valid() {
        let t = RowReduceTemplate;
        for p in problems() {
            let c = t.default_config(&p, Arch::Sm90a);
            assert!(
                t.check(&p, &c, Arch::Sm90a).is_ok(),
                "{p:?}: {c:?}: {:?}",
                t.check(&p, &c, Arch::Sm90a)
            );
            assert!(t.emit(&p, &c, Arch::Sm90a).is_ok());
        }
    }

    #[test]
    fn defaults_pick_registers_for_mid_rows_and_16_byte_vectors() {
        let t = RowReduceTemplate;
        let p = RowProblem::softmax(16384, 3072, DType::Bf16);
        let c = t.default_config(&p, Arch::Sm90a);
        assert_eq!(c.vec, 8);
        assert!(matches!(c.strategy, RowStrategy::Registers { .. }), "{c:?}");
        assert!(c.capacity().unwrap() >= 3072);
        let p = RowProblem::layernorm(256, 65536, DType::F32, true, true, 1e-5);
        assert!(matches!(
            t.default_config(&p, Arch::Sm90a).strategy,
            RowStrategy::Looped { .. }
        ));
        let p = RowProblem::rmsnorm(4096, 64, DType::Bf16, false, 1e-6);
        assert!(t.default_config(&p, Arch::Sm90a).threads_per_row <= 32);
    }

    #[test]
    fn check_rejects_with_reasons() {
        let t = RowReduceTemplate;
        let p = RowProblem::softmax(8, 4096, DType::F32);
        let ok = RowConfig {
            vec: 4,
            threads_per_row: 128,
            rows_per_block: 1,
            strategy: RowStrategy::Registers { chunks: 8 },
        };
        assert!(t.check(&p, &ok, Arch::Sm90a).is_ok());
        for (bad, word) in [
            (RowConfig { vec: 8, ..ok }, "vec"),
            (
                RowConfig {
                    threads_per_row: 48,
                    ..ok
                },
                "threads_per_row",
            ),
            (
                RowConfig {
                    threads_per_row: 16,
                    rows_per_block: 1,
                    ..ok
                },
                "block",
            ),
            (
                RowConfig {
                    strategy: RowStrategy::Registers { chunks: 7 },
                    ..ok
                },
                "capacity",
            ),
            (
                RowConfig {
                    strategy: RowStrategy::Looped { unroll: 9 },
                    ..ok
                },
                "unroll",
            ),
            (
                RowConfig {
                    threads_per_row: 1024,
                    strategy: RowStrategy::Registers { chunks: 16 },
                    ..ok
                },
                "register",
            ),
        ] {
            assert_refused(&t, &p, &bad, Arch::Sm90a, word);
        }
    }

    #[test]
    fn check_rejects_overflowing_fields_instead_of_wrapping() {
        let t = RowReduceTemplate;
        // 32 x 2^27 threads per block used to overflow (a panic in debug; 0 in release, then a
        // division by zero).
        let p = RowProblem::softmax(4, 64, DType::F32);
        let c = RowConfig {
            vec: 4,
            threads_per_row: 32,
            rows_per_block: 1 << 27,
            strategy: RowStrategy::Registers { chunks: 1 },
        };
        assert_refused(&t, &p, &c, Arch::Sm90a, "block");
        // 2^29 chunks x 8 elements used to wrap to 0 cached values and pass.
        let p = RowProblem::softmax(4, 64, DType::F16);
        let c = RowConfig {
            vec: 8,
            threads_per_row: 32,
            rows_per_block: 1,
            strategy: RowStrategy::Registers { chunks: 1 << 29 },
        };
        assert_refused(&t, &p, &c, Arch::Sm90a, "cached values");
        assert_eq!(c.cached_per_thread(), u32::MAX);
        assert_eq!(
            RowConfig {
                rows_per_block: u32::MAX,
                ..c
            }
            .block_threads(),
            u32::MAX
        );
    }

    #[test]
    fn an_imported_db_entry_with_an_overflowing_config_serves_the_default() {
        use crate::tuner::db::{DbEntry, EntryMeta, StoredConfig};
        use crate::tuner::{DeviceKey, LookupPolicy, LookupSource, TimingStats, TuneKey, TuningDb};
        let t = RowReduceTemplate;
        let p = RowProblem::softmax(4, 64, DType::F32);
        let dev = DeviceKey::new("NVIDIA H100", (9, 0), (13, 0));
        let entry = DbEntry {
            key: TuneKey::new(&t, &p, Arch::Sm90a, &dev).unwrap(),
            winner: StoredConfig {
                config: serde_json::json!({
                    "vec": 4, "threads_per_row": 32, "rows_per_block": 1u32 << 27,
                    "strategy": {"Registers": {"chunks": 1}}
                }),
                fingerprint: "x".into(),
                stats: TimingStats::from_samples(vec![1.0]).unwrap(),
            },
            runners_up: vec![],
            meta: EntryMeta {
                created_unix_s: 0,
                strategy: "x".into(),
                measured: 1,
                failed: 0,
                space: 1,
                tuner_version: "x".into(),
            },
        };
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuningDb::open(dir.path().join("tuning.db")).unwrap();
        let json = serde_json::json!({"format": "rtx-tuning-db", "version": 1, "entries": [entry]});
        assert_eq!(db.import_json(&json.to_string()).unwrap().added, 1);
        let got = db
            .lookup(&t, &p, Arch::Sm90a, &dev, &LookupPolicy::default())
            .unwrap();
        assert_eq!(got.source, LookupSource::Default);
        assert_eq!(got.config, t.default_config(&p, Arch::Sm90a));
    }

    proptest! {
        /// Any config fields: `check`, `launch` and `complexity` answer without panicking, and an
        /// accepted config has a legal block that fits the register budget.
        #[test]
        fn check_never_panics_on_any_row_config(
            vec in field(&[1, 2, 4, 8]),
            threads_per_row in field(&[1, 8, 32, 64, 256, 1024]),
            rows_per_block in field(&[1, 2, 4, 32]),
            amount in field(&[1, 2, 4, 8, 16]),
            looped in any::<bool>(),
            cols in prop_oneof![any::<u32>(), 1u32..8192],
            dtype in proptest::sample::select(vec![DType::F32, DType::F16, DType::Bf16]),
        ) {
            let t = RowReduceTemplate;
            let p = RowProblem::layernorm(64, cols, dtype, true, true, 1e-5).with_residual();
            let strategy = if looped {
                RowStrategy::Looped { unroll: amount }
            } else {
                RowStrategy::Registers { chunks: amount }
            };
            let c = RowConfig { vec, threads_per_row, rows_per_block, strategy };
            let _ = t.launch(&p, &c);
            let _ = t.complexity(&c);
            let _ = RowReduceTemplate::estimated_registers(&p, &c);
            if t.check(&p, &c, Arch::Sm90a).is_ok() {
                let block = c.threads_per_row as u64 * c.rows_per_block as u64;
                prop_assert!(block.is_multiple_of(32) && (32..=1024).contains(&block));
                prop_assert!(c.cached_per_thread() <= 64);
                prop_assert!(t.emit(&p, &c, Arch::Sm90a).is_ok());
            }
        }
    }

    #[test]
    fn space_has_valid_configs_of_both_strategies() {
        let t = RowReduceTemplate;
        for p in [
            RowProblem::softmax(64, 3072, DType::Bf16),
            RowProblem::layernorm(64, 65536, DType::F32, false, false, 1e-5),
        ] {
            let valid = t.valid_space(&p, Arch::Sm90a);
            assert!(valid
                .iter()
                .any(|c| matches!(c.strategy, RowStrategy::Looped { .. })));
            for c in &valid {
                let d = t.launch(&p, c);
                assert!(d.grid[0] as u64 * c.rows_per_block as u64 >= p.rows as u64);
                assert!(d.block[0] <= 1024 && d.block[0] % 32 == 0);
            }
        }
        let valid = t.valid_space(&RowProblem::softmax(64, 3072, DType::Bf16), Arch::Sm90a);
        assert!(valid
            .iter()
            .any(|c| matches!(c.strategy, RowStrategy::Registers { .. })));
    }
}
