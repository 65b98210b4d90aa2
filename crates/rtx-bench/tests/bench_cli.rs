//! `rtx-bench`'s exit codes keep their meaning: 2 is the gate's and 3 a wrong result's, so bad
//! arguments exit with 1 (clap alone would use 2), and `--help` with 0.

mod cli_support;

/// Runs `rtx-bench args` and returns (exit code, stderr).
fn rtx_bench(args: &[&str]) -> (i32, String) {
    cli_support::run_bin(env!("CARGO_BIN_EXE_rtx-bench"), args)
}

#[test]
fn bad_arguments_exit_with_1_not_the_gates_2() {
    let (code, err) = rtx_bench(&["--suite", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown suite `nope`"), "{err}");
    let (code, err) = rtx_bench(&["--no-such-flag"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(rtx_bench(&["--help"]).0, 0);
}
