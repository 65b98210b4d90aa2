//! GEMM suite: cuBLAS (the baseline, itself verified) and every [`candidate::GemmCandidate`]
//! on fresh random inputs per problem, at the shapes of [`shapes`].
//!
//! Per problem: random A and B (uniform [-1, 1), rounded to the dtype) are uploaded; C is
//! poisoned (all bits set: NaN) before a verification run whose output is checked at ~1024
//! sampled elements against an f64 CPU reference; then the timing harness measures it (L2
//! flushed between runs). A candidate whose check fails is a failed row carrying the error
//! (and its `verified` record, so the run exits 3); it is never timed. Candidates get `baselines.cublas` (same run, same inputs) and, when
//! they have an untuned variant, `baselines.untuned`. cuBLAS is timed alternately with each
//! candidate ([`Timer::time_paired`]; `interleaved` in the report) unless
//! [`TimingConfig::interleave_baseline`] is off, when the separately timed cuBLAS row serves.

pub mod candidate;
pub mod cublas;
pub mod host_matrix;
pub mod shapes;
pub mod template_candidates;
pub mod verify;

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::gemm_key;
use crate::gpu::Gpu;
use crate::report::{Case, Clock, MeasuredBaseline, Verified};
use crate::stats::Summary;
use crate::suite_id::SuiteId;
use crate::timing::{Timer, TimingConfig, TimingError};
use candidate::{candidates, GemmCandidate, GemmOperands};
use host_matrix::HostMatrix;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rtx_runtime::blas::Blas;
use rtx_runtime::{DeviceBuffer, RuntimeError};
use rtx_synthesis::templates::gemm::GemmProblem;

/// A failure while running one problem; `sticky` ones end the suite.
#[derive(Debug)]
struct ProblemError {
    message: String,
    sticky: bool,
}

impl From<RuntimeError> for ProblemError {
    fn from(e: RuntimeError) -> Self {
        ProblemError {
            sticky: e.is_sticky(),
            message: e.to_string(),
        }
    }
}

impl From<TimingError> for ProblemError {
    fn from(e: TimingError) -> Self {
        let sticky = matches!(&e, TimingError::Runtime(r) if r.is_sticky());
        ProblemError {
            sticky,
            message: e.to_string(),
        }
    }
}

/// Device buffers and host inputs of one problem.
struct Operands {
    a: DeviceBuffer,
    b: DeviceBuffer,
    c: DeviceBuffer,
    ha: HostMatrix,
    hb: HostMatrix,
}

impl Operands {
    fn new(gpu: &Gpu, p: &GemmProblem, rng: &mut SmallRng) -> Result<Operands, RuntimeError> {
        let (ae, be, ce) = p.buffer_elems();
        let ha = HostMatrix::random(p.dtype, ae as usize, rng);
        let hb = HostMatrix::random(p.dtype, be as usize, rng);
        let mut a = gpu.device.alloc(ha.bytes(), &gpu.stream)?;
        let mut b = gpu.device.alloc(hb.bytes(), &gpu.stream)?;
        ha.upload(&mut a, &gpu.stream)?;
        hb.upload(&mut b, &gpu.stream)?;
        let c = gpu
            .device
            .alloc(ce as usize * p.epilogue.out_dtype.size_bytes(), &gpu.stream)?;
        Ok(Operands { a, b, c, ha, hb })
    }

    /// Poisons C, runs `launch` once, downloads C and checks it at sampled points.
    fn verify(
        &mut self,
        gpu: &Gpu,
        p: &GemmProblem,
        rng: &mut SmallRng,
        launch: &mut dyn FnMut(&mut Operands) -> Result<(), RuntimeError>,
    ) -> Result<Verified, RuntimeError> {
        self.c.fill_u8(0xFF, &gpu.stream)?;
        launch(self)?;
        gpu.stream.synchronize()?;
        let c = HostMatrix::download(p.epilogue.out_dtype, &self.c, &gpu.stream)?;
        let points = verify::sample_points(p, verify::SAMPLE_POINTS, rng);
        Ok(verify::check(p, &self.ha, &self.hb, &c, &points))
    }
}

fn base_case(label: &str, p: &GemmProblem, s: &Summary) -> Case {
    let shape = shapes::shape_name(p);
    let mut c = Case::measured(
        SuiteId::Gemm,
        format!("{label} {} {shape}", p.dtype),
        shape,
        Clock::Gpu,
        s,
    )
    .with_dtype(p.dtype.name())
    .with_work(Some(p.flops()), Some(shapes::min_bytes(p)));
    c.anchor = Some(gemm_key(p.dtype, p.m, p.n, p.k));
    c
}

fn failed(label: &str, p: &GemmProblem, e: impl std::fmt::Display) -> Case {
    let shape = shapes::shape_name(p);
    Case::failed(
        SuiteId::Gemm,
        format!("{label} {} {shape}", p.dtype),
        shape,
        Clock::Gpu,
        e.to_string(),
    )
    .with_dtype(p.dtype.name())
}

fn run_cublas(
    gpu: &Gpu,
    blas: &Blas,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    ops: &mut Operands,
    p: &GemmProblem,
    rng: &mut SmallRng,
) -> Result<Case, ProblemError> {
    let call = cublas::blas_call(p, &ops.a, &ops.b, &ops.c)?;
    let verified = ops.verify(gpu, p, rng, &mut |_| blas.gemm(&call))?;
    let s = timer.time(timing, |_, _| blas.gemm(&call))?;
    let mut c =
        base_case("cublas", p, &s).with_note("cuBLAS through rtx_runtime::blas, row-major NN");
    c.verified = Some(verified);
    Ok(c)
}

/// Verifies and times one candidate; with `blas` (and [`TimingConfig::interleave_baseline`])
/// cuBLAS is timed alternately with it and becomes its `baselines.cublas`.
#[allow(clippy::too_many_arguments)]
fn run_candidate(
    gpu: &Gpu,
    blas: Option<&Blas>,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    ops: &mut Operands,
    p: &GemmProblem,
    rng: &mut SmallRng,
    cand: &dyn GemmCandidate,
) -> Result<Case, ProblemError> {
    let label = cand.label_for(gpu, p);
    let mut k = match cand.prepare(gpu, p) {
        Ok(k) => k,
        Err(e) => return Ok(failed(&label, p, format!("prepare: {e}"))),
    };
    let verified = ops.verify(gpu, p, rng, &mut |o| {
        k.launch(
            &mut GemmOperands {
                a: &o.a,
                b: &o.b,
                c: &mut o.c,
            },
            &gpu.stream,
        )
    })?;
    if !verified.ok {
        // A wrong result is never timed: the row fails with the error it made.
        let mut case = failed(
            &label,
            p,
            format!(
                "wrong result: sampled f64 check rel_err {:.3e} > bound {:.1e} ({})",
                verified.rel_err,
                verified.bound,
                k.describe()
            ),
        );
        case.verified = Some(verified);
        return Ok(case);
    }
    let call = cublas::blas_call(p, &ops.a, &ops.b, &ops.c)?;
    let (a, b, c) = (&ops.a, &ops.b, &mut ops.c);
    let mut go = GemmOperands { a, b, c };
    let (s, paired) = match blas.filter(|_| timing.interleave_baseline) {
        Some(blas) => {
            let (s, sc) = timer.time_paired(
                timing,
                |st, _| k.launch(&mut go, st),
                |_, _| blas.gemm(&call),
            )?;
            (s, Some(sc))
        }
        None => (timer.time(timing, |st, _| k.launch(&mut go, st))?, None),
    };
    let mut case = base_case(&label, p, &s).with_note(k.describe());
    case.verified = Some(verified);
    if let Some(sc) = paired {
        case.baselines.cublas = case
            .measured_baseline(sc.median_us)
            .map(|b| MeasuredBaseline {
                interleaved: true,
                ..b
            });
    }
    Ok(case)
}

fn run_problem(
    gpu: &Gpu,
    blas: Option<&Blas>,
    timer: &mut Timer<'_>,
    ctx: &SuiteContext<'_>,
    cands: &[Box<dyn GemmCandidate>],
    p: &GemmProblem,
    rng: &mut SmallRng,
) -> Result<Vec<Case>, ProblemError> {
    let mut out = Vec::new();
    let mut ops = Operands::new(gpu, p, rng)?;
    let cublas = match blas {
        Some(blas) => match run_cublas(gpu, blas, timer, &ctx.timing, &mut ops, p, rng) {
            Ok(c) => Some(c),
            Err(e) if e.sticky => return Err(e),
            Err(e) => {
                out.push(failed("cublas", p, e.message));
                None
            }
        },
        None => None,
    };
    let cublas_us = cublas.as_ref().and_then(|c| c.median_us);
    out.extend(cublas);
    for cand in cands {
        if cand.supports(gpu, p).is_err() {
            continue;
        }
        if let Some(why) = cand.not_measured(gpu, p) {
            let shape = shapes::shape_name(p);
            out.push(
                Case::not_available(
                    SuiteId::Gemm,
                    format!("{} {} {shape}", cand.label_for(gpu, p), p.dtype),
                    shape,
                    why,
                )
                .with_dtype(p.dtype.name()),
            );
            continue;
        }
        let paired_blas = blas.filter(|_| cublas_us.is_some());
        let mut case = match run_candidate(
            gpu,
            paired_blas,
            timer,
            &ctx.timing,
            &mut ops,
            p,
            rng,
            cand.as_ref(),
        ) {
            Ok(c) => c,
            Err(e) if e.sticky => return Err(e),
            Err(e) => failed(&cand.label(), p, e.message),
        };
        if let (Some(us), None) = (cublas_us, &case.baselines.cublas) {
            case.baselines.cublas = case.measured_baseline(us);
        }
        if let Some(u) = cand.untuned().filter(|u| u.supports(gpu, p).is_ok()) {
            let u_name = format!(
                "{} {} {}",
                u.label_for(gpu, p),
                p.dtype,
                shapes::shape_name(p)
            );
            // The same run already measured the untuned variant (default rows come first).
            if let Some(prev) = out.iter().find(|c| c.name == u_name) {
                if prev.is_measured() && prev.verified.is_some_and(|v| v.ok) {
                    case.baselines.untuned =
                        prev.median_us.and_then(|us| case.measured_baseline(us));
                }
                out.push(case);
                continue;
            }
            match run_candidate(gpu, None, timer, &ctx.timing, &mut ops, p, rng, u.as_ref()) {
                Ok(uc) if uc.is_measured() && uc.verified.is_some_and(|v| v.ok) => {
                    case.baselines.untuned = uc.median_us.and_then(|us| case.measured_baseline(us));
                }
                Ok(uc) => out.push(uc),
                Err(e) if e.sticky => return Err(e),
                Err(e) => out.push(failed(&u.label(), p, e.message)),
            }
        }
        out.push(case);
    }
    Ok(out)
}

/// The GEMM suite.
pub struct GemmSuite;

impl Suite for GemmSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Gemm
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let out = run_problems(ctx, &ctx.gemm_filter.apply(shapes::problems(ctx.quick)))?;
        Ok(out)
    }
}

/// Runs cuBLAS and every candidate on `problems` (fresh random inputs each); no cases without
/// a GPU.
pub fn run_problems(
    ctx: &SuiteContext<'_>,
    problems: &[GemmProblem],
) -> Result<Vec<Case>, SuiteError> {
    let Some(gpu) = ctx.gpu else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let blas = match Blas::new(&gpu.device, &gpu.stream) {
        Ok(b) => Some(b),
        Err(e) => {
            out.push(Case::not_available(
                SuiteId::Gemm,
                "cublas",
                "-",
                format!("cuBLAS not usable: {e}"),
            ));
            None
        }
    };
    let mut timer = Timer::new(gpu).map_err(|e| SuiteError {
        suite: SuiteId::Gemm,
        reason: e.to_string(),
        partial: Vec::new(),
    })?;
    let cands = candidates();
    let seed = crate::env_info::now_unix();
    let mut rng = SmallRng::seed_from_u64(seed);
    tracing::info!(target: "rtx_bench", "gemm inputs: uniform [-1, 1), SmallRng seed {seed}");
    let p_bar = ctx.progress("gemm", problems.len() as u64);
    for p in problems {
        let what = format!("{} {}", p.dtype, shapes::shape_name(p));
        p_bar.running(&what);
        match run_problem(gpu, blas.as_ref(), &mut timer, ctx, &cands, p, &mut rng) {
            Ok(cases) => out.extend(cases),
            Err(e) if e.sticky => {
                p_bar.finish();
                return Err(SuiteError {
                    suite: SuiteId::Gemm,
                    reason: format!("{what}: {}", e.message),
                    partial: out,
                });
            }
            Err(e) => out.push(failed("cublas", p, e.message)),
        }
        ctx.save_partial(&out);
        p_bar.done(&what);
    }
    p_bar.finish();
    Ok(out)
}
