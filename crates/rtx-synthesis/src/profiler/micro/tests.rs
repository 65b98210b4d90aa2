//! Compile checks of the micro-benchmark kernels (NVRTC, no GPU) and their constraints.

use super::*;
use crate::aot::compile;
use crate::aot::nvrtc_or_skip;
use crate::DType;

/// Compiles `k` for `arch` and checks ptxas' report: an entry of that name, no spills, no stack,
/// and no wgmma serialization warning. `None` (with a printed SKIP reason) when the NVRTC log
/// has no ptxas lines: then only the compile itself is checked.
fn compiles_clean(k: &dyn MicroKernel, arch: Arch) -> Option<crate::aot::ResourceUsage> {
    let src = k.emit(arch).unwrap_or_else(|e| panic!("{e}"));
    let c = compile(&src, arch).unwrap_or_else(|e| panic!("{e}"));
    if let Err(why) = c.ptxas_report(&src.entry) {
        eprintln!("SKIP resource checks of {} on {arch}: {why}", src.entry);
        return None;
    }
    let r = c.resources_for(&src.entry)?.clone();
    eprintln!(
        "{arch} {}: {} regs, {} B smem, spills {}/{}, stack {}",
        src.entry,
        r.registers,
        r.shared_bytes,
        r.spill_store_bytes,
        r.spill_load_bytes,
        r.stack_frame_bytes
    );
    assert!(r.is_entry, "{}", c.log);
    assert!(!r.spills(), "{} spills on {arch}:\n{}", src.entry, c.log);
    assert_eq!(
        r.stack_frame_bytes, 0,
        "{} uses a stack:\n{}",
        src.entry, c.log
    );
    assert!(
        !c.log.to_ascii_lowercase().contains("serializ"),
        "{} on {arch}: ptxas serialized wgmma:\n{}",
        src.entry,
        c.log
    );
    Some(r)
}

#[test]
fn every_suite_kernel_compiles_without_spills_for_hopper_and_blackwell() {
    if !nvrtc_or_skip("every_suite_kernel_compiles") {
        return;
    }
    for arch in [Arch::Sm90a, Arch::Sm120] {
        let suite = MicroSuite::for_arch(arch);
        assert_eq!(suite.mma_sync.len(), 3);
        assert_eq!(suite.wgmma.len(), if arch == Arch::Sm90a { 3 } else { 0 });
        let Some(reports) = suite
            .kernels()
            .into_iter()
            .map(|k| compiles_clean(k, arch).map(|r| (k.entry(), r)))
            .collect::<Option<std::collections::HashMap<String, crate::aot::ResourceUsage>>>()
        else {
            continue; // compiled, but no ptxas lines to check (reason printed above)
        };
        for k in suite.kernels() {
            let r = &reports[&k.entry()];
            assert!(
                r.registers > 0 || k.entry() == "rtx_micro_empty",
                "{}",
                k.entry()
            );
        }
        // The register budget implied by each kernel's launch shape holds.
        for e in &suite.mma_sync {
            let r = &reports[&e.kernel.entry()];
            assert!(r.registers * e.kernel.block * e.blocks_per_sm <= 65536);
        }
        for e in &suite.wgmma {
            let r = &reports[&e.kernel.entry()];
            assert!(
                r.registers >= e.kernel.accumulators_per_thread(),
                "the accumulator lives in registers"
            );
            assert!(r.registers * 128 * e.blocks_per_sm <= 65536);
            assert_eq!(r.shared_bytes, e.kernel.smem_bytes());
        }
        let f = &reports[&suite.fma.kernel.entry()];
        assert!(f.registers * suite.fma.kernel.block * suite.fma.blocks_per_sm <= 65536);
    }
}

#[test]
fn wgmma_is_sm90a_only_and_mma_sync_needs_sm80() {
    let w = WgmmaKernel {
        dtype: DType::Bf16,
        n: 256,
        unroll: 8,
        min_blocks_per_sm: 2,
    };
    assert!(w.emit(Arch::Sm90a).is_ok());
    for arch in [Arch::Sm90, Arch::Sm120, Arch::Sm80] {
        let e = w.emit(arch).unwrap_err();
        assert!(e.reason.contains("sm_90a"), "{e}");
    }
    let m = MmaSyncKernel {
        dtype: DType::F16,
        accumulators: 8,
        unroll: 2,
        block: 256,
        min_blocks_per_sm: 4,
    };
    assert!(m.emit(Arch::Sm80).is_ok());
    assert!(m.emit(Arch::Sm75).unwrap_err().reason.contains("sm_80"));
    assert!(MicroSuite::for_arch(Arch::Sm75).mma_sync.is_empty());
    assert!(MicroSuite::for_arch(Arch::Sm120).wgmma.is_empty());
}

#[test]
fn constraints_name_the_bad_parameter() {
    let bad_block = CopyKernel {
        unroll: 4,
        block: 100,
        hint: CacheHint::Default,
    };
    assert!(bad_block
        .check(Arch::Sm90a)
        .unwrap_err()
        .reason
        .contains("100"));
    let bad_unroll = CopyKernel {
        unroll: 0,
        ..bad_block
    };
    assert!(bad_unroll.check(Arch::Sm90a).is_err());
    let f = FmaKernel {
        chains: 16,
        unroll: 16,
        block: 1024,
        min_blocks_per_sm: 4,
    };
    assert!(f.check(Arch::Sm90a).unwrap_err().reason.contains("2048"));
    let m = MmaSyncKernel {
        dtype: DType::F32,
        accumulators: 8,
        unroll: 2,
        block: 256,
        min_blocks_per_sm: 4,
    };
    assert!(m.check(Arch::Sm90a).unwrap_err().reason.contains("f32"));
    for n in [0, 12, 264] {
        let w = WgmmaKernel {
            dtype: DType::F16,
            n,
            unroll: 8,
            min_blocks_per_sm: 2,
        };
        assert!(w
            .check(Arch::Sm90a)
            .unwrap_err()
            .reason
            .contains("multiple of 8"));
    }
}

#[test]
fn work_accounting() {
    let m = MmaSyncKernel {
        dtype: DType::Tf32,
        accumulators: 8,
        unroll: 2,
        block: 256,
        min_blocks_per_sm: 4,
    };
    assert_eq!(m.k(), 8);
    assert_eq!(
        m.flops_per_warp(10),
        2.0 * 16.0 * 8.0 * 8.0 * 8.0 * 2.0 * 10.0
    );
    assert_eq!(m.expected_ones(3), (8 * 4 * 8 * 2 * 3) as f32);
    assert!(m
        .instruction()
        .starts_with("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
    let w = WgmmaKernel {
        dtype: DType::Bf16,
        n: 256,
        unroll: 8,
        min_blocks_per_sm: 2,
    };
    assert_eq!(w.k(), 16);
    assert_eq!(w.accumulators_per_thread(), 128);
    assert_eq!(w.smem_bytes(), 2048 + 8192);
    assert_eq!(w.flops_per_block(1), 2.0 * 64.0 * 256.0 * 16.0 * 8.0);
    assert_eq!(w.expected_ones(2), (128 * 16 * 8 * 2) as f32);
    let f = FmaKernel {
        chains: 4,
        unroll: 2,
        block: 32,
        min_blocks_per_sm: 1,
    };
    assert_eq!(f.flops_per_thread(5), 80.0);
    // The host model: b = 1, c = 1 adds one per FMA step.
    assert_eq!(f.initial(1, 2), 6.0 / 1024.0);
    let want: f32 = (0..4).map(|j| f.initial(1, j) + 10.0).sum();
    assert_eq!(f.expected(1, 5, 1.0, 1.0), want);
}

#[test]
fn entries_are_distinct_per_parameters() {
    let mut names = std::collections::HashSet::new();
    for arch in [Arch::Sm90a, Arch::Sm120, Arch::Sm80] {
        let suite = MicroSuite::for_arch(arch);
        let ks = suite.kernels();
        let local: std::collections::HashSet<String> = ks.iter().map(|k| k.entry()).collect();
        assert_eq!(local.len(), ks.len(), "{arch}: duplicate entry names");
        names.extend(local);
    }
    assert!(names.contains("rtx_micro_wgmma_bf16_n256_u8_m2"));
}
