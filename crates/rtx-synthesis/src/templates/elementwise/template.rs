//! The fused elementwise kernel: one graph, one kernel, every input read once per element and
//! every output written once.
//!
//! Structure of the generated kernel:
//! - `rtx_eval(x0.., y0..)`: the graph for one element, f32 in and out.
//! - `rtx_tile<V>(c0, cend, ..)`: each thread takes `UNROLL` chunks of `V` elements
//!   (`c0 + threadIdx.x + u * THREADS`), issues all of their loads first, then evaluates and
//!   stores. Row vectors are loaded `V` at a time at the element's column, column vectors once
//!   per chunk at its row (a chunk never straddles rows on the vector path).
//! - The kernel tests pointer alignment (and `cols % VEC == 0` when row/column vectors are
//!   read) at run time: if all hold it runs `rtx_tile<VEC>` over the `n / VEC` full chunks and
//!   block 0 finishes the `n % VEC` tail with `rtx_tile<1>`; otherwise every element goes
//!   through `rtx_tile<1>` in a grid-stride loop (correct for any grid).

use super::config::{ElementwiseConfig, GridMode};
use super::device::{uses_approx_sfu, vector_alignment, write_math_prelude, write_memory_prelude};
use super::expr::{Broadcast, Node, UnaryOp, ValueRef};
use super::problem::ElementwiseProblem;
use crate::profiler::hwdb::reference_sm_count;
use crate::templates::codegen::CudaWriter;
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::{Arch, DType};

/// The elementwise template (stateless).
#[derive(Debug, Clone, Copy, Default)]
pub struct ElementwiseTemplate;

/// Registers per thread ptxas needs beyond the cached values (indices, pointers, temporaries).
const REGISTER_OVERHEAD: u32 = 32;

/// Largest `gridDim.x` of a launch (2^31 - 1).
pub const MAX_GRID_X: u64 = i32::MAX as u64;

/// The SM count grid-stride grid sizes are seeded from: the architecture's reference card in the
/// hardware database ([`reference_sm_count`]), else 80 (a mid-size card) for one with none.
fn typical_sm_count(arch: Arch) -> u32 {
    reference_sm_count(arch).unwrap_or(80)
}

fn storage(d: DType) -> &'static str {
    d.cuda_type()
}

fn value_name(r: ValueRef) -> String {
    match r {
        ValueRef::Input(k) => format!("x{k}"),
        ValueRef::Node(k) => format!("v{k}"),
    }
}

fn unary_fn(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "rtx_neg",
        UnaryOp::Abs => "rtx_abs",
        UnaryOp::Exp => "rtx_exp",
        UnaryOp::Log => "rtx_log",
        UnaryOp::Sqrt => "rtx_sqrt",
        UnaryOp::Rsqrt => "rtx_rsqrt",
        UnaryOp::Tanh => "rtx_tanh",
        UnaryOp::Sigmoid => "rtx_sigmoid",
        UnaryOp::GeluErf => "rtx_gelu_erf",
        UnaryOp::GeluTanh => "rtx_gelu_tanh",
        UnaryOp::Silu => "rtx_silu",
        UnaryOp::Relu => "rtx_relu",
        UnaryOp::Cast(DType::F16) => "rtx_cast_f16",
        UnaryOp::Cast(DType::Bf16) => "rtx_cast_bf16",
        UnaryOp::Cast(_) => "rtx_cast_f32",
    }
}

fn binary_fn(op: super::expr::BinaryOp) -> &'static str {
    use super::expr::BinaryOp::*;
    match op {
        Add => "rtx_add",
        Sub => "rtx_sub",
        Mul => "rtx_mul",
        Div => "rtx_div",
        Min => "rtx_min",
        Max => "rtx_max",
    }
}

impl ElementwiseTemplate {
    fn violation(
        &self,
        config: &ElementwiseConfig,
        reason: impl Into<String>,
    ) -> ConstraintViolation {
        ConstraintViolation {
            template: self.name().to_string(),
            config: format!("{config:?}"),
            reason: reason.into(),
        }
    }

    /// 32-bit registers each thread keeps live across a tile: every load of the tile is in
    /// flight at once in its storage form (a 16-byte access of 16-bit values is 4 registers, not
    /// 8: the widening to f32 happens at the use), plus the `vec` f32 results per output.
    /// Saturates at `u32::MAX` for configs far outside the space.
    pub fn live_floats(problem: &ElementwiseProblem, config: &ElementwiseConfig) -> u32 {
        let vec = config.vec as u64;
        let vec_words: u64 = problem
            .graph
            .inputs
            .iter()
            .filter(|i| matches!(i.broadcast, Broadcast::Full | Broadcast::Row))
            .map(|i| (vec * i.dtype.size_bytes() as u64).div_ceil(4))
            .sum();
        let col_inputs = problem
            .graph
            .inputs
            .iter()
            .filter(|i| i.broadcast == Broadcast::Col)
            .count() as u64;
        let live = (config.unroll as u64)
            .saturating_mul(vec_words + col_inputs)
            .saturating_add(vec * problem.graph.outputs.len() as u64);
        live.min(u32::MAX as u64) as u32
    }

    /// Estimated registers per thread (live floats plus overhead, rounded up to 8; saturating).
    pub fn estimated_registers(problem: &ElementwiseProblem, config: &ElementwiseConfig) -> u32 {
        let regs =
            (Self::live_floats(problem, config) as u64 + REGISTER_OVERHEAD as u64).div_ceil(8) * 8;
        regs.min(u32::MAX as u64) as u32
    }

    /// Blocks a [`GridMode::OneShot`] launch needs: one per tile of `threads * unroll` chunks
    /// of `vec` elements (at least 1).
    pub fn one_shot_blocks(problem: &ElementwiseProblem, config: &ElementwiseConfig) -> u64 {
        let chunks = problem.elems().div_ceil(config.vec.max(1) as u64);
        chunks.div_ceil(config.tile_chunks().max(1)).max(1)
    }

    /// The shape-dependent part of the config check: a [`GridMode::OneShot`] config needs one
    /// block per tile, and its vector path does not loop, so a grid beyond [`MAX_GRID_X`] would
    /// leave tiles unwritten. Launches run it for their run-time shape.
    pub fn check_grid(
        &self,
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
    ) -> Result<(), ConstraintViolation> {
        if config.grid == GridMode::OneShot {
            let blocks = Self::one_shot_blocks(problem, config);
            if blocks > MAX_GRID_X {
                return Err(self.violation(
                    config,
                    format!(
                        "one-shot grid of {blocks} blocks for {} x {} exceeds the gridDim.x limit {MAX_GRID_X} (use a grid-stride config)",
                        problem.rows, problem.cols
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The `minBlocksPerSM` of `__launch_bounds__` (see [`super::device::min_blocks_per_sm`]).
    pub fn min_blocks_per_sm(
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
        arch: Arch,
    ) -> u32 {
        super::device::min_blocks_per_sm(
            config.threads,
            Self::estimated_registers(problem, config),
            arch,
        )
    }

    /// The kernel's entry-point name for this problem and config.
    pub fn entry_name(problem: &ElementwiseProblem, config: &ElementwiseConfig) -> String {
        let grid = match config.grid {
            GridMode::OneShot => "os".to_string(),
            GridMode::Stride { blocks } => format!("gs{blocks}"),
        };
        format!(
            "rtx_ew_{}_v{}_t{}_u{}_{}{}",
            problem.graph.fingerprint(),
            config.vec,
            config.threads,
            config.unroll,
            grid,
            if problem.needs_64bit_index() {
                "_i64"
            } else {
                ""
            }
        )
    }

    fn write_eval(w: &mut CudaWriter, problem: &ElementwiseProblem) {
        let g = &problem.graph;
        let mut params: Vec<String> = (0..g.inputs.len())
            .map(|i| format!("const float x{i}"))
            .collect();
        params.extend((0..g.outputs.len()).map(|o| format!("float& y{o}")));
        w.open(format!(
            "__device__ __forceinline__ void rtx_eval({})",
            params.join(", ")
        ));
        for (i, node) in g.nodes.iter().enumerate() {
            let rhs = match *node {
                Node::Const { bits, dtype } => {
                    let v = super::expr::const_value(bits, dtype);
                    format!(
                        "__uint_as_float(0x{:08x}u) /* {v:e} ({dtype}) */",
                        v.to_bits()
                    )
                }
                Node::Unary { op, arg } => format!("{}({})", unary_fn(op), value_name(arg)),
                Node::Binary { op, lhs, rhs } => {
                    format!(
                        "{}({}, {})",
                        binary_fn(op),
                        value_name(lhs),
                        value_name(rhs)
                    )
                }
            };
            w.line(format!("const float v{i} = {rhs};"));
        }
        for (o, out) in g.outputs.iter().enumerate() {
            w.line(format!("y{o} = {};", value_name(out.value)));
        }
        w.close("");
    }

    fn write_tile(w: &mut CudaWriter, problem: &ElementwiseProblem) {
        let g = &problem.graph;
        let has_rc = g.has_row_or_col_inputs();
        let mut params = vec![
            "const rtx_idx c0".to_string(),
            "const rtx_idx cend".to_string(),
            "const rtx_idx cols".to_string(),
        ];
        for (i, inp) in g.inputs.iter().enumerate() {
            params.push(match inp.broadcast {
                Broadcast::Scalar => format!("const float s{i}"),
                _ => format!("const {}* __restrict__ in{i}", storage(inp.dtype)),
            });
        }
        for (o, out) in g.outputs.iter().enumerate() {
            params.push(format!("{}* __restrict__ out{o}", storage(out.dtype)));
        }
        w.line("template <int V>");
        w.open(format!(
            "__device__ __forceinline__ void rtx_tile({})",
            params.join(", ")
        ));
        if !has_rc {
            w.line("(void)cols;");
        }
        for (i, inp) in g.inputs.iter().enumerate() {
            match inp.broadcast {
                Broadcast::Full | Broadcast::Row => w.line(format!("float a{i}[UNROLL][V];")),
                Broadcast::Col => w.line(format!("float a{i}[UNROLL];")),
                Broadcast::Scalar => w,
            };
        }
        w.comment("Issue every load of the tile before the first use.");
        w.line("#pragma unroll");
        w.open("for (int u = 0; u < UNROLL; ++u)");
        w.line("const rtx_idx c = c0 + (rtx_idx)threadIdx.x + (rtx_idx)(u * THREADS);");
        w.open("if (c < cend)");
        w.line("const rtx_idx e = c * (rtx_idx)V;");
        if has_rc {
            w.line("const rtx_idx row = e / cols;");
            w.line("const rtx_idx col = e - row * cols;");
            w.line("(void)row; (void)col;");
        }
        for (i, inp) in g.inputs.iter().enumerate() {
            let t = storage(inp.dtype);
            match inp.broadcast {
                Broadcast::Full => w.line(format!("rtx_ld<{t}, V>(in{i} + e, a{i}[u]);")),
                Broadcast::Row => w.line(format!("rtx_ld<{t}, V>(in{i} + col, a{i}[u]);")),
                Broadcast::Col => w.line(format!("a{i}[u] = rtx_ld1<{t}>(in{i} + row);")),
                Broadcast::Scalar => w,
            };
        }
        w.close("");
        w.close("");
        w.comment("Evaluate and store.");
        w.line("#pragma unroll");
        w.open("for (int u = 0; u < UNROLL; ++u)");
        w.line("const rtx_idx c = c0 + (rtx_idx)threadIdx.x + (rtx_idx)(u * THREADS);");
        w.open("if (c < cend)");
        w.line("const rtx_idx e = c * (rtx_idx)V;");
        for o in 0..g.outputs.len() {
            w.line(format!("float r{o}[V];"));
        }
        let mut args: Vec<String> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| match inp.broadcast {
                Broadcast::Full | Broadcast::Row => format!("a{i}[u][j]"),
                Broadcast::Col => format!("a{i}[u]"),
                Broadcast::Scalar => format!("s{i}"),
            })
            .collect();
        args.extend((0..g.outputs.len()).map(|o| format!("r{o}[j]")));
        w.line("#pragma unroll");
        w.line(format!(
            "for (int j = 0; j < V; ++j) rtx_eval({});",
            args.join(", ")
        ));
        for (o, out) in g.outputs.iter().enumerate() {
            w.line(format!(
                "rtx_st<{}, V>(out{o} + e, r{o});",
                storage(out.dtype)
            ));
        }
        w.close("");
        w.close("");
        w.close("");
    }

    fn write_kernel(
        w: &mut CudaWriter,
        entry: &str,
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
    ) {
        let g = &problem.graph;
        let mut params: Vec<String> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| format!("const {}* __restrict__ in{i}", storage(inp.dtype)))
            .collect();
        params.extend(
            g.outputs
                .iter()
                .enumerate()
                .map(|(o, out)| format!("{}* __restrict__ out{o}", storage(out.dtype))),
        );
        params.push("const unsigned rows".into());
        params.push("const unsigned cols".into());
        let mut call: Vec<String> = g
            .inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| {
                if inp.broadcast == Broadcast::Scalar {
                    format!("s{i}")
                } else {
                    format!("in{i}")
                }
            })
            .collect();
        call.extend((0..g.outputs.len()).map(|o| format!("out{o}")));
        let call = call.join(", ");
        w.open(format!(
            "extern \"C\" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) {entry}({})",
            params.join(", ")
        ));
        w.line("const rtx_idx n = (rtx_idx)rows * (rtx_idx)cols;");
        for (i, inp) in g.inputs.iter().enumerate() {
            if inp.broadcast == Broadcast::Scalar {
                w.line(format!(
                    "const float s{i} = rtx_ld1<{}>(in{i});",
                    storage(inp.dtype)
                ));
            }
        }
        if config.vec > 1 {
            let mut conds: Vec<String> = Vec::new();
            for (i, inp) in g.inputs.iter().enumerate() {
                if matches!(inp.broadcast, Broadcast::Full | Broadcast::Row) {
                    conds.push(format!(
                        "rtx_aligned<{}>(in{i})",
                        vector_alignment(inp.dtype, config.vec)
                    ));
                }
            }
            for (o, out) in g.outputs.iter().enumerate() {
                conds.push(format!(
                    "rtx_aligned<{}>(out{o})",
                    vector_alignment(out.dtype, config.vec)
                ));
            }
            if g.has_row_or_col_inputs() {
                conds.push("(cols % (unsigned)VEC) == 0u".into());
            }
            w.comment("Vector path only when every vector-accessed pointer is aligned (a launch-time property).");
            w.line(format!("const bool vec_ok = {};", conds.join(" && ")));
            w.open("if (vec_ok)");
            w.line("const rtx_idx nv = n / (rtx_idx)VEC;");
            match config.grid {
                GridMode::OneShot => {
                    w.line("const rtx_idx c0 = (rtx_idx)blockIdx.x * TILE;");
                    w.line(format!(
                        "if (c0 < nv) rtx_tile<VEC>(c0, nv, (rtx_idx)cols, {call});"
                    ));
                }
                GridMode::Stride { .. } => {
                    w.line(format!(
                        "for (rtx_idx c0 = (rtx_idx)blockIdx.x * TILE; c0 < nv; c0 += (rtx_idx)gridDim.x * TILE) rtx_tile<VEC>(c0, nv, (rtx_idx)cols, {call});"
                    ));
                }
            }
            w.comment("Scalar tail: the last n % VEC elements.");
            w.line(format!(
                "if (blockIdx.x == 0) rtx_tile<1>(nv * (rtx_idx)VEC, n, (rtx_idx)cols, {call});"
            ));
            w.line("return;");
            w.close("");
        }
        w.comment("Scalar path (misaligned pointers, or vec == 1): any grid covers the space.");
        w.line(format!(
            "for (rtx_idx c0 = (rtx_idx)blockIdx.x * TILE; c0 < n; c0 += (rtx_idx)gridDim.x * TILE) rtx_tile<1>(c0, n, (rtx_idx)cols, {call});"
        ));
        w.close("");
    }
}

impl Template for ElementwiseTemplate {
    type Problem = ElementwiseProblem;
    type Config = ElementwiseConfig;

    fn name(&self) -> &'static str {
        "elementwise"
    }

    fn version(&self) -> u32 {
        // 2: SFU tanh/exp for bf16-output graphs.
        // 3: register estimate counts 16-bit loads in storage form (higher MIN_BLOCKS).
        3
    }

    fn space(&self, _problem: &ElementwiseProblem, arch: Arch) -> Vec<ElementwiseConfig> {
        let sms = typical_sm_count(arch);
        let grids = [
            GridMode::OneShot,
            GridMode::Stride { blocks: sms * 2 },
            GridMode::Stride { blocks: sms * 4 },
            GridMode::Stride { blocks: sms * 8 },
        ];
        let mut v = Vec::new();
        for vec in [1, 2, 4, 8] {
            for threads in [128, 256, 512, 1024] {
                for unroll in [1, 2, 4, 8] {
                    for grid in grids {
                        v.push(ElementwiseConfig {
                            vec,
                            threads,
                            unroll,
                            grid,
                        });
                    }
                }
            }
        }
        v
    }

    fn check(
        &self,
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
        _arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        problem
            .validate()
            .map_err(|e| self.violation(config, e.to_string()))?;
        if ![1, 2, 4, 8].contains(&config.vec) {
            return Err(
                self.violation(config, format!("vec = {} must be 1, 2, 4 or 8", config.vec))
            );
        }
        let widest = problem.vector_tensor_sizes().into_iter().max().unwrap_or(1) as u32;
        if config.vec * widest > 32 {
            return Err(self.violation(
                config,
                format!(
                    "vec = {} x {widest}-byte elements exceeds two 16-byte accesses",
                    config.vec
                ),
            ));
        }
        if config.threads < 32 || config.threads > 1024 || !config.threads.is_multiple_of(32) {
            return Err(self.violation(
                config,
                format!(
                    "threads = {} must be a multiple of 32 in 32..=1024",
                    config.threads
                ),
            ));
        }
        if config.unroll == 0 || config.unroll > 8 {
            return Err(self.violation(
                config,
                format!("unroll = {} must be in 1..=8", config.unroll),
            ));
        }
        let budget = (65536 / config.threads)
            .min(255)
            .saturating_sub(REGISTER_OVERHEAD);
        let live = Self::live_floats(problem, config);
        if live > budget {
            return Err(self.violation(
                config,
                format!("{live} live floats per thread exceed the {budget}-register budget at {} threads", config.threads),
            ));
        }
        if let GridMode::Stride { blocks } = config.grid {
            if blocks == 0 || blocks as u64 * config.tile_chunks() > (1u64 << 30) {
                return Err(self.violation(
                    config,
                    format!("grid-stride blocks = {blocks} must be in 1..=2^30 / tile"),
                ));
            }
        }
        self.check_grid(problem, config)
    }

    /// Widest vector and two 16-byte chunks per stream in flight, 256 threads, one-shot (a
    /// grid-stride grid of 4 blocks per SM when the one-shot grid would exceed `gridDim.x`).
    fn default_config(&self, problem: &ElementwiseProblem, arch: Arch) -> ElementwiseConfig {
        let sizes = problem.vector_tensor_sizes();
        let narrow = sizes.iter().copied().min().unwrap_or(4).max(1) as u32;
        let wide = sizes.iter().copied().max().unwrap_or(4).max(1) as u32;
        let mut vec = (16 / narrow).min(32 / wide).clamp(1, 8);
        // Two 16-byte chunks per stream in flight per thread (one for 32-byte chunks).
        let mut unroll = (32 / (vec * narrow)).clamp(1, 8);
        let make = |vec: u32, unroll: u32| {
            let one_shot = ElementwiseConfig {
                vec,
                threads: 256,
                unroll,
                grid: GridMode::OneShot,
            };
            if Self::one_shot_blocks(problem, &one_shot) <= MAX_GRID_X {
                one_shot
            } else {
                ElementwiseConfig {
                    grid: GridMode::Stride {
                        blocks: typical_sm_count(arch) * 4,
                    },
                    ..one_shot
                }
            }
        };
        let mut cfg = make(vec, unroll);
        while self.check(problem, &cfg, arch).is_err() && (cfg.unroll > 1 || cfg.vec > 1) {
            if unroll > 1 {
                unroll /= 2;
            } else {
                vec /= 2;
            }
            cfg = make(vec, unroll);
        }
        cfg
    }

    fn emit(
        &self,
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(problem, config, arch)?;
        let entry = Self::entry_name(problem, config);
        let mut w = CudaWriter::new();
        w.comment(format!(
            "rtx elementwise kernel: {} ops, {} inputs, {} outputs; config {config:?}",
            problem.graph.op_count(),
            problem.graph.inputs.len(),
            problem.graph.outputs.len()
        ));
        write_memory_prelude(&mut w);
        write_math_prelude(&mut w, uses_approx_sfu(&problem.graph));
        w.line("");
        w.constant("int", "THREADS", config.threads);
        w.constant(
            "int",
            "MIN_BLOCKS",
            Self::min_blocks_per_sm(problem, config, arch),
        );
        w.constant("int", "UNROLL", config.unroll);
        w.constant("int", "VEC", config.vec);
        w.line(format!(
            "typedef {} rtx_idx;",
            if problem.needs_64bit_index() {
                "unsigned long long"
            } else {
                "unsigned int"
            }
        ));
        w.constant("rtx_idx", "TILE", "(rtx_idx)THREADS * (rtx_idx)UNROLL");
        w.line("");
        Self::write_eval(&mut w, problem);
        w.line("");
        Self::write_tile(&mut w, problem);
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

    fn launch(&self, problem: &ElementwiseProblem, config: &ElementwiseConfig) -> LaunchDims {
        let tiles = Self::one_shot_blocks(problem, config);
        let blocks = match config.grid {
            GridMode::OneShot => tiles,
            GridMode::Stride { blocks } => tiles.min(blocks.max(1) as u64),
        };
        LaunchDims {
            grid: [blocks.min(MAX_GRID_X) as u32, 1, 1],
            block: [config.threads, 1, 1],
            dynamic_smem: 0,
        }
    }

    fn complexity(&self, config: &ElementwiseConfig) -> u64 {
        let grid = match config.grid {
            GridMode::OneShot => 0,
            GridMode::Stride { .. } => 1,
        };
        config.unroll as u64 + grid + (config.threads as u64 / 256)
    }
}

#[cfg(test)]
mod tests {
    use super::super::expr::{Broadcast, GraphBuilder};
    use super::*;
    use crate::templates::test_strategies::field;
    use proptest::prelude::*;

    fn bias_gelu(dtype: DType, rows: u32, cols: u32) -> ElementwiseProblem {
        let mut b = GraphBuilder::new();
        let x = b.input(dtype, Broadcast::Full);
        let bias = b.input(dtype, Broadcast::Row);
        let s = b.add(x, bias);
        let y = b.unary(UnaryOp::GeluTanh, s);
        b.output(y, dtype);
        ElementwiseProblem::new(b.build().unwrap(), rows, cols)
    }

    #[test]
    fn default_config_is_valid_and_vectorized() {
        let t = ElementwiseTemplate;
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            let p = bias_gelu(dtype, 1024, 4096);
            let c = t.default_config(&p, Arch::Sm90a);
            assert!(t.check(&p, &c, Arch::Sm90a).is_ok(), "{c:?}");
            assert_eq!(c.vec as usize * dtype.size_bytes(), 16, "{dtype}: {c:?}");
        }
    }

    #[test]
    fn check_rejects_bad_configs_with_reasons() {
        let t = ElementwiseTemplate;
        let p = bias_gelu(DType::F32, 8, 8);
        let ok = t.default_config(&p, Arch::Sm90a);
        for (bad, word) in [
            (ElementwiseConfig { vec: 3, ..ok }, "vec"),
            (ElementwiseConfig { vec: 16, ..ok }, "vec"),
            (ElementwiseConfig { threads: 100, ..ok }, "threads"),
            (ElementwiseConfig { unroll: 0, ..ok }, "unroll"),
            (
                ElementwiseConfig {
                    grid: GridMode::Stride { blocks: 0 },
                    ..ok
                },
                "blocks",
            ),
            (
                ElementwiseConfig {
                    threads: 1024,
                    unroll: 8,
                    vec: 8,
                    ..ok
                },
                "live floats",
            ),
        ] {
            let e = t.check(&p, &bad, Arch::Sm90a).unwrap_err();
            assert!(e.reason.contains(word), "{bad:?}: {e}");
        }
        let empty = ElementwiseProblem { rows: 0, ..p };
        assert!(t.check(&empty, &ok, Arch::Sm90a).is_err());
    }

    #[test]
    fn launch_covers_the_space() {
        let t = ElementwiseTemplate;
        let p = bias_gelu(DType::Bf16, 1000, 1001);
        for c in t.valid_space(&p, Arch::Sm90a) {
            let d = t.launch(&p, &c);
            let covered = d.grid[0] as u64 * c.tile_chunks() * c.vec as u64;
            match c.grid {
                GridMode::OneShot => assert!(covered >= p.elems(), "{c:?}"),
                GridMode::Stride { blocks } => assert!(d.grid[0] <= blocks),
            }
            assert_eq!(d.block, [c.threads, 1, 1]);
        }
    }

    #[test]
    fn emitted_source_has_the_entry_and_both_paths() {
        let t = ElementwiseTemplate;
        let p = bias_gelu(DType::Bf16, 64, 64);
        let c = t.default_config(&p, Arch::Sm90a);
        let s = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(s.code.contains(&format!(
            "void __launch_bounds__(THREADS, MIN_BLOCKS) {}(",
            s.entry
        )));
        assert!(s.code.contains("rtx_tile<VEC>(") && s.code.contains("rtx_tile<1>("));
        assert!(
            s.code.contains("rtx_aligned<16>(in0)") && s.code.contains("rtx_aligned<16>(out0)")
        );
        assert!(s.code.contains("rtx_gelu_tanh(v0)"));
        assert!(s.code.contains("typedef unsigned int rtx_idx;"));
        let big = bias_gelu(DType::Bf16, 1 << 16, 1 << 15);
        assert!(t
            .emit(&big, &c, Arch::Sm90a)
            .unwrap()
            .code
            .contains("typedef unsigned long long rtx_idx;"));
    }

    #[test]
    fn check_rejects_a_shape_whose_tensor_bytes_wrap() {
        // f16 (2^32 - 1) x (2^31 + 1): the output's ~2^64 bytes used to wrap to ~4 GiB.
        let t = ElementwiseTemplate;
        let p = bias_gelu(DType::F16, u32::MAX, (1 << 31) + 1);
        let c = t.default_config(&p, Arch::Sm90a);
        let e = t.check(&p, &c, Arch::Sm90a).unwrap_err();
        assert!(e.reason.contains("2^62 bytes"), "{e}");
    }

    #[test]
    fn one_shot_grid_beyond_grid_dim_x_is_rejected() {
        // 2^20 x 2^18 f32 elements in tiles of 32 threads x 2 elements: 2^32 one-shot blocks,
        // whose vector path (no loop) would skip every tile past gridDim.x = 2^31 - 1.
        let t = ElementwiseTemplate;
        let p = bias_gelu(DType::F32, 1 << 20, 1 << 18);
        let one_shot = ElementwiseConfig {
            vec: 2,
            threads: 32,
            unroll: 1,
            grid: GridMode::OneShot,
        };
        assert_eq!(ElementwiseTemplate::one_shot_blocks(&p, &one_shot), 1 << 32);
        let e = t.check(&p, &one_shot, Arch::Sm90a).unwrap_err();
        assert!(e.reason.contains("gridDim.x"), "{e}");
        let stride = ElementwiseConfig {
            grid: GridMode::Stride { blocks: 1024 },
            ..one_shot
        };
        assert!(t.check(&p, &stride, Arch::Sm90a).is_ok());
        // Just inside the limit: 2^31 - 1 tiles of 64 elements.
        let edge = bias_gelu(DType::F32, (1 << 31) - 1, 64);
        assert!(t.check(&edge, &one_shot, Arch::Sm90a).is_ok());
        assert_eq!(t.launch(&edge, &one_shot).grid[0], i32::MAX as u32);
        // The default config of a space that large is a grid-stride one, and valid.
        let huge = bias_gelu(DType::F32, 1 << 31, 1 << 28);
        let d = t.default_config(&huge, Arch::Sm90a);
        assert!(matches!(d.grid, GridMode::Stride { .. }), "{d:?}");
        t.check(&huge, &d, Arch::Sm90a).unwrap();
    }

    proptest! {
        /// Any shape and config fields: `check` answers without panicking, and an accepted one
        /// has byte sizes that fit and a launch grid that covers the space (one-shot) or stays
        /// within its block count (grid-stride).
        #[test]
        fn check_never_panics_and_accepted_launches_cover_the_space(
            rows in prop_oneof![any::<u32>(), 1u32..4096],
            cols in prop_oneof![any::<u32>(), 1u32..4096],
            vec in field(&[1, 2, 4, 8]),
            threads in field(&[32, 128, 256, 1024]),
            unroll in field(&[1, 2, 4, 8]),
            blocks in proptest::option::of(field(&[1, 264, 1056])),
            dtype in proptest::sample::select(vec![DType::F32, DType::F16, DType::Bf16]),
        ) {
            let t = ElementwiseTemplate;
            let p = bias_gelu(dtype, rows, cols);
            let grid = blocks.map_or(GridMode::OneShot, |blocks| GridMode::Stride { blocks });
            let c = ElementwiseConfig { vec, threads, unroll, grid };
            let _ = t.complexity(&c);
            let _ = t.launch(&p, &c);
            let _ = p.bytes_moved();
            if t.check(&p, &c, Arch::Sm90a).is_ok() {
                prop_assert!(p.output_bytes(0).is_ok() && p.input_bytes(0).is_ok());
                let d = t.launch(&p, &c);
                match c.grid {
                    GridMode::OneShot => prop_assert!(
                        d.grid[0] as u64 * c.tile_chunks() * c.vec as u64 >= p.elems()
                    ),
                    GridMode::Stride { blocks } => prop_assert!(d.grid[0] <= blocks),
                }
            }
        }
    }

    #[test]
    fn approximate_sfu_math_only_for_bf16_outputs() {
        let t = ElementwiseTemplate;
        for (d, approx) in [(DType::Bf16, 1), (DType::F16, 0), (DType::F32, 0)] {
            let p = bias_gelu(d, 64, 64);
            let c = t.default_config(&p, Arch::Sm90a);
            let s = t.emit(&p, &c, Arch::Sm90a).unwrap();
            assert!(
                s.code.contains(&format!("#define RTX_APPROX_SFU {approx}")),
                "{d:?} output should set RTX_APPROX_SFU {approx}"
            );
        }
    }
}
