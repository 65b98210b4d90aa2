//! Helpers shared by the attention tests: 16-bit encoding of inputs, decoding of outputs, and
//! the per-row error measure.

use half::{bf16, f16};
use rtx_synthesis::DType;

/// `x` rounded to `dtype` (f16 or bf16): the stored little-endian bytes and their f64 values.
pub fn encode(dtype: DType, x: &[f32]) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::with_capacity(x.len() * 2);
    let mut vals = Vec::with_capacity(x.len());
    for &v in x {
        let (bits, back) = match dtype {
            DType::F16 => {
                let h = f16::from_f32(v);
                (h.to_bits(), h.to_f64())
            }
            _ => {
                let h = bf16::from_f32(v);
                (h.to_bits(), h.to_f64())
            }
        };
        bytes.extend_from_slice(&bits.to_le_bytes());
        vals.push(back);
    }
    (bytes, vals)
}

/// 16-bit `dtype` values of `bytes` as f64.
pub fn decode(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(2)
        .map(|c| {
            let b = u16::from_le_bytes([c[0], c[1]]);
            match dtype {
                DType::F16 => f16::from_bits(b).to_f64(),
                _ => bf16::from_bits(b).to_f64(),
            }
        })
        .collect()
}

/// `max |got - want| / max(|want|, rms of the row)` over a row (`inf` on a non-finite result).
pub fn row_error(got: &[f64], want: &[f64]) -> f64 {
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64)
        .sqrt()
        .max(1e-6);
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g.is_finite() {
                (g - w).abs() / w.abs().max(rms)
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}
