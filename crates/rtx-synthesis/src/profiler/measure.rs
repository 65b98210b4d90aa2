//! Measuring a GPU's real ceilings with the [`micro`](super::micro) kernels, and the entry point
//! that keeps the result as a saved [`DeviceProfile`].
//!
//! [`measure_report`] compiles the [`MicroSuite`] for the device (through the [`KernelCache`]),
//! checks on the device that every compute kernel really does the work it is credited with, then
//! times each one with events (warm-up, then the median of [`MeasureOptions::runs`] back-to-back
//! runs). Every figure is checked against a physical bound (2x the datasheet figure, or the SM
//! clock x the widest issue rate when there is no datasheet) and an implausible one is an
//! error, never a figure.
//!
//! [`profile_device`] serves the saved profile of this device + driver, measuring (and saving)
//! only when there is none or when asked to re-profile. Where nothing can be measured (no NVRTC)
//! it returns the datasheet figures as an unsaved, unmeasured profile; see [`effective_ceilings`].

use super::detect::{detect, Capabilities, DetectError};
use super::hwdb::{self, HwEntry};
use super::micro::{
    CopyKernel, FmaKernel, MicroKernel, MicroSuite, MmaSyncKernel, SuiteEntry, WgmmaKernel,
};
use super::profile::{
    Ceilings, DeviceProfile, ProfileError, ProfileKey, ProfileStore, PROFILE_FORMAT_VERSION,
};
use super::report::{Failure, Figure, MeasureReport, Quantity};
use super::timing::{time_runs, Timing};
use crate::aot::{self, fsio, CacheError, KernelCache, Toolchain, ToolchainError};
use crate::templates::{ConstraintViolation, KernelSource};
use crate::{Arch, DType};
use rtx_runtime::{
    Device, DeviceBuffer, DeviceInfo, Event, Function, KernelArgs, LaunchConfig, RuntimeError,
    Stream,
};
use std::collections::HashMap;
use std::time::Instant;

/// How much to measure and how long.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Bytes of each of the two copy buffers (one run moves twice this); lowered to a quarter of
    /// the free device memory when that is less. Default 1 GiB.
    pub copy_bytes: usize,
    /// Untimed runs queued before the timed ones. Default 2.
    pub warmup: usize,
    /// Timed runs per figure; the median is reported. At least 1; default 15.
    pub runs: usize,
    /// Target duration of one timed run of a compute kernel, ms (its loop count is calibrated to
    /// it). Default 2.
    pub target_ms: f64,
    /// Launches per launch-overhead sample. Default 1000.
    pub launches: usize,
    /// Launch-overhead samples; the median is reported. Default 5.
    pub launch_samples: usize,
    /// Also measure the `wgmma` kernels where the target has them (sm_90a). Default true.
    pub wgmma: bool,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            copy_bytes: 1 << 30,
            warmup: 2,
            runs: 15,
            target_ms: 2.0,
            launches: 1000,
            launch_samples: 5,
            wgmma: true,
        }
    }
}

impl MeasureOptions {
    fn validate(&self) -> Result<(), MeasureError> {
        let bad = |r: String| Err(MeasureError::Options(r));
        if self.runs == 0 || self.launches == 0 || self.launch_samples == 0 {
            return bad(format!(
                "runs ({}), launches ({}) and launch_samples ({}) must be at least 1",
                self.runs, self.launches, self.launch_samples
            ));
        }
        if !(self.target_ms.is_finite() && self.target_ms > 0.0 && self.target_ms <= 10_000.0) {
            return bad(format!("target_ms {} is not in (0, 10000]", self.target_ms));
        }
        if self.copy_bytes < (1 << 20) {
            return bad(format!(
                "copy_bytes {} is below 1 MiB: too small to measure bandwidth",
                self.copy_bytes
            ));
        }
        Ok(())
    }
}

/// Why measuring failed.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The device is not one rtx has a target for.
    #[error(transparent)]
    Detect(#[from] DetectError),
    /// A micro-benchmark kernel's parameters were rejected (a bug in the suite).
    #[error("micro-benchmark kernel rejected: {0}")]
    Emit(#[from] ConstraintViolation),
    /// NVRTC or the CUDA headers are missing, so nothing can be measured.
    #[error("cannot measure without NVRTC: {0}")]
    Toolchain(#[from] ToolchainError),
    /// A kernel did not compile.
    #[error("compiling micro-benchmark `{entry}` failed: {source}")]
    Compile {
        /// The kernel.
        entry: String,
        /// The compile or cache error.
        #[source]
        source: Box<CacheError>,
    },
    /// A driver call failed.
    #[error("{step}: {source}")]
    Runtime {
        /// What was being done.
        step: String,
        /// The runtime's error.
        #[source]
        source: RuntimeError,
    },
    /// A kernel's verify run did not produce the expected values.
    #[error("`{kernel}` computed a wrong result: {detail}")]
    WrongResult {
        /// The kernel.
        kernel: String,
        /// The first mismatch.
        detail: String,
    },
    /// A figure is physically impossible (or not a positive number).
    #[error("implausible {what}: {value:.3} {unit} (allowed: above 0, at most {bound:.3}, {why})")]
    Implausible {
        /// The figure.
        what: String,
        /// Its value.
        value: f64,
        /// Its unit.
        unit: &'static str,
        /// The bound it broke.
        bound: f64,
        /// Where the bound comes from.
        why: String,
    },
    /// [`MeasureOptions`] out of range.
    #[error("invalid measure options: {0}")]
    Options(String),
    /// Re-profiling was asked for but the device cannot be measured here.
    #[error("cannot re-profile `{device}`: {reason}")]
    CannotMeasure {
        /// Device name.
        device: String,
        /// Why.
        reason: String,
    },
    /// The profile store failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

impl MeasureError {
    /// True when the device context is unusable afterwards (a sticky CUDA error).
    pub fn is_sticky(&self) -> bool {
        matches!(self, MeasureError::Runtime { source, .. } if source.is_sticky())
    }
}

/// Attaches the step being done to a runtime error.
trait Step<T> {
    fn step(self, what: impl FnOnce() -> String) -> Result<T, MeasureError>;
}

impl<T> Step<T> for Result<T, RuntimeError> {
    fn step(self, what: impl FnOnce() -> String) -> Result<T, MeasureError> {
        self.map_err(|source| MeasureError::Runtime {
            step: what(),
            source,
        })
    }
}

/// Largest loop count the calibration hands a kernel (an `int` parameter).
const MAX_ITERS: u32 = 1 << 24;

/// The fp32 FMA constants: chains converge to c / (1 - b) = 10 and stay finite.
const FMA_B: f32 = 0.9999;
const FMA_C: f32 = 0.001;

/// One 1-D launch of `f`.
///
/// # Safety
/// `args` must match `f`'s parameters, and every buffer they point to must stay alive and large
/// enough for the launch shape until the work on `stream` is done.
unsafe fn launch(
    f: &Function,
    stream: &Stream,
    grid: u32,
    block: u32,
    args: &mut KernelArgs,
) -> Result<(), RuntimeError> {
    let cfg = LaunchConfig::new([grid, 1, 1], [block, 1, 1], 0);
    // SAFETY: forwarded to the caller.
    unsafe { f.launch(stream, &cfg, args) }
}

/// Compiles (through the kernel cache when it can be opened) and loads every kernel.
fn compile_and_load(
    device: &Device,
    arch: Arch,
    kernels: &[&dyn MicroKernel],
) -> Result<HashMap<String, Function>, MeasureError> {
    Toolchain::get()?;
    let sources: Vec<(KernelSource, Arch)> = kernels
        .iter()
        .map(|k| k.emit(arch).map(|s| (s, arch)))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let binaries: Vec<Result<Vec<u8>, Box<CacheError>>> = match KernelCache::open_default() {
        Ok(cache) => cache
            .get_or_compile_many(&sources, None)
            .into_iter()
            .map(|r| r.map(|k| k.cubin).map_err(Box::new))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "kernel cache unavailable; compiling the profiler's kernels uncached");
            aot::compile_many(&sources, None)
                .into_iter()
                .map(|r| {
                    r.map(|c| c.cubin)
                        .map_err(|e| Box::new(CacheError::from(e)))
                })
                .collect()
        }
    };
    tracing::debug!(kernels = sources.len(), elapsed = ?started.elapsed(), "profiler kernels ready");
    let mut out = HashMap::new();
    for ((src, _), bin) in sources.iter().zip(binaries) {
        let cubin = bin.map_err(|source| MeasureError::Compile {
            entry: src.entry.clone(),
            source,
        })?;
        let module = device
            .load_module(&cubin)
            .step(|| format!("loading `{}`", src.entry))?;
        let f = module
            .function(&src.entry)
            .step(|| format!("looking up `{}`", src.entry))?;
        out.insert(src.entry.clone(), f);
    }
    Ok(out)
}

/// State shared by the measurements of one run.
struct Bench<'a> {
    device: &'a Device,
    stream: Stream,
    opts: &'a MeasureOptions,
    caps: &'a Capabilities,
    info: &'a DeviceInfo,
    datasheet: Option<&'static HwEntry>,
    functions: HashMap<String, Function>,
}

impl Bench<'_> {
    fn function(&self, k: &dyn MicroKernel) -> &Function {
        // Every suite kernel was loaded by `compile_and_load`.
        &self.functions[&k.entry()]
    }

    fn time(
        &self,
        what: &str,
        warmup: usize,
        runs: usize,
        launch: impl FnMut() -> Result<(), RuntimeError>,
    ) -> Result<Timing, MeasureError> {
        let samples = time_runs(self.device, &self.stream, warmup, runs, launch)
            .step(|| format!("timing {what}"))?;
        Timing::from_samples(&samples).ok_or_else(|| MeasureError::Implausible {
            what: format!("{what} run time"),
            value: samples.iter().cloned().fold(f64::NAN, f64::min),
            unit: "ms",
            bound: f64::INFINITY,
            why: "every timed run must take a positive time".into(),
        })
    }

    /// The loop count that makes one run of `once(iters)` take about `target_ms`.
    fn calibrate(
        &self,
        what: &str,
        mut once: impl FnMut(u32) -> Result<(), RuntimeError>,
    ) -> Result<u32, MeasureError> {
        let target = self.opts.target_ms;
        let mut iters: u32 = 8;
        loop {
            let t = self.time(what, 0, 1, || once(iters))?;
            if t.median_ms >= target / 10.0 || iters >= MAX_ITERS / 16 {
                let want = (iters as f64 * target / t.median_ms).round();
                return Ok(want.clamp(1.0, MAX_ITERS as f64) as u32);
            }
            iters *= 16;
        }
    }

    fn alloc(&self, bytes: usize, what: &str) -> Result<DeviceBuffer, MeasureError> {
        self.device
            .alloc(bytes, &self.stream)
            .step(|| format!("allocating {bytes} bytes for {what}"))
    }

    fn download_f32(&self, b: &DeviceBuffer, what: &str) -> Result<Vec<f32>, MeasureError> {
        b.download::<f32>(&self.stream)
            .step(|| format!("reading back {what}"))
    }

    /// The figure, if it is a positive number within [`plausible_bound`].
    fn figure(
        &self,
        quantity: Quantity,
        method: String,
        value: f64,
        timing: Timing,
    ) -> Result<Figure, MeasureError> {
        let (bound, why) = plausible_bound(quantity, self.info, self.datasheet);
        if !(value.is_finite() && value > 0.0 && value <= bound) {
            return Err(MeasureError::Implausible {
                what: format!("{} ({method})", quantity.label()),
                value,
                unit: quantity.unit(),
                bound,
                why,
            });
        }
        tracing::info!(quantity = quantity.label(), value, unit = quantity.unit(), %method, "measured");
        Ok(Figure {
            quantity,
            method,
            value,
            timing,
        })
    }

    /// Copy bandwidth: every copy kernel of the suite and the driver's device-to-device copy.
    fn copy(&self, entries: &[SuiteEntry<CopyKernel>]) -> Result<Vec<Figure>, MeasureError> {
        const V: usize = CopyKernel::VECTOR_BYTES;
        // Correctness first, on small buffers with a 3-block grid that exercises both the
        // unrolled loop and its tail.
        let small_n = |k: &CopyKernel| 3 * (k.block * k.unroll) as usize * 2 + 5;
        let max_n = entries
            .iter()
            .map(|e| small_n(&e.kernel))
            .max()
            .unwrap_or(0);
        let pattern: Vec<u32> = (0..max_n as u32 * 4).map(|i| i ^ 0x9E37_79B9).collect();
        let mut src = self.alloc(max_n * V, "the copy check")?;
        let mut dst = self.alloc(max_n * V, "the copy check")?;
        src.upload(&pattern, &self.stream)
            .step(|| "uploading the copy check pattern".into())?;
        for e in entries {
            let k = &e.kernel;
            let n = small_n(k);
            dst.fill_u8(0, &self.stream)
                .step(|| "clearing the copy check buffer".into())?;
            let mut args = KernelArgs::new();
            args.ptr(&src).ptr(&dst).u64(n as u64);
            // SAFETY: (const uint4*, uint4*, unsigned long long n); both buffers hold max_n >= n
            // vectors and live until the download below synchronizes the stream.
            unsafe { launch(self.function(k), &self.stream, 3, k.block, &mut args) }
                .step(|| format!("launching `{}`", k.entry()))?;
            let got: Vec<u32> = dst
                .download(&self.stream)
                .step(|| format!("reading back `{}`", k.entry()))?;
            let words = n * 4;
            if let Some(i) =
                (0..got.len()).find(|&i| got[i] != if i < words { pattern[i] } else { 0 })
            {
                return Err(MeasureError::WrongResult {
                    kernel: k.entry(),
                    detail: format!(
                        "word {i} of {words} copied is {:#x}, expected {:#x}",
                        got[i],
                        if i < words { pattern[i] } else { 0 }
                    ),
                });
            }
        }
        drop((src, dst));

        // Bandwidth, on two large buffers.
        let (free, _) = self
            .device
            .mem_info()
            .step(|| "querying free memory".into())?;
        let bytes = self.opts.copy_bytes.min(free / 4) / (1 << 20) * (1 << 20);
        if bytes < (1 << 20) {
            return Err(MeasureError::Options(format!(
                "only {free} bytes of device memory free: too little for the copy benchmark"
            )));
        }
        let n = bytes / V;
        let traffic = 2.0 * (n * V) as f64;
        let mut src = self.alloc(n * V, "the copy source")?;
        let mut dst = self.alloc(n * V, "the copy destination")?;
        src.fill_u8(0x5A, &self.stream)
            .step(|| "filling the copy source".into())?;
        dst.fill_u8(0, &self.stream)
            .step(|| "filling the copy destination".into())?;
        let gbps = |t: &Timing| traffic / (t.median_ms * 1e-3) / 1e9;
        let mut figures = Vec::new();
        for e in entries {
            let k = &e.kernel;
            let grid = self.caps.sm_count * e.blocks_per_sm;
            let f = self.function(k);
            let mut args = KernelArgs::new();
            args.ptr(&src).ptr(&dst).u64(n as u64);
            // SAFETY: as above; both buffers hold n vectors and outlive the timing, which waits
            // for the last run.
            let t = self.time(&k.entry(), self.opts.warmup, self.opts.runs, || unsafe {
                launch(f, &self.stream, grid, k.block, &mut args)
            })?;
            let method = format!(
                "copy kernel {} ({} x {} threads, {} x 16 B loads in flight, {:?}), {} MiB x 2",
                k.entry(),
                grid,
                k.block,
                k.unroll,
                k.hint,
                bytes >> 20
            );
            figures.push(self.figure(Quantity::CopyGbps, method, gbps(&t), t)?);
        }
        let t = self.time(
            "cuMemcpyDtoDAsync",
            self.opts.warmup,
            self.opts.runs,
            || dst.copy_from(&src, &self.stream),
        )?;
        let method = format!("driver copy cuMemcpyDtoDAsync, {} MiB x 2", bytes >> 20);
        figures.push(self.figure(Quantity::CopyGbps, method, gbps(&t), t)?);
        Ok(figures)
    }

    /// fp32 FMA throughput.
    fn fp32(&self, e: &SuiteEntry<FmaKernel>) -> Result<Figure, MeasureError> {
        let k = &e.kernel;
        let f = self.function(k);
        let grid = self.caps.sm_count * e.blocks_per_sm;
        let threads = (grid * k.block) as usize;
        let out = self.alloc(threads * 4, "the fma output")?;
        let run = |grid: u32, iters: u32, verify: bool| {
            let mut args = KernelArgs::new();
            args.ptr(&out)
                .i32(iters as i32)
                .f32(FMA_B)
                .f32(FMA_C)
                .f32(f32::NAN)
                .i32(verify as i32);
            // SAFETY: (float* out, int iters, float b, float c, float sentinel, int verify);
            // `out` holds one float per thread of the full grid and outlives every run (each
            // caller synchronizes before it returns).
            unsafe { launch(f, &self.stream, grid, k.block, &mut args) }
        };
        // Verify: two blocks, three loop trips, every thread's sum against the host's FMAs.
        let iters = 3;
        run(2, iters, true).step(|| format!("launching `{}`", k.entry()))?;
        let got = self.download_f32(&out, &k.entry())?;
        for gtid in 0..2 * k.block {
            let want = k.expected(gtid, iters, FMA_B, FMA_C);
            let g = got[gtid as usize];
            if (g - want).abs() > 1e-6 * want.abs().max(1.0) {
                return Err(MeasureError::WrongResult {
                    kernel: k.entry(),
                    detail: format!("thread {gtid} summed {g}, the host's FMAs give {want}"),
                });
            }
        }
        let iters = self.calibrate(&k.entry(), |i| run(grid, i, false))?;
        let t = self.time(&k.entry(), self.opts.warmup, self.opts.runs, || {
            run(grid, iters, false)
        })?;
        let flops = threads as f64 * k.flops_per_thread(iters);
        let method = format!(
            "FFMA kernel {} ({grid} x {} threads, {} chains x {} unrolled, {iters} trips)",
            k.entry(),
            k.block,
            k.chains,
            k.unroll
        );
        self.figure(
            Quantity::Fp32Tflops,
            method,
            flops / (t.median_ms * 1e-3) / 1e12,
            t,
        )
    }

    /// A tensor-core kernel with the `(float* out, int iters, int ones, float sentinel, int
    /// verify)` signature: verify with ones, calibrate, time with pseudo-random inputs.
    #[allow(clippy::too_many_arguments)]
    fn tensor(
        &self,
        k: &dyn MicroKernel,
        dtype: DType,
        grid: u32,
        expected_ones: impl Fn(u32) -> f32,
        flops_per_block: impl Fn(u32) -> f64,
        method: impl Fn(u32) -> String,
    ) -> Result<Figure, MeasureError> {
        let f = self.function(k);
        let block = k.block_threads();
        let out = self.alloc((grid * block) as usize * 4, "the tensor output")?;
        let run = |grid: u32, iters: u32, ones: bool, verify: bool| {
            let mut args = KernelArgs::new();
            args.ptr(&out)
                .i32(iters as i32)
                .i32(ones as i32)
                .f32(f32::NAN)
                .i32(verify as i32);
            // SAFETY: (float* out, int iters, int ones, float sentinel, int verify); `out`
            // holds one float per thread of the full grid and outlives every run.
            unsafe { launch(f, &self.stream, grid, block, &mut args) }
        };
        // Verify: one block, two trips, all-ones inputs: every thread's sum is known exactly.
        let iters = 2;
        run(1, iters, true, true).step(|| format!("launching `{}`", k.entry()))?;
        let got = self.download_f32(&out, &k.entry())?;
        let want = expected_ones(iters);
        if let Some((i, g)) = got[..block as usize]
            .iter()
            .enumerate()
            .find(|(_, g)| **g != want)
        {
            return Err(MeasureError::WrongResult {
                kernel: k.entry(),
                detail: format!("thread {i} summed {g}, expected {want} (all-ones inputs)"),
            });
        }
        let iters = self.calibrate(&k.entry(), |i| run(grid, i, false, false))?;
        let t = self.time(&k.entry(), self.opts.warmup, self.opts.runs, || {
            run(grid, iters, false, false)
        })?;
        let flops = grid as f64 * flops_per_block(iters);
        self.figure(
            Quantity::TensorTflops(dtype),
            method(iters),
            flops / (t.median_ms * 1e-3) / 1e12,
            t,
        )
    }

    fn mma_sync(&self, e: &SuiteEntry<MmaSyncKernel>) -> Result<Figure, MeasureError> {
        let k = e.kernel;
        let grid = self.caps.sm_count * e.blocks_per_sm;
        let warps = k.block / 32;
        self.tensor(
            &k,
            k.dtype,
            grid,
            |i| k.expected_ones(i),
            |i| warps as f64 * k.flops_per_warp(i),
            |iters| {
                format!(
                    "{} ({grid} x {} threads, {} accumulators x {} per trip, {iters} trips)",
                    k.instruction(),
                    k.block,
                    k.accumulators,
                    k.unroll
                )
            },
        )
    }

    fn wgmma(&self, e: &SuiteEntry<WgmmaKernel>) -> Result<Figure, MeasureError> {
        let k = e.kernel;
        let grid = self.caps.sm_count * e.blocks_per_sm;
        self.tensor(
            &k,
            k.dtype,
            grid,
            |i| k.expected_ones(i),
            |i| k.flops_per_block(i),
            |iters| {
                format!(
                    "{} from smem descriptors ({grid} warpgroups, {} per SM, {} per commit group, {iters} trips)",
                    k.instruction(),
                    e.blocks_per_sm,
                    k.unroll
                )
            },
        )
    }

    /// Launch overhead: host submit time and stream time of back-to-back empty launches.
    fn launches(&self, k: &dyn MicroKernel) -> Result<[Figure; 2], MeasureError> {
        let f = self.function(k);
        let mut args = KernelArgs::new();
        let what = || format!("launching `{}`", k.entry());
        // SAFETY (every launch below): the kernel takes no parameters and touches no memory.
        for _ in 0..10 {
            unsafe { launch(f, &self.stream, 1, k.block_threads(), &mut args) }.step(what)?;
        }
        self.stream.synchronize().step(what)?;
        let n = self.opts.launches;
        let (mut host, mut dev) = (Vec::new(), Vec::new());
        for _ in 0..self.opts.launch_samples {
            let start = Event::new(self.device).step(|| "creating an event".into())?;
            let end = Event::new(self.device).step(|| "creating an event".into())?;
            start
                .record(&self.stream)
                .step(|| "recording an event".into())?;
            let t0 = Instant::now();
            for _ in 0..n {
                unsafe { launch(f, &self.stream, 1, k.block_threads(), &mut args) }.step(what)?;
            }
            let host_s = t0.elapsed().as_secs_f64();
            end.record(&self.stream)
                .step(|| "recording an event".into())?;
            let ms = start.elapsed_ms(&end).step(|| "timing launches".into())? as f64;
            host.push(host_s * 1e3);
            dev.push(ms);
        }
        let per = |v: f64| v * 1e3 / n as f64;
        let (th, td) = (Timing::from_samples(&host), Timing::from_samples(&dev));
        let (Some(th), Some(td)) = (th, td) else {
            return Err(MeasureError::Implausible {
                what: "launch timing".into(),
                value: 0.0,
                unit: "ms",
                bound: f64::INFINITY,
                why: "every sample must take a positive time".into(),
            });
        };
        Ok([
            self.figure(
                Quantity::LaunchHostUs,
                format!(
                    "host wall clock of {n} launches of an empty kernel (1 x 32 threads), per launch"
                ),
                per(th.median_ms),
                th,
            )?,
            self.figure(
                Quantity::LaunchDeviceUs,
                format!("events around {n} back-to-back empty launches on one stream, per launch"),
                per(td.median_ms),
                td,
            )?,
        ])
    }
}

/// The largest plausible value of `q` on the device `info` describes, and where the bound comes
/// from: 2x the datasheet figure and, for compute, the SM clock x the widest issue rate
/// (128 fp32 lanes per SM, the most any NVIDIA SM has; generously 8192 dense tensor flops per SM
/// and clock, where Hopper does 4096), whichever is tighter.
pub fn plausible_bound(
    q: Quantity,
    info: &DeviceInfo,
    datasheet: Option<&HwEntry>,
) -> (f64, String) {
    let sheet = datasheet.and_then(|d| q.datasheet(d));
    let ghz = info.clock_khz as f64 / 1e6;
    let sms = info.sm_count as f64;
    let by_sheet = sheet.map(|p| (2.0 * p, format!("2x the datasheet's {p}")));
    let by_clock = |flops_per_clk: f64, what: &str| {
        (ghz > 0.0).then(|| {
            (
                1.1 * sms * flops_per_clk * ghz / 1e3,
                format!("1.1 x {sms} SMs x {flops_per_clk} {what} flops/clock x {ghz:.3} GHz"),
            )
        })
    };
    let tightest = |a: Option<(f64, String)>, b: Option<(f64, String)>| match (a, b) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    let found = match q {
        Quantity::CopyGbps => by_sheet.or_else(|| {
            let (mhz, bits) = (
                info.mem_clock_khz as f64 / 1e3,
                info.mem_bus_width_bits as f64,
            );
            (mhz > 0.0 && bits > 0.0).then(|| {
                let peak = mhz * 1e6 * 2.0 * bits / 8.0 / 1e9;
                (
                    4.0 * peak,
                    format!("4x the {peak:.0} GB/s of the memory clock and bus"),
                )
            })
        }),
        Quantity::Fp32Tflops => tightest(by_sheet, by_clock(256.0, "fp32")),
        Quantity::TensorTflops(_) => tightest(by_sheet, by_clock(16384.0, "tensor")),
        Quantity::LaunchHostUs | Quantity::LaunchDeviceUs => {
            Some((10_000.0, "10 ms per launch".to_string()))
        }
    };
    found.unwrap_or((
        1e6,
        "no datasheet or clock: only positivity is checked".into(),
    ))
}

/// The best (largest) figure of each ceiling quantity; the launch overhead is the host figure.
fn ceilings_of(figures: &[Figure]) -> Ceilings {
    let best = |q: Quantity| {
        figures
            .iter()
            .filter(|f| f.quantity == q)
            .map(|f| f.value)
            .reduce(f64::max)
    };
    Ceilings {
        copy_gbps: best(Quantity::CopyGbps),
        fp32_tflops: best(Quantity::Fp32Tflops),
        tf32_tflops: best(Quantity::TensorTflops(DType::Tf32)),
        f16_tflops: best(Quantity::TensorTflops(DType::F16)),
        bf16_tflops: best(Quantity::TensorTflops(DType::Bf16)),
        launch_overhead_us: best(Quantity::LaunchHostUs),
    }
}

/// Measures every ceiling of `device` and reports each figure and how it was obtained.
///
/// The copy, fp32, `mma.sync` and launch figures are required: any failure is an error. The
/// `wgmma` figures (sm_90a) are measured last; a failure there is listed in
/// [`MeasureReport::failures`] and the tensor ceilings fall back to `mma.sync`, unless it left
/// the context unusable (a sticky error), which is returned.
pub fn measure_report(
    device: &Device,
    opts: &MeasureOptions,
) -> Result<MeasureReport, MeasureError> {
    opts.validate()?;
    let info = device.info();
    let caps = detect(info)?;
    let mut suite = MicroSuite::for_arch(caps.arch);
    if !opts.wgmma {
        suite.wgmma.clear();
    }
    let functions = compile_and_load(device, caps.arch, &suite.kernels())?;
    let bench = Bench {
        device,
        stream: device.new_stream().step(|| "creating a stream".into())?,
        opts,
        caps: &caps,
        info,
        datasheet: hwdb::lookup(&info.name, info.compute_capability),
        functions,
    };
    let mut figures = bench.copy(&suite.copies)?;
    figures.push(bench.fp32(&suite.fma)?);
    for e in &suite.mma_sync {
        figures.push(bench.mma_sync(e)?);
    }
    figures.extend(bench.launches(&suite.empty)?);
    let mut failures = Vec::new();
    for e in &suite.wgmma {
        match bench.wgmma(e) {
            Ok(f) => figures.push(f),
            Err(err) if err.is_sticky() => return Err(err),
            Err(err) => {
                tracing::warn!(kernel = %e.kernel.entry(), error = %err, "wgmma measurement failed; the tensor ceiling falls back to mma.sync");
                failures.push(Failure {
                    method: e.kernel.instruction(),
                    error: err.to_string(),
                });
            }
        }
    }
    bench
        .stream
        .synchronize()
        .step(|| "finishing the measurements".into())?;
    let ceilings = ceilings_of(&figures);
    Ok(MeasureReport {
        capabilities: caps,
        figures,
        failures,
        ceilings,
    })
}

/// Measures every ceiling of `device` (see [`measure_report`]).
pub fn measure_ceilings(device: &Device, opts: &MeasureOptions) -> Result<Ceilings, MeasureError> {
    measure_report(device, opts).map(|r| r.ceilings)
}

/// The key `info`'s profile is saved under: device name + driver version.
pub fn profile_key(info: &DeviceInfo) -> ProfileKey {
    ProfileKey::new(info.name.clone(), info.driver_version)
}

/// A profile of the device `info` describes holding `measured`, stamped now, with its datasheet
/// entry.
pub fn new_profile(info: &DeviceInfo, measured: Ceilings) -> DeviceProfile {
    DeviceProfile {
        format_version: PROFILE_FORMAT_VERSION,
        device_name: info.name.clone(),
        compute_capability: info.compute_capability,
        driver_version: info.driver_version,
        sm_count: info.sm_count,
        l2_bytes: info.l2_bytes,
        smem_optin: info.smem_per_block_optin,
        measured,
        measured_at: fsio::unix_now(),
        datasheet: hwdb::lookup(&info.name, info.compute_capability).cloned(),
    }
}

/// Measures `device` and returns its new profile with the report behind it (nothing is saved).
pub fn measure_profile(
    device: &Device,
    opts: &MeasureOptions,
) -> Result<(DeviceProfile, MeasureReport), MeasureError> {
    let report = measure_report(device, opts)?;
    Ok((new_profile(device.info(), report.ceilings), report))
}

/// The measured ceilings where measured, else the datasheet's (the launch overhead has no
/// datasheet figure).
pub fn effective_ceilings(p: &DeviceProfile) -> Ceilings {
    let m = p.measured;
    let Some(d) = &p.datasheet else { return m };
    Ceilings {
        copy_gbps: m.copy_gbps.or(Some(d.mem_bandwidth_gbps)),
        fp32_tflops: m.fp32_tflops.or(Some(d.fp32_tflops)),
        tf32_tflops: m.tf32_tflops.or(Some(d.tf32_tflops)),
        f16_tflops: m.f16_tflops.or(Some(d.f16_tflops)),
        bf16_tflops: m.bf16_tflops.or(Some(d.bf16_tflops)),
        launch_overhead_us: m.launch_overhead_us,
    }
}

/// The profile of `device` from `store`: the saved one for its name + driver unless `reprofile`
/// is set, else freshly measured with `opts` and saved. Without NVRTC nothing can be measured:
/// a saved profile is still served, otherwise an unsaved profile with no measured figures and
/// the datasheet entry is returned (and `reprofile` is an error).
pub fn profile_device_in(
    device: &Device,
    store: &ProfileStore,
    reprofile: bool,
    opts: &MeasureOptions,
) -> Result<DeviceProfile, MeasureError> {
    let info = device.info();
    let key = profile_key(info);
    if let Err(e) = Toolchain::get() {
        if reprofile {
            return Err(MeasureError::CannotMeasure {
                device: info.name.clone(),
                reason: e.to_string(),
            });
        }
        match store.load(&key) {
            Ok(Some(p)) => return Ok(p),
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, "saved profile unusable"),
        }
        tracing::warn!(device = %info.name, error = %e, "cannot measure: using datasheet figures only");
        return Ok(new_profile(info, Ceilings::default()));
    }
    store.load_or_measure(&key, reprofile, || {
        let (p, report) = measure_profile(device, opts)?;
        for line in report.lines(p.datasheet.as_ref()) {
            tracing::info!("profile: {line}");
        }
        Ok(p)
    })
}

/// The profile of `device` from the default store (`$RTX_CACHE_DIR/profiles`): saved and reused
/// per device name + driver; `reprofile` measures again and replaces it. Measures with the
/// default [`MeasureOptions`]. If no store can be opened the device is measured without saving.
pub fn profile_device(device: &Device, reprofile: bool) -> Result<DeviceProfile, MeasureError> {
    let opts = MeasureOptions::default();
    match ProfileStore::open_default() {
        Ok(store) => profile_device_in(device, &store, reprofile, &opts),
        Err(e) => {
            tracing::warn!(error = %e, "no profile store: measuring without saving");
            Ok(measure_profile(device, &opts)?.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(q: Quantity, v: f64) -> Figure {
        Figure {
            quantity: q,
            method: "t".into(),
            value: v,
            timing: Timing::from_samples(&[1.0]).unwrap(),
        }
    }

    #[test]
    fn ceilings_take_the_best_figure_of_each_quantity() {
        let c = ceilings_of(&[
            figure(Quantity::CopyGbps, 4000.0),
            figure(Quantity::CopyGbps, 4250.0),
            figure(Quantity::TensorTflops(DType::Bf16), 600.0),
            figure(Quantity::TensorTflops(DType::Bf16), 700.0),
            figure(Quantity::LaunchHostUs, 2.5),
            figure(Quantity::LaunchDeviceUs, 1.5),
        ]);
        assert_eq!(c.copy_gbps, Some(4250.0));
        assert_eq!(c.bf16_tflops, Some(700.0));
        assert_eq!(c.launch_overhead_us, Some(2.5));
        assert_eq!(
            (c.fp32_tflops, c.tf32_tflops, c.f16_tflops),
            (None, None, None)
        );
    }

    #[test]
    fn datasheet_fills_what_was_not_measured() {
        let info = DeviceInfo {
            name: "NVIDIA H200".into(),
            driver_version: (13, 0),
            ..DeviceInfo::example_sm90()
        };
        let p = new_profile(
            &info,
            Ceilings {
                copy_gbps: Some(4300.0),
                ..Ceilings::default()
            },
        );
        assert_eq!(p.key(), profile_key(&info));
        assert_eq!(p.format_version, PROFILE_FORMAT_VERSION);
        assert!(p.measured_at > 0);
        let e = effective_ceilings(&p);
        assert_eq!(e.copy_gbps, Some(4300.0), "measured wins");
        assert_eq!(e.bf16_tflops, Some(989.5), "datasheet fills in");
        assert_eq!(e.launch_overhead_us, None);
        let unknown = new_profile(
            &DeviceInfo {
                name: "mystery".into(),
                ..info
            },
            Ceilings::default(),
        );
        assert_eq!(unknown.datasheet, None);
        assert_eq!(effective_ceilings(&unknown), Ceilings::default());
    }

    #[test]
    fn options_are_validated() {
        assert!(MeasureOptions::default().validate().is_ok());
        for bad in [
            MeasureOptions {
                runs: 0,
                ..MeasureOptions::default()
            },
            MeasureOptions {
                target_ms: f64::NAN,
                ..MeasureOptions::default()
            },
            MeasureOptions {
                copy_bytes: 1000,
                ..MeasureOptions::default()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(MeasureError::Options(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bounds_come_from_the_datasheet_and_the_clock() {
        let info = DeviceInfo {
            name: "NVIDIA H200".into(),
            clock_khz: 1_980_000,
            ..DeviceInfo::example_sm90()
        };
        let sheet = hwdb::lookup("NVIDIA H200", (9, 0));
        let (b, why) = plausible_bound(Quantity::CopyGbps, &info, sheet);
        assert_eq!(b, 9600.0, "{why}");
        // fp32: the clock bound (1.1 x 132 x 256 x 1.98 GHz = 73.6) is tighter than 2 x 67.
        let (b, why) = plausible_bound(Quantity::Fp32Tflops, &info, sheet);
        assert!((b - 73.6).abs() < 0.1, "{b} {why}");
        let (b, _) = plausible_bound(Quantity::TensorTflops(DType::Bf16), &info, sheet);
        assert_eq!(b, 1979.0);
        // Unknown device, no clock: only positivity.
        let bare = DeviceInfo {
            name: "mystery".into(),
            ..DeviceInfo::example_sm90()
        };
        let (b, why) = plausible_bound(Quantity::Fp32Tflops, &bare, None);
        assert!(b >= 1e6 && why.contains("positivity"));
        let (b, _) = plausible_bound(Quantity::LaunchHostUs, &bare, None);
        assert_eq!(b, 10_000.0);
    }
}
