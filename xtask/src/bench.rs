//! `cargo xtask bench`: builds rtx-bench in release and runs it (GPU suites on a GPU, the
//! CPU-side compile suite otherwise).

use crate::cuda_env;
use anyhow::Result;
use std::process::Command;

/// The `rtx-bench` arguments for `cargo xtask bench [--reprofile] ARGS...`.
pub fn rtx_bench_args(reprofile: bool, args: Vec<String>) -> Vec<String> {
    let mut v = Vec::with_capacity(args.len() + 1);
    if reprofile && !args.iter().any(|a| a == "--reprofile") {
        v.push("--reprofile".to_string());
    }
    v.extend(args);
    v
}

/// Runs `rtx-bench` with `args`.
pub fn run(args: &[String]) -> Result<()> {
    let env = cuda_env::ensure()?;
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(crate::root()).args(["run", "--quiet", "--release", "-p", "rtx-bench", "--"]).args(args);
    cuda_env::run_with(&env, cmd, "rtx-bench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reprofile_is_forwarded_once() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(rtx_bench_args(true, a(&["--quick"])), a(&["--reprofile", "--quick"]));
        assert_eq!(rtx_bench_args(false, a(&["--quick"])), a(&["--quick"]));
        assert_eq!(rtx_bench_args(true, a(&["--reprofile"])), a(&["--reprofile"]));
    }
}
