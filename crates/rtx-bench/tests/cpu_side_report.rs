//! The CPU-side (no GPU) run and, on a GPU machine, the same AOT run with the device's warm path.
//! Either way the report must say which it was, and never carry GPU figures without a GPU.

use clap::Parser;
use rtx_bench::cli::Cli;
use rtx_bench::report::{CaseStatus, Clock, GpuPresence, Report};
use rtx_bench::{gpu, runner, SuiteId};

#[test]
fn aot_suite_report_matches_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let argv: Vec<String> = [
        "rtx-bench",
        "--suite",
        "aot",
        "--quick",
        "--no-progress",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.path().display().to_string()])
    .collect();
    let cli = Cli::try_parse_from(&argv).unwrap();
    let detected = gpu::detect();
    let had_gpu = detected.is_ok();
    let mut printed = Vec::new();
    let out = runner::run(&cli, argv, detected, &mut printed).unwrap();
    let printed = String::from_utf8(printed).unwrap();
    let back = Report::read_file(&dir.path().join("report.json")).unwrap();
    assert_eq!(back, out.report);
    assert!(dir.path().join("report.md").is_file());
    let r = &out.report;
    assert!(r.cases.iter().all(|c| c.suite == SuiteId::Aot));
    assert!(
        r.cases.iter().all(|c| c.clock == Clock::Host),
        "aot times are host wall-clock times"
    );
    if had_gpu {
        assert_eq!(r.device.gpu, GpuPresence::Present);
        assert!(!printed.contains("No CUDA GPU found"));
        if rtx_synthesis::aot::Toolchain::get().is_ok() {
            assert!(
                r.cases.iter().any(|c| c
                    .compile
                    .as_ref()
                    .is_some_and(|i| i.module_load_us.is_some())),
                "{printed}"
            );
        }
    } else {
        eprintln!("SKIP (GPU half) aot_suite_report_matches_the_machine: no GPU; checked the CPU-side path");
        assert_eq!(r.device.gpu, GpuPresence::Absent);
        assert!(printed.starts_with("No CUDA GPU found ("), "{printed}");
        assert_eq!(r.gpu_measured_cases(), 0);
        let json = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
        assert!(json.contains("\"gpu\": \"absent\""));
    }
    if rtx_synthesis::aot::nvrtc_or_skip("(compile half) aot_suite_report_matches_the_machine") {
        let compiled = r
            .cases
            .iter()
            .filter(|c| c.compile.is_some() && c.is_measured())
            .count();
        assert!(
            compiled >= 2,
            "every registry kernel compiles for sm_90a and sm_120: {printed}"
        );
        assert!(
            r.cases
                .iter()
                .filter(|c| c.is_measured())
                .filter_map(|c| c.compile.as_ref())
                .all(|i| i.cache_load_us.is_some()),
            "the warm cache path is measured for every compiled kernel: {printed}"
        );
        assert!(
            r.cases
                .iter()
                .all(|c| !matches!(c.status, CaseStatus::Failed { .. })),
            "{printed}"
        );
    }
}
