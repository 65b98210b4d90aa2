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
    /// A tensor's strides cannot be launched (alignment, overlap, index range).
    #[error("attention tensor `{tensor}`: {reason}")]
    Strides {
        /// Which tensor.
        tensor: &'static str,
        /// What is wrong.
        reason: String,
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
    problem: AttentionProblem,
    /// The config.
    config: AttentionConfig,
    /// The loaded kernel.
    kernel: LoadedKernel,
}

impl AttentionKernel {
    /// The problem it was built for (dtype, head_dim and mask are baked in).
    pub fn problem(&self) -> &AttentionProblem {
        &self.problem
    }

    /// The config.
    pub fn config(&self) -> &AttentionConfig {
        &self.config
    }

    /// The loaded kernel.
    pub fn kernel(&self) -> &LoadedKernel {
        &self.kernel
    }

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
        kernel
            .function()
            .ensure_dynamic_smem(config.smem_bytes())
            .map_err(LaunchError::from)?;
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
    /// that every buffer lives on `stream`'s device, the strides ([`AttentionLayout::check`]:
    /// 16-byte alignment, no two elements of O in the same memory, `int` in-head offsets), that
    /// the last element of every tensor lies inside its buffer and that every tensor starts
    /// 16-byte aligned.
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
        for buf in [bufs.q.buf, bufs.k.buf, bufs.v.buf, &*bufs.o.buf] {
            buf.check_on_stream_device(stream, "AttentionKernel::launch_strided")
                .map_err(LaunchError::from)?;
        }
        layout.check(p)?;
        let size = p.dtype.size_bytes() as u64;
        let checks = [
            ("q", bufs.q.ptr(), bufs.q.bytes(), layout.q, p.seq_q),
            ("k", bufs.k.ptr(), bufs.k.bytes(), layout.k, p.seq_k),
            ("v", bufs.v.ptr(), bufs.v.bytes(), layout.v, p.seq_k),
            ("o", bufs.o.ptr(), bufs.o.bytes(), layout.o, p.seq_q),
        ];
        for (tensor, ptr, got, st, seq) in checks {
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
                .function()
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

    /// Strides within `i64` (the kernel's `long long`, even where a dimension of one entry never
    /// uses its stride), alignment (every stride a whole number of 16-byte chunks), rows at least
    /// `head_dim` apart, and `int` in-head offsets (`(seq - 1) * row + head_dim < 2^31`). Whether
    /// heads and batches overlap is [`AttentionStrides::check_disjoint`]'s question.
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
            // The kernel takes each stride as a `long long`, even one its dimension of a single
            // entry never multiplies.
            if s > i64::MAX as u64 {
                return bad(format!(
                    "{what} stride {s} exceeds the kernel's long long range"
                ));
            }
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

    /// Errors unless every `(batch, head, row, column)` position of the tensor is its own
    /// element: what a written tensor (O) needs, or blocks of the kernel race on the same memory
    /// (e.g. 8 heads at head stride 0 all writing one head's rows).
    ///
    /// The dimensions of more than one entry (batch, heads, rows; columns are contiguous) are
    /// ordered by stride, and each must step over everything the smaller ones span: columns
    /// span `head_dim`, and a dimension of `n` entries at stride `s` spans
    /// `(n - 1) * s + (the smaller ones' span)`. That accepts the layouts attention uses,
    /// nested (`[batch, heads, seq, head_dim]`) or interleaved (heads side by side in a row,
    /// [`AttentionStrides::packed_rows`]), and never an overlapping one; it also refuses the
    /// rare layouts that interleave two dimensions without colliding at strides below a span.
    pub fn check_disjoint(
        &self,
        tensor: &'static str,
        p: &AttentionProblem,
        seq: u32,
    ) -> Result<(), AttentionLaunchError> {
        let mut dims: Vec<(&str, u64, u32)> = [
            ("row", self.row, seq),
            ("head", self.head, p.heads),
            ("batch", self.batch, p.batch),
        ]
        .into_iter()
        .filter(|d| d.2 > 1)
        .collect();
        dims.sort_by_key(|d| d.1);
        let mut span = p.head_dim as u64;
        let mut inner = vec!["head_dim"];
        for (what, stride, n) in dims {
            if stride < span {
                return Err(AttentionLaunchError::Strides {
                    tensor,
                    reason: format!(
                        "{what} stride {stride} ({n} entries) is below {span}, the elements spanned by {}: elements of a written tensor would overlap",
                        inner.join(", ")
                    ),
                });
            }
            span = (n as u64 - 1).saturating_mul(stride).saturating_add(span);
            inner.push(what);
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

    /// Checks every tensor's strides for `p` ([`AttentionStrides::check`]) and that O, the one
    /// tensor written, has no two elements in the same memory
    /// ([`AttentionStrides::check_disjoint`]). Q, K and V are only read and may overlap (a head
    /// stride of 0 shares one K/V head between all heads).
    pub fn check(&self, p: &AttentionProblem) -> Result<(), AttentionLaunchError> {
        let size = p.dtype.size_bytes() as u64;
        for (tensor, st, seq) in [
            ("q", self.q, p.seq_q),
            ("k", self.k, p.seq_k),
            ("v", self.v, p.seq_k),
            ("o", self.o, p.seq_q),
        ] {
            st.check(tensor, p, seq, size)?;
        }
        self.o.check_disjoint("o", p, p.seq_q)
    }

    /// Element offsets of q, k and v inside a packed QKV buffer.
    pub fn packed_qkv_offsets(p: &AttentionProblem) -> [u64; 3] {
        let d_model = p.heads as u64 * p.head_dim as u64;
        [0, d_model, 2 * d_model]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use proptest::prelude::*;

    /// Heads (or batches) of O writing the same memory used to pass the stride checks, and the
    /// size check then asked for one head's worth only.
    #[test]
    fn overlapping_heads_or_batches_of_o_are_refused() {
        for (batch, heads, seq, d) in [(1, 1, 1, 64), (2, 8, 128, 64), (3, 12, 200, 128)] {
            let p = AttentionProblem::new(batch, heads, seq, d, false, DType::F16);
            AttentionLayout::contiguous(&p).check(&p).unwrap();
            AttentionLayout::packed_qkv(&p).check(&p).unwrap();
        }
        let p = AttentionProblem::new(2, 8, 128, 64, false, DType::F16);
        let ok = AttentionLayout::contiguous(&p);
        let refused = |o: AttentionStrides, what: &str| {
            let e = AttentionLayout { o, ..ok }.check(&p).unwrap_err();
            assert!(
                matches!(&e, AttentionLaunchError::Strides { tensor: "o", reason } if reason.contains(what)),
                "{e}"
            );
        };
        refused(AttentionStrides { head: 0, ..ok.o }, "head stride 0");
        // Heads one row short of a head apart.
        refused(
            AttentionStrides {
                head: 127 * 64,
                ..ok.o
            },
            "head stride",
        );
        // Batches that overlap the last head of the previous batch.
        refused(
            AttentionStrides {
                batch: 7 * 128 * 64,
                ..ok.o
            },
            "batch stride",
        );
        // Packed rows of O: the next row starts inside this row's last head.
        let packed = AttentionLayout::packed_qkv(&p);
        let short_row = AttentionStrides {
            row: 8 * 64 - 8,
            ..packed.o
        };
        let e = AttentionLayout {
            o: short_row,
            ..packed
        }
        .check(&p)
        .unwrap_err();
        assert!(e.to_string().contains("row stride"), "{e}");
        // Q, K and V are only read: one K/V head shared by every head is fine.
        let shared = AttentionStrides { head: 0, ..ok.k };
        AttentionLayout {
            k: shared,
            v: shared,
            ..ok
        }
        .check(&p)
        .unwrap();
        // With one head, its stride is never used.
        let one = AttentionProblem::new(2, 1, 128, 64, false, DType::F16);
        let o = AttentionStrides {
            head: 0,
            ..AttentionStrides::contiguous(&one, 128)
        };
        o.check_disjoint("o", &one, 128).unwrap();
    }

    /// A stride the kernel's `long long` cannot carry is refused even where its dimension has
    /// one entry (it used to be cast to a negative value and passed, unused).
    #[test]
    fn strides_beyond_i64_are_refused() {
        let p = AttentionProblem::new(1, 1, 64, 64, false, DType::F16);
        let ok = AttentionStrides::contiguous(&p, 64);
        ok.check("q", &p, 64, 2).unwrap();
        for (what, s) in [
            (
                "batch",
                AttentionStrides {
                    batch: 1 << 63,
                    ..ok
                },
            ),
            (
                "head",
                AttentionStrides {
                    head: u64::MAX - 7,
                    ..ok
                },
            ),
        ] {
            let e = s.check("q", &p, 64, 2).unwrap_err();
            assert!(
                e.to_string().contains(&format!("{what} stride"))
                    && e.to_string().contains("long long"),
                "{e}"
            );
        }
        // The largest aligned stride that fits is still accepted.
        AttentionStrides {
            batch: (i64::MAX as u64) / 8 * 8,
            ..ok
        }
        .check("q", &p, 64, 2)
        .unwrap();
    }

    proptest! {
        /// A layout the launch accepts never writes one element of O from two positions.
        #[test]
        fn accepted_layouts_never_write_an_element_twice(
            batch in 1u32..4, heads in 1u32..4, seq in 1u32..4,
            sb in 0u64..80, sh in 0u64..40, sr in 8u64..30,
        ) {
            let p = AttentionProblem::new(batch, heads, seq, 64, false, DType::F16);
            let o = AttentionStrides { batch: 8 * sb, head: 8 * sh, row: 8 * sr };
            let layout = AttentionLayout { o, ..AttentionLayout::contiguous(&p) };
            if layout.check(&p).is_ok() {
                let mut seen = std::collections::HashSet::new();
                for b in 0..batch as u64 {
                    for h in 0..heads as u64 {
                        for r in 0..seq as u64 {
                            for c in 0..64 {
                                let e = b * o.batch + h * o.head + r * o.row + c;
                                prop_assert!(seen.insert(e), "element {} written twice", e);
                            }
                        }
                    }
                }
            }
        }
    }
}
