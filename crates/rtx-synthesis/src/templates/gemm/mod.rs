//! GEMM templates: `C = act(alpha * op(A) op(B) + beta * C + bias) + residual`, fp32 accumulation.
//!
//! - [`problem`]: the operation signature shared by every GEMM template.
//! - [`mod@reference`]: an f64 CPU reference used to verify GPU results.
//! - [`space`]: typed configs, derived geometry and constraint checks of the SIMT / mma templates.
//! - [`prelude`]: device code shared by the templates (conversions, cp.async, epilogue).
//! - [`simt`]: fp32 CUDA-core GEMM (sm_70+).
//! - [`mma`]: tensor-core GEMM with `mma.sync` for f16 / bf16 / tf32 (sm_80+).
//! - [`launch`]: host-side launch of any GEMM template's kernel (the shared ABI).
//! - [`wgmma`]: Hopper warpgroup-MMA GEMM (sm_90a).

pub mod launch;
pub mod mma;
pub mod prelude;
pub mod problem;
pub mod reference;
pub mod simt;
pub mod space;
pub mod wgmma;

/// SMs a device-dependent GEMM template assumes when no device is named ([`MmaGemm::default`],
/// [`wgmma::WgmmaGemm::default`]): an H100 SXM / H200.
pub const DEFAULT_SM_COUNT: u32 = 132;

pub use launch::{alloc_split_k_workspace, launch_gemm, ExtraArg, GemmBuffers, GemmLaunchError};
pub use mma::MmaGemm;
pub use problem::{Activation, Epilogue, GemmProblem, Layout};
pub use simt::SimtGemm;
pub use space::{MmaConfig, SimtConfig};
