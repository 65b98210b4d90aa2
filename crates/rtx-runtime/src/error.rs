//! The runtime's error type: every failure names the operation and the offending input.

/// Everything that can go wrong in the runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The CUDA driver library (`libcuda.so`) could not be loaded on this machine.
    #[error("CUDA driver library (libcuda) not found: no NVIDIA driver installed or not on the loader path")]
    NoDriver,
    /// An optional CUDA library (cuBLAS, cuBLASLt, NVRTC) could not be loaded.
    #[error("CUDA library `{lib}` could not be loaded (not installed or not on LD_LIBRARY_PATH)")]
    NoLibrary {
        /// Library name, e.g. `cublas`.
        lib: &'static str,
    },
    /// The requested device ordinal does not exist.
    #[error("no CUDA device with ordinal {ordinal} ({count} device(s) present)")]
    NoDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA driver call {op} failed: {code}")]
    Driver {
        /// The driver entry point (e.g. `cuMemAlloc`).
        op: &'static str,
        /// The `CUresult` name (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`).
        code: String,
    },
    /// Device memory is exhausted even after the allocator's cache was emptied.
    #[error("out of device memory: requested {requested} bytes, {free} of {total} bytes free (after emptying the allocator cache)")]
    OutOfMemory {
        /// Bytes requested by the caller.
        requested: usize,
        /// Bytes the driver reported free.
        free: usize,
        /// Total device memory.
        total: usize,
    },
    /// A kernel launch was refused before reaching the driver.
    #[error("invalid launch: {reason}")]
    InvalidLaunch {
        /// What limit the launch violates.
        reason: String,
    },
    /// A module image was rejected.
    #[error("loading {kind} module failed ({code}): {log}")]
    ModuleLoad {
        /// `cubin`, `fatbin` or `ptx`.
        kind: &'static str,
        /// The driver's error name, or a description of the malformed image.
        code: String,
        /// JIT error log (PTX) or empty.
        log: String,
    },
    /// `Module::function` found no kernel with that name.
    #[error("module has no function named `{name}`")]
    MissingFunction {
        /// The requested name.
        name: String,
    },
    /// A cuBLAS/cuBLASLt call failed or was refused.
    #[error("cuBLAS {op} failed: {status}")]
    Blas {
        /// The cuBLAS entry point or check that failed.
        op: &'static str,
        /// The status name or the reason for refusing.
        status: String,
    },
    /// A tensor-map description was rejected before or by `cuTensorMapEncodeTiled`.
    #[error("invalid tensor map: {reason}")]
    TensorMap {
        /// What was wrong.
        reason: String,
    },
    /// A caller-provided argument was invalid (sizes, devices, pointers).
    #[error("invalid argument to {op}: {reason}")]
    InvalidArgument {
        /// The API that refused.
        op: &'static str,
        /// Why.
        reason: String,
    },
}

/// Driver error names after which the CUDA context is unusable until the process exits.
const STICKY_CODES: &[&str] = &[
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
];

impl RuntimeError {
    /// True for errors that corrupt the CUDA context (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`): every
    /// later call on the same device fails; the process must be restarted to use the GPU again.
    pub fn is_sticky(&self) -> bool {
        match self {
            RuntimeError::Driver { code, .. } => STICKY_CODES.iter().any(|c| c == code),
            _ => false,
        }
    }

    /// True for [`RuntimeError::OutOfMemory`].
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, RuntimeError::OutOfMemory { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_classification() {
        let e = RuntimeError::Driver {
            op: "cuStreamSynchronize",
            code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        };
        assert!(e.is_sticky());
        let e = RuntimeError::Driver {
            op: "cuMemAlloc",
            code: "CUDA_ERROR_INVALID_VALUE".into(),
        };
        assert!(!e.is_sticky());
        assert!(!RuntimeError::NoDriver.is_sticky());
    }

    #[test]
    fn oom_message_names_sizes() {
        let e = RuntimeError::OutOfMemory {
            requested: 123,
            free: 45,
            total: 678,
        };
        let s = e.to_string();
        assert!(
            s.contains("123") && s.contains("45") && s.contains("678"),
            "{s}"
        );
        assert!(e.is_out_of_memory());
    }
}
