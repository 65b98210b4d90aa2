//! The gate baselines committed under `bench/baselines/` must stay usable by `--gate`: each one
//! parses as a report of a supported format, was measured on a GPU, and is filed under the name
//! `--gate bench/baselines/` looks up for the device that measured it.

use rtx_bench::gate::baseline_file_name;
use rtx_bench::report::{GpuPresence, Report};
use std::path::PathBuf;

fn baselines_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/baselines")
}

#[test]
fn every_committed_baseline_is_gateable_for_its_device() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(baselines_dir())
        .expect("bench/baselines/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no baseline under bench/baselines/");
    for path in &files {
        let report = Report::read_file(path)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        assert_eq!(
            report.device.gpu,
            GpuPresence::Present,
            "{} was not measured on a GPU",
            path.display()
        );
        let info = report
            .device
            .info
            .as_ref()
            .unwrap_or_else(|| panic!("{} names no device", path.display()));
        let file = path.file_name().unwrap().to_string_lossy();
        assert_eq!(
            file,
            baseline_file_name(&info.name),
            "{} is filed under another device's name (it was measured on {})",
            path.display(),
            info.name
        );
        assert!(
            report.gpu_measured_cases() > 100,
            "{} holds only {} GPU-measured cases: not a full-suite baseline",
            path.display(),
            report.gpu_measured_cases()
        );
    }
}
