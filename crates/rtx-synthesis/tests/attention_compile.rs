//! NVRTC compiles of the fused attention template: every valid config of the space, both
//! dtypes, head_dim 64 and 128, causal and not, for sm_90a, sm_80 and sm_120. Each must compile,
//! be reported as an entry by ptxas with at most 255 registers and spill nothing; registers,
//! shared memory and spills are printed per kernel.

use rayon::prelude::*;
use rtx_synthesis::aot;
use rtx_synthesis::templates::attention::{AttentionConfig, AttentionProblem, AttentionTemplate};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

use rtx_synthesis::aot::nvrtc_or_skip;

/// Compiles one instance; `Err` describes the failure (so all failures are listed at once).
fn compile_clean(p: &AttentionProblem, c: &AttentionConfig, arch: Arch) -> Result<String, String> {
    let src = AttentionTemplate
        .emit(p, c, arch)
        .map_err(|e| format!("emit: {e}"))?;
    let out =
        aot::compile(&src, arch).map_err(|e| format!("compile {} on {arch}: {e}", src.entry))?;
    if &out.cubin[..4] != b"\x7fELF" {
        return Err(format!("{}: not a cubin", src.entry));
    }
    let r = out.resources_for(&src.entry).ok_or_else(|| {
        format!(
            "no ptxas resource lines for {} on {arch} in:\n{}",
            src.entry, out.log
        )
    })?;
    if !r.is_entry || r.registers == 0 || r.registers > 255 {
        return Err(format!(
            "{} on {arch}: entry {} with {} registers",
            src.entry, r.is_entry, r.registers
        ));
    }
    if r.spills() || r.stack_frame_bytes > 0 {
        return Err(format!(
            "{} on {arch} spills: {} B stores, {} B loads, {} B stack (~{} registers estimated)\n{}",
            src.entry,
            r.spill_store_bytes,
            r.spill_load_bytes,
            r.stack_frame_bytes,
            c.estimated_registers(),
            out.log
        ));
    }
    Ok(format!(
        "{arch:7} {:>5.2}s regs={:3} (est {:3}) smem={:6} static_smem={} spill=0 {}",
        out.compile_time.as_secs_f64(),
        r.registers,
        c.estimated_registers(),
        c.smem_bytes(),
        r.shared_bytes,
        src.entry
    ))
}

fn run_all(archs: &[Arch], dtypes: &[DType]) {
    let t = AttentionTemplate;
    let mut jobs = Vec::new();
    for &arch in archs {
        for &dtype in dtypes {
            for d in [64, 128] {
                for causal in [false, true] {
                    let p = AttentionProblem::new(4, 16, 2048, d, causal, dtype);
                    let valid = t.valid_space(&p, arch);
                    assert!(!valid.is_empty(), "no valid config for {p:?} on {arch}");
                    assert!(valid.contains(&t.default_config(&p, arch)));
                    for c in valid {
                        jobs.push((p, c, arch));
                    }
                }
            }
        }
    }
    let results: Vec<Result<String, String>> = jobs
        .par_iter()
        .map(|(p, c, a)| compile_clean(p, c, *a))
        .collect();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(line) => eprintln!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{} kernels compiled, {} failed", jobs.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_config_compiles_without_spills_sm90a() {
    if !nvrtc_or_skip("every_config_compiles_without_spills_sm90a") {
        return;
    }
    run_all(&[Arch::Sm90a], &[DType::F16, DType::Bf16]);
}

#[test]
fn every_config_compiles_without_spills_sm80() {
    if !nvrtc_or_skip("every_config_compiles_without_spills_sm80") {
        return;
    }
    run_all(&[Arch::Sm80], &[DType::Bf16]);
}

#[test]
fn every_config_compiles_without_spills_sm120() {
    if !nvrtc_or_skip("every_config_compiles_without_spills_sm120") {
        return;
    }
    run_all(&[Arch::Sm120], &[DType::F16]);
}

#[test]
fn check_matches_what_ptxas_accepts_for_rejected_configs() {
    // Configs the register estimate rejects really are too large: they are never emitted.
    let t = AttentionTemplate;
    let p = AttentionProblem::new(1, 1, 128, 128, false, DType::Bf16);
    let big = AttentionConfig {
        head_dim: 128,
        block_m: 128,
        block_n: 128,
        warps: 4,
        stages: 2,
    };
    assert!(t.check(&p, &big, Arch::Sm90a).is_err());
    assert!(t.emit(&p, &big, Arch::Sm90a).is_err());
}
