//! The autotuner: searches a [`Template`](crate::templates::Template)'s space by real
//! measurement and remembers the winners.
//!
//! - [`measure`]: the measurement protocol and timing statistics; ties within the noise.
//! - [`backend`]: the [`TuneBackend`] trait (compile, verify on fresh inputs, time) and
//!   [`CandidateError`].
//! - [`space`] and [`strategy`]: the search space in JSON coordinates and the strategies
//!   (exhaustive, random, guided) that walk it.
//! - [`tuner`](mod@tuner): one tuning run ([`Tuner::tune`]) and its [`TuneOutcome`].
//! - [`worker`]: fault isolation in worker processes ([`WorkerBackend`], [`worker_main`]).
//! - [`key`] and [`db`]: the persistent tuning database and its keys.
//! - [`gpu_lock`]: one measuring process per GPU at a time ([`GpuLock`]).
//! - [`mod@replay`]: strategies replayed over recorded timing tables.
//!
//! ```no_run
//! # use rtx_synthesis::tuner::*;
//! # fn demo<T: rtx_synthesis::templates::Template, B: TuneBackend<T>>(t: &T, p: &T::Problem, b: &B)
//! # -> Result<(), Box<dyn std::error::Error>> where T::Problem: ProblemSignature {
//! let arch = rtx_synthesis::Arch::Sm90a;
//! let device = DeviceKey::new("NVIDIA H200", (9, 0), (13, 0));
//! let mut db = TuningDb::open_default()?;
//! let found = db.lookup(t, p, arch, &device, &LookupPolicy::default())?;
//! if found.source != LookupSource::Exact {
//!     let mut strategy = Guided::new(0, Budget::Fraction(0.15));
//!     let outcome = Tuner::default().tune(t, p, arch, b, &mut strategy, &MeasureProtocol::default(), &mut NoProgress)?;
//!     db.insert(DbEntry::from_outcome(t, p, arch, &device, &outcome, 3)?)?;
//! }
//! # Ok(()) }
//! ```

pub mod backend;
pub mod cost;
pub mod db;
pub mod gpu_lock;
pub mod key;
pub mod measure;
pub mod replay;
pub mod space;
pub mod strategy;
#[allow(clippy::module_inception)]
pub mod tuner;
pub mod worker;

#[cfg(test)]
pub(crate) mod testing;

pub use backend::{
    CandidateError, CompileSink, Evaluation, ResourceUsage, TuneBackend, TuneTask, VerifyReport,
};
pub use cost::{cost_model_for_table, DeviceFacts, TemplateCostModel};
pub use db::{
    DbEntry, DbError, Lookup, LookupPolicy, LookupSource, MergeReport, StoredConfig, TuningDb,
};
pub use gpu_lock::{GpuLock, GpuLockError, LockPolicy};
pub use key::{DeviceKey, OpSignature, ProblemSignature, TuneKey};
pub use measure::{
    is_tie, run_protocol, run_protocol_batched, tie_tolerance, MeasureProtocol, TimingStats, Warmup,
};
pub use replay::{replay, ReplayResult, ReplayRow, ReplayTable};
pub use space::SearchSpace;
pub use strategy::{
    Budget, CostModel, Exhaustive, Guided, GuidedParams, Observation, RandomSearch, Strategy,
};
pub use tuner::{
    CandidateRecord, CandidateResult, NoProgress, PassedOver, ProgressSnapshot, TuneError,
    TuneOptions, TuneOutcome, TunePhase, TuneProgress, Tuner,
};
pub use worker::{
    worker_main, WorkerBackend, WorkerCommand, WorkerExit, WorkerOptions, WorkerStats,
};
