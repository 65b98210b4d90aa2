//! TMA descriptors: a checked wrapper over `cuTensorMapEncodeTiled` for 2-D row-major tensors.
//!
//! The encoded map is 128 opaque bytes; pass it to a kernel *by value* as a
//! `const __grid_constant__ CUtensorMap` parameter with
//! `KernelArgs::bytes(&map, TENSOR_MAP_ALIGN)`.

use crate::error::RuntimeError;
use crate::raw::{self, TiledArgs};
use cudarc::driver::sys;

/// Size of an encoded tensor map.
pub const TENSOR_MAP_BYTES: usize = 128;
/// Alignment a tensor map parameter needs.
pub const TENSOR_MAP_ALIGN: usize = 64;

/// Element type of the tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TensorMapDtype {
    /// 8-bit unsigned (also usable for fp8 payloads).
    U8,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE single.
    F32,
    /// fp32 storage read as tf32.
    Tf32,
}

impl TensorMapDtype {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            TensorMapDtype::U8 => 1,
            TensorMapDtype::F16 | TensorMapDtype::Bf16 => 2,
            TensorMapDtype::F32 | TensorMapDtype::Tf32 => 4,
        }
    }

    fn raw(self) -> sys::CUtensorMapDataType {
        use sys::CUtensorMapDataType as D;
        match self {
            TensorMapDtype::U8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            TensorMapDtype::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            TensorMapDtype::Bf16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            TensorMapDtype::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            TensorMapDtype::Tf32 => D::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
        }
    }
}

/// Shared-memory swizzle pattern of the loaded tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Swizzle {
    /// No swizzle.
    None,
    /// 32-byte swizzle (inner box extent must be <= 32 bytes).
    B32,
    /// 64-byte swizzle (inner box extent <= 64 bytes).
    B64,
    /// 128-byte swizzle (inner box extent <= 128 bytes).
    B128,
}

impl Swizzle {
    /// The swizzle span in bytes (`None` for no swizzle).
    pub fn span(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    fn raw(self) -> sys::CUtensorMapSwizzle {
        use sys::CUtensorMapSwizzle as S;
        match self {
            Swizzle::None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// L2 promotion of TMA loads: how much the L2 fetches around a request that misses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum L2Promotion {
    /// None.
    None,
    /// 64-byte.
    B64,
    /// 128-byte.
    B128,
    /// 256-byte.
    B256,
}

impl L2Promotion {
    /// The driver's value (`CU_TENSOR_MAP_L2_PROMOTION_*`), for callers encoding maps themselves.
    pub fn raw(self) -> sys::CUtensorMapL2promotion {
        use sys::CUtensorMapL2promotion as L;
        match self {
            L2Promotion::None => L::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            L2Promotion::B64 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            L2Promotion::B128 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            L2Promotion::B256 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }
}

/// A 2-D row-major tensor in global memory and the tile (box) one TMA copy moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TensorMap2d {
    /// Device address of element (0, 0); 16-byte aligned.
    pub address: u64,
    /// Element type.
    pub dtype: TensorMapDtype,
    /// Rows (outer dimension).
    pub rows: u64,
    /// Columns (inner, contiguous dimension).
    pub cols: u64,
    /// Bytes between consecutive rows; multiple of 16 and >= `cols * dtype.size()`.
    pub row_stride_bytes: u64,
    /// Tile rows (1..=256).
    pub box_rows: u32,
    /// Tile columns (1..=256; `box_cols * size` a multiple of 16 and within the swizzle span).
    pub box_cols: u32,
    /// Shared-memory swizzle.
    pub swizzle: Swizzle,
    /// L2 promotion.
    pub l2_promotion: L2Promotion,
    /// Fill out-of-bounds float elements with NaN (instead of zero).
    pub oob_fill_nan: bool,
}

impl TensorMap2d {
    /// A densely packed `rows x cols` tensor with `box_rows x box_cols` tiles, 128-byte L2
    /// promotion and zero fill.
    pub fn new(
        address: u64,
        dtype: TensorMapDtype,
        rows: u64,
        cols: u64,
        box_rows: u32,
        box_cols: u32,
        swizzle: Swizzle,
    ) -> Self {
        TensorMap2d {
            address,
            dtype,
            rows,
            cols,
            row_stride_bytes: cols.saturating_mul(dtype.size()),
            box_rows,
            box_cols,
            swizzle,
            l2_promotion: L2Promotion::B128,
            oob_fill_nan: false,
        }
    }

    /// Checks the driver's documented constraints (pure).
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |reason: String| Err(RuntimeError::TensorMap { reason });
        let es = self.dtype.size();
        if self.address == 0 || !self.address.is_multiple_of(16) {
            return bad(format!(
                "address {:#x} is null or not 16-byte aligned",
                self.address
            ));
        }
        for (name, d) in [("rows", self.rows), ("cols", self.cols)] {
            if d == 0 || d > 1 << 32 {
                return bad(format!("{name} = {d} must be in 1..=2^32"));
            }
        }
        let row_bytes = self.cols * es;
        if !self.row_stride_bytes.is_multiple_of(16) || self.row_stride_bytes >= 1 << 40 {
            return bad(format!(
                "row stride {} bytes must be a multiple of 16 and < 2^40",
                self.row_stride_bytes
            ));
        }
        if self.rows > 1 && self.row_stride_bytes < row_bytes {
            return bad(format!(
                "row stride {} bytes is smaller than a row ({} x {} bytes)",
                self.row_stride_bytes, self.cols, es
            ));
        }
        for (name, b) in [("box_rows", self.box_rows), ("box_cols", self.box_cols)] {
            if b == 0 || b > 256 {
                return bad(format!("{name} = {b} must be in 1..=256"));
            }
        }
        let inner = self.box_cols as u64 * es;
        if !inner.is_multiple_of(16) {
            return bad(format!(
                "inner box extent {inner} bytes ({} x {es}) must be a multiple of 16",
                self.box_cols
            ));
        }
        if let Some(span) = self.swizzle.span() {
            if inner > span {
                return bad(format!(
                    "inner box extent {inner} bytes exceeds the {span}-byte swizzle span"
                ));
            }
        }
        Ok(())
    }
}

/// Encodes a tiled 2-D tensor map (validated first); returns the 128 bytes to pass by value.
pub fn encode_tensor_map_2d(desc: &TensorMap2d) -> Result<[u8; TENSOR_MAP_BYTES], RuntimeError> {
    desc.validate()?;
    raw::init()?;
    raw::tensor_map_encode_tiled(&TiledArgs {
        dtype: desc.dtype.raw(),
        address: desc.address,
        dims: [desc.cols, desc.rows],
        stride_bytes: desc.row_stride_bytes.max(desc.cols * desc.dtype.size()),
        box_dims: [desc.box_cols, desc.box_rows],
        swizzle: desc.swizzle.raw(),
        l2: desc.l2_promotion.raw(),
        oob_nan: desc.oob_fill_nan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> TensorMap2d {
        TensorMap2d::new(
            0x1000_0000,
            TensorMapDtype::Bf16,
            4096,
            4096,
            128,
            64,
            Swizzle::B128,
        )
    }

    fn reason(d: TensorMap2d) -> String {
        match d.validate() {
            Err(RuntimeError::TensorMap { reason }) => reason,
            other => panic!("expected TensorMap error, got {other:?}"),
        }
    }

    #[test]
    fn accepts_common_gemm_tiles() {
        assert!(ok().validate().is_ok());
        let f32_tile =
            TensorMap2d::new(0x2000, TensorMapDtype::F32, 100, 36, 64, 32, Swizzle::B128);
        assert!(f32_tile.validate().is_ok());
        assert_eq!(f32_tile.row_stride_bytes, 144);
    }

    #[test]
    fn rejects_violations() {
        assert!(reason(TensorMap2d {
            address: 0x1008,
            ..ok()
        })
        .contains("aligned"));
        assert!(reason(TensorMap2d {
            box_cols: 128,
            ..ok()
        })
        .contains("swizzle span"));
        assert!(reason(TensorMap2d {
            box_cols: 4,
            ..ok()
        })
        .contains("multiple of 16"));
        assert!(reason(TensorMap2d {
            box_rows: 257,
            ..ok()
        })
        .contains("box_rows"));
        assert!(reason(TensorMap2d {
            row_stride_bytes: 8200,
            ..ok()
        })
        .contains("row stride"));
        assert!(reason(TensorMap2d {
            row_stride_bytes: 4096,
            ..ok()
        })
        .contains("smaller"));
        assert!(reason(TensorMap2d { rows: 0, ..ok() }).contains("rows"));
        assert!(reason(TensorMap2d {
            swizzle: Swizzle::B32,
            ..ok()
        })
        .contains("32-byte"));
    }
}
