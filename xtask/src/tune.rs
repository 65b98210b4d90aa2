//! `cargo xtask tune ...`: builds `rtx-tune` in release and runs it with the CUDA environment,
//! e.g. `cargo xtask tune gemm 4096x4096x4096 --dtype bf16 --layout nt`. The exit code is
//! rtx-tune's (2: no CUDA GPU).

use crate::cuda_env;
use anyhow::Result;

/// Runs `rtx-tune` with `args` (the first is the operation, e.g. `gemm`); a failure carries its
/// exit code ([`cuda_env::ChildFailed`]), which xtask exits with.
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
    cuda_env::run_with(&env, cmd, "rtx-tune")
}
