//! GPU timing harness: CUDA events on the suite's owned stream.
//!
//! Two modes:
//!
//! - [`Timer::time`] (default): warm-up runs, then repeated single runs, each between its own
//!   start and end event. Before every timed run the L2 cache is flushed by a memset of a scratch
//!   buffer of at least [`MIN_FLUSH_BYTES`] (issued on the same stream *before* the start event,
//!   so it is not counted), or, when the closure rotates over several input sets by the sample
//!   index it is given, the flush can be turned off ([`TimingConfig::flush_l2`]). The flush
//!   only evicts lines of normal priority: a kernel whose loads carry an `L2::evict_last` policy
//!   keeps its inputs through it (H100 call BF, session 14: 4-8% shorter for that reason alone,
//!   and the baseline sharing those inputs got faster too), so no template emits one (a wgmma
//!   test guards it). The host
//!   waits after every sample by default; [`TimingConfig::pipeline`] > 1 enqueues that many
//!   samples (flush, start, run, end) before one wait, as Triton's `do_bench` enqueues all of
//!   its samples. Measured on the H200 (call T, 512^3 and 1024^3 bf16/f16 GEMMs, one process):
//!   enqueuing 10 at a time widened the spread, rtx 1.6-3.7% -> 6.2-11.1% and cuBLAS
//!   9.7-14.1% -> 14.1-20.1%, so it is an A/B option (`--timing-pipeline`), not the default.
//!   Samples are added until the relative spread `(p80 - p20) / median` is below
//!   [`TimingConfig::target_spread`] (checked from [`TimingConfig::min_samples`] on, after each
//!   enqueued batch) or a cap (samples or wall time) is reached.
//! - [`Timer::time_paired`]: two closures timed alternately (A B, B A, A B, ...), each sample
//!   after its own flush, until both sample sets meet the stop rule: a row and its baseline see
//!   the same GPU clocks and temperature and the same number of samples. Timed one after the
//!   other, a row whose first samples were noisy ran to the 3 s cap and heated the GPU (H200
//!   call T: tf32 8192^3 3.26 ms after 150 samples, against 2.80 ms on a cool GPU in call X,
//!   while cuBLAS before it had stopped at 10 samples).
//! - [`Timer::time_batched`] for tiny kernels: `count` back-to-back launches between two events,
//!   the elapsed time divided by `count` is one sample. No CUDA graph and no flush between the
//!   launches: it measures steady-state throughput with a warm L2 and launch overhead amortized
//!   across the batch, which is what a stream of small kernels in a model sees.
//!
//! Returned figures are [`Summary`] (median, p20, p80, rel_spread, samples), microseconds.

use crate::gpu::Gpu;
use crate::stats::{StatsError, Summary};
use rtx_runtime::{DeviceBuffer, Event, EventPairs, RuntimeError, Stream};
use std::time::{Duration, Instant};

/// The smallest L2 flush buffer (256 MiB; H200's L2 is 50 MiB).
pub const MIN_FLUSH_BYTES: usize = 256 << 20;

/// How long and how precisely to time one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingConfig {
    /// Untimed runs first (clocks up, caches and lazy init out of the way).
    pub warmup: usize,
    /// Samples before the spread is first checked.
    pub min_samples: usize,
    /// Hard cap on samples.
    pub max_samples: usize,
    /// Stop once `rel_spread` is below this (0.02 = 2%).
    pub target_spread: f64,
    /// Stop adding samples after this much wall time (the minimum is still taken).
    pub max_wall: Duration,
    /// Flush L2 before each timed run.
    pub flush_l2: bool,
    /// Samples enqueued before the host waits for them (1 waits after every sample).
    pub pipeline: usize,
    /// Time each row's cuBLAS baseline alternately with the row ([`Timer::time_paired`]) rather
    /// than take the separately timed cuBLAS row.
    pub interleave_baseline: bool,
}

impl TimingConfig {
    /// The default for full runs: 3 warm-ups, 10..200 samples, 2% spread, 3 s per case, a host
    /// wait after every sample.
    pub fn full() -> Self {
        TimingConfig {
            warmup: 3,
            min_samples: 10,
            max_samples: 200,
            target_spread: 0.02,
            max_wall: Duration::from_secs(3),
            flush_l2: true,
            pipeline: 1,
            interleave_baseline: true,
        }
    }

    /// `--quick`: 2 warm-ups, 5..30 samples, 0.5 s per case.
    pub fn quick() -> Self {
        TimingConfig {
            warmup: 2,
            min_samples: 5,
            max_samples: 30,
            target_spread: 0.02,
            max_wall: Duration::from_millis(500),
            flush_l2: true,
            pipeline: 1,
            interleave_baseline: true,
        }
    }

    /// Decides whether to stop after `samples` (pure; the loop's policy).
    pub fn should_stop(&self, samples: &[f64], elapsed: Duration) -> bool {
        if samples.len() >= self.max_samples {
            return true;
        }
        if samples.len() < self.min_samples {
            return false;
        }
        if elapsed >= self.max_wall {
            return true;
        }
        Summary::from_samples(samples).is_ok_and(|s| s.rel_spread < self.target_spread)
    }

    /// How many samples to enqueue next when `taken` exist: [`TimingConfig::pipeline`] (at
    /// least 1), never past [`TimingConfig::max_samples`].
    pub fn next_batch(&self, taken: usize) -> usize {
        self.pipeline
            .max(1)
            .min(self.max_samples.saturating_sub(taken))
            .max(1)
    }
}

/// A timing failure.
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    /// The runtime failed (launch, event, memset).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The samples were unusable.
    #[error("timing produced unusable samples: {0}")]
    Stats(#[from] StatsError),
    /// `time_batched` with a count of 0.
    #[error("batched timing needs count >= 1")]
    ZeroCount,
}

/// Events plus the L2 flush buffer, reused across cases.
pub struct Timer<'g> {
    gpu: &'g Gpu,
    start: Event,
    end: Event,
    pairs: EventPairs,
    scratch: Option<DeviceBuffer>,
}

impl<'g> Timer<'g> {
    /// Creates the events and a flush buffer of `max(MIN_FLUSH_BYTES, 2 * L2)`.
    pub fn new(gpu: &'g Gpu) -> Result<Timer<'g>, RuntimeError> {
        let flush = MIN_FLUSH_BYTES.max(2 * gpu.device.info().l2_bytes as usize);
        Ok(Timer {
            gpu,
            start: Event::new(&gpu.device)?,
            end: Event::new(&gpu.device)?,
            pairs: EventPairs::new(),
            scratch: Some(gpu.device.alloc(flush, &gpu.stream)?),
        })
    }

    /// The stream timed on.
    pub fn stream(&self) -> &Stream {
        &self.gpu.stream
    }

    fn flush(&mut self, byte: u8) -> Result<(), RuntimeError> {
        if let Some(s) = self.scratch.as_mut() {
            s.fill_u8(byte, &self.gpu.stream)?;
        }
        Ok(())
    }

    /// Times `run(stream, sample_index)` one run per sample (see the module docs).
    pub fn time<F>(&mut self, cfg: &TimingConfig, mut run: F) -> Result<Summary, TimingError>
    where
        F: FnMut(&Stream, usize) -> Result<(), RuntimeError>,
    {
        let stream = &self.gpu.stream;
        for i in 0..cfg.warmup {
            run(stream, i)?;
        }
        stream.synchronize()?;
        let started = Instant::now();
        let mut samples = Vec::with_capacity(cfg.min_samples);
        while !cfg.should_stop(&samples, started.elapsed()) {
            let n = cfg.next_batch(samples.len());
            self.pairs.ensure(&self.gpu.device, n)?;
            for slot in 0..n {
                let index = samples.len() + slot;
                if cfg.flush_l2 {
                    self.flush((index % 251) as u8)?;
                }
                let stream = &self.gpu.stream;
                let (start, end) = self.pairs.pair(slot).expect("ensured above");
                start.record(stream)?;
                run(stream, index)?;
                end.record(stream)?;
            }
            samples.extend(self.pairs.elapsed_us(n)?);
        }
        Ok(Summary::from_samples(&samples)?)
    }

    /// Times `a` and `b` alternately, one run each per round (the order flips every round), each
    /// after its own L2 flush; stops once both sample sets meet [`TimingConfig::should_stop`]
    /// (the caps apply to the round count and the shared wall clock). Returns `(a, b)`.
    pub fn time_paired<F, G>(
        &mut self,
        cfg: &TimingConfig,
        mut a: F,
        mut b: G,
    ) -> Result<(Summary, Summary), TimingError>
    where
        F: FnMut(&Stream, usize) -> Result<(), RuntimeError>,
        G: FnMut(&Stream, usize) -> Result<(), RuntimeError>,
    {
        let stream = &self.gpu.stream;
        for i in 0..cfg.warmup {
            a(stream, i)?;
            b(stream, i)?;
        }
        stream.synchronize()?;
        let started = Instant::now();
        let (mut sa, mut sb) = (
            Vec::with_capacity(cfg.min_samples),
            Vec::with_capacity(cfg.min_samples),
        );
        while !(cfg.should_stop(&sa, started.elapsed()) && cfg.should_stop(&sb, started.elapsed()))
        {
            let round = sa.len();
            for first in [round % 2 == 0, round % 2 != 0] {
                if cfg.flush_l2 {
                    self.flush((round % 251) as u8)?;
                }
                let stream = &self.gpu.stream;
                self.start.record(stream)?;
                if first {
                    a(stream, round)?;
                } else {
                    b(stream, round)?;
                }
                self.end.record(stream)?;
                let us = self.start.elapsed_ms(&self.end)? as f64 * 1e3;
                if first {
                    sa.push(us);
                } else {
                    sb.push(us);
                }
            }
        }
        Ok((Summary::from_samples(&sa)?, Summary::from_samples(&sb)?))
    }

    /// Times `count` back-to-back runs between two events per sample; each sample is the
    /// elapsed time divided by `count` (see the module docs; no flush between runs).
    pub fn time_batched<F>(
        &mut self,
        cfg: &TimingConfig,
        count: usize,
        mut run: F,
    ) -> Result<Summary, TimingError>
    where
        F: FnMut(&Stream, usize) -> Result<(), RuntimeError>,
    {
        if count == 0 {
            return Err(TimingError::ZeroCount);
        }
        let stream = &self.gpu.stream;
        for i in 0..cfg.warmup.max(1) * count.min(16) {
            run(stream, i)?;
        }
        stream.synchronize()?;
        let started = Instant::now();
        let mut samples = Vec::with_capacity(cfg.min_samples);
        while !cfg.should_stop(&samples, started.elapsed()) {
            self.start.record(stream)?;
            for i in 0..count {
                run(stream, i)?;
            }
            self.end.record(stream)?;
            self.end.synchronize()?;
            samples.push(self.start.elapsed_ms(&self.end)? as f64 * 1e3 / count as f64);
        }
        Ok(Summary::from_samples(&samples)?)
    }

    /// How many launches a batched sample of a kernel that takes `single_us` needs to last
    /// about `target_us` (at least 1, at most 10 000).
    pub fn batch_count(single_us: f64, target_us: f64) -> usize {
        if !(single_us.is_finite() && single_us > 0.0) {
            return 1;
        }
        ((target_us / single_us).ceil() as usize).clamp(1, 10_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_on_spread_or_caps() {
        let cfg = TimingConfig {
            min_samples: 3,
            max_samples: 6,
            target_spread: 0.02,
            warmup: 0,
            max_wall: Duration::from_secs(10),
            flush_l2: false,
            pipeline: 1,
            interleave_baseline: true,
        };
        assert!(
            !cfg.should_stop(&[1.0, 1.0], Duration::ZERO),
            "below min_samples"
        );
        assert!(
            cfg.should_stop(&[1.0, 1.0, 1.0], Duration::ZERO),
            "zero spread"
        );
        assert!(
            !cfg.should_stop(&[1.0, 2.0, 3.0], Duration::ZERO),
            "spread too large"
        );
        assert!(
            cfg.should_stop(&[1.0, 2.0, 3.0], Duration::from_secs(11)),
            "wall cap"
        );
        assert!(
            cfg.should_stop(&[1.0, 2.0, 3.0, 1.0, 2.0, 3.0], Duration::ZERO),
            "sample cap"
        );
    }

    #[test]
    fn enqueued_batches_stop_at_the_sample_cap() {
        let cfg = TimingConfig {
            max_samples: 25,
            pipeline: 10,
            ..TimingConfig::full()
        };
        assert_eq!(cfg.next_batch(0), 10);
        assert_eq!(cfg.next_batch(20), 5, "never past max_samples");
        assert_eq!(cfg.next_batch(25), 1, "at least one when called");
        let one = TimingConfig { pipeline: 0, ..cfg };
        assert_eq!(one.next_batch(0), 1, "pipeline 0 acts as 1");
    }

    #[test]
    fn batch_counts_are_bounded() {
        assert_eq!(Timer::batch_count(2.0, 100.0), 50);
        assert_eq!(Timer::batch_count(500.0, 100.0), 1);
        assert_eq!(Timer::batch_count(0.0, 100.0), 1);
        assert_eq!(Timer::batch_count(1e-6, 100.0), 10_000);
    }

    #[test]
    fn times_a_memset_on_a_real_gpu() {
        let gpu = match crate::gpu::detect() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("SKIP times_a_memset_on_a_real_gpu: {e}");
                return;
            }
        };
        let mut t = Timer::new(&gpu).unwrap();
        let mut buf = gpu.device.alloc(64 << 20, &gpu.stream).unwrap();
        let s = t
            .time(&TimingConfig::quick(), |st, i| buf.fill_u8(i as u8, st))
            .unwrap();
        assert!(s.samples >= 5 && s.median_us > 0.0, "{s:?}");
        let b = t
            .time_batched(&TimingConfig::quick(), 8, |st, i| buf.fill_u8(i as u8, st))
            .unwrap();
        let mut small = gpu.device.alloc(1 << 20, &gpu.stream).unwrap();
        let (big, little) = t
            .time_paired(
                &TimingConfig::quick(),
                |st, i| buf.fill_u8(i as u8, st),
                |st, i| small.fill_u8(i as u8, st),
            )
            .unwrap();
        assert_eq!(big.samples, little.samples, "one sample of each per round");
        assert!(
            big.median_us > little.median_us,
            "64 MiB memset slower than 1 MiB: {big:?} {little:?}"
        );
        assert!(b.median_us > 0.0 && b.p20_us <= b.p80_us, "{b:?}");
    }
}
