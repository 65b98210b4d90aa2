//! [`MemoryGpuBackend`]: the tuner's [`TuneBackend`] for the memory-bound templates (fused
//! elementwise graphs, softmax / LayerNorm / RMSNorm rows) on a real GPU: a
//! [`super::GpuBackend`] like [`super::GemmGpuBackend`] (device source, lazy context, watchdog
//! waits, failure mapping), with [`MemoryState`] beside its context:
//!
//! - `compile`: emit, then [`crate::aot::KernelCache`] (`compile_many` compiles a batch's misses in parallel
//!   with `get_or_compile_many`); ptxas' report becomes the [`ResourceUsage`]. No GPU needed.
//! - `verify(config, seed)`: FRESH random inputs drawn from `seed` (uniform in `[-1, 1)`, rounded
//!   to each tensor's dtype), every output poisoned with `0xFF` bytes (NaN) before the run,
//!   launch on the backend's own stream, then the f64 reference of the template
//!   ([`MemoryOp::compare_outputs`]) on sampled points (elementwise: the four corners plus
//!   [`EW_SAMPLE_POINTS`] random ones per output, all of them for small spaces) or sampled rows
//!   (row ops: the first, the last and random rows up to [`ROW_SAMPLE_ROWS`]) with the template's
//!   tolerance. A NaN/Inf where the reference is finite, or a finite value where it is not,
//!   fails.
//! - `time(config, protocol)`: [`crate::tuner::run_protocol_batched`] over event-timed single launches; between samples
//!   (untimed) a `flush_bytes` scratch buffer is overwritten when `flush_l2` is set, and the
//!   inputs rotate over [`timing_sets`] copies (so a problem smaller than the L2 still reads
//!   DRAM: the copies together span at least [`ROTATE_BYTES`]).
//!
//! [`MemorySpace`] wraps a template with the bounded search space the tuner walks for it (a few
//! dozen configs: [`MemoryOp::tune_space`]); its name, version and code are the template's, so
//! its tuning-database entries serve the bare template.

use super::family::cap_evenly;
use super::gpu_backend::{
    compile_config, compile_configs, runtime_failure, time_protocol, GpuBackend, GpuContext,
};
use super::inputs::HostMatrix;
use crate::templates::elementwise::expr::{round_to, Node, UnaryOp};
use crate::templates::elementwise::reference::eval_point;
use crate::templates::elementwise::{
    enqueue_elementwise, DeviceSlice, DeviceSliceMut, ElementwiseConfig, ElementwiseProblem,
    ElementwiseTemplate, ExprGraph, GridMode, LaunchError,
};
use crate::templates::reduce::reference::{layernorm_row, rmsnorm_row, softmax_row};
use crate::templates::reduce::{
    enqueue_rows, RowBuffers, RowConfig, RowOp, RowProblem, RowReduceTemplate, RowStrategy,
};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::tuner::{
    CandidateError, CompileSink, MeasureProtocol, ResourceUsage, TimingStats, TuneBackend,
    TuneTask, VerifyReport,
};
use crate::{Arch, DType};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::{DeviceBuffer, Function, Stream};

/// Random points checked per elementwise output (plus the four corners).
pub const EW_SAMPLE_POINTS: usize = 4096;
/// Rows checked per row-op verification (every row when there are fewer).
pub const ROW_SAMPLE_ROWS: usize = 64;
/// The timing input sets of a small problem together span at least this many bytes (4x a
/// Hopper L2), so consecutive samples do not read the previous sample's data from L2.
pub const ROTATE_BYTES: u64 = 256 << 20;
/// Most timing input sets.
pub const MAX_TIMING_SETS: usize = 8;
/// Configs of a [`MemorySpace`] unless a limit is given.
pub const DEFAULT_SPACE_LIMIT: usize = 48;
/// Seed of the timing inputs (values do not matter for speed, but they are not all zero).
const TIMING_SEED: u64 = 0x6d65_6d5e;

/// Element type and count of one tensor of a memory-bound kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec {
    /// Storage dtype.
    pub dtype: DType,
    /// Elements.
    pub elems: u64,
}

impl TensorSpec {
    /// Bytes of the tensor.
    pub fn bytes(&self) -> u64 {
        self.elems * self.dtype.size_bytes() as u64
    }
}

/// What [`MemoryGpuBackend`] needs from a memory-bound template beyond [`Template`].
pub trait MemoryOp: Template + Clone + 'static {
    /// The tensors it reads (kernel order) and writes (kernel order).
    fn tensors(&self, problem: &Self::Problem) -> (Vec<TensorSpec>, Vec<TensorSpec>);

    /// Bytes one launch moves at least (every tensor once).
    fn bytes_moved(&self, problem: &Self::Problem) -> u64 {
        let (i, o) = self.tensors(problem);
        i.iter().chain(&o).map(TensorSpec::bytes).sum()
    }

    /// Launches `f` (compiled from `emit(problem, config)`) without synchronizing.
    fn enqueue(
        &self,
        f: &Function,
        problem: &Self::Problem,
        config: &Self::Config,
        stream: &Stream,
        inputs: &[DeviceBuffer],
        outputs: &mut [DeviceBuffer],
    ) -> Result<(), LaunchError>;

    /// Compares the downloaded `outputs` (read lazily: only sampled elements are widened) with the f64 reference of `inputs` on sampled points or
    /// rows chosen from `seed`; `rel_err` is the largest scaled error (infinite for a wrong
    /// NaN/Inf class), `bound` the template's tolerance.
    fn compare_outputs(
        &self,
        problem: &Self::Problem,
        inputs: &[HostMatrix],
        outputs: &[HostMatrix],
        seed: u64,
    ) -> VerifyReport;

    /// The bounded tuning space: a few dozen valid configs that cover the parameters that matter
    /// for bandwidth (access width, threads, loads in flight per thread, grid shape).
    fn tune_space(&self, problem: &Self::Problem, arch: Arch) -> Vec<Self::Config>;
}

/// Host values rounded to `dtype` in its device encoding (test and reference helper).
pub fn host_from_f64(dtype: DType, vals: &[f64]) -> HostMatrix {
    match dtype {
        DType::Bf16 => HostMatrix::Half {
            dtype,
            bits: vals
                .iter()
                .map(|v| half::bf16::from_f64(*v).to_bits())
                .collect(),
        },
        DType::F16 => HostMatrix::Half {
            dtype,
            bits: vals
                .iter()
                .map(|v| half::f16::from_f64(*v).to_bits())
                .collect(),
        },
        DType::F32 | DType::Tf32 => HostMatrix::Single(vals.iter().map(|v| *v as f32).collect()),
    }
}

/// Scaled error of one value: `|got - want| / max(|want|, floor)` with `want` rounded to
/// `dtype`; a non-finite reference must be matched exactly (NaN by NaN, +-inf by itself), else
/// the error is infinite.
pub fn scaled_error(got: f64, want: f64, dtype: DType, floor: f64) -> f64 {
    let w = round_to(dtype, want);
    if !w.is_finite() || !got.is_finite() {
        let same = (w.is_nan() && got.is_nan()) || w == got;
        return if same { 0.0 } else { f64::INFINITY };
    }
    (got - w).abs() / w.abs().max(floor)
}

/// Tolerance of an elementwise graph: 2e-2 when any tensor, constant or cast is 16-bit, else
/// 1e-4 (transcendentals in f32), as the template's GPU tests use.
pub fn graph_tolerance(g: &ExprGraph) -> f64 {
    let mut narrow = g.inputs.iter().any(|i| i.dtype.size_bytes() == 2)
        || g.outputs.iter().any(|o| o.dtype.size_bytes() == 2);
    for n in &g.nodes {
        match *n {
            Node::Const { dtype, .. }
            | Node::Unary {
                op: UnaryOp::Cast(dtype),
                ..
            } => narrow |= dtype.size_bytes() == 2,
            _ => {}
        }
    }
    if narrow {
        2e-2
    } else {
        1e-4
    }
}

/// Sampled `(row, col)` points: every point of a small space, else the corners plus
/// [`EW_SAMPLE_POINTS`] random ones.
pub fn sample_points(rows: u32, cols: u32, seed: u64) -> Vec<(usize, usize)> {
    let (r, c) = (rows as usize, cols as usize);
    if r * c <= EW_SAMPLE_POINTS + 4 {
        return (0..r).flat_map(|i| (0..c).map(move |j| (i, j))).collect();
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x3c6e_f372_fe94_f82b);
    let mut v = vec![(0, 0), (0, c - 1), (r - 1, 0), (r - 1, c - 1)];
    while v.len() < EW_SAMPLE_POINTS + 4 {
        v.push((rng.random_range(0..r), rng.random_range(0..c)));
    }
    v
}

/// Sampled rows: all of them up to [`ROW_SAMPLE_ROWS`], else the first, the last and random ones.
pub fn sample_rows(rows: u32, seed: u64) -> Vec<usize> {
    if rows as usize <= ROW_SAMPLE_ROWS {
        return (0..rows as usize).collect();
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xa54f_f53a_5f1d_36f1);
    let mut v = vec![0, rows as usize - 1];
    while v.len() < ROW_SAMPLE_ROWS {
        v.push(rng.random_range(0..rows as usize));
    }
    v
}

/// Input sets the timing loop rotates over for a problem moving `bytes` per launch: enough to
/// span [`ROTATE_BYTES`] (at most [`MAX_TIMING_SETS`]), or `protocol.rotate_inputs` if more.
pub fn timing_sets(bytes: u64, protocol: &MeasureProtocol) -> usize {
    let auto = ROTATE_BYTES.div_ceil(bytes.max(1)) as usize;
    auto.max(protocol.rotate_inputs).clamp(1, MAX_TIMING_SETS)
}

impl MemoryOp for ElementwiseTemplate {
    fn tensors(&self, p: &ElementwiseProblem) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let ins = p
            .graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, s)| TensorSpec {
                dtype: s.dtype,
                elems: p.input_elems(i),
            })
            .collect();
        let outs = p
            .graph
            .outputs
            .iter()
            .map(|o| TensorSpec {
                dtype: o.dtype,
                elems: p.elems(),
            })
            .collect();
        (ins, outs)
    }

    fn bytes_moved(&self, p: &ElementwiseProblem) -> u64 {
        p.bytes_moved()
    }

    fn enqueue(
        &self,
        f: &Function,
        p: &ElementwiseProblem,
        c: &ElementwiseConfig,
        stream: &Stream,
        inputs: &[DeviceBuffer],
        outputs: &mut [DeviceBuffer],
    ) -> Result<(), LaunchError> {
        let ins: Vec<DeviceSlice<'_>> = inputs.iter().map(DeviceSlice::whole).collect();
        let mut outs: Vec<DeviceSliceMut<'_>> =
            outputs.iter_mut().map(DeviceSliceMut::whole).collect();
        enqueue_elementwise(f, p, c, stream, &ins, &mut outs)
    }

    fn compare_outputs(
        &self,
        p: &ElementwiseProblem,
        inputs: &[HostMatrix],
        outputs: &[HostMatrix],
        seed: u64,
    ) -> VerifyReport {
        let g = &p.graph;
        let bound = graph_tolerance(g);
        let cols = p.cols as usize;
        let points = sample_points(p.rows, p.cols, seed);
        let wants: Vec<Vec<f64>> = points
            .iter()
            .map(|&(r, c)| {
                let x: Vec<f64> = g
                    .inputs
                    .iter()
                    .zip(inputs)
                    .map(|(s, h)| h.at(s.broadcast.index(cols, r, c)))
                    .collect();
                eval_point(g, &x)
            })
            .collect();
        let mut worst = 0.0f64;
        for (o, spec) in g.outputs.iter().enumerate() {
            let Some(out) = outputs.get(o) else {
                return VerifyReport {
                    rel_err: f64::INFINITY,
                    bound,
                };
            };
            let finite: Vec<f64> = wants
                .iter()
                .map(|w| w[o])
                .filter(|v| v.is_finite())
                .collect();
            let rms =
                (finite.iter().map(|v| v * v).sum::<f64>() / finite.len().max(1) as f64).sqrt();
            let floor = 1e-2 * rms.max(1e-3);
            for (&(r, c), w) in points.iter().zip(&wants) {
                let i = r * cols + c;
                let got = if i < out.len() { out.at(i) } else { f64::NAN };
                worst = worst.max(scaled_error(got, w[o], spec.dtype, floor));
            }
        }
        VerifyReport {
            rel_err: worst,
            bound,
        }
    }

    fn tune_space(&self, p: &ElementwiseProblem, arch: Arch) -> Vec<ElementwiseConfig> {
        let narrow = p
            .vector_tensor_sizes()
            .into_iter()
            .min()
            .unwrap_or(4)
            .max(1) as u32;
        let all = self.valid_space(p, arch);
        let mut strides: Vec<u32> = all
            .iter()
            .filter_map(|c| match c.grid {
                GridMode::Stride { blocks } => Some(blocks),
                GridMode::OneShot => None,
            })
            .collect();
        strides.sort_unstable();
        strides.dedup();
        // The middle grid-stride size (4 blocks per SM in the template's space).
        let stride = strides.get(strides.len() / 2).copied();
        all.into_iter()
            .filter(|c| c.vec * narrow >= 8 && c.unroll <= 4)
            .filter(|c| match c.grid {
                GridMode::OneShot => true,
                GridMode::Stride { blocks } => Some(blocks) == stride,
            })
            .collect()
    }
}

/// The error floor of a row op: softmax outputs are probabilities (relative down to f16's
/// smallest normal), norm outputs are O(1); LayerNorm's floor grows with `max|x| * rstd * max|w|`
/// of the row (its `x - mean` cancels), as in the template's GPU tests.
fn row_floor(p: &RowProblem, row: &[f64], wmax: f64) -> f64 {
    match (p.op, p.dtype) {
        (RowOp::Softmax, DType::F16) => 6.1e-5,
        (RowOp::Softmax, _) => 1e-30,
        (RowOp::LayerNorm { .. }, _) => {
            let n = row.len().max(1) as f64;
            let mean = row.iter().sum::<f64>() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let amax = row.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            (amax / (var + p.eps as f64).sqrt() * wmax).max(1.0)
        }
        (RowOp::RmsNorm { .. }, _) => 1.0,
    }
}

impl MemoryOp for RowReduceTemplate {
    fn tensors(&self, p: &RowProblem) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let spec = |elems| TensorSpec {
            dtype: p.dtype,
            elems,
        };
        let t = p.tensors();
        let ins = t.iter().filter(|t| !t.2).map(|t| spec(t.1)).collect();
        let outs = t.iter().filter(|t| t.2).map(|t| spec(t.1)).collect();
        (ins, outs)
    }

    fn bytes_moved(&self, p: &RowProblem) -> u64 {
        p.bytes_moved()
    }

    fn enqueue(
        &self,
        f: &Function,
        p: &RowProblem,
        c: &RowConfig,
        stream: &Stream,
        inputs: &[DeviceBuffer],
        outputs: &mut [DeviceBuffer],
    ) -> Result<(), LaunchError> {
        let arity = |what, expected, got| LaunchError::Arity {
            what,
            expected,
            got,
        };
        let (ni, no) = {
            let (i, o) = self.tensors(p);
            (i.len(), o.len())
        };
        if inputs.len() != ni {
            return Err(arity("inputs", ni, inputs.len()));
        }
        if outputs.len() != no {
            return Err(arity("outputs", no, outputs.len()));
        }
        let mut ins = inputs.iter();
        let x = DeviceSlice::whole(ins.next().ok_or(arity("inputs", ni, 0))?);
        let residual = if p.residual {
            ins.next().map(DeviceSlice::whole)
        } else {
            None
        };
        let weight = if p.op.has_weight() {
            ins.next().map(DeviceSlice::whole)
        } else {
            None
        };
        let bias = if p.op.has_bias() {
            ins.next().map(DeviceSlice::whole)
        } else {
            None
        };
        let (y, rest) = outputs.split_first_mut().ok_or(arity("outputs", no, 0))?;
        let residual_out = rest.first_mut().map(DeviceSliceMut::whole);
        let bufs = RowBuffers {
            x,
            residual,
            weight,
            bias,
            y: DeviceSliceMut::whole(y),
            residual_out,
        };
        enqueue_rows(f, p, c, stream, bufs)
    }

    fn compare_outputs(
        &self,
        p: &RowProblem,
        inputs: &[HostMatrix],
        outputs: &[HostMatrix],
        seed: u64,
    ) -> VerifyReport {
        let bound = p.dtype.rel_tolerance();
        let fail = VerifyReport {
            rel_err: f64::INFINITY,
            bound,
        };
        let cols = p.cols as usize;
        let mut ins = inputs.iter();
        let Some(x) = ins.next() else { return fail };
        let residual = if p.residual { ins.next() } else { None };
        let weight: Option<Vec<f64>> = if p.op.has_weight() {
            ins.next().map(HostMatrix::to_f64)
        } else {
            None
        };
        let bias: Option<Vec<f64>> = if p.op.has_bias() {
            ins.next().map(HostMatrix::to_f64)
        } else {
            None
        };
        let Some(y) = outputs.first() else {
            return fail;
        };
        let h_out = outputs.get(1);
        let wmax = weight
            .as_ref()
            .map_or(1.0, |w| w.iter().fold(0.0f64, |a, v| a.max(v.abs())));
        let mut worst = 0.0f64;
        for r in sample_rows(p.rows, seed) {
            let base = r * cols;
            let src: Vec<f64> = (0..cols)
                .map(|c| match residual {
                    Some(res) => round_to(p.dtype, x.at(base + c) + res.at(base + c)),
                    None => x.at(base + c),
                })
                .collect();
            if p.residual {
                let Some(h) = h_out else { return fail };
                for (c, want) in src.iter().enumerate() {
                    let got = if base + c < h.len() {
                        h.at(base + c)
                    } else {
                        f64::NAN
                    };
                    worst = worst.max(scaled_error(got, *want, p.dtype, 1e-3));
                }
            }
            let want = match p.op {
                RowOp::Softmax => softmax_row(&src),
                RowOp::LayerNorm { .. } => {
                    layernorm_row(&src, weight.as_deref(), bias.as_deref(), p.eps as f64)
                }
                RowOp::RmsNorm { .. } => rmsnorm_row(&src, weight.as_deref(), p.eps as f64),
            };
            let floor = row_floor(p, &src, wmax);
            for (c, w) in want.iter().enumerate() {
                let got = if base + c < y.len() {
                    y.at(base + c)
                } else {
                    f64::NAN
                };
                worst = worst.max(scaled_error(got, *w, p.dtype, floor));
            }
        }
        VerifyReport {
            rel_err: worst,
            bound,
        }
    }

    fn tune_space(&self, p: &RowProblem, arch: Arch) -> Vec<RowConfig> {
        let widest = self
            .valid_space(p, arch)
            .iter()
            .map(|c| c.vec)
            .max()
            .unwrap_or(1);
        self.valid_space(p, arch)
            .into_iter()
            .filter(|c| c.vec == widest && c.block_threads() >= 64)
            .filter(|c| match c.strategy {
                RowStrategy::Registers { .. } => true,
                RowStrategy::Looped { unroll } => {
                    (2..=4).contains(&unroll) && c.threads_per_row >= 32
                }
            })
            .collect()
    }
}

/// A memory-bound template with its bounded tuning space ([`MemoryOp::tune_space`], spread
/// evenly down to `limit` configs); everything else is the inner template's, so database
/// entries tuned through it serve the bare template.
#[derive(Debug, Clone)]
pub struct MemorySpace<T> {
    /// The wrapped template.
    pub inner: T,
    /// Most configs the space holds.
    pub limit: usize,
}

impl<T: MemoryOp> MemorySpace<T> {
    /// Wraps `inner` with at most `limit` configs (`None`: [`DEFAULT_SPACE_LIMIT`]).
    pub fn new(inner: T, limit: Option<usize>) -> Self {
        MemorySpace {
            inner,
            limit: limit.unwrap_or(DEFAULT_SPACE_LIMIT).max(1),
        }
    }
}

impl<T: MemoryOp> Template for MemorySpace<T> {
    type Problem = T::Problem;
    type Config = T::Config;

    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn version(&self) -> u32 {
        self.inner.version()
    }
    fn space(&self, problem: &T::Problem, arch: Arch) -> Vec<T::Config> {
        cap_evenly(&self.inner.tune_space(problem, arch), self.limit)
    }
    fn check(
        &self,
        problem: &T::Problem,
        config: &T::Config,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        self.inner.check(problem, config, arch)
    }
    fn default_config(&self, problem: &T::Problem, arch: Arch) -> T::Config {
        self.inner.default_config(problem, arch)
    }
    fn emit(
        &self,
        problem: &T::Problem,
        config: &T::Config,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.inner.emit(problem, config, arch)
    }
    fn launch(&self, problem: &T::Problem, config: &T::Config) -> LaunchDims {
        self.inner.launch(problem, config)
    }
    fn complexity(&self, config: &T::Config) -> u64 {
        self.inner.complexity(config)
    }
}

impl<T: MemoryOp> MemoryOp for MemorySpace<T> {
    fn tensors(&self, p: &T::Problem) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        self.inner.tensors(p)
    }
    fn bytes_moved(&self, p: &T::Problem) -> u64 {
        self.inner.bytes_moved(p)
    }
    fn enqueue(
        &self,
        f: &Function,
        p: &T::Problem,
        c: &T::Config,
        stream: &Stream,
        inputs: &[DeviceBuffer],
        outputs: &mut [DeviceBuffer],
    ) -> Result<(), LaunchError> {
        self.inner.enqueue(f, p, c, stream, inputs, outputs)
    }
    fn compare_outputs(
        &self,
        p: &T::Problem,
        inputs: &[HostMatrix],
        outputs: &[HostMatrix],
        seed: u64,
    ) -> VerifyReport {
        self.inner.compare_outputs(p, inputs, outputs, seed)
    }
    fn tune_space(&self, p: &T::Problem, arch: Arch) -> Vec<T::Config> {
        self.space(p, arch)
    }
}

/// A launch error as a candidate failure.
fn launch_failure(e: LaunchError) -> CandidateError {
    match e {
        LaunchError::Constraint(v) => CandidateError::Rejected(v.reason),
        LaunchError::Runtime(r) => runtime_failure("launch", r),
        other => CandidateError::Unmeasurable(format!("launch refused: {other}")),
    }
}

/// Fresh host inputs of one verification (or timing set), drawn from `seed`.
fn draw_inputs(specs: &[TensorSpec], seed: u64) -> Vec<HostMatrix> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            HostMatrix::seeded(
                super::inputs::mix64(seed.wrapping_mul(8).wrapping_add(i as u64)),
                s.elems as usize,
                s.dtype,
                1.0,
            )
        })
        .collect()
}

/// Buffers of one timing input set.
struct TimingSet {
    inputs: Vec<DeviceBuffer>,
    outputs: Vec<DeviceBuffer>,
}

/// What a memory-op backend keeps in its CUDA context beside the shared state: the timing input
/// sets and (the debug form of) the problem they were made for.
#[derive(Default)]
pub struct MemoryState {
    timing_problem: Option<String>,
    timing: Vec<TimingSet>,
}

impl GpuContext<MemoryState> {
    /// Output buffers, poisoned with `0xFF` bytes (NaN in every float format).
    fn poisoned_outputs(&self, specs: &[TensorSpec]) -> Result<Vec<DeviceBuffer>, CandidateError> {
        specs
            .iter()
            .map(|s| {
                let mut b = self.alloc(s.bytes() as usize)?;
                b.fill_u8(0xFF, &self.stream)
                    .map_err(|e| runtime_failure("poisoning an output", e))?;
                Ok(b)
            })
            .collect()
    }

    fn ensure_timing(
        &mut self,
        key: String,
        ins: &[TensorSpec],
        outs: &[TensorSpec],
        sets: usize,
    ) -> Result<(), CandidateError> {
        if self.op.timing_problem.as_ref() == Some(&key) && self.op.timing.len() == sets {
            return Ok(());
        }
        self.op.timing.clear();
        self.op.timing_problem = None;
        for s in 0..sets as u64 {
            let host = draw_inputs(ins, TIMING_SEED.wrapping_add(s * 0x1000));
            let inputs = host
                .iter()
                .map(|h| self.upload(h))
                .collect::<Result<Vec<_>, _>>()?;
            let outputs = self.poisoned_outputs(outs)?;
            self.op.timing.push(TimingSet { inputs, outputs });
        }
        self.stream
            .synchronize()
            .map_err(|e| runtime_failure("timing inputs", e))?;
        self.op.timing_problem = Some(key);
        Ok(())
    }
}

/// The GPU tuning backend for a memory-bound template `T` (see the module docs).
pub type MemoryGpuBackend<T> = GpuBackend<MemoryState, T>;

impl<T: MemoryOp> TuneBackend<T> for MemoryGpuBackend<T> {
    fn compile(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
    ) -> Result<ResourceUsage, CandidateError> {
        compile_config(self.cache(), task, config)
    }

    fn compile_many(&self, task: &TuneTask<'_, T>, configs: &[T::Config], sink: &CompileSink<'_>) {
        compile_configs(self.cache(), self.compile_jobs(), task, configs, sink)
    }

    fn compile_parallelism(&self) -> usize {
        self.compile_jobs()
    }

    fn verify(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        let t = task.template;
        let p = task.problem;
        let limit = self.watchdog();
        let (in_specs, out_specs) = t.tensors(p);
        let host = draw_inputs(&in_specs, seed);
        self.with_gpu(|g| {
            let f = self.function(g, task, config)?;
            let inputs = host
                .iter()
                .map(|h| g.upload(h))
                .collect::<Result<Vec<_>, _>>()?;
            let mut outputs = g.poisoned_outputs(&out_specs)?;
            t.enqueue(&f, p, config, &g.stream, &inputs, &mut outputs)
                .map_err(launch_failure)?;
            g.sync(limit, f.name())?;
            let mut decoded = Vec::with_capacity(outputs.len());
            for (b, s) in outputs.iter().zip(&out_specs) {
                let n = s.elems as usize;
                let fail = |e| runtime_failure("download", e);
                decoded.push(match s.dtype.size_bytes() {
                    2 => {
                        let mut bits: Vec<u16> = b.download(&g.stream).map_err(fail)?;
                        bits.truncate(n);
                        HostMatrix::Half {
                            dtype: s.dtype,
                            bits,
                        }
                    }
                    _ => {
                        let mut v: Vec<f32> = b.download(&g.stream).map_err(fail)?;
                        v.truncate(n);
                        HostMatrix::Single(v)
                    }
                });
            }
            let report = t.compare_outputs(p, &host, &decoded, seed);
            if !report.passed() {
                tracing::debug!(
                    kernel = f.name(),
                    rel_err = report.rel_err,
                    bound = report.bound,
                    "memory kernel failed verification"
                );
            }
            Ok(report)
        })
    }

    fn time(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let t = task.template;
        let p = task.problem;
        let limit = self.watchdog();
        let (in_specs, out_specs) = t.tensors(p);
        let sets = timing_sets(t.bytes_moved(p), protocol);
        self.with_gpu(|g| {
            let f = self.function(g, task, config)?;
            g.ensure_timing(format!("{}:{p:?}", t.name()), &in_specs, &out_specs, sets)?;
            let (target, op) = g.timing_target(protocol)?;
            let (stream, timing) = (target.stream, &mut op.timing);
            time_protocol(protocol, target, limit, f.name(), |rep| {
                let n = timing.len();
                let set = &mut timing[rep as usize % n];
                t.enqueue(&f, p, config, stream, &set.inputs, &mut set.outputs)
                    .map_err(launch_failure)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::elementwise::presets;
    use crate::templates::reduce::reference::{row_reduce_f64, RowInputs};

    fn chain8(rows: u32, cols: u32) -> ElementwiseProblem {
        ElementwiseProblem::new(presets::chain8(DType::Bf16).unwrap(), rows, cols)
    }

    #[test]
    fn tune_spaces_are_a_few_dozen_valid_configs() {
        let t = ElementwiseTemplate;
        let p = chain8(32768, 4096);
        let s = MemorySpace::new(t, None);
        let space = s.space(&p, Arch::Sm90a);
        assert!(
            (12..=DEFAULT_SPACE_LIMIT).contains(&space.len()),
            "{}",
            space.len()
        );
        assert!(space.iter().all(|c| t.check(&p, c, Arch::Sm90a).is_ok()));
        assert!(
            space.iter().any(|c| c.vec == 8 && c.unroll >= 2),
            "16-byte accesses, several in flight"
        );
        assert!(space
            .iter()
            .any(|c| matches!(c.grid, GridMode::Stride { .. })));
        for rp in [
            RowProblem::softmax(16384, 3072, DType::Bf16),
            RowProblem::layernorm(65536, 768, DType::Bf16, true, true, 1e-5),
            RowProblem::rmsnorm(4096, 16384, DType::F32, false, 1e-6).with_residual(),
        ] {
            let s = MemorySpace::new(RowReduceTemplate, None);
            let space = s.space(&rp, Arch::Sm90a);
            assert!(
                (4..=DEFAULT_SPACE_LIMIT).contains(&space.len()),
                "{rp:?}: {}",
                space.len()
            );
            assert!(space
                .iter()
                .all(|c| RowReduceTemplate.check(&rp, c, Arch::Sm90a).is_ok()));
            assert!(
                space
                    .iter()
                    .all(|c| c.vec * rp.dtype.size_bytes() as u32 == 16),
                "{rp:?}"
            );
        }
        assert_eq!(MemorySpace::new(t, Some(5)).space(&p, Arch::Sm90a).len(), 5);
    }

    #[test]
    fn rotation_spans_more_than_the_l2() {
        let proto = MeasureProtocol::default();
        assert_eq!(timing_sets(768 << 20, &proto), 1);
        assert_eq!(timing_sets(100 << 20, &proto), 3);
        assert_eq!(timing_sets(1 << 20, &proto), MAX_TIMING_SETS);
        let many = MeasureProtocol {
            rotate_inputs: 5,
            ..proto
        };
        assert_eq!(timing_sets(768 << 20, &many), 5);
    }

    #[test]
    fn elementwise_check_accepts_the_reference_and_rejects_an_error() {
        let t = ElementwiseTemplate;
        let p = chain8(16, 40);
        let (ins, outs) = t.tensors(&p);
        assert_eq!(ins.len(), 3);
        assert_eq!(ins[2].elems, 40, "the bias is a row vector");
        assert_eq!(outs[0].elems, 640);
        let host = draw_inputs(&ins, 7);
        let mut y = Vec::new();
        for r in 0..16 {
            for c in 0..40 {
                let x: Vec<f64> = p
                    .graph
                    .inputs
                    .iter()
                    .zip(&host)
                    .map(|(s, h)| h.at(s.broadcast.index(40, r, c)))
                    .collect();
                y.push(round_to(DType::Bf16, eval_point(&p.graph, &x)[0]));
            }
        }
        let ok = t.compare_outputs(&p, &host, &[host_from_f64(DType::Bf16, &y)], 1);
        assert!(ok.passed() && ok.rel_err == 0.0, "{ok:?}");
        y[3 * 40 + 2] += 1.0;
        assert!(!t
            .compare_outputs(&p, &host, &[host_from_f64(DType::Bf16, &y)], 1)
            .passed());
        y[3 * 40 + 2] = f64::NAN;
        assert_eq!(
            t.compare_outputs(&p, &host, &[host_from_f64(DType::Bf16, &y)], 1)
                .rel_err,
            f64::INFINITY
        );
        assert!(!t.compare_outputs(&p, &host, &[], 1).passed());
    }

    #[test]
    fn row_check_accepts_the_reference_and_rejects_an_error() {
        let t = RowReduceTemplate;
        for p in [
            RowProblem::softmax(100, 70, DType::F32),
            RowProblem::layernorm(100, 70, DType::Bf16, true, true, 1e-5).with_residual(),
            RowProblem::rmsnorm(5, 33, DType::F16, true, 1e-6),
        ] {
            let (ins, outs) = t.tensors(&p);
            let host = draw_inputs(&ins, 11);
            let f: Vec<Vec<f64>> = host.iter().map(HostMatrix::to_f64).collect();
            let mut k = f.iter();
            let x = k.next().unwrap();
            let residual = p.residual.then(|| k.next().unwrap().as_slice());
            let weight = p.op.has_weight().then(|| k.next().unwrap().as_slice());
            let bias = p.op.has_bias().then(|| k.next().unwrap().as_slice());
            let want = row_reduce_f64(
                &p,
                &RowInputs {
                    x,
                    residual,
                    weight,
                    bias,
                },
            )
            .unwrap();
            let mut y = want.y.clone();
            let enc = |y: &[f64]| {
                let mut v = vec![host_from_f64(p.dtype, y)];
                if let Some(h) = &want.residual_out {
                    v.push(host_from_f64(p.dtype, h));
                }
                v
            };
            assert_eq!(enc(&y).len(), outs.len());
            let ok = t.compare_outputs(&p, &host, &enc(&y), 3);
            assert!(ok.passed(), "{p:?}: {ok:?}");
            // Row 0 is always sampled.
            y[1] += 0.5;
            assert!(!t.compare_outputs(&p, &host, &enc(&y), 3).passed(), "{p:?}");
        }
    }

    #[test]
    fn sampled_rows_and_points_include_the_ends() {
        let r = sample_rows(10_000, 4);
        assert_eq!(r.len(), ROW_SAMPLE_ROWS);
        assert!(r.contains(&0) && r.contains(&9_999));
        assert_eq!(sample_rows(3, 4), vec![0, 1, 2]);
        let pts = sample_points(1000, 1000, 4);
        assert_eq!(pts.len(), EW_SAMPLE_POINTS + 4);
        assert!(pts.contains(&(999, 999)));
        assert_eq!(sample_points(3, 5, 4).len(), 15);
    }

    #[test]
    fn nonfinite_classes_must_match() {
        assert_eq!(scaled_error(f64::NAN, f64::NAN, DType::F32, 1.0), 0.0);
        assert_eq!(scaled_error(1.0, f64::NAN, DType::F32, 1.0), f64::INFINITY);
        assert_eq!(
            scaled_error(f64::INFINITY, f64::INFINITY, DType::F32, 1.0),
            0.0
        );
        assert_eq!(
            scaled_error(f64::NEG_INFINITY, f64::INFINITY, DType::F32, 1.0),
            f64::INFINITY
        );
        assert!(scaled_error(1.001, 1.0, DType::Bf16, 1e-3) < 2e-2);
    }
}
