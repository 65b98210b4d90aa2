//! [`GemmGpuBackend`]: the tuner's [`TuneBackend`] for any [`GemmFamily`] on a real GPU.
//!
//! - `compile`: emit, then [`crate::aot::KernelCache`] (hits read from disk; `compile_many` compiles the
//!   misses of a batch in parallel with `get_or_compile_many`); ptxas' report becomes the
//!   [`ResourceUsage`]. Compiling never touches the GPU, so a compile-only worker needs none.
//! - `verify(config, seed)`: FRESH random A/B (and C/bias/residual when the epilogue reads them)
//!   drawn from `seed`, the output poisoned with `0xFF` bytes (NaN) before the run, launch on the
//!   backend's own stream, then a reference on the same device inputs: cuBLAS (fp32 output for
//!   16-bit inputs) when it can express the epilogue, compared over the full output; otherwise
//!   the f64 CPU reference, over the full output for small problems and a seeded sample (corners
//!   included) for large ones. Any NaN in the output fails; the bound is
//!   [`crate::DType::rel_tolerance`] of the input dtype.
//! - `time(config, protocol)`: [`crate::tuner::run_protocol_batched`] over event-timed single launches, enqueued
//!   [`MeasureProtocol::pipeline`] at a time before one wait; between samples
//!   (untimed) a `flush_bytes` scratch buffer is overwritten with `fill_u8` when `flush_l2` is
//!   set, and input set `protocol.input_set(rep)` is used (`rotate_inputs` copies of A/B).
//! - [`GemmGpuBackend::time_cublas`]: the cuBLAS baseline under the same protocol and inputs.
//!
//! Every wait on the GPU has a watchdog ([`GpuBackend::with_watchdog`]): a kernel still
//! running after it fails with [`CandidateError::Timeout`] (which poisons the context). Runtime
//! errors that are sticky (`RuntimeError::is_sticky`) become [`CandidateError::Fault`]; other
//! runtime failures [`CandidateError::Unmeasurable`]. The context is created lazily on the first
//! `verify`/`time`. For fault isolation wrap the same backend in a worker process with
//! [`crate::tuner::WorkerBackend`] + [`crate::tuner::worker_main`].

use super::buffers::{GemmBuffers, GemmLaunchError};
use super::family::GemmFamily;
pub use super::gpu_backend::runtime_failure;
use super::gpu_backend::{compile_config, compile_configs, time_protocol, GpuBackend, GpuContext};
use super::inputs::{decode_output, HostMatrix};
use crate::templates::gemm::reference::{activate, rel_error};
use crate::templates::gemm::{GemmProblem, Layout};
use crate::tuner::{
    CandidateError, CompileSink, MeasureProtocol, ResourceUsage, TimingStats, TuneBackend,
    TuneTask, VerifyReport,
};
use crate::DType;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::{Blas, BlasDtype, BlasGemm, DeviceBuffer};

/// Problems with at most this many multiply-adds are checked in full against the CPU reference.
pub const CPU_FULL_CHECK_MACS: u64 = 1 << 27;
/// Outputs compared on a sampled CPU check (the four corners of every batch entry included).
pub const CPU_SAMPLE: usize = 2048;
/// Seed of the timing inputs (values do not matter for speed, but they are not all zero).
const TIMING_SEED: u64 = 0x7133_5eed;

/// Operands of one timing input set.
struct TimingSet {
    a: DeviceBuffer,
    b: DeviceBuffer,
    c: DeviceBuffer,
    bias: Option<DeviceBuffer>,
    residual: Option<DeviceBuffer>,
}

/// What a GEMM backend keeps in its CUDA context beside the shared state: the timing input sets
/// (and the problem they were made for) and the cuBLAS handle, created on first use.
#[derive(Default)]
pub struct GemmState {
    blas: Option<Blas>,
    timing_problem: Option<GemmProblem>,
    timing: Vec<TimingSet>,
}

/// The GPU tuning backend for the GEMM family `F` (see the module docs).
pub type GemmGpuBackend<F> = GpuBackend<GemmState, F>;

/// A launch error as a candidate failure.
pub fn launch_failure(e: GemmLaunchError) -> CandidateError {
    match e {
        GemmLaunchError::Constraint(r) => CandidateError::Rejected(r),
        GemmLaunchError::Runtime(r) => runtime_failure("launch", r),
        other => CandidateError::Unmeasurable(format!("launch refused: {other}")),
    }
}

/// True when cuBLAS computes exactly this problem: no bias, activation or residual; output in
/// the input dtype (or f32 for 16-bit inputs); no broadcast (stride 0) batch operand.
pub fn cublas_supports(p: &GemmProblem) -> bool {
    let e = &p.epilogue;
    let out_ok = e.out_dtype == p.dtype
        || (e.out_dtype == DType::F32 && matches!(p.dtype, DType::F16 | DType::Bf16 | DType::Tf32));
    let broadcast = p.batch > 1 && (p.stride_a == 0 || p.stride_b == 0);
    !e.bias
        && e.activation == crate::templates::gemm::Activation::None
        && !e.residual
        && out_ok
        && !broadcast
}

fn blas_dtype(d: DType) -> BlasDtype {
    match d {
        DType::F32 => BlasDtype::F32,
        DType::Tf32 => BlasDtype::Tf32,
        DType::F16 => BlasDtype::F16,
        DType::Bf16 => BlasDtype::Bf16,
    }
}

/// The cuBLAS call for `p` on the given device addresses; `c_f32` writes C as fp32.
pub fn blas_call(p: &GemmProblem, a: u64, b: u64, c: u64, c_f32: bool) -> BlasGemm {
    BlasGemm {
        dtype: blas_dtype(p.dtype),
        c_f32,
        transa: p.layout_a == Layout::Col,
        transb: p.layout_b == Layout::Col,
        m: p.m as usize,
        n: p.n as usize,
        k: p.k as usize,
        alpha: p.epilogue.alpha,
        beta: p.epilogue.beta,
        a,
        lda: p.lda as usize,
        b,
        ldb: p.ldb as usize,
        c,
        ldc: p.ldc as usize,
        batch: p.batch as usize,
        stride_a: p.stride_a as i64,
        stride_b: p.stride_b as i64,
        stride_c: p.stride_c as i64,
    }
}

/// Offsets in the C buffer of every logical output element (batch-major, then row, column).
pub fn output_offsets(p: &GemmProblem) -> impl Iterator<Item = usize> + '_ {
    (0..p.batch as usize).flat_map(move |bt| {
        (0..p.m as usize).flat_map(move |i| {
            (0..p.n as usize).map(move |j| bt * p.stride_c as usize + i * p.ldc as usize + j)
        })
    })
}

/// Host inputs of one verification.
struct VerifyInputs {
    a: HostMatrix,
    b: HostMatrix,
    c: Option<HostMatrix>,
    bias: Option<HostMatrix>,
    residual: Option<HostMatrix>,
}

impl VerifyInputs {
    fn draw(p: &GemmProblem, seed: u64) -> VerifyInputs {
        let (ea, eb, ec) = p.buffer_elems();
        let out = p.epilogue.out_dtype;
        let part = |i: u64| super::inputs::mix64(seed.wrapping_mul(8).wrapping_add(i));
        let a = HostMatrix::seeded(part(0), ea as usize, p.dtype, 1.0);
        let b = HostMatrix::seeded(part(1), eb as usize, p.dtype, 1.0);
        let c =
            (p.epilogue.beta != 0.0).then(|| HostMatrix::seeded(part(2), ec as usize, out, 1.0));
        let bias = p
            .epilogue
            .bias
            .then(|| HostMatrix::seeded(part(3), p.n as usize, out, 1.0));
        let residual = p
            .epilogue
            .residual
            .then(|| HostMatrix::seeded(part(4), ec as usize, out, 1.0));
        VerifyInputs {
            a,
            b,
            c,
            bias,
            residual,
        }
    }

    /// f64 reference of output element (bt, i, j), as `reference::gemm_f64` computes it.
    fn element(&self, p: &GemmProblem, bt: usize, i: usize, j: usize) -> f64 {
        let a0 = bt * p.stride_a as usize;
        let b0 = bt * p.stride_b as usize;
        let ci = bt * p.stride_c as usize + i * p.ldc as usize + j;
        let mut acc = 0.0;
        for l in 0..p.k as usize {
            let av = match p.layout_a {
                Layout::Row => self.a.at(a0 + i * p.lda as usize + l),
                Layout::Col => self.a.at(a0 + l * p.lda as usize + i),
            };
            let bv = match p.layout_b {
                Layout::Row => self.b.at(b0 + l * p.ldb as usize + j),
                Layout::Col => self.b.at(b0 + j * p.ldb as usize + l),
            };
            acc += av * bv;
        }
        let e = &p.epilogue;
        let mut v = e.alpha as f64 * acc;
        if e.beta != 0.0 {
            v += e.beta as f64 * self.c.as_ref().map_or(0.0, |c| c.at(ci));
        }
        if e.bias {
            v += self.bias.as_ref().map_or(0.0, |b| b.at(j));
        }
        v = activate(e.activation, v);
        if e.residual {
            v += self.residual.as_ref().map_or(0.0, |r| r.at(ci));
        }
        v
    }
}

/// The CPU check of `got` (the whole downloaded C, decoded): (compared reference, compared
/// output) over every element for small problems, else a seeded sample with the corners.
fn cpu_compare(p: &GemmProblem, x: &VerifyInputs, got: &[f64], seed: u64) -> (Vec<f64>, Vec<f64>) {
    let macs = p.m as u64 * p.n as u64 * p.k as u64 * p.batch as u64;
    let mut want = Vec::new();
    let mut have = Vec::new();
    let mut push = |bt: usize, i: usize, j: usize| {
        want.push(x.element(p, bt, i, j));
        have.push(got[bt * p.stride_c as usize + i * p.ldc as usize + j]);
    };
    if macs <= CPU_FULL_CHECK_MACS {
        for bt in 0..p.batch as usize {
            for i in 0..p.m as usize {
                for j in 0..p.n as usize {
                    push(bt, i, j);
                }
            }
        }
    } else {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5a3c_9e1f_0b6d_2847);
        let (m, n) = (p.m as usize, p.n as usize);
        for bt in 0..p.batch as usize {
            for (i, j) in [(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)] {
                push(bt, i, j);
            }
        }
        for _ in 0..CPU_SAMPLE {
            push(
                rng.random_range(0..p.batch as usize),
                rng.random_range(0..m),
                rng.random_range(0..n),
            );
        }
    }
    (want, have)
}

impl GpuContext<GemmState> {
    /// The context's cuBLAS handle, created on first use.
    fn blas(&mut self) -> Result<&Blas, CandidateError> {
        if self.op.blas.is_none() {
            self.op.blas = Some(
                Blas::new(&self.device, &self.stream)
                    .map_err(|e| runtime_failure("creating a cuBLAS handle", e))?,
            );
        }
        self.op
            .blas
            .as_ref()
            .ok_or_else(|| CandidateError::Unmeasurable("no cuBLAS handle".into()))
    }

    fn ensure_timing_inputs(&mut self, p: &GemmProblem, sets: usize) -> Result<(), CandidateError> {
        if self.op.timing_problem.as_ref() == Some(p) && self.op.timing.len() == sets {
            return Ok(());
        }
        self.op.timing.clear();
        self.op.timing_problem = None;
        let (ea, eb, ec) = p.buffer_elems();
        let out = p.epilogue.out_dtype;
        for s in 0..sets as u64 {
            let seed = TIMING_SEED.wrapping_add(s * 0x1000);
            let a = self.upload(&HostMatrix::seeded(seed, ea as usize, p.dtype, 1.0))?;
            let b = self.upload(&HostMatrix::seeded(seed + 1, eb as usize, p.dtype, 1.0))?;
            let mut c = self.alloc(ec as usize * out.size_bytes())?;
            c.fill_u8(0, &self.stream)
                .map_err(|e| runtime_failure("fill", e))?;
            let bias = match p.epilogue.bias {
                true => Some(self.upload(&HostMatrix::seeded(seed + 2, p.n as usize, out, 1.0))?),
                false => None,
            };
            let residual = match p.epilogue.residual {
                true => Some(self.upload(&HostMatrix::seeded(seed + 3, ec as usize, out, 1.0))?),
                false => None,
            };
            self.op.timing.push(TimingSet {
                a,
                b,
                c,
                bias,
                residual,
            });
        }
        self.stream
            .synchronize()
            .map_err(|e| runtime_failure("timing inputs", e))?;
        self.op.timing_problem = Some(*p);
        Ok(())
    }
}

impl<F: GemmFamily> GemmGpuBackend<F> {
    /// Times cuBLAS on `problem` under `protocol`, with the same inputs, flush and event timing as
    /// the candidates. Fails with [`CandidateError::Unmeasurable`] when cuBLAS cannot express the
    /// epilogue ([`cublas_supports`]).
    pub fn time_cublas(
        &self,
        problem: &GemmProblem,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        if !cublas_supports(problem) {
            return Err(CandidateError::Unmeasurable(format!(
                "cuBLAS cannot compute {problem:?}"
            )));
        }
        let c_f32 = problem.epilogue.out_dtype == DType::F32
            && matches!(problem.dtype, DType::F16 | DType::Bf16);
        let limit = self.watchdog();
        self.with_gpu(|g| {
            g.ensure_timing_inputs(problem, protocol.rotate_inputs.max(1))?;
            g.blas()?;
            let (target, op) = g.timing_target(protocol)?;
            let GemmState { blas, timing, .. } = op;
            let blas = blas
                .as_ref()
                .ok_or_else(|| CandidateError::Unmeasurable("no cuBLAS handle".into()))?;
            time_protocol(protocol, target, limit, "cuBLAS", |rep| {
                let set = &timing[protocol.input_set(rep) % timing.len()];
                blas.gemm(&blas_call(
                    problem,
                    set.a.ptr(),
                    set.b.ptr(),
                    set.c.ptr(),
                    c_f32,
                ))
                .map_err(|e| runtime_failure("cuBLAS", e))
            })
        })
    }
}

impl<F: GemmFamily> TuneBackend<F> for GemmGpuBackend<F> {
    fn compile(
        &self,
        task: &TuneTask<'_, F>,
        config: &F::Config,
    ) -> Result<ResourceUsage, CandidateError> {
        compile_config(self.cache(), task, config)
    }

    fn compile_many(&self, task: &TuneTask<'_, F>, configs: &[F::Config], sink: &CompileSink<'_>) {
        compile_configs(self.cache(), self.compile_jobs(), task, configs, sink)
    }

    fn compile_parallelism(&self) -> usize {
        self.compile_jobs()
    }

    fn verify(
        &self,
        task: &TuneTask<'_, F>,
        config: &F::Config,
        seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        let p = task.problem;
        let limit = self.watchdog();
        let x = VerifyInputs::draw(p, seed);
        let (_, _, ec) = p.buffer_elems();
        let out = p.epilogue.out_dtype;
        let bound = p.dtype.rel_tolerance();
        self.with_gpu(|g| {
            let f = self.function(g, task, config)?;
            let da = g.upload(&x.a)?;
            let db = g.upload(&x.b)?;
            let mut dc = match &x.c {
                Some(c) => g.upload(c)?,
                None => {
                    let mut buf = g.alloc(ec as usize * out.size_bytes())?;
                    buf.fill_u8(0xFF, &g.stream)
                        .map_err(|e| runtime_failure("poisoning C", e))?;
                    buf
                }
            };
            let dbias = x.bias.as_ref().map(|h| g.upload(h)).transpose()?;
            let dres = x.residual.as_ref().map(|h| g.upload(h)).transpose()?;
            {
                let mut bufs = GemmBuffers {
                    a: &da,
                    b: &db,
                    c: &mut dc,
                    bias: dbias.as_ref(),
                    residual: dres.as_ref(),
                };
                task.template
                    .enqueue_gemm(&f, p, config, &mut bufs, &g.stream)
                    .map_err(launch_failure)?;
            }
            g.sync(limit, f.name())?;
            let bytes: Vec<u8> = dc
                .download(&g.stream)
                .map_err(|e| runtime_failure("download", e))?;
            let got = decode_output(&bytes, out);
            if output_offsets(p).any(|o| got.get(o).is_none_or(|v| !v.is_finite())) {
                tracing::debug!(
                    kernel = f.name(),
                    "output has NaN/Inf or unwritten elements"
                );
                return Ok(VerifyReport {
                    rel_err: f64::INFINITY,
                    bound,
                });
            }
            let rel_err = if cublas_supports(p) {
                // cuBLAS on the same device inputs; fp32 output for 16-bit inputs (a tighter reference).
                let dref = match &x.c {
                    Some(c) => {
                        let mut buf = g.alloc(ec as usize * 4)?;
                        buf.upload(&c.to_f32(), &g.stream)
                            .map_err(|e| runtime_failure("upload", e))?;
                        buf
                    }
                    None => {
                        let mut buf = g.alloc(ec as usize * 4)?;
                        buf.fill_u8(0xFF, &g.stream)
                            .map_err(|e| runtime_failure("poisoning the reference", e))?;
                        buf
                    }
                };
                let c_f32 = matches!(p.dtype, DType::F16 | DType::Bf16);
                g.blas()?
                    .gemm(&blas_call(p, da.ptr(), db.ptr(), dref.ptr(), c_f32))
                    .map_err(|e| runtime_failure("cuBLAS reference", e))?;
                g.sync(limit, "cuBLAS reference")?;
                let want: Vec<f32> = dref
                    .download(&g.stream)
                    .map_err(|e| runtime_failure("download", e))?;
                let (w, h): (Vec<f64>, Vec<f64>) =
                    output_offsets(p).map(|o| (want[o] as f64, got[o])).unzip();
                rel_error(&h, &w)
            } else {
                let (w, h) = cpu_compare(p, &x, &got, seed);
                rel_error(&h, &w)
            };
            Ok(VerifyReport { rel_err, bound })
        })
    }

    fn time(
        &self,
        task: &TuneTask<'_, F>,
        config: &F::Config,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let p = task.problem;
        let limit = self.watchdog();
        self.with_gpu(|g| {
            let f = self.function(g, task, config)?;
            g.ensure_timing_inputs(p, protocol.rotate_inputs.max(1))?;
            let (target, op) = g.timing_target(protocol)?;
            let (stream, timing) = (target.stream, &mut op.timing);
            time_protocol(protocol, target, limit, f.name(), |rep| {
                let n = timing.len();
                let TimingSet {
                    a,
                    b,
                    c,
                    bias,
                    residual,
                } = &mut timing[protocol.input_set(rep) % n];
                let mut bufs = GemmBuffers {
                    a,
                    b,
                    c,
                    bias: bias.as_ref(),
                    residual: residual.as_ref(),
                };
                task.template
                    .enqueue_gemm(&f, p, config, &mut bufs, stream)
                    .map_err(launch_failure)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::gemm::reference::{gemm_f64, GemmRefInputs};
    use crate::templates::gemm::{Activation, Epilogue};
    use rtx_runtime::RuntimeError;

    #[test]
    fn cublas_covers_plain_and_scaled_gemms_only() {
        let p = GemmProblem::nn(64, 64, 64, DType::Bf16);
        assert!(cublas_supports(&p));
        let mut f32out = p;
        f32out.epilogue.out_dtype = DType::F32;
        assert!(cublas_supports(&f32out));
        let mut beta = p;
        beta.epilogue.beta = 0.5;
        beta.epilogue.alpha = 2.0;
        assert!(cublas_supports(&beta));
        for tweak in [
            |e: &mut Epilogue| e.bias = true,
            |e: &mut Epilogue| e.residual = true,
            |e: &mut Epilogue| e.activation = Activation::Relu,
            |e: &mut Epilogue| e.out_dtype = DType::F16,
        ] {
            let mut q = p;
            tweak(&mut q.epilogue);
            assert!(!cublas_supports(&q), "{:?}", q.epilogue);
        }
        let mut bcast = p.batched(2);
        bcast.stride_a = 0;
        assert!(!cublas_supports(&bcast));
        assert!(cublas_supports(&p.batched(2)));
    }

    #[test]
    fn blas_call_maps_layouts_to_transposes() {
        let p = GemmProblem::new(100, 60, 40, DType::F16, Layout::Col, Layout::Row);
        let g = blas_call(&p, 0x100, 0x200, 0x300, true);
        assert!(g.transa && !g.transb && g.c_f32);
        assert_eq!(
            (g.m, g.n, g.k, g.lda, g.ldb, g.ldc),
            (100, 60, 40, 100, 60, 60)
        );
        g.validate().unwrap();
        let nt = GemmProblem::new(100, 60, 40, DType::Bf16, Layout::Row, Layout::Col);
        let g = blas_call(&nt, 0x100, 0x200, 0x300, false);
        assert!(!g.transa && g.transb);
        g.validate().unwrap();
    }

    #[test]
    fn offsets_skip_padding_columns() {
        let mut p = GemmProblem::nn(2, 3, 4, DType::F16).batched(2);
        p.ldc = 5;
        p.stride_c = 11;
        let o: Vec<usize> = output_offsets(&p).collect();
        assert_eq!(o, vec![0, 1, 2, 5, 6, 7, 11, 12, 13, 16, 17, 18]);
    }

    #[test]
    fn sampled_cpu_reference_agrees_with_the_full_one() {
        let mut p = GemmProblem::new(33, 17, 9, DType::Bf16, Layout::Col, Layout::Col);
        p.epilogue = Epilogue {
            alpha: 0.5,
            beta: -1.0,
            bias: true,
            activation: Activation::GeluTanh,
            residual: true,
            out_dtype: DType::F32,
        };
        let x = VerifyInputs::draw(&p, 3);
        let (a, b) = (x.a.to_f64(), x.b.to_f64());
        let (c, bias, res) = (
            x.c.as_ref().unwrap().to_f64(),
            x.bias.as_ref().unwrap().to_f64(),
            x.residual.as_ref().unwrap().to_f64(),
        );
        let full = gemm_f64(
            &p,
            &GemmRefInputs {
                a: &a,
                b: &b,
                c: Some(&c),
                bias: Some(&bias),
                residual: Some(&res),
            },
        );
        let (want, have) = cpu_compare(&p, &x, &full, 1);
        assert_eq!(want.len(), 33 * 17);
        assert_eq!(rel_error(&have, &want), 0.0);
        // A perturbed output is caught.
        let mut bad = full.clone();
        bad[5] += 10.0;
        let (want, have) = cpu_compare(&p, &x, &bad, 1);
        assert!(rel_error(&have, &want) > 1e-3);
    }

    #[test]
    fn fresh_seeds_draw_fresh_inputs() {
        let p = GemmProblem::nn(16, 16, 16, DType::F16);
        assert_ne!(VerifyInputs::draw(&p, 1).a, VerifyInputs::draw(&p, 2).a);
        assert_eq!(VerifyInputs::draw(&p, 1).b, VerifyInputs::draw(&p, 1).b);
    }

    #[test]
    fn sticky_runtime_errors_become_faults() {
        let sticky = RuntimeError::Driver {
            op: "cuStreamSynchronize",
            code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        };
        assert!(matches!(
            runtime_failure("sync", sticky),
            CandidateError::Fault(_)
        ));
        let soft = RuntimeError::Driver {
            op: "cuLaunchKernel",
            code: "CUDA_ERROR_INVALID_VALUE".into(),
        };
        assert!(matches!(
            runtime_failure("launch", soft),
            CandidateError::Unmeasurable(_)
        ));
        assert!(matches!(
            launch_failure(GemmLaunchError::Constraint("x".into())),
            CandidateError::Rejected(_)
        ));
    }
}
