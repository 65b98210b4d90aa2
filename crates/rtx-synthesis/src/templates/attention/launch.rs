//! Host side of the attention kernel: build (emit + NVRTC + load) and checked launches.

use super::config::AttentionConfig;
use super::problem::{AttentionProblem, AttentionProblemError};
use super::template::AttentionTemplate;
use crate::templates::elementwise::launch::{
    device_arch, DeviceSlice, DeviceSliceMut, LaunchError, LoadedKernel,
};
use crate::templates::{LaunchDims, Template};
use rtx_runtime::{Device, DeviceBuffer, KernelArgs, LaunchConfig, Stream};

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

impl<'a> AttentionBuffers<'a> {
    /// Q, K and V inside one packed `[batch * seq, 3 * heads * head_dim]` projection (at the
    /// offsets of [`AttentionLayout::packed_qkv_offsets`]) and O the whole of `o`; launch with
    /// [`AttentionLayout::packed_qkv`].
    pub fn packed_qkv(
        p: &AttentionProblem,
        qkv: &'a DeviceBuffer,
        o: &'a mut DeviceBuffer,
    ) -> Self {
        let [q, k, v] =
            AttentionLayout::packed_qkv_offsets(p).map(|e| e as usize * p.dtype.size_bytes());
        AttentionBuffers {
            q: DeviceSlice::at(qkv, q),
            k: DeviceSlice::at(qkv, k),
            v: DeviceSlice::at(qkv, v),
            o: DeviceSliceMut::whole(o),
        }
    }
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
    /// A tensor's strides cannot be launched (alignment, overlap, index range).
    #[error("attention tensor `{tensor}`: {reason}")]
    Strides {
        /// Which tensor.
        tensor: &'static str,
        /// What is wrong.
        reason: String,
    },
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
    pub fn build(
        device: &Device,
        problem: &AttentionProblem,
        config: &AttentionConfig,
    ) -> Result<Self, AttentionLaunchError> {
        let arch = device_arch(device)?;
        let source = AttentionTemplate
            .emit(problem, config, arch)
            .map_err(LaunchError::from)?;
        let kernel = LoadedKernel::load(device, source, arch)?;
        let smem = config.smem_bytes();
        if smem > DEFAULT_DYNAMIC_SMEM {
            kernel
                .function
                .set_max_dynamic_smem(smem)
                .map_err(LaunchError::from)?;
        }
        Ok(AttentionKernel {
            problem: *problem,
            config: *config,
            kernel,
        })
    }

    /// Launch shape for `p`.
    pub fn dims(&self, p: &AttentionProblem) -> LaunchDims {
        AttentionTemplate.launch(p, &self.config)
    }

    /// Launches over the problem the kernel was built for.
    pub fn launch(
        &self,
        stream: &Stream,
        bufs: AttentionBuffers<'_>,
    ) -> Result<(), AttentionLaunchError> {
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
        self.launch_strided(stream, bufs, p, &AttentionLayout::contiguous(p))
    }

    /// Launches over `p` with each tensor at its own strides (e.g. Q, K and V read in place from
    /// a packed `[tokens, 3 * d_model]` projection, O written into `[tokens, d_model]`): checks
    /// that every stride keeps 16-byte alignment, that rows of O do not overlap, that the last
    /// element of every tensor lies inside its buffer, and that in-head offsets fit the kernel's
    /// `int` arithmetic.
    pub fn launch_strided(
        &self,
        stream: &Stream,
        bufs: AttentionBuffers<'_>,
        p: &AttentionProblem,
        layout: &AttentionLayout,
    ) -> Result<(), AttentionLaunchError> {
        p.validate()?;
        let b = &self.problem;
        if (p.dtype, p.head_dim, p.causal) != (b.dtype, b.head_dim, b.causal) {
            let what = |x: &AttentionProblem| {
                format!("{} head_dim {} causal {}", x.dtype, x.head_dim, x.causal)
            };
            return Err(AttentionLaunchError::Mismatch {
                built: what(b),
                asked: what(p),
            });
        }
        let size = p.dtype.size_bytes() as u64;
        let checks = [
            ("q", bufs.q.ptr(), bufs.q.bytes(), layout.q, p.seq_q),
            ("k", bufs.k.ptr(), bufs.k.bytes(), layout.k, p.seq_k),
            ("v", bufs.v.ptr(), bufs.v.bytes(), layout.v, p.seq_k),
            ("o", bufs.o.ptr(), bufs.o.bytes(), layout.o, p.seq_q),
        ];
        for (tensor, ptr, got, st, seq) in checks {
            st.check(tensor, p, seq, size)?;
            let needed = st.span_elems(p, seq).saturating_mul(size);
            if (got as u64) < needed {
                return Err(LaunchError::TooSmall {
                    what: tensor.to_string(),
                    needed: needed as usize,
                    got,
                }
                .into());
            }
            if ptr % ATTN_BASE_ALIGN != 0 {
                return Err(AttentionLaunchError::Misaligned { tensor, ptr });
            }
        }
        let dims = self.dims(p);
        let mut args = KernelArgs::new();
        args.u64(bufs.q.ptr())
            .u64(bufs.k.ptr())
            .u64(bufs.v.ptr())
            .u64(bufs.o.ptr());
        args.i32(p.seq_q as i32)
            .i32(p.seq_k as i32)
            .f32(AttentionTemplate::scale_log2(p));
        for st in [layout.q, layout.k, layout.v, layout.o] {
            args.i64(st.batch as i64)
                .i64(st.head as i64)
                .i32(st.row as i32);
        }
        let cfg = LaunchConfig::new(dims.grid, dims.block, dims.dynamic_smem);
        // SAFETY: the arguments follow the kernel signature (Q, K, V, O pointers, int seq_q, int
        // seq_k, float scale_log2, then (long long, long long, int) strides per tensor; seq values
        // and in-head offsets fit in int after `validate` and `AttentionStrides::check`); every
        // buffer holds the last element the strides reach and is 16-byte aligned (checked above)
        // and is borrowed for the call; the caller must not free or reuse them on another stream
        // before `stream` has run the launch.
        unsafe {
            self.kernel
                .function
                .launch(stream, &cfg, &mut args)
                .map_err(LaunchError::from)?
        };
        Ok(())
    }
}

/// Strides of one attention tensor, in elements: between batches, between heads, and between
/// consecutive sequence positions (rows). Columns (`head_dim`) are always contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionStrides {
    /// Elements between batch `b` and `b + 1`.
    pub batch: u64,
    /// Elements between head `h` and `h + 1`.
    pub head: u64,
    /// Elements between row `s` and `s + 1`.
    pub row: u64,
}

impl AttentionStrides {
    /// `[batch, heads, seq, head_dim]` contiguous.
    pub fn contiguous(p: &AttentionProblem, seq: u32) -> Self {
        let d = p.head_dim as u64;
        AttentionStrides {
            batch: p.heads as u64 * seq as u64 * d,
            head: seq as u64 * d,
            row: d,
        }
    }

    /// `[batch, seq, row_width]` rows where head `h` starts at column `offset + h * head_dim`
    /// (the `[tokens, 3 * d_model]` QKV projection: offset 0 / d / 2d for q / k / v).
    pub fn packed_rows(p: &AttentionProblem, seq: u32, row_width: u64) -> Self {
        AttentionStrides {
            batch: seq as u64 * row_width,
            head: p.head_dim as u64,
            row: row_width,
        }
    }

    /// One past the furthest element a launch reaches (the buffer must hold this many).
    pub fn span_elems(&self, p: &AttentionProblem, seq: u32) -> u64 {
        let last = |n: u32, stride: u64| (n.max(1) as u64 - 1).saturating_mul(stride);
        last(p.batch, self.batch)
            .saturating_add(last(p.heads, self.head))
            .saturating_add(last(seq, self.row))
            .saturating_add(p.head_dim as u64)
    }

    /// Alignment (every stride a whole number of 16-byte chunks), non-overlapping rows, and
    /// `int` in-head offsets (`(seq - 1) * row + head_dim < 2^31`).
    pub fn check(
        &self,
        tensor: &'static str,
        p: &AttentionProblem,
        seq: u32,
        elem_bytes: u64,
    ) -> Result<(), AttentionLaunchError> {
        let bad = |reason: String| Err(AttentionLaunchError::Strides { tensor, reason });
        let chunk = ATTN_BASE_ALIGN / elem_bytes.max(1);
        for (what, s) in [
            ("batch", self.batch),
            ("head", self.head),
            ("row", self.row),
        ] {
            if s % chunk != 0 {
                return bad(format!(
                    "{what} stride {s} is not a multiple of {chunk} elements (16 bytes)"
                ));
            }
        }
        if self.row < p.head_dim as u64 {
            return bad(format!(
                "row stride {} is below head_dim {}",
                self.row, p.head_dim
            ));
        }
        let in_head = (seq.max(1) as u64 - 1)
            .saturating_mul(self.row)
            .saturating_add(p.head_dim as u64);
        if in_head > i32::MAX as u64 {
            return bad(format!(
                "(seq - 1) * row stride + head_dim = {in_head} exceeds the kernel's int range"
            ));
        }
        Ok(())
    }
}

/// The strides of Q, K, V and O for one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionLayout {
    /// Q.
    pub q: AttentionStrides,
    /// K.
    pub k: AttentionStrides,
    /// V.
    pub v: AttentionStrides,
    /// O.
    pub o: AttentionStrides,
}

impl AttentionLayout {
    /// Every tensor `[batch, heads, seq, head_dim]` contiguous.
    pub fn contiguous(p: &AttentionProblem) -> Self {
        let (q, kv) = (
            AttentionStrides::contiguous(p, p.seq_q),
            AttentionStrides::contiguous(p, p.seq_k),
        );
        AttentionLayout {
            q,
            k: kv,
            v: kv,
            o: q,
        }
    }

    /// Self-attention over a packed `[batch * seq, 3 * d_model]` QKV buffer (q, k, v side by
    /// side, heads side by side inside each) into a `[batch * seq, d_model]` output: the layout
    /// of a transformer layer's in-projection, read in place. Q, K and V are the same buffer at
    /// element offsets 0, `d_model` and `2 * d_model` (see [`AttentionLayout::packed_qkv_offsets`]).
    pub fn packed_qkv(p: &AttentionProblem) -> Self {
        let d_model = p.heads as u64 * p.head_dim as u64;
        let qkv = AttentionStrides::packed_rows(p, p.seq_q, 3 * d_model);
        AttentionLayout {
            q: qkv,
            k: qkv,
            v: qkv,
            o: AttentionStrides::packed_rows(p, p.seq_q, d_model),
        }
    }

    /// Element offsets of q, k and v inside a packed QKV buffer.
    pub fn packed_qkv_offsets(p: &AttentionProblem) -> [u64; 3] {
        let d_model = p.heads as u64 * p.head_dim as u64;
        [0, d_model, 2 * d_model]
    }
}
