//! `rtx-tune`: tune a kernel for the GPU in this machine and store the winner in the tuning
//! database.
//!
//! ```text
//! rtx-tune gemm 4096x4096x4096 --dtype bf16 --layout nn [--strategy guided|exhaustive|random]
//!     [--fraction 0.15 | --count N] [--time-budget-s 60] [--space-limit N] [--isolate]
//!     [--record-fixture FILE.json] [--db PATH] [--seed S] [--no-store]
//! ```
//!
//! Prints the winner, its TFLOP/s, cuBLAS' time for the same problem (measured in this process
//! under the same protocol: same inputs, L2 flush, event timing), the ratio, and the tuning wall
//! time (compiles included). `--space-limit N` caps the space at N configs spread evenly over the
//! template's valid configs (deterministic), so an exhaustive run fits in a few minutes;
//! `--record-fixture` writes the measured table as a replay fixture (use with
//! `--strategy exhaustive`). `--isolate` runs every candidate in worker processes (this binary's
//! hidden `tune-worker` subcommand), so a faulting kernel cannot end the run.
//!
//! Memory-bound ops (bounded space of a few dozen configs, exhaustive by default, candidates
//! verified against the f64 references on fresh inputs, timed with events + L2 flush):
//!
//! ```text
//! rtx-tune softmax|layernorm|rmsnorm ROWSxCOLS --dtype bf16 [--affine] [--residual]
//! rtx-tune chain8|gelu-affine|bias-gelu|silu-gate ROWSxCOLS --dtype bf16
//!     [--strategy exhaustive|guided|random] [--count N] [--time-budget-s 60]
//!     [--space-limit 48] [--db PATH] [--seed S] [--no-store]
//! ```
//!
//! Prints the winner, its GB/s, the default config's time under the same protocol and the
//! speedup. The row ops and chains are the memory suite's (LayerNorm eps 1e-5, RMSNorm 1e-6),
//! so `rtx-bench`'s `rtx-tuned` rows serve what this stores.
//!
//! Exit codes: 0 success, 1 failure (bad arguments included), 2 no CUDA GPU.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rtx_bench::anchors::MemOp;
use rtx_bench::suites::memory::fused::ChainKind;
use rtx_bench::suites::memory::row_ops::{LN_EPS, RMS_EPS};
use rtx_runtime::Device;
use rtx_synthesis::aot::KernelCache;
use rtx_synthesis::synth::{
    check_family, parse_layouts, parse_mnk, select_family, tflops, ConfigFilter, GemmFamily,
    GemmFamilyKind, GemmGpuBackend, GemmSpec, StrategyKind, Synth, TuneRequest,
};
use rtx_synthesis::templates::elementwise::ElementwiseProblem;
use rtx_synthesis::templates::gemm::wgmma::WgmmaGemm;
use rtx_synthesis::templates::gemm::{GemmProblem, MmaGemm, SimtGemm};
use rtx_synthesis::templates::reduce::RowProblem;
use rtx_synthesis::tuner::{
    gpu_lock, tie_tolerance, worker_main, Budget, PassedOver, ProgressSnapshot, TunePhase,
    WorkerCommand,
};
use rtx_synthesis::{Arch, DType};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "rtx-tune",
    about = "Tune kernels for this machine's GPU and store the winners"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Tune a GEMM: `rtx-tune gemm MxNxK --dtype bf16 --layout nn`.
    Gemm(GemmArgs),
    /// Tune softmax over rows: `rtx-tune softmax 16384x3072 --dtype bf16`.
    Softmax(MemArgs),
    /// Tune LayerNorm over rows (`--affine`: weight and bias; `--residual`: fused residual add).
    Layernorm(MemArgs),
    /// Tune RMSNorm over rows (`--affine`: weight; `--residual`: fused residual add).
    Rmsnorm(MemArgs),
    /// Tune the fused 8-op chain: `rtx-tune chain8 32768x4096 --dtype bf16`.
    Chain8(MemArgs),
    /// Tune the fused `gelu(x*1.5+0.5)`.
    #[command(name = "gelu-affine")]
    GeluAffine(MemArgs),
    /// Tune the fused `gelu_tanh(x + bias)`.
    #[command(name = "bias-gelu")]
    BiasGelu(MemArgs),
    /// Tune the fused `x * silu(g)`.
    #[command(name = "silu-gate")]
    SiluGate(MemArgs),
    /// Worker process of `--isolate` (started by rtx-tune itself; speaks JSON lines on stdio).
    #[command(hide = true)]
    TuneWorker {
        /// The problem, as GemmProblem JSON.
        #[arg(long)]
        problem: String,
        /// Compile target.
        #[arg(long)]
        arch: String,
        /// SM count the template was configured for.
        #[arg(long)]
        sm_count: u32,
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        ordinal: usize,
        /// Template family: wgmma, mma, simt.
        #[arg(long, default_value = "wgmma")]
        family: String,
    },
}

#[derive(clap::Args)]
struct GemmArgs {
    /// Shape as MxNxK, e.g. 4096x4096x4096.
    shape: String,
    /// Input dtype: bf16, f16, f32, tf32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Layouts of A and B: nn, nt, tn, tt (n = row-major, t = column-major).
    #[arg(long, default_value = "nn")]
    layout: String,
    /// Strided batch count.
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// Search strategy: guided, exhaustive, random.
    #[arg(long, default_value = "guided")]
    strategy: String,
    /// Measurement budget of guided/random as a fraction of the space.
    #[arg(long, default_value_t = 0.15)]
    fraction: f64,
    /// Measurement budget of guided/random as a count (overrides --fraction).
    #[arg(long)]
    count: Option<usize>,
    /// Wall-clock budget of the search in seconds (compiles included).
    #[arg(long, default_value_t = 60.0)]
    time_budget_s: f64,
    /// Cap the space at N configs, spread evenly over the valid configs (deterministic).
    #[arg(long)]
    space_limit: Option<usize>,
    /// Run candidates in worker processes (a faulting kernel cannot end the run).
    #[arg(long)]
    isolate: bool,
    /// Write the measured table as a replay fixture (use with --strategy exhaustive).
    #[arg(long)]
    record_fixture: Option<PathBuf>,
    /// Tuning database path (default: $RTX_CACHE_DIR/tuning.db or the platform cache folder).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the strategy and the verification inputs.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Do not store the winner in the tuning database.
    #[arg(long)]
    no_store: bool,
    /// Configs compiled in parallel per step (default: 4 guided, the machine's cores otherwise).
    #[arg(long)]
    compile_batch: Option<usize>,
    /// Search only configs with these field values, a JSON object such as
    /// '{"bm":64,"cluster_m":2}'. The winner of such a slice is not stored.
    #[arg(long = "where")]
    filter: Option<String>,
    /// Also search the configs kept out of the default space (today: wgmma cluster split-K,
    /// '{"cluster_k":2}', slower than the rungs where measured; the transposed product,
    /// '{"swap_ab":true}', with cuBLAS's small-M pairs '{"cluster_n":2}' among it; 192-row
    /// split-K tiles); sets RTX_EXPERIMENTAL=1 for
    /// this run and its workers.
    #[arg(long)]
    experimental: bool,
    /// Tune this template family (wgmma, mma, simt) instead of the one `gemm` serves for the
    /// problem, to compare families; such a winner is not stored.
    #[arg(long)]
    family: Option<String>,
}

#[derive(clap::Args)]
struct MemArgs {
    /// Shape as ROWSxCOLS, e.g. 16384x3072.
    shape: String,
    /// Storage dtype: bf16, f16, f32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Row ops: affine weight (and LayerNorm bias).
    #[arg(long)]
    affine: bool,
    /// Row norms: fused residual add.
    #[arg(long)]
    residual: bool,
    /// Search strategy: exhaustive (default: the space is small), guided, random.
    #[arg(long, default_value = "exhaustive")]
    strategy: String,
    /// Measurement budget of guided/random as a count.
    #[arg(long)]
    count: Option<usize>,
    /// Wall-clock budget of the search in seconds (compiles included).
    #[arg(long, default_value_t = 60.0)]
    time_budget_s: f64,
    /// Configs in the searched space (spread evenly over the bounded space).
    #[arg(long)]
    space_limit: Option<usize>,
    /// Tuning database path (default: $RTX_CACHE_DIR/tuning.db or the platform cache folder).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Seed of the strategy and the verification inputs.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Do not store the winner in the tuning database.
    #[arg(long)]
    no_store: bool,
}

/// The memory-bound op of a subcommand.
enum MemOpKind {
    Row(MemOp),
    Chain(ChainKind),
}

/// Runs a tuning command on device 0 under its measurement lock (held for the whole command:
/// the search, the cuBLAS baseline and the winner's timing; worker processes inherit it).
fn with_gpu(f: impl FnOnce() -> Result<()>) -> i32 {
    if Device::count() == 0 {
        eprintln!("no CUDA GPU: tuning needs one");
        return 2;
    }
    let _lock = match Device::open(0)
        .map_err(anyhow::Error::from)
        .and_then(|d| Ok(gpu_lock::acquire(&d, |_| ())?))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rtx-tune: {e:#}");
            return 1;
        }
    };
    match f() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rtx-tune: {e:#}");
            1
        }
    }
}

/// A command whose arguments are wrong: said before any GPU is looked for (exit code 1).
fn bad_input(e: anyhow::Error) -> i32 {
    eprintln!("rtx-tune: {e:#}");
    1
}

fn main() {
    // Logs go to stderr: a worker's stdout carries its protocol.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // Clap alone would exit with 2 on bad arguments, which here means that no GPU was found.
    let cli: Cli = rtx_bench::cli::parse_or_exit(std::env::args_os());
    if let Cmd::Gemm(a) = &cli.cmd {
        if a.experimental {
            // Before any thread starts: the tuner's template and the workers read it.
            std::env::set_var(rtx_synthesis::templates::gemm::wgmma::EXPERIMENTAL_ENV, "1");
        }
    }
    let mem = |kind: MemOpKind, a: &MemArgs| match mem_input(a) {
        Ok(input) => with_gpu(|| tune_memory(kind, a, input)),
        Err(e) => bad_input(e),
    };
    let code = match cli.cmd {
        Cmd::Gemm(args) => match gemm_input(&args) {
            Ok(input) => with_gpu(|| tune_gemm(&args, input)),
            Err(e) => bad_input(e),
        },
        Cmd::Softmax(a) => mem(MemOpKind::Row(MemOp::Softmax), &a),
        Cmd::Layernorm(a) => mem(MemOpKind::Row(MemOp::LayerNorm), &a),
        Cmd::Rmsnorm(a) => mem(MemOpKind::Row(MemOp::RmsNorm), &a),
        Cmd::Chain8(a) => mem(MemOpKind::Chain(ChainKind::Chain8), &a),
        Cmd::GeluAffine(a) => mem(MemOpKind::Chain(ChainKind::GeluAffine), &a),
        Cmd::BiasGelu(a) => mem(MemOpKind::Chain(ChainKind::BiasGelu), &a),
        Cmd::SiluGate(a) => mem(MemOpKind::Chain(ChainKind::SiluGate), &a),
        Cmd::TuneWorker {
            problem,
            arch,
            sm_count,
            ordinal,
            family,
        } => match run_worker(&problem, &arch, sm_count, ordinal, &family) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("rtx-tune tune-worker: {e:#}");
                1
            }
        },
    };
    std::process::exit(code);
}

fn run_worker(
    problem: &str,
    arch: &str,
    sm_count: u32,
    ordinal: usize,
    family: &str,
) -> Result<i32> {
    let problem: GemmProblem =
        serde_json::from_str(problem).context("--problem is not GemmProblem JSON")?;
    let arch: Arch = arch.parse()?;
    let cache = Arc::new(KernelCache::open_default()?);
    let exit = match GemmFamilyKind::parse(family) {
        Some(GemmFamilyKind::Wgmma) => {
            serve_family(&WgmmaGemm::new(sm_count), &problem, arch, ordinal, cache)?
        }
        Some(GemmFamilyKind::Mma) => {
            serve_family(&MmaGemm::new(sm_count), &problem, arch, ordinal, cache)?
        }
        Some(GemmFamilyKind::Simt) => serve_family(&SimtGemm, &problem, arch, ordinal, cache)?,
        None => bail!("--family `{family}`: expected wgmma, mma or simt"),
    };
    Ok(exit)
}

fn serve_family<F: GemmFamily>(
    template: &F,
    problem: &GemmProblem,
    arch: Arch,
    ordinal: usize,
    cache: Arc<KernelCache>,
) -> Result<i32> {
    let backend = GemmGpuBackend::<F>::new(ordinal, cache);
    let exit = worker_main(template, problem, arch, &backend)?;
    Ok(exit.code())
}

fn fmt_us(us: Option<f64>) -> String {
    us.map_or_else(|| "-".to_string(), |u| format!("{u:.1} us"))
}

/// A `gemm` command's inputs, checked before any GPU is looked for.
struct GemmInput {
    spec: GemmSpec,
    problem: GemmProblem,
    strategy: StrategyKind,
    filter: Option<ConfigFilter>,
    /// `--family`, parsed.
    forced: Option<GemmFamilyKind>,
}

fn gemm_input(args: &GemmArgs) -> Result<GemmInput> {
    let (m, n, k) = parse_mnk(&args.shape).map_err(anyhow::Error::msg)?;
    let dtype: DType = args.dtype.parse()?;
    let (layout_a, layout_b) = parse_layouts(&args.layout).map_err(anyhow::Error::msg)?;
    let strategy: StrategyKind = args.strategy.parse().map_err(anyhow::Error::msg)?;
    check_time_budget(args.time_budget_s)?;
    if let Some(path) = args.record_fixture.as_deref().filter(|p| p.is_dir()) {
        bail!(
            "--record-fixture {}: is a folder; give the fixture's file name (e.g. {}/fixture.json)",
            path.display(),
            path.display()
        );
    }
    let spec = GemmSpec {
        batch: args.batch,
        ..GemmSpec::new(m, n, k, dtype).with_layouts(layout_a, layout_b)
    };
    let problem = spec.problem()?;
    let filter = args
        .filter
        .as_deref()
        .map(ConfigFilter::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let forced = match args.family.as_deref() {
        Some(name) => Some(
            GemmFamilyKind::parse(name)
                .with_context(|| format!("--family `{name}`: expected wgmma, mma or simt"))?,
        ),
        None => None,
    };
    Ok(GemmInput {
        spec,
        problem,
        strategy,
        filter,
        forced,
    })
}

fn check_time_budget(s: f64) -> Result<()> {
    if !(s.is_finite() && s > 0.0) {
        bail!("--time-budget-s must be a positive number of seconds (got {s})");
    }
    Ok(())
}

fn tune_gemm(args: &GemmArgs, input: GemmInput) -> Result<()> {
    let GemmInput {
        spec,
        problem,
        strategy,
        filter,
        forced,
    } = input;
    let (m, n, k, dtype) = (problem.m, problem.n, problem.k, problem.dtype);
    if args.record_fixture.is_some() && strategy != StrategyKind::Exhaustive {
        eprintln!("rtx-tune: warning: --record-fixture without --strategy exhaustive leaves unmeasured rows out of the fixture");
    }

    let device = Device::open(0).context("opening CUDA device 0")?;
    let info = device.info().clone();
    let synth = match &args.db {
        Some(path) => Synth::with_db_path(&device, path)?,
        None => Synth::new(&device)?,
    };
    let budget = match args.count {
        Some(c) => Budget::Count(c),
        None => Budget::Fraction(args.fraction),
    };
    let served = select_family(&problem, synth.arch(), &info)?;
    if let Some(kind) = forced {
        check_family(&problem, synth.arch(), &info, kind)?;
    }
    let family = forced.unwrap_or(served);
    if family != served && !args.no_store {
        println!(
            "--family {}: `gemm` serves this problem with {}, so this winner is not stored",
            family.name(),
            served.name()
        );
    }
    let isolate = if args.isolate {
        let exe = std::env::current_exe().context("locating this executable for the worker")?;
        Some(
            WorkerCommand::new(exe)
                .arg("tune-worker")
                .arg("--problem")
                .arg(serde_json::to_string(&problem)?)
                .arg("--arch")
                .arg(synth.arch().to_string())
                .arg("--sm-count")
                .arg(info.sm_count.to_string())
                .arg("--ordinal")
                .arg(device.ordinal().to_string())
                .arg("--family")
                .arg(family.name()),
        )
    } else {
        None
    };
    println!(
        "rtx-tune: gemm {m}x{n}x{k} batch {} {dtype} {} on {} ({}), family {}, strategy {:?}{}",
        args.batch,
        args.layout,
        info.name,
        synth.arch(),
        family.name(),
        strategy,
        if args.isolate {
            ", isolated workers"
        } else {
            ""
        }
    );

    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let show = |s: &ProgressSnapshot| {
        bar.set_length(s.space as u64);
        bar.set_position((s.measured + s.failed) as u64);
        let phase = match s.phase {
            TunePhase::Searching => "searching",
            TunePhase::Reconfirming => "re-confirming",
            TunePhase::Done => "done",
        };
        bar.set_message(format!(
            "{phase}: compiled {} | measured {} | failed {} | pruned {} | best {}",
            s.compiled,
            s.measured,
            s.failed,
            s.pruned,
            s.best_us.map_or_else(
                || "-".to_string(),
                |us| format!("{us:.1} us ({:.1} TFLOP/s)", tflops(&problem, us))
            )
        ));
    };
    if filter.is_some() && !args.no_store {
        println!("--where searches a slice of the space: its winner is not stored in the tuning database");
    }
    // --experimental sets the variable; it may also come from the environment.
    if args.filter.as_deref().is_some_and(|f| {
        ["cluster_k", "cluster_n", "swap_ab"]
            .iter()
            .any(|k| f.contains(k))
    }) && !WgmmaGemm::for_env(1).experimental
    {
        println!("note: cluster_k, cluster_n and swap_ab configs are experimental (kept out of the default space until measured ahead of the rungs on the H200): add --experimental to search them");
    }
    let req = TuneRequest {
        strategy,
        budget,
        time_budget: Duration::from_secs_f64(args.time_budget_s),
        progress: Some(&show),
        seed: args.seed,
        space_limit: args.space_limit,
        isolate,
        store: !args.no_store && filter.is_none(),
        compile_batch: args.compile_batch,
        filter,
        family: forced,
        ..TuneRequest::default()
    };
    let started = Instant::now();
    let result = synth.tune_gemm(&spec, &req);
    let tuning = started.elapsed();
    bar.finish_and_clear();
    let report = result?;
    let o = &report.outcome;

    println!(
        "searched {} configs of {} ({}): {} measured, {} failed, {} pruned{}{}",
        o.measured + o.failed,
        o.space,
        o.strategy,
        o.measured,
        o.failed,
        o.pruned,
        if o.stopped_by_time {
            "; stopped by the time budget"
        } else {
            ""
        },
        if o.stopped_by_fault {
            "; stopped by a device fault"
        } else {
            ""
        }
    );
    if let Some(w) = &report.worker {
        println!("workers: {w:?}");
    }
    let best_us = report.best_us().context("the winner has no timing")?;
    let spread = o.best.final_stats().map_or(0.0, |s| s.rel_spread);
    println!("winner ({}): {}", report.template, o.best.config);
    println!(
        "  {:.1} us median (spread {:.1}%), {:.1} TFLOP/s",
        best_us,
        spread * 100.0,
        tflops(&problem, best_us)
    );
    for (i, r) in o.ranked().iter().take(5).enumerate() {
        println!(
            "  #{} {} {}",
            i + 1,
            fmt_us(r.final_stats().map(|s| s.median_us)),
            r.config
        );
    }
    match o.passed_over() {
        Some((top, PassedOver::TieToSimpler)) => {
            let tol = top
                .final_stats()
                .zip(o.best.final_stats())
                .map_or(0.0, |(a, b)| tie_tolerance(a, b));
            println!(
                "  #1 is not the winner: within the measured noise ({:.1}%) they tie, and ties go to \
                 the simpler config (complexity {} against {})",
                tol * 100.0,
                o.best.complexity,
                top.complexity
            );
        }
        Some((_, PassedOver::NotReconfirmed)) => println!(
            "  #1 is not the winner: it was timed once, outside the re-confirmed leaders; the \
             winner is the fastest leader on its re-measurement"
        ),
        None => {}
    }
    match synth.time_cublas(&spec, &req.protocol) {
        Ok(c) => {
            println!(
                "cuBLAS: {:.1} us median (spread {:.1}%), {:.1} TFLOP/s",
                c.median_us,
                c.rel_spread * 100.0,
                tflops(&problem, c.median_us)
            );
            println!("rtx / cuBLAS throughput: {:.3}x", c.median_us / best_us);
        }
        Err(e) => println!("cuBLAS: not measured ({e})"),
    }
    println!(
        "tuning took {:.1} s (compiles included; tuner's own clock {:.1} s)",
        tuning.as_secs_f64(),
        o.elapsed.as_secs_f64()
    );
    if report.stored {
        println!("stored in the tuning database");
    }
    if let Some(path) = &args.record_fixture {
        let table = report.replay_table(&info.name, Some(report.default_config.clone()));
        table
            .save(path)
            .with_context(|| format!("writing the fixture {}", path.display()))?;
        println!("fixture: {} ({} rows)", path.display(), table.configs.len());
    }
    Ok(())
}

/// Parses `ROWSxCOLS`.
fn parse_rows_cols(s: &str) -> Result<(u32, u32)> {
    let (r, c) = s
        .split_once(['x', 'X'])
        .with_context(|| format!("shape `{s}`: expected ROWSxCOLS"))?;
    Ok((
        r.trim().parse().with_context(|| format!("rows in `{s}`"))?,
        c.trim().parse().with_context(|| format!("cols in `{s}`"))?,
    ))
}

/// A memory-bound command's inputs, checked before any GPU is looked for.
struct MemInput {
    rows: u32,
    cols: u32,
    dtype: DType,
    strategy: StrategyKind,
}

fn mem_input(args: &MemArgs) -> Result<MemInput> {
    let (rows, cols) = parse_rows_cols(&args.shape)?;
    let dtype: DType = args.dtype.parse()?;
    let strategy: StrategyKind = args.strategy.parse().map_err(anyhow::Error::msg)?;
    check_time_budget(args.time_budget_s)?;
    Ok(MemInput {
        rows,
        cols,
        dtype,
        strategy,
    })
}

fn tune_memory(kind: MemOpKind, args: &MemArgs, input: MemInput) -> Result<()> {
    let MemInput {
        rows,
        cols,
        dtype,
        strategy,
    } = input;
    let device = Device::open(0).context("opening CUDA device 0")?;
    let info = device.info().clone();
    let synth = match &args.db {
        Some(path) => Synth::with_db_path(&device, path)?,
        None => Synth::new(&device)?,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let show = |s: &ProgressSnapshot| {
        bar.set_length(s.space as u64);
        bar.set_position((s.measured + s.failed) as u64);
        bar.set_message(format!(
            "compiled {} | measured {} | failed {} | pruned {} | best {}",
            s.compiled,
            s.measured,
            s.failed,
            s.pruned,
            fmt_us(s.best_us)
        ));
    };
    let req = TuneRequest {
        strategy,
        budget: args.count.map_or(Budget::Fraction(1.0), Budget::Count),
        time_budget: Duration::from_secs_f64(args.time_budget_s),
        progress: Some(&show),
        seed: args.seed,
        space_limit: args.space_limit,
        store: !args.no_store,
        ..TuneRequest::default()
    };
    let started = Instant::now();
    let result = match &kind {
        MemOpKind::Row(op) => {
            let p = match op {
                MemOp::Softmax => RowProblem::softmax(rows, cols, dtype),
                MemOp::LayerNorm => {
                    RowProblem::layernorm(rows, cols, dtype, args.affine, args.affine, LN_EPS)
                }
                MemOp::RmsNorm => RowProblem::rmsnorm(rows, cols, dtype, args.affine, RMS_EPS),
                MemOp::GeluAffine | MemOp::Chain8 => bail!("not a row op"),
            };
            let p = if args.residual { p.with_residual() } else { p };
            println!(
                "rtx-tune: {} {rows}x{cols} {dtype} on {} ({}), strategy {strategy:?}",
                op.anchor_name(),
                info.name,
                synth.arch()
            );
            synth.tune_rows(&p, &req)
        }
        MemOpKind::Chain(c) => {
            let g = c.graph(dtype).map_err(|e| anyhow::anyhow!(e.message))?;
            let p = ElementwiseProblem::new(g, rows, cols);
            println!(
                "rtx-tune: {} {rows}x{cols} {dtype} on {} ({}), strategy {strategy:?}",
                c.name(),
                info.name,
                synth.arch()
            );
            synth.tune_elementwise(&p, &req)
        }
    };
    let tuning = started.elapsed();
    bar.finish_and_clear();
    let report = result?;
    let o = &report.outcome;
    println!("op: {}", report.op);
    println!(
        "searched {} configs of {} ({}): {} measured, {} failed, {} pruned{}",
        o.measured + o.failed,
        o.space,
        o.strategy,
        o.measured,
        o.failed,
        o.pruned,
        if o.stopped_by_time {
            "; stopped by the time budget"
        } else {
            ""
        }
    );
    let best_us = report.best_us().context("the winner has no timing")?;
    let spread = o.best.final_stats().map_or(0.0, |s| s.rel_spread);
    println!(
        "winner ({} v{}): {}",
        report.template, report.template_version, o.best.config
    );
    println!(
        "  {:.1} us median (spread {:.1}%), {:.0} GB/s",
        best_us,
        spread * 100.0,
        report.gbps(best_us)
    );
    for (i, r) in o.ranked().iter().take(5).enumerate() {
        println!(
            "  #{} {} {}",
            i + 1,
            fmt_us(r.final_stats().map(|s| s.median_us)),
            r.config
        );
    }
    match report.default_us {
        Some(d) => println!(
            "default {}: {:.1} us, {:.0} GB/s; tuned / default speedup {:.3}x",
            report.default_config,
            d,
            report.gbps(d),
            d / best_us
        ),
        None => println!("default {}: not measured", report.default_config),
    }
    println!(
        "tuning took {:.1} s (compiles included)",
        tuning.as_secs_f64()
    );
    if report.stored {
        println!("stored in the tuning database");
    }
    Ok(())
}
