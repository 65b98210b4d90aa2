//! [`Event`]: a timing-enabled CUDA event.

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
