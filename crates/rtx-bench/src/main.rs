//! rtx-bench: the benchmark driver (see `cargo xtask bench`). Exit codes: 0 ok, 1 error (bad
//! arguments included), 2 the gate found a slower case, 3 a measured case produced a wrong
//! result.

use rtx_bench::cli::Cli;
use rtx_bench::{gpu, runner};
use tracing_subscriber::EnvFilter;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("RTX_LOG").unwrap_or_else(|_| {
                EnvFilter::new("rtx_bench=info,rtx_synthesis::profiler=info,warn")
            }),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some(code) = rtx_bench::suites::aot::startup_child() {
        std::process::exit(code);
    }
    let argv: Vec<String> = std::env::args().collect();
    // Clap alone would exit with 2 on bad arguments, which here means that the gate failed.
    let cli: Cli = rtx_bench::cli::parse_or_exit(&argv);
    let detected = gpu::detect();
    // One measuring process per GPU: held for the whole run, so a tuning or benchmark process
    // started beside this one waits instead of timing its kernels against ours.
    let _lock = match &detected {
        Ok(g) => match rtx_synthesis::tuner::gpu_lock::acquire(&g.device, |_| ()) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("rtx-bench: {e}");
                std::process::exit(1);
            }
        },
        Err(_) => None,
    };
    let mut stdout = std::io::stdout();
    match runner::run(&cli, argv, detected, &mut stdout) {
        Ok(out) => std::process::exit(out.exit_code()),
        Err(e) => {
            eprintln!("rtx-bench: {e}");
            std::process::exit(1);
        }
    }
}
