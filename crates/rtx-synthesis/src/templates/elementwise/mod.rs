//! Fused elementwise kernels: a typed expression graph compiled into one memory-bound kernel.
//!
//! - [`expr`]: the IR (inputs with broadcasting, ops, outputs), builder and validation.
//! - [`problem`]: a graph over a `rows x cols` space.
//! - [`config`]: the tunable parameters.
//! - [`template`]: the [`crate::templates::Template`] implementation (CUDA C++ emission).
//! - [`presets`]: named graphs (bias + GELU, SiLU gate, an 8-op chain).
//! - [`mod@reference`]: the f64 CPU reference and the element-by-element comparison.
//! - [`device`]: device code shared with the row-reduction templates.
//! - [`host_emulation`]: a C++ shim that runs the generated kernels as CPU fibers (logic tests).
//! - [`launch`]: build (emit + NVRTC + load) and checked launches on a device.

pub mod config;
pub mod device;
pub mod expr;
pub mod host_emulation;
pub mod launch;
pub mod presets;
pub mod problem;
pub mod reference;
pub mod template;

pub use config::{ElementwiseConfig, GridMode};
pub use expr::{
    BinaryOp, Broadcast, ExprGraph, GraphBuilder, GraphError, InputSpec, Node, OutputSpec, UnaryOp,
    ValueRef,
};
pub use launch::{
    enqueue_elementwise, DeviceSlice, DeviceSliceMut, ElementwiseKernel, LaunchError,
};
pub use problem::{ElementwiseProblem, ElementwiseProblemError};
pub use template::ElementwiseTemplate;
