//! `cargo xtask test`: the README's test command.

use crate::cuda_env;
use anyhow::{bail, Result};

/// Installs NVRTC when missing, then runs the whole workspace's tests with it required
/// (so a CPU-side NVRTC compile can never silently skip here).
pub fn run(args: &[String]) -> Result<()> {
    let env = cuda_env::ensure()?;
    let mut cmd = crate::cargo();
    cmd.args(["test", "--workspace"])
        .args(args)
        .env("RTX_REQUIRE_NVRTC", "1");
    if std::env::var_os("CARGO_BUILD_JOBS").is_none() {
        cmd.env(
            "CARGO_BUILD_JOBS",
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .to_string(),
        );
    }
    cuda_env::run_with(&env, cmd, "cargo test --workspace")
}

/// `cargo fmt --all -- --check`: fails on any file rustfmt would change. Where the toolchain has
/// no rustfmt, says so and passes (formatting is a review aid, not a correctness check).
pub fn fmt_check() -> Result<()> {
    let has_rustfmt = crate::cargo()
        .args(["fmt", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_rustfmt {
        eprintln!("xtask: skipping the format check: this toolchain has no rustfmt (`rustup component add rustfmt`)");
        return Ok(());
    }
    let status = crate::cargo()
        .args(["fmt", "--all", "--", "--check"])
        .status()?;
    if !status.success() {
        bail!("cargo fmt --all -- --check failed ({status}): run `cargo fmt --all` and commit the result");
    }
    Ok(())
}

/// `cargo doc --workspace --no-deps` with rustdoc warnings denied, so a renamed item cannot
/// leave a dangling link in the API docs.
pub fn docs() -> Result<()> {
    let flags = match std::env::var("RUSTDOCFLAGS") {
        Ok(f) if !f.trim().is_empty() => format!("{f} -D warnings"),
        _ => "-D warnings".to_string(),
    };
    let status = crate::cargo()
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", flags)
        .status()?;
    if !status.success() {
        bail!("cargo doc --workspace --no-deps failed ({status}): see rustdoc's warnings above");
    }
    Ok(())
}
