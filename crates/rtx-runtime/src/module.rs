//! [`Module`] (a loaded cubin / fatbin / PTX image) and [`Function`] (one kernel in it).

use crate::device::Device;
use crate::error::RuntimeError;
use crate::kernel_args::KernelArgs;
use crate::launch_config::LaunchConfig;
use crate::raw;
use crate::stream::Stream;
use cudarc::driver::sys::{CUfunction, CUfunction_attribute as FA, CUmodule};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What kind of image a byte slice holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// An ELF cubin.
    Cubin,
    /// A CUDA fatbinary.
    Fatbin,
    /// PTX assembly text.
    Ptx,
}

impl ImageKind {
    fn name(self) -> &'static str {
        match self {
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
            ImageKind::Ptx => "ptx",
        }
    }
}

const FATBIN_MAGIC: [u8; 4] = 0xBA55_ED50u32.to_le_bytes();

/// Classifies an image and returns the bytes to hand to the driver (PTX NUL-terminated).
/// Pure; rejects empty images, PTX with interior NUL bytes and text without `.version`.
pub fn prepare_image(image: &[u8]) -> Result<(ImageKind, Vec<u8>), RuntimeError> {
    let bad = |code: &str| RuntimeError::ModuleLoad {
        kind: "image",
        code: code.to_string(),
        log: String::new(),
    };
    if image.is_empty() {
        return Err(bad("empty image"));
    }
    if image.starts_with(b"\x7fELF") {
        return Ok((ImageKind::Cubin, image.to_vec()));
    }
    if image.starts_with(&FATBIN_MAGIC) {
        return Ok((ImageKind::Fatbin, image.to_vec()));
    }
    let text_len = image.iter().position(|&b| b == 0).unwrap_or(image.len());
    if image[text_len..].iter().any(|&b| b != 0) {
        return Err(bad(
            "not an ELF cubin or fatbin, and PTX text contains a NUL byte",
        ));
    }
    let text = &image[..text_len];
    if !text.windows(8).any(|w| w == b".version") {
        return Err(bad(
            "not an ELF cubin or fatbin, and no `.version` directive: not PTX text",
        ));
    }
    let mut v = text.to_vec();
    v.push(0);
    Ok((ImageKind::Ptx, v))
}

struct ModuleInner {
    device: Device,
    raw: CUmodule,
}

// SAFETY: CUDA modules may be used from any thread.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            if let Err(e) = raw::module_unload(self.raw) {
                tracing::warn!("unloading a module failed: {e}");
            }
        }
    }
}

/// A loaded module. Cheap to clone; functions keep it loaded.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
    kind: ImageKind,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("kind", &self.kind).finish()
    }
}

impl Module {
    /// Loads `image` on `device` (context must be bound).
    pub(crate) fn load(device: Device, image: &[u8]) -> Result<Module, RuntimeError> {
        let (kind, bytes) = prepare_image(image)?;
        // Copy into 8-byte aligned storage: the driver reads ELF headers in place.
        let mut aligned = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut aligned)[..bytes.len()].copy_from_slice(&bytes);
        // SAFETY: a complete image (PTX NUL-terminated) in live, aligned memory.
        let raw =
            unsafe { raw::module_load(aligned.as_ptr() as *const u8) }.map_err(|(code, log)| {
                RuntimeError::ModuleLoad {
                    kind: kind.name(),
                    code,
                    log,
                }
            })?;
        Ok(Module {
            inner: Arc::new(ModuleInner { device, raw }),
            kind,
        })
    }

    /// What kind of image was loaded.
    pub fn kind(&self) -> ImageKind {
        self.kind
    }

    /// Looks up an `extern "C"` kernel by name.
    pub fn function(&self, name: &str) -> Result<Function, RuntimeError> {
        let cname = CString::new(name).map_err(|_| RuntimeError::MissingFunction {
            name: name.to_string(),
        })?;
        self.inner.device.bind()?;
        let raw = raw::module_get_function(self.inner.raw, &cname)?.ok_or_else(|| {
            RuntimeError::MissingFunction {
                name: name.to_string(),
            }
        })?;
        let attr = |a| raw::func_attr(raw, a).map(|v| v.max(0) as u32);
        Ok(Function {
            module: self.inner.clone(),
            raw,
            name: name.to_string(),
            max_threads: attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_smem: attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_dynamic_smem: AtomicU32::new(attr(
                FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            )?),
        })
    }
}

/// Resource use of a compiled kernel as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FunctionAttributes {
    /// Registers per thread.
    pub num_regs: u32,
    /// Static shared memory per block in bytes.
    pub static_smem_bytes: u32,
    /// Local (stack / spill) memory per thread in bytes.
    pub local_bytes: u32,
    /// Constant memory in bytes.
    pub const_bytes: u32,
    /// Largest block this kernel can be launched with (register-limited).
    pub max_threads_per_block: u32,
    /// Current dynamic shared memory limit (raise with `set_max_dynamic_smem`).
    pub max_dynamic_smem_bytes: u32,
    /// PTX ISA version × 10 the kernel was compiled from.
    pub ptx_version: u32,
    /// SASS binary version × 10.
    pub binary_version: u32,
}

/// One kernel of a loaded module (keeps the module loaded).
pub struct Function {
    module: Arc<ModuleInner>,
    raw: CUfunction,
    name: String,
    max_threads: u32,
    static_smem: u32,
    max_dynamic_smem: AtomicU32,
}

// SAFETY: CUDA function handles may be used from any thread.
unsafe impl Send for Function {}
// SAFETY: as above; the only mutable state is atomic.
unsafe impl Sync for Function {}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("max_threads", &self.max_threads)
            .field("static_smem", &self.static_smem)
            .finish()
    }
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn attr(&self, a: FA) -> Result<u32, RuntimeError> {
        self.module.device.bind()?;
        raw::func_attr(self.raw, a).map(|v| v.max(0) as u32)
    }

    /// Registers per thread.
    pub fn num_regs(&self) -> Result<u32, RuntimeError> {
        self.attr(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)
    }

    /// All resource attributes.
    pub fn attributes(&self) -> Result<FunctionAttributes, RuntimeError> {
        Ok(FunctionAttributes {
            num_regs: self.attr(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_smem_bytes: self.attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            local_bytes: self.attr(FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            const_bytes: self.attr(FA::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            max_threads_per_block: self.attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_dynamic_smem_bytes: self
                .attr(FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            ptx_version: self.attr(FA::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: self.attr(FA::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        })
    }

    /// Allows launches with up to `bytes` of dynamic shared memory (needed above 48 KiB).
    /// Refused if static + dynamic shared memory would exceed the device's opt-in limit.
    pub fn set_max_dynamic_smem(&self, bytes: u32) -> Result<(), RuntimeError> {
        let optin = self.module.device.info().smem_per_block_optin;
        if bytes as u64 + self.static_smem as u64 > optin as u64 {
            return Err(RuntimeError::InvalidArgument {
                op: "Function::set_max_dynamic_smem",
                reason: format!(
                    "`{}`: {bytes} dynamic + {} static bytes of shared memory exceed the opt-in limit {optin}",
                    self.name, self.static_smem
                ),
            });
        }
        self.module.device.bind()?;
        raw::func_set_attr(
            self.raw,
            FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )?;
        self.max_dynamic_smem.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Checks `cfg` against the device and this kernel's own limits (register-limited block
    /// size, dynamic shared memory limit) without launching.
    pub fn check_launch(&self, cfg: &LaunchConfig) -> Result<(), RuntimeError> {
        cfg.validate(self.module.device.info())?;
        let bad = |reason: String| Err(RuntimeError::InvalidLaunch { reason });
        if cfg.threads_per_block() > self.max_threads as u64 {
            return bad(format!(
                "`{}` can run at most {} threads per block (register use), block {:?} has {}",
                self.name,
                self.max_threads,
                cfg.block,
                cfg.threads_per_block()
            ));
        }
        let limit = self.max_dynamic_smem.load(Ordering::Relaxed);
        if cfg.shared_mem_bytes > limit {
            return bad(format!(
                "`{}`: {} bytes of dynamic shared memory exceed its limit of {limit}; call set_max_dynamic_smem first",
                self.name, cfg.shared_mem_bytes
            ));
        }
        Ok(())
    }

    /// Launches the kernel on `stream`. Refuses (`InvalidLaunch`) a grid, block or shared
    /// memory size beyond the device's or the kernel's limits, or invalid arguments, before the
    /// driver sees them.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order, size and type, and the
    /// kernel must only access memory that is valid for it (buffers it reads and writes must be
    /// alive and large enough until the launch completes on `stream`).
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &mut KernelArgs,
    ) -> Result<(), RuntimeError> {
        self.check_launch(cfg)?;
        if let Some(e) = args.error() {
            return Err(RuntimeError::InvalidLaunch {
                reason: format!("`{}`: {e}", self.name),
            });
        }
        if stream.device().ordinal() != self.module.device.ordinal() {
            return Err(RuntimeError::InvalidLaunch {
                reason: format!(
                    "`{}` is loaded on device {} but the stream is on device {}",
                    self.name,
                    self.module.device.ordinal(),
                    stream.device().ordinal()
                ),
            });
        }
        self.module.device.bind()?;
        let params = args.as_param_array();
        // SAFETY: cfg validated; params point into `args`, alive for the call (the driver copies
        // them); the caller guarantees they match the kernel signature.
        unsafe {
            raw::launch(
                self.raw,
                cfg.grid,
                cfg.block,
                cfg.shared_mem_bytes,
                stream.raw(),
                params,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_images() {
        assert_eq!(
            prepare_image(b"\x7fELF\x02\x01").unwrap().0,
            ImageKind::Cubin
        );
        let mut fat = FATBIN_MAGIC.to_vec();
        fat.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(prepare_image(&fat).unwrap().0, ImageKind::Fatbin);
        let (k, v) = prepare_image(b".version 8.0\n.target sm_90\n").unwrap();
        assert_eq!(k, ImageKind::Ptx);
        assert_eq!(*v.last().unwrap(), 0);
        // Already NUL-terminated PTX keeps a single terminator.
        let (_, v2) = prepare_image(b".version 8.0\n\0").unwrap();
        assert_eq!(v2.iter().filter(|&&b| b == 0).count(), 1);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [&b""[..], b"hello world", b".version 8.0\0junk"] {
            match prepare_image(bad) {
                Err(RuntimeError::ModuleLoad { code, .. }) => assert!(!code.is_empty()),
                other => panic!("{bad:?}: expected ModuleLoad, got {other:?}"),
            }
        }
    }
}
