//! rtx-bench: the benchmark driver's testable parts (the binary is a thin `main` over [`cli`]).
//!
//! - [`cli`] and [`runner`]: arguments, GPU detection, running suites, writing the outputs;
//!   [`checkpoint`]: the partial report kept on disk while a run goes.
//! - [`suites`]: the [`suites::Suite`] trait and the gemm / attention / memory / transformer /
//!   tuning / aot suites; [`registry`]: every kernel instance the compile suite builds.
//! - [`report`]: the versioned `report.json` model; [`markdown`] and [`plots`] render it.
//! - [`anchors`]: PyTorch anchor figures and the naming convention that maps cases onto them.
//! - [`gate`]: the regression gate against a per-device baseline.
//! - [`graphs`]: the elementwise graphs benchmarked (fused and one kernel per op).
//! - [`timing`]: the CUDA-event timing harness; [`stats`]: medians, percentiles, spread.

// Errors carry names, shapes and compiler logs and are returned on cold paths (a failed compile,
// launch or check), where a larger `Result` costs nothing measurable; boxing them would only
// cost the `?` conversions their `#[from]` variants give.
#![allow(clippy::result_large_err)]

pub mod anchors;
pub mod checkpoint;
pub mod cli;
pub mod env_info;
pub mod gate;
pub mod gpu;
pub mod graphs;
pub mod markdown;
pub mod plots;
pub mod progress;
pub mod registry;
pub mod report;
pub mod runner;
pub mod samples;
pub mod stats;
pub mod suite_id;
pub mod suites;
pub mod timing;

pub use report::{Case, Report};
/// The device description stored in reports.
pub use rtx_runtime::DeviceInfo;
pub use suite_id::SuiteId;
