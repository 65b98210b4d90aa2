//! Host side of the attention kernel: build (emit + NVRTC + load) and checked launches.

use super::config::AttentionConfig;
use super::problem::{AttentionProblem, AttentionProblemError};
use super::template::AttentionTemplate;
use crate::templates::elementwise::launch::{device_arch, DeviceSlice, DeviceSliceMut, LaunchError, LoadedKernel};
use crate::templates::{LaunchDims, Template};
use rtx_runtime::{Device, KernelArgs, LaunchConfig, Stream};

/// Base-pointer alignment the kernel assumes (16-byte `cp.async` and stores).
pub const ATTN_BASE_ALIGN: u64 = 16;

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_DYNAMIC_SMEM: u32 = 48 * 1024;

/// The tensors of one attention launch (`[batch, heads, seq, head_dim]`, contiguous).
#[derive(Debug)]
pub struct AttentionBuffers<'a> {
    /// Q, `batch * heads * seq_q * head_dim` elements.
    pub q: DeviceSlice<'a>,
    /// K, `batch * heads * seq_k * head_dim` elements.
    pub k: DeviceSlice<'a>,
    /// V, shaped like K.
    pub v: DeviceSlice<'a>,
    /// O, shaped like Q (written).
    pub o: DeviceSliceMut<'a>,
}

/// Why an attention kernel could not be built or launched.
#[derive(Debug, thiserror::Error)]
pub enum AttentionLaunchError {
    /// Build or launch failure of the shared machinery (arch, constraint, NVRTC, runtime, sizes).
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The launch's problem is invalid.
    #[error(transparent)]
    Problem(#[from] AttentionProblemError),
    /// The launch's problem differs from the kernel's in something baked into the code.
    #[error("the kernel was built for {built}, the launch asks for {asked}")]
    Mismatch {
        /// What the kernel bakes in.
        built: String,
        /// What the launch asked for.
        asked: String,
    },
    /// A tensor's first element is not 16-byte aligned.
    #[error("attention tensor `{tensor}` at {ptr:#x} is not {ATTN_BASE_ALIGN}-byte aligned")]
    Misaligned {
        /// Q, K, V or O.
        tensor: &'static str,
        /// Its device address.
        ptr: u64,
    },
}

impl AttentionLaunchError {
    /// Whether the CUDA context is unusable afterwards.
    pub fn is_sticky(&self) -> bool {
        matches!(self, AttentionLaunchError::Launch(LaunchError::Runtime(r)) if r.is_sticky())
    }
}

/// A built attention kernel.
#[derive(Debug)]
pub struct AttentionKernel {
    /// The problem it was built for (its dtype, head_dim and mask are baked in; its sizes are
    /// the default launch shape).
    pub problem: AttentionProblem,
    /// The config.
    pub config: AttentionConfig,
    /// The loaded kernel.
    pub kernel: LoadedKernel,
}

impl AttentionKernel {
    /// Emits, compiles and loads the kernel for `device`'s architecture.
    pub fn build(device: &Device, problem: &AttentionProblem, config: &AttentionConfig) -> Result<Self, AttentionLaunchError> {
        let arch = device_arch(device)?;
        let source = AttentionTemplate.emit(problem, config, arch).map_err(LaunchError::from)?;
        let kernel = LoadedKernel::load(device, source, arch)?;
        let smem = config.smem_bytes();
        if smem > DEFAULT_DYNAMIC_SMEM {
            kernel.function.set_max_dynamic_smem(smem).map_err(LaunchError::from)?;
        }
        Ok(AttentionKernel { problem: *problem, config: *config, kernel })
    }

    /// Launch shape for `p`.
    pub fn dims(&self, p: &AttentionProblem) -> LaunchDims {
        AttentionTemplate.launch(p, &self.config)
    }

    /// Launches over the problem the kernel was built for.
    pub fn launch(&self, stream: &Stream, bufs: AttentionBuffers<'_>) -> Result<(), AttentionLaunchError> {
        let p = self.problem;
        self.launch_problem(stream, bufs, &p)
    }

    /// Launches over `p`, which may differ from the built problem in batch, heads, sequence
    /// lengths and scale (run-time arguments) but not in dtype, head_dim or mask.
    pub fn launch_problem(
        &self,
        stream: &Stream,
        bufs: AttentionBuffers<'_>,
        p: &AttentionProblem,
    ) -> Result<(), AttentionLaunchError> {
        p.validate()?;
        let b = &self.problem;
        if (p.dtype, p.head_dim, p.causal) != (b.dtype, b.head_dim, b.causal) {
            let what = |x: &AttentionProblem| format!("{} head_dim {} causal {}", x.dtype, x.head_dim, x.causal);
            return Err(AttentionLaunchError::Mismatch { built: what(b), asked: what(p) });
        }
        let size = p.dtype.size_bytes() as u64;
        let q_bytes = p.q_elems().unwrap_or(u64::MAX).saturating_mul(size);
        let kv_bytes = p.kv_elems().unwrap_or(u64::MAX).saturating_mul(size);
        let checks = [
            ("q", bufs.q.ptr(), bufs.q.bytes(), q_bytes),
            ("k", bufs.k.ptr(), bufs.k.bytes(), kv_bytes),
            ("v", bufs.v.ptr(), bufs.v.bytes(), kv_bytes),
            ("o", bufs.o.ptr(), bufs.o.bytes(), q_bytes),
        ];
        for (tensor, ptr, got, needed) in checks {
            if (got as u64) < needed {
                return Err(LaunchError::TooSmall { what: tensor.to_string(), needed: needed as usize, got }.into());
            }
            if ptr % ATTN_BASE_ALIGN != 0 {
                return Err(AttentionLaunchError::Misaligned { tensor, ptr });
            }
        }
        let dims = self.dims(p);
        let mut args = KernelArgs::new();
        args.u64(bufs.q.ptr()).u64(bufs.k.ptr()).u64(bufs.v.ptr()).u64(bufs.o.ptr());
        args.i32(p.seq_q as i32).i32(p.seq_k as i32).f32(AttentionTemplate::scale_log2(p));
        let cfg = LaunchConfig::new(dims.grid, dims.block, dims.dynamic_smem);
        // SAFETY: the arguments follow the kernel signature (Q, K, V, O pointers, int seq_q, int
        // seq_k, float scale_log2; seq values fit in int after `validate`); every buffer holds the
        // bytes the kernel touches and is 16-byte aligned (checked above) and is borrowed for the
        // call; the caller must not free or reuse them on another stream before `stream` has run
        // the launch.
        unsafe { self.kernel.function.launch(stream, &cfg, &mut args).map_err(LaunchError::from)? };
        Ok(())
    }
}
