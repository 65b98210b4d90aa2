//! Host side of the row kernels: build (emit + NVRTC + load) and launch with checked buffers.

use super::config::{RowConfig, RowStrategy};
use super::problem::RowProblem;
use super::template::RowReduceTemplate;
use crate::templates::elementwise::launch::{
    device_arch, launch_config, need, DeviceSlice, DeviceSliceMut, LaunchError, LoadedKernel,
};
use crate::templates::{LaunchDims, Template};
use rtx_runtime::{Device, Function, KernelArgs, Stream};

/// The tensors of one row-kernel launch (the ones the problem does not use must be `None`).
#[derive(Debug)]
pub struct RowBuffers<'a> {
    /// Input, `rows x cols`.
    pub x: DeviceSlice<'a>,
    /// Residual input, `rows x cols` (with a fused residual).
    pub residual: Option<DeviceSlice<'a>>,
    /// Weight, `cols` (when the op has one).
    pub weight: Option<DeviceSlice<'a>>,
    /// Bias, `cols` (when the op has one).
    pub bias: Option<DeviceSlice<'a>>,
    /// Output, `rows x cols`.
    pub y: DeviceSliceMut<'a>,
    /// Summed residual stream out, `rows x cols` (with a fused residual).
    pub residual_out: Option<DeviceSliceMut<'a>>,
}

/// A built row kernel.
#[derive(Debug)]
pub struct RowReduceKernel {
    /// The problem it was built for.
    problem: RowProblem,
    /// The config.
    config: RowConfig,
    /// The loaded kernel.
    kernel: LoadedKernel,
}

impl RowReduceKernel {
    /// The problem it was built for.
    pub fn problem(&self) -> &RowProblem {
        &self.problem
    }

    /// The config.
    pub fn config(&self) -> &RowConfig {
        &self.config
    }

    /// The loaded kernel.
    pub fn kernel(&self) -> &LoadedKernel {
        &self.kernel
    }

    /// Emits, compiles and loads the kernel for `device`'s architecture.
    pub fn build(
        device: &Device,
        problem: &RowProblem,
        config: &RowConfig,
    ) -> Result<Self, LaunchError> {
        let arch = device_arch(device)?;
        let source = RowReduceTemplate.emit(problem, config, arch)?;
        let kernel = LoadedKernel::load(device, source, arch)?;
        Ok(RowReduceKernel {
            problem: *problem,
            config: *config,
            kernel,
        })
    }

    /// Launch shape for `rows` rows.
    pub fn dims(&self, rows: u32) -> LaunchDims {
        RowReduceTemplate.launch(
            &RowProblem {
                rows,
                ..self.problem
            },
            &self.config,
        )
    }

    /// Launches over the problem's own shape.
    pub fn launch(&self, stream: &Stream, bufs: RowBuffers<'_>) -> Result<(), LaunchError> {
        self.launch_shape(stream, bufs, self.problem.rows, self.problem.cols)
    }

    /// Launches over `rows x cols` (both run-time kernel arguments; a register-cached config
    /// refuses rows longer than its capacity).
    pub fn launch_shape(
        &self,
        stream: &Stream,
        bufs: RowBuffers<'_>,
        rows: u32,
        cols: u32,
    ) -> Result<(), LaunchError> {
        let p = RowProblem {
            rows,
            cols,
            ..self.problem
        };
        enqueue_rows(self.kernel.function(), &p, &self.config, stream, bufs)
    }
}

/// Launches `function` (compiled from [`RowReduceTemplate::emit`] for `p`'s op, dtype and fused
/// parts with `config`) over `p`'s shape on `stream`, without synchronizing: checks the shape
/// against the config and that every buffer lives on `stream`'s device and holds the bytes the
/// kernel touches first.
pub fn enqueue_rows(
    function: &Function,
    p: &RowProblem,
    config: &RowConfig,
    stream: &Stream,
    bufs: RowBuffers<'_>,
) -> Result<(), LaunchError> {
    let (rows, cols) = (p.rows, p.cols);
    {
        p.validate().map_err(|e| LaunchError::Shape {
            rows,
            cols,
            reason: e.what,
        })?;
        if let (RowStrategy::Registers { .. }, Some(cap)) = (config.strategy, config.capacity()) {
            if cols as u64 > cap {
                return Err(LaunchError::Shape {
                    rows,
                    cols,
                    reason: format!("longer than the register capacity {cap} of {:?}", config),
                });
            }
        }
        if rows as u64 * cols as u64 >= 1u64 << 40 {
            return Err(LaunchError::Shape {
                rows,
                cols,
                reason: "too many elements".into(),
            });
        }
        let size = p.dtype.size_bytes() as u64;
        let full = rows as u64 * cols as u64 * size;
        let row = cols as u64 * size;
        let presence = |what: &str, want: bool, have: bool| -> Result<(), LaunchError> {
            if want != have {
                let reason = if want {
                    "is required by this problem"
                } else {
                    "is not used by this problem"
                };
                return Err(LaunchError::TooSmall {
                    what: format!("{what} {reason}"),
                    needed: 0,
                    got: 0,
                });
            }
            Ok(())
        };
        presence("residual", p.residual, bufs.residual.is_some())?;
        presence("residual_out", p.residual, bufs.residual_out.is_some())?;
        presence("weight", p.op.has_weight(), bufs.weight.is_some())?;
        presence("bias", p.op.has_bias(), bufs.bias.is_some())?;
        const OP: &str = "enqueue_rows";
        let inputs = [
            Some(&bufs.x),
            bufs.residual.as_ref(),
            bufs.weight.as_ref(),
            bufs.bias.as_ref(),
        ];
        for s in inputs.into_iter().flatten() {
            s.buf.check_on_stream_device(stream, OP)?;
        }
        for s in std::iter::once(&bufs.y).chain(bufs.residual_out.as_ref()) {
            s.buf.check_on_stream_device(stream, OP)?;
        }
        let mut args = KernelArgs::new();
        need("x", full, bufs.x.bytes())?;
        args.u64(bufs.x.ptr());
        if let Some(r) = &bufs.residual {
            need("residual", full, r.bytes())?;
            args.u64(r.ptr());
        }
        if let Some(w) = &bufs.weight {
            need("weight", row, w.bytes())?;
            args.u64(w.ptr());
        }
        if let Some(b) = &bufs.bias {
            need("bias", row, b.bytes())?;
            args.u64(b.ptr());
        }
        need("y", full, bufs.y.bytes())?;
        args.u64(bufs.y.ptr());
        if let Some(h) = &bufs.residual_out {
            need("residual_out", full, h.bytes())?;
            args.u64(h.ptr());
        }
        args.i32(rows as i32).i32(cols as i32);
        if p.op.is_norm() {
            args.f32(p.eps);
        }
        let cfg = launch_config(&RowReduceTemplate.launch(p, config));
        // SAFETY: the arguments follow the kernel signature (tensor pointers in the order of
        // `RowProblem::tensors`, then rows, cols and, for norms, eps); every buffer holds the
        // bytes the kernel touches (checked above) and is borrowed for the call; the caller must
        // not free or reuse them on another stream before `stream` has run the launch.
        unsafe { function.launch(stream, &cfg, &mut args)? };
        Ok(())
    }
}
