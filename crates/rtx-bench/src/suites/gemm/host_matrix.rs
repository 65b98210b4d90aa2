//! Host copies of GEMM operands in their storage type, with random fill and device transfer.

use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::Rng;
use rtx_runtime::{DeviceBuffer, RuntimeError, Stream};
use rtx_synthesis::DType;

/// A matrix buffer as stored on the device.
#[derive(Debug, Clone, PartialEq)]
pub enum HostMatrix {
    /// f32 storage (F32 and Tf32).
    F32(Vec<f32>),
    /// f16 storage.
    F16(Vec<f16>),
    /// bf16 storage.
    Bf16(Vec<bf16>),
}

impl HostMatrix {
    /// `elems` values uniform in [-1, 1), rounded to the storage type of `dtype`.
    pub fn random(dtype: DType, elems: usize, rng: &mut SmallRng) -> HostMatrix {
        let mut next = || rng.random_range(-1.0f32..1.0);
        match dtype {
            DType::F32 | DType::Tf32 => HostMatrix::F32((0..elems).map(|_| next()).collect()),
            DType::F16 => HostMatrix::F16((0..elems).map(|_| f16::from_f32(next())).collect()),
            DType::Bf16 => HostMatrix::Bf16((0..elems).map(|_| bf16::from_f32(next())).collect()),
        }
    }

    /// Element count.
    pub fn len(&self) -> usize {
        match self {
            HostMatrix::F32(v) => v.len(),
            HostMatrix::F16(v) => v.len(),
            HostMatrix::Bf16(v) => v.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        let size = match self {
            HostMatrix::F32(_) => 4,
            HostMatrix::F16(_) | HostMatrix::Bf16(_) => 2,
        };
        self.len() * size
    }

    /// Element `i` widened to f64.
    pub fn get(&self, i: usize) -> f64 {
        match self {
            HostMatrix::F32(v) => v[i] as f64,
            HostMatrix::F16(v) => v[i].to_f64(),
            HostMatrix::Bf16(v) => v[i].to_f64(),
        }
    }

    /// Copies into the start of `buf`.
    pub fn upload(&self, buf: &mut DeviceBuffer, stream: &Stream) -> Result<(), RuntimeError> {
        match self {
            HostMatrix::F32(v) => buf.upload(v, stream),
            HostMatrix::F16(v) => buf.upload(v, stream),
            HostMatrix::Bf16(v) => buf.upload(v, stream),
        }
    }

    /// Downloads `buf` as `dtype`'s storage type.
    pub fn download(
        dtype: DType,
        buf: &DeviceBuffer,
        stream: &Stream,
    ) -> Result<HostMatrix, RuntimeError> {
        Ok(match dtype {
            DType::F32 | DType::Tf32 => HostMatrix::F32(buf.download(stream)?),
            DType::F16 => HostMatrix::F16(buf.download(stream)?),
            DType::Bf16 => HostMatrix::Bf16(buf.download(stream)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn random_values_are_in_range_and_rounded() {
        let mut rng = SmallRng::seed_from_u64(7);
        for d in DType::ALL {
            let m = HostMatrix::random(d, 1000, &mut rng);
            assert_eq!(m.len(), 1000);
            assert_eq!(m.bytes(), 1000 * d.size_bytes());
            assert!((0..1000).all(|i| (-1.0..=1.0).contains(&m.get(i))));
        }
        if let HostMatrix::Bf16(v) = HostMatrix::random(DType::Bf16, 10, &mut rng) {
            assert!(v.iter().all(|x| bf16::from_f64(x.to_f64()) == *x));
        } else {
            panic!("bf16 storage expected");
        }
    }
}
