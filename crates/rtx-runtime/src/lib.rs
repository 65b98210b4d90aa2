//! rtx-runtime: owned CUDA devices, streams, events, a caching allocator and module loading.
//!
//! Everything is reached through `cudarc` with dynamic loading, so this crate builds and its
//! CPU-side tests run on machines without CUDA; [`Device::count`] is 0 there. Every call binds
//! the device's (primary) context to the calling thread, so handles may be used from any thread.
#![warn(missing_docs)]

pub mod alloc;
pub mod blas;
mod device;
mod device_info;
mod error;
mod event;
mod kernel_args;
mod launch_config;
mod module;
mod raw;
mod stream;
pub mod tensor_map;

pub use alloc::{AllocStats, CachingAllocator, DeviceBuffer};
pub use blas::{Blas, BlasDtype, BlasGemm};
pub use device::{driver_available, Device};
pub use device_info::DeviceInfo;
pub use error::RuntimeError;
pub use event::{Event, EventPairs};
pub use kernel_args::{KernelArgs, MAX_ARG_ALIGN};
pub use launch_config::LaunchConfig;
pub use module::{prepare_image, Function, FunctionAttributes, ImageKind, Module};
pub use stream::Stream;
pub use tensor_map::{encode_tensor_map_2d, L2Promotion, Swizzle, TensorMap2d, TensorMapDtype};

/// Re-export of the `cudarc` version this crate is built on (for raw handles).
pub use cudarc;
