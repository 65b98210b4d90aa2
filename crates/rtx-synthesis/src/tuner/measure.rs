//! The measurement protocol, independent of any backend: warm up, repeat until the relative
//! spread of the samples is small enough (or a cap is hit), and summarise as [`TimingStats`].
//!
//! A backend supplies one closure that runs a single timed repetition (it flushes L2 or picks
//! the next rotated input set itself, untimed, as [`MeasureProtocol::flush_l2`] and
//! [`MeasureProtocol::rotate_inputs`] ask) and returns its time in microseconds;
//! [`run_protocol`] decides how many repetitions to run. A GPU backend supplies instead a
//! closure that enqueues a batch of repetitions, each between its own pair of events, and waits
//! once ([`run_protocol_batched`], batches of [`MeasureProtocol::pipeline`]), so the GPU does not
//! idle between samples waiting for the host.
//!
//! Differences smaller than the measured noise are ties ([`is_tie`]); the tuner breaks them
//! toward the simpler config.

use super::backend::CandidateError;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Smallest relative difference that is always a tie, whatever the measured spread (0.5%).
pub const TIE_FLOOR_REL: f64 = 0.005;
/// Largest relative difference a noisy measurement may claim as a tie (3%), so one very noisy
/// candidate cannot tie with everything.
pub const TIE_CAP_REL: f64 = 0.03;

/// How long to warm a kernel up before timing it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Warmup {
    /// Run exactly this many untimed repetitions.
    Iters(u32),
    /// Run untimed repetitions until this much host wall time has passed (at least one).
    Millis(f64),
}

/// How one candidate is timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureProtocol {
    /// Untimed warm-up before the first sample.
    pub warmup: Warmup,
    /// Fewest timed samples, whatever the spread.
    pub min_reps: u32,
    /// Most timed samples, whatever the spread.
    pub max_reps: u32,
    /// Stop once `(p80 - p20) / median` is below this (0.02 = 2%).
    pub target_rel_spread: f64,
    /// Host wall-clock cap on the timed phase, in ms; sampling stops after it once `min_reps`
    /// samples exist (so a slow kernel does not eat the tuning budget).
    pub max_time_ms: f64,
    /// Overwrite an L2-sized scratch buffer before every sample (untimed), so each sample reads
    /// its inputs from DRAM.
    pub flush_l2: bool,
    /// Size of the flush buffer in bytes (Triton uses 256 MiB; must exceed the L2).
    pub flush_bytes: usize,
    /// Cycle through this many copies of the inputs instead of (or as well as) flushing;
    /// 0 or 1 means one input set.
    pub rotate_inputs: usize,
    /// Timed samples enqueued before the host waits for them (1, the default, waits after every
    /// sample; 0 acts as 1). Enqueuing 10 at a time widened the spread of 6-9 us GEMMs on the
    /// H200 (call T), so more is an experiment, not a default. Protocols recorded before this
    /// field existed read as 1, how they ran.
    #[serde(default = "one_sample")]
    pub pipeline: u32,
}

fn one_sample() -> u32 {
    1
}

impl Default for MeasureProtocol {
    fn default() -> Self {
        MeasureProtocol {
            warmup: Warmup::Millis(25.0),
            min_reps: 10,
            max_reps: 200,
            target_rel_spread: 0.02,
            max_time_ms: 500.0,
            flush_l2: true,
            flush_bytes: 256 << 20,
            rotate_inputs: 0,
            pipeline: 1,
        }
    }
}

/// A protocol that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid measurement protocol: {field}: {reason}")]
pub struct InvalidProtocol {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl MeasureProtocol {
    /// Checks that the fields are consistent (at least one sample, `min_reps <= max_reps`, ...).
    pub fn validate(&self) -> Result<(), InvalidProtocol> {
        let bad = |field, reason: String| Err(InvalidProtocol { field, reason });
        if self.min_reps == 0 {
            return bad("min_reps", "must be >= 1".into());
        }
        if self.max_reps < self.min_reps {
            return bad(
                "max_reps",
                format!("{} < min_reps {}", self.max_reps, self.min_reps),
            );
        }
        if !(self.target_rel_spread.is_finite() && self.target_rel_spread > 0.0) {
            return bad(
                "target_rel_spread",
                format!("{} (must be finite and > 0)", self.target_rel_spread),
            );
        }
        if !(self.max_time_ms.is_finite() && self.max_time_ms > 0.0) {
            return bad(
                "max_time_ms",
                format!("{} (must be finite and > 0)", self.max_time_ms),
            );
        }
        if let Warmup::Millis(ms) = self.warmup {
            if !(ms.is_finite() && ms >= 0.0) {
                return bad("warmup", format!("{ms} ms (must be finite and >= 0)"));
            }
        }
        if self.flush_l2 && self.flush_bytes == 0 {
            return bad("flush_bytes", "0 with flush_l2 set".into());
        }
        Ok(())
    }

    /// The input set (0-based) repetition `rep` should use under [`MeasureProtocol::rotate_inputs`].
    pub fn input_set(&self, rep: u32) -> usize {
        if self.rotate_inputs <= 1 {
            0
        } else {
            rep as usize % self.rotate_inputs
        }
    }
}

/// Summary of one candidate's timed samples (all times in microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingStats {
    /// Median sample.
    pub median_us: f64,
    /// 20th percentile.
    pub p20_us: f64,
    /// 80th percentile.
    pub p80_us: f64,
    /// Fastest sample.
    pub min_us: f64,
    /// `(p80 - p20) / median`.
    pub rel_spread: f64,
    /// Every timed sample, in the order taken.
    pub samples: Vec<f64>,
}

/// Linear-interpolated quantile of sorted data (`q` in 0..=1), as numpy's default.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            let frac = pos - lo as f64;
            sorted[lo] + (sorted[hi] - sorted[lo]) * frac
        }
    }
}

impl TimingStats {
    /// Summarises samples; `None` if there are none or any is negative, NaN or infinite.
    pub fn from_samples(samples: Vec<f64>) -> Option<TimingStats> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let median_us = quantile_sorted(&sorted, 0.5);
        let p20_us = quantile_sorted(&sorted, 0.2);
        let p80_us = quantile_sorted(&sorted, 0.8);
        let rel_spread = if median_us > 0.0 {
            (p80_us - p20_us) / median_us
        } else {
            0.0
        };
        Some(TimingStats {
            median_us,
            p20_us,
            p80_us,
            min_us: sorted[0],
            rel_spread,
            samples,
        })
    }

    /// Stats over the samples of both measurements together.
    pub fn pooled(&self, other: &TimingStats) -> TimingStats {
        let mut all = self.samples.clone();
        all.extend_from_slice(&other.samples);
        // Both inputs passed `from_samples`, so the union does too.
        TimingStats::from_samples(all).unwrap_or_else(|| self.clone())
    }
}

/// The relative difference under which `a` and `b` tie ([`is_tie`]): the larger relative spread
/// of the two, clamped to [`TIE_FLOOR_REL`]..=[`TIE_CAP_REL`].
pub fn tie_tolerance(a: &TimingStats, b: &TimingStats) -> f64 {
    a.rel_spread
        .max(b.rel_spread)
        .clamp(TIE_FLOOR_REL, TIE_CAP_REL)
}

/// True when `a` and `b` differ by less than their measured noise: [`tie_tolerance`] applied
/// to the smaller median.
pub fn is_tie(a: &TimingStats, b: &TimingStats) -> bool {
    let lo = a.median_us.min(b.median_us);
    (a.median_us - b.median_us).abs() <= tie_tolerance(a, b) * lo
}

/// Runs `protocol` over `sample`, which performs one repetition (`rep` counts from 0 over the
/// warm-up, then again from 0 over the timed samples) and returns its time in microseconds.
///
/// Sampling stops at `max_reps`, or once `min_reps` samples exist and either the relative
/// spread is below `target_rel_spread` or `max_time_ms` of timed phase has passed.
pub fn run_protocol(
    protocol: &MeasureProtocol,
    mut sample: impl FnMut(u32) -> Result<f64, CandidateError>,
) -> Result<TimingStats, CandidateError> {
    run_batches(protocol, 1, |reps| reps.map(&mut sample).collect())
}

/// [`run_protocol`] for a backend that times a batch of repetitions at once: `batch(reps)`
/// enqueues every repetition of `reps` and returns their times in microseconds, in order.
/// Warm-up repetitions come one per batch (so a hang is caught on its first launch); timed ones
/// in batches of [`MeasureProtocol::pipeline`], the stop rules checked after each batch.
pub fn run_protocol_batched(
    protocol: &MeasureProtocol,
    batch: impl FnMut(std::ops::Range<u32>) -> Result<Vec<f64>, CandidateError>,
) -> Result<TimingStats, CandidateError> {
    run_batches(protocol, protocol.pipeline.max(1), batch)
}

/// The loop behind both: timed batches of `step` repetitions.
fn run_batches(
    protocol: &MeasureProtocol,
    step: u32,
    mut batch: impl FnMut(std::ops::Range<u32>) -> Result<Vec<f64>, CandidateError>,
) -> Result<TimingStats, CandidateError> {
    protocol
        .validate()
        .map_err(|e| CandidateError::Unmeasurable(e.to_string()))?;
    match protocol.warmup {
        Warmup::Iters(n) => {
            for rep in 0..n {
                batch(rep..rep + 1)?;
            }
        }
        Warmup::Millis(ms) => {
            let start = Instant::now();
            let mut rep = 0u32;
            loop {
                batch(rep..rep.saturating_add(1))?;
                rep = rep.saturating_add(1);
                if start.elapsed().as_secs_f64() * 1e3 >= ms {
                    break;
                }
            }
        }
    }
    let start = Instant::now();
    let mut samples: Vec<f64> = Vec::with_capacity(protocol.min_reps as usize);
    while (samples.len() as u32) < protocol.max_reps {
        let first = samples.len() as u32;
        let reps = first..first.saturating_add(step).min(protocol.max_reps);
        let want = reps.len();
        let times = batch(reps)?;
        if times.len() != want {
            return Err(CandidateError::Unmeasurable(format!(
                "a batch of {want} samples returned {} times",
                times.len()
            )));
        }
        for (i, t) in times.into_iter().enumerate() {
            if !t.is_finite() || t < 0.0 {
                return Err(CandidateError::Unmeasurable(format!(
                    "sample {} is {t} us",
                    first as usize + i
                )));
            }
            samples.push(t);
        }
        if samples.len() >= protocol.min_reps as usize {
            if start.elapsed().as_secs_f64() * 1e3 >= protocol.max_time_ms {
                break;
            }
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let med = quantile_sorted(&sorted, 0.5);
            let spread = quantile_sorted(&sorted, 0.8) - quantile_sorted(&sorted, 0.2);
            if med <= 0.0 || spread / med < protocol.target_rel_spread {
                break;
            }
        }
    }
    TimingStats::from_samples(samples)
        .ok_or_else(|| CandidateError::Unmeasurable("no samples".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stats(median: f64, spread: f64) -> TimingStats {
        TimingStats {
            median_us: median,
            p20_us: median * (1.0 - spread / 2.0),
            p80_us: median * (1.0 + spread / 2.0),
            min_us: median * 0.9,
            rel_spread: spread,
            samples: vec![median],
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_sorted(&xs, 0.5), 3.0);
        assert!((quantile_sorted(&xs, 0.2) - 1.8).abs() < 1e-12);
        assert!((quantile_sorted(&xs, 0.8) - 4.2).abs() < 1e-12);
        assert_eq!(quantile_sorted(&[7.0], 0.8), 7.0);
        assert!(quantile_sorted(&[], 0.5).is_nan());
    }

    #[test]
    fn stats_reject_bad_samples() {
        assert!(TimingStats::from_samples(vec![]).is_none());
        assert!(TimingStats::from_samples(vec![1.0, f64::NAN]).is_none());
        assert!(TimingStats::from_samples(vec![1.0, -2.0]).is_none());
        let s = TimingStats::from_samples(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min_us, s.median_us), (1.0, 2.0));
        assert_eq!(s.samples, vec![3.0, 1.0, 2.0], "samples keep their order");
    }

    #[test]
    fn batched_protocol_warms_up_singly_then_times_in_pipeline_batches() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(2),
            min_reps: 5,
            max_reps: 23,
            pipeline: 10,
            ..Default::default()
        };
        let mut sizes = Vec::new();
        let mut next = 0.0;
        // Every sample differs by 50%, so the spread never settles and the cap decides.
        let s = run_protocol_batched(&p, |reps| {
            sizes.push(reps.len());
            Ok(reps
                .map(|_| {
                    next += 1.0;
                    10.0 * (1.0 + (next % 2.0) * 0.5)
                })
                .collect())
        })
        .unwrap();
        assert_eq!(
            sizes,
            vec![1, 1, 10, 10, 3],
            "two single warm-ups, then batches up to max_reps"
        );
        assert_eq!(s.samples.len(), 23);
    }

    #[test]
    fn batched_protocol_rejects_a_short_batch() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(0),
            pipeline: 4,
            ..Default::default()
        };
        let e = run_protocol_batched(&p, |reps| Ok(vec![1.0; reps.len() - 1])).unwrap_err();
        assert!(
            matches!(e, CandidateError::Unmeasurable(ref m) if m.contains("returned 3 times")),
            "{e:?}"
        );
    }

    #[test]
    fn protocols_recorded_without_a_pipeline_read_as_one_sample_per_wait() {
        let mut v = serde_json::to_value(MeasureProtocol::default()).unwrap();
        v.as_object_mut().unwrap().remove("pipeline");
        let p: MeasureProtocol = serde_json::from_value(v).unwrap();
        assert_eq!(p.pipeline, 1);
    }

    #[test]
    fn steady_samples_stop_at_min_reps() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(3),
            min_reps: 5,
            max_reps: 100,
            ..Default::default()
        };
        let mut calls = 0;
        let s = run_protocol(&p, |_| {
            calls += 1;
            Ok(10.0)
        })
        .unwrap();
        assert_eq!(s.samples.len(), 5);
        assert_eq!(calls, 8, "3 warm-up + 5 timed");
        assert_eq!(s.rel_spread, 0.0);
    }

    #[test]
    fn noisy_samples_run_to_the_cap() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(0),
            min_reps: 5,
            max_reps: 40,
            max_time_ms: 1e9,
            ..Default::default()
        };
        // Alternates 10 and 20: the spread never falls under 2%.
        let s = run_protocol(&p, |rep| Ok(if rep % 2 == 0 { 10.0 } else { 20.0 })).unwrap();
        assert_eq!(s.samples.len(), 40);
        assert!(s.rel_spread > 0.5);
    }

    #[test]
    fn noise_that_settles_stops_early() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(0),
            min_reps: 5,
            max_reps: 1000,
            max_time_ms: 1e9,
            ..Default::default()
        };
        // Three outliers, then a steady value: the 20..80% band closes once they are a minority.
        let s = run_protocol(&p, |rep| Ok(if rep < 3 { 50.0 } else { 10.0 })).unwrap();
        assert!(
            s.samples.len() < 1000 && s.samples.len() >= 5,
            "{}",
            s.samples.len()
        );
        assert!(s.rel_spread < 0.02);
        assert_eq!(s.median_us, 10.0);
    }

    #[test]
    fn errors_and_bad_samples_abort_measurement() {
        let p = MeasureProtocol {
            warmup: Warmup::Iters(1),
            ..Default::default()
        };
        let e =
            run_protocol(&p, |_| Err(CandidateError::Fault("illegal address".into()))).unwrap_err();
        assert_eq!(e, CandidateError::Fault("illegal address".into()));
        let e = run_protocol(&p, |rep| Ok(if rep == 0 { 1.0 } else { f64::NAN })).unwrap_err();
        assert!(matches!(e, CandidateError::Unmeasurable(_)), "{e:?}");
    }

    #[test]
    fn invalid_protocols_are_named() {
        let p = MeasureProtocol {
            min_reps: 5,
            max_reps: 2,
            ..Default::default()
        };
        assert_eq!(p.validate().unwrap_err().field, "max_reps");
        let p = MeasureProtocol {
            target_rel_spread: 0.0,
            ..Default::default()
        };
        assert_eq!(p.validate().unwrap_err().field, "target_rel_spread");
        assert!(MeasureProtocol::default().validate().is_ok());
    }

    #[test]
    fn rotation_cycles_input_sets() {
        let p = MeasureProtocol {
            rotate_inputs: 3,
            ..Default::default()
        };
        assert_eq!(
            (0..6).map(|r| p.input_set(r)).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2]
        );
        assert_eq!(MeasureProtocol::default().input_set(5), 0);
    }

    #[test]
    fn ties_follow_the_measured_noise() {
        assert!(
            is_tie(&stats(100.0, 0.02), &stats(101.5, 0.02)),
            "1.5% apart, 2% noise"
        );
        assert!(
            !is_tie(&stats(100.0, 0.02), &stats(103.0, 0.02)),
            "3% apart, 2% noise"
        );
        assert!(
            is_tie(&stats(100.0, 0.0), &stats(100.4, 0.0)),
            "inside the 0.5% floor"
        );
        assert!(!is_tie(&stats(100.0, 0.0), &stats(101.0, 0.0)));
        // A very noisy candidate cannot claim a tie 10% away.
        assert!(!is_tie(&stats(100.0, 0.5), &stats(110.0, 0.01)));
    }

    proptest! {
        #[test]
        fn stats_are_ordered(samples in proptest::collection::vec(0.0f64..1e6, 1..200)) {
            let s = TimingStats::from_samples(samples.clone()).unwrap();
            prop_assert!(s.min_us <= s.p20_us && s.p20_us <= s.median_us);
            prop_assert!(s.median_us <= s.p80_us);
            prop_assert!(s.rel_spread >= 0.0);
            prop_assert_eq!(s.samples.len(), samples.len());
        }

        #[test]
        fn ties_are_symmetric(a in 1.0f64..1e4, b in 1.0f64..1e4, sa in 0.0f64..0.1, sb in 0.0f64..0.1) {
            prop_assert_eq!(is_tie(&stats(a, sa), &stats(b, sb)), is_tie(&stats(b, sb), &stats(a, sa)));
            prop_assert!(is_tie(&stats(a, sa), &stats(a, sb)));
        }

        #[test]
        fn stats_round_trip_through_json(quarters in proptest::collection::vec(0u32..4_000_000, 1..50)) {
            // Quarter-microsecond samples print and parse exactly.
            let s = TimingStats::from_samples(quarters.iter().map(|&q| q as f64 / 4.0).collect()).unwrap();
            let back: TimingStats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
            prop_assert_eq!(&back.samples, &s.samples);
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
            prop_assert!(close(back.median_us, s.median_us) && close(back.p20_us, s.p20_us));
            prop_assert!(close(back.p80_us, s.p80_us) && close(back.rel_spread, s.rel_spread));
        }
    }
}
