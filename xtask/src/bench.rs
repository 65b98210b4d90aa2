//! `cargo xtask bench`: builds rtx-bench in release and runs it (GPU suites on a GPU, the
//! CPU-side compile suite otherwise).

use crate::cuda_env;
use anyhow::Result;
use std::process::Command;

/// Runs `rtx-bench` with `args`.
pub fn run(args: &[String]) -> Result<()> {
    let env = cuda_env::ensure()?;
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(crate::root()).args(["run", "--quiet", "--release", "-p", "rtx-bench", "--"]).args(args);
    cuda_env::run_with(&env, cmd, "rtx-bench")
}
