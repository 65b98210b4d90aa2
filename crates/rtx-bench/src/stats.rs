//! Order statistics of repeated timings: median, 20th/80th percentiles and relative spread.

use serde::{Deserialize, Serialize};

/// Summary of repeated measurements of one case, all in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Median.
    pub median_us: f64,
    /// 20th percentile.
    pub p20_us: f64,
    /// 80th percentile.
    pub p80_us: f64,
    /// `(p80 - p20) / median`: the noise figure the gate allows for.
    pub rel_spread: f64,
    /// Number of timed samples behind the figures.
    pub samples: usize,
}

/// Why samples could not be summarized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatsError {
    /// No samples at all.
    #[error("no samples to summarize")]
    Empty,
    /// A sample was NaN, infinite or negative.
    #[error("sample {index} is not a finite non-negative time")]
    BadSample {
        /// Index of the offending sample.
        index: usize,
    },
}

/// Linear-interpolated percentile `q` in `[0, 1]` of already sorted values.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let q = q.clamp(0.0, 1.0);
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl Summary {
    /// Summarizes samples (microseconds); rejects an empty list and non-finite or negative values.
    pub fn from_samples(samples_us: &[f64]) -> Result<Summary, StatsError> {
        if samples_us.is_empty() {
            return Err(StatsError::Empty);
        }
        if let Some(index) = samples_us.iter().position(|s| !s.is_finite() || *s < 0.0) {
            return Err(StatsError::BadSample { index });
        }
        let mut v = samples_us.to_vec();
        v.sort_by(f64::total_cmp);
        let median_us = percentile_sorted(&v, 0.5);
        let p20_us = percentile_sorted(&v, 0.2);
        let p80_us = percentile_sorted(&v, 0.8);
        let rel_spread = if median_us > 0.0 {
            (p80_us - p20_us) / median_us
        } else {
            0.0
        };
        Ok(Summary {
            median_us,
            p20_us,
            p80_us,
            rel_spread,
            samples: v.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        let s = Summary::from_samples(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.median_us, 3.0);
        assert!((s.p20_us - 1.8).abs() < 1e-12);
        assert!((s.p80_us - 4.2).abs() < 1e-12);
        assert!((s.rel_spread - 0.8).abs() < 1e-12);
        assert_eq!(s.samples, 5);
    }

    #[test]
    fn rejects_empty_and_bad_samples() {
        assert_eq!(Summary::from_samples(&[]), Err(StatsError::Empty));
        assert_eq!(
            Summary::from_samples(&[1.0, f64::NAN]),
            Err(StatsError::BadSample { index: 1 })
        );
        assert_eq!(
            Summary::from_samples(&[-1.0]),
            Err(StatsError::BadSample { index: 0 })
        );
    }

    proptest! {
        #[test]
        fn percentiles_are_ordered(v in proptest::collection::vec(0.0f64..1e6, 1..64)) {
            let s = Summary::from_samples(&v).unwrap();
            let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = v.iter().cloned().fold(0.0, f64::max);
            prop_assert!(min <= s.p20_us && s.p20_us <= s.median_us);
            prop_assert!(s.median_us <= s.p80_us && s.p80_us <= max);
            prop_assert!(s.rel_spread >= 0.0);
        }
    }
}
