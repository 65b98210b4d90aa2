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
/// Pure; rejects empty images, PTX with interior NUL bytes, text without `.version`, and cubins or
/// fatbins whose headers point past the end of the image (`cuModuleLoadData` takes no length and
/// trusts them, so a truncated file would make the driver read past the buffer).
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
        check_elf(image).map_err(|why| bad(&format!("malformed ELF cubin: {why}")))?;
        return Ok((ImageKind::Cubin, image.to_vec()));
    }
    if image.starts_with(&FATBIN_MAGIC) {
        check_fatbin(image).map_err(|why| bad(&format!("malformed fatbin: {why}")))?;
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

fn le_u16(b: &[u8], at: usize) -> u64 {
    u16::from_le_bytes([b[at], b[at + 1]]) as u64
}

fn le_u32(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as u64
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Whether `[offset, offset + size)` lies inside an image of `len` bytes.
fn within(offset: u64, size: u64, len: usize) -> bool {
    offset
        .checked_add(size)
        .is_some_and(|end| end <= len as u64)
}

/// Bytes in an ELF64 header, and in one section header / program header.
const ELF64_HEADER: usize = 64;
const ELF64_SECTION_HEADER: u64 = 64;
const ELF64_PROGRAM_HEADER: u64 = 56;
/// `SHT_NOBITS`: a section that occupies no file bytes (`.bss`, `.nv.shared.*`).
const SHT_NOBITS: u64 = 8;

/// Checks that an ELF64 little-endian image holds its header, its section and program header
/// tables, and every section and segment's file bytes.
fn check_elf(image: &[u8]) -> Result<(), String> {
    let len = image.len();
    if len < ELF64_HEADER {
        return Err(format!(
            "{len} bytes, shorter than the {ELF64_HEADER}-byte ELF64 header"
        ));
    }
    if image[4] != 2 || image[5] != 1 {
        return Err(format!(
            "class {} / data {}: not a 64-bit little-endian ELF",
            image[4], image[5]
        ));
    }
    let (phoff, phentsize, phnum) = (
        le_u64(image, 0x20),
        le_u16(image, 0x36),
        le_u16(image, 0x38),
    );
    let (shoff, shentsize, shnum) = (
        le_u64(image, 0x28),
        le_u16(image, 0x3A),
        le_u16(image, 0x3C),
    );
    if phnum > 0 && phentsize < ELF64_PROGRAM_HEADER {
        return Err(format!("program header entries of {phentsize} bytes"));
    }
    if shnum > 0 && shentsize < ELF64_SECTION_HEADER {
        return Err(format!("section header entries of {shentsize} bytes"));
    }
    if !within(phoff, phentsize * phnum, len) {
        return Err(format!(
            "program headers at {phoff} ({phnum} x {phentsize} bytes) run past the {len}-byte image"
        ));
    }
    if !within(shoff, shentsize * shnum, len) {
        return Err(format!(
            "section headers at {shoff} ({shnum} x {shentsize} bytes) run past the {len}-byte image"
        ));
    }
    for i in 0..shnum {
        let h = (shoff + i * shentsize) as usize;
        let (kind, offset, size) = (
            le_u32(image, h + 4),
            le_u64(image, h + 0x18),
            le_u64(image, h + 0x20),
        );
        if kind != SHT_NOBITS && !within(offset, size, len) {
            return Err(format!(
                "section {i} ({size} bytes at {offset}) runs past the {len}-byte image"
            ));
        }
    }
    for i in 0..phnum {
        let h = (phoff + i * phentsize) as usize;
        let (offset, size) = (le_u64(image, h + 8), le_u64(image, h + 0x20));
        if !within(offset, size, len) {
            return Err(format!(
                "segment {i} ({size} bytes at {offset}) runs past the {len}-byte image"
            ));
        }
    }
    Ok(())
}

/// Bytes in a fatbin's outer header: magic `u32`, version `u16`, header size `u16`, payload size
/// `u64`.
const FATBIN_HEADER: usize = 16;

/// Checks that a fatbin image holds its outer header and the payload that header declares.
fn check_fatbin(image: &[u8]) -> Result<(), String> {
    let len = image.len();
    if len < FATBIN_HEADER {
        return Err(format!(
            "{len} bytes, shorter than the {FATBIN_HEADER}-byte header"
        ));
    }
    let (header, payload) = (le_u16(image, 6), le_u64(image, 8));
    if header < FATBIN_HEADER as u64 {
        return Err(format!("header size {header}, below {FATBIN_HEADER}"));
    }
    if !within(header, payload, len) {
        return Err(format!(
            "{payload}-byte payload after a {header}-byte header runs past the {len}-byte image"
        ));
    }
    Ok(())
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

    /// Raises the dynamic shared memory limit to `bytes` when it is below that (a no-op
    /// otherwise). Launch paths call this rather than comparing with 48 KiB: the driver's default
    /// limit is 48 KiB *minus the kernel's static shared memory*, so a kernel with 128 static
    /// bytes cannot launch with exactly 48 KiB of dynamic memory without opting in.
    pub fn ensure_dynamic_smem(&self, bytes: u32) -> Result<(), RuntimeError> {
        if bytes > self.max_dynamic_smem.load(Ordering::Relaxed) {
            self.set_max_dynamic_smem(bytes)
        } else {
            Ok(())
        }
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

    /// A minimal ELF64 little-endian image: header, then one 64-byte section header per
    /// `(type, offset, size)`, then 16 bytes of section data.
    fn elf(sections: &[(u32, u64, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; ELF64_HEADER];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        if !sections.is_empty() {
            b[0x28..0x30].copy_from_slice(&(ELF64_HEADER as u64).to_le_bytes());
            b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
            b[0x3C..0x3E].copy_from_slice(&(sections.len() as u16).to_le_bytes());
        }
        for &(kind, offset, size) in sections {
            let mut h = vec![0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&offset.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&h);
        }
        b.extend_from_slice(&[0u8; 16]);
        b
    }

    /// A fatbin outer header declaring a `declared`-byte payload, followed by `actual` bytes.
    fn fatbin(declared: u64, actual: usize) -> Vec<u8> {
        let mut b = FATBIN_MAGIC.to_vec();
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&(FATBIN_HEADER as u16).to_le_bytes());
        b.extend_from_slice(&declared.to_le_bytes());
        b.extend(std::iter::repeat_n(0u8, actual));
        b
    }

    #[test]
    fn refuses_cubins_and_fatbins_whose_headers_point_past_the_end() {
        // Section data inside the image, and a NOBITS section (no file bytes) of any size.
        let ok = elf(&[(1, 128, 16), (SHT_NOBITS as u32, 0, 1 << 40)]);
        assert_eq!(prepare_image(&ok).unwrap().0, ImageKind::Cubin);
        let past_end = elf(&[(1, 128, 17)]);
        let truncated = &ok[..ok.len() - 20];
        let mut bad_table = elf(&[(1, 128, 16)]);
        bad_table[0x28..0x30].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        let mut big_endian = elf(&[]);
        big_endian[5] = 2;
        let cases: [(&[u8], &str); 7] = [
            (b"\x7fELF\x02\x01", "shorter than"),
            (&past_end, "section 0"),
            (truncated, "section headers"),
            (&bad_table, "section headers"),
            (&big_endian, "little-endian"),
            (&fatbin(64, 63), "payload"),
            (&fatbin(8, 0)[..12], "shorter than"),
        ];
        for (image, why) in cases {
            match prepare_image(image) {
                Err(RuntimeError::ModuleLoad { code, .. }) => {
                    assert!(code.contains(why), "expected `{why}` in `{code}`")
                }
                other => panic!("{why}: expected ModuleLoad, got {other:?}"),
            }
        }
    }

    #[test]
    fn classifies_images() {
        assert_eq!(prepare_image(&elf(&[])).unwrap().0, ImageKind::Cubin);
        assert_eq!(prepare_image(&fatbin(8, 8)).unwrap().0, ImageKind::Fatbin);
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
