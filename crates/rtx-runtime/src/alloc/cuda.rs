//! The CUDA backend of the pool (`cuMemAlloc` / `cuMemFree`) and the thread-safe
//! [`CachingAllocator`] every [`crate::Device`] owns.

use super::pool::{AllocStats, Block, Pool, RawAllocator, StreamId};
use crate::error::RuntimeError;
use crate::raw::{self, Ctx};
use std::sync::{Mutex, MutexGuard};

/// The pool backend allocating from the driver in one context (bound on every call).
#[derive(Debug)]
pub struct CudaBackend {
    ctx: Ctx,
}

impl RawAllocator for CudaBackend {
    fn alloc(&mut self, bytes: usize) -> Result<u64, RuntimeError> {
        raw::bind(self.ctx)?;
        raw::mem_alloc(bytes).map_err(|r| {
            let (free, total) = raw::mem_info().unwrap_or((0, 0));
            // Some drivers answer an impossible size with INVALID_VALUE; it is still OOM.
            if raw::is_oom(r) || (total > 0 && bytes > total) {
                RuntimeError::OutOfMemory {
                    requested: bytes,
                    free,
                    total,
                }
            } else {
                raw::driver_error("cuMemAlloc", r)
            }
        })
    }

    fn free(&mut self, ptr: u64, _bytes: usize) -> Result<(), RuntimeError> {
        raw::bind(self.ctx)?;
        raw::mem_free(ptr)
    }

    fn synchronize(&mut self) -> Result<(), RuntimeError> {
        raw::bind(self.ctx)?;
        raw::ctx_synchronize()
    }

    fn mem_info(&mut self) -> Result<(usize, usize), RuntimeError> {
        raw::bind(self.ctx)?;
        raw::mem_info()
    }
}

/// A device's caching allocator (see [`crate::alloc::Pool`] for the size classes and reuse
/// rules). Reach it with [`crate::Device::allocator`]; allocate with [`crate::Device::alloc`].
#[derive(Debug)]
pub struct CachingAllocator {
    pool: Mutex<Pool<CudaBackend>>,
}

impl CachingAllocator {
    pub(crate) fn new(ctx: Ctx) -> Self {
        CachingAllocator {
            pool: Mutex::new(Pool::new(CudaBackend { ctx })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pool<CudaBackend>> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current counters.
    pub fn stats(&self) -> AllocStats {
        self.lock().stats()
    }

    /// Resets the peak counters to the current usage.
    pub fn reset_peak(&self) {
        self.lock().reset_peak()
    }

    /// Synchronizes the device and returns all cached blocks to the driver; returns bytes freed.
    pub fn empty_cache(&self) -> Result<usize, RuntimeError> {
        self.lock().empty_cache()
    }

    pub(crate) fn allocate(&self, bytes: usize, stream: StreamId) -> Result<Block, RuntimeError> {
        self.lock().allocate(bytes, stream)
    }

    pub(crate) fn release(&self, ptr: u64) {
        if let Err(e) = self.lock().release(ptr) {
            tracing::warn!(ptr, "releasing device buffer failed: {e}");
        }
    }

    pub(crate) fn retire_stream(&self, stream: StreamId) {
        if let Err(e) = self.lock().retire_stream(stream) {
            tracing::warn!(
                stream,
                "freeing a destroyed stream's cached blocks failed: {e}"
            );
        }
    }
}
