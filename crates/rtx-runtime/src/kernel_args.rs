//! [`KernelArgs`]: owned, aligned storage for kernel parameters and the `void**` array that
//! points into it.

use crate::alloc::DeviceBuffer;
use std::ffi::c_void;

/// Largest alignment supported for a by-value argument (a `CUtensorMap` needs 64).
pub const MAX_ARG_ALIGN: usize = 128;

#[derive(Clone, Copy)]
#[repr(C, align(128))]
struct Slot([u8; MAX_ARG_ALIGN]);

/// Kernel parameters in declaration order. Each value lives in its own heap allocation aligned to
/// 128 bytes, so pointers to it stay valid however many arguments are pushed; the pointer array
/// handed to `cuLaunchKernel` is rebuilt at launch. Pushing an invalid argument (bad alignment)
/// is remembered and makes the launch fail with `InvalidLaunch`.
#[derive(Default)]
pub struct KernelArgs {
    slots: Vec<Box<[Slot]>>,
    sizes: Vec<usize>,
    ptrs: Vec<*mut c_void>,
    error: Option<String>,
}

// SAFETY: `ptrs` only ever points into `slots`, which the struct owns.
unsafe impl Send for KernelArgs {}

impl std::fmt::Debug for KernelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelArgs")
            .field("sizes", &self.sizes)
            .field("error", &self.error)
            .finish()
    }
}

impl KernelArgs {
    /// No arguments yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn push_bytes(&mut self, v: &[u8]) -> &mut Self {
        let n = v.len().div_ceil(MAX_ARG_ALIGN).max(1);
        let mut slots = vec![Slot([0; MAX_ARG_ALIGN]); n].into_boxed_slice();
        let dst: &mut [u8] = bytemuck_slots(&mut slots);
        dst[..v.len()].copy_from_slice(v);
        self.slots.push(slots);
        self.sizes.push(v.len());
        self
    }

    /// Any plain value (its bytes are copied).
    pub fn push<T: bytemuck::Pod>(&mut self, v: T) -> &mut Self {
        if std::mem::align_of::<T>() > MAX_ARG_ALIGN {
            self.error.get_or_insert(format!(
                "argument {} has alignment {} > {MAX_ARG_ALIGN}",
                self.sizes.len(),
                std::mem::align_of::<T>()
            ));
        }
        self.push_bytes(bytemuck::bytes_of(&v))
    }

    /// A device pointer to `b` (a `T*` parameter).
    pub fn ptr(&mut self, b: &DeviceBuffer) -> &mut Self {
        self.push(b.ptr())
    }

    /// A `u64` (or raw device address).
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.push(v)
    }

    /// An `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.push(v)
    }

    /// An `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.push(v)
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.push(v)
    }

    /// An `f32`.
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.push(v)
    }

    /// An `f64`.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.push(v)
    }

    /// A by-value struct given as raw bytes (e.g. a 128-byte `CUtensorMap`, `align = 64`).
    /// `align` must be a power of two no larger than [`MAX_ARG_ALIGN`]; storage is always
    /// 128-byte aligned, so any valid `align` is honoured.
    pub fn bytes(&mut self, v: &[u8], align: usize) -> &mut Self {
        if !align.is_power_of_two() || align > MAX_ARG_ALIGN {
            self.error.get_or_insert(format!(
                "argument {}: alignment {align} is not a power of two <= {MAX_ARG_ALIGN}",
                self.sizes.len()
            ));
        }
        if v.is_empty() {
            self.error.get_or_insert(format!(
                "argument {}: empty by-value argument",
                self.sizes.len()
            ));
        }
        self.push_bytes(v)
    }

    /// Number of arguments pushed.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether no argument was pushed.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// Size in bytes of each argument, in order.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// Removes all arguments (and any recorded error).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.sizes.clear();
        self.ptrs.clear();
        self.error = None;
    }

    /// The first invalid argument pushed, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The `void**` array for `cuLaunchKernel`; valid until `self` is next modified or dropped.
    pub(crate) fn as_param_array(&mut self) -> *mut *mut c_void {
        self.ptrs.clear();
        for s in &mut self.slots {
            self.ptrs.push(s.as_mut_ptr() as *mut c_void);
        }
        if self.ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            self.ptrs.as_mut_ptr()
        }
    }

    /// The bytes of argument `i` (for tests and diagnostics).
    pub fn arg_bytes(&self, i: usize) -> Option<&[u8]> {
        let slots = self.slots.get(i)?;
        let size = *self.sizes.get(i)?;
        Some(&slots_bytes(slots)[..size])
    }
}

fn bytemuck_slots(s: &mut [Slot]) -> &mut [u8] {
    let len = std::mem::size_of_val(s);
    // SAFETY: Slot is a plain byte array (repr(C)); the slice covers exactly its bytes.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, len) }
}

fn slots_bytes(s: &[Slot]) -> &[u8] {
    let len = std::mem::size_of_val(s);
    // SAFETY: as above, shared.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_aligned_and_stable() {
        let mut a = KernelArgs::new();
        a.u64(0xdead_beef_0000_0001).i32(-7).f32(1.5);
        let map = [7u8; 128];
        a.bytes(&map, 64);
        let first = a.as_param_array();
        // SAFETY: reading the pointer array we just built.
        let p0 = unsafe { *first };
        for i in 0..100 {
            a.u32(i);
        }
        let again = a.as_param_array();
        // SAFETY: as above.
        let p0_again = unsafe { *again };
        assert_eq!(p0, p0_again, "argument storage moved when more were pushed");
        assert_eq!(a.len(), 104);
        for i in 0..a.len() {
            // SAFETY: index < len.
            let p = unsafe { *again.add(i) } as usize;
            assert_eq!(p % MAX_ARG_ALIGN, 0, "argument {i} not 128-byte aligned");
        }
        assert_eq!(
            a.arg_bytes(0).unwrap(),
            &0xdead_beef_0000_0001u64.to_ne_bytes()
        );
        assert_eq!(a.arg_bytes(1).unwrap(), &(-7i32).to_ne_bytes());
        assert_eq!(a.arg_bytes(2).unwrap(), &1.5f32.to_ne_bytes());
        assert_eq!(a.arg_bytes(3).unwrap(), &map[..]);
        assert_eq!(a.sizes()[..4], [8, 4, 4, 128]);
        assert!(a.error().is_none());
    }

    #[test]
    fn bad_alignment_is_recorded_not_panicking() {
        let mut a = KernelArgs::new();
        a.bytes(&[1, 2, 3], 3);
        assert!(a.error().unwrap().contains("alignment 3"));
        a.clear();
        a.bytes(&[0; 300], 256);
        assert!(a.error().unwrap().contains("256"));
        assert_eq!(a.arg_bytes(0).unwrap().len(), 300);
    }

    #[test]
    fn empty_args_give_null_array() {
        let mut a = KernelArgs::new();
        assert!(a.is_empty());
        assert!(a.as_param_array().is_null());
    }
}
