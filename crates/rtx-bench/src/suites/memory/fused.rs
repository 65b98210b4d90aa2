//! Fused elementwise chains against our own unfused version of the same chain (one kernel per
//! op, every intermediate written to and read back from memory: how eager PyTorch runs it).
//!
//! Both are the elementwise template at its default config. The fused kernel is verified on
//! sampled points against the f64 reference of the graph; the unfused chain against the f64
//! reference with each intermediate rounded to its storage dtype. The fused row's `untuned`
//! baseline is the unfused chain (ratio = step-time reduction from fusing). Bytes are the
//! fused op's: every input read once and the output written once (the unfused row counts the
//! same logical bytes; its note gives the traffic it really moves).

use super::row_ops::{runtime, scaled_error};
use super::tuned::{describe, nothing_tuned, tuned_name, MemoryTuning};
use super::{with_bytes, CaseError};
use crate::gpu::Gpu;
use crate::graphs::{self, eval_unfused_point, StepOperand, UnfusedStep};
use crate::report::{Case, Clock, Verified};
use crate::suite_id::SuiteId;
use crate::suites::gemm::host_matrix::HostMatrix;
use crate::timing::{Timer, TimingConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::{DeviceBuffer, RuntimeError, Stream};
use rtx_synthesis::templates::elementwise::presets::{self, GeluForm};
use rtx_synthesis::templates::elementwise::reference::eval_point;
use rtx_synthesis::templates::elementwise::{
    DeviceSlice, DeviceSliceMut, ElementwiseKernel, ElementwiseProblem, ElementwiseTemplate,
    ExprGraph,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::DType;

/// Points checked per output (plus the four corners).
pub const SAMPLE_POINTS: usize = 4096;

/// Which chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    /// `gelu_erf(x * 1.5 + 0.5)` (the anchors' eager gelu row): 3 ops.
    GeluAffine,
    /// The 8-op chain (`mul, add, mul, add, tanh, sub, max, gelu_tanh`).
    Chain8,
    /// `gelu_tanh(x + bias)` (FFN bias + activation): 2 ops.
    BiasGelu,
    /// `x * silu(g)` (SwiGLU gate): 2 ops.
    SiluGate,
}

impl ChainKind {
    /// Name in case names.
    pub fn name(self) -> &'static str {
        match self {
            ChainKind::GeluAffine => "gelu(x*1.5+0.5)",
            ChainKind::Chain8 => "chain8",
            ChainKind::BiasGelu => "bias+gelu",
            ChainKind::SiluGate => "silu-gate",
        }
    }

    /// Name of the `rtx-tune` subcommand that tunes this chain.
    pub fn tune_name(self) -> &'static str {
        match self {
            ChainKind::GeluAffine => "gelu-affine",
            ChainKind::Chain8 => "chain8",
            ChainKind::BiasGelu => "bias-gelu",
            ChainKind::SiluGate => "silu-gate",
        }
    }

    /// The chain named by [`ChainKind::tune_name`].
    pub fn from_tune_name(s: &str) -> Option<ChainKind> {
        [
            ChainKind::GeluAffine,
            ChainKind::Chain8,
            ChainKind::BiasGelu,
            ChainKind::SiluGate,
        ]
        .into_iter()
        .find(|k| k.tune_name() == s)
    }

    /// The graph in `dtype`.
    pub fn graph(self, dtype: DType) -> Result<ExprGraph, CaseError> {
        match self {
            ChainKind::GeluAffine => {
                graphs::gelu_affine(dtype).map_err(|e| CaseError::msg(e.to_string()))
            }
            ChainKind::Chain8 => graphs::chain8(dtype).map_err(|e| CaseError::msg(e.to_string())),
            ChainKind::BiasGelu => {
                presets::bias_gelu(dtype, GeluForm::Tanh).map_err(|e| CaseError::msg(e.to_string()))
            }
            ChainKind::SiluGate => {
                presets::silu_gate(dtype).map_err(|e| CaseError::msg(e.to_string()))
            }
        }
    }
}

/// One fused-vs-unfused case (two rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FusedCase {
    /// The chain.
    pub graph: ChainKind,
    /// Storage dtype of every tensor.
    pub dtype: DType,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Suite the rows belong to.
    pub suite: SuiteId,
    /// PyTorch anchor key (eager PyTorch runs the unfused chain).
    pub anchor: Option<String>,
}

impl FusedCase {
    /// `rtx <chain> fused <dtype> <r>x<c>`.
    pub fn fused_name(&self) -> String {
        format!(
            "rtx {} fused {} {}x{}",
            self.graph.name(),
            self.dtype,
            self.rows,
            self.cols
        )
    }

    /// `rtx-unfused <chain> <dtype> <r>x<c>`.
    pub fn unfused_name(&self) -> String {
        format!(
            "rtx-unfused {} {} {}x{}",
            self.graph.name(),
            self.dtype,
            self.rows,
            self.cols
        )
    }

    fn shape(&self) -> String {
        format!("{}x{}", self.rows, self.cols)
    }

    /// `rtx-tune` command that tunes this chain.
    pub fn tune_command(&self) -> String {
        format!(
            "rtx-tune {} {}x{} --dtype {}",
            self.graph.tune_name(),
            self.rows,
            self.cols,
            self.dtype
        )
    }
}

/// Sampled `(row, col)` points: all when the space is small, else the corners plus random ones.
pub fn sample_points(rows: u32, cols: u32, rng: &mut SmallRng) -> Vec<(usize, usize)> {
    let (r, c) = (rows as usize, cols as usize);
    if r * c <= SAMPLE_POINTS {
        return (0..r).flat_map(|i| (0..c).map(move |j| (i, j))).collect();
    }
    let mut v = vec![(0, 0), (0, c - 1), (r - 1, 0), (r - 1, c - 1)];
    while v.len() < SAMPLE_POINTS + 4 {
        v.push((rng.random_range(0..r), rng.random_range(0..c)));
    }
    v
}

/// Graph tolerance: 2e-2 when any tensor is 16-bit, else 1e-4 (transcendentals in f32).
pub fn tolerance(g: &ExprGraph) -> f64 {
    let narrow = g.inputs.iter().any(|i| i.dtype.size_bytes() == 2)
        || g.outputs.iter().any(|o| o.dtype.size_bytes() == 2);
    if narrow {
        2e-2
    } else {
        1e-4
    }
}

/// Compares an output at sampled points with `want(point inputs)`.
pub fn verify_points(
    g: &ExprGraph,
    inputs: &[HostMatrix],
    out: &HostMatrix,
    cols: u32,
    points: &[(usize, usize)],
    tol: f64,
    want: &dyn Fn(&[f64]) -> f64,
) -> (Verified, Option<String>) {
    let cols = cols as usize;
    let dtype = g.outputs[0].dtype;
    let xs: Vec<Vec<f64>> = points
        .iter()
        .map(|&(r, c)| {
            g.inputs
                .iter()
                .zip(inputs)
                .map(|(s, h)| h.get(s.broadcast.index(cols, r, c)))
                .collect()
        })
        .collect();
    let wants: Vec<f64> = xs.iter().map(|x| want(x)).collect();
    let finite: Vec<f64> = wants.iter().copied().filter(|v| v.is_finite()).collect();
    let rms = (finite.iter().map(|v| v * v).sum::<f64>() / finite.len().max(1) as f64).sqrt();
    let floor = 1e-2 * rms.max(1e-3);
    let mut worst = 0.0f64;
    let mut bad = None;
    for (&(r, c), w) in points.iter().zip(&wants) {
        let got = out.get(r * cols + c);
        let e = scaled_error(got, *w, dtype, floor);
        if e > tol && bad.is_none() {
            bad = Some(format!(
                "({r}, {c}): got {got} want {w} (scaled error {e:.3e})"
            ));
        }
        worst = worst.max(e);
    }
    (Verified::new(worst, tol), bad)
}

/// A built unfused step.
struct Step {
    kernel: ElementwiseKernel,
    operands: Vec<StepOperand>,
}

/// Launches every step in order (step `j` writes `bufs[j]`).
fn launch_unfused(
    steps: &[Step],
    inputs: &[DeviceBuffer],
    bufs: &mut [DeviceBuffer],
    st: &Stream,
) -> Result<(), RuntimeError> {
    for (j, s) in steps.iter().enumerate() {
        let (before, rest) = bufs.split_at_mut(j);
        let ins: Vec<DeviceSlice<'_>> = s
            .operands
            .iter()
            .map(|o| match *o {
                StepOperand::Input(i) => DeviceSlice::whole(&inputs[i]),
                StepOperand::Step(k) => DeviceSlice::whole(&before[k]),
            })
            .collect();
        let mut outs = [DeviceSliceMut::whole(&mut rest[0])];
        s.kernel.launch(st, &ins, &mut outs).map_err(runtime)?;
    }
    Ok(())
}

fn failed_row(
    suite: SuiteId,
    name: String,
    shape: String,
    dtype: DType,
    v: Verified,
    bad: &str,
) -> Case {
    let mut c = Case::failed(
        suite,
        name,
        shape,
        Clock::Gpu,
        format!("wrong result at {bad}; bound {:.1e}", v.bound),
    )
    .with_dtype(dtype.name());
    c.verified = Some(v);
    c
}

/// Builds, verifies and times the fused kernel and the unfused chain (two rows: fused, unfused)
/// and, with a tuning database, the fused kernel at the config it serves (a third row,
/// `rtx-tuned ...`, whose untuned baseline is the fused default row).
pub fn run(
    gpu: &Gpu,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    fc: &FusedCase,
    copy_gbps: Option<f64>,
    tuning: Option<&MemoryTuning>,
) -> Result<Vec<Case>, CaseError> {
    let g = fc.graph.graph(fc.dtype)?;
    let t = ElementwiseTemplate;
    let problem = ElementwiseProblem::new(g.clone(), fc.rows, fc.cols);
    problem
        .validate()
        .map_err(|e| CaseError::msg(e.to_string()))?;
    let config = t.default_config(&problem, gpu.arch);
    let fused = ElementwiseKernel::build(&gpu.device, &problem, &config)?;
    let unfused = graphs::unfuse(&g).map_err(|e| CaseError::msg(format!("unfuse: {e}")))?;
    let mut steps = Vec::with_capacity(unfused.len());
    let mut unfused_bytes = 0u64;
    for UnfusedStep { graph, operands } in &unfused {
        let sp = ElementwiseProblem::new(graph.clone(), fc.rows, fc.cols);
        let sc = t.default_config(&sp, gpu.arch);
        unfused_bytes += sp.bytes_moved();
        steps.push(Step {
            kernel: ElementwiseKernel::build(&gpu.device, &sp, &sc)?,
            operands: operands.clone(),
        });
    }

    let n = fc.rows as usize * fc.cols as usize;
    let mut rng = SmallRng::seed_from_u64(crate::env_info::now_unix() ^ (n as u64).rotate_left(7));
    let mut host_in = Vec::new();
    let mut dev_in = Vec::new();
    for (i, spec) in g.inputs.iter().enumerate() {
        let h = HostMatrix::random(spec.dtype, problem.input_elems(i) as usize, &mut rng);
        let mut b = gpu.device.alloc(h.bytes(), &gpu.stream)?;
        h.upload(&mut b, &gpu.stream)?;
        host_in.push(h);
        dev_in.push(b);
    }
    let out_dtype = g.outputs[0].dtype;
    let out_bytes = n * out_dtype.size_bytes();
    let mut out = gpu.device.alloc(out_bytes, &gpu.stream)?;
    let mut step_bufs = Vec::with_capacity(unfused.len());
    for s in &unfused {
        step_bufs.push(
            gpu.device
                .alloc(n * s.graph.outputs[0].dtype.size_bytes(), &gpu.stream)?,
        );
    }
    let points = sample_points(fc.rows, fc.cols, &mut rng);
    let tol = tolerance(&g);
    let mut rows = Vec::new();

    // Fused: poison, run once, check, time.
    out.fill_u8(0xFF, &gpu.stream)?;
    let launch_fused = |st: &Stream, out: &mut DeviceBuffer| -> Result<(), RuntimeError> {
        let ins: Vec<DeviceSlice<'_>> = dev_in.iter().map(DeviceSlice::whole).collect();
        fused
            .launch(st, &ins, &mut [DeviceSliceMut::whole(out)])
            .map_err(runtime)
    };
    launch_fused(&gpu.stream, &mut out)?;
    gpu.stream.synchronize()?;
    let got = HostMatrix::download(out_dtype, &out, &gpu.stream)?;
    let (fv, fbad) = verify_points(&g, &host_in, &got, fc.cols, &points, tol, &|x| {
        eval_point(&g, x)[0]
    });
    drop(got);

    // Unfused: the same, against the reference with rounded intermediates.
    for b in &mut step_bufs {
        b.fill_u8(0xFF, &gpu.stream)?;
    }
    launch_unfused(&steps, &dev_in, &mut step_bufs, &gpu.stream)?;
    gpu.stream.synchronize()?;
    let last = step_bufs
        .last()
        .ok_or_else(|| CaseError::msg("the chain has no op"))?;
    let got = HostMatrix::download(out_dtype, last, &gpu.stream)?;
    let (uv, ubad) = verify_points(&g, &host_in, &got, fc.cols, &points, 2.0 * tol, &|x| {
        eval_unfused_point(&unfused, x)
    });
    drop(got);

    let bytes = problem.bytes_moved();
    let unfused_case = match ubad {
        Some(bad) => failed_row(fc.suite, fc.unfused_name(), fc.shape(), fc.dtype, uv, &bad),
        None => {
            let s = timer.time(timing, |st, _| {
                launch_unfused(&steps, &dev_in, &mut step_bufs, st)
            })?;
            let mut c = Case::measured(fc.suite, fc.unfused_name(), fc.shape(), Clock::Gpu, &s)
                .with_dtype(fc.dtype.name())
                .with_note(format!(
                    "our unfused baseline: {} elementwise kernels (one per op, default configs), \
                     intermediates in {}; really moves {:.1} MiB per run, GB/s counted on the \
                     fused op's {:.1} MiB",
                    steps.len(),
                    fc.dtype,
                    unfused_bytes as f64 / (1u64 << 20) as f64,
                    bytes as f64 / (1u64 << 20) as f64
                ));
            c = with_bytes(c, bytes, copy_gbps);
            c.verified = Some(uv);
            c.anchor = fc.anchor.clone();
            c
        }
    };
    let unfused_us = unfused_case
        .median_us
        .filter(|_| unfused_case.is_measured());
    let fused_case = match fbad {
        Some(bad) => failed_row(fc.suite, fc.fused_name(), fc.shape(), fc.dtype, fv, &bad),
        None => {
            let s = timer.time(timing, |st, _| launch_fused(st, &mut out))?;
            let mut c = Case::measured(fc.suite, fc.fused_name(), fc.shape(), Clock::Gpu, &s)
                .with_dtype(fc.dtype.name())
                .with_note(format!(
                    "elementwise template, {} ops fused, default config {config:?}; bytes = \
                     each input read once + output written once; untuned = our unfused chain",
                    g.op_count()
                ));
            c = with_bytes(c, bytes, copy_gbps);
            c.verified = Some(fv);
            c.anchor = fc.anchor.clone();
            if let Some(u) = unfused_us {
                c.baselines.untuned = c.measured_baseline(u);
            }
            c
        }
    };
    let fused_us = fused_case.median_us.filter(|_| fused_case.is_measured());
    rows.push(fused_case);
    rows.push(unfused_case);
    if let Some(tn) = tuning {
        let name = tuned_name(&fc.fused_name());
        let row = match tn.elementwise(gpu, &problem) {
            Ok(Some(tuned)) => {
                let run_tuned = |timer: &mut Timer<'_>,
                                 out: &mut DeviceBuffer|
                 -> Result<Case, CaseError> {
                    let k = ElementwiseKernel::build(&gpu.device, &problem, &tuned.config)?;
                    let launch =
                        |st: &Stream, out: &mut DeviceBuffer| -> Result<(), RuntimeError> {
                            let ins: Vec<DeviceSlice<'_>> =
                                dev_in.iter().map(DeviceSlice::whole).collect();
                            k.launch(st, &ins, &mut [DeviceSliceMut::whole(out)])
                                .map_err(runtime)
                        };
                    out.fill_u8(0xFF, &gpu.stream)?;
                    launch(&gpu.stream, out)?;
                    gpu.stream.synchronize()?;
                    let got = HostMatrix::download(out_dtype, out, &gpu.stream)?;
                    let (v, bad) = verify_points(&g, &host_in, &got, fc.cols, &points, tol, &|x| {
                        eval_point(&g, x)[0]
                    });
                    drop(got);
                    if let Some(bad) = bad {
                        return Ok(failed_row(
                            fc.suite,
                            name.clone(),
                            fc.shape(),
                            fc.dtype,
                            v,
                            &bad,
                        ));
                    }
                    let s = timer.time(timing, |st, _| launch(st, out))?;
                    let mut c = Case::measured(fc.suite, name.clone(), fc.shape(), Clock::Gpu, &s)
                        .with_dtype(fc.dtype.name())
                        .with_note(format!(
                            "elementwise template, {} ops fused, {}; bytes = each input read once + output written once",
                            g.op_count(),
                            describe(&tuned.info)
                        ));
                    c = with_bytes(c, bytes, copy_gbps);
                    c.verified = Some(v);
                    c.anchor = fc.anchor.clone();
                    if let Some(d) = fused_us {
                        c.baselines.untuned = c.measured_baseline(d);
                    }
                    c.tuning = Some(tuned.info.clone());
                    Ok(c)
                };
                run_tuned(timer, &mut out)?
            }
            Ok(None) => Case::not_available(
                fc.suite,
                name,
                fc.shape(),
                nothing_tuned(&fc.tune_command()),
            )
            .with_dtype(fc.dtype.name()),
            Err(e) => {
                Case::failed(fc.suite, name, fc.shape(), Clock::Gpu, e).with_dtype(fc.dtype.name())
            }
        };
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(kind: ChainKind) -> FusedCase {
        FusedCase {
            graph: kind,
            dtype: DType::Bf16,
            rows: 32768,
            cols: 4096,
            suite: SuiteId::Memory,
            anchor: None,
        }
    }

    #[test]
    fn names_and_sizes() {
        let c = case(ChainKind::Chain8);
        assert_eq!(c.fused_name(), "rtx chain8 fused bf16 32768x4096");
        assert_eq!(c.unfused_name(), "rtx-unfused chain8 bf16 32768x4096");
        let g = c.graph.graph(c.dtype).unwrap();
        let p = ElementwiseProblem::new(g, c.rows, c.cols);
        // a, b and the output are full tensors of 256 MiB each; the bias is one row.
        assert!(p.bytes_moved() >= 3 * (256u64 << 20));
        for k in [
            ChainKind::GeluAffine,
            ChainKind::Chain8,
            ChainKind::BiasGelu,
            ChainKind::SiluGate,
        ] {
            let g = k.graph(DType::Bf16).unwrap();
            assert_eq!(graphs::unfuse(&g).unwrap().len(), g.op_count(), "{k:?}");
        }
    }

    #[test]
    fn verify_points_accepts_the_reference_and_rejects_an_error() {
        let mut rng = SmallRng::seed_from_u64(9);
        let g = ChainKind::Chain8.graph(DType::F32).unwrap();
        let (rows, cols) = (16u32, 40u32);
        let p = ElementwiseProblem::new(g.clone(), rows, cols);
        let ins: Vec<HostMatrix> = (0..g.inputs.len())
            .map(|i| HostMatrix::random(DType::F32, p.input_elems(i) as usize, &mut rng))
            .collect();
        let mut y = Vec::new();
        for r in 0..rows as usize {
            for c in 0..cols as usize {
                let x: Vec<f64> = g
                    .inputs
                    .iter()
                    .zip(&ins)
                    .map(|(s, h)| h.get(s.broadcast.index(cols as usize, r, c)))
                    .collect();
                y.push(eval_point(&g, &x)[0] as f32);
            }
        }
        let pts = sample_points(rows, cols, &mut rng);
        assert_eq!(pts.len(), (rows * cols) as usize);
        let want = |x: &[f64]| eval_point(&g, x)[0];
        let (v, bad) = verify_points(
            &g,
            &ins,
            &HostMatrix::F32(y.clone()),
            cols,
            &pts,
            1e-4,
            &want,
        );
        assert!(v.ok && bad.is_none(), "{v:?} {bad:?}");
        y[3 * 40 + 2] += 1.0;
        let (v, bad) = verify_points(&g, &ins, &HostMatrix::F32(y), cols, &pts, 1e-4, &want);
        assert!(!v.ok && bad.unwrap().starts_with("(3, 2)"));
    }
}
