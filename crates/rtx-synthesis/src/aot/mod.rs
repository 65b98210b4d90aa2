//! Ahead-of-time compilation: NVRTC straight to cubin, resource reports, parallel compiles,
//! the content-addressed on-disk cache and deployment bundles.
//!
//! - [`nvrtc`]: one NVRTC compile ([`compile`]), counted by [`nvrtc_calls`].
//! - [`resources`]: ptxas `-v` lines parsed into [`ResourceUsage`] per function, and
//!   [`ResourceReport`] from either ptxas or the driver's attributes of a loaded kernel.
//! - [`parallel`]: [`compile_many`] on a bounded, dedicated rayon pool.
//! - [`cache`]: [`KernelCache`], content-addressed, atomic, corruption-checked.
//! - [`bundle`]: [`Bundle`], a folder of cubins + `manifest.json` for NVRTC-free deployment.
//! - [`codegen`]: the kernels a deployment needs (ops manifest and/or tuning database), compiled
//!   for several architectures into a bundle (`cargo xtask codegen`).
//! - [`fsio`]: atomic writes and the versioned, checksummed frame shared with the profile store.

pub mod bundle;
pub mod cache;
pub mod codegen;
pub mod fsio;
pub mod nvrtc;
pub mod parallel;
pub mod resources;
pub mod toolchain;

pub use bundle::{Bundle, BundleEntry, BundleError, BundleManifest, KernelBinary};
pub use cache::{
    cache_key, CacheCounters, CacheEntry, CacheError, CacheStats, CachedKernel, EntryError,
    EntryInfo, KernelCache,
};
pub use nvrtc::{compile, nvrtc_calls, options_for, CompileError, Compiled, NVRTC_CACHE_SINCE};
pub use parallel::{compile_many, compile_many_refs, default_jobs, map_bounded};
pub use resources::{
    parse_ptxas_log, ptxas_report_in, resource_report, MissingPtxasReport, ResourceReport,
    ResourceSource, ResourceUsage,
};
pub use toolchain::{nvrtc_or_skip, Toolchain, ToolchainError};
