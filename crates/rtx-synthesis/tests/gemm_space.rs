//! Property tests of the GEMM parameter spaces: `check()` accepts exactly the configs whose
//! independently recomputed shared-memory, alignment, arch and split-K rules hold, and `emit()`
//! never panics and names its entry point.

use proptest::prelude::*;
use rtx_synthesis::templates::gemm::wgmma::{WgmmaConfig, WgmmaGemm};
use rtx_synthesis::templates::gemm::{
    GemmProblem, Layout, MmaConfig, MmaGemm, SimtConfig, SimtGemm,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

fn arch_strategy() -> impl Strategy<Value = Arch> {
    prop::sample::select(Arch::ALL.to_vec())
}

fn layout_strategy() -> impl Strategy<Value = Layout> {
    prop::sample::select(vec![Layout::Row, Layout::Col])
}

/// Random problems with padded (sometimes misaligned) leading dimensions and small batches.
fn problem_strategy(dtypes: Vec<DType>) -> impl Strategy<Value = GemmProblem> {
    (
        1u32..3000,
        1u32..3000,
        1u32..3000,
        prop::sample::select(dtypes),
        layout_strategy(),
        layout_strategy(),
        0u32..9,
        0u32..9,
        0u32..9,
        1u32..4,
    )
        .prop_map(|(m, n, k, d, la, lb, pa, pb, pc, batch)| {
            let mut p = GemmProblem::new(m, n, k, d, la, lb);
            p.lda += pa;
            p.ldb += pb;
            p.ldc += pc;
            let (ea, eb, ec) = (
                p.lda as u64 * k.max(m) as u64,
                p.ldb as u64 * k.max(n) as u64,
                p.ldc as u64 * m as u64,
            );
            p.stride_a = ea;
            p.stride_b = eb;
            p.stride_c = ec;
            p.batched(batch)
        })
}

fn aligned(p: &GemmProblem, v: u64, with_c: bool) -> bool {
    let mut xs = vec![p.lda as u64, p.ldb as u64];
    if with_c {
        xs.push(p.ldc as u64);
    }
    if p.batch > 1 {
        xs.extend([p.stride_a, p.stride_b]);
        if with_c {
            xs.push(p.stride_c);
        }
    }
    xs.iter().all(|x| x % v == 0)
}

/// Shared memory of a SIMT config, from the documented layout (not from the crate's geometry).
fn simt_smem(p: &GemmProblem, c: &SimtConfig) -> u64 {
    let (bm, bn, bk) = (c.bm as u64, c.bn as u64, c.bk as u64);
    let a_k = p.layout_a == Layout::Row;
    let b_k = p.layout_b == Layout::Col;
    // Both pipelines: [bk][mn (+4 when transposed)] tiles per operand; two buffers for the
    // register-staged pipeline, `stages` for the cp.async ring.
    let bufs = if c.stages == 2 { 2 } else { c.stages as u64 };
    bufs * (bk * (bm + if a_k { 4 } else { 0 }) + bk * (bn + if b_k { 4 } else { 0 })) * 4
}

/// Shared memory of an mma config, from the documented layout.
fn mma_smem(p: &GemmProblem, c: &MmaConfig) -> u64 {
    let e = p.dtype.size_bytes() as u64;
    let chunk = 16 / e;
    let tile = |mn: u64, kcontig: bool| -> u64 {
        let (rows, cols) = if kcontig {
            (mn, c.bk as u64)
        } else {
            (c.bk as u64, mn)
        };
        let scalar_tf32 = p.dtype == DType::Tf32 && !kcontig;
        let pad = if scalar_tf32 {
            8
        } else if c.swizzle {
            0
        } else {
            chunk
        };
        rows * (cols + pad)
    };
    let per_stage =
        tile(c.bm as u64, p.layout_a == Layout::Row) + tile(c.bn as u64, p.layout_b == Layout::Col);
    c.stages as u64 * per_stage * e
}

fn max_threads_per_sm(a: Arch) -> u64 {
    match a {
        Arch::Sm75 => 1024,
        Arch::Sm86 | Arch::Sm89 | Arch::Sm120 => 1536,
        _ => 2048,
    }
}

/// Shared memory of a wgmma config from the documented layout: `stages` x (bm + B rows) rows of
/// one 128-byte K span (64 f16/bf16 or 32 tf32 elements; B's slot holds whole 64-column boxes,
/// so `bn` 160 takes 192 rows), 16 bytes of mbarriers per stage, 1 KiB alignment slack; with the
/// TMA-store epilogue the ring is rounded up to 1 KiB and two boxes per consumer follow it, each
/// 64 rows of 128 bytes (64 where a consumer's columns are not a multiple of 64).
fn wgmma_smem(c: &WgmmaConfig) -> u64 {
    let ring =
        c.stages as u64 * (c.bm + c.bn.next_multiple_of(64)) as u64 * 128 + 16 * c.stages as u64;
    if c.tma_store {
        let cols = if c.split_n { c.bn / 2 } else { c.bn };
        let span = if cols % 64 == 0 { 128 } else { 64 };
        ring.div_ceil(1024) * 1024 + c.consumers as u64 * 2 * 64 * span + 1024
    } else {
        ring + 1024
    }
}

/// Whether an operand of `p` is read in place by TMA (not staged by the tf32 pre-pass).
fn wgmma_in_place(p: &GemmProblem) -> (bool, bool) {
    let tf32 = p.dtype == DType::Tf32;
    (
        !(tf32 && p.layout_a == Layout::Col),
        !(tf32 && p.layout_b == Layout::Row),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn wgmma_tf32_space_check_matches_rules(p in problem_strategy(vec![DType::Tf32]), pick in any::<prop::sample::Index>(), arch in prop::sample::select(vec![Arch::Sm90a, Arch::Sm90a, Arch::Sm90a, Arch::Sm120])) {
        let t = WgmmaGemm::default();
        let space = t.space(&p, Arch::Sm90a);
        prop_assert!(!space.is_empty());
        let c = space[pick.index(space.len())].clone();
        prop_assert_eq!(c.bk, 32, "tf32 stages are 32 four-byte elements");
        let (ia, ib) = wgmma_in_place(&p);
        // In-place operands: 16-byte pitches and (batched) non-overlapping 16-byte batch strides.
        let rows_a = if p.layout_a == Layout::Row { p.m } else { p.k } as u64;
        let rows_b = if p.layout_b == Layout::Row { p.k } else { p.n } as u64;
        let strides_ok = |inplace: bool, stride: u64, span: u64| !inplace || p.batch <= 1 || stride == 0 || (stride.is_multiple_of(4) && stride >= span);
        let (rows, cols) = if c.split_n { (c.bm, c.bn / 2) } else if c.pingpong { (c.bm, c.bn) } else { (c.bm / c.consumers, c.bn) };
        let acc = rows / 64 * cols / 2;
        let launch_regs = (65536 / (128 * (1 + c.consumers)) / 8 * 8).min(248);
        // Problem-independent config rules (tile/consumer/stage shapes) are re-stated in
        // tests/wgmma_check.rs; here: the tf32 problem rules, smem and the K-block bound.
        let expect = arch == Arch::Sm90a
            && WgmmaGemm::check_config(&c, Arch::Sm90a).is_ok()
            && (!ia || p.lda % 4 == 0)
            && (!ib || p.ldb % 4 == 0)
            && strides_ok(ia, p.stride_a, rows_a * p.lda as u64)
            && strides_ok(ib, p.stride_b, rows_b * p.ldb as u64)
            && wgmma_smem(&c) <= 227 * 1024
            && c.split_k <= p.k.div_ceil(32)
            && (c.split_k == 1 || acc + 40 <= launch_regs)
            // With the staging pre-pass, the boundary case spills (tf32 NN scan on sm_90a).
            && (c.split_k == 1 || (ia && ib) || acc + 40 < launch_regs)
            // The TMA-store epilogue: 16-byte C pitch (f32 output) and batch stride.
            && (!c.tma_store || (p.ldc % 4 == 0 && (p.batch <= 1 || p.stride_c == 0 || p.stride_c % 4 == 0)));
        let got = t.check(&p, &c, arch);
        prop_assert_eq!(got.is_ok(), expect, "{:?} {:?} {}: {:?}", c, p, arch, got);
        if got.is_ok() {
            let src = t.emit(&p, &c, arch).unwrap();
            let instr = format!("m64n{}k8.f32.tf32.tf32", c.wgmma_n);
            prop_assert!(src.code.contains(&instr));
            prop_assert_eq!(src.code.contains("int prepass"), !(ia && ib));
            prop_assert_eq!(t.launch(&p, &c).dynamic_smem as u64, wgmma_smem(&c));
            prop_assert_eq!(t.prepass_launch(&p, &c).is_some(), !(ia && ib));
        } else {
            prop_assert!(t.emit(&p, &c, arch).is_err());
        }
    }

    #[test]
    fn simt_check_matches_rules(p in problem_strategy(vec![DType::F32]), arch in arch_strategy(), pick in any::<prop::sample::Index>(), vec in prop::sample::select(vec![1u32, 2, 4])) {
        let t = SimtGemm;
        let space = t.space(&p, arch);
        prop_assert!(!space.is_empty());
        // The space offers only the widest legal vector width; probe the others too.
        let c = SimtConfig { vec, ..space[pick.index(space.len())] };
        let threads = (c.bm / c.tm) as u64 * (c.bn / c.tn) as u64;
        let loads = |mn: u32| (mn as u64 * c.bk as u64 / c.vec as u64).div_ceil(threads);
        let staging = if c.stages == 2 { (loads(c.bm) + loads(c.bn)) * c.vec as u64 } else { 0 };
        let regs = (c.tm * c.tn + c.tm + c.tn) as u64 + staging + 28;
        let threads_n = (c.bn / c.tn) as u64;
        let warp_rows = 32 / threads_n.min(8);
        let expect = (c.stages == 2 || arch >= Arch::Sm80)
            && aligned(&p, c.vec as u64, true)
            && simt_smem(&p, &c) <= arch.max_smem_per_block_optin() as u64
            && ((c.bm / c.tm) as u64).is_multiple_of(warp_rows)
            && threads * c.min_blocks as u64 <= max_threads_per_sm(arch)
            && regs <= (65536 / (threads * c.min_blocks as u64)).min(255);
        let got = t.check(&p, &c, arch);
        prop_assert_eq!(got.is_ok(), expect, "{:?} {:?} {}: {:?}", c, p, arch, got);
        if got.is_ok() {
            let src = t.emit(&p, &c, arch).unwrap();
            let head = format!(" {}(", src.entry);
            prop_assert!(src.code.contains(&head), "entry {} missing", src.entry);
            let l = t.launch(&p, &c);
            prop_assert_eq!(l.block[0] as u64, threads);
            prop_assert!(l.grid[0] as u64 * c.bm as u64 * c.bn as u64 >= p.m as u64 * p.n as u64);
            prop_assert_eq!(l.grid[2], p.batch);
            prop_assert_eq!(l.dynamic_smem as u64, simt_smem(&p, &c));
        } else {
            prop_assert!(t.emit(&p, &c, arch).is_err());
        }
    }

    #[test]
    fn mma_check_matches_rules(p in problem_strategy(vec![DType::F16, DType::Bf16, DType::Tf32]), arch in arch_strategy(), pick in any::<prop::sample::Index>()) {
        let t = MmaGemm::default();
        let space = t.space(&p, arch);
        prop_assert!(!space.is_empty());
        let c = space[pick.index(space.len())];
        let chunk = 16 / p.dtype.size_bytes() as u64;
        let (mi, ni) = ((c.bm / c.warps_m / 16) as u64, (c.bn / c.warps_n / 8) as u64);
        let regs = mi * ni * 4 + mi * 4 + ni * 2 + 48;
        let static_smem = if c.split_k > 1 { 16 } else { 0 };
        let expect = arch >= Arch::Sm80
            && aligned(&p, chunk, false)
            && mma_smem(&p, &c) + static_smem <= arch.max_smem_per_block_optin() as u64
            && c.split_k as u64 <= (p.k as u64).div_ceil(c.bk as u64)
            && regs <= 255
            && c.bm % (c.warps_m * 16) == 0
            && c.bn % (c.warps_n * 16) == 0;
        let got = t.check(&p, &c, arch);
        prop_assert_eq!(got.is_ok(), expect, "{:?} {:?} {}: {:?}", c, p, arch, got);
        if got.is_ok() {
            let src = t.emit(&p, &c, arch).unwrap();
            let head = format!(" {}(", src.entry);
            prop_assert!(src.code.contains(&head), "entry {} missing", src.entry);
            prop_assert_eq!(src.code.contains("unsigned char* workspace\n"), c.split_k > 1);
            let l = t.launch(&p, &c);
            prop_assert_eq!(l.grid[1], c.split_k);
            prop_assert_eq!(l.dynamic_smem as u64, mma_smem(&p, &c));
        } else {
            prop_assert!(t.emit(&p, &c, arch).is_err());
        }
    }

    #[test]
    fn defaults_are_valid_when_the_problem_is_accepted(p in problem_strategy(vec![DType::F32, DType::F16, DType::Bf16, DType::Tf32]), arch in arch_strategy()) {
        if p.dtype == DType::F32 {
            let t = SimtGemm;
            let c = t.default_config(&p, arch);
            prop_assert!(t.check(&p, &c, arch).is_ok(), "{:?}", t.check(&p, &c, arch));
        } else if arch >= Arch::Sm80 && aligned(&p, 16 / p.dtype.size_bytes() as u64, false) {
            let t = MmaGemm::default();
            let c = t.default_config(&p, arch);
            prop_assert!(t.check(&p, &c, arch).is_ok(), "{:?}", t.check(&p, &c, arch));
        }
        if arch == Arch::Sm90a && p.dtype != DType::F32 && aligned(&p, 16 / p.dtype.size_bytes() as u64, false) {
            // wgmma's default takes every 16-byte-aligned problem (stride padding keeps batch entries apart).
            let t = WgmmaGemm::default();
            let c = t.default_config(&p, arch);
            prop_assert!(t.check(&p, &c, arch).is_ok(), "{:?}", t.check(&p, &c, arch));
        }
    }
}

#[test]
fn space_sizes() {
    let arch = Arch::Sm90a;
    let big = GemmProblem::nn(4096, 4096, 4096, DType::F32);
    let simt = SimtGemm;
    let (raw, valid) = (
        simt.space(&big, arch).len(),
        simt.valid_space(&big, arch).len(),
    );
    eprintln!("simt 4096^3 f32 on {arch}: {raw} raw, {valid} valid");
    assert!(valid >= 100 && valid <= raw);
    let mma = MmaGemm::default();
    for (name, p) in [
        (
            "4096^3 bf16",
            GemmProblem::nn(4096, 4096, 4096, DType::Bf16),
        ),
        (
            "512x512x8192 f16 (split-K)",
            GemmProblem::nn(512, 512, 8192, DType::F16),
        ),
        (
            "4096^3 tf32",
            GemmProblem::nn(4096, 4096, 4096, DType::Tf32),
        ),
    ] {
        let (raw, valid) = (mma.space(&p, arch).len(), mma.valid_space(&p, arch).len());
        let v120 = mma.valid_space(&p, Arch::Sm120).len();
        eprintln!("mma {name}: {raw} raw, {valid} valid on sm_90a, {v120} on sm_120");
        assert!(valid >= 100 && valid <= raw && v120 <= valid);
    }
    let wg = WgmmaGemm::default();
    for (la, lb) in [
        (Layout::Row, Layout::Row),
        (Layout::Row, Layout::Col),
        (Layout::Col, Layout::Row),
        (Layout::Col, Layout::Col),
    ] {
        let p = GemmProblem::new(4096, 4096, 4096, DType::Tf32, la, lb);
        let (raw, valid) = (wg.space(&p, arch).len(), wg.valid_space(&p, arch).len());
        eprintln!("wgmma 4096^3 tf32 {la:?}{lb:?}: {raw} raw, {valid} valid on sm_90a");
        assert!(valid >= 100 && valid <= raw);
        assert!(wg.valid_space(&p, Arch::Sm120).is_empty());
    }
}
