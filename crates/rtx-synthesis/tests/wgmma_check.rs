//! Property tests of the wgmma template's constraint checking: `check()` agrees with the
//! documented rules on random problems/configs/architectures, and `emit()` never panics.

use proptest::prelude::*;
use rtx_synthesis::templates::gemm::wgmma::{
    tma_desc_a, tma_desc_b, tma_desc_c, WgmmaConfig, WgmmaGemm,
};
use rtx_synthesis::templates::gemm::{Activation, Epilogue, GemmProblem, Layout};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

/// The rules as documented in `wgmma.rs`, re-stated independently.
fn documented_ok(p: &GemmProblem, c: &WgmmaConfig, arch: Arch) -> bool {
    if arch != Arch::Sm90a || p.validate().is_err() {
        return false;
    }
    if !matches!(p.dtype, DType::F16 | DType::Bf16 | DType::Tf32)
        || !matches!(p.epilogue.out_dtype, DType::F32 | DType::F16 | DType::Bf16)
    {
        return false;
    }
    let esz = p.dtype.size_bytes() as u64;
    // 16-byte TMA pitches / batch strides, in elements.
    let align = (16 / esz) as u32;
    // tf32 M/N-major operands are staged (transposed by the pre-pass): no TMA rule on them.
    let tf32 = p.dtype == DType::Tf32;
    let (staged_a, staged_b) = (
        tf32 && p.layout_a == Layout::Col,
        tf32 && p.layout_b == Layout::Row,
    );
    if (!staged_a && !p.lda.is_multiple_of(align))
        || (!staged_b && !p.ldb.is_multiple_of(align))
        || p.batch > 65535
    {
        return false;
    }
    if p.batch > 1 {
        let rows_a = if p.layout_a == Layout::Row { p.m } else { p.k } as u64;
        let rows_b = if p.layout_b == Layout::Row { p.k } else { p.n } as u64;
        for (s, span, staged) in [
            (p.stride_a, rows_a * p.lda as u64, staged_a),
            (p.stride_b, rows_b * p.ldb as u64, staged_b),
        ] {
            if s != 0 && !staged && (s % align as u64 != 0 || s < span || s * esz >= 1 << 40) {
                return false;
            }
        }
    }
    // swap_ab: direct stores (after the split-K fix-up, if any); the tile rules below then apply to the
    // transposed product (M and N, A and B and their layouts swapped). tf32 stages nothing
    // there: it takes a row-major A only, and reads B in place (TMA rules on B).
    if c.swap_ab && (c.tma_store || c.cluster_k != 1 || c.pingpong) {
        return false;
    }
    if c.swap_ab && tf32 {
        let rows_b = if p.layout_b == Layout::Row { p.k } else { p.n } as u64;
        let span = rows_b * p.ldb as u64;
        if p.layout_a != Layout::Row
            || !p.ldb.is_multiple_of(4)
            || (p.batch > 1
                && p.stride_b != 0
                && (!p.stride_b.is_multiple_of(4)
                    || p.stride_b < span
                    || p.stride_b * 4 >= 1 << 40))
        {
            return false;
        }
    }
    // A row-major tf32 B in the transposed product is read into registers: one m64 block per
    // consumer ...
    let a_regs = c.swap_ab && tf32 && p.layout_b == Layout::Row;
    let view = if c.swap_ab { p.transposed() } else { *p };
    let p = &view;
    if c.bk as u64 * esz != 128 {
        return false;
    }
    // Consumers split the tile's rows, or (split_n) its columns; ping-pong ones own it whole.
    let per_tile = if c.pingpong || c.split_n {
        1
    } else {
        c.consumers
    };
    let rows_per_wg = c.bm.checked_div(per_tile).unwrap_or(0);
    let cols_per_wg = if c.split_n { c.bn / 2 } else { c.bn };
    let acc = rows_per_wg / 64 * cols_per_wg / 2;
    // The B slot of a stage holds whole 64-column boxes (160 columns take 192 columns' room).
    let b_cols = if c.tight_b {
        c.bn
    } else {
        c.bn.div_ceil(64) * 64
    };
    // Cluster split-K adds two mbarriers and, after everything else (128-aligned), one
    // consumer's fp32 accumulators as its reduction buffer.
    let ck = c.cluster_k == 2;
    let ring = c.stages * (c.bm + b_cols) * 128 + 16 * c.stages + if ck { 16 } else { 0 };
    // TMA-store epilogue: rows of a 128-byte span, or of 64 bytes when a consumer's columns are
    // not a multiple of 64; two boxes of 64 such rows per consumer after the ring, 1024-aligned.
    let epi_span: u32 = if cols_per_wg % 64 == 0 { 128 } else { 64 };
    let before_red = if c.tma_store {
        ring.div_ceil(1024) * 1024 + c.consumers * 2 * 64 * epi_span
    } else {
        ring
    };
    let smem = before_red.next_multiple_of(if ck { 128 } else { 1 })
        + if ck { acc * 4 * 128 } else { 0 }
        + 1024;
    let osz = p.epilogue.out_dtype.size_bytes() as u64;
    let c_ok = (p.ldc as u64 * osz).is_multiple_of(16)
        && (p.batch <= 1
            || p.stride_c == 0
            || ((p.stride_c * osz).is_multiple_of(16) && p.stride_c * osz < 1 << 40));
    let launch_regs = if c.consumers == 0 {
        0
    } else {
        (65536 / (128 * (1 + c.consumers)) / 8 * 8).min(248)
    };
    // setmaxnreg: the producer drops to 40 registers, the consumers share the rest of the
    // launch allocation (multiple of 8, at most 240) and need 64 beside their accumulators.
    let consumer_regs = if c.consumers == 0 {
        0
    } else {
        ((launch_regs * 128 * (1 + c.consumers)).saturating_sub(128 * 40) / (128 * c.consumers) / 8
            * 8)
        .min(240)
    };
    let kblocks = p.k.div_ceil(c.bk);
    let units = (p.m.div_ceil(c.bm.max(1)).div_ceil(c.cluster_m.max(1)) as u64)
        * p.n.div_ceil(c.bn.max(1)).div_ceil(c.cluster_n.max(1)) as u64
        * c.split_k as u64;
    // B is K-major for NT/TT, and for tf32 always (staged); an MN-major B is loaded in
    // 64-column swizzle boxes and each wgmma starts on a box: several wgmmas along a consumer's
    // columns need wgmma_n a multiple of 64, column-split consumers start on a box too.
    let b_k_major = p.layout_b == Layout::Col || tf32;
    let n_instr = cols_per_wg.checked_div(c.wgmma_n).unwrap_or(0);
    let epi_cols = epi_span / osz as u32;
    (!c.pingpong || (c.consumers == 2 && c.persistent))
        && (c.consumers != 3 || (!c.pingpong && !c.split_n))
        && (!c.split_n || (c.consumers == 2 && !c.pingpong && cols_per_wg % 16 == 0))
        && (b_k_major
            || ((n_instr <= 1 || c.wgmma_n.is_multiple_of(64))
                && (!c.split_n || cols_per_wg % 64 == 0)))
        && (!c.tma_store || cols_per_wg % epi_cols == 0)
        && (1..=16).contains(&c.split_k)
        && c.split_k <= kblocks
        && (c.split_k == 1 || acc + 40 < launch_regs)
        && units * (c.cluster_m as u64) * (c.cluster_n.max(1) as u64) * (c.cluster_k.max(1) as u64)
            < i32::MAX as u64
        && (1..=2).contains(&c.cluster_k)
        && (!ck
            || (c.consumers == 2
                && !c.pingpong
                && c.cluster_m == 1
                && c.split_k == 1
                && kblocks >= 2))
        && (1..=3).contains(&c.consumers)
        && [64, 128, 192, 256].contains(&c.bm)
        && c.bm.is_multiple_of(64 * per_tile)
        && [64, 80, 128, 160, 192, 256].contains(&c.bn)
        && c.wgmma_n.is_multiple_of(16)
        && (16..=256).contains(&c.wgmma_n)
        && cols_per_wg % c.wgmma_n == 0
        && acc <= 128
        && (!a_regs || rows_per_wg == 64)
        // ... and at most 80 accumulators beside a split-K fix-up.
        && (!a_regs || c.split_k == 1 || acc <= 80)
        && consumer_regs >= acc + 64
        && (2..=12).contains(&c.stages)
        && (!c.tma_store || (c.split_k == 1 && c_ok))
        && (1..=2).contains(&c.cluster_m)
        && (c.cluster_m == 1 || c.bn.is_multiple_of(128) || (c.bn == 160 && b_k_major))
        && (!c.tight_b || b_k_major)
        // cluster_n: the pair splits A's 64-row boxes and shares one tile row.
        && (1..=2).contains(&c.cluster_n)
        && (c.cluster_n == 1
            || (c.bm.is_multiple_of(128) && c.cluster_m == 1 && c.cluster_k == 1 && c.split_k == 1))
        && (1..=64).contains(&c.raster_group)
        && smem <= 227 * 1024
}

fn arb_dtype() -> impl Strategy<Value = DType> {
    prop_oneof![1 => Just(DType::F32), 3 => Just(DType::Tf32), 3 => Just(DType::F16), 3 => Just(DType::Bf16)]
}

/// A dimension: mostly a multiple of 8 (so packed leading dimensions are TMA-aligned), sometimes odd.
fn arb_dim() -> impl Strategy<Value = u32> {
    prop_oneof![7 => (1u32..600).prop_map(|d| d * 8), 1 => 1u32..5000]
}

fn arb_pad() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(0u32), 2 => Just(8), 1 => Just(64), 1 => 1u32..24]
}

fn arb_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Row), Just(Layout::Col)]
}

fn arb_act() -> impl Strategy<Value = Activation> {
    prop_oneof![
        Just(Activation::None),
        Just(Activation::Relu),
        Just(Activation::GeluTanh),
        Just(Activation::GeluErf),
        Just(Activation::Silu)
    ]
}

prop_compose! {
    fn arb_problem()(m in arb_dim(), n in arb_dim(), k in arb_dim(), dtype in arb_dtype(), out in prop_oneof![3 => Just(None), 1 => arb_dtype().prop_map(Some)],
                     la in arb_layout(), lb in arb_layout(), pad_a in arb_pad(), pad_b in arb_pad(),
                     batch in prop_oneof![8 => Just(1u32), 4 => 1u32..5, 1 => Just(70000u32)], stride_pad in prop_oneof![Just(0u64), Just(8), 0u64..20], broadcast in any::<bool>(),
                     beta in prop_oneof![Just(0.0f32), Just(0.5f32)], bias in any::<bool>(), act in arb_act(), residual in any::<bool>())
                     -> GemmProblem {
        let mut p = GemmProblem::new(m, n, k, dtype, la, lb);
        p.lda += pad_a;
        p.ldb += pad_b;
        p.batch = batch;
        let (ra, rb) = (if la == Layout::Row { m } else { k } as u64, if lb == Layout::Row { k } else { n } as u64);
        p.stride_a = if broadcast { 0 } else { ra * p.lda as u64 + stride_pad };
        p.stride_b = rb * p.ldb as u64 + if stride_pad % 3 == 0 { 8 } else { 0 };
        p.stride_c = m as u64 * n as u64;
        p.epilogue = Epilogue { alpha: 1.0, beta, bias, activation: act, residual, out_dtype: out.unwrap_or(if dtype == DType::Tf32 { DType::F32 } else { dtype }) };
        p
    }
}

prop_compose! {
    fn arb_config()(bm in prop_oneof![3 => Just(64u32), 3 => Just(128), 1 => Just(192), 3 => Just(256), 1 => Just(32)],
                    bn in prop_oneof![3 => Just(64u32), 1 => Just(80), 3 => Just(128), 1 => Just(160), 2 => Just(192), 3 => Just(256), 1 => Just(96), 1 => Just(512)],
                    bk in prop_oneof![5 => Just(64u32), 3 => Just(32), 1 => Just(16)], consumers in prop_oneof![1 => Just(0u32), 5 => 1u32..3, 1 => Just(3)],
                    wgmma_n in prop_oneof![4 => Just(64u32), 3 => Just(128), 1 => Just(192), 2 => Just(256), 1 => Just(96), 1 => Just(80), 1 => Just(160), 1 => Just(40), 1 => Just(320)],
                    stages in prop_oneof![6 => 2u32..7, 2 => 7u32..13, 1 => Just(1), 1 => Just(13)], cluster_m in prop_oneof![6 => 1u32..3, 1 => Just(3)],
                    persistent in any::<bool>(), raster_group in prop_oneof![6 => 1u32..65, 1 => Just(0), 1 => Just(65)],
                    split_k in prop_oneof![6 => Just(1u32), 3 => 2u32..5, 1 => Just(16), 1 => Just(0), 1 => Just(17)],
                    pingpong in prop_oneof![3 => Just(false), 1 => Just(true)],
                    tma_store in prop_oneof![2 => Just(false), 1 => Just(true)],
                    (split_n, cluster_k) in (prop_oneof![6 => Just(false), 1 => Just(true)], prop_oneof![6 => Just(1u32), 3 => Just(2), 1 => Just(0), 1 => Just(3)]),
                    (swap_ab, cluster_n, tight_b) in (prop_oneof![3 => Just(false), 1 => Just(true)], prop_oneof![6 => Just(1u32), 2 => Just(2), 1 => Just(0), 1 => Just(3)], prop_oneof![3 => Just(false), 1 => Just(true)])) -> WgmmaConfig {
        WgmmaConfig { bm, bn, bk, consumers, wgmma_n, stages, cluster_m, persistent, raster_group, split_k, pingpong, tma_store, split_n, cluster_k, swap_ab, cluster_n, tight_b }
    }
}

/// Half raw random configs, half drawn from the template's own spaces (16-bit and tf32, the
/// experimental configs included; mostly valid).
fn arb_any_config() -> impl Strategy<Value = WgmmaConfig> {
    let t = WgmmaGemm {
        experimental: true,
        ..WgmmaGemm::default()
    };
    let space = t.space(&GemmProblem::nn(64, 64, 64, DType::Bf16), Arch::Sm90a);
    let tf32 = t.space(&GemmProblem::nn(64, 64, 64, DType::Tf32), Arch::Sm90a);
    prop_oneof![2 => arb_config(), 1 => proptest::sample::select(space), 1 => proptest::sample::select(tf32)]
}

/// A problem, a config and an arch; three times in four the config's `bk` is made the problem
/// dtype's (so dtype-matched configs are common), otherwise left as drawn (mismatches tested).
fn arb_case() -> impl Strategy<Value = (GemmProblem, WgmmaConfig, Arch)> {
    (arb_problem(), arb_any_config(), arb_arch(), 0u8..4).prop_map(|(p, mut c, arch, fit)| {
        if fit > 0 {
            if let Some(bk) = WgmmaGemm::block_k(p.dtype) {
                c.bk = bk;
            }
        }
        (p, c, arch)
    })
}

fn arb_arch() -> impl Strategy<Value = Arch> {
    prop_oneof![16 => Just(Arch::Sm90a), 1 => Just(Arch::Sm90), 1 => Just(Arch::Sm80), 1 => Just(Arch::Sm120)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn check_agrees_with_the_documented_rules((p, c, arch) in arb_case()) {
        let t = WgmmaGemm::default();
        let got = t.check(&p, &c, arch);
        prop_assert_eq!(got.is_ok(), documented_ok(&p, &c, arch), "check said {:?}", got);
        if let Err(e) = got {
            prop_assert!(!e.reason.is_empty());
            prop_assert_eq!(e.template.as_str(), "gemm_wgmma");
        }
    }

    #[test]
    fn emit_never_panics_and_matches_check((p, c, arch) in arb_case()) {
        let t = WgmmaGemm::default();
        let checked = t.check(&p, &c, arch).is_ok();
        match t.emit(&p, &c, arch) {
            Ok(src) => {
                prop_assert!(checked);
                prop_assert!(src.code.contains(&"void __launch_bounds__(THREADS, 1)".to_string()));
                prop_assert!(src.code.contains(&src.entry));
                let d = t.launch(&p, &c);
                prop_assert_eq!(d.grid[0] % (c.cluster_m * c.cluster_n * c.cluster_k), 0);
                prop_assert_eq!(d.grid[2], p.batch);
                prop_assert_eq!(d.block[0], c.threads());
                prop_assert_eq!(src.code.contains("st_async_f4(rdst"), c.cluster_k == 2);
                prop_assert!(d.dynamic_smem <= 227 * 1024);
                // The tensor maps a valid problem produces satisfy the driver's rules.
                prop_assert!(tma_desc_a(&p, &c).validate().is_ok());
                prop_assert!(tma_desc_b(&p, &c).validate().is_ok());
                if c.tma_store {
                    prop_assert!(tma_desc_c(&p, &c).validate().is_ok());
                    prop_assert!(src.code.contains("TmaMap tmC)"));
                }
                // tf32: k8 instructions without transpose immediates, the pre-pass exactly for
                // M/N-major operands, inner boxes of 32 four-byte elements.
                // (the transposed product stages nothing: it reads an M-major A into registers).
                let staged = !c.swap_ab && p.dtype == DType::Tf32 && (p.layout_a == Layout::Col || p.layout_b == Layout::Row);
                prop_assert_eq!(src.code.contains("int prepass"), staged);
                prop_assert_eq!(WgmmaGemm::staging_bytes(&p, &c) > 0, staged);
                if p.dtype == DType::Tf32 {
                    let instr = format!("wgmma.mma_async.sync.aligned.m64n{}k8.f32.tf32.tf32", c.wgmma_n);
                    prop_assert!(src.code.contains(&instr));
                    prop_assert!(src.code.contains(", p, 1, 1;"));
                    prop_assert_eq!(tma_desc_a(&p, &c).box_dims[0], 32);
                    prop_assert_eq!(tma_desc_b(&p, &c).box_dims[0], 32);
                    let pre = t.prepass_launch(&p, &c);
                    prop_assert_eq!(pre.is_some(), staged);
                    if let Some(d) = pre {
                        prop_assert_eq!(d.grid[0] % (c.cluster_m * c.cluster_n), 0);
                        prop_assert_eq!(d.grid[2], p.batch);
                        prop_assert!(d.dynamic_smem <= 227 * 1024);
                    }
                }
            }
            Err(e) => {
                prop_assert!(!checked);
                prop_assert!(!e.reason.is_empty());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// NN at small M (the transposed defaults' band): the default passes `check`, and where it
    /// splits K it is the transposed product in at most one wave of (tile, slice) units, each
    /// slice at least 8 k-blocks deep.
    #[test]
    fn small_m_defaults_pass_check_and_split_within_a_wave(
        dtype in prop_oneof![Just(DType::Tf32), Just(DType::Bf16), Just(DType::F16)],
        m in 1u32..=256,
        n8 in 1u32..=2048,
        k8 in 1u32..=2048,
        batch in 1u32..=3,
    ) {
        let t = WgmmaGemm::default();
        let p = GemmProblem::nn(m, 8 * n8, 8 * k8, dtype).batched(batch);
        let c = t.default_config(&p, Arch::Sm90a);
        prop_assert!(t.check(&p, &c, Arch::Sm90a).is_ok(), "{:?}", c);
        if c.split_k > 1 {
            prop_assert!(c.swap_ab);
            let bk = WgmmaGemm::block_k(dtype).unwrap();
            prop_assert!(p.k.div_ceil(bk) / c.split_k >= 8);
            prop_assert!(c.units(p.n, p.m) * u64::from(batch) <= 132);
        }
    }
}

#[test]
fn every_valid_space_config_emits() {
    let t = WgmmaGemm::default();
    for p in [
        GemmProblem::nn(4096, 4096, 4096, DType::Bf16),
        GemmProblem::new(64, 8192, 8192, DType::F16, Layout::Row, Layout::Col),
        GemmProblem::nn(4096, 4096, 4096, DType::Tf32),
        GemmProblem::new(64, 8192, 8192, DType::Tf32, Layout::Col, Layout::Col),
    ] {
        let valid = t.valid_space(&p, Arch::Sm90a);
        assert!(valid.len() > 100, "only {} valid configs", valid.len());
        let k = if p.dtype == DType::Tf32 { 8 } else { 16 };
        for c in &valid {
            let src = t.emit(&p, c, Arch::Sm90a).unwrap();
            assert!(src.code.contains(&format!(
                "wgmma.mma_async.sync.aligned.m64n{}k{k}",
                c.wgmma_n
            )));
        }
    }
}

#[test]
fn the_random_space_exercises_both_outcomes() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let t = WgmmaGemm::default();
    let mut runner = TestRunner::deterministic();
    let strat = arb_case();
    let (mut ok, total) = (0, 4000);
    for _ in 0..total {
        let (p, c, arch) = strat.new_tree(&mut runner).unwrap().current();
        ok += t.check(&p, &c, arch).is_ok() as u32;
    }
    // Both outcomes, each at least 2.5% of the draws (about 4.5% are valid: random problems
    // and raw configs are mostly rejected, the space-drawn configs mostly accepted).
    assert!(
        ok > total / 40 && ok < total * 9 / 10,
        "{ok} of {total} valid: the strategies miss one side"
    );
}
