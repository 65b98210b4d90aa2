//! Ahead-of-time compilation: NVRTC straight to cubin, resource reports, and the on-disk cache.

pub mod nvrtc;
pub mod toolchain;

pub use nvrtc::{compile, nvrtc_calls, CompileError, Compiled};
pub use toolchain::{Toolchain, ToolchainError};
