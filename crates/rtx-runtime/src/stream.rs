//! [`Stream`]: an owned, non-blocking CUDA stream.

use crate::device::Device;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::raw;
use cudarc::driver::sys::CUstream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct StreamInner {
    device: Device,
    raw: CUstream,
    id: u64,
}

// SAFETY: CUDA streams may be used from any thread.
unsafe impl Send for StreamInner {}
// SAFETY: as above; the driver serializes work submitted to a stream.
unsafe impl Sync for StreamInner {}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.device.bind().is_err() {
            return;
        }
        if let Err(e) = raw::stream_synchronize(self.raw) {
            tracing::warn!(
                stream = self.id,
                "synchronizing a stream before destroying it failed: {e}"
            );
        }
        self.device.allocator().retire_stream(self.id);
        if let Err(e) = raw::stream_destroy(self.raw) {
            tracing::warn!(stream = self.id, "destroying a stream failed: {e}");
        }
    }
}

/// An owned stream created with `CU_STREAM_NON_BLOCKING`. Clones share the same stream; it is
/// synchronized and destroyed when the last clone drops.
#[derive(Clone)]
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("id", &self.inner.id)
            .field("device", &self.inner.device.ordinal())
            .finish()
    }
}

impl Stream {
    /// Creates a stream (the device context must be bound).
    pub(crate) fn create(device: Device) -> Result<Stream, RuntimeError> {
        let raw = raw::stream_create()?;
        Ok(Stream {
            inner: Arc::new(StreamInner {
                device,
                raw,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            }),
        })
    }

    /// Waits until all work queued on the stream is done; surfaces asynchronous errors.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.inner.device.bind()?;
        raw::stream_synchronize(self.inner.raw)
    }

    /// Makes later work on this stream wait for `event` (recorded on any stream).
    pub fn wait_event(&self, event: &Event) -> Result<(), RuntimeError> {
        self.inner.device.bind()?;
        raw::stream_wait_event(self.inner.raw, event.raw())
    }

    /// The raw handle (for cuBLAS or hand-written driver calls). Valid while `self` lives.
    pub fn raw(&self) -> CUstream {
        self.inner.raw
    }

    /// A process-unique id (the allocator keys stream-ordered reuse on it).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }
}
