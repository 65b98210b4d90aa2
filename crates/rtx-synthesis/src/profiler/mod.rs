//! Hardware profiler: the datasheet database, and saved per-device profiles of measured ceilings.
//!
//! - [`hwdb`]: datasheet figures matched by device name + compute capability ([`lookup`]).
//! - [`profile`]: [`DeviceProfile`] / [`Ceilings`] and the [`ProfileStore`] that saves them per
//!   device name + driver version.
//!
//! The measurement kernels that fill [`Ceilings`] on a real GPU come in a later step.

pub mod hwdb;
pub mod profile;

pub use hwdb::{lookup, HwEntry};
pub use profile::{Ceilings, DeviceProfile, ProfileError, ProfileKey, ProfileStore};
