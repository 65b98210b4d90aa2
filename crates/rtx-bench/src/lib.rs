//! rtx-bench: the benchmark driver's testable parts.
//!
//! - [`report`]: the versioned `report.json` model; [`markdown`]: its table rendering.
//! - [`anchors`]: PyTorch anchor figures and the case-naming convention that maps onto them.
//! - [`gate`]: regression gate against a per-device baseline.
//! - [`registry`]: every kernel instance the CPU-side suite compiles.
//! - [`stats`]: medians, percentiles, spread.

pub mod anchors;
mod device_info_compat;
pub mod env_info;
pub mod gate;
pub mod markdown;
pub mod plots;
pub mod progress;
pub mod ptxas_fallback;
pub mod registry;
pub mod report;
pub mod samples;
pub mod stats;
pub mod suite_id;

/// The device description stored in reports (the runtime's `DeviceInfo`).
pub use device_info_compat::DeviceInfo;
pub use report::{Case, Report};
pub use suite_id::SuiteId;
