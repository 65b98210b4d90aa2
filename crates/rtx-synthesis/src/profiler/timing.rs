//! Event timing of repeated launches on one stream: warm-up, back-to-back timed runs, median.

use rtx_runtime::{Device, Event, RuntimeError, Stream};
use serde::{Deserialize, Serialize};

/// Summary of the timed runs of one measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median run, milliseconds.
    pub median_ms: f64,
    /// Fastest run, milliseconds.
    pub min_ms: f64,
    /// Slowest run, milliseconds.
    pub max_ms: f64,
    /// Number of timed runs.
    pub runs: usize,
}

impl Timing {
    /// The summary of `samples_ms`; `None` if there are none or one is not a finite, positive
    /// number.
    pub fn from_samples(samples_ms: &[f64]) -> Option<Timing> {
        if samples_ms.is_empty() || samples_ms.iter().any(|s| !s.is_finite() || *s <= 0.0) {
            return None;
        }
        let mut s = samples_ms.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median_ms = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Timing {
            median_ms,
            min_ms: s[0],
            max_ms: s[n - 1],
            runs: n,
        })
    }
}

/// Runs `launch` `warmup` times, then `runs` times with an event recorded between consecutive
/// runs, all queued back to back on `stream` (the warm-up keeps the GPU busy while the timed
/// launches are queued), and returns each run's milliseconds in order.
pub fn time_runs(
    device: &Device,
    stream: &Stream,
    warmup: usize,
    runs: usize,
    mut launch: impl FnMut() -> Result<(), RuntimeError>,
) -> Result<Vec<f64>, RuntimeError> {
    for _ in 0..warmup {
        launch()?;
    }
    let events = (0..=runs)
        .map(|_| Event::new(device))
        .collect::<Result<Vec<_>, _>>()?;
    events[0].record(stream)?;
    for e in &events[1..] {
        launch()?;
        e.record(stream)?;
    }
    events
        .windows(2)
        .map(|w| w[0].elapsed_ms(&w[1]).map(f64::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let t = Timing::from_samples(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (t.median_ms, t.min_ms, t.max_ms, t.runs),
            (2.0, 1.0, 3.0, 3)
        );
        let t = Timing::from_samples(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(t.median_ms, 2.5);
        assert_eq!(Timing::from_samples(&[]), None);
        assert_eq!(Timing::from_samples(&[1.0, f64::NAN]), None);
        assert_eq!(Timing::from_samples(&[1.0, 0.0]), None);
    }
}
