//! One NVRTC compile: CUDA C++ to a cubin for a real architecture.

use super::resources::{
    parse_ptxas_log, ptxas_report_in, MissingPtxasReport, ResourceReport, ResourceUsage,
};
use super::toolchain::{Toolchain, ToolchainError};
use crate::templates::KernelSource;
use crate::Arch;
use cudarc::nvrtc::sys;
use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static NVRTC_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many NVRTC compilations this process has started (a warm start makes none).
pub fn nvrtc_calls() -> u64 {
    NVRTC_CALLS.load(Ordering::Relaxed)
}

/// A finished compile.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The cubin for `arch`.
    pub cubin: Vec<u8>,
    /// The target it was built for.
    pub arch: Arch,
    /// NVRTC's program log (includes ptxas' `-v` resource lines).
    pub log: String,
    /// Wall time of the NVRTC call.
    pub compile_time: Duration,
    /// Per-function resource use parsed from [`Compiled::log`].
    pub resources: Vec<ResourceUsage>,
    /// The NVRTC version `(major, minor)` that produced the cubin.
    pub nvrtc_version: (i32, i32),
}

impl Compiled {
    /// The resource report of the function named `entry`, if ptxas reported one.
    pub fn resources_for(&self, entry: &str) -> Option<&ResourceUsage> {
        self.resources.iter().find(|r| r.function == entry)
    }

    /// `entry`'s report from ptxas' log as a [`ResourceReport`], or why there is none (the log
    /// has no ptxas lines at all, or none for `entry`). Tests that need ptxas lines use this
    /// to skip with the reason instead of failing; see [`ResourceReport::from_driver`] for the
    /// source that needs no log.
    pub fn ptxas_report(&self, entry: &str) -> Result<ResourceReport, MissingPtxasReport> {
        ptxas_report_in(&self.resources, entry, &self.log)
    }
}

/// Why a compile failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CompileError {
    /// NVRTC or the headers are not available.
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    /// The source, the entry name or an option has an interior NUL byte.
    #[error("kernel `{entry}`: source, entry name or an option contains a NUL byte")]
    NulInSource {
        /// Entry point.
        entry: String,
    },
    /// NVRTC rejected the program.
    #[error("NVRTC failed to compile `{entry}` for {arch} ({status}):\n{log}")]
    Nvrtc {
        /// Entry point.
        entry: String,
        /// Target.
        arch: Arch,
        /// NVRTC status name.
        status: String,
        /// Options passed to NVRTC.
        options: Vec<String>,
        /// The compiler log.
        log: String,
        /// The offending source.
        code: String,
    },
}

/// The first NVRTC version with its own compile cache (CUDA 12.9). On a cache hit NVRTC hands
/// back the stored cubin without running ptxas, so the program log has no `ptxas info` lines
/// (NVIDIA/Fuser#4694, NVIDIA/cuda-python#1124); rtx passes `--no-cache` from this version on.
pub const NVRTC_CACHE_SINCE: (i32, i32) = (12, 9);

/// The full NVRTC option list for `src` on `arch`.
///
/// - `--gpu-architecture=sm_XX` (a real architecture, `sm_90a` on Hopper): NVRTC runs ptxas
///   and [`compile`] takes the cubin with `nvrtcGetCUBIN`; no PTX is produced or JIT-compiled.
/// - `--ptxas-options=-v`: ptxas' resource lines in the program log (NVRTC's spelling of
///   nvcc's `-Xptxas -v`).
/// - `--no-cache` for NVRTC >= [`NVRTC_CACHE_SINCE`]: NVRTC's own cache would skip ptxas (and
///   its `-v` report) on a hit and make cold-compile timings meaningless; rtx caches cubins
///   itself ([`crate::aot::KernelCache`]).
/// - `-lineinfo` when [`LINEINFO_ENV`] is `1`: source lines in the cubin for Nsight Compute's
///   per-line stall sampling (the option is part of the cache key, so such cubins key apart).
pub fn options_for(src: &KernelSource, arch: Arch, tc: &Toolchain) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={}", arch.sm_name()),
        format!("--include-path={}", tc.include_dir.display()),
        "--std=c++17".to_string(),
        "--ptxas-options=-v".to_string(),
        "-default-device".to_string(),
    ];
    if tc.nvrtc_version >= NVRTC_CACHE_SINCE {
        o.push("--no-cache".to_string());
    }
    if std::env::var(LINEINFO_ENV).is_ok_and(|v| v == "1") {
        o.push("-lineinfo".to_string());
    }
    o.extend(src.options.iter().cloned());
    o
}

/// Environment variable that adds `-lineinfo` to every NVRTC compile (profiling builds).
pub const LINEINFO_ENV: &str = "RTX_NVRTC_LINEINFO";

fn check(status: sys::nvrtcResult) -> Result<(), String> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(format!("{status:?}"))
    }
}

/// Compiles `src` to a cubin for `arch` (one NVRTC call, no cache).
pub fn compile(src: &KernelSource, arch: Arch) -> Result<Compiled, CompileError> {
    let tc = Toolchain::get()?;
    let options = options_for(src, arch, tc);
    let nul = |_| CompileError::NulInSource {
        entry: src.entry.clone(),
    };
    let code = CString::new(src.code.as_str()).map_err(nul)?;
    let name = CString::new(format!("{}.cu", src.entry)).map_err(nul)?;
    let c_opts = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(nul)?;
    let opt_ptrs: Vec<*const c_char> = c_opts.iter().map(|c| c.as_ptr()).collect();
    NVRTC_CALLS.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    let fail = |status: String, log: String| CompileError::Nvrtc {
        entry: src.entry.clone(),
        arch,
        status,
        options: options.clone(),
        log,
        code: src.code.clone(),
    };
    // SAFETY: all pointers are valid C strings that outlive the program, which is destroyed below.
    unsafe {
        check(sys::nvrtcCreateProgram(
            &mut prog,
            code.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        ))
        .map_err(|s| fail(s, String::new()))?;
        let status = sys::nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr());
        let log = program_log(prog);
        let result = match check(status) {
            Err(s) => Err(fail(s, log)),
            Ok(()) => {
                let mut size = 0usize;
                match check(sys::nvrtcGetCUBINSize(prog, &mut size)) {
                    Err(s) => Err(fail(s, log)),
                    Ok(()) => {
                        let mut cubin = vec![0u8; size];
                        match check(sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char)) {
                            Err(s) => Err(fail(s, log)),
                            Ok(()) => Ok(Compiled {
                                cubin,
                                arch,
                                resources: ptxas_resources(&src.entry, &log, arch),
                                log,
                                compile_time: started.elapsed(),
                                nvrtc_version: tc.nvrtc_version,
                            }),
                        }
                    }
                }
            }
        };
        sys::nvrtcDestroyProgram(&mut prog);
        result
    }
}

/// The ptxas report of a successful compile; a log without one is logged (the driver's
/// attributes are then the only resource source, see [`crate::aot::ResourceReport`]).
fn ptxas_resources(entry: &str, log: &str, arch: Arch) -> Vec<ResourceUsage> {
    let r = parse_ptxas_log(log, arch);
    if r.is_empty() {
        tracing::warn!(
            entry,
            %arch,
            log_bytes = log.len(),
            "NVRTC returned no ptxas resource lines; resource checks fall back to driver attributes"
        );
    }
    r
}

/// # Safety
/// `prog` must be a live NVRTC program.
unsafe fn program_log(prog: sys::nvrtcProgram) -> String {
    let mut size = 0usize;
    if sys::nvrtcGetProgramLogSize(prog, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS || size == 0
    {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    if sys::nvrtcGetProgramLog(prog, buf.as_mut_ptr() as *mut c_char)
        != sys::nvrtcResult::NVRTC_SUCCESS
    {
        return String::new();
    }
    String::from_utf8_lossy(&buf)
        .trim_end_matches('\0')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saxpy() -> KernelSource {
        KernelSource {
            entry: "saxpy_f16".into(),
            code: r#"#include <cuda_fp16.h>
extern "C" __global__ void saxpy_f16(const __half* x, __half* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half(a * __half2float(x[i]) + __half2float(y[i]));
}
"#
            .into(),
            template: "test".into(),
            template_version: 1,
            options: vec![],
        }
    }

    #[test]
    fn compiles_a_real_cubin_for_hopper_and_blackwell() {
        // The test command installs NVRTC; outside it this is reported, not hidden.
        if !crate::aot::nvrtc_or_skip("compiles_a_real_cubin") {
            return;
        }
        let tc = Toolchain::get().unwrap();
        assert_eq!(tc.nvrtc_version.0, 13);
        for arch in [Arch::Sm90a, Arch::Sm120] {
            let c = compile(&saxpy(), arch).unwrap();
            assert_eq!(&c.cubin[..4], b"\x7fELF", "a cubin is an ELF image");
            assert!(
                c.log.contains("saxpy_f16"),
                "ptxas -v names the function: {}",
                c.log
            );
            let opts = options_for(&saxpy(), arch, tc);
            assert!(opts.contains(&format!("--gpu-architecture={}", arch.sm_name())));
            assert!(opts.iter().any(|o| o == "--ptxas-options=-v"));
            assert_eq!(
                opts.iter().any(|o| o == "--no-cache"),
                tc.nvrtc_version >= NVRTC_CACHE_SINCE
            );
            eprintln!(
                "{arch}: {} bytes in {:?}\n{}",
                c.cubin.len(),
                c.compile_time,
                c.log
            );
        }
    }

    /// NVRTC >= 12.9 caches compiles; a repeat of the same program must still run ptxas and
    /// report its resources (the H200's system NVRTC returned empty logs before `--no-cache`).
    #[test]
    fn a_repeated_compile_still_reports_ptxas_lines() {
        if !crate::aot::nvrtc_or_skip("a_repeated_compile_still_reports_ptxas_lines") {
            return;
        }
        let first = compile(&saxpy(), Arch::Sm90a).unwrap();
        let again = compile(&saxpy(), Arch::Sm90a).unwrap();
        assert_eq!(first.cubin, again.cubin);
        for c in [&first, &again] {
            let r = c
                .ptxas_report("saxpy_f16")
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(r.registers > 0);
            assert_eq!(r.source, crate::aot::ResourceSource::PtxasLog);
        }
    }

    #[test]
    fn compile_errors_carry_log_and_source() {
        if Toolchain::get().is_err() {
            return;
        }
        let mut bad = saxpy();
        bad.code.push_str("this is not C++;\n");
        match compile(&bad, Arch::Sm90a) {
            Err(CompileError::Nvrtc { log, code, .. }) => {
                assert!(log.contains("error"), "{log}");
                assert!(code.contains("this is not C++"));
            }
            other => panic!("expected an NVRTC error, got {other:?}"),
        }
    }
}
