//! The autotuner: searches a [`Template`](crate::templates::Template)'s space by real
//! measurement and remembers the winners.
//!
//! - [`measure`]: the measurement protocol and timing statistics; ties within the noise.
//! - [`backend`]: the [`TuneBackend`] trait (compile, verify on fresh inputs, time) and
//!   [`CandidateError`].
//! - [`space`] and [`strategy`]: the search space in JSON coordinates and the strategies
//!   (exhaustive, random, guided) that walk it.
//! - [`replay`]: strategies replayed over recorded timing tables.

pub mod backend;
pub mod measure;
pub mod space;
pub mod strategy;

pub use backend::{CandidateError, CompileSink, Evaluation, ResourceUsage, TuneBackend, TuneTask, VerifyReport};
pub use measure::{is_tie, run_protocol, MeasureProtocol, TimingStats, Warmup};
pub use space::SearchSpace;
pub use strategy::{Budget, CostModel, Exhaustive, Guided, GuidedParams, Observation, RandomSearch, Strategy};
