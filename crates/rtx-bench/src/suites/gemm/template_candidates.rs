//! The three GEMM templates (SIMT, mma.sync, wgmma) as benchmark candidates, at their default
//! config (`rtx-<t>-default`) or at the config the tuning database serves
//! (`rtx-tuned-<t>` for an exact entry, `rtx-nearest-<t>` for a borrowed nearest shape; when
//! the database has nothing near the problem the row says so instead of re-timing the default).
//!
//! SIMT and mma kernels launch through `templates::gemm::launch_gemm` (mma with its split-K
//! workspace when the config splits K); wgmma through `WgmmaGemm::enqueue` (TMA descriptors).

use super::candidate::{compile_memo, GemmCandidate, GemmOperands, PreparedGemm};
use crate::gpu::Gpu;
use rtx_runtime::{DeviceBuffer, Function, Module, RuntimeError, Stream};
use rtx_synthesis::templates::gemm::wgmma::{WgmmaBuffers, WgmmaConfig, WgmmaGemm};
use rtx_synthesis::templates::gemm::{
    alloc_split_k_workspace, launch_gemm, ExtraArg, GemmBuffers, GemmLaunchError, GemmProblem,
    MmaConfig, MmaGemm, SimtConfig, SimtGemm,
};
use rtx_synthesis::templates::{LaunchDims, Template};
use rtx_synthesis::tuner::{DeviceKey, LookupPolicy, LookupSource, TuningDb};
use rtx_synthesis::DType;
use std::sync::Arc;

/// A GEMM template as the suite sees it: which dtypes it runs, and how to launch a config.
pub trait GemmTemplateKind {
    /// The template.
    type T: Template<Problem = GemmProblem>;
    /// Short name used in labels (`simt`, `mma`, `wgmma`).
    fn short(&self) -> &'static str;
    /// The template instance for this device.
    fn template(&self, gpu: &Gpu) -> Self::T;
    /// Input dtypes whose rows it runs.
    fn dtypes(&self) -> &'static [DType];
    /// Compiles, loads and wraps `config` for `p`.
    fn prepare(
        &self,
        gpu: &Gpu,
        p: &GemmProblem,
        config: <Self::T as Template>::Config,
        what: String,
    ) -> Result<Box<dyn PreparedGemm>, String>;
}

fn load(
    gpu: &Gpu,
    src: &rtx_synthesis::templates::KernelSource,
) -> Result<(Module, Function), String> {
    let cubin = compile_memo(src, gpu.arch)?;
    let module = gpu.device.load_module(&cubin).map_err(|e| e.to_string())?;
    let function = module.function(&src.entry).map_err(|e| e.to_string())?;
    Ok((module, function))
}

/// A GEMM launch error as a runtime error (keeping the runtime's own, so sticky errors stay
/// sticky).
fn runtime(e: GemmLaunchError) -> RuntimeError {
    match e {
        GemmLaunchError::Runtime(r) => r,
        other => RuntimeError::InvalidLaunch {
            reason: other.to_string(),
        },
    }
}

/// A SIMT or mma kernel launched through `launch_gemm`.
struct PreparedAbi {
    _module: Module,
    function: Function,
    dims: LaunchDims,
    problem: GemmProblem,
    workspace: Option<DeviceBuffer>,
    what: String,
}

impl PreparedGemm for PreparedAbi {
    fn launch(&mut self, ops: &mut GemmOperands<'_>, stream: &Stream) -> Result<(), RuntimeError> {
        let mut bufs = GemmBuffers {
            a: ops.a,
            b: ops.b,
            c: &mut *ops.c,
            bias: None,
            residual: None,
        };
        let extra: Vec<ExtraArg<'_>> = self.workspace.iter().map(ExtraArg::Buffer).collect();
        launch_gemm(
            &self.function,
            self.dims,
            &self.problem,
            &mut bufs,
            &extra,
            stream,
        )
        .map_err(runtime)
    }

    fn describe(&self) -> String {
        self.what.clone()
    }
}

/// The SIMT fp32 template.
#[derive(Debug, Clone, Copy)]
pub struct Simt;

impl GemmTemplateKind for Simt {
    type T = SimtGemm;
    fn short(&self) -> &'static str {
        "simt"
    }
    fn template(&self, _gpu: &Gpu) -> SimtGemm {
        SimtGemm
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::F32]
    }
    fn prepare(
        &self,
        gpu: &Gpu,
        p: &GemmProblem,
        config: SimtConfig,
        what: String,
    ) -> Result<Box<dyn PreparedGemm>, String> {
        let t = SimtGemm;
        let src = t.emit(p, &config, gpu.arch).map_err(|e| e.to_string())?;
        let (module, function) = load(gpu, &src)?;
        Ok(Box::new(PreparedAbi {
            _module: module,
            function,
            dims: t.launch(p, &config),
            problem: *p,
            workspace: None,
            what: format!("{what} {config:?}"),
        }))
    }
}

/// The mma.sync tensor-core template.
#[derive(Debug, Clone, Copy)]
pub struct Mma;

impl GemmTemplateKind for Mma {
    type T = MmaGemm;
    fn short(&self) -> &'static str {
        "mma"
    }
    fn template(&self, gpu: &Gpu) -> MmaGemm {
        MmaGemm::new(gpu.device.info().sm_count)
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::Tf32, DType::F16, DType::Bf16]
    }
    fn prepare(
        &self,
        gpu: &Gpu,
        p: &GemmProblem,
        config: MmaConfig,
        what: String,
    ) -> Result<Box<dyn PreparedGemm>, String> {
        let t = self.template(gpu);
        let src = t.emit(p, &config, gpu.arch).map_err(|e| e.to_string())?;
        let (module, function) = load(gpu, &src)?;
        let workspace = alloc_split_k_workspace(&gpu.device, &gpu.stream, p, &config)
            .map_err(|e| format!("split-K workspace: {e}"))?;
        Ok(Box::new(PreparedAbi {
            _module: module,
            function,
            dims: t.launch(p, &config),
            problem: *p,
            workspace,
            what: format!("{what} {config:?}"),
        }))
    }
}

/// A wgmma kernel launched through `WgmmaGemm::enqueue`.
struct PreparedWgmma {
    _module: Module,
    function: Function,
    template: WgmmaGemm,
    problem: GemmProblem,
    config: WgmmaConfig,
    workspace: Option<DeviceBuffer>,
    /// tf32 staging buffer (M/N-major tf32 operands are transposed into it by the kernel's
    /// pre-pass launch, which `enqueue` issues before the GEMM, so its time is measured too).
    staging: Option<DeviceBuffer>,
    what: String,
}

impl PreparedGemm for PreparedWgmma {
    fn launch(&mut self, ops: &mut GemmOperands<'_>, stream: &Stream) -> Result<(), RuntimeError> {
        let mut bufs = WgmmaBuffers {
            a: ops.a,
            b: ops.b,
            c: &mut *ops.c,
            bias: None,
            residual: None,
            workspace: self.workspace.as_mut(),
            staging: self.staging.as_mut(),
        };
        self.template
            .enqueue(
                &self.function,
                &self.problem,
                &self.config,
                &mut bufs,
                stream,
            )
            .map_err(|e| match e {
                rtx_synthesis::templates::gemm::wgmma::WgmmaLaunchError::Runtime(r) => r,
                other => RuntimeError::InvalidLaunch {
                    reason: format!("wgmma enqueue: {other}"),
                },
            })
    }

    fn describe(&self) -> String {
        format!("{} {}", self.what, self.config.tag())
    }
}

/// The Hopper wgmma template (sm_90a).
#[derive(Debug, Clone, Copy)]
pub struct Wgmma;

impl GemmTemplateKind for Wgmma {
    type T = WgmmaGemm;
    fn short(&self) -> &'static str {
        "wgmma"
    }
    fn template(&self, gpu: &Gpu) -> WgmmaGemm {
        WgmmaGemm::new(gpu.device.info().sm_count)
    }
    fn dtypes(&self) -> &'static [DType] {
        &[DType::Tf32, DType::F16, DType::Bf16]
    }
    fn prepare(
        &self,
        gpu: &Gpu,
        p: &GemmProblem,
        config: WgmmaConfig,
        what: String,
    ) -> Result<Box<dyn PreparedGemm>, String> {
        let t = self.template(gpu);
        let src = t.emit(p, &config, gpu.arch).map_err(|e| e.to_string())?;
        let (module, function) = load(gpu, &src)?;
        let ws_bytes = config.workspace_bytes(p.m, p.n, p.batch);
        let workspace = if ws_bytes > 0 {
            let mut w = gpu
                .device
                .alloc(ws_bytes as usize, &gpu.stream)
                .map_err(|e| format!("split-K workspace: {e}"))?;
            w.fill_u8(0, &gpu.stream)
                .map_err(|e| format!("split-K workspace: {e}"))?;
            Some(w)
        } else {
            None
        };
        let st_bytes = WgmmaGemm::staging_bytes(p, &config);
        let staging = if st_bytes > 0 {
            Some(
                gpu.device
                    .alloc(st_bytes as usize, &gpu.stream)
                    .map_err(|e| format!("tf32 staging buffer: {e}"))?,
            )
        } else {
            None
        };
        Ok(Box::new(PreparedWgmma {
            _module: module,
            function,
            template: t,
            problem: *p,
            config,
            workspace,
            staging,
            what,
        }))
    }
}

fn supported<K: GemmTemplateKind>(
    k: &K,
    gpu: &Gpu,
    p: &GemmProblem,
    c: &<K::T as Template>::Config,
) -> Result<(), String> {
    if !k.dtypes().contains(&p.dtype) {
        return Err(format!("rtx-{} has no {} rows", k.short(), p.dtype));
    }
    k.template(gpu)
        .check(p, c, gpu.arch)
        .map_err(|e| e.to_string())
}

/// A template at its default config: `rtx-<t>-default`.
#[derive(Debug, Clone, Copy)]
pub struct DefaultCandidate<K>(pub K);

impl<K: GemmTemplateKind + Clone + 'static> GemmCandidate for DefaultCandidate<K> {
    fn label(&self) -> String {
        format!("rtx-{}-default", self.0.short())
    }
    fn supports(&self, gpu: &Gpu, p: &GemmProblem) -> Result<(), String> {
        let c = self.0.template(gpu).default_config(p, gpu.arch);
        supported(&self.0, gpu, p, &c)
    }
    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String> {
        let c = self.0.template(gpu).default_config(p, gpu.arch);
        let what = format!("{} default config", self.0.template(gpu).name());
        self.0.prepare(gpu, p, c, what)
    }
}

/// The tuning database as the tuned candidates share it (or why it could not be opened).
pub type SharedDb = Arc<Result<TuningDb, String>>;

/// Opens the default tuning database (`RTX_CACHE_DIR/tuning.db` or the user cache folder).
pub fn open_db() -> SharedDb {
    let path = TuningDb::default_path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|e| format!("<{e}>"));
    Arc::new(
        TuningDb::open_default().map_err(|e| format!("tuning database {path} not usable: {e}")),
    )
}

/// A template at the config the tuning database serves for each problem.
pub struct TunedCandidate<K> {
    kind: K,
    db: SharedDb,
}

impl<K> TunedCandidate<K> {
    /// `kind` served from `db`.
    pub fn new(kind: K, db: SharedDb) -> Self {
        TunedCandidate { kind, db }
    }
}

/// Label of a tuned row by lookup source.
pub fn tuned_label(short: &str, source: &LookupSource) -> String {
    match source {
        LookupSource::Exact => format!("rtx-tuned-{short}"),
        LookupSource::NearestBucket { .. } => format!("rtx-nearest-{short}"),
        LookupSource::Default => format!("rtx-dbdefault-{short}"),
    }
}

/// The source in words (case note).
pub fn source_words(source: &LookupSource) -> String {
    match source {
        LookupSource::Exact => "tuning db: exact entry".into(),
        LookupSource::NearestBucket { from, distance } => {
            format!("tuning db: nearest tuned shape {from:?} (log2 distance {distance:.2})")
        }
        LookupSource::Default => "tuning db: no entry, template default".into(),
    }
}

impl<K: GemmTemplateKind + Clone + 'static> TunedCandidate<K> {
    fn lookup(
        &self,
        gpu: &Gpu,
        p: &GemmProblem,
    ) -> Result<(<K::T as Template>::Config, LookupSource), String> {
        let db = self.db.as_ref().as_ref().map_err(|e| e.clone())?;
        let t = self.kind.template(gpu);
        let dev = DeviceKey::from_info(gpu.device.info());
        let l = db
            .lookup(&t, p, gpu.arch, &dev, &LookupPolicy::default())
            .map_err(|e| format!("tuning db lookup: {e}"))?;
        Ok((l.config, l.source))
    }
}

impl<K: GemmTemplateKind + Clone + 'static> GemmCandidate for TunedCandidate<K> {
    fn label(&self) -> String {
        format!("rtx-tuned-{}", self.kind.short())
    }
    fn label_for(&self, gpu: &Gpu, p: &GemmProblem) -> String {
        match self.lookup(gpu, p) {
            Ok((_, s)) => tuned_label(self.kind.short(), &s),
            Err(_) => self.label(),
        }
    }
    fn supports(&self, gpu: &Gpu, p: &GemmProblem) -> Result<(), String> {
        let c = self.kind.template(gpu).default_config(p, gpu.arch);
        // Rows exist wherever the default row exists; the lookup decides what they say.
        supported(&self.kind, gpu, p, &c)
    }
    fn not_measured(&self, gpu: &Gpu, p: &GemmProblem) -> Option<String> {
        match self.lookup(gpu, p) {
            Err(e) => Some(e),
            Ok((_, LookupSource::Default)) => Some(format!(
                "the tuning database has no {} entry near this problem on this device; the \
                 template's default config is the rtx-{}-default row",
                self.kind.short(),
                self.kind.short()
            )),
            Ok(_) => None,
        }
    }
    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String> {
        let (c, source) = self.lookup(gpu, p)?;
        self.kind
            .template(gpu)
            .check(p, &c, gpu.arch)
            .map_err(|e| format!("served config fails check: {e}"))?;
        let what = format!(
            "{} {}",
            self.kind.template(gpu).name(),
            source_words(&source)
        );
        self.kind.prepare(gpu, p, c, what)
    }
    fn untuned(&self) -> Option<Box<dyn GemmCandidate>> {
        Some(Box::new(DefaultCandidate(self.kind.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_labels_name_the_source() {
        assert_eq!(tuned_label("mma", &LookupSource::Exact), "rtx-tuned-mma");
        assert_eq!(
            tuned_label(
                "wgmma",
                &LookupSource::NearestBucket {
                    from: vec![1, 2],
                    distance: 1.0
                }
            ),
            "rtx-nearest-wgmma"
        );
        assert_eq!(
            tuned_label("simt", &LookupSource::Default),
            "rtx-dbdefault-simt"
        );
        assert!(source_words(&LookupSource::Exact).contains("exact"));
    }

    #[test]
    fn kinds_cover_their_dtypes() {
        assert_eq!(Simt.dtypes(), &[DType::F32]);
        assert!(Mma.dtypes().contains(&DType::Tf32) && Mma.dtypes().contains(&DType::Bf16));
        assert!(!Wgmma.dtypes().contains(&DType::F32));
        assert!(
            Wgmma.dtypes().contains(&DType::Tf32),
            "wgmma serves tf32 on Hopper"
        );
        let labels: Vec<String> = [
            DefaultCandidate(Simt).label(),
            DefaultCandidate(Mma).label(),
            DefaultCandidate(Wgmma).label(),
        ]
        .into();
        assert_eq!(
            labels,
            ["rtx-simt-default", "rtx-mma-default", "rtx-wgmma-default"]
        );
    }
}
