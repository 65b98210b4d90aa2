//! [`Device`]: an opened GPU (its primary context, properties and caching allocator).

use crate::alloc::{CachingAllocator, DeviceBuffer};
use crate::device_info::DeviceInfo;
use crate::error::RuntimeError;
use crate::module::Module;
use crate::raw::{self, Ctx};
use crate::stream::Stream;
use cudarc::driver::sys::CUdevice;
use std::sync::{Arc, Mutex, Weak};

/// Whether the CUDA driver library can be loaded on this machine (never panics).
pub fn driver_available() -> bool {
    raw::driver_present()
}

pub(crate) struct DeviceInner {
    ordinal: usize,
    dev: CUdevice,
    pub(crate) ctx: Ctx,
    info: DeviceInfo,
    allocator: CachingAllocator,
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // No buffers, streams or modules remain (they hold the Arc); return the cache, then the
        // context.
        if raw::bind(self.ctx).is_ok() {
            if let Err(e) = self.allocator.empty_cache() {
                tracing::warn!(
                    ordinal = self.ordinal,
                    "emptying the allocator cache failed: {e}"
                );
            }
        }
        if let Err(e) = raw::primary_ctx_release(self.dev) {
            tracing::warn!(
                ordinal = self.ordinal,
                "releasing the primary context failed: {e}"
            );
        }
    }
}

/// An opened GPU. Cheap to clone (shared handle); opening the same ordinal twice returns the same
/// device, with one allocator. Every method binds the device's context to the calling thread.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.info.name)
            .finish()
    }
}

fn registry() -> &'static Mutex<Vec<(usize, Weak<DeviceInner>)>> {
    static R: Mutex<Vec<(usize, Weak<DeviceInner>)>> = Mutex::new(Vec::new());
    &R
}

impl Device {
    /// Number of CUDA devices, or why there are none usable (no driver, `cuInit` failure).
    pub fn try_count() -> Result<usize, RuntimeError> {
        raw::device_count()
    }

    /// Number of CUDA devices; 0 when no driver is installed or no GPU is present.
    pub fn count() -> usize {
        Self::try_count().unwrap_or(0)
    }

    /// Opens device `ordinal` (retains its primary context).
    pub fn open(ordinal: usize) -> Result<Device, RuntimeError> {
        let count = raw::device_count()?;
        if ordinal >= count {
            return Err(RuntimeError::NoDevice { ordinal, count });
        }
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(_, w)| w.strong_count() > 0);
        if let Some(inner) = reg
            .iter()
            .find(|(o, _)| *o == ordinal)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(Device { inner });
        }
        let dev = raw::device_get(ordinal)?;
        let ctx = raw::primary_ctx_retain(dev)?;
        let setup = raw::bind(ctx).and_then(|_| DeviceInfo::query(ordinal, dev));
        let info = match setup {
            Ok(i) => i,
            Err(e) => {
                let _ = raw::primary_ctx_release(dev);
                return Err(e);
            }
        };
        tracing::debug!(ordinal, name = %info.name, cc = ?info.compute_capability, "opened device");
        let inner = Arc::new(DeviceInner {
            ordinal,
            dev,
            ctx,
            info,
            allocator: CachingAllocator::new(ctx),
        });
        reg.push((ordinal, Arc::downgrade(&inner)));
        Ok(Device { inner })
    }

    /// The device's properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// The driver's UUID of this GPU (or MIG instance), as `nvidia-smi -L` prints it
    /// (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`): the same physical device has the same UUID
    /// in every process, whatever its ordinal there.
    pub fn uuid(&self) -> Result<String, RuntimeError> {
        raw::device_uuid(self.inner.dev).map(|b| format_uuid(&b))
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> Result<(), RuntimeError> {
        raw::bind(self.inner.ctx)
    }

    /// Creates an owned, non-blocking stream (not the legacy default stream).
    pub fn new_stream(&self) -> Result<Stream, RuntimeError> {
        self.bind()?;
        Stream::create(self.clone())
    }

    /// The device's caching allocator (stats, `empty_cache`).
    pub fn allocator(&self) -> &CachingAllocator {
        &self.inner.allocator
    }

    /// Allocates `bytes` of device memory ordered on `stream` (contents undefined).
    pub fn alloc(&self, bytes: usize, stream: &Stream) -> Result<DeviceBuffer, RuntimeError> {
        if stream.device().ordinal() != self.ordinal() {
            return Err(RuntimeError::InvalidArgument {
                op: "Device::alloc",
                reason: format!(
                    "stream belongs to device {}, not device {}",
                    stream.device().ordinal(),
                    self.ordinal()
                ),
            });
        }
        let block = self.inner.allocator.allocate(bytes, stream.id())?;
        Ok(DeviceBuffer::new(self.clone(), block))
    }

    /// Loads a module from a cubin (ELF), fatbin or PTX text image.
    pub fn load_module(&self, image: &[u8]) -> Result<Module, RuntimeError> {
        self.bind()?;
        Module::load(self.clone(), image)
    }

    /// Waits for all work on the device; surfaces asynchronous errors.
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.bind()?;
        raw::ctx_synchronize()
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize), RuntimeError> {
        self.bind()?;
        raw::mem_info()
    }
}

/// `GPU-` and the 16 bytes in the 8-4-4-4-12 hex grouping `nvidia-smi -L` uses.
pub(crate) fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::format_uuid;

    #[test]
    fn uuids_print_as_nvidia_smi_does() {
        let b: [u8; 16] = [
            0x5a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7,
            0xe8, 0xf9,
        ];
        assert_eq!(format_uuid(&b), "GPU-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9");
        assert_eq!(format_uuid(&[0; 16]).len(), 4 + 36);
    }
}
