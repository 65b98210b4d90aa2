//! Compiles generated softmax / LayerNorm / RMSNorm kernels with NVRTC for sm_90a and sm_120
//! (every dtype, both strategies, several thread mappings) and checks ptxas reports no spills.

use rtx_synthesis::aot;
use rtx_synthesis::templates::elementwise::device::{ptxas_registers, ptxas_spill_bytes};
use rtx_synthesis::templates::reduce::{RowConfig, RowProblem, RowReduceTemplate, RowStrategy};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

use rtx_synthesis::aot::nvrtc_or_skip;

fn compile_clean(p: &RowProblem, c: &RowConfig, arch: Arch) {
    let t = RowReduceTemplate;
    let src = t
        .emit(p, c, arch)
        .unwrap_or_else(|e| panic!("emit failed: {e}"));
    let out = aot::compile(&src, arch)
        .unwrap_or_else(|e| panic!("compile failed for {c:?} on {arch}: {e}"));
    let spills = ptxas_spill_bytes(&out.log)
        .unwrap_or_else(|| panic!("no spill line in ptxas log:\n{}", out.log));
    assert_eq!(spills, 0, "{} spills on {arch}:\n{}", src.entry, out.log);
    eprintln!(
        "{arch} {}: {:?} registers",
        src.entry,
        ptxas_registers(&out.log)
    );
}

fn ops(dtype: DType, cols: u32) -> Vec<RowProblem> {
    vec![
        RowProblem::softmax(4096, cols, dtype),
        RowProblem::layernorm(4096, cols, dtype, true, true, 1e-5).with_residual(),
        RowProblem::rmsnorm(4096, cols, dtype, true, 1e-6),
    ]
}

#[test]
fn default_configs_compile_without_spills() {
    if !nvrtc_or_skip("default_configs_compile_without_spills") {
        return;
    }
    let t = RowReduceTemplate;
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for cols in [64, 3072, 65536] {
            for p in ops(dtype, cols) {
                let archs: &[Arch] = if cols == 3072 {
                    &[Arch::Sm90a, Arch::Sm120]
                } else {
                    &[Arch::Sm90a]
                };
                for &arch in archs {
                    compile_clean(&p, &t.default_config(&p, arch), arch);
                }
            }
        }
    }
}

#[test]
fn other_mappings_compile_without_spills() {
    if !nvrtc_or_skip("other_mappings_compile_without_spills") {
        return;
    }
    let regs = |tpr: u32, rpb: u32, vec: u32, cols: u32| RowConfig {
        vec,
        threads_per_row: tpr,
        rows_per_block: rpb,
        strategy: RowStrategy::Registers {
            chunks: cols.div_ceil(tpr * vec),
        },
    };
    for (dtype, vec) in [(DType::F32, 4), (DType::Bf16, 8), (DType::F16, 2)] {
        let cases = [
            // Sub-warp rows, several rows per warp.
            (256, regs(8, 16, vec, 256)),
            // One thread per row.
            (7, regs(1, 64, vec, 7)),
            // A warp per row, looped.
            (
                4097,
                RowConfig {
                    vec,
                    threads_per_row: 32,
                    rows_per_block: 4,
                    strategy: RowStrategy::Looped { unroll: 2 },
                },
            ),
            // Two rows of three warps per block.
            (4096, regs(96, 2, vec, 4096)),
            // A full 1024-thread block per row.
            (8192, regs(1024, 1, vec, 8192)),
            // Long rows, looped, 1024 threads.
            (
                65536,
                RowConfig {
                    vec,
                    threads_per_row: 1024,
                    rows_per_block: 1,
                    strategy: RowStrategy::Looped { unroll: 8 / vec },
                },
            ),
        ];
        for (cols, c) in cases {
            for p in ops(dtype, cols) {
                let verdict = RowReduceTemplate.check(&p, &c, Arch::Sm90a);
                assert!(
                    verdict.is_ok(),
                    "{c:?} should be valid for {p:?}: {verdict:?}"
                );
                compile_clean(&p, &c, Arch::Sm90a);
            }
        }
    }
}
