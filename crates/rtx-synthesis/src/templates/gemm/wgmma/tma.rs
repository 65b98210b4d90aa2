//! Host-side descriptions of the two TMA tensor maps the wgmma GEMM kernel takes.
//!
//! A [`TmaDesc`] is everything `cuTensorMapEncodeTiled` needs except the global address: the
//! launch wrapper adds the buffer pointer and hands it to the driver. The kernel always uses
//! rank-3 maps `(inner, outer, batch)` so one code path serves batched and unbatched problems.

use super::config::{WgmmaConfig, EPI_WARP_ROWS, SWIZZLE_BYTES};
use super::staging::kernel_problem_for;
use crate::templates::gemm::{GemmProblem, Layout};
use crate::DType;
use rtx_runtime::L2Promotion;
use serde::{Deserialize, Serialize};

/// Shared-memory swizzle a TMA copy applies (`CU_TENSOR_MAP_SWIZZLE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TmaSwizzle {
    /// No swizzle.
    None,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle (what the wgmma descriptors of this template assume).
    B128,
}

impl TmaSwizzle {
    /// The swizzle span in bytes (the largest inner box extent it allows); 0 for none.
    pub fn span_bytes(self) -> u64 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 32,
            TmaSwizzle::B64 => 64,
            TmaSwizzle::B128 => 128,
        }
    }

    /// The swizzle whose span is `bytes` (32, 64 or 128), if any.
    pub fn spanning(bytes: u32) -> Option<TmaSwizzle> {
        [TmaSwizzle::B32, TmaSwizzle::B64, TmaSwizzle::B128]
            .into_iter()
            .find(|s| s.span_bytes() == u64::from(bytes))
    }
}

/// The promotion of every map of `p` (measured on an H100 in calls BA, BF and BG, session 14):
/// 128 B for f16/bf16 (at or above 256 B at 512^3-8192^3, 4000^2 x 4096 and 4096^2 x 1000: up
/// to +2% at 4096^2 x 1000), except where `M <= 256`, whose kernels stream B from DRAM once
/// (256 B was 0.8-1.5% ahead at 256 x 8192^2 bf16); tf32 keeps 256 B (not measured with 128).
pub fn l2_promotion(p: &GemmProblem) -> L2Promotion {
    if p.dtype == DType::Tf32 || p.m <= 256 {
        L2Promotion::B256
    } else {
        L2Promotion::B128
    }
}

/// A tiled TMA tensor map without its base address. Dimension 0 is the contiguous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TmaDesc {
    /// Element type (f16, bf16, or tf32 = f32 storage).
    pub dtype: DType,
    /// Tensor rank (3 for this template).
    pub rank: u32,
    /// Extent of each dimension in elements, innermost first (`globalDim`).
    pub dims: [u64; 3],
    /// Byte stride of dimensions 1 and 2 (`globalStrides`; dimension 0 is contiguous).
    pub strides: [u64; 2],
    /// Box (one copy) extent per dimension in elements (`boxDim`).
    pub box_dims: [u32; 3],
    /// Shared-memory swizzle.
    pub swizzle: TmaSwizzle,
    /// L2 fill size around a missing request.
    pub l2_promotion: L2Promotion,
}

/// Why a [`TmaDesc`] breaks a `cuTensorMapEncodeTiled` rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TMA descriptor invalid: {0}")]
pub struct TmaDescError(pub String);

impl TmaDesc {
    /// Checks the driver's documented rules for tiled maps (strides multiple of 16 and < 2^40,
    /// dims in 1..=2^32, boxes in 1..=256, inner box bytes a multiple of 16 and within the swizzle span).
    pub fn validate(&self) -> Result<(), TmaDescError> {
        let e = |s: String| Err(TmaDescError(s));
        let r = self.rank as usize;
        if !(1..=3).contains(&r) {
            return e(format!("rank {} not in 1..=3", self.rank));
        }
        for (i, &d) in self.dims[..r].iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return e(format!("dims[{i}] = {d} not in 1..=2^32"));
            }
        }
        for (i, &s) in self.strides[..r - 1].iter().enumerate() {
            if s % 16 != 0 || s >= 1 << 40 {
                return e(format!(
                    "strides[{i}] = {s} bytes: must be a multiple of 16 and < 2^40"
                ));
            }
        }
        for (i, &b) in self.box_dims[..r].iter().enumerate() {
            if b == 0 || b > 256 {
                return e(format!("box_dims[{i}] = {b} not in 1..=256"));
            }
        }
        let inner = self.box_dims[0] as u64 * self.dtype.size_bytes() as u64;
        if !inner.is_multiple_of(16) {
            return e(format!(
                "inner box extent {inner} bytes is not a multiple of 16"
            ));
        }
        let span = self.swizzle.span_bytes();
        if span != 0 && inner > span {
            return e(format!(
                "inner box extent {inner} bytes exceeds the {span}-byte swizzle span"
            ));
        }
        Ok(())
    }

    /// The `CUtensorMapDataType` enumerator value (`CU_TENSOR_MAP_DATA_TYPE_FLOAT16` = 6,
    /// `BFLOAT16` = 9, `FLOAT32` = 7).
    pub fn cu_data_type(&self) -> u32 {
        match self.dtype {
            DType::F16 => 6,
            DType::Bf16 => 9,
            DType::F32 | DType::Tf32 => 7,
        }
    }

    /// The `CUtensorMapSwizzle` enumerator value (none 0, 32B 1, 64B 2, 128B 3).
    pub fn cu_swizzle(&self) -> u32 {
        match self.swizzle {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 1,
            TmaSwizzle::B64 => 2,
            TmaSwizzle::B128 => 3,
        }
    }
}

/// Whether the GEMM launch of config `c` reads the A of `p` (the problem the kernel computes)
/// with K contiguous: row-major A, and every tf32 A but one read from registers (a column-major
/// tf32 A is otherwise staged K-major first, see [`super::staging`]).
pub(crate) fn a_is_k_major(p: &GemmProblem, c: &WgmmaConfig) -> bool {
    kernel_problem_for(p, c).layout_a == Layout::Row
}

/// Whether the GEMM launch of config `c` reads the B of `p` with K contiguous: column-major B,
/// and every tf32 B.
pub(crate) fn b_is_k_major(p: &GemmProblem, c: &WgmmaConfig) -> bool {
    kernel_problem_for(p, c).layout_b == Layout::Col
}

/// One matrix's map (an operand, or C for the TMA store): `rows x cols` of `dtype` as stored
/// (cols contiguous), leading dimension `ld`, batch stride `stride` (elements; 0 broadcasts) and
/// the `(inner, outer)` box.
fn operand_map(
    p: &GemmProblem,
    dtype: DType,
    rows: u32,
    cols: u32,
    ld: u32,
    stride: u64,
    box_dims: [u32; 2],
) -> TmaDesc {
    let esz = dtype.size_bytes() as u64;
    let row_bytes = ld as u64 * esz;
    // Saturating: a problem whose strides overflow fails `TmaDesc::validate` (strides below
    // 2^40) instead of wrapping to a small, valid-looking stride.
    let (batch_dim, batch_stride) = if p.batch > 1 && stride != 0 {
        (p.batch as u64, stride.saturating_mul(esz))
    } else {
        (1, (rows as u64).saturating_mul(row_bytes))
    };
    TmaDesc {
        dtype,
        rank: 3,
        dims: [cols as u64, rows as u64, batch_dim],
        strides: [row_bytes, batch_stride],
        box_dims: [box_dims[0], box_dims[1], 1],
        swizzle: TmaSwizzle::B128,
        l2_promotion: l2_promotion(p),
    }
}

/// M/N elements of one MN-major box row: one 128-byte swizzle span (64 of a 2-byte type, 32
/// of tf32).
fn mn_box(dtype: DType) -> u32 {
    SWIZZLE_BYTES / dtype.size_bytes() as u32
}

/// The tensor map of A for this problem and config (the kernel's `tmA` parameter), over the
/// operand the GEMM launch reads ([`kernel_problem_for`]: the staged copy for a column-major
/// tf32 A not read from registers).
///
/// K-major A: dims `(K, M, batch)`, box `(bk, 64)` (`bk` elements = 128 bytes) issued
/// `bm / 64` times ([`super::layout::A_BOX_ROWS`]); column-major f16/bf16 A (M-major): dims
/// `(M, K, batch)`, box `(64, bk)` issued `bm / 64` times; column-major tf32 A read from
/// registers: box `(32, bk)` issued `bm / 32` times.
pub fn tma_desc_a(p: &GemmProblem, c: &WgmmaConfig) -> TmaDesc {
    let q = kernel_problem_for(p, c);
    if q.layout_a == Layout::Row {
        let rows = super::layout::A_BOX_ROWS;
        operand_map(&q, q.dtype, q.m, q.k, q.lda, q.stride_a, [c.bk, rows])
    } else {
        operand_map(
            &q,
            q.dtype,
            q.k,
            q.m,
            q.lda,
            q.stride_a,
            [mn_box(q.dtype), c.bk],
        )
    }
}

/// The tensor map of B for this problem and config (the kernel's `tmB` parameter), over the
/// operand the GEMM launch reads ([`kernel_problem_for`]: the staged copy for a row-major tf32 B).
///
/// K-major B: dims `(K, N, batch)`, box `(bk, bn / cluster_m)`; row-major f16/bf16 B
/// (N-major): dims `(N, K, batch)`, box `(64, bk)` issued `bn / 64 / cluster_m` times per block.
pub fn tma_desc_b(p: &GemmProblem, c: &WgmmaConfig) -> TmaDesc {
    let q = kernel_problem_for(p, c);
    if q.layout_b == Layout::Col {
        operand_map(
            &q,
            q.dtype,
            q.n,
            q.k,
            q.ldb,
            q.stride_b,
            [c.bk, c.bn / c.cluster_m.max(1)],
        )
    } else {
        operand_map(
            &q,
            q.dtype,
            q.k,
            q.n,
            q.ldb,
            q.stride_b,
            [mn_box(q.dtype), c.bk],
        )
    }
}

/// Columns of C one TMA-store box spans: one swizzle span ([`WgmmaConfig::epi_span_bytes`]:
/// 128 bytes, or 64 where a consumer's columns are not a multiple of 64) of the output type.
pub fn epi_box_cols(p: &GemmProblem, c: &WgmmaConfig) -> u32 {
    c.epi_span_bytes() / p.epilogue.out_dtype.size_bytes() as u32
}

/// The map of C for the TMA-store epilogue (`tma_store`): `(N, M, batch)` with the row pitch
/// `ldc`, boxes of one warp's 16 rows by one swizzle span (128-byte swizzle, or 64-byte for a
/// 64-byte span). The copy engine clips the boxes at N and M, so the padding columns of a
/// padded `ldc` are never written.
pub fn tma_desc_c(p: &GemmProblem, c: &WgmmaConfig) -> TmaDesc {
    let swizzle =
        TmaSwizzle::spanning(c.epi_span_bytes()).expect("TMA-store spans are 64 or 128 bytes");
    TmaDesc {
        swizzle,
        ..operand_map(
            p,
            p.epilogue.out_dtype,
            p.m,
            p.n,
            p.ldc,
            p.stride_c,
            [epi_box_cols(p, c), EPI_WARP_ROWS],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> WgmmaConfig {
        WgmmaConfig {
            persistent: false,
            ..WgmmaConfig::basic(128, 256, 64, 2, 256, 4)
        }
    }

    #[test]
    fn nt_maps_are_k_major_with_full_tile_boxes() {
        let p = GemmProblem::new(4000, 3000, 1000, DType::Bf16, Layout::Row, Layout::Col);
        let a = tma_desc_a(&p, &cfg());
        assert_eq!(
            (a.dims, a.strides, a.box_dims),
            ([1000, 4000, 1], [2000, 2000 * 4000], [64, 64, 1])
        );
        let b = tma_desc_b(&p, &cfg());
        assert_eq!((b.dims, b.box_dims), ([1000, 3000, 1], [64, 256, 1]));
        a.validate().unwrap();
        b.validate().unwrap();
    }

    #[test]
    fn nn_b_map_is_n_major_and_batched() {
        let p = GemmProblem::nn(256, 512, 128, DType::F16).batched(3);
        let b = tma_desc_b(&p, &cfg());
        assert_eq!(
            (b.dims, b.strides, b.box_dims),
            ([512, 128, 3], [1024, 128 * 512 * 2], [64, 64, 1])
        );
        b.validate().unwrap();
        assert_eq!(b.cu_data_type(), 6);
        assert_eq!(b.cu_swizzle(), 3);
    }

    #[test]
    fn l2_promotion_is_128_bytes_except_for_skinny_m_and_tf32() {
        let c = cfg();
        let maps = |p: &GemmProblem| {
            [tma_desc_a(p, &c), tma_desc_b(p, &c), tma_desc_c(p, &c)].map(|d| d.l2_promotion)
        };
        for d in [DType::Bf16, DType::F16] {
            assert_eq!(
                maps(&GemmProblem::nn(1024, 1024, 1024, d)),
                [L2Promotion::B128; 3]
            );
            assert_eq!(
                maps(&GemmProblem::nn(257, 8192, 8192, d)),
                [L2Promotion::B128; 3]
            );
            assert_eq!(
                maps(&GemmProblem::nn(256, 8192, 8192, d)),
                [L2Promotion::B256; 3]
            );
        }
        let tf = WgmmaConfig { bk: 32, ..cfg() };
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
        assert_eq!(tma_desc_a(&p, &tf).l2_promotion, L2Promotion::B256);
        assert_eq!(tma_desc_b(&p, &tf).l2_promotion, L2Promotion::B256);
    }

    #[test]
    fn tf32_maps_are_k_major_f32_with_128_byte_boxes() {
        let c = WgmmaConfig { bk: 32, ..cfg() };
        // NT: read in place.
        let p = GemmProblem::new(1000, 1000, 1000, DType::Tf32, Layout::Row, Layout::Col);
        let a = tma_desc_a(&p, &c);
        assert_eq!(
            (a.dims, a.strides, a.box_dims),
            ([1000, 1000, 1], [4000, 4000 * 1000], [32, 64, 1])
        );
        assert_eq!(a.cu_data_type(), 7, "FLOAT32");
        assert_eq!(
            a.box_dims[0] as u64 * 4,
            a.swizzle.span_bytes(),
            "inner box = one 128B swizzle span"
        );
        a.validate().unwrap();
        // NN, batched: B is read from its staged N x K copy (pitch K rounded to 4).
        let nn = GemmProblem::nn(256, 300, 1001, DType::Tf32).batched(2);
        let b = tma_desc_b(&nn, &c);
        assert_eq!(
            (b.dims, b.strides, b.box_dims),
            ([1001, 300, 2], [1004 * 4, 300 * 1004 * 4], [32, 256, 1])
        );
        b.validate().unwrap();
        assert!(b_is_k_major(&nn, &c) && a_is_k_major(&nn, &c));
        let tt = GemmProblem::new(256, 300, 1000, DType::Tf32, Layout::Col, Layout::Row);
        assert!(a_is_k_major(&tt, &c) && b_is_k_major(&tt, &c));
        let ta = tma_desc_a(&tt, &c);
        assert_eq!((ta.dims, ta.strides[0]), ([1000, 256, 1], 4000));
    }

    #[test]
    fn validate_rejects_unaligned_strides_and_wide_boxes() {
        let p = GemmProblem::new(64, 64, 100, DType::Bf16, Layout::Row, Layout::Col);
        assert!(tma_desc_a(&p, &cfg())
            .validate()
            .unwrap_err()
            .0
            .contains("strides[0]"));
        let mut d = tma_desc_a(&GemmProblem::nn(64, 64, 64, DType::Bf16), &cfg());
        d.box_dims[0] = 128;
        assert!(d.validate().unwrap_err().0.contains("swizzle span"));
    }

    #[test]
    fn c_map_spans_n_by_m_with_one_swizzle_span_boxes() {
        let mut p = GemmProblem::nn(300, 520, 64, DType::Bf16);
        p.ldc = 528;
        let c = tma_desc_c(&p, &cfg());
        assert_eq!(
            (c.dims, c.strides, c.box_dims),
            ([520, 300, 1], [1056, 1056 * 300], [64, 16, 1])
        );
        assert_eq!(c.swizzle, TmaSwizzle::B128);
        c.validate().unwrap();
        // 160 columns per consumer: 64-byte boxes (32 bf16 columns) with the 64-byte swizzle.
        let t160 = WgmmaConfig {
            bm: 192,
            bn: 160,
            consumers: 3,
            wgmma_n: 160,
            ..cfg()
        };
        let n = tma_desc_c(&p, &t160);
        assert_eq!(
            (n.box_dims, n.swizzle, n.cu_swizzle()),
            ([32, 16, 1], TmaSwizzle::B64, 2)
        );
        n.validate().unwrap();
        p.epilogue.out_dtype = DType::F32;
        let f = tma_desc_c(&p, &cfg());
        assert_eq!(
            (f.box_dims, f.strides[0], f.cu_data_type()),
            ([32, 16, 1], 528 * 4, 7)
        );
        f.validate().unwrap();
        assert_eq!(tma_desc_c(&p, &t160).box_dims, [16, 16, 1]);
    }
}
