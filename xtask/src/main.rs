//! `cargo xtask`: the project's commands (tests with their toolchain, benchmarks, AOT bundles,
//! the GPU test bundle, cache maintenance).

mod bench;
mod cache;
mod codegen;
mod cuda_env;
mod gpu_bundle;
mod test;
mod tune;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "rtx project commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install NVRTC + CUDA headers locally when missing, then run every workspace test.
    Test {
        /// Extra arguments passed to `cargo test` (after `--` for the test binaries).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// What CI runs: `fmt`, the tests (same as `test`), then `docs`.
    Ci,
    /// Check that every file is as `cargo fmt --all` leaves it.
    Fmt,
    /// Build the workspace's API docs; any rustdoc warning (a broken intra-doc link) fails.
    Docs,
    /// Run the benchmark suites (GPU when present, the CPU-side compile suite otherwise).
    Bench {
        /// Re-measure the GPU's ceilings (profiler micro-benchmarks) and replace the saved
        /// profile for this device + driver (forwarded as `rtx-bench --reprofile`).
        #[arg(long)]
        reprofile: bool,
        /// Arguments for `rtx-bench` (see `cargo xtask bench -- --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build the GPU test binaries and the bench binary (release) into one carryable folder.
    GpuBundle {
        /// Output folder.
        #[arg(long, default_value = ".gpu-bundle")]
        out: std::path::PathBuf,
        /// Only these integration-test targets (comma-separated names such as `wgmma_gpu,gpu`),
        /// or `none` for the binaries alone; default: every test of the workspace.
        #[arg(long, value_delimiter = ',')]
        tests: Option<Vec<String>>,
        /// Build an experiment: this patch applied to a temporary worktree of `--at` (the
        /// checkout is not touched); `BUILD` names the commit and the patch.
        #[arg(long)]
        patch: Option<std::path::PathBuf>,
        /// The commit the patch applies to (default `HEAD`).
        #[arg(long, requires = "patch")]
        at: Option<String>,
    },
    /// Inspect or clear the kernel cache.
    Cache {
        #[command(subcommand)]
        cmd: cache::CacheCmd,
    },
    /// Tune a kernel on this machine's GPU: `cargo xtask tune gemm 4096x4096x4096 --dtype bf16
    /// --layout nt` (arguments of `rtx-tune`; see `cargo xtask tune -- --help`).
    Tune {
        /// Arguments for `rtx-tune`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compile every kernel the tuning database or an ops manifest needs into a bundle folder
    /// (cubins + manifest.json) for deployment without NVRTC: `cargo xtask codegen --arch
    /// sm_90a,sm_120 --ops bench/ops/example.json --out .rtx-bundle`.
    Codegen(codegen::CodegenArgs),
    /// Print the environment (LD_LIBRARY_PATH, RTX_CUDA_INCLUDE) the tests run with.
    Env,
}

/// Runs the command; an error prints as one `xtask: ...` line (its whole cause chain), not as a
/// debug dump with a backtrace when `RUST_BACKTRACE` is set, and exits with 1, or with the code
/// of the command that failed.
fn main() -> std::process::ExitCode {
    match run(Cli::parse().cmd) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            // A command that failed passes its own code on (rtx-bench: 2 gate, 3 wrong result).
            e.downcast_ref::<cuda_env::ChildFailed>()
                .map_or(std::process::ExitCode::FAILURE, |c| c.code().into())
        }
    }
}

fn run(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Test { args } => test::run(&args),
        Cmd::Ci => test::fmt_check()
            .and_then(|()| test::run(&[]))
            .and_then(|()| test::docs()),
        Cmd::Fmt => test::fmt_check(),
        Cmd::Docs => test::docs(),
        Cmd::Bench { reprofile, args } => bench::run(&bench::rtx_bench_args(reprofile, args)),
        Cmd::GpuBundle {
            out,
            tests,
            patch,
            at,
        } => {
            let experiment = patch
                .as_deref()
                .map(|p| (p, at.as_deref().unwrap_or("HEAD")));
            gpu_bundle::run(&out, tests.as_deref(), experiment)
        }
        Cmd::Tune { args } => tune::run(&args),
        Cmd::Codegen(args) => codegen::run(&args),
        Cmd::Cache { cmd } => {
            // The cache key holds the NVRTC version, so NVRTC must be loadable in this process.
            cuda_env::reexec_with_cuda_env()?;
            cache::run(&cmd)
        }
        Cmd::Env => {
            print!("{}", cuda_env::ensure()?.shell_exports());
            Ok(())
        }
    }
}

/// `cargo` (the one running xtask, from `$CARGO`, else the one on `PATH`) in the workspace root.
pub fn cargo() -> std::process::Command {
    let mut c =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// The workspace root (the parent of `xtask/`).
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_takes_reprofile_and_passes_the_rest_through() {
        let cli = Cli::try_parse_from([
            "cargo xtask",
            "bench",
            "--reprofile",
            "--quick",
            "--suite",
            "memory",
        ])
        .unwrap();
        match cli.cmd {
            Cmd::Bench { reprofile, args } => {
                assert!(reprofile);
                assert_eq!(args, ["--quick", "--suite", "memory"]);
            }
            _ => panic!("not bench"),
        }
        match Cli::try_parse_from(["cargo xtask", "bench", "--", "--reprofile"])
            .unwrap()
            .cmd
        {
            Cmd::Bench { reprofile, args } => {
                assert_eq!(bench::rtx_bench_args(reprofile, args), ["--reprofile"])
            }
            _ => panic!("not bench"),
        }
    }
}
