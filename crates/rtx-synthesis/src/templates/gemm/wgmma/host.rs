//! Host side of the wgmma GEMM: encodes the two rank-3 TMA tensor maps, opts the kernel in to
//! its dynamic shared memory and launches it with the common GEMM arguments plus the maps (for a
//! tf32 problem with an M/N-major operand: the staging pre-pass first, then the GEMM, both in
//! stream order; see [`mod@super::staging`]).
//!
//! The rank-3 maps are encoded here with `cuTensorMapEncodeTiled` directly because the runtime
//! only wraps rank-2 maps (`rtx_runtime::encode_tensor_map_2d`); move this into the runtime once
//! it has a rank-N encoder.

use super::config::WgmmaConfig;
use super::staging::{kernel_problem_for, staged_a_bytes, staging_bytes, staging_for};
use super::tma::{tma_desc_c, TmaDesc, TmaSwizzle};
use super::WgmmaGemm;
use crate::templates::gemm::problem::InvalidGemm;
use crate::templates::gemm::GemmProblem;
use crate::templates::{ConstraintViolation, Template};
use crate::Arch;
use rtx_runtime::cudarc::driver::sys;
use rtx_runtime::{DeviceBuffer, Function, KernelArgs, LaunchConfig, RuntimeError, Stream};

/// Bytes of an encoded `CUtensorMap`.
pub const TENSOR_MAP_BYTES: usize = 128;
/// Alignment of a `CUtensorMap` kernel parameter.
pub const TENSOR_MAP_ALIGN: usize = 128;

/// Device buffers of one wgmma GEMM launch.
pub struct WgmmaBuffers<'a> {
    /// A (input dtype), at least `problem.buffer_elems().0` elements, 16-byte aligned.
    pub a: &'a DeviceBuffer,
    /// B (input dtype), at least `problem.buffer_elems().1` elements, 16-byte aligned.
    pub b: &'a DeviceBuffer,
    /// C (output dtype), at least `problem.buffer_elems().2` elements; read too when beta != 0.
    pub c: &'a mut DeviceBuffer,
    /// Bias (N elements of the output dtype) when the epilogue has one.
    pub bias: Option<&'a DeviceBuffer>,
    /// Residual (laid out like C) when the epilogue has one.
    pub residual: Option<&'a DeviceBuffer>,
    /// Split-K workspace of at least [`WgmmaConfig::workspace_bytes`] bytes when `split_k > 1`
    /// (ignored otherwise). Its counter region must be zero before the first launch (e.g.
    /// `fill_u8(0)` once after allocation); every completed launch leaves it zero again. One
    /// workspace must not serve two launches that may run concurrently.
    pub workspace: Option<&'a mut DeviceBuffer>,
    /// tf32 staging buffer of at least [`WgmmaGemm::staging_bytes`] bytes (16-byte aligned) when
    /// the problem has an M/N-major tf32 operand (ignored otherwise): the pre-pass overwrites
    /// it on every launch, so it needs no initialization, but it must not serve two launches
    /// that may run concurrently.
    pub staging: Option<&'a mut DeviceBuffer>,
}

/// Why a wgmma GEMM launch was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum WgmmaLaunchError {
    /// The problem/config breaks a template constraint.
    #[error(transparent)]
    Constraint(#[from] ConstraintViolation),
    /// A buffer is smaller than the problem needs.
    #[error("{what} buffer holds {have} bytes, the problem needs {need}")]
    BufferTooSmall {
        /// Which operand.
        what: &'static str,
        /// Bytes needed.
        need: u64,
        /// Bytes held.
        have: u64,
    },
    /// A TMA operand is not 16-byte aligned.
    #[error("{what} address {addr:#x} is not 16-byte aligned (TMA requirement)")]
    Misaligned {
        /// Which operand.
        what: &'static str,
        /// Its device address.
        addr: u64,
    },
    /// The epilogue reads an operand that was not supplied.
    #[error("the epilogue uses {what} but no buffer was given")]
    MissingBuffer {
        /// Which operand.
        what: &'static str,
    },
    /// `cuTensorMapEncodeTiled` rejected a map.
    #[error("tensor map of {operand}: {reason}")]
    TensorMap {
        /// A, B or C.
        operand: &'static str,
        /// The driver's error or the violated rule.
        reason: String,
    },
    /// The runtime refused or failed the launch.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

fn cu_dtype(d: &TmaDesc) -> sys::CUtensorMapDataType {
    use sys::CUtensorMapDataType as D;
    match d.cu_data_type() {
        6 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        9 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        _ => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    }
}

fn cu_swizzle(s: TmaSwizzle) -> sys::CUtensorMapSwizzle {
    use sys::CUtensorMapSwizzle as S;
    match s {
        TmaSwizzle::None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
        TmaSwizzle::B32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
        TmaSwizzle::B64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
        TmaSwizzle::B128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Encodes `desc` at device address `address` (zero out-of-bounds fill, the desc's L2 promotion).
/// Needs a loaded driver (an open `rtx_runtime::Device`).
pub fn encode_tensor_map(desc: &TmaDesc, address: u64) -> Result<[u8; TENSOR_MAP_BYTES], String> {
    desc.validate().map_err(|e| e.to_string())?;
    if address == 0 || !address.is_multiple_of(16) {
        return Err(format!(
            "address {address:#x} is null or not 16-byte aligned"
        ));
    }
    if !rtx_runtime::driver_available() {
        return Err("the CUDA driver is not available".to_string());
    }
    let rank = desc.rank as usize;
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let elem_strides = [1u32; 3];
    // SAFETY: the arrays hold at least `rank` (resp. `rank - 1`) entries as the API requires;
    // the address is only encoded, never dereferenced; the driver library is loaded.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            cu_dtype(desc),
            rank as u32,
            address as *mut std::ffi::c_void,
            desc.dims.as_ptr(),
            desc.strides.as_ptr(),
            desc.box_dims.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu_swizzle(desc.swizzle),
            desc.l2_promotion.raw(),
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(format!(
            "cuTensorMapEncodeTiled failed with {status:?} for {desc:?}"
        ));
    }
    let mut out = [0u8; TENSOR_MAP_BYTES];
    for (i, w) in map.opaque.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    Ok(out)
}

/// Checks that `buf` lives on `stream`'s device and holds `bytes`.
fn need(
    what: &'static str,
    buf: &DeviceBuffer,
    bytes: u64,
    stream: &Stream,
) -> Result<(), WgmmaLaunchError> {
    buf.check_on_stream_device(stream, "WgmmaGemm::enqueue")?;
    if (buf.len() as u64) < bytes {
        return Err(WgmmaLaunchError::BufferTooSmall {
            what,
            need: bytes,
            have: buf.len() as u64,
        });
    }
    Ok(())
}

impl WgmmaGemm {
    /// Checks `p`/`c` and the buffers, encodes the tensor maps, sets the kernel's dynamic shared
    /// memory limit and launches `f` (compiled from [`Template::emit`] for the same `p`/`c`) on
    /// `stream`. Every buffer must live on `stream`'s device ([`WgmmaLaunchError::Runtime`]
    /// otherwise). Does not synchronize.
    pub fn enqueue(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &WgmmaConfig,
        bufs: &mut WgmmaBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), WgmmaLaunchError> {
        self.check(p, c, Arch::Sm90a)?;
        // `check` validated the problem, so its extents fit in i64 bytes; still checked, so an
        // overflow can never turn into a small size.
        let invalid = |e: InvalidGemm| ConstraintViolation {
            template: self.name().to_string(),
            config: format!("{c:?}"),
            reason: e.to_string(),
        };
        let (a_bytes, b_bytes, c_bytes) = p.buffer_bytes().map_err(invalid)?;
        let (bias_bytes, residual_bytes) = p.epilogue_operand_bytes().map_err(invalid)?;
        need("A", bufs.a, a_bytes, stream)?;
        need("B", bufs.b, b_bytes, stream)?;
        need("C", bufs.c, c_bytes, stream)?;
        for (what, addr) in [("A", bufs.a.ptr()), ("B", bufs.b.ptr())] {
            if addr % 16 != 0 {
                return Err(WgmmaLaunchError::Misaligned { what, addr });
            }
        }
        let bias = match (p.epilogue.bias, bufs.bias) {
            (false, _) => 0,
            (true, None) => return Err(WgmmaLaunchError::MissingBuffer { what: "bias" }),
            (true, Some(b)) => {
                need("bias", b, bias_bytes, stream)?;
                b.ptr()
            }
        };
        let residual = match (p.epilogue.residual, bufs.residual) {
            (false, _) => 0,
            (true, None) => return Err(WgmmaLaunchError::MissingBuffer { what: "residual" }),
            (true, Some(r)) => {
                need("residual", r, residual_bytes, stream)?;
                r.ptr()
            }
        };
        let (ws, counters) = if c.split_k > 1 {
            let need_ws = c.workspace_bytes(p.m, p.n, p.batch);
            match bufs.workspace.as_deref() {
                None => {
                    return Err(WgmmaLaunchError::MissingBuffer {
                        what: "split-K workspace",
                    })
                }
                Some(w) => {
                    need("workspace", w, need_ws, stream)?;
                    if w.ptr() % 16 != 0 {
                        return Err(WgmmaLaunchError::Misaligned {
                            what: "workspace",
                            addr: w.ptr(),
                        });
                    }
                    (
                        w.ptr(),
                        w.ptr() + c.workspace_partial_bytes(p.m, p.n, p.batch),
                    )
                }
            }
        } else {
            (0, 0)
        };
        let st = staging_for(p, c);
        let (stage_a, stage_b) = if st.any() {
            match bufs.staging.as_deref() {
                None => {
                    return Err(WgmmaLaunchError::MissingBuffer {
                        what: "tf32 staging buffer",
                    })
                }
                Some(w) => {
                    need("staging", w, staging_bytes(p), stream)?;
                    if w.ptr() % 16 != 0 {
                        return Err(WgmmaLaunchError::Misaligned {
                            what: "staging",
                            addr: w.ptr(),
                        });
                    }
                    (
                        if st.a { w.ptr() } else { 0 },
                        if st.b { w.ptr() + staged_a_bytes(p) } else { 0 },
                    )
                }
            }
        } else {
            (0, 0)
        };
        // The kernel computes on `v` (with swap_ab: B^T A^T, so the user's B is its A and the
        // user's A its B); the GEMM launch reads staged operands from their K-major copies.
        let v = Self::view(p, c);
        let q = kernel_problem_for(&v, c);
        // The kernel's operands as the user's buffers (their names for errors).
        let ((ptr_a, name_a), (ptr_b, name_b)) = if c.swap_ab {
            ((bufs.b.ptr(), "B"), (bufs.a.ptr(), "A"))
        } else {
            ((bufs.a.ptr(), "A"), (bufs.b.ptr(), "B"))
        };
        let (da, db) = self.tensor_maps(p, c);
        let addr_a = if st.a { stage_a } else { ptr_a };
        let addr_b = if st.b { stage_b } else { ptr_b };
        let tm_a =
            encode_tensor_map(&da, addr_a).map_err(|reason| WgmmaLaunchError::TensorMap {
                operand: name_a,
                reason,
            })?;
        let tm_b =
            encode_tensor_map(&db, addr_b).map_err(|reason| WgmmaLaunchError::TensorMap {
                operand: name_b,
                reason,
            })?;
        let tm_c = if c.tma_store {
            if !bufs.c.ptr().is_multiple_of(16) {
                return Err(WgmmaLaunchError::Misaligned {
                    what: "C (TMA-store epilogue)",
                    addr: bufs.c.ptr(),
                });
            }
            let dc = tma_desc_c(p, c);
            Some(encode_tensor_map(&dc, bufs.c.ptr()).map_err(|reason| {
                WgmmaLaunchError::TensorMap {
                    operand: "C",
                    reason,
                }
            })?)
        } else {
            None
        };
        let dims = self.launch(p, c);
        let pre = self.prepass_launch(p, c);
        f.set_max_dynamic_smem(dims.dynamic_smem.max(pre.map_or(0, |d| d.dynamic_smem)))?;
        // `prepass` selects the launch; `src` the leading dimensions / batch strides it is given
        // (the user's operands for the pre-pass, the staged view for the GEMM).
        let args_for = |src: &GemmProblem, prepass: i32| {
            let mut args = KernelArgs::new();
            args.u64(ptr_a)
                .u64(ptr_b)
                .u64(bufs.c.ptr())
                .u64(bias)
                .u64(residual)
                .i32(v.m as i32)
                .i32(v.n as i32)
                .i32(p.k as i32)
                .i32(src.lda as i32)
                .i32(src.ldb as i32)
                .i32(p.ldc as i32)
                .i64(src.stride_a as i64)
                .i64(src.stride_b as i64)
                .i64(p.stride_c as i64)
                .f32(p.epilogue.alpha)
                .f32(p.epilogue.beta)
                .bytes(&tm_a, TENSOR_MAP_ALIGN)
                .bytes(&tm_b, TENSOR_MAP_ALIGN)
                .u64(ws)
                .u64(counters);
            if st.any() {
                args.u64(stage_a).u64(stage_b).i32(prepass);
            }
            if let Some(tm_c) = &tm_c {
                args.bytes(tm_c, TENSOR_MAP_ALIGN);
            }
            args
        };
        if let Some(pd) = pre {
            let cfg = LaunchConfig::new(pd.grid, pd.block, pd.dynamic_smem);
            let mut args = args_for(p, 1);
            tracing::debug!(kernel = f.name(), grid = ?pd.grid, bytes = staging_bytes(p), "wgmma tf32 staging pre-pass");
            // SAFETY: the kernel ABI of `wgmma.rs` with the three staging parameters; the pre-pass
            // reads A/B within the checked buffer sizes (the user's leading dimensions and batch
            // strides) and writes only the staging buffer, checked to hold `staging_bytes(p)`.
            unsafe { f.launch(stream, &cfg, &mut args)? };
        }
        let cfg = LaunchConfig::new(dims.grid, dims.block, dims.dynamic_smem);
        let mut args = args_for(&q, 0);
        tracing::debug!(kernel = f.name(), grid = ?dims.grid, block = ?dims.block, smem = dims.dynamic_smem, "wgmma GEMM launch");
        // SAFETY: the arguments follow the kernel ABI documented in `wgmma.rs` (pointers, 6 ints,
        // 3 long longs, 2 floats, 2 by-value 128-byte maps, 2 workspace pointers, for staged
        // tf32 problems 2 staging pointers and the pre-pass flag, and with `tma_store` the map of C); the buffers were checked to be large
        // enough for every element the kernel reads or writes, and outlive the call (the caller
        // keeps them alive until the stream has run the kernel).
        unsafe { f.launch(stream, &cfg, &mut args)? };
        Ok(())
    }
}
