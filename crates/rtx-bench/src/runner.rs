//! One `rtx-bench` run: detect the GPU, run the suites, apply anchors, derive the measured
//! profile, write `report.json` / `report.md` / plots, gate, update the baseline.

use crate::anchors::Anchors;
use crate::checkpoint::Checkpoint;
use crate::cli::Cli;
use crate::env_info::{git_commit, now_unix, tool_versions};
use crate::gate::{self, BadTolerance, GateOutcome};
use crate::gpu::{Gpu, NoGpu};
use crate::markdown;
use crate::plots::{self, PlotError};
use crate::registry::RegistryOptions;
use crate::report::{
    Clock, DeviceSection, GpuPresence, MeasuredProfile, Report, ReportError, SuiteRun,
};
use crate::suite_id::SuiteId;
use crate::suites::{suite_for, SuiteContext};
use crate::timing::TimingConfig;
use rtx_synthesis::Arch;
use std::io::Write;
use std::path::PathBuf;

/// Exit code when the gate finds a slower case.
pub const EXIT_GATE_FAILED: i32 = 2;
/// Exit code when a measured case produced a wrong result.
pub const EXIT_WRONG_RESULT: i32 = 3;

/// What a run produced.
#[derive(Debug)]
pub struct RunOutput {
    /// The report (also in `report.json`).
    pub report: Report,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// The gate's verdict, with `--gate`.
    pub gate: Option<GateOutcome>,
    /// Measured cases whose verification failed.
    pub wrong_results: Vec<String>,
}

impl RunOutput {
    /// The process exit code: gate failure 2, wrong results 3, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.gate.as_ref().is_some_and(|g| !g.passed()) {
            EXIT_GATE_FAILED
        } else if !self.wrong_results.is_empty() {
            EXIT_WRONG_RESULT
        } else {
            0
        }
    }
}

/// A run that could not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad `--tolerance`.
    #[error(transparent)]
    Tolerance(#[from] BadTolerance),
    /// Writing a report (output, `--update-baseline`).
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The `--gate` baseline could not be read; checked before any suite runs.
    #[error("--gate {path}: {}", without_path(source))]
    Gate {
        /// The baseline file given.
        path: PathBuf,
        /// Why it could not be read.
        source: ReportError,
    },
    /// Writing `report.md` or creating the output folder.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// Drawing a plot.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// `e`'s message without the path an I/O error repeats (the caller names the file).
fn without_path(e: &ReportError) -> String {
    match e {
        ReportError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// The message printed when no GPU is found.
pub fn no_gpu_message(reason: &NoGpu) -> String {
    format!("No CUDA GPU found ({reason}): running the CPU-side suite only; no GPU figures are produced.")
}

/// The targets the compile suite builds for: sm_90a and sm_120, plus the device's own.
pub fn compile_archs(gpu: Option<&Gpu>) -> Vec<Arch> {
    let mut v = vec![Arch::Sm90a, Arch::Sm120];
    if let Some(g) = gpu {
        if !v.contains(&g.arch) {
            v.push(g.arch);
        }
    }
    v
}

/// The device's measured ceilings from the rtx profiler: its saved profile for this device and
/// driver, measured (micro-benchmarks, then saved under `RTX_CACHE_DIR`) when there is none or
/// when `reprofile` is set (`rtx-bench --reprofile`: measured again, replacing the saved one).
pub fn profiler_ceilings(
    gpu: &Gpu,
    reprofile: bool,
) -> Option<(rtx_synthesis::profiler::Ceilings, u64)> {
    if reprofile {
        tracing::info!(target: "rtx_bench", "--reprofile: measuring the device's ceilings again");
    }
    match rtx_synthesis::profiler::profile_device(&gpu.device, reprofile) {
        Ok(p) => Some((p.measured, p.measured_at)),
        Err(e) => {
            tracing::warn!(target: "rtx_bench", "no profiler ceilings: {e}");
            None
        }
    }
}

/// Ceilings for the report: a saved profiler measurement of this device when one exists, else
/// (and for what it lacks) this run's own figures: the copy case's bandwidth and, per dtype,
/// the best cuBLAS figure (labelled as such: what the device reached here, not a datasheet peak).
pub fn derive_profile(
    r: &Report,
    saved: Option<(rtx_synthesis::profiler::Ceilings, u64)>,
) -> Option<MeasuredProfile> {
    if r.device.gpu != GpuPresence::Present {
        return None;
    }
    let mut p = MeasuredProfile::default();
    let mut sources = Vec::new();
    if let Some((c, at)) = saved {
        p.copy_gbps = c.copy_gbps;
        for (d, t) in [
            ("f32", c.fp32_tflops),
            ("tf32", c.tf32_tflops),
            ("f16", c.f16_tflops),
            ("bf16", c.bf16_tflops),
        ] {
            if let Some(t) = t {
                p.compute_tflops.insert(d.to_string(), t);
            }
        }
        sources.push(format!(
            "rtx profiler micro-benchmarks (measured at unix {at})"
        ));
    }
    let measured = || {
        r.cases
            .iter()
            .filter(|c| c.is_measured() && c.clock == Clock::Gpu)
    };
    if p.copy_gbps.is_none() {
        p.copy_gbps = measured()
            .filter(|c| c.suite == SuiteId::Memory && c.name.starts_with("copy d2d"))
            .filter_map(|c| c.throughput.gbps)
            .reduce(f64::max);
        if p.copy_gbps.is_some() {
            sources.push("copy: memory suite `copy d2d` case".to_string());
        }
    }
    let mut from_cublas = false;
    for c in measured().filter(|c| c.suite == SuiteId::Gemm && c.name.starts_with("cublas ")) {
        if let (Some(d), Some(t)) = (c.dtype.clone(), c.throughput.tflops) {
            if saved.is_some_and(|(s, _)| match d.as_str() {
                "f32" => s.fp32_tflops.is_some(),
                "tf32" => s.tf32_tflops.is_some(),
                "f16" => s.f16_tflops.is_some(),
                "bf16" => s.bf16_tflops.is_some(),
                _ => false,
            }) {
                continue;
            }
            let e = p.compute_tflops.entry(d).or_insert(0.0);
            *e = e.max(t);
            from_cublas = true;
        }
    }
    if from_cublas {
        sources.push("compute: best cuBLAS case per dtype in this run".to_string());
    }
    if p.copy_gbps.is_none() && p.compute_tflops.is_empty() {
        return None;
    }
    p.source = sources.join("; ");
    Some(p)
}

/// Runs everything `cli` asks for on `detected` (the GPU, or why there is none), printing the
/// user-facing lines (no-GPU notice, Markdown, gate verdict) to `out`.
pub fn run(
    cli: &Cli,
    argv: Vec<String>,
    detected: Result<Gpu, NoGpu>,
    out: &mut dyn Write,
) -> Result<RunOutput, RunError> {
    let tolerance = gate::check_tolerance(cli.tolerance)?;
    let device = match &detected {
        Ok(g) => DeviceSection::present(g.device.info().clone()),
        Err(reason) => DeviceSection::absent(reason.to_string()),
    };
    // Read the inputs before the suites run, so that a bad path costs no GPU time: a gate
    // baseline that cannot be read is an error, anchors that cannot be read a warning.
    let baseline = match &cli.gate {
        Some(arg) => {
            // A folder holds one baseline per card: this device's `<name>.json`, the name
            // `--update-baseline` writes under.
            let path = gate::baseline_path(arg, device.name());
            Some(Report::read_file(&path).map_err(|source| RunError::Gate { path, source })?)
        }
        None => None,
    };
    let anchors = cli.anchors.as_ref().and_then(|path| {
        Anchors::read_file(path)
            .map_err(|e| {
                let _ = writeln!(out, "warning: anchors not used: {e}");
            })
            .ok()
    });
    // The output folder too: a run that cannot save its report must not start.
    std::fs::create_dir_all(&cli.out).map_err(|source| RunError::Io {
        path: cli.out.clone(),
        source,
    })?;
    let gpu = detected.as_ref().ok();
    if let Err(reason) = &detected {
        let _ = writeln!(out, "{}", no_gpu_message(reason));
    }
    let report = Report::new(
        now_unix(),
        git_commit(),
        tool_versions(gpu.map(|g| g.device.info())),
        device,
        argv,
    );
    // The checkpoint holds the run's report as the suites fill it.
    let checkpoint = Checkpoint::new(&cli.out, report);
    let ctx = SuiteContext {
        gpu,
        quick: cli.quick,
        timing: {
            let t = if cli.quick {
                TimingConfig::quick()
            } else {
                TimingConfig::full()
            };
            TimingConfig {
                pipeline: cli.timing_pipeline.map_or(t.pipeline, usize::from),
                interleave_baseline: !cli.separate_baseline,
                ..t
            }
        },
        registry: RegistryOptions {
            families: cli.families.clone(),
            ..if cli.all_configs {
                RegistryOptions::all()
            } else if cli.quick {
                RegistryOptions::quick()
            } else {
                RegistryOptions::default()
            }
        },
        compile_archs: compile_archs(gpu),
        show_progress: !cli.no_progress,
        tune: (cli.tune && cli.tune_budget_s.is_finite() && cli.tune_budget_s > 0.0)
            .then(|| std::time::Duration::from_secs_f64(cli.tune_budget_s)),
        gemm_filter: crate::suites::gemm::shapes::GemmFilter {
            dtypes: cli.gemm_dtypes.clone(),
            shapes: cli.gemm_shapes.clone(),
        },
        checkpoint: Some(&checkpoint),
    };
    let mut selected = cli.suites();
    if gpu.is_none() && !selected.contains(&SuiteId::Aot) {
        selected.push(SuiteId::Aot);
    }
    for id in selected {
        let suite = suite_for(id);
        let (cases, skipped) = if suite.needs_gpu() && gpu.is_none() {
            (Vec::new(), Some("no CUDA GPU".to_string()))
        } else {
            tracing::info!(target: "rtx_bench", "suite {id}: start");
            match suite.run(&ctx) {
                Ok(cases) => (cases, None),
                Err(e) => {
                    tracing::error!(target: "rtx_bench", "{e}");
                    (e.partial, Some(format!("stopped: {}", e.reason)))
                }
            }
        };
        checkpoint.suite_done(SuiteRun { suite: id, skipped }, &cases);
    }
    let mut report = checkpoint.report();
    if let Some(a) = &anchors {
        let n = a.apply(&mut report);
        tracing::info!(target: "rtx_bench", "anchors: {} figures, {n} cases matched", a.len());
    }
    report.device.profile = derive_profile(
        &report,
        gpu.filter(|_| !cli.no_profile)
            .and_then(|g| profiler_ceilings(g, cli.reprofile)),
    );

    let dir = &cli.out;
    let mut files = Vec::new();
    let json = dir.join("report.json");
    report.write_file(&json)?;
    checkpoint.finish();
    files.push(json);
    let md = markdown::render(&report);
    let md_path = dir.join("report.md");
    std::fs::write(&md_path, &md).map_err(|source| RunError::Io {
        path: md_path.clone(),
        source,
    })?;
    files.push(md_path);
    files.extend(plots::write_all(&report, dir)?);
    let _ = write!(out, "{md}");

    let wrong_results: Vec<String> = report
        .cases
        .iter()
        .filter(|c| c.verified.is_some_and(|v| !v.ok))
        .map(|c| c.key())
        .collect();
    for k in &wrong_results {
        let _ = writeln!(out, "WRONG RESULT: {k}");
    }

    let gate = baseline.map(|base| {
        let g = gate::compare(&report, &base, tolerance);
        let _ = write!(out, "\n{}", g.render());
        g
    });
    if let Some(arg) = &cli.update_baseline {
        if report.gpu_measured_cases() == 0 {
            let _ = writeln!(out, "not writing a baseline: this run has no GPU-measured case (the gate compares GPU figures only)");
        } else {
            let path = gate::baseline_path(arg, report.device.name());
            report.write_file(&path)?;
            let _ = writeln!(out, "baseline written: {}", path.display());
            files.push(path);
        }
    }
    let _ = writeln!(
        out,
        "\nwrote: {}",
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(RunOutput {
        report,
        files,
        gate,
        wrong_results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn no_gpu_path_has_zero_gpu_cases_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("out");
        let argv = vec![
            "rtx-bench".to_string(),
            "--suite".into(),
            "gemm,memory".into(),
            "--quick".into(),
            "--families".into(),
            "samples".into(),
            "--no-progress".into(),
            "--out".into(),
            out_dir.display().to_string(),
        ];
        let cli = Cli::try_parse_from(&argv).unwrap();
        let mut printed = Vec::new();
        let r = run(
            &cli,
            argv.clone(),
            Err(NoGpu("test: no device".into())),
            &mut printed,
        )
        .unwrap();
        let printed = String::from_utf8(printed).unwrap();
        assert!(printed.starts_with("No CUDA GPU found (test: no device): running the CPU-side suite only; no GPU figures are produced."), "{printed}");
        assert_eq!(r.report.device.gpu, GpuPresence::Absent);
        assert_eq!(r.report.gpu_measured_cases(), 0);
        assert!(r
            .report
            .cases
            .iter()
            .all(|c| c.clock == Clock::Host || !c.is_measured()));
        assert!(
            r.report.cases.iter().all(|c| c.suite == SuiteId::Aot),
            "only the CPU-side suite ran"
        );
        assert!(r
            .report
            .suites
            .iter()
            .any(|s| s.suite == SuiteId::Gemm && s.skipped.as_deref() == Some("no CUDA GPU")));
        assert_eq!(r.report.command, argv);
        assert!(r.report.device.profile.is_none());
        let json = std::fs::read_to_string(out_dir.join("report.json")).unwrap();
        assert!(json.contains("\"gpu\": \"absent\""), "{json}");
        assert_eq!(Report::from_json(&json).unwrap(), r.report);
        assert!(out_dir.join("report.md").is_file());
        assert!(
            !out_dir.join(crate::checkpoint::PARTIAL_FILE).exists(),
            "a finished run leaves no partial report"
        );
        assert!(
            !out_dir.join("roofline.svg").exists(),
            "no GPU figures, no roofline"
        );
        assert_eq!(r.exit_code(), 0);
    }

    #[test]
    fn gate_against_a_baseline_without_gpu_reports_missing_only() {
        let dir = tempfile::tempdir().unwrap();
        let base_path = dir.path().join("base.json");
        // A hand-made baseline with one GPU case (a test input, not a measurement).
        let mut base = crate::report::tests::sample_report();
        base.cases.truncate(1);
        base.write_file(&base_path).unwrap();
        let argv: Vec<String> = [
            "rtx-bench",
            "--suite",
            "tuning",
            "--families",
            "samples",
            "--no-progress",
            "--quick",
            "--out",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            dir.path().join("o").display().to_string(),
            "--gate".into(),
            base_path.display().to_string(),
            "--update-baseline".into(),
            dir.path().display().to_string(),
        ])
        .collect();
        let cli = Cli::try_parse_from(&argv).unwrap();
        let mut printed = Vec::new();
        let r = run(&cli, argv, Err(NoGpu("test".into())), &mut printed).unwrap();
        let printed = String::from_utf8(printed).unwrap();
        let g = r.gate.as_ref().unwrap();
        assert!(g.passed());
        assert_eq!(g.missing.len(), 1);
        assert!(
            printed.contains("missing gemm/cublas bf16 4096x4096x4096"),
            "{printed}"
        );
        assert!(printed.contains("not writing a baseline"), "{printed}");
        assert_eq!(r.exit_code(), 0);
    }

    #[test]
    fn profile_prefers_saved_ceilings_and_fills_gaps_from_the_run() {
        // Hand-made inputs for the derivation logic, not measurements.
        let mut r = crate::report::tests::sample_report();
        assert!(derive_profile(&r, None).is_none(), "no GPU, no profile");
        r.device = DeviceSection::present(crate::report::tests::example_info());
        let p = derive_profile(&r, None).unwrap();
        let cublas = r.cases[0].throughput.tflops.unwrap();
        assert_eq!(p.compute_tflops.get("bf16"), Some(&cublas));
        assert!(p.copy_gbps.is_none());
        assert!(p.source.contains("best cuBLAS"));
        let saved = rtx_synthesis::profiler::Ceilings {
            copy_gbps: Some(1000.0),
            bf16_tflops: Some(2000.0),
            ..Default::default()
        };
        let p = derive_profile(&r, Some((saved, 7))).unwrap();
        assert_eq!(p.copy_gbps, Some(1000.0));
        assert_eq!(p.compute_tflops.get("bf16"), Some(&2000.0));
        assert!(p.source.contains("rtx profiler"));
    }

    /// `rtx-bench --quick --families samples --no-progress --out OUT EXTRA...`: the cheapest run.
    fn quick_cli(out: &std::path::Path, extra: &[&str]) -> Cli {
        let out = out.display().to_string();
        let base = [
            "rtx-bench",
            "--quick",
            "--families",
            "samples",
            "--no-progress",
            "--out",
        ];
        Cli::try_parse_from(base.iter().chain([&out.as_str()]).chain(extra)).unwrap()
    }

    #[test]
    fn an_unreadable_gate_baseline_fails_before_any_suite_runs() {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("out");
        let bad = dir.path().join("baseline.json");
        std::fs::write(&bad, "{ not json").unwrap();
        for gate in [bad.clone(), dir.path().join("missing.json")] {
            let cli = quick_cli(&out_dir, &["--gate", &gate.display().to_string()]);
            let mut printed = Vec::new();
            let e = run(&cli, vec![], Err(NoGpu("t".into())), &mut printed).unwrap_err();
            assert!(
                matches!(&e, RunError::Gate { path, .. } if *path == gate),
                "{e}"
            );
            assert!(e.to_string().starts_with("--gate "), "{e}");
            // Nothing ran: no no-GPU notice, no CPU-side suite, no report written.
            assert!(printed.is_empty(), "{}", String::from_utf8_lossy(&printed));
            assert!(!out_dir.exists());
        }
    }

    #[test]
    fn a_gate_folder_serves_the_devices_own_baseline() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("baselines");
        std::fs::create_dir(&folder).unwrap();
        let folder_arg = folder.display().to_string();
        let cli = quick_cli(&dir.path().join("o"), &["--gate", &folder_arg]);
        let mut printed = Vec::new();
        // No file for this device yet: the error names the file the folder would hold.
        let e = run(&cli, vec![], Err(NoGpu("t".into())), &mut printed).unwrap_err();
        let want = folder.join(crate::gate::baseline_file_name("no GPU"));
        assert!(
            matches!(&e, RunError::Gate { path, .. } if *path == want),
            "{e}"
        );
        // A hand-made baseline (a test input, not a measurement) under the device's name.
        let mut base = crate::report::tests::sample_report();
        base.cases.truncate(1);
        base.write_file(&want).unwrap();
        let r = run(&cli, vec![], Err(NoGpu("t".into())), &mut printed).unwrap();
        assert_eq!(r.gate.unwrap().missing.len(), 1);
    }

    #[test]
    fn an_output_path_that_is_a_file_fails_before_any_suite_runs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("taken");
        std::fs::write(&file, "not a folder").unwrap();
        let cli = quick_cli(&file, &[]);
        let mut printed = Vec::new();
        let e = run(&cli, vec![], Err(NoGpu("t".into())), &mut printed).unwrap_err();
        assert!(
            matches!(&e, RunError::Io { path, .. } if *path == file),
            "{e}"
        );
        assert!(printed.is_empty(), "{}", String::from_utf8_lossy(&printed));
    }

    #[test]
    fn bad_tolerance_is_an_error() {
        let cli = Cli::try_parse_from(["rtx-bench", "--tolerance=-1"]).unwrap();
        let mut sink = Vec::new();
        assert!(matches!(
            run(&cli, vec![], Err(NoGpu("t".into())), &mut sink),
            Err(RunError::Tolerance(_))
        ));
    }
}
