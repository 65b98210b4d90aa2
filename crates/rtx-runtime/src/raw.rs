//! The only place that calls into the CUDA driver / NVRTC / cuBLAS C APIs.
//!
//! Functions here are thin, typed wrappers over `cudarc::*::sys`. They are safe to call with
//! handles created by this crate (the owning types keep them alive); the few that take raw host
//! pointers or kernel parameter arrays stay `unsafe`. With dynamic loading, cudarc panics when a
//! library is missing, so [`driver_present`] / [`cublas_present`] / [`nvrtc_present`] must be
//! checked first; every public entry point of the crate does so.

use crate::error::RuntimeError;
use cudarc::driver::sys;
use std::ffi::{c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// A `CUcontext` that may be sent between threads (CUDA contexts are thread-safe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ctx(pub(crate) sys::CUcontext);
// SAFETY: CUDA driver contexts may be used from any thread once made current there.
unsafe impl Send for Ctx {}
// SAFETY: as above; the driver synchronizes internally.
unsafe impl Sync for Ctx {}

fn code_name(r: sys::CUresult) -> String {
    format!("{r:?}")
}

/// Turns a `CUresult` into a [`RuntimeError::Driver`] naming `op`.
pub(crate) fn check(op: &'static str, r: sys::CUresult) -> Result<(), RuntimeError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(RuntimeError::Driver {
            op,
            code: code_name(r),
        })
    }
}

/// Whether `libcuda` can be loaded (cached).
pub(crate) fn driver_present() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library.
    *P.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Whether `libcublas` can be loaded (cached).
pub(crate) fn cublas_present() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library.
    *P.get_or_init(|| unsafe { cudarc::cublas::sys::is_culib_present() })
}

/// Whether `libnvrtc` can be loaded (cached).
pub(crate) fn nvrtc_present() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to dlopen the library.
    *P.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() })
}

/// `cuInit(0)`, once per process; the first result is remembered.
pub(crate) fn init() -> Result<(), RuntimeError> {
    static R: OnceLock<Result<(), RuntimeError>> = OnceLock::new();
    R.get_or_init(|| {
        if !driver_present() {
            return Err(RuntimeError::NoDriver);
        }
        // SAFETY: the library is present; cuInit has no pointer arguments.
        check("cuInit", unsafe { sys::cuInit(0) })
    })
    .clone()
}

/// Number of devices (requires [`init`]).
pub(crate) fn device_count() -> Result<usize, RuntimeError> {
    init()?;
    let mut n = 0i32;
    // SAFETY: valid out pointer.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// `cuDeviceGet`.
pub(crate) fn device_get(ordinal: usize) -> Result<sys::CUdevice, RuntimeError> {
    let mut d = MaybeUninit::uninit();
    let ord = i32::try_from(ordinal).map_err(|_| RuntimeError::NoDevice { ordinal, count: 0 })?;
    // SAFETY: valid out pointer.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(d.as_mut_ptr(), ord)
    })?;
    // SAFETY: initialized on success.
    Ok(unsafe { d.assume_init() })
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_attr(
    dev: sys::CUdevice,
    attr: sys::CUdevice_attribute,
) -> Result<i32, RuntimeError> {
    let mut v = 0i32;
    // SAFETY: valid out pointer; dev came from cuDeviceGet.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, attr, dev)
    })?;
    Ok(v)
}

/// `cuDeviceGetName`.
pub(crate) fn device_name(dev: sys::CUdevice) -> Result<String, RuntimeError> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: buffer of the given length.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // SAFETY: the driver NUL-terminates within the buffer; force a terminator anyway.
    buf[buf.len() - 1] = 0;
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(s.to_string_lossy().into_owned())
}

/// `cuDeviceGetUuid_v2`: the 16 bytes that name this GPU (or MIG instance) across processes and
/// `CUDA_VISIBLE_DEVICES` orderings.
pub(crate) fn device_uuid(dev: sys::CUdevice) -> Result<[u8; 16], RuntimeError> {
    let mut u = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: valid out pointer.
    check("cuDeviceGetUuid_v2", unsafe {
        sys::cuDeviceGetUuid_v2(&mut u, dev)
    })?;
    Ok(u.bytes.map(|b| b as u8))
}

/// `cuDeviceTotalMem`.
pub(crate) fn device_total_mem(dev: sys::CUdevice) -> Result<usize, RuntimeError> {
    let mut v = 0usize;
    // SAFETY: valid out pointer.
    check("cuDeviceTotalMem", unsafe {
        sys::cuDeviceTotalMem_v2(&mut v, dev)
    })?;
    Ok(v)
}

/// `cuDriverGetVersion` as (major, minor).
pub(crate) fn driver_version() -> Result<(i32, i32), RuntimeError> {
    let mut v = 0i32;
    // SAFETY: valid out pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// NVRTC version, `None` when libnvrtc is absent or the call fails.
pub(crate) fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_present() {
        return None;
    }
    let (mut a, mut b) = (0i32, 0i32);
    // SAFETY: library present; valid out pointers.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((a, b))
}

/// Retains the device's primary context.
pub(crate) fn primary_ctx_retain(dev: sys::CUdevice) -> Result<Ctx, RuntimeError> {
    let mut c = MaybeUninit::uninit();
    // SAFETY: valid out pointer; dev from cuDeviceGet.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(c.as_mut_ptr(), dev)
    })?;
    // SAFETY: initialized on success.
    Ok(Ctx(unsafe { c.assume_init() }))
}

/// Releases one retain of the primary context.
pub(crate) fn primary_ctx_release(dev: sys::CUdevice) -> Result<(), RuntimeError> {
    // SAFETY: paired with a successful retain by the caller.
    check("cuDevicePrimaryCtxRelease", unsafe {
        sys::cuDevicePrimaryCtxRelease_v2(dev)
    })
}

/// Makes `ctx` current on the calling thread.
pub(crate) fn bind(ctx: Ctx) -> Result<(), RuntimeError> {
    // SAFETY: ctx is a retained primary context.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx.0) })
}

/// `cuCtxSynchronize` on the current context.
pub(crate) fn ctx_synchronize() -> Result<(), RuntimeError> {
    // SAFETY: no arguments.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// `cuMemGetInfo` (free, total) for the current context.
pub(crate) fn mem_info() -> Result<(usize, usize), RuntimeError> {
    let (mut f, mut t) = (0usize, 0usize);
    // SAFETY: valid out pointers.
    check("cuMemGetInfo", unsafe {
        sys::cuMemGetInfo_v2(&mut f, &mut t)
    })?;
    Ok((f, t))
}

/// Raw result of `cuMemAlloc` (so the caller can recognize out-of-memory).
pub(crate) fn mem_alloc(bytes: usize) -> Result<u64, sys::CUresult> {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: valid out pointer.
    let r = unsafe { sys::cuMemAlloc_v2(&mut p, bytes) };
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(p)
    } else {
        Err(r)
    }
}

/// Whether a raw `CUresult` is out-of-memory.
pub(crate) fn is_oom(r: sys::CUresult) -> bool {
    r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

/// Converts a raw result into an error (for non-OOM failures of [`mem_alloc`]).
pub(crate) fn driver_error(op: &'static str, r: sys::CUresult) -> RuntimeError {
    RuntimeError::Driver {
        op,
        code: code_name(r),
    }
}

/// `cuMemFree`.
pub(crate) fn mem_free(ptr: u64) -> Result<(), RuntimeError> {
    // SAFETY: ptr came from cuMemAlloc in the current context and is freed once (pool invariant).
    check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) })
}

/// `cuMemcpyHtoDAsync`.
///
/// # Safety
/// `src` must be valid for `bytes` reads until the copy completes; `dst` must be a device
/// allocation of at least `bytes`.
pub(crate) unsafe fn memcpy_htod_async(
    dst: u64,
    src: *const u8,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), RuntimeError> {
    check("cuMemcpyHtoDAsync", unsafe {
        sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, bytes, stream)
    })
}

/// `cuMemcpyDtoHAsync`.
///
/// # Safety
/// `dst` must be valid for `bytes` writes until the copy completes.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut u8,
    src: u64,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), RuntimeError> {
    check("cuMemcpyDtoHAsync", unsafe {
        sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, bytes, stream)
    })
}

/// `cuMemcpyDtoDAsync` between two allocations of at least `bytes`.
pub(crate) fn memcpy_dtod_async(
    dst: u64,
    src: u64,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), RuntimeError> {
    // SAFETY: both are live device allocations of >= bytes (checked by DeviceBuffer).
    check("cuMemcpyDtoDAsync", unsafe {
        sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)
    })
}

/// `cuMemsetD8Async`.
pub(crate) fn memset_d8_async(
    dst: u64,
    byte: u8,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), RuntimeError> {
    // SAFETY: dst is a live device allocation of >= bytes (checked by DeviceBuffer).
    check("cuMemsetD8Async", unsafe {
        sys::cuMemsetD8Async(dst, byte, bytes, stream)
    })
}

/// Creates a non-blocking stream in the current context.
pub(crate) fn stream_create() -> Result<sys::CUstream, RuntimeError> {
    let mut s = MaybeUninit::uninit();
    // SAFETY: valid out pointer.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            s.as_mut_ptr(),
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        )
    })?;
    // SAFETY: initialized on success.
    Ok(unsafe { s.assume_init() })
}

/// `cuStreamDestroy`.
pub(crate) fn stream_destroy(s: sys::CUstream) -> Result<(), RuntimeError> {
    // SAFETY: s was created by stream_create and is destroyed once (Drop).
    check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(s) })
}

/// `cuStreamSynchronize`.
pub(crate) fn stream_synchronize(s: sys::CUstream) -> Result<(), RuntimeError> {
    // SAFETY: s is a live stream.
    check("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(s)
    })
}

/// `cuStreamWaitEvent`.
pub(crate) fn stream_wait_event(s: sys::CUstream, e: sys::CUevent) -> Result<(), RuntimeError> {
    // SAFETY: both handles live.
    check("cuStreamWaitEvent", unsafe {
        sys::cuStreamWaitEvent(s, e, 0)
    })
}

/// Creates a timing-enabled event (`CU_EVENT_DEFAULT`).
pub(crate) fn event_create() -> Result<sys::CUevent, RuntimeError> {
    let mut e = MaybeUninit::uninit();
    // SAFETY: valid out pointer.
    check("cuEventCreate", unsafe {
        sys::cuEventCreate(e.as_mut_ptr(), sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
    })?;
    // SAFETY: initialized on success.
    Ok(unsafe { e.assume_init() })
}

/// `cuEventDestroy`.
pub(crate) fn event_destroy(e: sys::CUevent) -> Result<(), RuntimeError> {
    // SAFETY: e is live and destroyed once (Drop).
    check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(e) })
}

/// `cuEventRecord`.
pub(crate) fn event_record(e: sys::CUevent, s: sys::CUstream) -> Result<(), RuntimeError> {
    // SAFETY: both handles live.
    check("cuEventRecord", unsafe { sys::cuEventRecord(e, s) })
}

/// `cuEventSynchronize`.
pub(crate) fn event_synchronize(e: sys::CUevent) -> Result<(), RuntimeError> {
    // SAFETY: e is live.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(e) })
}

/// `cuEventQuery`: Ok(true) when complete, Ok(false) when not ready.
pub(crate) fn event_query(e: sys::CUevent) -> Result<bool, RuntimeError> {
    // SAFETY: e is live.
    let r = unsafe { sys::cuEventQuery(e) };
    if r == sys::CUresult::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check("cuEventQuery", r).map(|_| true)
}

/// `cuEventElapsedTime` in milliseconds. The `_v2` entry point only exists in drivers >= 12.8,
/// and cudarc would panic on a missing symbol, so the symbol is looked up here (v2, else v1).
pub(crate) fn event_elapsed(start: sys::CUevent, end: sys::CUevent) -> Result<f32, RuntimeError> {
    type F = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;
    static SYM: OnceLock<Option<F>> = OnceLock::new();
    let f = SYM.get_or_init(|| {
        // SAFETY: the driver library is present (a Device exists); the symbols have this C type.
        let lib = unsafe { sys::culib() };
        [
            &b"cuEventElapsedTime_v2\0"[..],
            &b"cuEventElapsedTime\0"[..],
        ]
        .iter()
        // SAFETY: as above.
        .find_map(|name| unsafe { lib.get::<F>(*name) }.ok().map(|s| *s))
    });
    let Some(f) = f else {
        return Err(RuntimeError::Driver {
            op: "cuEventElapsedTime",
            code: "symbol not found in libcuda".into(),
        });
    };
    let mut ms = 0f32;
    // SAFETY: valid out pointer; both events live.
    check("cuEventElapsedTime", unsafe { f(&mut ms, start, end) })?;
    Ok(ms)
}

/// Loads a module image (NUL-terminated PTX, cubin or fatbin) in the current context, capturing
/// the JIT error log.
///
/// # Safety
/// `image` must point to a complete, well-formed image (PTX must be NUL-terminated).
pub(crate) unsafe fn module_load(image: *const u8) -> Result<sys::CUmodule, (String, String)> {
    const LOG: usize = 16 * 1024;
    let mut log = vec![0u8; LOG];
    let mut opts = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr() as *mut c_void, LOG as *mut c_void];
    let mut m = MaybeUninit::uninit();
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            m.as_mut_ptr(),
            image as *const c_void,
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    if r == sys::CUresult::CUDA_SUCCESS {
        // SAFETY: initialized on success.
        Ok(unsafe { m.assume_init() })
    } else {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        Err((
            code_name(r),
            String::from_utf8_lossy(&log[..end]).trim().to_string(),
        ))
    }
}

/// `cuModuleUnload`.
pub(crate) fn module_unload(m: sys::CUmodule) -> Result<(), RuntimeError> {
    // SAFETY: m is live and unloaded once (Drop).
    check("cuModuleUnload", unsafe { sys::cuModuleUnload(m) })
}

/// `cuModuleGetFunction`; `Ok(None)` when the name is not in the module.
pub(crate) fn module_get_function(
    m: sys::CUmodule,
    name: &CString,
) -> Result<Option<sys::CUfunction>, RuntimeError> {
    let mut f = MaybeUninit::uninit();
    // SAFETY: valid out pointer, NUL-terminated name, live module.
    let r = unsafe { sys::cuModuleGetFunction(f.as_mut_ptr(), m, name.as_ptr()) };
    if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
        return Ok(None);
    }
    check("cuModuleGetFunction", r)?;
    // SAFETY: initialized on success.
    Ok(Some(unsafe { f.assume_init() }))
}

/// `cuFuncGetAttribute`.
pub(crate) fn func_attr(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
) -> Result<i32, RuntimeError> {
    let mut v = 0i32;
    // SAFETY: valid out pointer; f is live while its module is.
    check("cuFuncGetAttribute", unsafe {
        sys::cuFuncGetAttribute(&mut v, attr, f)
    })?;
    Ok(v)
}

/// `cuFuncSetAttribute`.
pub(crate) fn func_set_attr(
    f: sys::CUfunction,
    attr: sys::CUfunction_attribute,
    value: i32,
) -> Result<(), RuntimeError> {
    // SAFETY: f is live while its module is.
    check("cuFuncSetAttribute", unsafe {
        sys::cuFuncSetAttribute(f, attr, value)
    })
}

/// `cuLaunchKernel`.
///
/// # Safety
/// `params` must hold one pointer per kernel parameter, each pointing at a value of the type
/// and size the kernel expects; the kernel must only touch memory it is allowed to.
pub(crate) unsafe fn launch(
    f: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    smem: u32,
    stream: sys::CUstream,
    params: *mut *mut c_void,
) -> Result<(), RuntimeError> {
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            f,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            smem,
            stream,
            params,
            std::ptr::null_mut(),
        )
    })
}

/// Arguments of `cuTensorMapEncodeTiled` for a rank-2 tensor (already validated).
pub(crate) struct TiledArgs {
    pub dtype: sys::CUtensorMapDataType,
    pub address: u64,
    pub dims: [u64; 2],
    pub stride_bytes: u64,
    pub box_dims: [u32; 2],
    pub swizzle: sys::CUtensorMapSwizzle,
    pub l2: sys::CUtensorMapL2promotion,
    pub oob_nan: bool,
}

/// `cuTensorMapEncodeTiled` for rank 2; returns the 128-byte opaque map.
pub(crate) fn tensor_map_encode_tiled(a: &TiledArgs) -> Result<[u8; 128], RuntimeError> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let strides = [a.stride_bytes];
    let elem_strides = [1u32, 1u32];
    let oob = if a.oob_nan {
        sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    } else {
        sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    };
    // SAFETY: all arrays have the rank-2 lengths the API expects; the address is only encoded,
    // not dereferenced.
    check("cuTensorMapEncodeTiled", unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            a.dtype,
            2,
            a.address as *mut c_void,
            a.dims.as_ptr(),
            strides.as_ptr(),
            a.box_dims.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            a.swizzle,
            a.l2,
            oob,
        )
    })?;
    let mut out = [0u8; 128];
    for (i, w) in map.opaque.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    Ok(out)
}

/// cuBLAS entry points.
pub(crate) mod cublas {
    use crate::error::RuntimeError;
    use cudarc::cublas::sys;
    use std::ffi::c_void;
    use std::mem::MaybeUninit;

    /// A `cublasHandle_t` that may move between threads (guarded by a mutex by its owner).
    #[derive(Debug)]
    pub(crate) struct Handle(pub(crate) sys::cublasHandle_t);
    // SAFETY: a cuBLAS handle may be used from any thread, one at a time (owner holds a Mutex).
    unsafe impl Send for Handle {}

    fn check(op: &'static str, s: sys::cublasStatus_t) -> Result<(), RuntimeError> {
        if s == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(RuntimeError::Blas {
                op,
                status: format!("{s:?}"),
            })
        }
    }

    /// `cublasCreate` + `cublasSetStream` (current context must be bound).
    pub(crate) fn create(stream: cudarc::driver::sys::CUstream) -> Result<Handle, RuntimeError> {
        let mut h = MaybeUninit::uninit();
        // SAFETY: valid out pointer.
        check("cublasCreate", unsafe {
            sys::cublasCreate_v2(h.as_mut_ptr())
        })?;
        // SAFETY: initialized on success.
        let h = Handle(unsafe { h.assume_init() });
        // SAFETY: live handle and stream; the CUstream types are the same C type.
        check("cublasSetStream", unsafe {
            sys::cublasSetStream_v2(h.0, stream as sys::cudaStream_t)
        })?;
        Ok(h)
    }

    /// `cublasDestroy`.
    pub(crate) fn destroy(h: &Handle) -> Result<(), RuntimeError> {
        // SAFETY: destroyed once by the owner's Drop.
        check("cublasDestroy", unsafe { sys::cublasDestroy_v2(h.0) })
    }

    /// Column-major `cublasGemmStridedBatchedEx` arguments (already validated and swapped).
    pub(crate) struct ColGemm {
        pub transa: bool,
        pub transb: bool,
        pub m: i32,
        pub n: i32,
        pub k: i32,
        pub alpha: f32,
        pub a: u64,
        pub a_type: sys::cudaDataType,
        pub lda: i32,
        pub stride_a: i64,
        pub b: u64,
        pub b_type: sys::cudaDataType,
        pub ldb: i32,
        pub stride_b: i64,
        pub beta: f32,
        pub c: u64,
        pub c_type: sys::cudaDataType,
        pub ldc: i32,
        pub stride_c: i64,
        pub batch: i32,
        pub compute: sys::cublasComputeType_t,
    }

    fn op(t: bool) -> sys::cublasOperation_t {
        if t {
            sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            sys::cublasOperation_t::CUBLAS_OP_N
        }
    }

    /// Runs the GEMM on the handle's stream.
    ///
    /// # Safety
    /// The device pointers must address allocations large enough for the given shapes.
    pub(crate) unsafe fn gemm(h: &Handle, g: &ColGemm) -> Result<(), RuntimeError> {
        let alpha = g.alpha;
        let beta = g.beta;
        let algo = sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        if g.batch == 1 {
            check("cublasGemmEx", unsafe {
                sys::cublasGemmEx(
                    h.0,
                    op(g.transa),
                    op(g.transb),
                    g.m,
                    g.n,
                    g.k,
                    &alpha as *const f32 as *const c_void,
                    g.a as *const c_void,
                    g.a_type,
                    g.lda,
                    g.b as *const c_void,
                    g.b_type,
                    g.ldb,
                    &beta as *const f32 as *const c_void,
                    g.c as *mut c_void,
                    g.c_type,
                    g.ldc,
                    g.compute,
                    algo,
                )
            })
        } else {
            check("cublasGemmStridedBatchedEx", unsafe {
                sys::cublasGemmStridedBatchedEx(
                    h.0,
                    op(g.transa),
                    op(g.transb),
                    g.m,
                    g.n,
                    g.k,
                    &alpha as *const f32 as *const c_void,
                    g.a as *const c_void,
                    g.a_type,
                    g.lda,
                    g.stride_a,
                    g.b as *const c_void,
                    g.b_type,
                    g.ldb,
                    g.stride_b,
                    &beta as *const f32 as *const c_void,
                    g.c as *mut c_void,
                    g.c_type,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                    g.compute,
                    algo,
                )
            })
        }
    }
}
