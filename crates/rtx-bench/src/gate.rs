//! Performance gate: compare a run against a committed per-device baseline report.
//!
//! A case fails when it is slower than its baseline by more than the measured noise plus the
//! tolerance:
//!
//! ```text
//! ours.median > base.median * (1 + tolerance + max(ours.rel_spread, base.rel_spread))
//! ```
//!
//! Cases are matched by `suite/name`. Only GPU-timed, measured cases are gated; host-timed ones
//! (compile times, which depend on how busy the host is) are listed as not gated. A case in the
//! baseline with no figure in this run is reported as missing (not a failure); a case with no
//! baseline is listed as new.

use crate::report::{Case, Clock, Report};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The default tolerance on top of the measured noise (5%).
pub const DEFAULT_TOLERANCE: f64 = 0.05;

/// A tolerance that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--tolerance {0} must be a finite number >= 0 (e.g. 0.05 for 5%)")]
pub struct BadTolerance(pub f64);

/// One case compared with its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// `suite/name`.
    pub key: String,
    /// Our median, us.
    pub ours_us: f64,
    /// Baseline median, us.
    pub base_us: f64,
    /// Our relative spread.
    pub ours_spread: f64,
    /// Baseline relative spread.
    pub base_spread: f64,
    /// The slowest median that still passes, us.
    pub limit_us: f64,
}

impl Comparison {
    /// `ours / base` (> 1: slower than the baseline).
    pub fn slowdown(&self) -> f64 {
        self.ours_us / self.base_us
    }

    /// Whether this comparison fails the gate.
    pub fn is_slower(&self) -> bool {
        self.ours_us > self.limit_us
    }
}

/// Everything the gate found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GateOutcome {
    /// Tolerance used.
    pub tolerance: f64,
    /// Every gated case (passing and failing), in run order.
    pub compared: Vec<Comparison>,
    /// In the baseline with a figure, but without one in this run: `(key, why)`.
    pub missing: Vec<(String, String)>,
    /// Measured now, absent from the baseline.
    pub new: Vec<String>,
    /// Present but not gated (host clock, or no figure in either): `(key, why)`.
    pub not_gated: Vec<(String, String)>,
    /// `(baseline device, this device)` when they differ.
    pub device_mismatch: Option<(String, String)>,
}

impl GateOutcome {
    /// The failing comparisons.
    pub fn failures(&self) -> impl Iterator<Item = &Comparison> {
        self.compared.iter().filter(|c| c.is_slower())
    }

    /// True when no case is slower than allowed.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// Human-readable summary: each failing case with both figures, then missing and new cases.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let fails: Vec<_> = self.failures().collect();
        let _ = writeln!(
            s,
            "gate: {} cases compared (tolerance {:.1}% + measured spread): {} slower, {} missing, {} new",
            self.compared.len(),
            self.tolerance * 100.0,
            fails.len(),
            self.missing.len(),
            self.new.len()
        );
        if let Some((b, o)) = &self.device_mismatch {
            let _ = writeln!(
                s,
                "gate: WARNING baseline was made on `{b}`, this run is on `{o}`"
            );
        }
        for c in &fails {
            let _ = writeln!(
                s,
                "gate: SLOWER {}: {:.2} us vs baseline {:.2} us ({:+.1}%; allowed up to {:.2} us, spreads {:.1}% / {:.1}%)",
                c.key,
                c.ours_us,
                c.base_us,
                (c.slowdown() - 1.0) * 100.0,
                c.limit_us,
                c.ours_spread * 100.0,
                c.base_spread * 100.0
            );
        }
        for (k, why) in &self.missing {
            let _ = writeln!(s, "gate: missing {k} ({why})");
        }
        for k in &self.new {
            let _ = writeln!(s, "gate: new {k} (no baseline)");
        }
        s
    }
}

/// Checks a tolerance.
pub fn check_tolerance(t: f64) -> Result<f64, BadTolerance> {
    if t.is_finite() && t >= 0.0 {
        Ok(t)
    } else {
        Err(BadTolerance(t))
    }
}

fn gated_figures(c: &Case) -> Option<(f64, f64)> {
    if c.clock != Clock::Gpu || !c.is_measured() {
        return None;
    }
    let m = c.median_us.filter(|m| m.is_finite() && *m > 0.0)?;
    Some((
        m,
        c.rel_spread
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(0.0),
    ))
}

fn why_no_figure(c: &Case) -> String {
    match &c.status {
        crate::report::CaseStatus::Measured if c.clock == Clock::Host => {
            "host-timed: not gated".into()
        }
        crate::report::CaseStatus::Measured => "no median".into(),
        crate::report::CaseStatus::NotAvailable { reason } => format!("not available: {reason}"),
        crate::report::CaseStatus::Failed { error } => {
            format!("failed: {}", error.lines().next().unwrap_or(""))
        }
    }
}

/// Compares `current` against `baseline` with `tolerance` (a fraction, e.g. 0.05).
pub fn compare(current: &Report, baseline: &Report, tolerance: f64) -> GateOutcome {
    let mut out = GateOutcome {
        tolerance,
        ..Default::default()
    };
    let (bn, cn) = (baseline.device.name(), current.device.name());
    if bn != cn {
        out.device_mismatch = Some((bn.to_string(), cn.to_string()));
    }
    let base: BTreeMap<String, &Case> = baseline.cases.iter().map(|c| (c.key(), c)).collect();
    let cur: BTreeMap<String, &Case> = current.cases.iter().map(|c| (c.key(), c)).collect();
    for c in &current.cases {
        let key = c.key();
        let ours = gated_figures(c);
        match (ours, base.get(&key)) {
            (Some((ours_us, ours_spread)), Some(b)) => match gated_figures(b) {
                Some((base_us, base_spread)) => {
                    let limit_us = base_us * (1.0 + tolerance + ours_spread.max(base_spread));
                    out.compared.push(Comparison {
                        key,
                        ours_us,
                        base_us,
                        ours_spread,
                        base_spread,
                        limit_us,
                    });
                }
                None => out.new.push(key),
            },
            (Some(_), None) => out.new.push(key),
            (None, Some(b)) if gated_figures(b).is_some() => {
                out.missing.push((key, why_no_figure(c)))
            }
            (None, _) => out.not_gated.push((key, why_no_figure(c))),
        }
    }
    for b in &baseline.cases {
        let key = b.key();
        if gated_figures(b).is_some() && !cur.contains_key(&key) {
            out.missing.push((key, "not in this run".into()));
        }
    }
    out
}

/// `NVIDIA H200` -> `NVIDIA_H200.json`: the device's baseline file name (ASCII letters, digits,
/// `-` kept; everything else becomes one `_`).
pub fn baseline_file_name(device_name: &str) -> String {
    let mut s = String::new();
    for ch in device_name.trim().chars() {
        if ch.is_ascii_alphanumeric() || ch == '-' {
            s.push(ch);
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    let s = s.trim_matches('_');
    format!("{}.json", if s.is_empty() { "unknown_device" } else { s })
}

/// Where `--update-baseline ARG` writes: `ARG/<device>.json` when ARG is a folder (exists as
/// one, or ends with `/`), else ARG itself.
pub fn baseline_path(arg: &Path, device_name: &str) -> PathBuf {
    let as_dir = arg.is_dir() || arg.as_os_str().to_string_lossy().ends_with('/');
    if as_dir {
        arg.join(baseline_file_name(device_name))
    } else {
        arg.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Case, Clock, DeviceSection, Report, ToolVersions};
    use crate::stats::Summary;
    use crate::suite_id::SuiteId;

    // Figures below are hand-made test inputs for the gate arithmetic, not measurements.
    fn case(name: &str, median: f64, spread: f64) -> Case {
        let s = Summary {
            median_us: median,
            p20_us: median,
            p80_us: median,
            rel_spread: spread,
            samples: 10,
        };
        Case::measured(SuiteId::Gemm, name, "s", Clock::Gpu, &s)
    }

    fn report(cases: Vec<Case>) -> Report {
        let mut r = Report::new(
            0,
            None,
            ToolVersions::default(),
            DeviceSection::absent("test"),
            vec![],
        );
        r.cases = cases;
        r
    }

    #[test]
    fn equal_runs_pass() {
        let r = report(vec![case("a", 100.0, 0.01), case("b", 50.0, 0.0)]);
        let g = compare(&r, &r, DEFAULT_TOLERANCE);
        assert!(g.passed());
        assert_eq!(g.compared.len(), 2);
        assert!(g.missing.is_empty() && g.new.is_empty());
    }

    #[test]
    fn threshold_is_tolerance_plus_the_larger_spread() {
        let base = report(vec![case("a", 100.0, 0.02)]);
        // limit = 100 * (1 + 0.05 + max(0.01, 0.02)) = 107
        let just_ok = report(vec![case("a", 106.9, 0.01)]);
        let too_slow = report(vec![case("a", 107.1, 0.01)]);
        assert!(compare(&just_ok, &base, 0.05).passed());
        let g = compare(&too_slow, &base, 0.05);
        assert!(!g.passed());
        let f: Vec<_> = g.failures().collect();
        assert_eq!(f.len(), 1);
        assert!((f[0].limit_us - 107.0).abs() < 1e-9);
        // Our own noise widens the limit too: spread 0.04 -> limit 109.
        let noisy = report(vec![case("a", 108.0, 0.04)]);
        assert!(compare(&noisy, &base, 0.05).passed());
        // A tighter tolerance fails the same figure.
        assert!(!compare(&just_ok, &base, 0.0).passed());
    }

    #[test]
    fn faster_always_passes() {
        let base = report(vec![case("a", 100.0, 0.0)]);
        let fast = report(vec![case("a", 10.0, 0.0)]);
        assert!(compare(&fast, &base, 0.0).passed());
    }

    #[test]
    fn failures_name_the_case_with_both_figures() {
        let base = report(vec![case("cublas bf16 4096x4096x4096", 200.0, 0.0)]);
        let cur = report(vec![case("cublas bf16 4096x4096x4096", 300.0, 0.0)]);
        let g = compare(&cur, &base, 0.05);
        let text = g.render();
        assert!(
            text.contains("SLOWER gemm/cublas bf16 4096x4096x4096"),
            "{text}"
        );
        assert!(
            text.contains("300.00 us") && text.contains("200.00 us"),
            "{text}"
        );
        assert!(text.contains("+50.0%"), "{text}");
    }

    #[test]
    fn missing_and_new_are_reported_not_failures() {
        let base = report(vec![
            case("old", 10.0, 0.0),
            case("kept", 10.0, 0.0),
            case("lost", 10.0, 0.0),
        ]);
        let mut cur = report(vec![case("kept", 10.0, 0.0), case("fresh", 10.0, 0.0)]);
        cur.cases.push(Case::not_available(
            SuiteId::Gemm,
            "lost",
            "s",
            "template removed",
        ));
        let g = compare(&cur, &base, 0.05);
        assert!(g.passed());
        let missing: Vec<_> = g.missing.iter().map(|(k, _)| k.as_str()).collect();
        assert!(
            missing.contains(&"gemm/old") && missing.contains(&"gemm/lost"),
            "{missing:?}"
        );
        assert!(g
            .missing
            .iter()
            .any(|(k, why)| k == "gemm/lost" && why.contains("template removed")));
        assert_eq!(g.new, vec!["gemm/fresh".to_string()]);
        let text = g.render();
        assert!(
            text.contains("missing gemm/old") && text.contains("new gemm/fresh"),
            "{text}"
        );
    }

    #[test]
    fn host_timed_cases_are_not_gated() {
        let s = Summary {
            median_us: 1000.0,
            p20_us: 1000.0,
            p80_us: 1000.0,
            rel_spread: 0.0,
            samples: 1,
        };
        let base = report(vec![Case::measured(
            SuiteId::Aot,
            "compile k sm_90a",
            "-",
            Clock::Host,
            &s,
        )]);
        let s2 = Summary {
            median_us: 5000.0,
            ..s
        };
        let cur = report(vec![Case::measured(
            SuiteId::Aot,
            "compile k sm_90a",
            "-",
            Clock::Host,
            &s2,
        )]);
        let g = compare(&cur, &base, 0.05);
        assert!(g.passed());
        assert!(g.compared.is_empty());
        assert_eq!(g.not_gated.len(), 1);
        assert!(
            g.missing.is_empty(),
            "a host case in the baseline is never 'missing'"
        );
    }

    #[test]
    fn device_mismatch_is_flagged() {
        let mut base = report(vec![case("a", 1.0, 0.0)]);
        let mut info_dev = crate::report::tests::example_info();
        info_dev.name = "NVIDIA H100".into();
        base.device = DeviceSection::present(info_dev);
        let cur = report(vec![case("a", 1.0, 0.0)]);
        let g = compare(&cur, &base, 0.05);
        assert_eq!(
            g.device_mismatch,
            Some(("NVIDIA H100".into(), "no GPU".into()))
        );
        assert!(g.render().contains("WARNING"));
    }

    #[test]
    fn baseline_names_derive_from_the_device() {
        assert_eq!(baseline_file_name("NVIDIA H200"), "NVIDIA_H200.json");
        assert_eq!(
            baseline_file_name("NVIDIA GeForce RTX 5090 (D)"),
            "NVIDIA_GeForce_RTX_5090_D.json"
        );
        assert_eq!(baseline_file_name("  "), "unknown_device.json");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            baseline_path(dir.path(), "NVIDIA H200"),
            dir.path().join("NVIDIA_H200.json")
        );
        assert_eq!(
            baseline_path(Path::new("bench/baselines/"), "NVIDIA H200"),
            Path::new("bench/baselines/NVIDIA_H200.json")
        );
        assert_eq!(
            baseline_path(Path::new("x/mine.json"), "NVIDIA H200"),
            Path::new("x/mine.json")
        );
    }

    #[test]
    fn tolerance_is_checked() {
        assert_eq!(check_tolerance(0.05), Ok(0.05));
        assert!(check_tolerance(-0.1).is_err());
        assert!(check_tolerance(f64::NAN).is_err());
    }
}
