//! `cargo xtask tune ...`: builds `rtx-tune` in release and runs it with the CUDA environment,
//! e.g. `cargo xtask tune gemm 4096x4096x4096 --dtype bf16 --layout nt`. The exit code is
//! rtx-tune's (2: no CUDA GPU).

use crate::cuda_env;
use anyhow::{Context, Result};

/// Runs `rtx-tune` with `args` (the first is the operation, e.g. `gemm`) and exits with its code.
pub fn run(args: &[String]) -> Result<()> {
    let env = cuda_env::ensure()?;
    let mut cmd = crate::cargo();
    cmd.args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "rtx-bench",
        "--bin",
        "rtx-tune",
        "--",
    ])
    .args(args);
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    let status = cmd.status().context("starting rtx-tune (cargo run)")?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}
