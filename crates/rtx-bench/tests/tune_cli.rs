//! `rtx-tune` names a bad argument (exit code 1) before it looks for a GPU, so the same answer
//! comes on a machine with or without one.

mod cli_support;

/// Runs `rtx-tune args` and returns (exit code, stderr).
fn rtx_tune(args: &[&str]) -> (i32, String) {
    cli_support::run_bin(env!("CARGO_BIN_EXE_rtx-tune"), args)
}

#[test]
fn bad_gemm_arguments_are_named_before_the_gpu_is_looked_for() {
    let cases: [(&[&str], &str); 9] = [
        // A flag clap does not know: exit code 1 too (clap alone would use 2, rtx-tune's code
        // for "no CUDA GPU").
        (&["gemm", "16x16x16", "--no-such-flag"], "--no-such-flag"),
        (&["gemm", "0x16x16"], "M must be >= 1"),
        (&["gemm", "16x16"], "`16x16`: expected MxNxK"),
        (
            &["gemm", "16x16x16", "--dtype", "bf17"],
            "unknown dtype `bf17`",
        ),
        (
            &["gemm", "16x16x16", "--layout", "nx"],
            "`nx`: layouts are two of n/t",
        ),
        (
            &["gemm", "16x16x16", "--where", "{bad"],
            "config filter `{bad`",
        ),
        (
            &["gemm", "16x16x16", "--time-budget-s=0"],
            "--time-budget-s must be a positive number",
        ),
        (
            &["gemm", "16x16x16", "--record-fixture", "."],
            "--record-fixture .: is a folder",
        ),
        (
            &["gemm", "16x16x16", "--family", "wgmmx"],
            "--family `wgmmx`: expected wgmma, mma or simt",
        ),
    ];
    for (args, want) in cases {
        let (code, err) = rtx_tune(args);
        assert_eq!(code, 1, "{args:?}: exit code {code}, stderr {err}");
        assert!(
            err.contains(want),
            "{args:?}: stderr `{err}` does not contain `{want}`"
        );
        assert!(
            !err.contains("no CUDA GPU"),
            "{args:?}: looked for a GPU first: {err}"
        );
    }
}

#[test]
fn bad_memory_op_arguments_are_named_before_the_gpu_is_looked_for() {
    for (args, want) in [
        (
            ["softmax", "4096", "--dtype", "bf16"],
            "shape `4096`: expected ROWSxCOLS",
        ),
        (
            ["rmsnorm", "64x64", "--dtype", "int8"],
            "unknown dtype `int8`",
        ),
    ] {
        let (code, err) = rtx_tune(&args);
        assert_eq!(code, 1, "{args:?}: exit code {code}, stderr {err}");
        assert!(
            err.contains(want),
            "{args:?}: stderr `{err}` does not contain `{want}`"
        );
    }
}
