//! The versioned benchmark report: what `report.json` holds, and reading/writing it.
//!
//! Every figure in a report is either a real GPU measurement (`clock: gpu`, CUDA events on the
//! device), a real host measurement (`clock: host`, e.g. NVRTC compile wall time), or absent
//! with a reason (`status: not_available` / `failed`). Nothing is ever simulated.
//!
//! Ratios are always `baseline_time / our_time`, so a ratio above 1 means ours is faster.

use crate::stats::Summary;
use crate::suite_id::SuiteId;
use crate::DeviceInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The report format this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Why a report could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The text is not JSON of the report's shape.
    #[error("report is not valid JSON of format {FORMAT_VERSION}: {0}")]
    Json(#[from] serde_json::Error),
    /// No `format_version` field.
    #[error("report has no integer `format_version` field")]
    MissingVersion,
    /// Written by a newer rtx-bench than this one.
    #[error("report format_version {found} is newer than this rtx-bench understands ({supported}); update rtx-bench")]
    UnsupportedVersion {
        /// The version in the file.
        found: u64,
        /// The newest version this build reads.
        supported: u32,
    },
}

/// Versions of the tools the figures were produced with (`None`: not available on this machine).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ToolVersions {
    /// rtx-bench's crate version.
    pub rtx: String,
    /// NVRTC `major.minor`.
    pub nvrtc: Option<String>,
    /// CUDA driver API version `major.minor` (from the driver).
    pub driver: Option<String>,
    /// CUDA version the bindings were built for.
    pub cuda: Option<String>,
}

/// Whether the report was made with a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuPresence {
    /// A CUDA device was opened and measured.
    Present,
    /// No CUDA device: only host-side figures (compile times, resources) are in the report.
    Absent,
}

/// Ceilings measured on the device (never datasheet values; those are labelled by `source`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct MeasuredProfile {
    /// Measured device-to-device copy bandwidth (bytes read + written), GB/s.
    pub copy_gbps: Option<f64>,
    /// Measured compute ceiling per dtype name (`bf16`, `f32`, ...), TFLOP/s.
    pub compute_tflops: BTreeMap<String, f64>,
    /// Where the figures come from, e.g. `memory suite copy case; best cuBLAS case per dtype`.
    pub source: String,
}

/// The device section: presence, the driver's description and the measured profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSection {
    /// `present` or `absent`.
    pub gpu: GpuPresence,
    /// Why no GPU is used, when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent_reason: Option<String>,
    /// The driver's description of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<DeviceInfo>,
    /// Ceilings measured in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<MeasuredProfile>,
}

impl DeviceSection {
    /// No GPU, for `reason`.
    pub fn absent(reason: impl Into<String>) -> Self {
        DeviceSection {
            gpu: GpuPresence::Absent,
            absent_reason: Some(reason.into()),
            info: None,
            profile: None,
        }
    }

    /// A GPU described by `info`.
    pub fn present(info: DeviceInfo) -> Self {
        DeviceSection {
            gpu: GpuPresence::Present,
            absent_reason: None,
            info: Some(info),
            profile: None,
        }
    }

    /// The device name, or `no GPU`.
    pub fn name(&self) -> &str {
        self.info.as_ref().map_or("no GPU", |i| i.name.as_str())
    }
}

/// Which clock a case's times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// CUDA events on the device.
    Gpu,
    /// Host wall clock (compile times, file loads).
    Host,
}

/// Outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CaseStatus {
    /// Timed; the figures are real.
    Measured,
    /// Cannot be measured yet (template missing, no GPU, ...); no figures.
    NotAvailable {
        /// In words.
        reason: String,
    },
    /// Tried and failed (compile error, launch error, wrong result); no figures.
    Failed {
        /// The error.
        error: String,
    },
}

/// Achieved throughput derived from the median time and the case's work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Throughput {
    /// TFLOP/s (compute-bound cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// GB/s of minimum bytes moved (memory-bound cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// `gbps` over the device copy bandwidth measured in the same run (memory cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_fraction: Option<f64>,
}

/// A baseline measured in the same run (cuBLAS, our untuned default).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredBaseline {
    /// The baseline's median time.
    pub median_us: f64,
    /// `baseline / ours` (> 1: ours is faster).
    pub ratio: f64,
    /// The baseline was timed alternately with this case (same rounds, same GPU state), not
    /// taken from its own row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleaved: bool,
}

/// A PyTorch anchor figure from `--anchors`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnchorBaseline {
    /// The anchor's time.
    pub us: f64,
    /// `anchor / ours` (> 1: ours is faster).
    pub ratio: f64,
}

/// The baselines a case is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Baselines {
    /// cuBLAS(Lt) on the same problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublas: Option<MeasuredBaseline>,
    /// Our template's default (untuned) config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untuned: Option<MeasuredBaseline>,
    /// The PyTorch anchor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<AnchorBaseline>,
}

impl Baselines {
    /// True when no baseline is set.
    pub fn is_empty(&self) -> bool {
        self.cublas.is_none() && self.untuned.is_none() && self.torch.is_none()
    }
}

/// Result of checking a case's output against a reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Verified {
    /// Relative error (Frobenius over the checked elements).
    pub rel_err: f64,
    /// The bound it must meet.
    pub bound: f64,
    /// `rel_err <= bound`.
    pub ok: bool,
}

impl Verified {
    /// Builds the record, deciding `ok` (a NaN error is never ok).
    pub fn new(rel_err: f64, bound: f64) -> Self {
        Verified {
            rel_err,
            bound,
            ok: rel_err <= bound,
        }
    }
}

/// Compile facts of one kernel for one target (host-side; from NVRTC and ptxas `-v`), with
/// the warm path next to the cold compile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileInfo {
    /// Target, e.g. `sm_90a`.
    pub arch: String,
    /// Template family in the registry.
    pub family: String,
    /// Kernel entry point.
    pub entry: String,
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Bytes spilled to local memory (stores).
    pub spill_store_bytes: Option<u32>,
    /// Bytes reloaded from local memory.
    pub spill_load_bytes: Option<u32>,
    /// Stack frame bytes.
    pub stack_bytes: Option<u32>,
    /// Static shared memory bytes.
    pub smem_bytes: Option<u32>,
    /// Size of the cubin.
    pub cubin_bytes: u64,
    /// Median host time of a warm `KernelCache::get` of this kernel, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_load_us: Option<f64>,
    /// Median host time of loading the cubin as a module on the device, us (GPU runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_load_us: Option<f64>,
}

/// One benchmark case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Suite it belongs to.
    pub suite: SuiteId,
    /// Name, unique within the suite (the gate's key).
    pub name: String,
    /// Shape in words, e.g. `4096x4096x4096`.
    pub shape: String,
    /// Element type name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Unit of the time fields: always `us`.
    pub metric_unit: String,
    /// Which clock measured it.
    pub clock: Clock,
    /// Measured, not available, or failed.
    pub status: CaseStatus,
    /// Median time.
    pub median_us: Option<f64>,
    /// 20th percentile.
    pub p20_us: Option<f64>,
    /// 80th percentile.
    pub p80_us: Option<f64>,
    /// `(p80 - p20) / median`.
    pub rel_spread: Option<f64>,
    /// Timed samples.
    pub samples: usize,
    /// Floating-point operations of one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Minimum bytes one run must move to and from device memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    /// Achieved rate.
    #[serde(default)]
    pub throughput: Throughput,
    /// Baselines.
    #[serde(default)]
    pub baselines: Baselines,
    /// Output check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<Verified>,
    /// The PyTorch anchor key this case maps to (see `anchors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// Compile facts (aot cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileInfo>,
    /// Free-form remark (what is measured, caveats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where a tuned row's config came from (memory suite `rtx-tuned` rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningInfo>,
}

/// Provenance of a tuned row's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuningInfo {
    /// `exact`, `nearest-bucket`, or `tuned` (tuned in this run, then served exactly).
    pub source: String,
    /// The served config, in its serde JSON form.
    pub config: serde_json::Value,
    /// The template's default config (the `untuned` baseline), in JSON form.
    pub default_config: serde_json::Value,
    /// Wall time of the in-run tuning (compiles included), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune_s: Option<f64>,
    /// Configs measured by the in-run tuning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<usize>,
}

impl Case {
    fn empty(
        suite: SuiteId,
        name: impl Into<String>,
        shape: impl Into<String>,
        clock: Clock,
        status: CaseStatus,
    ) -> Case {
        Case {
            suite,
            name: name.into(),
            shape: shape.into(),
            dtype: None,
            metric_unit: "us".into(),
            clock,
            status,
            median_us: None,
            p20_us: None,
            p80_us: None,
            rel_spread: None,
            samples: 0,
            flops: None,
            bytes: None,
            throughput: Throughput::default(),
            baselines: Baselines::default(),
            verified: None,
            anchor: None,
            compile: None,
            note: None,
            tuning: None,
        }
    }

    /// A measured case with the timing summary `s`.
    pub fn measured(
        suite: SuiteId,
        name: impl Into<String>,
        shape: impl Into<String>,
        clock: Clock,
        s: &Summary,
    ) -> Case {
        let mut c = Case::empty(suite, name, shape, clock, CaseStatus::Measured);
        c.median_us = Some(s.median_us);
        c.p20_us = Some(s.p20_us);
        c.p80_us = Some(s.p80_us);
        c.rel_spread = Some(s.rel_spread);
        c.samples = s.samples;
        c
    }

    /// A case that cannot be measured yet, with the reason (no figures).
    pub fn not_available(
        suite: SuiteId,
        name: impl Into<String>,
        shape: impl Into<String>,
        reason: impl Into<String>,
    ) -> Case {
        Case::empty(
            suite,
            name,
            shape,
            Clock::Gpu,
            CaseStatus::NotAvailable {
                reason: reason.into(),
            },
        )
    }

    /// A case that failed, with the error (no figures).
    pub fn failed(
        suite: SuiteId,
        name: impl Into<String>,
        shape: impl Into<String>,
        clock: Clock,
        error: impl Into<String>,
    ) -> Case {
        Case::empty(
            suite,
            name,
            shape,
            clock,
            CaseStatus::Failed {
                error: error.into(),
            },
        )
    }

    /// Sets the dtype name.
    pub fn with_dtype(mut self, dtype: impl Into<String>) -> Case {
        self.dtype = Some(dtype.into());
        self
    }

    /// Sets the work of one run and derives the throughput from the median.
    pub fn with_work(mut self, flops: Option<f64>, bytes: Option<f64>) -> Case {
        self.flops = flops;
        self.bytes = bytes;
        self.throughput = Throughput::default();
        if let Some(t) = self.median_us.filter(|t| *t > 0.0) {
            self.throughput.tflops = flops.map(|f| f / (t * 1e6));
            self.throughput.gbps = bytes.map(|b| b / (t * 1e3));
        }
        self
    }

    /// Sets the note.
    pub fn with_note(mut self, note: impl Into<String>) -> Case {
        self.note = Some(note.into());
        self
    }

    /// Whether this case carries real figures.
    pub fn is_measured(&self) -> bool {
        self.status == CaseStatus::Measured && self.median_us.is_some()
    }

    /// `FLOP / byte` when both are known.
    pub fn arithmetic_intensity(&self) -> Option<f64> {
        match (self.flops, self.bytes) {
            (Some(f), Some(b)) if b > 0.0 => Some(f / b),
            _ => None,
        }
    }

    /// Key used by the gate: `suite/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.suite, self.name)
    }

    /// Records a same-run baseline's median as `cublas` or `untuned` (ratio = baseline / ours).
    pub fn measured_baseline(&self, baseline_median_us: f64) -> Option<MeasuredBaseline> {
        let ours = self.median_us.filter(|t| *t > 0.0)?;
        Some(MeasuredBaseline {
            median_us: baseline_median_us,
            ratio: baseline_median_us / ours,
            interleaved: false,
        })
    }
}

/// Which suites ran, and why one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteRun {
    /// The suite.
    pub suite: SuiteId,
    /// `None` when it ran; otherwise why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// A whole benchmark report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`FORMAT_VERSION`] when written by this build.
    pub format_version: u32,
    /// Seconds since the Unix epoch when the run started.
    pub created_unix: u64,
    /// `git rev-parse HEAD` or `RTX_GIT_COMMIT`.
    pub git_commit: Option<String>,
    /// Tool versions.
    pub tool_versions: ToolVersions,
    /// The device.
    pub device: DeviceSection,
    /// The exact argv.
    pub command: Vec<String>,
    /// Suites requested and whether they ran.
    #[serde(default)]
    pub suites: Vec<SuiteRun>,
    /// All cases, in run order.
    pub cases: Vec<Case>,
}

impl Report {
    /// An empty report of the current format.
    pub fn new(
        created_unix: u64,
        git_commit: Option<String>,
        tool_versions: ToolVersions,
        device: DeviceSection,
        command: Vec<String>,
    ) -> Report {
        Report {
            format_version: FORMAT_VERSION,
            created_unix,
            git_commit,
            tool_versions,
            device,
            command,
            suites: Vec::new(),
            cases: Vec::new(),
        }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // A report holds only strings, numbers and maps with string keys: serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Parses JSON, checking `format_version` first so a newer file is a typed error.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let found = v
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .ok_or(ReportError::MissingVersion)?;
        if found > FORMAT_VERSION as u64 {
            return Err(ReportError::UnsupportedVersion {
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(serde_json::from_value(v)?)
    }

    /// Writes the JSON to `path` atomically (a crash leaves the old file, e.g. a baseline, intact),
    /// creating parent folders.
    pub fn write_file(&self, path: &Path) -> Result<(), ReportError> {
        rtx_synthesis::aot::fsio::write_atomic_making_parent(path, self.to_json().as_bytes())
            .map_err(|source| ReportError::Io {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Reads a report file.
    pub fn read_file(path: &Path) -> Result<Report, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Report::from_json(&text)
    }

    /// Number of cases with GPU-measured figures.
    pub fn gpu_measured_cases(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.is_measured() && c.clock == Clock::Gpu)
            .count()
    }

    /// The case with this suite and name.
    pub fn find(&self, suite: SuiteId, name: &str) -> Option<&Case> {
        self.cases
            .iter()
            .find(|c| c.suite == suite && c.name == name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A hand-made device description for tests (architectural limits only; not a measurement).
    pub(crate) fn example_info() -> DeviceInfo {
        DeviceInfo::example_sm90()
    }

    /// A hand-made report for tests (figures are arbitrary test inputs, not measurements).
    pub(crate) fn sample_report() -> Report {
        let mut r = Report::new(
            1_700_000_000,
            Some("abc123".into()),
            ToolVersions {
                rtx: "0.1.0".into(),
                nvrtc: Some("13.0".into()),
                driver: None,
                cuda: Some("13.0".into()),
            },
            DeviceSection::absent("test"),
            vec!["rtx-bench".into(), "--quick".into()],
        );
        let s = Summary {
            median_us: 100.0,
            p20_us: 99.0,
            p80_us: 101.0,
            rel_spread: 0.02,
            samples: 20,
        };
        let mut c = Case::measured(
            SuiteId::Gemm,
            "cublas bf16 4096x4096x4096",
            "4096x4096x4096",
            Clock::Gpu,
            &s,
        )
        .with_dtype("bf16")
        .with_work(
            Some(2.0 * 4096f64.powi(3)),
            Some(3.0 * 2.0 * 4096f64.powi(2)),
        );
        c.baselines.torch = Some(AnchorBaseline {
            us: 110.0,
            ratio: 1.1,
        });
        c.verified = Some(Verified::new(1e-3, 2e-2));
        c.anchor = Some("gemm bf16 4096x4096x4096".into());
        r.cases.push(c);
        r.cases.push(Case::not_available(
            SuiteId::Attention,
            "flash bf16 B4 H16 S2048 D128",
            "B4 H16 S2048 D128",
            "no attention template yet",
        ));
        r.suites.push(SuiteRun {
            suite: SuiteId::Gemm,
            skipped: None,
        });
        r
    }

    #[test]
    fn json_round_trip() {
        let r = sample_report();
        let text = r.to_json();
        assert!(text.contains("\"format_version\": 1"));
        assert!(text.contains("\"gpu\": \"absent\""));
        assert!(text.contains("\"metric_unit\": \"us\""));
        let back = Report::from_json(&text).unwrap();
        assert_eq!(back, r);
    }

    proptest::proptest! {
        #[test]
        fn any_figures_round_trip_exactly(median in 0.0f64..1e9, spread in 0.0f64..1.0, samples in 0usize..10_000, flops in 1.0f64..1e15) {
            let mut r = sample_report();
            let s = Summary { median_us: median, p20_us: median * (1.0 - spread / 2.0), p80_us: median * (1.0 + spread / 2.0), rel_spread: spread, samples };
            r.cases.push(Case::measured(SuiteId::Memory, "p", "1", Clock::Gpu, &s).with_work(Some(flops), Some(flops / 3.0)));
            let back = Report::from_json(&r.to_json()).unwrap();
            proptest::prop_assert_eq!(back, r);
        }
    }

    #[test]
    fn future_version_is_a_typed_error() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_report().to_json()).unwrap();
        v["format_version"] = serde_json::json!(FORMAT_VERSION + 1);
        match Report::from_json(&v.to_string()) {
            Err(ReportError::UnsupportedVersion { found, supported }) => {
                assert_eq!(found, FORMAT_VERSION as u64 + 1);
                assert_eq!(supported, FORMAT_VERSION);
            }
            other => panic!("expected UnsupportedVersion, got {other:?}"),
        }
        v.as_object_mut().unwrap().remove("format_version");
        assert!(matches!(
            Report::from_json(&v.to_string()),
            Err(ReportError::MissingVersion)
        ));
        assert!(matches!(
            Report::from_json("not json"),
            Err(ReportError::Json(_))
        ));
    }

    #[test]
    fn throughput_follows_the_median() {
        let s = Summary {
            median_us: 1000.0,
            p20_us: 1000.0,
            p80_us: 1000.0,
            rel_spread: 0.0,
            samples: 1,
        };
        let c = Case::measured(SuiteId::Memory, "copy", "1", Clock::Gpu, &s)
            .with_work(Some(2e12), Some(4e9));
        // 2e12 FLOP in 1 ms = 2000 TFLOP/s; 4e9 bytes in 1 ms = 4000 GB/s.
        assert!((c.throughput.tflops.unwrap() - 2000.0).abs() < 1e-9);
        assert!((c.throughput.gbps.unwrap() - 4000.0).abs() < 1e-9);
        assert_eq!(c.arithmetic_intensity(), Some(500.0));
        let na =
            Case::not_available(SuiteId::Memory, "x", "1", "why").with_work(Some(1.0), Some(1.0));
        assert_eq!(na.throughput, Throughput::default());
        assert!(!na.is_measured());
    }

    #[test]
    fn file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/report.json");
        let r = sample_report();
        r.write_file(&p).unwrap();
        assert_eq!(Report::read_file(&p).unwrap(), r);
        assert!(matches!(
            Report::read_file(&dir.path().join("missing.json")),
            Err(ReportError::Io { .. })
        ));
    }
}
