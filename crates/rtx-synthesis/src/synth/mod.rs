//! The synthesizer: the user API that turns an operation into a tuned, compiled, loaded kernel
//! for the GPU at hand.
//!
//! ```no_run
//! # use rtx_synthesis::synth::*;
//! # use rtx_synthesis::DType;
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let device = rtx_runtime::Device::open(0)?;
//! let stream = device.new_stream()?;
//! let synth = Synth::new(&device)?;
//! let k = synth.gemm(&GemmSpec::new(4096, 4096, 4096, DType::Bf16))?;
//! let (a, b) = (device.alloc(4096 * 4096 * 2, &stream)?, device.alloc(4096 * 4096 * 2, &stream)?);
//! let mut c = device.alloc(4096 * 4096 * 2, &stream)?;
//! k.launch(&stream, &a, &b, &mut c)?;
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! - [`gemm`](mod@gemm): [`GemmSpec`], family selection, [`GemmKernel`].
//! - [`family`]: the [`GemmFamily`] trait every GEMM template implements; [`CappedSpace`].
//! - [`gpu_backend`]: [`GpuBackend`], what the tuner's GPU backends share (lazy context,
//!   watchdog, timing loop, compiling through the kernel cache).
//! - [`backend`]: [`GemmGpuBackend`], the GEMM families' GPU backend.
//! - [`buffers`]: [`GemmBuffers`] and launch-time size checks.
//! - [`tune`](mod@tune): [`TuneRequest`], [`GemmTuneReport`].
//! - [`memory`](mod@memory): tuning-database lookup and tuning of the memory-bound ops
//!   ([`Synth::elementwise_config`], [`Synth::row_config`], [`Synth::tune_elementwise`],
//!   [`Synth::tune_rows`]); [`memory_backend`]: [`MemoryGpuBackend`], [`MemorySpace`].
//! - [`inputs`]: host-side random operands. [`error`]: [`SynthError`].

pub mod backend;
pub mod buffers;
pub mod error;
pub mod family;
pub mod gemm;
pub mod gpu_backend;
pub mod inputs;
pub mod memory;
pub mod memory_backend;
pub mod tune;

pub use backend::GemmGpuBackend;
pub use buffers::{GemmBuffers, GemmLaunchError};
pub use error::{FamilyRejection, SynthError};
pub use family::{CappedSpace, ConfigFilter, GemmFamily};
pub use gemm::{
    check_family, family_candidates, parse_layouts, parse_mnk, select_family, GemmFamilyKind,
    GemmKernel, GemmSpec,
};
pub use gpu_backend::GpuBackend;
pub use memory::MemoryTuneReport;
pub use memory_backend::{MemoryGpuBackend, MemoryOp, MemorySpace};
pub use tune::{tflops, GemmTuneReport, StrategyKind, TuneRequest};

use crate::aot::KernelCache;
use crate::profiler::ProfileStore;
use crate::templates::gemm::wgmma::WgmmaGemm;
use crate::templates::gemm::{GemmProblem, MmaGemm, SimtGemm};
use crate::templates::Template;
use crate::tuner::{
    CostModel, DbEntry, DeviceFacts, DeviceKey, Exhaustive, Guided, LookupPolicy, MeasureProtocol,
    RandomSearch, Strategy, TemplateCostModel, TimingStats, TuneBackend, TuneOptions, Tuner,
    TuningDb, WorkerBackend, WorkerOptions,
};
use crate::Arch;
use gemm::{source_name, Bound};
use rtx_runtime::Device;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use tune::{erase_outcome, FnProgress};

/// Entries kept beside the winner in the tuning database (launch-time fallbacks).
const RUNNERS_UP: usize = 3;

/// Serves kernels for one device: selects a template family, looks the config up in the tuning
/// database, compiles through the kernel cache and loads the result.
pub struct Synth {
    device: Device,
    arch: Arch,
    device_key: DeviceKey,
    cache: Arc<KernelCache>,
    db: Mutex<TuningDb>,
}

impl std::fmt::Debug for Synth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synth")
            .field("device", &self.device_key)
            .field("arch", &self.arch)
            .field("cache", &self.cache.dir())
            .field("db", &self.lock_db().path())
            .finish()
    }
}

impl Synth {
    /// A synthesizer for `device` with the default kernel cache and tuning database
    /// (`$RTX_CACHE_DIR` or the platform cache folder).
    pub fn new(device: &Device) -> Result<Synth, SynthError> {
        Self::with_stores(
            device,
            KernelCache::open_default()?,
            TuningDb::open_default()?,
        )
    }

    /// A synthesizer with the default kernel cache and the tuning database at `db`.
    pub fn with_db_path(device: &Device, db: impl AsRef<Path>) -> Result<Synth, SynthError> {
        Self::with_stores(
            device,
            KernelCache::open_default()?,
            TuningDb::open(db.as_ref())?,
        )
    }

    /// A synthesizer over the given cache and database.
    pub fn with_stores(
        device: &Device,
        cache: KernelCache,
        db: TuningDb,
    ) -> Result<Synth, SynthError> {
        let info = device.info();
        let (major, minor) = info.compute_capability;
        let arch = Arch::for_compute_capability(major, minor)?;
        Ok(Synth {
            device: device.clone(),
            arch,
            device_key: DeviceKey::from_info(info),
            cache: Arc::new(cache),
            db: Mutex::new(db),
        })
    }

    /// The device it serves.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The compile target.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The device's tuning-database key.
    pub fn device_key(&self) -> &DeviceKey {
        &self.device_key
    }

    /// The kernel cache.
    pub fn cache(&self) -> &Arc<KernelCache> {
        &self.cache
    }

    fn lock_db(&self) -> MutexGuard<'_, TuningDb> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads the tuning database from disk (entries other processes stored).
    pub fn reload_db(&self) -> Result<(), SynthError> {
        Ok(self.lock_db().reload()?)
    }

    /// A kernel for `spec` (see [`Synth::gemm_problem`]).
    pub fn gemm(&self, spec: &GemmSpec) -> Result<GemmKernel, SynthError> {
        self.gemm_problem(&spec.problem()?)
    }

    /// A kernel for `p`: picks the family, looks the config up in the tuning database (exact,
    /// nearest tuned shape, or the family's default; logged), compiles it through the cache and
    /// loads it. A config that fails to compile or load falls back to the entry's runners-up,
    /// then to the default.
    pub fn gemm_problem(&self, p: &GemmProblem) -> Result<GemmKernel, SynthError> {
        p.validate()?;
        let info = self.device.info();
        match select_family(p, self.arch, info)? {
            GemmFamilyKind::Wgmma => self.build(WgmmaGemm::for_device(info), p),
            GemmFamilyKind::Mma => self.build(MmaGemm::for_device(info), p),
            GemmFamilyKind::Simt => self.build(SimtGemm::for_device(info), p),
        }
    }

    fn build<F: GemmFamily>(&self, family: F, p: &GemmProblem) -> Result<GemmKernel, SynthError> {
        let found = self.lock_db().lookup(
            &family,
            p,
            self.arch,
            &self.device_key,
            &LookupPolicy::default(),
        )?;
        tracing::info!(
            template = family.name(),
            source = source_name(&found.source),
            config = ?found.config,
            "gemm {}x{}x{} {}: serving a {} config",
            p.m,
            p.n,
            p.k,
            p.dtype,
            source_name(&found.source)
        );
        let default = family.default_config(p, self.arch);
        let mut tries = vec![(found.config.clone(), found.source.clone())];
        for c in found.fallbacks {
            tries.push((c, found.source.clone()));
        }
        if !tries.iter().any(|(c, _)| *c == default) {
            tries.push((default, crate::tuner::LookupSource::Default));
        }
        let mut last = None;
        for (config, source) in tries {
            match self.load(&family, p, &config) {
                Ok(function) => {
                    let json = serde_json::to_value(&config).unwrap_or(serde_json::Value::Null);
                    return Ok(GemmKernel {
                        problem: *p,
                        template: family.name(),
                        source,
                        config: json,
                        function,
                        launcher: Box::new(Bound {
                            family: family.clone(),
                            config,
                        }),
                    });
                }
                Err(e) => {
                    tracing::warn!(template = family.name(), config = ?config, error = %e, "config unusable; trying the next");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| SynthError::NoTemplate {
            problem: Box::new(*p),
            arch: self.arch,
            reasons: Vec::new(),
        }))
    }

    fn load<F: GemmFamily>(
        &self,
        family: &F,
        p: &GemmProblem,
        config: &F::Config,
    ) -> Result<rtx_runtime::Function, SynthError> {
        let src = family.emit(p, config, self.arch)?;
        let k = self.cache.get_or_compile(&src, self.arch)?;
        let module = self.device.load_module(&k.cubin)?;
        Ok(module.function(&src.entry)?)
    }

    /// Tunes `spec` on this device (see [`TuneRequest`]) and, when `req.store`, stores the
    /// winner in the tuning database so later [`Synth::gemm`] calls serve it.
    pub fn tune_gemm(
        &self,
        spec: &GemmSpec,
        req: &TuneRequest<'_>,
    ) -> Result<GemmTuneReport, SynthError> {
        let p = spec.problem()?;
        let info = self.device.info();
        let served = select_family(&p, self.arch, info)?;
        let kind = match req.family {
            Some(forced) => {
                check_family(&p, self.arch, info, forced)?;
                forced
            }
            None => served,
        };
        // A family `gemm` does not serve for this problem is tuned for comparison only: its
        // winner is never stored (the database would never serve it).
        let store = req.store && kind == served;
        match kind {
            GemmFamilyKind::Wgmma => self.tune_family(WgmmaGemm::for_device(info), &p, req, store),
            GemmFamilyKind::Mma => self.tune_family(MmaGemm::for_device(info), &p, req, store),
            GemmFamilyKind::Simt => self.tune_family(SimtGemm::for_device(info), &p, req, store),
        }
    }

    fn tune_family<F: GemmFamily>(
        &self,
        family: F,
        p: &GemmProblem,
        req: &TuneRequest<'_>,
        store: bool,
    ) -> Result<GemmTuneReport, SynthError> {
        if let Some(f) = &req.filter {
            let unknown = f.unknown_fields(&family.default_config(p, self.arch));
            if !unknown.is_empty() {
                return Err(SynthError::BadRequest(format!(
                    "config filter names fields the {} template's configs do not have: {}",
                    family.name(),
                    unknown.join(", ")
                )));
            }
        }
        let _gpu = crate::tuner::gpu_lock::acquire_run(&self.device)?;
        let capped = CappedSpace::new(family, req.space_limit).with_filter(req.filter.clone());
        match &req.isolate {
            Some(cmd) => {
                let backend =
                    WorkerBackend::<CappedSpace<F>>::new(cmd.clone(), WorkerOptions::default());
                let mut report = self.run_tuner(&capped, p, req, &backend, store)?;
                report.worker = Some(backend.stats());
                Ok(report)
            }
            None => {
                let backend = GemmGpuBackend::<CappedSpace<F>>::with_device(
                    self.device.clone(),
                    self.cache.clone(),
                );
                self.run_tuner(&capped, p, req, &backend, store)
            }
        }
    }

    fn run_tuner<F: GemmFamily, B: TuneBackend<CappedSpace<F>>>(
        &self,
        t: &CappedSpace<F>,
        p: &GemmProblem,
        req: &TuneRequest<'_>,
        backend: &B,
        store: bool,
    ) -> Result<GemmTuneReport, SynthError> {
        let mut strategy: Box<dyn Strategy> = match req.strategy {
            StrategyKind::Guided => Box::new(Guided::new(req.seed, req.budget)),
            StrategyKind::Exhaustive => Box::new(Exhaustive::new()),
            StrategyKind::Random => Box::new(RandomSearch::new(req.seed, req.budget)),
        };
        let tuner = Tuner::new(TuneOptions {
            time_budget: req.time_budget,
            seed: req.seed,
            compile_batch: req.resolved_compile_batch(),
            cost_model: self.cost_model(t, p),
            ..TuneOptions::default()
        });
        let mut progress = FnProgress(req.progress);
        let outcome = tuner.tune(
            t,
            p,
            self.arch,
            backend,
            strategy.as_mut(),
            &req.protocol,
            &mut progress,
        )?;
        let entry = DbEntry::from_outcome(t, p, self.arch, &self.device_key, &outcome, RUNNERS_UP)?;
        if store {
            self.lock_db().insert(entry.clone())?;
            tracing::info!(
                template = t.name(),
                "stored the tuned config for {}x{}x{} {}",
                p.m,
                p.n,
                p.k,
                p.dtype
            );
        }
        Ok(GemmTuneReport {
            problem: *p,
            template: t.name(),
            template_version: t.version(),
            outcome: erase_outcome(outcome),
            entry,
            stored: store,
            worker: None,
            default_config: serde_json::to_value(t.default_config(p, self.arch))
                .unwrap_or(serde_json::Value::Null),
        })
    }

    /// The analytic cost model of `t` for `p` on this device (datasheet figures, replaced by the
    /// saved profiler ceilings when a profile of this device is on disk); `None` when the device
    /// is not in the datasheet database or the template has no model.
    fn cost_model<F: GemmFamily>(
        &self,
        t: &CappedSpace<F>,
        p: &GemmProblem,
    ) -> Option<Arc<dyn CostModel>> {
        let info = self.device.info();
        let mut facts = DeviceFacts::for_device(info)?;
        let saved =
            ProfileStore::open_default().and_then(|s| s.load(&crate::profiler::profile_key(info)));
        match saved {
            Ok(Some(profile)) => facts = facts.with_profile(&profile),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "no saved device profile for the cost model"),
        }
        let model = TemplateCostModel::new(t.clone(), *p, facts);
        let default = serde_json::to_value(t.default_config(p, self.arch)).ok()?;
        if model.estimate(&default).is_none() {
            tracing::debug!(
                template = t.name(),
                "template has no cost model; guided search runs unseeded"
            );
            return None;
        }
        Some(Arc::new(model))
    }

    /// Times cuBLAS on `spec` under `protocol` (same inputs, flush and event timing as the
    /// tuner's candidates).
    pub fn time_cublas(
        &self,
        spec: &GemmSpec,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, SynthError> {
        let p = spec.problem()?;
        let backend =
            GemmGpuBackend::<WgmmaGemm>::with_device(self.device.clone(), self.cache.clone());
        Ok(backend.time_cublas(&p, protocol)?)
    }
}
