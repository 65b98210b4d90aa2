//! Facts about the run's environment: git commit, tool versions, wall-clock time.

use crate::report::ToolVersions;
use crate::DeviceInfo;
use std::process::Command;

/// The `RTX_GIT_COMMIT` environment variable when set, else the commit the binary was built from
/// (`-dirty` when the tree had uncommitted changes), else `git rev-parse HEAD` in the current
/// folder. The build-time commit comes first because bench binaries are carried to GPU machines
/// whose checkout may be another commit.
pub fn git_commit() -> Option<String> {
    let nonempty = |s: String| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    std::env::var("RTX_GIT_COMMIT")
        .ok()
        .and_then(nonempty)
        .or_else(|| nonempty(env!("RTX_BUILD_COMMIT").to_string()))
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| nonempty(String::from_utf8_lossy(&o.stdout).to_string()))
        })
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The CUDA version the `cudarc` bindings are built against (workspace feature `cuda-13000`).
pub const CUDA_BINDINGS: &str = "13.0";

/// Tool versions: rtx-bench, NVRTC (when loadable), the driver's CUDA API version (with a
/// device), and the CUDA version of the bindings.
pub fn tool_versions(device: Option<&DeviceInfo>) -> ToolVersions {
    let nvrtc = rtx_synthesis::aot::Toolchain::get()
        .ok()
        .map(|t| format!("{}.{}", t.nvrtc_version.0, t.nvrtc_version.1));
    ToolVersions {
        rtx: env!("CARGO_PKG_VERSION").to_string(),
        nvrtc,
        driver: device.map(|d| format!("{}.{}", d.driver_version.0, d.driver_version.1)),
        cuda: Some(CUDA_BINDINGS.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_name_rtx_and_no_driver_without_a_device() {
        let v = tool_versions(None);
        assert_eq!(v.rtx, env!("CARGO_PKG_VERSION"));
        assert_eq!(v.driver, None);
        assert!(now_unix() > 1_600_000_000);
    }
}
