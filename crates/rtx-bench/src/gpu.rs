//! Finding and opening the GPU the GPU suites run on.

use rtx_runtime::{Device, RuntimeError, Stream};
use rtx_synthesis::Arch;

/// An opened device with the owned stream every suite times on.
pub struct Gpu {
    /// The device (ordinal 0).
    pub device: Device,
    /// Owned, non-blocking stream.
    pub stream: Stream,
    /// The compile target for this device (sm_90a on Hopper).
    pub arch: Arch,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("name", &self.device.info().name)
            .field("arch", &self.arch)
            .finish()
    }
}

/// Why no GPU is used, in words (for `No CUDA GPU found (<reason>)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoGpu(pub String);

/// Opens device 0, or says why there is none.
pub fn detect() -> Result<Gpu, NoGpu> {
    if !rtx_runtime::driver_available() {
        return Err(NoGpu("no CUDA driver: libcuda could not be loaded".into()));
    }
    if Device::count() == 0 {
        return Err(NoGpu("the CUDA driver reports 0 devices".into()));
    }
    let open = || -> Result<Gpu, RuntimeError> {
        let device = Device::open(0)?;
        let stream = device.new_stream()?;
        let (major, minor) = device.info().compute_capability;
        let arch = Arch::for_compute_capability(major, minor).map_err(|e| {
            RuntimeError::InvalidLaunch {
                reason: e.to_string(),
            }
        })?;
        Ok(Gpu {
            device,
            stream,
            arch,
        })
    };
    open().map_err(|e| NoGpu(format!("device 0 could not be opened: {e}")))
}
