//! Host-side operand data for verification and timing: random values drawn from a seed, stored
//! as the raw bits the GPU reads, readable back as the exact f64 value the GPU sees.
//!
//! [`HostMatrix::seeded`] is counter-based (SplitMix64 of the seed and the element index) and
//! fills in parallel, so a 4096x4096 operand takes milliseconds and the values do not depend on
//! the thread count.

use crate::DType;
use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::Rng;
use rayon::prelude::*;

/// Elements generated per parallel task.
const CHUNK: usize = 1 << 14;

/// SplitMix64 finalizer: a well-mixed 64-bit hash of `x`.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The value of element `i` of the stream `seed`: uniform in `[-1, 1)` (24 random bits).
fn unit(seed: u64, i: u64) -> f32 {
    let h = mix64(seed ^ mix64(i));
    ((h >> 40) as f32) * (2.0 / 16_777_216.0) - 1.0
}

/// One operand on the host, in its device encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatrix {
    /// 2-byte elements (f16 or bf16 bits).
    Half {
        /// f16 or bf16.
        dtype: DType,
        /// Raw bits.
        bits: Vec<u16>,
    },
    /// f32 elements (f32 and tf32 storage).
    Single(Vec<f32>),
}

impl HostMatrix {
    /// `len` values uniform in `[-scale, scale)` from `rng`, rounded to `dtype`.
    pub fn random(rng: &mut SmallRng, len: usize, dtype: DType, scale: f32) -> HostMatrix {
        match dtype {
            DType::Bf16 => HostMatrix::Half {
                dtype,
                bits: (0..len)
                    .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0) * scale).to_bits())
                    .collect(),
            },
            DType::F16 => HostMatrix::Half {
                dtype,
                bits: (0..len)
                    .map(|_| f16::from_f32(rng.random_range(-1.0f32..1.0) * scale).to_bits())
                    .collect(),
            },
            DType::F32 | DType::Tf32 => HostMatrix::Single(
                (0..len)
                    .map(|_| rng.random_range(-1.0f32..1.0) * scale)
                    .collect(),
            ),
        }
    }

    /// `len` values uniform in `[-scale, scale)`, a pure function of `(seed, index)` rounded to
    /// `dtype`, generated in parallel.
    pub fn seeded(seed: u64, len: usize, dtype: DType, scale: f32) -> HostMatrix {
        match dtype {
            DType::Bf16 | DType::F16 => {
                let mut bits = vec![0u16; len];
                bits.par_chunks_mut(CHUNK)
                    .enumerate()
                    .for_each(|(c, chunk)| {
                        for (j, b) in chunk.iter_mut().enumerate() {
                            let x = unit(seed, (c * CHUNK + j) as u64) * scale;
                            *b = if dtype == DType::Bf16 {
                                bf16::from_f32(x).to_bits()
                            } else {
                                f16::from_f32(x).to_bits()
                            };
                        }
                    });
                HostMatrix::Half { dtype, bits }
            }
            DType::F32 | DType::Tf32 => {
                let mut v = vec![0f32; len];
                v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
                    for (j, x) in chunk.iter_mut().enumerate() {
                        *x = unit(seed, (c * CHUNK + j) as u64) * scale;
                    }
                });
                HostMatrix::Single(v)
            }
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostMatrix::Half { bits, .. } => bits.len(),
            HostMatrix::Single(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as the GPU sees it.
    pub fn at(&self, i: usize) -> f64 {
        match self {
            HostMatrix::Half {
                dtype: DType::Bf16,
                bits,
            } => bf16::from_bits(bits[i]).to_f64(),
            HostMatrix::Half { bits, .. } => f16::from_bits(bits[i]).to_f64(),
            HostMatrix::Single(v) => v[i] as f64,
        }
    }

    /// Every element as f64.
    pub fn to_f64(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.at(i)).collect()
    }

    /// The same values as f32 (exact for every stored dtype).
    pub fn to_f32(&self) -> Vec<f32> {
        (0..self.len()).map(|i| self.at(i) as f32).collect()
    }

    /// The raw bytes to upload.
    pub fn bytes(&self) -> &[u8] {
        match self {
            HostMatrix::Half { bits, .. } => bytemuck::cast_slice(bits),
            HostMatrix::Single(v) => bytemuck::cast_slice(v),
        }
    }
}

/// Decodes a downloaded output buffer of `dtype` elements into f64.
pub fn decode_output(bytes: &[u8], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f64())
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| f16::from_bits(u16::from_ne_bytes([c[0], c[1]])).to_f64())
            .collect(),
        DType::F32 | DType::Tf32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_the_device_encoding() {
        for dtype in [DType::Bf16, DType::F16, DType::F32, DType::Tf32] {
            let m = HostMatrix::seeded(7, 100, dtype, 1.0);
            assert_eq!(m.len(), 100);
            let back = decode_output(m.bytes(), dtype);
            assert_eq!(back, m.to_f64(), "{dtype}");
            assert!(back.iter().all(|v| (-1.0..1.0).contains(v)));
            assert!(back.iter().any(|&v| v != back[0]), "not constant");
            assert_eq!(
                HostMatrix::seeded(7, 100, dtype, 1.0),
                m,
                "seeded is deterministic"
            );
            assert_ne!(HostMatrix::seeded(8, 100, dtype, 1.0), m);
        }
    }

    #[test]
    fn seeded_values_are_spread_and_independent_of_chunking() {
        let n = 3 * CHUNK + 17;
        let m = HostMatrix::seeded(42, n, DType::F32, 1.0).to_f64();
        let mean = m.iter().sum::<f64>() / n as f64;
        let var = m.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!(
            (var - 1.0 / 3.0).abs() < 0.02,
            "variance {var} (uniform on [-1,1) has 1/3)"
        );
        // Element i is a pure function of (seed, i): a longer matrix extends a shorter one.
        let short = HostMatrix::seeded(42, CHUNK + 5, DType::F32, 1.0).to_f64();
        assert_eq!(&m[..CHUNK + 5], &short[..]);
        let scaled = HostMatrix::seeded(42, 8, DType::F32, 0.5).to_f64();
        assert!(scaled.iter().all(|x| (-0.5..0.5).contains(x)));
    }

    #[test]
    fn poison_decodes_to_nan() {
        assert!(decode_output(&[0xFF; 8], DType::Bf16)
            .iter()
            .all(|v| v.is_nan()));
        assert!(decode_output(&[0xFF; 8], DType::F16)
            .iter()
            .all(|v| v.is_nan()));
        assert!(decode_output(&[0xFF; 8], DType::F32)
            .iter()
            .all(|v| v.is_nan()));
    }
}
