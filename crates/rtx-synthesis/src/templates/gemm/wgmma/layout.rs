//! Shared-memory layout of one pipeline stage: where every TMA box lands and where every wgmma
//! descriptor points. The code generator emits exactly these offsets, and the tests below check
//! them against a model of the 128B swizzle and of the wgmma canonical layouts (PTX ISA
//! "Shared Memory Matrix Layout"), so a descriptor or box mistake fails on the CPU.
//!
//! Every operand tile is a stack of 128-byte rows (one swizzle span: 64 f16/bf16 or 32 tf32
//! elements). K-major operands (row-major A, column-major B, and every tf32 operand as the GEMM
//! launch reads it) store one tile row per M/N index; MN-major f16/bf16 operands store 64 x 64
//! boxes, each 64 K rows of 64 M/N elements, side by side along M/N.
//!
//! One wgmma consumes 32 bytes of K (k16 for 2-byte types, k8 for tf32), so a stage always holds
//! four "K slices" and the K-major descriptor advances 32 bytes per slice for every type.

use super::config::{WgmmaConfig, BLOCK_K_TF32, BOX_BYTES, SWIZZLE_BYTES};

/// Bytes of K one wgmma instruction consumes (k16 x 2 bytes, k8 x 4 bytes).
pub const K_SLICE_BYTES: u32 = 32;

/// One TMA copy of a stage: destination offset from the operand's stage base, and the offsets
/// added to the (inner, outer) tile coordinates — `(k0, m0|n0)` for K-major operands,
/// `(m0|n0, k0)` for MN-major ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmaBox {
    /// Byte offset of the box in the operand's stage buffer (a multiple of 1024).
    pub smem_offset: u32,
    /// Added to the inner (contiguous) coordinate.
    pub inner: u32,
    /// Added to the outer coordinate.
    pub outer: u32,
    /// Offset of the box origin along M (A) or N (B) from the tile origin: a box whose origin
    /// is past the matrix edge is skipped (it would only feed masked outputs).
    pub mn: u32,
    /// Bytes the box delivers (counted in the stage's mbarrier transaction bytes).
    pub bytes: u32,
}

/// Byte step of a descriptor start address per K slice (one wgmma's K): 32 bytes inside the
/// 128-byte rows of a K-major tile (any type), 16 rows of 128 bytes in an MN-major (2-byte) one.
pub fn k16_step(k_major: bool) -> u32 {
    if k_major {
        K_SLICE_BYTES
    } else {
        16 * SWIZZLE_BYTES
    }
}

/// Rows of one K-major A box: a tile of `bm` rows loads `bm / 64` of them, so a box whose first
/// row is past M is skipped instead of zero-filled. One `bm`-row box per stage ran the same
/// kernel and grid slower the more of its rows lay past M (H100, bf16 NN, N = K = 8192, call
/// CC: the 192 x 64 tile 61.7 us at M = 192 against 71.3 us at M = 160; the 128 x 128 rung
/// 61.0 us at M = 256, 75.3 at 192, 86 at 160). In 64-row boxes the rung's default ran 0.81x ->
/// 1.03x cuBLAS at 192 x 8192^2 and 0.68x -> 0.96x at 160, with interior shapes unchanged
/// (call CE).
pub const A_BOX_ROWS: u32 = 64;

/// The A boxes one CTA loads per stage: `bm / 64` boxes of 64 rows of 128 bytes each (64 M
/// rows of a K-major tile, or 64 K rows of 64 M elements of an MN-major one), box `j` at M
/// offset `64 j`, so the producer skips those past M. For a config far outside the space
/// (which `check` rejects), only the boxes whose offset fits in `u32`.
pub fn a_boxes(c: &WgmmaConfig, k_major: bool) -> Vec<TmaBox> {
    const _: () = assert!(A_BOX_ROWS * SWIZZLE_BYTES == BOX_BYTES);
    (0..c.bm / A_BOX_ROWS)
        .map_while(|j| {
            let smem_offset = j.checked_mul(BOX_BYTES)?;
            let mn = j * A_BOX_ROWS;
            let (inner, outer) = if k_major { (0, mn) } else { (mn, 0) };
            Some(TmaBox {
                smem_offset,
                inner,
                outer,
                mn,
                bytes: BOX_BYTES,
            })
        })
        .collect()
}

/// M elements of one box of an A read into registers ([`super::staging::a_from_registers`]:
/// an M-major tf32 A): one 128-byte swizzle span of 4-byte elements.
pub const A_REGS_BOX_M: u32 = SWIZZLE_BYTES / 4;

/// The A boxes one CTA loads per stage when its A is read into registers: `bm / 32` boxes, each
/// the stage's `bk` K rows of 32 M elements (128 bytes a row, `bk x 128` bytes), box `j` at M
/// offset `32 j` and shared-memory offset `j bk 128`, so 64 rows of A take the same 8 KiB as
/// in every other layout. For a config far outside the space (which `check` rejects), only the
/// boxes whose offset fits in `u32`.
pub fn a_register_boxes(c: &WgmmaConfig) -> Vec<TmaBox> {
    let bytes = c.bk.saturating_mul(SWIZZLE_BYTES);
    (0..c.bm / A_REGS_BOX_M)
        .map_while(|j| {
            let mn = j * A_REGS_BOX_M;
            Some(TmaBox {
                smem_offset: j.checked_mul(bytes)?,
                inner: mn,
                outer: 0,
                mn,
                bytes,
            })
        })
        .collect()
}

/// Byte offset, from a consumer's A stage base, of element (`row`, `k`) of an A read into
/// registers ([`a_register_boxes`] with 32-row K depth): box `row / 32`, K row `k` (128
/// bytes), 16-byte chunk `(row % 32) / 4` XOR `k % 8` (the 128-byte swizzle), word `row % 4`.
pub fn a_register_offset(row: u32, k: u32) -> u32 {
    (row / A_REGS_BOX_M) * (BLOCK_K_TF32 * SWIZZLE_BYTES)
        + k * SWIZZLE_BYTES
        + ((((row % A_REGS_BOX_M) / 4) ^ (k % 8)) << 4)
        + (row % 4) * 4
}

/// The B boxes cluster rank `rank` loads per stage (multicast to the whole cluster when
/// `cluster_m > 1`; each rank loads `1 / cluster_m` of the tile's columns). An MN-major B tile
/// whose `bn` is not a multiple of 64 (160) loads its last 64-column box whole: the columns
/// past the tile are never read by a wgmma. For a config far outside the space (which `check`
/// rejects), offsets saturate and only the MN-major boxes whose offset fits in `u32` are listed.
pub fn b_boxes(c: &WgmmaConfig, k_major: bool, rank: u32) -> Vec<TmaBox> {
    let cl = c.cluster_m.max(1);
    if k_major {
        let part = c.bn / cl;
        let mn = rank.saturating_mul(part);
        vec![TmaBox {
            smem_offset: mn.saturating_mul(SWIZZLE_BYTES),
            inner: 0,
            outer: mn,
            mn,
            bytes: part.saturating_mul(SWIZZLE_BYTES),
        }]
    } else {
        let per = c.bn.div_ceil(64) / cl;
        let first = rank.saturating_mul(per);
        (first..first.saturating_add(per))
            .map_while(|j| {
                Some(TmaBox {
                    smem_offset: j.checked_mul(BOX_BYTES)?,
                    inner: j * 64,
                    outer: 0,
                    mn: j * 64,
                    bytes: BOX_BYTES,
                })
            })
            .collect()
    }
}

/// Offset between consecutive consumer warpgroups' rows in the A stage (same for both majors:
/// 64 rows of a K-major tile and one 64-wide MN-major box are both 8 KiB). 0 in ping-pong mode,
/// where each consumer reads the whole stage (of its own work unit), and in column-split mode,
/// where both read all rows.
pub fn a_consumer_offset(c: &WgmmaConfig) -> u32 {
    if c.pingpong || c.split_n {
        0
    } else {
        c.rows_per_consumer().saturating_mul(SWIZZLE_BYTES)
    }
}

/// Offset between consecutive consumer warpgroups' columns in the B stage: `bn / 2` columns in
/// column-split mode (rows of a K-major tile, or whole 64-column boxes of an MN-major one: 128
/// bytes per column either way), else 0.
pub fn b_consumer_offset(c: &WgmmaConfig) -> u32 {
    if c.split_n {
        c.cols_per_consumer().saturating_mul(SWIZZLE_BYTES)
    } else {
        0
    }
}

/// Descriptor start offset (from the consumer's A base) of m64 block `mi`, k16 slice `kk`
/// (saturating at `u32::MAX` far outside the space).
pub fn a_desc_offset(k_major: bool, mi: u32, kk: u32) -> u32 {
    mi.saturating_mul(64 * SWIZZLE_BYTES)
        .saturating_add(kk.saturating_mul(k16_step(k_major)))
}

/// Descriptor start offset (from the B stage base) of instruction `ni`, k16 slice `kk`
/// (saturating at `u32::MAX` far outside the space).
pub fn b_desc_offset(c: &WgmmaConfig, k_major: bool, ni: u32, kk: u32) -> u32 {
    ni.saturating_mul(c.wgmma_n)
        .saturating_mul(SWIZZLE_BYTES)
        .saturating_add(kk.saturating_mul(k16_step(k_major)))
}

/// K slices (wgmma instructions along K) per stage: 128 bytes / 32 bytes = 4 for every type.
pub fn k16_slices() -> u32 {
    SWIZZLE_BYTES / K_SLICE_BYTES
}

#[cfg(test)]
mod tests {
    use super::super::ptx::descriptor;
    use super::super::tma::{tma_desc_a, tma_desc_b};
    use super::*;
    use crate::templates::gemm::{GemmProblem, Layout};
    use crate::DType;
    use std::collections::HashMap;

    /// The 128-byte swizzle (Swizzle<3,4,3>) on absolute shared-memory byte addresses.
    fn swizzle128(addr: u32) -> u32 {
        addr ^ (((addr >> 7) & 7) << 4)
    }

    /// Address a wgmma reads for element (x = M/N index, y = K index in 0..32/esz) of an operand
    /// of `esz`-byte elements described by `desc`, per the PTX canonical layouts for 128B swizzle:
    /// K-major (in 16-byte units, T = 16/esz elements each) ((8,m),(T,2)):((8T,SBO),(1,T)), i.e.
    /// row x%8 of a 1024-byte atom, 128 bytes a row, K contiguous; MN-major (16-bit only)
    /// ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)).
    fn wgmma_addr_esz(desc: u64, k_major: bool, esz: u32, x: u32, y: u32) -> u32 {
        assert_eq!(desc >> 62, 1, "128B swizzle mode");
        assert_eq!((desc >> 49) & 7, 0, "base offset 0");
        let start = ((desc & 0x3FFF) << 4) as u32;
        let lbo = (((desc >> 16) & 0x3FFF) << 4) as u32;
        let sbo = (((desc >> 32) & 0x3FFF) << 4) as u32;
        assert!(k_major || esz == 2, "MN-major operands are 16-bit only");
        assert!(y * esz < 32, "one wgmma reads 32 bytes of K");
        let off = if k_major {
            (x % 8) * 128 + (x / 8) * sbo + y * esz
        } else {
            (x % 64) * 2 + (x / 64) * lbo + (y % 8) * 128 + (y / 8) * sbo
        };
        swizzle128(start + off)
    }

    fn wgmma_addr(desc: u64, k_major: bool, x: u32, y: u32) -> u32 {
        wgmma_addr_esz(desc, k_major, 2, x, y)
    }

    /// Global element of an operand tile: (M/N index, K index) relative to the tile origin.
    type Elem = (u32, u32);

    /// Simulates the stage's TMA copies of one operand of `esz`-byte elements (box inner extent
    /// 128 bytes): smem address -> tile element.
    fn simulate_tma_esz(
        base: u32,
        boxes: &[TmaBox],
        box_outer: u32,
        k_major: bool,
        esz: u32,
        written: &mut HashMap<u32, Elem>,
    ) -> u32 {
        let mut bytes = 0;
        for b in boxes {
            assert_eq!(
                (base + b.smem_offset) % 1024,
                0,
                "boxes start on swizzle-pattern boundaries"
            );
            for o in 0..box_outer {
                for i in 0..128 / esz {
                    let (inner, outer) = (b.inner + i, b.outer + o);
                    let elem = if k_major {
                        (outer, inner)
                    } else {
                        (inner, outer)
                    };
                    for byte in 0..esz {
                        let addr = swizzle128(base + b.smem_offset + o * 128 + i * esz) + byte;
                        assert!(
                            written.insert(addr, elem).is_none(),
                            "two boxes write smem byte {addr}"
                        );
                    }
                }
            }
            assert_eq!(b.bytes, box_outer * 128, "box byte count");
            assert_eq!(
                b.mn,
                if k_major { b.outer } else { b.inner },
                "box M/N origin"
            );
            bytes += b.bytes;
        }
        bytes
    }

    fn simulate_tma(
        base: u32,
        boxes: &[TmaBox],
        box_outer: u32,
        k_major: bool,
        written: &mut HashMap<u32, Elem>,
    ) -> u32 {
        simulate_tma_esz(base, boxes, box_outer, k_major, 2, written)
    }

    fn check_layout(la: Layout, lb: Layout, c: &WgmmaConfig) {
        check_layout_dtype(DType::Bf16, la, lb, c);
    }

    /// TMA boxes and wgmma descriptors agree for `dtype` (tf32: the operands as the GEMM launch
    /// reads them, i.e. K-major after staging, with 4-byte elements and k8 instructions).
    fn check_layout_dtype(dtype: DType, la: Layout, lb: Layout, c: &WgmmaConfig) {
        let p = GemmProblem::new(1024, 1024, 1024, dtype, la, lb);
        let esz = dtype.size_bytes() as u32;
        let kk_elems = K_SLICE_BYTES / esz;
        let (ak, bk) = (
            super::super::tma::a_is_k_major(&p, c),
            super::super::tma::b_is_k_major(&p, c),
        );
        if dtype == DType::Tf32 {
            assert!(ak && bk, "tf32 operands are always read K-major");
        } else {
            assert_eq!((ak, bk), (la == Layout::Row, lb == Layout::Col));
        }
        let (ta, tb) = (tma_desc_a(&p, c), tma_desc_b(&p, c));
        // A stage and B stage of stage 1 (any 1024-aligned base works).
        let sa = 1024 * 64;
        let sb = sa + c.stages * c.a_stage_bytes();
        let mut a_smem = HashMap::new();
        let mut b_smem = HashMap::new();
        let a_bytes = simulate_tma_esz(sa, &a_boxes(c, ak), ta.box_dims[1], ak, esz, &mut a_smem);
        let mut b_bytes = 0;
        for rank in 0..c.cluster_m {
            b_bytes += simulate_tma_esz(
                sb,
                &b_boxes(c, bk, rank),
                tb.box_dims[1],
                bk,
                esz,
                &mut b_smem,
            );
        }
        assert_eq!(ta.box_dims[0] * esz, 128);
        assert_eq!(tb.box_dims[0] * esz, 128);
        assert_eq!(c.bk * esz, 128, "one stage = one 128-byte K span");
        // The full barrier's expected transaction bytes are exactly what lands in the CTA.
        assert_eq!(a_bytes, c.a_stage_bytes(), "{c:?}");
        // A K-major B of a 160-column tile leaves the last 32 rows of its (whole-box) slot unused.
        let b_want = if bk { c.bn * 128 } else { c.b_stage_bytes() };
        assert_eq!(b_bytes, b_want, "{c:?}");
        assert!(b_bytes <= c.b_stage_bytes());
        for cw in 0..c.consumers {
            let a_base = sa + cw * a_consumer_offset(c);
            for kk in 0..k16_slices() {
                for mi in 0..c.m_iters() {
                    let d = descriptor(a_base + a_desc_offset(ak, mi, kk), ak);
                    for x in 0..64 {
                        for y in 0..kk_elems {
                            let row0 = if c.pingpong || c.split_n {
                                0
                            } else {
                                cw * c.rows_per_consumer()
                            };
                            let want = (row0 + mi * 64 + x, kk * kk_elems + y);
                            let addr = wgmma_addr_esz(d, ak, esz, x, y);
                            assert_eq!(
                                a_smem.get(&addr),
                                Some(&want),
                                "A {la:?} cw {cw} mi {mi} kk {kk} elem ({x},{y}) {c:?}"
                            );
                        }
                    }
                }
                for ni in 0..c.n_iters() {
                    let d = descriptor(
                        sb + cw * b_consumer_offset(c) + b_desc_offset(c, bk, ni, kk),
                        bk,
                    );
                    let col0 = if c.split_n {
                        cw * c.cols_per_consumer()
                    } else {
                        0
                    };
                    for x in 0..c.wgmma_n {
                        for y in 0..kk_elems {
                            let want = (col0 + ni * c.wgmma_n + x, kk * kk_elems + y);
                            let addr = wgmma_addr_esz(d, bk, esz, x, y);
                            assert_eq!(
                                b_smem.get(&addr),
                                Some(&want),
                                "B {lb:?} ni {ni} kk {kk} elem ({x},{y}) {c:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    fn cfg(bm: u32, bn: u32, consumers: u32, wgmma_n: u32, cluster_m: u32) -> WgmmaConfig {
        WgmmaConfig {
            cluster_m,
            persistent: false,
            ..WgmmaConfig::basic(bm, bn, 64, consumers, wgmma_n, 3)
        }
    }

    #[test]
    fn descriptors_read_what_tma_wrote() {
        let configs = [
            cfg(128, 256, 2, 256, 1),
            cfg(128, 256, 2, 128, 2),
            cfg(128, 128, 1, 128, 1),
            cfg(128, 128, 2, 64, 2),
            cfg(256, 128, 2, 128, 1),
            cfg(64, 64, 1, 64, 1),
            cfg(128, 192, 2, 192, 1),
            cfg(64, 256, 1, 128, 2),
            WgmmaConfig {
                pingpong: true,
                ..cfg(128, 128, 2, 128, 1)
            },
            WgmmaConfig {
                pingpong: true,
                ..cfg(64, 256, 2, 256, 1)
            },
            WgmmaConfig {
                pingpong: true,
                split_k: 2,
                ..cfg(64, 128, 2, 64, 2)
            },
            WgmmaConfig {
                split_n: true,
                ..cfg(64, 128, 2, 64, 1)
            },
            WgmmaConfig {
                split_n: true,
                ..cfg(128, 256, 2, 128, 2)
            },
            WgmmaConfig {
                split_n: true,
                ..cfg(128, 256, 2, 64, 1)
            },
            cfg(192, 160, 3, 160, 1),
        ];
        for c in &configs {
            for la in [Layout::Row, Layout::Col] {
                for lb in [Layout::Row, Layout::Col] {
                    check_layout(la, lb, c);
                }
            }
        }
        // Two consumers splitting 160 columns (m64n80 wgmmas): K-major B only.
        let sn160 = WgmmaConfig {
            split_n: true,
            ..cfg(192, 160, 2, 80, 1)
        };
        for la in [Layout::Row, Layout::Col] {
            check_layout(la, Layout::Col, &sn160);
        }
    }

    #[test]
    fn tf32_descriptors_read_what_tma_wrote() {
        let t = |c: WgmmaConfig| WgmmaConfig { bk: 32, ..c };
        let configs = [
            t(cfg(128, 256, 2, 256, 1)),
            t(cfg(128, 256, 2, 128, 2)),
            t(cfg(128, 128, 1, 128, 1)),
            t(cfg(64, 64, 1, 64, 1)),
            t(cfg(256, 128, 2, 128, 1)),
            t(cfg(128, 192, 2, 192, 1)),
            WgmmaConfig {
                pingpong: true,
                ..t(cfg(64, 256, 2, 256, 1))
            },
            WgmmaConfig {
                split_n: true,
                ..t(cfg(64, 256, 2, 128, 1))
            },
            t(cfg(192, 160, 3, 160, 1)),
            WgmmaConfig {
                split_n: true,
                ..t(cfg(192, 160, 2, 80, 1))
            },
        ];
        for c in &configs {
            for la in [Layout::Row, Layout::Col] {
                for lb in [Layout::Row, Layout::Col] {
                    check_layout_dtype(DType::Tf32, la, lb, c);
                }
            }
        }
    }

    #[test]
    fn k_major_a_loads_in_64_row_boxes_stacked_like_one_tile() {
        // Box j lands where row 64 j of one bm-row box would, so the wgmma descriptors are
        // unchanged; each box has its own M origin, so the producer can skip those past M.
        let c = cfg(192, 64, 3, 64, 1);
        let boxes = a_boxes(&c, true);
        assert_eq!(boxes.len(), 3);
        for (j, b) in boxes.iter().enumerate() {
            let j = j as u32;
            assert_eq!(
                (b.smem_offset, b.inner, b.outer, b.mn, b.bytes),
                (j * 64 * 128, 0, 64 * j, 64 * j, 64 * 128)
            );
        }
        assert_eq!(a_boxes(&cfg(64, 128, 1, 128, 1), true).len(), 1);
    }

    #[test]
    fn tf32_model_catches_a_16_bit_k_step() {
        // Sanity of the tf32 model: reading element (x, y) with 2-byte K steps misses it.
        let c = WgmmaConfig {
            bk: 32,
            ..cfg(64, 64, 1, 64, 1)
        };
        let mut smem = HashMap::new();
        simulate_tma_esz(0, &a_boxes(&c, true), 64, true, 4, &mut smem);
        let d = descriptor(a_desc_offset(true, 0, 1), true);
        assert_eq!(
            smem.get(&wgmma_addr_esz(d, true, 4, 13, 5)),
            Some(&(13, 8 + 5))
        );
        assert_ne!(
            smem.get(&wgmma_addr_esz(d, true, 2, 13, 5)),
            Some(&(13, 8 + 5))
        );
    }

    #[test]
    fn the_model_catches_a_wrong_stride() {
        // Sanity of the test itself: an MN-major descriptor with the K-major LBO misreads B.
        let c = cfg(64, 128, 1, 128, 1);
        let mut smem = HashMap::new();
        simulate_tma(0, &b_boxes(&c, false, 0), 64, false, &mut smem);
        let good = descriptor(0, false);
        let bad = descriptor(0, true);
        assert_eq!(smem.get(&wgmma_addr(good, false, 70, 9)), Some(&(70, 9)));
        assert_ne!(smem.get(&wgmma_addr(bad, false, 70, 9)), Some(&(70, 9)));
    }

    /// The register-A consumer's lane offsets, as `emit_register_a_lane_consts` writes them in
    /// CUDA: fragment `j` (a0..a3) of `lane` in `warp`, m64 block `mi`, k8 slice `kk`.
    fn register_a_lane_offset(warp: u32, lane: u32, j: u32, mi: u32, kk: u32) -> u32 {
        let rq = lane & 3;
        let rc = 4 * (warp & 1) + (lane >> 4);
        let rbase = (warp >> 1) * a_register_offset(32, 0) + ((lane >> 2) & 3) * 4;
        let (c, q) = (rc + 2 * (j & 1), rq + 4 * (j >> 1));
        rbase + q * 128 + ((c ^ q) << 4) + a_register_offset(64 * mi, 8 * kk)
    }

    /// Every A fragment a register-A consumer loads (tf32, M-major: the transposed product of a
    /// row-major B) is the element the wgmma A-register layout wants there (thread t, register
    /// j: row 16 (t / 32) + (t % 32) / 4 + 8 (j % 2), K t % 4 + 4 (j / 2), per m64 block and
    /// k8 slice), in the stage the TMA model writes from [`a_register_boxes`]: each of the
    /// 32-row, 4 KiB boxes of 32 K rows lands where the fragments read it, for both consumers.
    #[test]
    fn register_a_fragments_read_the_elements_tma_wrote() {
        for (bm, consumers) in [(64u32, 1u32), (128, 2)] {
            let c = WgmmaConfig::basic(bm, 128, BLOCK_K_TF32, consumers, 128, 4);
            let boxes = a_register_boxes(&c);
            assert_eq!(boxes.len() as u32, bm / 32);
            let base = 1024 * 64;
            let mut smem = HashMap::new();
            let bytes = simulate_tma_esz(base, &boxes, BLOCK_K_TF32, false, 4, &mut smem);
            assert_eq!(bytes, c.a_stage_bytes(), "the boxes fill the A stage");
            for cw in 0..consumers {
                let sa = base + cw * a_consumer_offset(&c);
                for warp in 0..4 {
                    for lane in 0..32 {
                        for j in 0..4 {
                            for kk in 0..k16_slices() {
                                let row = 64 * cw + 16 * warp + lane / 4 + 8 * (j & 1);
                                let k = 8 * kk + (lane & 3) + 4 * (j >> 1);
                                let addr = sa + register_a_lane_offset(warp, lane, j, 0, kk);
                                assert_eq!(
                                    smem.get(&addr),
                                    Some(&(row, k)),
                                    "consumer {cw} warp {warp} lane {lane} a{j} slice {kk}"
                                );
                            }
                        }
                    }
                }
            }
        }
        // The second m64 block of a 128-row part starts 64 rows (8 KiB) further on.
        assert_eq!(a_register_offset(64, 8), 2 * 4096 + 8 * 128);
        assert_eq!(
            register_a_lane_offset(0, 0, 0, 1, 0),
            a_register_offset(64, 0)
        );
    }
}
