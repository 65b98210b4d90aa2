//! Command-line arguments of `rtx-bench`.

use crate::gate::DEFAULT_TOLERANCE;
use crate::suite_id::SuiteId;
use clap::Parser;
use rtx_synthesis::DType;
use std::path::PathBuf;

/// Parses `args` as `C`, or prints clap's message and exits: 0 for `--help` / `--version`, 1 for
/// bad arguments (clap's own 2 means "the gate failed" to rtx-bench and "no CUDA GPU" to
/// rtx-tune).
pub fn parse_or_exit<C: Parser, I, T>(args: I) -> C
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    C::try_parse_from(args).unwrap_or_else(|e| {
        let _ = e.print();
        std::process::exit(if e.use_stderr() { 1 } else { 0 })
    })
}

/// rtx-bench: GEMM / attention / memory / transformer / tuning / AOT benchmarks against cuBLAS,
/// untuned defaults and PyTorch anchors. Without a CUDA GPU it runs the CPU-side compile suite
/// only and produces no GPU figures.
#[derive(Debug, Clone, Parser, PartialEq)]
#[command(name = "rtx-bench", version)]
pub struct Cli {
    /// Comma-separated suites: gemm, attention, memory, transformer, tuning, aot (or `all`).
    #[arg(long, default_value = "all", value_parser = parse_suites)]
    pub suite: SuiteSelection,
    /// Output folder for report.json, report.md and the SVG plots.
    #[arg(long, default_value = ".bench-out")]
    pub out: PathBuf,
    /// PyTorch anchors JSON written by `torch_anchors.py --json` on the same GPU.
    #[arg(long)]
    pub anchors: Option<PathBuf>,
    /// Baseline report to gate against (exit code 2 when a case is slower than allowed): a
    /// file, or a folder (then this device's `<device name>.json` in it, as `--update-baseline`
    /// writes it).
    #[arg(long)]
    pub gate: Option<PathBuf>,
    /// Write this run as the baseline: a file, or a folder (then `<device name>.json` in it).
    #[arg(long)]
    pub update_baseline: Option<PathBuf>,
    /// Gate tolerance on top of the measured spread (fraction: 0.05 = 5%).
    #[arg(long, default_value_t = DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Fewer shapes and shorter timing.
    #[arg(long)]
    pub quick: bool,
    /// Timed samples enqueued before the host waits for them (default 1: a wait after every
    /// sample; more is Triton's `do_bench` way, measured noisier on the H200, kept for A/B runs).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=200))]
    pub timing_pipeline: Option<u16>,
    /// Compare each GEMM row with the separately timed cuBLAS row instead of timing cuBLAS
    /// alternately with the row (the method before 2026-12-04; kept for A/B runs).
    #[arg(long)]
    pub separate_baseline: bool,
    /// Compile every valid config of every template (default: at most 12 per template and
    /// problem, spread over the space; `--quick`: 3).
    #[arg(long)]
    pub all_configs: bool,
    /// Only these compile-registry families (comma-separated, e.g. `samples,gemm_wgmma`).
    #[arg(long, value_delimiter = ',')]
    pub families: Option<Vec<String>>,
    /// Do not take the device's ceilings from the rtx profiler (its saved profile, or a fresh
    /// measurement when none is saved); the roofline then uses this run's copy and cuBLAS cases.
    #[arg(long, conflicts_with = "reprofile")]
    pub no_profile: bool,
    /// Measure the device's ceilings again with the rtx profiler (micro-benchmarks) and replace
    /// the saved profile for this device name + driver (`$RTX_CACHE_DIR/profiles`), instead of
    /// reusing it. Needs a GPU and NVRTC; without a GPU it changes nothing.
    #[arg(long)]
    pub reprofile: bool,
    /// No progress bars on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Memory suite: tune every memory-bound case in-process first (bounded space of a few
    /// dozen configs, `--tune-budget-s` each) and store the winners in the tuning database;
    /// without it the `rtx-tuned` rows serve what the database already holds.
    #[arg(long)]
    pub tune: bool,
    /// Wall-clock budget of one in-run tuning, seconds (compiles included).
    #[arg(long, default_value_t = 45.0)]
    pub tune_budget_s: f64,
    /// GEMM suite: only these input dtypes (comma-separated: f32, tf32, f16, bf16).
    #[arg(long, value_delimiter = ',', value_parser = parse_dtype)]
    pub gemm_dtypes: Option<Vec<DType>>,
    /// GEMM suite: only these shapes (comma-separated `MxNxK`); shapes outside the suite's list
    /// are added.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub gemm_shapes: Option<Vec<(u32, u32, u32)>>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse::<DType>().map_err(|e| e.to_string())
}

/// Parses `MxNxK` (every extent at least 1).
pub fn parse_shape(s: &str) -> Result<(u32, u32, u32), String> {
    let dims: Vec<&str> = s.split('x').collect();
    let bad = || format!("shape '{s}': expected MxNxK with positive integers, e.g. 4096x4096x1000");
    if dims.len() != 3 {
        return Err(bad());
    }
    let mut v = [0u32; 3];
    for (d, t) in v.iter_mut().zip(&dims) {
        *d = t.trim().parse::<u32>().map_err(|_| bad())?;
        if *d == 0 {
            return Err(bad());
        }
    }
    Ok((v[0], v[1], v[2]))
}

/// The parsed `--suite` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteSelection(pub Vec<SuiteId>);

fn parse_suites(s: &str) -> Result<SuiteSelection, String> {
    SuiteId::parse_list(s)
        .map(SuiteSelection)
        .map_err(|e| e.to_string())
}

impl Cli {
    /// The selected suites, de-duplicated, in run order.
    pub fn suites(&self) -> Vec<SuiteId> {
        let mut v: Vec<SuiteId> = self.suite.0.clone();
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_flags() {
        let c = Cli::try_parse_from(["rtx-bench"]).unwrap();
        assert_eq!(c.suites(), SuiteId::ALL.to_vec());
        assert_eq!(c.out, PathBuf::from(".bench-out"));
        assert_eq!(c.tolerance, 0.05);
        assert!(!c.quick && c.anchors.is_none() && c.gate.is_none());
        assert!(!c.tune && c.tune_budget_s == 45.0);
        let t = Cli::try_parse_from(["rtx-bench", "--tune", "--tune-budget-s", "20"]).unwrap();
        assert!(t.tune && t.tune_budget_s == 20.0);
        let c = Cli::try_parse_from([
            "rtx-bench",
            "--suite",
            "aot,gemm",
            "--out",
            "o",
            "--anchors",
            "a.json",
            "--gate",
            "bench/baselines/NVIDIA_H200.json",
            "--update-baseline",
            "bench/baselines/",
            "--tolerance",
            "0.1",
            "--quick",
        ])
        .unwrap();
        assert_eq!(c.suites(), vec![SuiteId::Gemm, SuiteId::Aot]);
        assert_eq!(c.tolerance, 0.1);
        assert!(c.quick);
        assert_eq!(c.update_baseline, Some(PathBuf::from("bench/baselines/")));
        assert!(Cli::try_parse_from(["rtx-bench", "--suite", "nope"]).is_err());
        assert!(!Cli::try_parse_from(["rtx-bench"]).unwrap().reprofile);
        assert!(
            Cli::try_parse_from(["rtx-bench", "--reprofile"])
                .unwrap()
                .reprofile
        );
        let g = Cli::try_parse_from([
            "rtx-bench",
            "--gemm-dtypes",
            "bf16,f16",
            "--gemm-shapes",
            "512x512x512,64x8192x8192",
        ])
        .unwrap();
        assert_eq!(g.gemm_dtypes, Some(vec![DType::Bf16, DType::F16]));
        assert_eq!(g.gemm_shapes, Some(vec![(512, 512, 512), (64, 8192, 8192)]));
        assert!(Cli::try_parse_from(["rtx-bench", "--gemm-dtypes", "fp7"]).is_err());
        for bad in ["4096x4096", "0x1x1", "axbxc", "1x2x3x4"] {
            assert!(
                Cli::try_parse_from(["rtx-bench", "--gemm-shapes", bad]).is_err(),
                "{bad}"
            );
        }
        assert!(
            Cli::try_parse_from(["rtx-bench", "--reprofile", "--no-profile"]).is_err(),
            "re-measuring a profile that is not used is refused"
        );
    }
}
