//! NVRTC compiles of representative GEMM configs for sm_90a and sm_120: no errors, no spills
//! for the default configs, at most 255 registers; compile times and resources are printed.

use rayon::prelude::*;
use rtx_synthesis::aot::{self, ResourceUsage};
use rtx_synthesis::templates::gemm::{
    Activation, GemmProblem, Layout, MmaConfig, MmaGemm, SimtConfig, SimtGemm,
};
use rtx_synthesis::templates::{KernelSource, Template};
use rtx_synthesis::{Arch, DType};

use rtx_synthesis::aot::nvrtc_or_skip;

/// Compiles `src` for `arch`, prints a resource line, asserts <= 255 registers and returns the usage.
fn compile_and_report(src: &KernelSource, arch: Arch) -> ResourceUsage {
    let c = aot::compile(src, arch).unwrap_or_else(|e| panic!("{e}"));
    // A real cubin passes the runtime's structural checks (headers and sections in bounds).
    let (kind, _) = rtx_runtime::prepare_image(&c.cubin).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kind, rtx_runtime::ImageKind::Cubin);
    let r = c
        .resources_for(&src.entry)
        .unwrap_or_else(|| panic!("no ptxas resource lines for {} in:\n{}", src.entry, c.log))
        .clone();
    eprintln!(
        "{arch:7} {:>6.2}s regs={:3} spill_st={} spill_ld={} stack={} {}",
        c.compile_time.as_secs_f64(),
        r.registers,
        r.spill_store_bytes,
        r.spill_load_bytes,
        r.stack_frame_bytes,
        src.entry
    );
    assert!(
        r.is_entry && r.registers > 0,
        "{}: not reported as an entry",
        src.entry
    );
    assert!(
        r.registers <= 255,
        "{}: {} registers",
        src.entry,
        r.registers
    );
    r
}

#[test]
fn simt_representative_configs_compile() {
    if !nvrtc_or_skip("simt_representative_configs_compile") {
        return;
    }
    let t = SimtGemm;
    let mut cases: Vec<(GemmProblem, Option<SimtConfig>)> = Vec::new();
    for (la, lb) in [
        (Layout::Row, Layout::Row),
        (Layout::Col, Layout::Col),
        (Layout::Row, Layout::Col),
        (Layout::Col, Layout::Row),
    ] {
        cases.push((GemmProblem::new(2048, 2048, 2048, DType::F32, la, lb), None));
    }
    // The large-output default (128x256, 8x16) with a fused epilogue, and the small-output one.
    let mut big = GemmProblem::new(4096, 4096, 4096, DType::F32, Layout::Row, Layout::Col);
    big.epilogue.bias = true;
    big.epilogue.activation = Activation::GeluTanh;
    big.epilogue.beta = 0.5;
    cases.push((big, None));
    cases.push((GemmProblem::nn(512, 512, 512, DType::F32), None));
    let nn = GemmProblem::nn(2048, 2048, 2048, DType::F32);
    cases.push((
        nn,
        Some(SimtConfig {
            bm: 128,
            bn: 256,
            bk: 8,
            tm: 16,
            tn: 8,
            stages: 2,
            vec: 4,
            group_m: 8,
            min_blocks: 1,
        }),
    ));
    cases.push((
        nn,
        Some(SimtConfig {
            bm: 128,
            bn: 128,
            bk: 16,
            tm: 8,
            tn: 8,
            stages: 3,
            vec: 4,
            group_m: 8,
            min_blocks: 1,
        }),
    ));
    cases.push((
        nn,
        Some(SimtConfig {
            bm: 64,
            bn: 64,
            bk: 16,
            tm: 4,
            tn: 4,
            stages: 4,
            vec: 2,
            group_m: 1,
            min_blocks: 2,
        }),
    ));
    let mut odd = GemmProblem::new(129, 257, 67, DType::F32, Layout::Col, Layout::Col);
    odd.epilogue.bias = true;
    odd.epilogue.residual = true;
    odd.epilogue.activation = Activation::GeluErf;
    cases.push((odd, None));
    let jobs: Vec<(GemmProblem, Option<SimtConfig>, Arch)> = cases
        .into_iter()
        .flat_map(|(p, c)| [Arch::Sm90a, Arch::Sm120].map(|a| (p, c, a)))
        .collect();
    jobs.into_par_iter().for_each(|(p, cfg, arch)| {
        let c = cfg.unwrap_or_else(|| t.default_config(&p, arch));
        let src = t.emit(&p, &c, arch).unwrap_or_else(|e| panic!("{e}"));
        let r = compile_and_report(&src, arch);
        if cfg.is_none() {
            assert_eq!(
                r.spill_store_bytes + r.spill_load_bytes,
                0,
                "default config spills: {}",
                src.entry
            );
        }
    });
}

#[test]
fn mma_representative_configs_compile() {
    if !nvrtc_or_skip("mma_representative_configs_compile") {
        return;
    }
    let t = MmaGemm::default();
    let (r, c) = (Layout::Row, Layout::Col);
    let mut cases: Vec<(GemmProblem, Option<MmaConfig>)> = Vec::new();
    // Defaults for every dtype and layout.
    for d in [DType::F16, DType::Bf16, DType::Tf32] {
        for (la, lb) in [(r, r), (r, c), (c, r), (c, c)] {
            cases.push((GemmProblem::new(4096, 4096, 4096, d, la, lb), None));
        }
    }
    // tf32 defaults at M <= 256 (small tiles, split-K).
    for m in [64, 128, 256] {
        cases.push((GemmProblem::new(m, 8192, 8192, DType::Tf32, r, r), None));
    }
    // Variants: padded smem, deep/shallow rings, 8 warps, split-K with an f32-out fused epilogue.
    let base = MmaConfig {
        bm: 128,
        bn: 128,
        bk: 32,
        warps_m: 2,
        warps_n: 2,
        stages: 4,
        split_k: 1,
        swizzle: true,
        group_m: 8,
    };
    let nt = GemmProblem::new(4096, 4096, 4096, DType::Bf16, r, c);
    cases.push((
        nt,
        Some(MmaConfig {
            swizzle: false,
            stages: 3,
            ..base
        }),
    ));
    cases.push((
        nt,
        Some(MmaConfig {
            bm: 256,
            bn: 128,
            warps_m: 4,
            warps_n: 2,
            stages: 3,
            ..base
        }),
    ));
    cases.push((
        GemmProblem::new(4096, 4096, 4096, DType::F16, c, r),
        Some(MmaConfig {
            bm: 64,
            bn: 64,
            bk: 64,
            stages: 5,
            group_m: 1,
            ..base
        }),
    ));
    let mut epi = GemmProblem::new(512, 384, 8192, DType::F16, r, r);
    epi.epilogue.bias = true;
    epi.epilogue.residual = true;
    epi.epilogue.activation = Activation::GeluTanh;
    epi.epilogue.out_dtype = DType::F32;
    cases.push((
        epi,
        Some(MmaConfig {
            split_k: 4,
            stages: 2,
            ..base
        }),
    ));
    let tf = GemmProblem::new(1024, 1024, 1024, DType::Tf32, c, r);
    cases.push((
        tf,
        Some(MmaConfig {
            bk: 32,
            stages: 3,
            swizzle: false,
            ..base
        }),
    ));
    let jobs: Vec<(GemmProblem, Option<MmaConfig>, Arch)> = cases
        .into_iter()
        .flat_map(|(p, c)| [Arch::Sm90a, Arch::Sm120].map(|a| (p, c, a)))
        .collect();
    jobs.into_par_iter().for_each(|(p, cfg, arch)| {
        let c = cfg.unwrap_or_else(|| t.default_config(&p, arch));
        if let Err(e) = t.check(&p, &c, arch) {
            // Only the shared-memory budget may differ between the two targets.
            assert!(e.reason.contains("shared memory"), "{e}");
            eprintln!("{arch:7} skipped (does not fit): {e}");
            return;
        }
        let src = t.emit(&p, &c, arch).unwrap_or_else(|e| panic!("{e}"));
        let res = compile_and_report(&src, arch);
        if cfg.is_none() {
            assert_eq!(
                res.spill_store_bytes, 0,
                "default config spills: {}",
                src.entry
            );
        }
    });
}
