//! Row reductions: softmax, LayerNorm and RMSNorm (with optional affine weight/bias and a
//! fused residual add), f32/f16/bf16 storage with f32 accumulation.
//!
//! - [`problem`]: the operation, shape, dtype and fused parts.
//! - [`config`]: the tunable parameters (vector width, threads per row, rows per block,
//!   register-cached or looped).
//! - [`template`]: the [`crate::templates::Template`] implementation.
//! - [`device`]: the shuffle / shared-memory reduction helpers.
//! - [`mod@reference`]: the f64 CPU reference.
//! - [`launch`]: build and checked launches on a device.

pub mod config;
pub mod device;
pub mod launch;
pub mod problem;
pub mod reference;
pub mod template;

pub use config::{RowConfig, RowStrategy};
pub use launch::{enqueue_rows, RowBuffers, RowReduceKernel};
pub use problem::{RowOp, RowProblem, RowProblemError};
pub use template::RowReduceTemplate;
