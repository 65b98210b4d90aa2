//! Hardware profiler: what the GPU is, what it can really do, and what its datasheet says.
//!
//! - [`detect`](mod@detect): [`Capabilities`] (architecture, tensor-core generation, TMA, limits) from the
//!   driver's [`rtx_runtime::DeviceInfo`]; pure.
//! - [`micro`]: the micro-benchmark kernels (copy, FMA, `mma.sync`, `wgmma`, empty launch).
//! - [`hwdb`]: datasheet figures matched by device name + compute capability ([`lookup`]).
//! - [`profile`]: [`DeviceProfile`] / [`Ceilings`] and the [`ProfileStore`] that saves them per
//!   device name + driver version.
//! - [`measure`]: runs the micro-benchmarks on a device ([`measure_ceilings`], [`measure_report`])
//!   and serves the saved profile ([`profile_device`], re-measured with `reprofile`).
//! - [`timing`]: event timing (warm-up, back-to-back runs, median); [`report`]: every figure
//!   next to its datasheet value.

pub mod detect;
pub mod hwdb;
pub mod measure;
pub mod micro;
pub mod profile;
pub mod report;
pub mod timing;

pub use detect::{detect, Capabilities, DetectError, TensorCoreGen};
pub use hwdb::{lookup, HwEntry};
pub use measure::{
    effective_ceilings, measure_ceilings, measure_profile, measure_report, new_profile,
    plausible_bound, profile_device, profile_device_in, profile_key, MeasureError, MeasureOptions,
};
pub use profile::{Ceilings, DeviceProfile, ProfileError, ProfileKey, ProfileStore};
pub use report::{Failure, Figure, MeasureReport, Quantity};
pub use timing::Timing;
