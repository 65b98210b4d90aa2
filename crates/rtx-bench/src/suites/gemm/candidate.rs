//! The hook through which our GEMM kernels enter the benchmark.
//!
//! A [`GemmCandidate`] says which problems it handles, and prepares (generates, compiles, loads)
//! a [`PreparedGemm`] for one problem, which the suite then verifies and times next to cuBLAS.
//! Its optional [`GemmCandidate::untuned`] variant (e.g. the same template at its default
//! config) is timed too and becomes the `untuned` baseline.
//!
//! Kernels that follow the shared GEMM ABI (GEMM_ABI.md) without extra by-value parameters plug
//! in with [`TemplateCandidate`]:
//!
//! ```ignore
//! // in candidates():
//! Box::new(TemplateCandidate::new("rtx-simt", SimtGemm, ConfigChoice::Default)),
//! ```
//!
//! Templates with extra parameters (TMA descriptors for wgmma) implement [`GemmCandidate`]
//! directly, launching through `templates::gemm::launch::launch_gemm` once that lands.

use crate::gpu::Gpu;
use crate::samples::SampleKernel;
use rtx_runtime::{DeviceBuffer, Function, KernelArgs, LaunchConfig, Module, RuntimeError, Stream};
use rtx_synthesis::aot;
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::templates::{KernelSource, LaunchDims, Template};
use rtx_synthesis::DType;

/// The operand buffers of one problem (packed as `GemmProblem::buffer_elems` says).
pub struct GemmOperands<'a> {
    /// A.
    pub a: &'a DeviceBuffer,
    /// B.
    pub b: &'a DeviceBuffer,
    /// C (output).
    pub c: &'a mut DeviceBuffer,
}

/// A kernel ready to launch for one problem.
pub trait PreparedGemm {
    /// Enqueues one run on `stream`.
    fn launch(&mut self, ops: &mut GemmOperands<'_>, stream: &Stream) -> Result<(), RuntimeError>;
    /// The config in words (shown as the case note).
    fn describe(&self) -> String;
}

/// One of our GEMM implementations.
pub trait GemmCandidate {
    /// Label used in case names (`<label> <dtype> <MxNxK>`), e.g. `rtx-wgmma`.
    fn label(&self) -> String;
    /// The label of this problem's row (e.g. a tuned candidate names its lookup source);
    /// [`GemmCandidate::label`] by default.
    fn label_for(&self, _gpu: &Gpu, _p: &GemmProblem) -> String {
        self.label()
    }
    /// `Some(reason)`: the row is reported as not available instead of being measured (e.g.
    /// the tuning database has nothing for this problem).
    fn not_measured(&self, _gpu: &Gpu, _p: &GemmProblem) -> Option<String> {
        None
    }
    /// `Err(reason)` for problems it does not handle on this device.
    fn supports(&self, gpu: &Gpu, p: &GemmProblem) -> Result<(), String>;
    /// Generates, compiles and loads the kernel for `p`.
    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String>;
    /// The untuned variant compared against, if any.
    fn untuned(&self) -> Option<Box<dyn GemmCandidate>> {
        None
    }
}

/// The cubin of `src` for `arch` through the default on-disk [`aot::KernelCache`]
/// (`RTX_CACHE_DIR`), so every problem with the same dtype/layouts/config (shapes are run-time)
/// and every later run reuses one compile; a plain NVRTC compile when no cache folder exists.
pub fn compile_memo(src: &KernelSource, arch: rtx_synthesis::Arch) -> Result<Vec<u8>, String> {
    use std::sync::OnceLock;
    static CACHE: OnceLock<Option<aot::KernelCache>> = OnceLock::new();
    let short = |e: String| e.lines().take(6).collect::<Vec<_>>().join("\n");
    let cache = CACHE.get_or_init(|| {
        aot::KernelCache::open_default().map_err(|e| tracing::warn!(target: "rtx_bench", "kernel cache unavailable, compiling every time: {e}")).ok()
    });
    match cache {
        Some(c) => c
            .get_or_compile(src, arch)
            .map(|k| k.cubin)
            .map_err(|e| short(e.to_string())),
        None => aot::compile(src, arch)
            .map(|c| c.cubin)
            .map_err(|e| short(e.to_string())),
    }
}

/// A compiled kernel with the plain GEMM ABI parameter list.
pub struct AbiKernel {
    _module: Module,
    function: Function,
    dims: LaunchDims,
    problem: GemmProblem,
    description: String,
}

impl AbiKernel {
    /// Compiles `src` for the device, loads it and prepares `dims` (opting in to dynamic
    /// shared memory when needed).
    pub fn build(
        gpu: &Gpu,
        src: &KernelSource,
        dims: LaunchDims,
        p: &GemmProblem,
        description: String,
    ) -> Result<AbiKernel, String> {
        let cubin = compile_memo(src, gpu.arch)?;
        let module = gpu.device.load_module(&cubin).map_err(|e| e.to_string())?;
        let function = module.function(&src.entry).map_err(|e| e.to_string())?;
        function
            .ensure_dynamic_smem(dims.dynamic_smem)
            .map_err(|e| e.to_string())?;
        Ok(AbiKernel {
            _module: module,
            function,
            dims,
            problem: *p,
            description,
        })
    }
}

impl PreparedGemm for AbiKernel {
    fn launch(&mut self, ops: &mut GemmOperands<'_>, stream: &Stream) -> Result<(), RuntimeError> {
        let p = &self.problem;
        let mut args = KernelArgs::new();
        args.ptr(ops.a)
            .ptr(ops.b)
            .ptr(ops.c)
            .u64(0) // bias (plain epilogue)
            .u64(0) // residual
            .i32(p.m as i32)
            .i32(p.n as i32)
            .i32(p.k as i32)
            .i32(p.lda as i32)
            .i32(p.ldb as i32)
            .i32(p.ldc as i32)
            .i64(p.stride_a as i64)
            .i64(p.stride_b as i64)
            .i64(p.stride_c as i64)
            .f32(p.epilogue.alpha)
            .f32(p.epilogue.beta);
        let cfg = LaunchConfig {
            grid: self.dims.grid,
            block: self.dims.block,
            shared_mem_bytes: self.dims.dynamic_smem,
        };
        // SAFETY: the argument list is the GEMM ABI's, which every kernel built here follows;
        // the suite allocates A, B and C with `GemmProblem::buffer_elems` elements and keeps
        // them alive until the stream is synchronized.
        unsafe { self.function.launch(stream, &cfg, &mut args) }
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

/// The naive sample kernel (one thread per output). Not a template and not tuned: it exists to
/// exercise the hook end to end until the GEMM templates land. Slow, so limited to problems of
/// at most [`NaiveSample::MAX_FLOPS`].
pub struct NaiveSample;

impl NaiveSample {
    /// Largest problem it is run on (2 * 4096^3).
    pub const MAX_FLOPS: f64 = 2.0 * 4096.0 * 4096.0 * 4096.0;
}

impl GemmCandidate for NaiveSample {
    fn label(&self) -> String {
        "sample-naive".into()
    }
    fn supports(&self, _gpu: &Gpu, p: &GemmProblem) -> Result<(), String> {
        if p.dtype == DType::Tf32 {
            return Err("the naive sample has no TF32 math".into());
        }
        if p.flops() > Self::MAX_FLOPS {
            return Err("too slow for problems above 2*4096^3 FLOP".into());
        }
        if p.layout_a != rtx_synthesis::templates::gemm::Layout::Row
            || p.layout_b != rtx_synthesis::templates::gemm::Layout::Row
        {
            return Err("the naive sample is NN only".into());
        }
        p.validate().map_err(|e| e.to_string())
    }
    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String> {
        let k = SampleKernel::NaiveGemm(p.dtype);
        let dims = SampleKernel::naive_gemm_launch(p);
        Ok(Box::new(AbiKernel::build(
            gpu,
            &k.emit(),
            dims,
            p,
            format!("sample kernel {} (not a template)", k.entry()),
        )?))
    }
}

/// Which config of a template a [`TemplateCandidate`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigChoice {
    /// `Template::default_config` (the "untuned" baseline).
    Default,
}

/// Any `Template<Problem = GemmProblem>` whose kernels take exactly the GEMM ABI parameters.
pub struct TemplateCandidate<T> {
    label: &'static str,
    template: T,
    choice: ConfigChoice,
}

impl<T> TemplateCandidate<T> {
    /// Wraps `template` under `label`.
    pub fn new(label: &'static str, template: T, choice: ConfigChoice) -> Self {
        TemplateCandidate {
            label,
            template,
            choice,
        }
    }
}

impl<T: Template<Problem = GemmProblem> + Clone + 'static> GemmCandidate for TemplateCandidate<T> {
    fn label(&self) -> String {
        self.label.to_string()
    }
    fn supports(&self, gpu: &Gpu, p: &GemmProblem) -> Result<(), String> {
        let ConfigChoice::Default = self.choice;
        let c = self.template.default_config(p, gpu.arch);
        self.template
            .check(p, &c, gpu.arch)
            .map_err(|e| e.to_string())
    }
    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String> {
        let c = self.template.default_config(p, gpu.arch);
        let src = self
            .template
            .emit(p, &c, gpu.arch)
            .map_err(|e| e.to_string())?;
        let dims = self.template.launch(p, &c);
        Ok(Box::new(AbiKernel::build(
            gpu,
            &src,
            dims,
            p,
            format!("{} {c:?}", self.template.name()),
        )?))
    }
}

/// Every candidate, in report order: default-config rows before the tuned rows (a tuned row's
/// `untuned` ratio reuses the same run's default-row figure).
pub fn candidates() -> Vec<Box<dyn GemmCandidate>> {
    use super::template_candidates::{open_db, DefaultCandidate, Mma, Simt, TunedCandidate, Wgmma};
    let db = open_db();
    if let Err(e) = db.as_ref() {
        tracing::warn!(target: "rtx_bench", "{e}");
    }
    vec![
        Box::new(NaiveSample),
        Box::new(DefaultCandidate(Simt)),
        Box::new(DefaultCandidate(Mma)),
        Box::new(DefaultCandidate(Wgmma)),
        Box::new(TunedCandidate::new(Simt, db.clone())),
        Box::new(TunedCandidate::new(Mma, db.clone())),
        Box::new(TunedCandidate::new(Wgmma, db)),
    ]
}
