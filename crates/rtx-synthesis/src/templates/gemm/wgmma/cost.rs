//! Analytic run-time model of the wgmma GEMM template: which configs are worth measuring first.
//!
//! It predicts a config's time from the problem (M, N, K, batch, dtypes) and the device
//! ([`DeviceFacts`]: SM count, tensor peak, DRAM bandwidth, clock), never from measurements. It
//! is a ranking aid for the guided search, not a performance claim; absolute values are
//! typically 20-40% optimistic.
//!
//! One CTA runs per SM (`__launch_bounds__(threads, 1)` and `setmaxnreg` hand the block the
//! whole register file), so a launch runs `ceil(units / CTAs)` work units back to back on the
//! busiest SM. A unit's mainloop costs, per 64-deep k-block, the slowest of:
//! - tensor math: `2 bm bn 64` flops at the SM's share of the dense peak;
//! - shared-memory traffic: every `wgmma` re-reads its A (64x16) and B (16 x wgmma_n) operands
//!   and TMA writes the stage, all through one port of [`SMEM_BYTES_PER_CLK`] (this is why wide
//!   `wgmma_n` and tall-and-wide tiles are efficient);
//! - SM ingress from L2: the stage's bytes at [`L2_BYTES_PER_CLK_PER_SM`];
//! - Little's law on the ring: with `stages - 1` loads in flight and a load-to-use latency of
//!   [`LOAD_LATENCY_US`], at most `stages - 1` k-blocks arrive per latency;
//!
//! (the math and the slowest data-path bound are joined by a soft maximum, [`SOFT_MAX_EXPONENT`]:
//! a tile whose two are nearly equal loses more to contention than one with slack)
//! where a 2-CTA cluster adds the cross-SM release handshake ([`CLUSTER_HANDSHAKE_US`]) to the
//! data-path bounds (hidden when the math is slower). Around the mainloop: one pipeline fill per CTA
//! (persistent) or per tile (one tile per block), the epilogue's stores (hidden behind the other
//! consumer in ping-pong mode) and, for split-K, the f32 partials written and read back plus the
//! fence/atomic round trips of the fix-up. The whole launch cannot beat reading A and B and
//! writing C once from DRAM, and pays the launch overhead once.

use super::config::{WgmmaConfig, BLOCK_K};
use crate::templates::gemm::GemmProblem;
use crate::tuner::cost::DeviceFacts;

/// Shared-memory bandwidth of one SM, bytes per clock (32 banks x 4 bytes, Hopper tuning guide).
pub const SMEM_BYTES_PER_CLK: f64 = 128.0;
/// Bytes per clock one SM can take in from L2 (Hopper: one 64-byte L2 transfer per clock per SM).
pub const L2_BYTES_PER_CLK_PER_SM: f64 = 64.0;
/// Load-to-use latency of one TMA load from DRAM, including the producer's issue and the
/// consumer's mbarrier wake-up, microseconds (HBM latency on Hopper is ~0.5-0.6 us unloaded).
pub const LOAD_LATENCY_US: f64 = 0.7;
/// Cross-SM release handshake a 2-CTA cluster adds to every k-block whose time the data path
/// (ring, ingress, shared memory) sets, microseconds: the pair refills in lock step. It hides
/// behind math-bound k-blocks. H200, 2026-12-04, `.cta`-semantics arrivals: cluster 2 ran +12%
/// over cluster 1 at 1024^3 (64x128 s8: 11.50 vs 10.24 us) and +0.6% at 4096^3 (128x256); the
/// earlier `.release.cluster` arrivals cost ~0.4 us on every k-block.
pub const CLUSTER_HANDSHAKE_US: f64 = 0.025;
/// What a cluster split-K pair pays per unit beyond its exchanged bytes, microseconds (the
/// peer's push, the owner's wait, the pair's hand-back; fitted, not derived). H200, 2026-12-05
/// (call AQ), 1024^3 bf16/f16 NN: the 128x128 pair (5 stages, TMA store) ran 11.3-11.5 us and
/// the 128x64 pair 12.9 us against 9.0-9.1 us for the 64x128 rung, where a 0.15 us guess
/// (published SM-to-SM latencies) predicted the 128x128 pair 0.7% ahead. This value reproduces
/// the measured 1.25x of the 128x128 pair (the 128x64 pair: 1.50x predicted, 1.42x measured).
pub const DSMEM_EXCHANGE_US: f64 = 1.97;
/// Bytes per clock one SM's consumers store straight from the accumulator registers (4-byte
/// pairs, 8 rows per warp instruction): the H200 saved 3.0-3.7 us per 128x256 bf16 tile
/// (64 KiB) when the TMA-store epilogue replaced these stores (4096^3 and 4096^2 x 1000).
pub const DIRECT_STORE_BYTES_PER_CLK: f64 = 10.0;
/// Bytes of one f32 split-K partial element.
const PARTIAL_BYTES: f64 = 4.0;
/// k16 steps per k-block (`BLOCK_K / 16`).
const K16_PER_BLOCK: f64 = (BLOCK_K / 16) as f64;

/// Exponent of the soft maximum that joins the tensor-math and data-path times of a k-block:
/// when both are close, neither hides the other completely (issue slots, shared-memory port and
/// barrier waits contend). H200, 2026-12-04 (call AB), 4000^2 x 4096 bf16 NN: 192 x 160 with
/// three consumers (math and shared-memory reads within 1.5% of each other) ran 170.0 us against
/// 176.9 us for 128 x 256 (8% apart), 0.961x where the hard maximum predicted 0.939x; with this
/// exponent the model predicts 0.963x.
pub const SOFT_MAX_EXPONENT: f64 = 8.0;

/// `(a^p + b^p)^(1/p)` with p = [`SOFT_MAX_EXPONENT`]: between `max(a, b)` and `2^(1/p) max(a, b)`.
fn soft_max(a: f64, b: f64) -> f64 {
    let hi = a.max(b);
    if hi <= 0.0 {
        return 0.0;
    }
    let lo = a.min(b) / hi;
    hi * (1.0 + lo.powf(SOFT_MAX_EXPONENT)).powf(1.0 / SOFT_MAX_EXPONENT)
}

/// Predicted microseconds of one launch of `c` for `p` on `dev`; `None` when the device has no
/// tensor peak for the input type or the config is degenerate (zero tile or stages).
pub fn estimate_us(p: &GemmProblem, c: &WgmmaConfig, dev: &DeviceFacts) -> Option<f64> {
    let peak = dev.tensor_tflops(p.dtype)? * 1e12;
    if c.bm == 0
        || c.bn == 0
        || c.wgmma_n == 0
        || c.stages < 2
        || c.consumers == 0
        || p.m == 0
        || p.n == 0
    {
        return None;
    }
    let (bm, bn, wn) = (f64::from(c.bm), f64::from(c.bn), f64::from(c.wgmma_n));
    let in_b = p.dtype.size_bytes() as f64;
    let out_b = p.epilogue.out_dtype.size_bytes() as f64;
    let clk = dev.clock_hz();
    let sms = dev.sm_count.max(1);
    let cl = c.cluster_size();
    let split = c.split_k.max(1);
    let ck = c.cluster_k.max(1);
    let kblocks = p.k.div_ceil(BLOCK_K).max(1);
    // A CTA of a cluster split-K pair runs its half of the unit's k-blocks (the larger half).
    let kb_unit = f64::from(kblocks.div_ceil(split).div_ceil(ck));
    let units = c
        .units(p.m, p.n)
        .saturating_mul(u64::from(cl))
        .saturating_mul(u64::from(p.batch.max(1)));

    // One k-block of one unit (seconds).
    let t_math = 2.0 * bm * bn * f64::from(BLOCK_K) / (peak / f64::from(sms));
    let wgmma_per_k16 = f64::from(
        c.consumers_per_unit()
            .saturating_mul(c.m_iters())
            .saturating_mul(c.n_iters()),
    );
    let operand_reads = K16_PER_BLOCK * wgmma_per_k16 * (64.0 * 16.0 * in_b + 16.0 * wn * in_b);
    let stage = (bm + bn) * f64::from(BLOCK_K) * in_b;
    let t_smem = (operand_reads + stage) / SMEM_BYTES_PER_CLK / clk;
    let t_ingress = stage / L2_BYTES_PER_CLK_PER_SM / clk;
    let latency = LOAD_LATENCY_US * 1e-6;
    // The pair of a multicast cluster (B along M, A along N) refills in lock step; cluster
    // split-K CTAs meet only once per unit, in the exchange below.
    let handshake = if c.multicast_size() > 1 {
        CLUSTER_HANDSHAKE_US * 1e-6
    } else {
        0.0
    };
    let t_ring = latency / f64::from(c.stages - 1);
    let t_kblock = soft_max(t_math, t_smem.max(t_ingress).max(t_ring) + handshake);
    let t_main = kb_unit * t_kblock;

    // Direct stores hold the consumers for the whole write; the TMA-store epilogue only for its
    // shared-memory writes, the copy draining behind the next unit (the last one is exposed).
    // A cluster split-K CTA stores only its owner's part of the tile.
    let tile_out = bm * bn * out_b / f64::from(ck);
    let (t_epilogue, t_drain) = if c.tma_store {
        (
            tile_out / SMEM_BYTES_PER_CLK / clk,
            tile_out / L2_BYTES_PER_CLK_PER_SM / clk,
        )
    } else {
        (tile_out / DIRECT_STORE_BYTES_PER_CLK / clk, 0.0)
    };
    let t_fixup = if split > 1 {
        // Write this slice's partial, read the others' (half of them on average), and two L2
        // round trips: the fence + arrival atomic, then the first partial read.
        let partial = bm * bn * PARTIAL_BYTES;
        (partial + partial * f64::from(split - 1) / 2.0) / L2_BYTES_PER_CLK_PER_SM / clk
            + 2.0 * latency
    } else if ck > 1 {
        // Cluster split-K: one consumer's part of the tile (half of it) crosses to the peer SM,
        // at most one L2-ingress worth of bytes per clock, plus the pair's per-unit cost (fitted to call AQ).
        (bm * bn * PARTIAL_BYTES / 2.0) / L2_BYTES_PER_CLK_PER_SM / clk + DSMEM_EXCHANGE_US * 1e-6
    } else {
        0.0
    };

    let slots = u64::from((sms / cl).max(1) * cl);
    let t_sm = if c.persistent {
        let ctas = units.clamp(1, slots);
        let per_cta = units.div_ceil(ctas) as f64;
        if c.pingpong {
            // The two consumers alternate units: one's epilogue hides behind the other's mainloop.
            latency + per_cta * (t_main + t_fixup) + t_epilogue + t_drain
        } else {
            latency + per_cta * (t_main + t_epilogue + t_fixup) + t_drain
        }
    } else {
        let waves = units.div_ceil(slots) as f64;
        waves * (latency + t_main + t_epilogue + t_fixup + t_drain)
    };

    let (m, n, k, batch) = (
        f64::from(p.m),
        f64::from(p.n),
        f64::from(p.k),
        f64::from(p.batch.max(1)),
    );
    let mut dram = batch * ((m * k + n * k) * in_b + m * n * out_b);
    if split > 1 {
        dram += units as f64 * bm * bn * PARTIAL_BYTES * 2.0;
    }
    let t_dram = dram / (dev.dram_gbps.max(1.0) * 1e9);
    Some(t_sm.max(t_dram) * 1e6 + dev.launch_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn h200() -> DeviceFacts {
        DeviceFacts::lookup("NVIDIA H200", (9, 0)).unwrap()
    }

    fn cfg(bm: u32, bn: u32) -> WgmmaConfig {
        WgmmaConfig {
            raster_group: 8,
            ..WgmmaConfig::basic(bm, bn, 64, if bm >= 128 { 2 } else { 1 }, bn, 4)
        }
    }

    fn est(p: &GemmProblem, c: &WgmmaConfig) -> f64 {
        estimate_us(p, c, &h200()).unwrap()
    }

    #[test]
    fn tma_store_and_clusters_rank_as_measured() {
        // H200, 2026-12-04: the TMA-store epilogue won by 6% at 4096^3 and 21% at K = 1000.
        let big = cfg(128, 256);
        let ts = WgmmaConfig {
            tma_store: true,
            ..big.clone()
        };
        for (k, least) in [(4096, 0.03), (1000, 0.10)] {
            let p = GemmProblem::nn(4096, 4096, k, DType::Bf16);
            let (d, t) = (est(&p, &big), est(&p, &ts));
            assert!(
                t < d * (1.0 - least),
                "K={k}: direct {d:.1} us, TMA store {t:.1} us"
            );
        }
        // Cluster 2 costs a little, not the ~0.4 us per k-block of the .release.cluster kernel.
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        let cl = WgmmaConfig {
            cluster_m: 2,
            ..big.clone()
        };
        assert!(est(&p, &cl) < est(&p, &big) * 1.02);
        let small = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        let c64 = WgmmaConfig {
            bm: 64,
            bn: 128,
            consumers: 1,
            wgmma_n: 128,
            stages: 8,
            persistent: false,
            ..big
        };
        let c64cl = WgmmaConfig {
            cluster_m: 2,
            ..c64.clone()
        };
        assert!(
            est(&small, &c64cl) > est(&small, &c64),
            "ring-bound: the handshake shows"
        );
    }

    #[test]
    fn large_square_prefers_the_big_tile() {
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        let big = est(&p, &cfg(128, 256));
        for (bm, bn) in [(64, 64), (64, 128), (128, 64), (128, 128)] {
            assert!(big < est(&p, &cfg(bm, bn)), "{bm}x{bn} beat 128x256");
        }
        // Within 2x of the dense peak's time, never faster than it.
        let ideal = p.flops() / 989.5e12 * 1e6;
        assert!(big > ideal && big < 2.0 * ideal, "{big} vs {ideal}");
    }

    #[test]
    fn fewer_waves_win_when_tiles_barely_fill_the_machine() {
        // 1024^2: 128x256 gives 32 tiles (a quarter of the SMs busy), 128x64 gives 128 (one
        // full wave); the same work per SM in a quarter of the time.
        let p = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        assert!(est(&p, &cfg(128, 64)) < est(&p, &cfg(128, 256)));
        // 133 tiles on 132 SMs is two waves: worse than 128 tiles of the same size.
        let two_waves = GemmProblem::nn(133 * 128, 256, 4096, DType::Bf16);
        let one_wave = GemmProblem::nn(128 * 128, 256, 4096, DType::Bf16);
        let c = WgmmaConfig {
            persistent: false,
            ..cfg(128, 256)
        };
        assert!(est(&two_waves, &c) > 1.5 * est(&one_wave, &c));
    }

    #[test]
    fn tiny_m_penalizes_tall_tiles_and_rewards_split_k_only_without_parallelism() {
        // M = 64: a 256-row tile wastes 3/4 of its math.
        let p = GemmProblem::nn(64, 4096, 4096, DType::Bf16);
        assert!(est(&p, &cfg(64, 128)) < est(&p, &cfg(256, 128)));
        // 64 x 1024 x 16384: only 16 tiles of 64x64; splitting K 4 ways keeps 64 SMs busy.
        let deep = GemmProblem::nn(64, 1024, 16384, DType::Bf16);
        let base = WgmmaConfig {
            consumers: 1,
            ..cfg(64, 64)
        };
        assert!(
            est(
                &deep,
                &WgmmaConfig {
                    split_k: 4,
                    ..base.clone()
                }
            ) < est(&deep, &base)
        );
        // With one full wave already, splitting only adds the fix-up.
        let wide = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        let c = cfg(128, 64);
        assert!(
            est(
                &wide,
                &WgmmaConfig {
                    split_k: 2,
                    ..c.clone()
                }
            ) > est(&wide, &c)
        );
    }

    #[test]
    fn shallow_rings_and_narrow_wgmma_cost_time() {
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        let c = WgmmaConfig {
            consumers: 1,
            ..cfg(64, 64)
        };
        assert!(
            est(
                &p,
                &WgmmaConfig {
                    stages: 2,
                    ..c.clone()
                }
            ) > 2.0 * est(&p, &WgmmaConfig { stages: 6, ..c })
        );
        let wide = cfg(128, 256);
        assert!(
            est(
                &p,
                &WgmmaConfig {
                    wgmma_n: 128,
                    ..wide.clone()
                }
            ) > est(&p, &wide)
        );
        // The model gives multicast no gain (none was measured): a cluster never ranks ahead.
        assert!(
            est(
                &p,
                &WgmmaConfig {
                    cluster_m: 2,
                    ..wide.clone()
                }
            ) >= est(&p, &wide)
        );
    }

    #[test]
    fn cluster_split_k_ranks_as_measured() {
        // H200 call AQ, 1024^3: the 64x128 rung 9.0-9.1 us, the 128x128 pair 11.3-11.5 us, the
        // 128x64 pair 12.9 us. The model keeps that order and the pair's ~1.25x.
        let p = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        let rung = WgmmaConfig {
            consumers: 1,
            stages: 8,
            tma_store: true,
            raster_group: 1,
            ..cfg(64, 128)
        };
        let pair = WgmmaConfig {
            bm: 128,
            consumers: 2,
            stages: 5,
            cluster_k: 2,
            ..rung.clone()
        };
        let narrow = WgmmaConfig {
            bn: 64,
            wgmma_n: 64,
            stages: 8,
            tma_store: false,
            ..pair.clone()
        };
        let (r, q, n) = (est(&p, &rung), est(&p, &pair), est(&p, &narrow));
        assert!(
            r < q && q < n,
            "rung {r:.2} us, 128x128 pair {q:.2}, 128x64 pair {n:.2}"
        );
        assert!(
            (q / r - 1.25).abs() < 0.05,
            "pair / rung {:.3}, measured 1.25",
            q / r
        );
        // Where the tiles already fill the machine the exchange is pure cost.
        let big = GemmProblem::nn(8192, 8192, 8192, DType::Bf16);
        let whole = WgmmaConfig {
            cluster_k: 1,
            ..pair.clone()
        };
        assert!(est(&big, &pair) > est(&big, &whole));
    }

    #[test]
    fn no_estimate_without_a_tensor_peak_or_for_degenerate_configs() {
        let p = GemmProblem::nn(128, 128, 128, DType::Bf16);
        let mut dev = h200();
        dev.tensor_16bit_tflops = 0.0;
        assert_eq!(estimate_us(&p, &cfg(128, 128), &dev), None);
        assert_eq!(
            estimate_us(
                &p,
                &WgmmaConfig {
                    stages: 1,
                    ..cfg(128, 128)
                },
                &h200()
            ),
            None
        );
        assert_eq!(
            estimate_us(
                &p,
                &WgmmaConfig {
                    wgmma_n: 0,
                    ..cfg(128, 128)
                },
                &h200()
            ),
            None
        );
    }
}
