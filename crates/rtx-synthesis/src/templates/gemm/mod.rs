//! GEMM templates: `C = act(alpha * op(A) op(B) + beta * C + bias) + residual`, fp32 accumulation.
//!
//! - [`problem`]: the operation signature shared by every GEMM template.
//! - [`reference`]: an f64 CPU reference used to verify GPU results.

pub mod problem;
pub mod reference;
pub mod wgmma;

pub use problem::{Activation, Epilogue, GemmProblem, Layout};
