//! [`Event`]: a timing-enabled CUDA event; [`EventPairs`]: start/end pairs for timing several
//! samples enqueued before one host wait.

use crate::device::Device;
use crate::error::RuntimeError;
use crate::raw;
use crate::stream::Stream;
use cudarc::driver::sys::CUevent;

/// A CUDA event created with `CU_EVENT_DEFAULT`, so it can time work (events created with
/// `CU_EVENT_DISABLE_TIMING` cannot).
pub struct Event {
    device: Device,
    raw: CUevent,
}

// SAFETY: CUDA events may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device.ordinal())
            .finish()
    }
}

impl Event {
    /// Creates a timing-enabled event on `device`.
    pub fn new(device: &Device) -> Result<Event, RuntimeError> {
        device.bind()?;
        Ok(Event {
            device: device.clone(),
            raw: raw::event_create()?,
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), RuntimeError> {
        if stream.device().ordinal() != self.device.ordinal() {
            return Err(RuntimeError::InvalidArgument {
                op: "Event::record",
                reason: format!(
                    "event is on device {}, stream on device {}",
                    self.device.ordinal(),
                    stream.device().ordinal()
                ),
            });
        }
        self.device.bind()?;
        raw::event_record(self.raw, stream.raw())
    }

    /// Waits until the work before the last `record` is done; surfaces asynchronous errors.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.device.bind()?;
        raw::event_synchronize(self.raw)
    }

    /// Whether the recorded work has completed (non-blocking).
    pub fn query(&self) -> Result<bool, RuntimeError> {
        self.device.bind()?;
        raw::event_query(self.raw)
    }

    /// Milliseconds between this (start) event and `end`; waits for `end` first. Both must have
    /// been recorded.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, RuntimeError> {
        end.synchronize()?;
        self.device.bind()?;
        raw::event_elapsed(self.raw, end.raw)
    }

    pub(crate) fn raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            if let Err(e) = raw::event_destroy(self.raw) {
                tracing::warn!("destroying an event failed: {e}");
            }
        }
    }
}

/// Start/end event pairs, one per sample, so a timing loop can enqueue several samples (each
/// between its own pair) before the host waits once, as Triton's `do_bench` does: the GPU then
/// never idles between samples waiting for the host.
#[derive(Debug, Default)]
pub struct EventPairs {
    pairs: Vec<(Event, Event)>,
}

impl EventPairs {
    /// No pairs yet; [`EventPairs::ensure`] creates them.
    pub fn new() -> EventPairs {
        EventPairs::default()
    }

    /// Makes sure at least `n` pairs exist on `device` (creating only the missing ones).
    pub fn ensure(&mut self, device: &Device, n: usize) -> Result<(), RuntimeError> {
        while self.pairs.len() < n {
            self.pairs.push((Event::new(device)?, Event::new(device)?));
        }
        Ok(())
    }

    /// How many pairs exist.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair exists yet.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Pair `slot` (start, end); `None` past [`EventPairs::len`].
    pub fn pair(&self, slot: usize) -> Option<(&Event, &Event)> {
        self.pairs.get(slot).map(|(s, e)| (s, e))
    }

    /// Microseconds between start and end of the first `n` pairs, in order; waits for each end
    /// event. Fails with [`RuntimeError::InvalidArgument`] when fewer than `n` pairs exist.
    pub fn elapsed_us(&self, n: usize) -> Result<Vec<f64>, RuntimeError> {
        if n > self.pairs.len() {
            return Err(RuntimeError::InvalidArgument {
                op: "EventPairs::elapsed_us",
                reason: format!("{n} samples asked, {} event pairs exist", self.pairs.len()),
            });
        }
        self.pairs[..n]
            .iter()
            .map(|(s, e)| s.elapsed_ms(e).map(|ms| f64::from(ms) * 1e3))
            .collect()
    }
}
