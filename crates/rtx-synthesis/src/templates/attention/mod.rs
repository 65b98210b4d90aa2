//! Fused attention forward (FlashAttention-2 style): `O = softmax(Q K^T * scale [+ causal
//! mask]) V` for f16 / bf16 `[batch, heads, seq, head_dim]` tensors, head_dim 64 or 128, on
//! `mma.sync` tensor cores (sm_80+: Ampere, Ada, Hopper, consumer Blackwell).
//!
//! - [`problem`]: the operation, shape, dtype, mask and scale, with typed validation.
//! - [`config`]: the tunable parameters (block_m, block_n, warps, stages).
//! - [`template`]: the [`crate::templates::Template`] implementation.
//! - [`device`]: the CUDA C++ of the kernel.
//! - [`mod@reference`]: the f64 CPU reference.
//! - [`launch`]: build and checked launches on a device.

pub mod config;
pub mod device;
pub mod launch;
pub mod problem;
pub mod reference;
pub mod template;

pub use config::AttentionConfig;
pub use launch::{
    AttentionBuffers, AttentionKernel, AttentionLaunchError, AttentionLayout, AttentionStrides,
};
pub use problem::{AttentionProblem, AttentionProblemError};
pub use reference::{attention_f64, attention_row_f64, AttentionInputs, ReferenceError};
pub use template::AttentionTemplate;
