//! [`GpuBackend`]: what the tuner's GPU backends share.
//!
//! - Where the device comes from (`DeviceSource`: an opened device, or an ordinal opened on
//!   first GPU use, so a compile-only worker never creates a context).
//! - One CUDA context's state (`GpuContext`), created lazily: the stream, the event a sync
//!   waits on, the timing event pairs, the L2 flush buffer, the loaded kernels, and what the
//!   operation family keeps beside them (`X`: its timing inputs, a cuBLAS handle).
//! - The watchdog every wait runs under (`wait_event`), the protocol timing loop
//!   (`time_protocol`), compiling through the [`KernelCache`] (`compile_config`,
//!   `compile_configs`) and loading a kernel once per context (`load_function`).
//!
//! [`super::GemmGpuBackend`] is `GpuBackend<GemmState, F>` and [`super::MemoryGpuBackend`] is
//! `GpuBackend<MemoryState, T>`; each implements `verify` and `time` beside its state.

use super::inputs::HostMatrix;
use crate::aot::{CacheError, CachedKernel, KernelCache};
use crate::templates::Template;
use crate::tuner::{
    run_protocol_batched, CandidateError, CompileSink, MeasureProtocol, ResourceUsage, TimingStats,
    TuneTask,
};
use rtx_runtime::{Device, DeviceBuffer, Event, EventPairs, Function, RuntimeError, Stream};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The default watchdog: how long one launch may run before it counts as hung.
const DEFAULT_WATCHDOG: Duration = Duration::from_secs(20);

/// Where a GPU backend gets its device from.
pub(crate) enum DeviceSource {
    /// An already opened device.
    Open(Device),
    /// Open this ordinal on first GPU use.
    Ordinal(usize),
}

impl DeviceSource {
    /// The device: the opened one, or `Device::open` of the ordinal (a fault when it fails).
    pub(crate) fn open(&self) -> Result<Device, CandidateError> {
        match self {
            DeviceSource::Open(d) => Ok(d.clone()),
            DeviceSource::Ordinal(o) => Device::open(*o)
                .map_err(|e| CandidateError::Fault(format!("opening CUDA device {o}: {e}"))),
        }
    }
}

/// One CUDA context's state, created on first GPU use; `op` is what the operation family keeps
/// beside it.
pub(crate) struct GpuContext<X> {
    pub(super) device: Device,
    pub(super) stream: Stream,
    /// Recorded and waited on by [`GpuContext::sync`].
    end: Event,
    /// One start/end pair per sample of a timed batch.
    pairs: EventPairs,
    flush: Option<DeviceBuffer>,
    /// Loaded kernels by source fingerprint.
    functions: HashMap<String, Arc<Function>>,
    pub(super) op: X,
}

impl<X: Default> GpuContext<X> {
    fn create(source: &DeviceSource) -> Result<Self, CandidateError> {
        let device = source.open()?;
        let fail = |op: &str, e: RuntimeError| CandidateError::Fault(format!("{op}: {e}"));
        let stream = device
            .new_stream()
            .map_err(|e| fail("creating a stream", e))?;
        let end = Event::new(&device).map_err(|e| fail("creating an event", e))?;
        Ok(GpuContext {
            device,
            stream,
            end,
            pairs: EventPairs::new(),
            flush: None,
            functions: HashMap::new(),
            op: X::default(),
        })
    }
}

impl<X> GpuContext<X> {
    /// A device buffer of `bytes` (at least 16) on the context's stream.
    pub(super) fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CandidateError> {
        self.device
            .alloc(bytes.max(16), &self.stream)
            .map_err(|e| runtime_failure("alloc", e))
    }

    /// A device copy of `h`.
    pub(super) fn upload(&self, h: &HostMatrix) -> Result<DeviceBuffer, CandidateError> {
        let mut buf = self.alloc(h.bytes().len())?;
        buf.upload(h.bytes(), &self.stream)
            .map_err(|e| runtime_failure("upload", e))?;
        Ok(buf)
    }

    /// Records `end` on the stream and waits for it under the watchdog `limit`.
    pub(super) fn sync(&self, limit: Duration, what: &str) -> Result<(), CandidateError> {
        self.end
            .record(&self.stream)
            .map_err(|e| runtime_failure(what, e))?;
        wait_event(&self.end, limit, what)
    }

    /// What `time_protocol` needs under `protocol` (the L2 flush buffer allocated when it
    /// flushes), and the family state beside it.
    pub(super) fn timing_target(
        &mut self,
        protocol: &MeasureProtocol,
    ) -> Result<(TimingTarget<'_>, &mut X), CandidateError> {
        if protocol.flush_l2
            && self
                .flush
                .as_ref()
                .is_none_or(|f| f.len() < protocol.flush_bytes)
        {
            self.flush = None;
            self.flush = Some(self.alloc(protocol.flush_bytes)?);
        }
        let GpuContext {
            device,
            stream,
            pairs,
            flush,
            op,
            ..
        } = self;
        Ok((
            TimingTarget {
                pairs,
                device,
                stream,
                flush,
            },
            op,
        ))
    }
}

/// A GPU tuning backend: kernels compile through a [`KernelCache`] (no GPU needed); `verify`
/// and `time` run on one lazily created context of the device, under a watchdog. `X` is the
/// operation family's per-context state, `T` the template it tunes.
pub struct GpuBackend<X, T> {
    source: DeviceSource,
    cache: Arc<KernelCache>,
    gpu: Mutex<Option<GpuContext<X>>>,
    jobs: Option<usize>,
    watchdog: Duration,
    _template: PhantomData<fn() -> T>,
}

impl<X: Default, T: Template> GpuBackend<X, T> {
    /// A backend on an opened device, compiling through `cache`.
    pub fn with_device(device: Device, cache: Arc<KernelCache>) -> Self {
        Self::from_source(DeviceSource::Open(device), cache)
    }

    /// A backend that opens device `ordinal` on first GPU use (a compile-only worker never does).
    pub fn new(ordinal: usize, cache: Arc<KernelCache>) -> Self {
        Self::from_source(DeviceSource::Ordinal(ordinal), cache)
    }

    fn from_source(source: DeviceSource, cache: Arc<KernelCache>) -> Self {
        GpuBackend {
            source,
            cache,
            gpu: Mutex::new(None),
            jobs: None,
            watchdog: DEFAULT_WATCHDOG,
            _template: PhantomData,
        }
    }

    /// Sets how long one launch may run before it counts as hung (default 20 s).
    pub fn with_watchdog(mut self, limit: Duration) -> Self {
        self.watchdog = limit;
        self
    }

    /// Sets how many NVRTC compiles run at once (default [`crate::aot::default_jobs`]).
    pub fn with_compile_jobs(mut self, jobs: usize) -> Self {
        self.jobs = Some(jobs.max(1));
        self
    }

    /// The kernel cache it compiles through.
    pub fn cache(&self) -> &Arc<KernelCache> {
        &self.cache
    }

    /// How long one launch may run before it counts as hung.
    pub(super) fn watchdog(&self) -> Duration {
        self.watchdog
    }

    /// How many NVRTC compiles run at once.
    pub(super) fn compile_jobs(&self) -> usize {
        self.jobs.unwrap_or_else(crate::aot::default_jobs)
    }

    /// Runs `f` on the context, creating it on first use.
    pub(super) fn with_gpu<R>(
        &self,
        f: impl FnOnce(&mut GpuContext<X>) -> Result<R, CandidateError>,
    ) -> Result<R, CandidateError> {
        let mut guard = lock(&self.gpu);
        if guard.is_none() {
            *guard = Some(GpuContext::create(&self.source)?);
        }
        match guard.as_mut() {
            Some(g) => f(g),
            None => Err(CandidateError::Fault("no GPU state".into())),
        }
    }

    /// The loaded kernel of `config` (compiled through the cache, loaded once per context).
    pub(super) fn function(
        &self,
        g: &mut GpuContext<X>,
        task: &TuneTask<'_, T>,
        config: &T::Config,
    ) -> Result<Arc<Function>, CandidateError> {
        load_function(&self.cache, &g.device, &mut g.functions, task, config)
    }
}

pub(crate) fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A runtime error as a candidate failure: sticky ones are faults.
pub fn runtime_failure(op: &str, e: RuntimeError) -> CandidateError {
    if e.is_sticky() {
        CandidateError::Fault(format!("{op}: {e}"))
    } else {
        CandidateError::Unmeasurable(format!("{op}: {e}"))
    }
}

fn compile_failure(e: CacheError) -> CandidateError {
    CandidateError::Compile(e.to_string())
}

/// Waits for `ev` (already recorded) for at most `limit`.
pub(crate) fn wait_event(ev: &Event, limit: Duration, what: &str) -> Result<(), CandidateError> {
    let t0 = Instant::now();
    loop {
        match ev.query() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => return Err(runtime_failure(what, e)),
        }
        let waited = t0.elapsed();
        if waited > limit {
            return Err(CandidateError::Timeout {
                after_ms: limit.as_millis() as u64,
            });
        }
        if waited < Duration::from_millis(2) {
            std::hint::spin_loop();
        } else if waited < Duration::from_millis(50) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// What `time_protocol` times on: the context's event pairs, device and stream, and the L2
/// flush buffer (allocated by the caller when the protocol flushes).
pub(crate) struct TimingTarget<'a> {
    pub pairs: &'a mut EventPairs,
    pub device: &'a Device,
    pub stream: &'a Stream,
    pub flush: &'a mut Option<DeviceBuffer>,
}

/// Runs `protocol` ([`run_protocol_batched`]) over `timed(rep)`, which enqueues one repetition:
/// each repetition of a batch gets the untimed L2 flush (when the protocol asks for one), then
/// `timed(rep)` between the start and end event of its own pair; one wait on the batch's last
/// end event (the watchdog `limit` counts per repetition) reads the times.
pub(crate) fn time_protocol(
    protocol: &MeasureProtocol,
    target: TimingTarget<'_>,
    limit: Duration,
    what: &str,
    mut timed: impl FnMut(u32) -> Result<(), CandidateError>,
) -> Result<TimingStats, CandidateError> {
    let TimingTarget {
        pairs,
        device,
        stream,
        flush,
    } = target;
    run_protocol_batched(protocol, |reps: Range<u32>| {
        let n = reps.len();
        pairs
            .ensure(device, n)
            .map_err(|e| runtime_failure("creating events", e))?;
        for (slot, rep) in reps.enumerate() {
            if let (true, Some(fl)) = (protocol.flush_l2, flush.as_mut()) {
                fl.fill_u8(rep as u8, stream)
                    .map_err(|e| runtime_failure("L2 flush", e))?;
            }
            let (start, end) = pairs
                .pair(slot)
                .ok_or_else(|| CandidateError::Unmeasurable(format!("no event pair {slot}")))?;
            start
                .record(stream)
                .map_err(|e| runtime_failure("event", e))?;
            timed(rep)?;
            end.record(stream)
                .map_err(|e| runtime_failure("event", e))?;
        }
        if let Some((_, last)) = n.checked_sub(1).and_then(|i| pairs.pair(i)) {
            wait_event(last, limit.saturating_mul(n as u32), what)?;
        }
        pairs
            .elapsed_us(n)
            .map_err(|e| runtime_failure("event timing", e))
    })
}

/// Resource use of `entry` in a compiled kernel (zeros when ptxas reported none).
fn resource_usage(entry: &str, k: &CachedKernel) -> ResourceUsage {
    k.resources_for(entry)
        .map(ResourceUsage::from)
        .unwrap_or_default()
}

/// [`crate::tuner::TuneBackend::compile`] of the GPU backends: emit, compile through `cache`,
/// report resources.
pub(crate) fn compile_config<T: Template>(
    cache: &KernelCache,
    task: &TuneTask<'_, T>,
    config: &T::Config,
) -> Result<ResourceUsage, CandidateError> {
    let src = task.template.emit(task.problem, config, task.arch)?;
    let k = cache
        .get_or_compile(&src, task.arch)
        .map_err(compile_failure)?;
    Ok(resource_usage(&src.entry, &k))
}

/// [`crate::tuner::TuneBackend::compile_many`] of the GPU backends: every config emitted (a
/// refused one is reported at once), then compiled through `cache` on `jobs` NVRTC instances; a
/// panicking compiler fails the batch's configs instead of the tuning run.
pub(crate) fn compile_configs<T: Template>(
    cache: &KernelCache,
    jobs: usize,
    task: &TuneTask<'_, T>,
    configs: &[T::Config],
    sink: &CompileSink<'_>,
) {
    let mut items = Vec::with_capacity(configs.len());
    let mut index = Vec::with_capacity(configs.len());
    for (i, c) in configs.iter().enumerate() {
        match task.template.emit(task.problem, c, task.arch) {
            Ok(src) => {
                items.push((src, task.arch));
                index.push(i);
            }
            Err(v) => sink.emit(i, Err(v.into())),
        }
    }
    if items.is_empty() || sink.is_cancelled() {
        return;
    }
    let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cache.get_or_compile_many(&items, Some(jobs))
    }));
    match results {
        Ok(results) => {
            for ((i, (src, _)), r) in index.iter().zip(&items).zip(results) {
                sink.emit(
                    *i,
                    r.map(|k| resource_usage(&src.entry, &k))
                        .map_err(compile_failure),
                );
            }
        }
        Err(_) => {
            for i in index {
                sink.emit(
                    i,
                    Err(CandidateError::Compile("the compiler panicked".into())),
                );
            }
        }
    }
}

/// The loaded kernel of `config` on `device` (compiled through `cache`, loaded once per context:
/// `functions` holds the context's kernels by source fingerprint).
pub(crate) fn load_function<T: Template>(
    cache: &KernelCache,
    device: &Device,
    functions: &mut HashMap<String, Arc<Function>>,
    task: &TuneTask<'_, T>,
    config: &T::Config,
) -> Result<Arc<Function>, CandidateError> {
    let src = task.template.emit(task.problem, config, task.arch)?;
    let key = src.fingerprint().to_hex().to_string();
    if let Some(f) = functions.get(&key) {
        return Ok(f.clone());
    }
    let k = cache
        .get_or_compile(&src, task.arch)
        .map_err(compile_failure)?;
    let module = device
        .load_module(&k.cubin)
        .map_err(|e| runtime_failure("loading the module", e))?;
    let f = Arc::new(
        module
            .function(&src.entry)
            .map_err(|e| runtime_failure("finding the kernel", e))?,
    );
    functions.insert(key, f.clone());
    Ok(f)
}
