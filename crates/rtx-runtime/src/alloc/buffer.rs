//! [`DeviceBuffer`]: a block of device memory from the caching allocator, returned on drop.

use super::pool::{Block, StreamId};
use crate::device::Device;
use crate::error::RuntimeError;
use crate::raw;
use crate::stream::Stream;

/// Device memory owned by the caller; goes back to its device's cache when dropped.
///
/// The block belongs to the stream it was allocated on: after drop it is reused only by
/// allocations on that stream. If you use a buffer on another stream, synchronize that stream
/// before dropping the buffer.
#[derive(Debug)]
pub struct DeviceBuffer {
    device: Device,
    block: Block,
}

impl DeviceBuffer {
    pub(crate) fn new(device: Device, block: Block) -> Self {
        DeviceBuffer { device, block }
    }

    /// Device address (pass to kernels with [`crate::KernelArgs::ptr`]).
    pub fn ptr(&self) -> u64 {
        self.block.ptr
    }

    /// Length in bytes (as requested; the reserved class may be larger, see [`Self::capacity`]).
    pub fn len(&self) -> usize {
        self.block.requested
    }

    /// Whether the buffer has zero length.
    pub fn is_empty(&self) -> bool {
        self.block.requested == 0
    }

    /// Bytes actually reserved (the size class).
    pub fn capacity(&self) -> usize {
        self.block.size
    }

    /// The stream this buffer's memory is ordered on.
    pub fn stream_id(&self) -> StreamId {
        self.block.stream
    }

    /// The owning device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Errors (naming `op`) unless this buffer lives on `stream`'s device: a kernel reading
    /// another device's memory faults and leaves the context unusable instead of failing cleanly.
    pub fn check_on_stream_device(
        &self,
        stream: &Stream,
        op: &'static str,
    ) -> Result<(), RuntimeError> {
        if stream.device().ordinal() != self.device.ordinal() {
            return Err(RuntimeError::InvalidArgument {
                op,
                reason: format!(
                    "stream is on device {} but the buffer is on device {}",
                    stream.device().ordinal(),
                    self.device.ordinal()
                ),
            });
        }
        Ok(())
    }

    fn same_device(&self, stream: &Stream, op: &'static str) -> Result<(), RuntimeError> {
        self.check_on_stream_device(stream, op)?;
        self.device.bind()
    }

    /// Copies `host` to the start of the buffer on `stream`, then synchronizes the stream (so the
    /// host slice may be reused at once, whatever memory it lives in).
    pub fn upload<T: bytemuck::Pod>(
        &mut self,
        host: &[T],
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        let bytes: &[u8] = bytemuck::cast_slice(host);
        if bytes.len() > self.len() {
            return Err(RuntimeError::InvalidArgument {
                op: "DeviceBuffer::upload",
                reason: format!(
                    "{} bytes do not fit in a buffer of {} bytes",
                    bytes.len(),
                    self.len()
                ),
            });
        }
        self.same_device(stream, "DeviceBuffer::upload")?;
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: `bytes` stays borrowed until the stream is synchronized below; the
        // destination holds at least `bytes.len()` bytes (checked above).
        unsafe { raw::memcpy_htod_async(self.ptr(), bytes.as_ptr(), bytes.len(), stream.raw())? };
        stream.synchronize()
    }

    /// Copies the whole buffer to a new host vector (synchronizes `stream`). The length must be a
    /// multiple of `size_of::<T>()`.
    pub fn download<T: bytemuck::Pod>(&self, stream: &Stream) -> Result<Vec<T>, RuntimeError> {
        let size = std::mem::size_of::<T>();
        if size == 0 || !self.len().is_multiple_of(size) {
            return Err(RuntimeError::InvalidArgument {
                op: "DeviceBuffer::download",
                reason: format!(
                    "buffer of {} bytes is not a whole number of {}-byte elements",
                    self.len(),
                    size
                ),
            });
        }
        self.same_device(stream, "DeviceBuffer::download")?;
        let mut out: Vec<T> = vec![T::zeroed(); self.len() / size];
        if out.is_empty() {
            return Ok(out);
        }
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        // SAFETY: `dst` has exactly len() bytes and stays borrowed until the sync below.
        unsafe { raw::memcpy_dtoh_async(dst.as_mut_ptr(), self.ptr(), dst.len(), stream.raw())? };
        stream.synchronize()?;
        Ok(out)
    }

    /// Sets every byte of the buffer to `byte` on `stream` (asynchronous), e.g. to poison
    /// outputs before a kernel runs.
    pub fn fill_u8(&mut self, byte: u8, stream: &Stream) -> Result<(), RuntimeError> {
        self.same_device(stream, "DeviceBuffer::fill_u8")?;
        if self.is_empty() {
            return Ok(());
        }
        raw::memset_d8_async(self.ptr(), byte, self.len(), stream.raw())
    }

    /// Sets `len` bytes from `offset` to `byte` on `stream` (asynchronous); a range past the end
    /// of the buffer is refused with a typed error naming it.
    pub fn fill_range_u8(
        &mut self,
        offset: usize,
        len: usize,
        byte: u8,
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        if offset.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(RuntimeError::InvalidArgument {
                op: "DeviceBuffer::fill_range_u8",
                reason: format!(
                    "range {offset}..{offset}+{len} is outside a buffer of {} bytes",
                    self.len()
                ),
            });
        }
        self.same_device(stream, "DeviceBuffer::fill_range_u8")?;
        if len == 0 {
            return Ok(());
        }
        raw::memset_d8_async(self.ptr() + offset as u64, byte, len, stream.raw())
    }

    /// Copies all of `src` to the start of this buffer on `stream` (asynchronous).
    pub fn copy_from(&mut self, src: &DeviceBuffer, stream: &Stream) -> Result<(), RuntimeError> {
        if src.len() > self.len() {
            return Err(RuntimeError::InvalidArgument {
                op: "DeviceBuffer::copy_from",
                reason: format!(
                    "source of {} bytes does not fit in a buffer of {} bytes",
                    src.len(),
                    self.len()
                ),
            });
        }
        if src.device.ordinal() != self.device.ordinal() {
            return Err(RuntimeError::InvalidArgument {
                op: "DeviceBuffer::copy_from",
                reason: format!(
                    "source is on device {}, destination on device {}",
                    src.device.ordinal(),
                    self.device.ordinal()
                ),
            });
        }
        self.same_device(stream, "DeviceBuffer::copy_from")?;
        if src.is_empty() {
            return Ok(());
        }
        raw::memcpy_dtod_async(self.ptr(), src.ptr(), src.len(), stream.raw())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.device.allocator().release(self.block.ptr);
    }
}
