//! rtx-synthesis: turns an operation into the fastest kernel it can find for the GPU at hand.
//!
//! - [`profiler`]: detect the GPU, measure its real ceilings, datasheet database.
//! - [`templates`]: parameterized kernels emitted as CUDA C++ from typed configs.
//! - [`aot`]: NVRTC to cubin, resource reports, a content-addressed on-disk cache, bundles.
//! - [`tuner`]: search a template's space by real measurement; the persistent tuning database.
//! - [`synth`]: the user API ([`Synth`]): pick a template, serve the tuned config, compile, load.

// Errors carry names, shapes and compiler logs and are returned on cold paths (a failed compile,
// launch or check), where a larger `Result` costs nothing measurable; boxing them would only
// cost the `?` conversions their `#[from]` variants give.
#![allow(clippy::result_large_err)]

pub mod aot;
pub mod dtype;
pub mod profiler;
pub mod synth;
pub mod target;
pub mod templates;
pub mod tuner;

pub use dtype::DType;
pub use synth::Synth;
pub use target::Arch;
