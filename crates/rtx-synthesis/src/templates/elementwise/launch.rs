//! Host side of the memory-bound templates: build (emit + NVRTC + load) and launch.
//!
//! [`DeviceSlice`] / [`DeviceSliceMut`] name a tensor inside a [`DeviceBuffer`] (optionally at a
//! byte offset, e.g. to exercise the unaligned path); the borrow checker keeps outputs from
//! aliasing inputs. Every launch validates the problem, checks the argument count and that each
//! buffer lives on the stream's device and holds the bytes the kernel will touch before anything
//! reaches the driver. Row reductions reuse these types (see `reduce::launch`).

use super::config::ElementwiseConfig;
use super::problem::ElementwiseProblem;
use super::template::ElementwiseTemplate;
use crate::aot::{self, CompileError};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::Arch;
use rtx_runtime::{
    Device, DeviceBuffer, Function, KernelArgs, LaunchConfig, Module, RuntimeError, Stream,
};

/// A read-only tensor: `buf` from byte `offset` on.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSlice<'a> {
    /// The buffer.
    pub buf: &'a DeviceBuffer,
    /// Byte offset of the tensor's first element.
    pub offset: usize,
}

/// A written tensor: `buf` from byte `offset` on.
#[derive(Debug)]
pub struct DeviceSliceMut<'a> {
    /// The buffer.
    pub buf: &'a mut DeviceBuffer,
    /// Byte offset of the tensor's first element.
    pub offset: usize,
}

impl<'a> DeviceSlice<'a> {
    /// The whole buffer.
    pub fn whole(buf: &'a DeviceBuffer) -> Self {
        DeviceSlice { buf, offset: 0 }
    }

    /// From byte `offset` on.
    pub fn at(buf: &'a DeviceBuffer, offset: usize) -> Self {
        DeviceSlice { buf, offset }
    }

    /// Device address of the first element.
    pub fn ptr(&self) -> u64 {
        self.buf.ptr() + self.offset as u64
    }

    /// Bytes available from the first element.
    pub fn bytes(&self) -> usize {
        self.buf.len().saturating_sub(self.offset)
    }
}

impl<'a> DeviceSliceMut<'a> {
    /// The whole buffer.
    pub fn whole(buf: &'a mut DeviceBuffer) -> Self {
        DeviceSliceMut { buf, offset: 0 }
    }

    /// From byte `offset` on.
    pub fn at(buf: &'a mut DeviceBuffer, offset: usize) -> Self {
        DeviceSliceMut { buf, offset }
    }

    /// Device address of the first element.
    pub fn ptr(&self) -> u64 {
        self.buf.ptr() + self.offset as u64
    }

    /// Bytes available from the first element.
    pub fn bytes(&self) -> usize {
        self.buf.len().saturating_sub(self.offset)
    }
}

/// Why a memory-bound kernel could not be built or launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The device's architecture is unknown to rtx.
    #[error("device compute capability {major}.{minor} has no rtx target")]
    UnknownArch {
        /// Major version.
        major: u32,
        /// Minor version.
        minor: u32,
    },
    /// The config breaks a template constraint.
    #[error(transparent)]
    Constraint(#[from] ConstraintViolation),
    /// NVRTC failed.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The runtime failed (module load, launch).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Wrong number of tensors.
    #[error("{what}: expected {expected} tensors, got {got}")]
    Arity {
        /// Inputs or outputs.
        what: &'static str,
        /// Expected count.
        expected: usize,
        /// Given count.
        got: usize,
    },
    /// A buffer is smaller than the kernel's accesses.
    #[error("{what}: needs {needed} bytes from its offset, has {got}")]
    TooSmall {
        /// The tensor.
        what: String,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A run-time shape the kernel cannot take.
    #[error("shape {rows} x {cols}: {reason}")]
    Shape {
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
        /// Why.
        reason: String,
    },
}

/// The rtx architecture of a device.
pub fn device_arch(device: &Device) -> Result<Arch, LaunchError> {
    let (major, minor) = device.info().compute_capability;
    Arch::for_compute_capability(major, minor)
        .map_err(|_| LaunchError::UnknownArch { major, minor })
}

/// A compiled module and its kernel, loaded on one device.
#[derive(Debug)]
pub struct LoadedKernel {
    /// The generated source.
    source: KernelSource,
    /// The ptxas `-v` log of the compile.
    log: String,
    /// The entry point.
    function: Function,
    _module: Module,
}

impl LoadedKernel {
    /// The generated source.
    pub fn source(&self) -> &KernelSource {
        &self.source
    }

    /// The ptxas `-v` log of the compile.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The entry point.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// Compiles `source` for `arch` and loads it on `device`.
    pub fn load(device: &Device, source: KernelSource, arch: Arch) -> Result<Self, LaunchError> {
        let compiled = aot::compile(&source, arch)?;
        let module = device.load_module(&compiled.cubin)?;
        let function = module.function(&source.entry)?;
        Ok(LoadedKernel {
            source,
            log: compiled.log,
            function,
            _module: module,
        })
    }
}

/// Checks that `got` bytes cover `needed`.
pub(crate) fn need(what: impl Into<String>, needed: u64, got: usize) -> Result<(), LaunchError> {
    if (got as u64) < needed {
        return Err(LaunchError::TooSmall {
            what: what.into(),
            needed: needed as usize,
            got,
        });
    }
    Ok(())
}

/// Converts template launch dims to a runtime launch config.
pub(crate) fn launch_config(d: &LaunchDims) -> LaunchConfig {
    LaunchConfig::new(d.grid, d.block, d.dynamic_smem)
}

/// A built elementwise kernel for one problem.
#[derive(Debug)]
pub struct ElementwiseKernel {
    /// The problem it was built for (its shape is the launch shape).
    problem: ElementwiseProblem,
    /// The config.
    config: ElementwiseConfig,
    /// Launch shape.
    dims: LaunchDims,
    /// The loaded kernel.
    kernel: LoadedKernel,
}

impl ElementwiseKernel {
    /// The problem it was built for (its shape is the launch shape).
    pub fn problem(&self) -> &ElementwiseProblem {
        &self.problem
    }

    /// The config.
    pub fn config(&self) -> &ElementwiseConfig {
        &self.config
    }

    /// Launch shape.
    pub fn dims(&self) -> &LaunchDims {
        &self.dims
    }

    /// The loaded kernel.
    pub fn kernel(&self) -> &LoadedKernel {
        &self.kernel
    }

    /// Emits, compiles and loads the kernel for `device`'s architecture.
    pub fn build(
        device: &Device,
        problem: &ElementwiseProblem,
        config: &ElementwiseConfig,
    ) -> Result<Self, LaunchError> {
        let arch = device_arch(device)?;
        let t = ElementwiseTemplate;
        let source = t.emit(problem, config, arch)?;
        let kernel = LoadedKernel::load(device, source, arch)?;
        Ok(ElementwiseKernel {
            problem: problem.clone(),
            config: *config,
            dims: t.launch(problem, config),
            kernel,
        })
    }

    /// Launches over the problem's own shape: `inputs[i]` must hold input `i` (in its dtype
    /// and broadcast shape), `outputs[o]` a full `rows x cols` tensor of output `o`'s dtype.
    pub fn launch(
        &self,
        stream: &Stream,
        inputs: &[DeviceSlice<'_>],
        outputs: &mut [DeviceSliceMut<'_>],
    ) -> Result<(), LaunchError> {
        self.launch_shape(
            stream,
            inputs,
            outputs,
            self.problem.rows,
            self.problem.cols,
        )
    }

    /// Launches over `rows x cols` (run-time kernel arguments; a kernel built with 32-bit
    /// indices refuses `rows * cols >= 2^31`).
    pub fn launch_shape(
        &self,
        stream: &Stream,
        inputs: &[DeviceSlice<'_>],
        outputs: &mut [DeviceSliceMut<'_>],
        rows: u32,
        cols: u32,
    ) -> Result<(), LaunchError> {
        let problem = ElementwiseProblem {
            rows,
            cols,
            ..self.problem.clone()
        };
        if rows == 0 || cols == 0 {
            return Err(LaunchError::Shape {
                rows,
                cols,
                reason: "empty".into(),
            });
        }
        if problem.needs_64bit_index() && !self.problem.needs_64bit_index() {
            return Err(LaunchError::Shape {
                rows,
                cols,
                reason: "the kernel was built with 32-bit indices".into(),
            });
        }
        self.launch_problem(stream, inputs, outputs, &problem)
    }

    fn launch_problem(
        &self,
        stream: &Stream,
        inputs: &[DeviceSlice<'_>],
        outputs: &mut [DeviceSliceMut<'_>],
        problem: &ElementwiseProblem,
    ) -> Result<(), LaunchError> {
        enqueue_elementwise(
            &self.kernel.function,
            problem,
            &self.config,
            stream,
            inputs,
            outputs,
        )
    }
}

/// Launches `function` (compiled from [`ElementwiseTemplate::emit`] for `problem`'s graph and
/// `config`, at any shape with the same index width) over `problem`'s shape on `stream`,
/// without synchronizing: first validates the problem ([`ElementwiseProblem::validate`]: shape
/// and tensor sizes) and the one-shot grid ([`ElementwiseTemplate::check_grid`]), and checks the
/// tensor counts, that every buffer lives on `stream`'s device and holds the bytes the kernel
/// touches.
pub fn enqueue_elementwise(
    function: &Function,
    problem: &ElementwiseProblem,
    config: &ElementwiseConfig,
    stream: &Stream,
    inputs: &[DeviceSlice<'_>],
    outputs: &mut [DeviceSliceMut<'_>],
) -> Result<(), LaunchError> {
    {
        let g = &problem.graph;
        let shape_err = |e: super::problem::ElementwiseProblemError| LaunchError::Shape {
            rows: problem.rows,
            cols: problem.cols,
            reason: e.to_string(),
        };
        problem.validate().map_err(shape_err)?;
        ElementwiseTemplate.check_grid(problem, config)?;
        if inputs.len() != g.inputs.len() {
            return Err(LaunchError::Arity {
                what: "inputs",
                expected: g.inputs.len(),
                got: inputs.len(),
            });
        }
        if outputs.len() != g.outputs.len() {
            return Err(LaunchError::Arity {
                what: "outputs",
                expected: g.outputs.len(),
                got: outputs.len(),
            });
        }
        let mut args = KernelArgs::new();
        for (i, s) in inputs.iter().enumerate() {
            s.buf
                .check_on_stream_device(stream, "enqueue_elementwise")?;
            need(
                format!("input {i}"),
                problem.input_bytes(i).map_err(shape_err)?,
                s.bytes(),
            )?;
            args.u64(s.ptr());
        }
        for (o, s) in outputs.iter().enumerate() {
            s.buf
                .check_on_stream_device(stream, "enqueue_elementwise")?;
            need(
                format!("output {o}"),
                problem.output_bytes(o).map_err(shape_err)?,
                s.bytes(),
            )?;
            args.u64(s.ptr());
        }
        args.u32(problem.rows).u32(problem.cols);
        let cfg = launch_config(&ElementwiseTemplate.launch(problem, config));
        // SAFETY: the arguments follow the kernel's signature (pointers per input and output,
        // then rows and cols as u32), and every buffer was checked above to hold all bytes the
        // kernel touches; the borrows keep them alive for the call; the caller must not free or
        // reuse them on another stream before `stream` has run the launch.
        unsafe { function.launch(stream, &cfg, &mut args)? };
        Ok(())
    }
}
