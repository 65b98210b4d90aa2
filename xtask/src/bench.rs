//! `cargo xtask bench`: builds rtx-bench in release and runs it (GPU suites on a GPU, the
//! CPU-side compile suite otherwise).

use crate::cuda_env;
use anyhow::Result;

/// The `rtx-bench` arguments for `cargo xtask bench [--reprofile] ARGS...`.
pub fn rtx_bench_args(reprofile: bool, args: Vec<String>) -> Vec<String> {
    let mut v = Vec::with_capacity(args.len() + 1);
    if reprofile && !args.iter().any(|a| a == "--reprofile") {
        v.push("--reprofile".to_string());
    }
    v.extend(args);
    v
}

/// The cargo arguments that build and start rtx-bench: the package holds two binaries
/// (`rtx-bench`, `rtx-tune`), so the binary is named.
pub const CARGO_RUN: [&str; 7] = [
    "run",
    "--quiet",
    "--release",
    "-p",
    "rtx-bench",
    "--bin",
    "rtx-bench",
];

/// Runs `rtx-bench` with `args`.
pub fn run(args: &[String]) -> Result<()> {
    let env = cuda_env::ensure()?;
    let mut cmd = crate::cargo();
    cmd.args(CARGO_RUN).arg("--").args(args);
    cuda_env::run_with(&env, cmd, "rtx-bench")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reprofile_is_forwarded_once() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            rtx_bench_args(true, a(&["--quick"])),
            a(&["--reprofile", "--quick"])
        );
        assert_eq!(rtx_bench_args(false, a(&["--quick"])), a(&["--quick"]));
        assert_eq!(
            rtx_bench_args(true, a(&["--reprofile"])),
            a(&["--reprofile"])
        );
    }

    #[test]
    fn the_bench_binary_is_named() {
        // `cargo run -p rtx-bench` alone cannot choose between rtx-bench and rtx-tune.
        let i = CARGO_RUN.iter().position(|a| *a == "--bin").unwrap();
        assert_eq!(CARGO_RUN[i + 1], "rtx-bench");
        let manifest =
            std::fs::read_to_string(crate::root().join("crates/rtx-bench/Cargo.toml")).unwrap();
        assert!(
            manifest.contains("default-run = \"rtx-bench\""),
            "rtx-bench's manifest names its default binary"
        );
    }
}
