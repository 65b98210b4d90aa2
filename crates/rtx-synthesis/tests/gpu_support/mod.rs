//! Helpers shared by the GPU integration tests: device 0 or a printed `SKIP <test>: <reason>`
//! on stderr (a panic instead when `RTX_REQUIRE_NVRTC` is set and NVRTC does not load), and the
//! host copy of a tensor that the elementwise and row-reduce tests upload, with the guard-byte
//! buffers they check outputs in.

use half::{bf16, f16};
use rtx_runtime::{Device, DeviceBuffer, Stream};
use rtx_synthesis::aot::nvrtc_or_skip;
use rtx_synthesis::synth::inputs::decode_output;
use rtx_synthesis::DType;

/// Device 0, or `None` after printing `SKIP {test}: <reason>` (stderr) when there is no CUDA
/// device or NVRTC does not load (then asserting `RTX_REQUIRE_NVRTC` is unset).
pub fn device_or_skip(test: &str) -> Option<Device> {
    match Device::try_count() {
        Ok(n) if n > 0 => {}
        other => {
            eprintln!("SKIP {test}: no CUDA device ({other:?})");
            return None;
        }
    }
    if !nvrtc_or_skip(test) {
        return None;
    }
    Some(Device::open(0).expect("a device is present but cannot be opened"))
}

/// [`device_or_skip`], also skipping when device 0's compute capability is not `cc` (`needs`
/// says what requires it and ends the SKIP line).
#[allow(dead_code)]
pub fn device_with_cc_or_skip(test: &str, cc: (u32, u32), needs: &str) -> Option<Device> {
    let dev = device_or_skip(test)?;
    let info = dev.info();
    if info.compute_capability != cc {
        eprintln!(
            "SKIP {test}: device 0 ({}) is sm_{}{}, {needs}",
            info.name, info.compute_capability.0, info.compute_capability.1
        );
        return None;
    }
    Some(dev)
}

/// [`device_or_skip`] and a new stream on the device.
#[allow(dead_code)]
pub fn gpu_or_skip(test: &str) -> Option<(Device, Stream)> {
    let dev = device_or_skip(test)?;
    let stream = dev.new_stream().expect("stream");
    Some((dev, stream))
}

/// Stored bytes of a tensor and the f64 values they hold.
#[allow(dead_code)]
pub struct HostTensor {
    /// The little-endian bytes to upload.
    pub bytes: Vec<u8>,
    /// The value of every element as the GPU reads it.
    pub vals: Vec<f64>,
}

/// `x` rounded to `dtype`: its stored bytes and their f64 values.
#[allow(dead_code)]
pub fn encode(dtype: DType, x: &[f32]) -> HostTensor {
    let mut bytes = Vec::with_capacity(x.len() * dtype.size_bytes());
    let mut vals = Vec::with_capacity(x.len());
    for &v in x {
        match dtype {
            DType::F16 => {
                let h = f16::from_f32(v);
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
                vals.push(h.to_f64());
            }
            DType::Bf16 => {
                let h = bf16::from_f32(v);
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
                vals.push(h.to_f64());
            }
            DType::F32 | DType::Tf32 => {
                bytes.extend_from_slice(&v.to_le_bytes());
                vals.push(v as f64);
            }
        }
    }
    HostTensor { bytes, vals }
}

/// Guard bytes after every tensor (and before it when offset) that must stay untouched.
#[allow(dead_code)]
pub const GUARD: usize = 64;

/// A buffer holding `t` at byte `offset` (zeros before, guard zeros after).
#[allow(dead_code)]
pub fn upload_at(dev: &Device, s: &Stream, t: &HostTensor, offset: usize) -> DeviceBuffer {
    let mut host = vec![0u8; offset];
    host.extend_from_slice(&t.bytes);
    host.extend(std::iter::repeat_n(0u8, GUARD));
    let mut b = dev.alloc(host.len(), s).expect("alloc input");
    b.upload(&host, s).expect("upload");
    b
}

/// An output buffer of `bytes` at byte `offset`, every byte 0xFF.
#[allow(dead_code)]
pub fn poisoned(dev: &Device, s: &Stream, bytes: usize, offset: usize) -> DeviceBuffer {
    let mut b = dev.alloc(offset + bytes + GUARD, s).expect("alloc output");
    b.fill_u8(0xFF, s).expect("poison");
    b
}

/// Checks the guard bytes around a tensor of `n` elements at byte `offset`, decodes it.
#[allow(dead_code)]
pub fn unguard(all: &[u8], dtype: DType, offset: usize, n: usize) -> Result<Vec<f64>, String> {
    let end = offset + n * dtype.size_bytes();
    if all.len() < end {
        return Err(format!(
            "output holds {} bytes, expected at least {end}",
            all.len()
        ));
    }
    if let Some(i) = all[..offset]
        .iter()
        .chain(&all[end..])
        .position(|&x| x != 0xFF)
    {
        return Err(format!("guard byte {i} outside the tensor was overwritten"));
    }
    Ok(decode_output(&all[offset..end], dtype))
}

/// Prints `PASS {name}: worst scaled error ...` or `FAIL {name}: {error}` for one case of a
/// case table, counting failures; panics when the error came from the kernel (a fault leaves the
/// context unusable, so the cases after it would fail for the wrong reason).
#[allow(dead_code)]
pub fn report_case(name: &str, result: Result<f64, String>, failures: &mut usize) {
    match result {
        Ok(worst) => println!("PASS {name}: worst scaled error {worst:.2e}"),
        Err(e) => {
            println!("FAIL {name}: {e}");
            *failures += 1;
            if e.starts_with("kernel:") {
                panic!("{name}: the context is unusable after a kernel fault: {e}");
            }
        }
    }
}
