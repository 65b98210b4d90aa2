//! Compiles generated elementwise kernels with NVRTC for sm_90a and sm_120 and checks that
//! ptxas reports no spills.

use rtx_synthesis::aot;
use rtx_synthesis::templates::elementwise::device::{ptxas_registers, ptxas_spill_bytes};
use rtx_synthesis::templates::elementwise::presets::{bias_gelu, chain8, silu_gate, GeluForm};
use rtx_synthesis::templates::elementwise::{
    ElementwiseConfig, ElementwiseProblem, ElementwiseTemplate, GridMode,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

use rtx_synthesis::aot::nvrtc_or_skip;

fn compile_clean(p: &ElementwiseProblem, c: &ElementwiseConfig, arch: Arch) {
    let t = ElementwiseTemplate;
    let src = t
        .emit(p, c, arch)
        .unwrap_or_else(|e| panic!("emit failed: {e}"));
    let out = aot::compile(&src, arch)
        .unwrap_or_else(|e| panic!("compile failed for {c:?} on {arch}: {e}"));
    let spills = ptxas_spill_bytes(&out.log)
        .unwrap_or_else(|| panic!("no spill line in ptxas log:\n{}", out.log));
    assert_eq!(
        spills, 0,
        "{} spills on {arch} ({c:?}):\n{}",
        src.entry, out.log
    );
    eprintln!(
        "{arch} {}: {:?} registers",
        src.entry,
        ptxas_registers(&out.log)
    );
}

#[test]
fn presets_compile_without_spills_on_hopper_and_blackwell() {
    if !nvrtc_or_skip("presets_compile_without_spills") {
        return;
    }
    let t = ElementwiseTemplate;
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for graph in [
            bias_gelu(dtype, GeluForm::Erf).unwrap(),
            silu_gate(dtype).unwrap(),
            chain8(dtype).unwrap(),
        ] {
            let p = ElementwiseProblem::new(graph, 4096, 4096);
            for arch in [Arch::Sm90a, Arch::Sm120] {
                let c = t.default_config(&p, arch);
                compile_clean(&p, &c, arch);
            }
        }
    }
}

#[test]
fn config_corners_compile_without_spills() {
    if !nvrtc_or_skip("config_corners_compile_without_spills") {
        return;
    }
    let p = ElementwiseProblem::new(chain8(DType::Bf16).unwrap(), 3, 1_000_001);
    for c in [
        ElementwiseConfig {
            vec: 1,
            threads: 128,
            unroll: 1,
            grid: GridMode::OneShot,
        },
        ElementwiseConfig {
            vec: 8,
            threads: 512,
            unroll: 2,
            grid: GridMode::Stride { blocks: 264 },
        },
        ElementwiseConfig {
            vec: 4,
            threads: 1024,
            unroll: 2,
            grid: GridMode::OneShot,
        },
    ] {
        compile_clean(&p, &c, Arch::Sm90a);
    }
    // 64-bit indices.
    let big = ElementwiseProblem::new(
        bias_gelu(DType::F32, GeluForm::Tanh).unwrap(),
        1 << 16,
        1 << 16,
    );
    let c = ElementwiseTemplate.default_config(&big, Arch::Sm90a);
    compile_clean(&big, &c, Arch::Sm120);
}
