//! Shared by the command-line tests: run one of this package's binaries.

use std::process::Command;

/// Runs the binary `exe` (a `CARGO_BIN_EXE_*` path) with `args`; returns (exit code, stderr).
pub fn run_bin(exe: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {exe}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
