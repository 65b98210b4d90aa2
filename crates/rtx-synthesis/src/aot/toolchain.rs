//! Finding NVRTC and the CUDA headers on this machine.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What rtx found of the CUDA compile toolchain.
#[derive(Debug, Clone)]
pub struct Toolchain {
    /// NVRTC version `(major, minor)`.
    pub nvrtc_version: (i32, i32),
    /// Directory holding `cuda_fp16.h`, `cuda_bf16.h`, `mma.h`, ...
    pub include_dir: PathBuf,
}

/// Why the toolchain could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolchainError {
    /// `libnvrtc.so` could not be loaded.
    #[error("NVRTC (libnvrtc.so.13) could not be loaded: put its folder on LD_LIBRARY_PATH, or run `cargo xtask test`, which installs it into ./.cuda")]
    NvrtcMissing,
    /// No folder with `cuda_fp16.h` was found.
    #[error(
        "CUDA headers not found (looked for cuda_fp16.h in: {searched}); set RTX_CUDA_INCLUDE"
    )]
    HeadersMissing {
        /// The folders that were searched.
        searched: String,
    },
}

fn header_candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("RTX_CUDA_INCLUDE") {
        v.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(p) = std::env::var_os(var) {
            v.push(Path::new(&p).join("include"));
        }
    }
    v.push(PathBuf::from("/usr/local/cuda/include"));
    // The project-local install made by `cargo xtask test`, found from the crate or the cwd.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for base in [
        manifest.join("../.."),
        std::env::current_dir().unwrap_or_default(),
    ] {
        v.push(base.join(".cuda/site/nvidia/cu13/include"));
    }
    v
}

impl Toolchain {
    /// Detects NVRTC and the headers once per process.
    pub fn get() -> Result<&'static Toolchain, ToolchainError> {
        static TC: OnceLock<Result<Toolchain, ToolchainError>> = OnceLock::new();
        TC.get_or_init(Self::detect).as_ref().map_err(Clone::clone)
    }

    fn detect() -> Result<Toolchain, ToolchainError> {
        // SAFETY: probing for the shared library has no preconditions.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(ToolchainError::NvrtcMissing);
        }
        let (mut major, mut minor) = (0i32, 0i32);
        // SAFETY: the library is present; the out-pointers are valid.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        let candidates = header_candidates();
        let include_dir = candidates
            .iter()
            .find(|d| d.join("cuda_fp16.h").is_file())
            .cloned()
            .ok_or_else(|| ToolchainError::HeadersMissing {
                searched: candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        Ok(Toolchain {
            nvrtc_version: (major, minor),
            include_dir,
        })
    }
}

/// Test support for tests that compile (unit and integration tests of every crate): true when
/// NVRTC and the CUDA headers load; otherwise prints `SKIP <test>: <why>` and returns false, or
/// panics when `RTX_REQUIRE_NVRTC` is set (CI and `cargo xtask test` set it, so a missing
/// toolchain there is an error, not a silent skip).
#[doc(hidden)]
pub fn nvrtc_or_skip(test: &str) -> bool {
    match Toolchain::get() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            assert!(
                std::env::var_os("RTX_REQUIRE_NVRTC").is_none(),
                "RTX_REQUIRE_NVRTC is set but: {e}"
            );
            false
        }
    }
}
