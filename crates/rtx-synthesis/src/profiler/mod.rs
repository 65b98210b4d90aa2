//! Hardware profiler: what the GPU is, what it can really do, and what its datasheet says.
//!
//! - [`detect`]: [`Capabilities`] (architecture, tensor-core generation, TMA, limits) from the
//!   driver's [`rtx_runtime::DeviceInfo`]; pure.
//! - [`micro`]: the micro-benchmark kernels (copy, FMA, `mma.sync`, `wgmma`, empty launch).
//! - [`hwdb`]: datasheet figures matched by device name + compute capability ([`lookup`]).
//! - [`profile`]: [`DeviceProfile`] / [`Ceilings`] and the [`ProfileStore`] that saves them per
//!   device name + driver version.

pub mod detect;
pub mod hwdb;
pub mod micro;
pub mod profile;

pub use detect::{detect, Capabilities, DetectError, TensorCoreGen};
pub use hwdb::{lookup, HwEntry};
pub use profile::{Ceilings, DeviceProfile, ProfileError, ProfileKey, ProfileStore};
