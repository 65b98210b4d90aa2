//! What the tuner needs from a backend: compile a config, verify it on fresh random inputs, time
//! it under a [`MeasureProtocol`]; and how a candidate can fail ([`CandidateError`]).
//!
//! The GPU backend compiles through `aot`, launches through `rtx-runtime` and verifies against
//! cuBLAS or the CPU reference; tests use dummy backends. A backend is shared between the compile
//! threads and the measuring thread (`&self` everywhere, `Sync`): a GPU backend keeps its stream
//! behind a lock and creates its context lazily in `verify`/`time`, so compile-only workers never
//! touch the GPU.
//!
//! How the GPU backend is meant to fill the trait (a sketch; it lands with that task):
//! - `compile`: `aot` compile (cached), resource report from ptxas' `-v` lines into
//!   [`ResourceUsage`]; load the module lazily in the measuring process.
//! - `verify(cfg, seed)`: draw FRESH random A/B from `seed` (a new seed each call, so a kernel
//!   that passes on one input set by luck is caught on the next), poison the output buffer
//!   (`fill_u8`), launch, compare against cuBLAS or the f64 CPU reference with the dtype's
//!   bound; a sticky `RuntimeError` (`is_sticky()`) becomes [`CandidateError::Fault`].
//! - `time(cfg, protocol)`: [`super::run_protocol`] with a closure that, untimed, overwrites a
//!   `protocol.flush_bytes` scratch buffer when `protocol.flush_l2` is set and picks input set
//!   `protocol.input_set(rep)`, then records an event pair around one launch on its stream,
//!   synchronises, and returns the elapsed microseconds.

use super::measure::{MeasureProtocol, TimingStats};
use crate::templates::{ConstraintViolation, Template};
use crate::Arch;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The fixed part of one tuning run: which template, for which problem, on which target.
pub struct TuneTask<'a, T: Template> {
    /// The template whose space is searched.
    pub template: &'a T,
    /// The operation instance.
    pub problem: &'a T::Problem,
    /// The compilation target.
    pub arch: Arch,
}

impl<T: Template> Clone for TuneTask<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Template> Copy for TuneTask<'_, T> {}

/// Resource use of one compiled kernel, from ptxas' `-v` report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// Registers per thread, when reported.
    pub registers: Option<u32>,
    /// Bytes of spill stores per thread.
    pub spill_store_bytes: u32,
    /// Bytes of spill loads per thread.
    pub spill_load_bytes: u32,
    /// Stack frame bytes per thread.
    pub stack_bytes: u32,
    /// Static shared memory per block, bytes.
    pub static_smem_bytes: u32,
}

impl ResourceUsage {
    /// True when ptxas spilled registers to local memory.
    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

impl From<&crate::aot::ResourceUsage> for ResourceUsage {
    /// The tuner's summary of an `aot` ptxas report for the kernel entry.
    fn from(r: &crate::aot::ResourceUsage) -> Self {
        ResourceUsage {
            registers: r.is_entry.then_some(r.registers),
            spill_store_bytes: r.spill_store_bytes,
            spill_load_bytes: r.spill_load_bytes,
            stack_bytes: r.cumulative_stack_bytes.unwrap_or(r.stack_frame_bytes),
            static_smem_bytes: r.shared_bytes,
        }
    }
}

/// Result of checking one candidate's output against a reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Relative error of the candidate's output against the reference.
    pub rel_err: f64,
    /// The bound it must meet (e.g. [`crate::DType::rel_tolerance`]).
    pub bound: f64,
}

impl VerifyReport {
    /// True when the error is finite and within the bound.
    pub fn passed(&self) -> bool {
        self.rel_err.is_finite() && self.rel_err <= self.bound
    }
}

/// A verified and timed candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The correctness check it passed.
    pub verify: VerifyReport,
    /// Its timing.
    pub stats: TimingStats,
}

/// Why a candidate was not (or could not be) measured. A failed candidate never wins.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum CandidateError {
    /// The template's `check()` refused the config (static, before compiling).
    #[error("rejected by the template's constraints: {0}")]
    Rejected(String),
    /// The compiler failed; carries its log.
    #[error("compile failed:\n{0}")]
    Compile(String),
    /// The kernel compiled but its resources disqualify it (spills, too many registers, ...).
    #[error("resources: {reason}")]
    Resources {
        /// What disqualified it.
        reason: String,
        /// The reported use.
        usage: ResourceUsage,
    },
    /// The output differs from the reference by more than the bound.
    #[error("wrong result: relative error {rel_err:e} exceeds {bound:e}")]
    WrongResult {
        /// Measured relative error (may be NaN or infinite).
        rel_err: f64,
        /// The bound.
        bound: f64,
    },
    /// A sticky device error (e.g. an illegal address): the context that ran it is lost.
    #[error("device fault (context lost): {0}")]
    Fault(String),
    /// The candidate did not finish in time (a watchdog killed its worker).
    #[error("timed out after {after_ms} ms")]
    Timeout {
        /// The watchdog limit that expired.
        after_ms: u64,
    },
    /// The worker process died while handling the candidate.
    #[error("worker process crashed: {0}")]
    WorkerCrashed(String),
    /// The timing could not be summarised (no samples, a NaN sample, a bad protocol).
    #[error("unmeasurable: {0}")]
    Unmeasurable(String),
}

impl From<ConstraintViolation> for CandidateError {
    fn from(v: ConstraintViolation) -> Self {
        CandidateError::Rejected(v.reason)
    }
}

impl CandidateError {
    /// Short stable name of the variant (`rejected`, `compile`, `resources`, `wrong_result`,
    /// `fault`, `timeout`, `worker_crashed`, `unmeasurable`), used in fixtures and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            CandidateError::Rejected(_) => "rejected",
            CandidateError::Compile(_) => "compile",
            CandidateError::Resources { .. } => "resources",
            CandidateError::WrongResult { .. } => "wrong_result",
            CandidateError::Fault(_) => "fault",
            CandidateError::Timeout { .. } => "timeout",
            CandidateError::WorkerCrashed(_) => "worker_crashed",
            CandidateError::Unmeasurable(_) => "unmeasurable",
        }
    }

    /// True for failures found without running the kernel (constraint check, compile, resource
    /// report): they cost no GPU time and do not count against a strategy's budget.
    pub fn is_static(&self) -> bool {
        Self::kind_is_static(self.kind())
    }

    /// [`CandidateError::is_static`] for a [`CandidateError::kind`] name.
    pub fn kind_is_static(kind: &str) -> bool {
        matches!(kind, "rejected" | "compile" | "resources")
    }

    /// True when the process that ran the candidate must not run another (sticky fault, crash,
    /// hang): an in-process backend cannot recover from these, a worker is respawned.
    pub fn poisons_context(&self) -> bool {
        matches!(
            self,
            CandidateError::Fault(_)
                | CandidateError::Timeout { .. }
                | CandidateError::WorkerCrashed(_)
        )
    }
}

/// Receives compile results as they finish, in any order (`index` is the position in the batch).
pub struct CompileSink<'s> {
    emit: &'s (dyn Fn(usize, Result<ResourceUsage, CandidateError>) + Sync),
    cancel: &'s AtomicBool,
}

impl<'s> CompileSink<'s> {
    /// A sink that forwards results to `emit` and stops early once `cancel` is set.
    pub fn new(
        emit: &'s (dyn Fn(usize, Result<ResourceUsage, CandidateError>) + Sync),
        cancel: &'s AtomicBool,
    ) -> Self {
        CompileSink { emit, cancel }
    }

    /// Reports the result for batch position `index`.
    pub fn emit(&self, index: usize, result: Result<ResourceUsage, CandidateError>) {
        (self.emit)(index, result)
    }

    /// True once the tuner no longer wants results (time budget spent); skip the rest.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Compiles, verifies and times configs of template `T`.
pub trait TuneBackend<T: Template>: Sync {
    /// Compiles `config` (idempotent: a second call for the same config may hit a cache) and
    /// reports its resource use.
    fn compile(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
    ) -> Result<ResourceUsage, CandidateError>;

    /// Runs `config` once on FRESH random inputs drawn from `seed` (the tuner passes a new seed
    /// on every call) and compares the output with a reference.
    fn verify(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        seed: u64,
    ) -> Result<VerifyReport, CandidateError>;

    /// Times `config` under `protocol` (L2 flush / input rotation between samples as it asks).
    fn time(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError>;

    /// How many compiles [`TuneBackend::compile_many`] runs at once (NVRTC instances hold
    /// hundreds of MB each); defaults to [`crate::aot::default_jobs`] (cores, capped by memory,
    /// or `RTX_COMPILE_JOBS`).
    fn compile_parallelism(&self) -> usize {
        crate::aot::default_jobs()
    }

    /// True when a failure that [`CandidateError::poisons_context`] leaves the backend usable
    /// (a worker backend respawns its process). False for in-process backends: after a sticky
    /// fault the tuner stops measuring and keeps what it measured before.
    fn isolates_faults(&self) -> bool {
        false
    }

    /// Compiles a batch, reporting each result through `sink` as it finishes. The default runs
    /// [`TuneBackend::compile`] on [`TuneBackend::compile_parallelism`] threads; a backend may
    /// batch instead (one worker request, one NVRTC program with several kernels, ...).
    fn compile_many(&self, task: &TuneTask<'_, T>, configs: &[T::Config], sink: &CompileSink<'_>) {
        let next = AtomicUsize::new(0);
        let threads = self.compile_parallelism().clamp(1, configs.len().max(1));
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= configs.len() || sink.is_cancelled() {
                        break;
                    }
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.compile(task, &configs[i])
                    }));
                    match r {
                        Ok(r) => sink.emit(i, r),
                        Err(_) => sink.emit(
                            i,
                            Err(CandidateError::Compile("the compiler panicked".into())),
                        ),
                    }
                });
            }
        });
    }

    /// Verifies then times `config`; a failed verification is [`CandidateError::WrongResult`]
    /// and the candidate is not timed. Worker backends override this with one round trip.
    fn evaluate(
        &self,
        task: &TuneTask<'_, T>,
        config: &T::Config,
        seed: u64,
        protocol: &MeasureProtocol,
    ) -> Result<Evaluation, CandidateError> {
        let verify = self.verify(task, config, seed)?;
        if !verify.passed() {
            return Err(CandidateError::WrongResult {
                rel_err: verify.rel_err,
                bound: verify.bound,
            });
        }
        let stats = self.time(task, config, protocol)?;
        Ok(Evaluation { verify, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stable_and_classified() {
        let all = [
            CandidateError::Rejected("x".into()),
            CandidateError::Compile("log".into()),
            CandidateError::Resources {
                reason: "spills".into(),
                usage: ResourceUsage::default(),
            },
            CandidateError::WrongResult {
                rel_err: 1.0,
                bound: 0.01,
            },
            CandidateError::Fault("illegal address".into()),
            CandidateError::Timeout { after_ms: 5 },
            CandidateError::WorkerCrashed("abort".into()),
            CandidateError::Unmeasurable("nan".into()),
        ];
        let kinds: Vec<_> = all.iter().map(|e| e.kind()).collect();
        assert_eq!(
            kinds,
            [
                "rejected",
                "compile",
                "resources",
                "wrong_result",
                "fault",
                "timeout",
                "worker_crashed",
                "unmeasurable"
            ]
        );
        let statics: Vec<_> = all
            .iter()
            .filter(|e| e.is_static())
            .map(|e| e.kind())
            .collect();
        assert_eq!(statics, ["rejected", "compile", "resources"]);
        let poison: Vec<_> = all
            .iter()
            .filter(|e| e.poisons_context())
            .map(|e| e.kind())
            .collect();
        assert_eq!(poison, ["fault", "timeout", "worker_crashed"]);
        for e in &all {
            let back: CandidateError =
                serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
            assert_eq!(&back, e);
        }
    }

    #[test]
    fn verify_needs_a_finite_error_within_bound() {
        assert!(VerifyReport {
            rel_err: 1e-3,
            bound: 2e-2
        }
        .passed());
        assert!(!VerifyReport {
            rel_err: 3e-2,
            bound: 2e-2
        }
        .passed());
        assert!(!VerifyReport {
            rel_err: f64::NAN,
            bound: 2e-2
        }
        .passed());
        assert!(!VerifyReport {
            rel_err: f64::INFINITY,
            bound: f64::INFINITY
        }
        .passed());
    }

    #[test]
    fn aot_reports_convert() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
                   ptxas info    : Function properties for k\n\
                   ptxas         .    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
                   ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem\n";
        let reports = crate::aot::parse_ptxas_log(log, crate::Arch::Sm90a);
        let k = reports.iter().find(|r| r.function == "k").expect("parsed");
        let u = ResourceUsage::from(k);
        assert_eq!(u.registers, Some(255));
        assert_eq!(
            (u.spill_store_bytes, u.spill_load_bytes, u.static_smem_bytes),
            (4, 4, 1024)
        );
        assert!(u.spills());
    }

    #[test]
    fn spills_are_detected() {
        assert!(!ResourceUsage::default().spills());
        assert!(ResourceUsage {
            spill_load_bytes: 4,
            ..Default::default()
        }
        .spills());
    }
}
