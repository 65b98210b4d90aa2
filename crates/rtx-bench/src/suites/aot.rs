//! AOT suite: every registry kernel compiled cold with NVRTC for each target (host wall time and
//! ptxas resource use), and, with a GPU, the warm path for the device's target: loading the
//! cached cubin from disk and loading it as a module on the device.
//!
//! This is also the CPU-side suite that runs when no GPU is present; all its times are host
//! wall-clock times (`clock: host`), never GPU figures.

use super::{Suite, SuiteContext, SuiteError};
use crate::gpu::Gpu;
use crate::registry::{all_cases, CompileCase};
use crate::report::{Case, Clock, CompileInfo};
use crate::samples::SampleKernel;
use crate::stats::Summary;
use crate::suite_id::SuiteId;
use rtx_synthesis::aot::{self, CompileError, Compiled, KernelCache, Toolchain};
use rtx_synthesis::{Arch, DType};
use std::time::Instant;

/// Repetitions of the warm (cache load, module load) measurements.
pub const WARM_REPS: usize = 5;

/// The first lines of an error, so a compile failure does not paste a whole source file.
fn short(e: &CompileError) -> String {
    let s = e.to_string();
    let mut lines: Vec<&str> = s.lines().take(6).collect();
    if s.lines().count() > 6 {
        lines.push("...");
    }
    lines.join("\n")
}

/// One cold compile as a case (and the binary, when it compiled).
pub fn compile_case(arch: Arch, cc: &CompileCase) -> (Case, Option<Compiled>) {
    let name = format!("compile {} {arch}", cc.name);
    match aot::compile(&cc.source, arch) {
        Ok(c) => {
            let us = c.compile_time.as_secs_f64() * 1e6;
            let s = Summary {
                median_us: us,
                p20_us: us,
                p80_us: us,
                rel_spread: 0.0,
                samples: 1,
            };
            let r = c.resources_for(&cc.source.entry).cloned();
            let mut case = Case::measured(SuiteId::Aot, name, "-", Clock::Host, &s)
                .with_note("cold NVRTC compile to cubin; warm path = KernelCache::get and cuModuleLoadData; host wall times");
            case.compile = Some(CompileInfo {
                arch: arch.sm_name().into(),
                family: cc.family.into(),
                entry: cc.source.entry.clone(),
                registers: r.as_ref().map(|r| r.registers),
                spill_store_bytes: r.as_ref().map(|r| r.spill_store_bytes),
                spill_load_bytes: r.as_ref().map(|r| r.spill_load_bytes),
                stack_bytes: r.as_ref().map(|r| r.stack_frame_bytes),
                smem_bytes: r.as_ref().map(|r| r.shared_bytes),
                cubin_bytes: c.cubin.len() as u64,
                cache_load_us: None,
                module_load_us: None,
            });
            (case, Some(c))
        }
        Err(e) => {
            let mut case = Case::failed(SuiteId::Aot, name, "-", Clock::Host, short(&e));
            case.compile = Some(CompileInfo {
                arch: arch.sm_name().into(),
                family: cc.family.into(),
                entry: cc.source.entry.clone(),
                registers: None,
                spill_store_bytes: None,
                spill_load_bytes: None,
                stack_bytes: None,
                smem_bytes: None,
                cubin_bytes: 0,
                cache_load_us: None,
                module_load_us: None,
            });
            (case, None)
        }
    }
}

fn host_summary(samples_us: &[f64]) -> Option<Summary> {
    Summary::from_samples(samples_us).ok()
}

/// The warm path's disk part: the fresh compile is stored in a [`KernelCache`], then
/// `KernelCache::get` (read, checksum and key check, decode) is timed [`WARM_REPS`] times.
fn cache_load(
    cache: &KernelCache,
    cc: &CompileCase,
    arch: Arch,
    compiled: &Compiled,
) -> Result<Summary, String> {
    cache
        .insert(&cc.source, compiled)
        .map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(WARM_REPS);
    for _ in 0..WARM_REPS {
        let t = Instant::now();
        let hit = cache.get(&cc.source, arch).map_err(|e| e.to_string())?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        match hit {
            Some(k) if k.cubin == compiled.cubin => {}
            Some(_) => return Err("the cached cubin differs from the compiled one".into()),
            None => return Err("cache miss right after insert".into()),
        }
    }
    host_summary(&samples).ok_or_else(|| "no samples".into())
}

/// Host wall time of `Device::load_module` on the cubin (module dropped after each load).
fn module_load(gpu: &Gpu, cc: &CompileCase, cubin: &[u8]) -> Result<Summary, String> {
    let mut samples = Vec::with_capacity(WARM_REPS);
    for _ in 0..WARM_REPS {
        let t = Instant::now();
        let m = gpu.device.load_module(cubin).map_err(|e| e.to_string())?;
        m.function(&cc.source.entry).map_err(|e| e.to_string())?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    host_summary(&samples).ok_or_else(|| "no samples".into())
}

/// The first NVRTC compile of the process pays NVRTC's own start-up; measured separately on a
/// tiny kernel so the per-kernel figures that follow are comparable.
fn first_compile_case(arch: Arch) -> Case {
    let k = SampleKernel::Saxpy(DType::F32).emit();
    let name = format!("nvrtc first compile in process ({arch})");
    match aot::compile(&k, arch) {
        Ok(c) => {
            let us = c.compile_time.as_secs_f64() * 1e6;
            let s = Summary {
                median_us: us,
                p20_us: us,
                p80_us: us,
                rel_spread: 0.0,
                samples: 1,
            };
            Case::measured(SuiteId::Aot, name, "-", Clock::Host, &s)
                .with_note("includes NVRTC's one-time start-up; host wall time")
        }
        Err(e) => Case::failed(SuiteId::Aot, name, "-", Clock::Host, short(&e)),
    }
}

/// The AOT suite.
pub struct AotSuite;

impl Suite for AotSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Aot
    }
    fn needs_gpu(&self) -> bool {
        false
    }
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        if let Err(e) = Toolchain::get() {
            return Ok(vec![Case::not_available(
                SuiteId::Aot,
                "nvrtc",
                "-",
                format!("NVRTC toolchain not usable: {e}"),
            )]);
        }
        let mut out = Vec::new();
        if let Some(&first) = ctx.compile_archs.first() {
            out.push(first_compile_case(first));
        }
        let (cases, family_errors) = all_cases(&ctx.compile_archs, &ctx.registry);
        for e in family_errors {
            out.push(Case::failed(
                SuiteId::Aot,
                format!("family {} {}", e.family, e.arch),
                "-",
                Clock::Host,
                e.to_string(),
            ));
        }
        // A private cache folder, so the warm path is measured on entries this run wrote.
        let cache_dir =
            std::env::temp_dir().join(format!("rtx-bench-aot-cache-{}", std::process::id()));
        let cache = KernelCache::open(&cache_dir)
            .map_err(|e| tracing::warn!(target: "rtx_bench", "no warm-path figures: {e}"))
            .ok();
        let p = ctx.progress("aot", cases.len() as u64);
        for (arch, cc) in &cases {
            p.running(&format!("{} {arch}", cc.name));
            let (mut case, compiled) = compile_case(*arch, cc);
            if let (Some(c), Some(info)) = (compiled.as_ref(), case.compile.as_mut()) {
                if let Some(cache) = &cache {
                    match cache_load(cache, cc, *arch, c) {
                        Ok(s) => info.cache_load_us = Some(s.median_us),
                        Err(e) => {
                            tracing::warn!(target: "rtx_bench", "cache load {}: {e}", cc.name)
                        }
                    }
                }
                if let Some(gpu) = ctx.gpu.filter(|g| g.arch == *arch) {
                    match module_load(gpu, cc, &c.cubin) {
                        Ok(s) => info.module_load_us = Some(s.median_us),
                        Err(e) => {
                            out.push(Case::failed(
                                SuiteId::Aot,
                                format!("module load {} {arch}", cc.name),
                                "-",
                                Clock::Host,
                                e,
                            ));
                        }
                    }
                }
            }
            out.push(case);
            p.done(&format!("{} {arch}", cc.name));
        }
        p.finish();
        if let Some(c) = cache {
            drop(c); // flushes its stats into the folder first
            let _ = std::fs::remove_dir_all(&cache_dir);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::samples;

    #[test]
    fn compiles_samples_and_reads_their_resources() {
        if let Err(e) = Toolchain::get() {
            eprintln!("SKIP compiles_samples_and_reads_their_resources: {e}");
            assert!(
                std::env::var_os("RTX_REQUIRE_NVRTC").is_none(),
                "RTX_REQUIRE_NVRTC is set but: {e}"
            );
            return;
        }
        let cases = samples(Arch::Sm90a, &Default::default()).unwrap();
        let gemm = cases
            .iter()
            .find(|c| c.name.contains("naive_gemm_bf16"))
            .unwrap();
        for arch in [Arch::Sm90a, Arch::Sm120] {
            let (case, compiled) = compile_case(arch, gemm);
            assert!(case.is_measured(), "{case:?}");
            assert_eq!(case.clock, Clock::Host);
            let ci = case.compile.unwrap();
            assert!(ci.registers.is_some_and(|r| r > 0 && r <= 255), "{ci:?}");
            assert_eq!(ci.spill_store_bytes, Some(0));
            assert_eq!(ci.cubin_bytes, compiled.unwrap().cubin.len() as u64);
        }
    }

    #[test]
    fn a_broken_kernel_is_a_failed_case_with_a_short_error() {
        if Toolchain::get().is_err() {
            return;
        }
        let mut cc = samples(Arch::Sm90a, &Default::default()).unwrap().remove(0);
        cc.source.code.push_str("this is not C++;\n");
        let (case, compiled) = compile_case(Arch::Sm90a, &cc);
        assert!(compiled.is_none());
        match &case.status {
            crate::report::CaseStatus::Failed { error } => {
                assert!(error.contains("NVRTC"), "{error}");
                assert!(error.lines().count() <= 7, "{error}");
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        assert!(!case.is_measured());
    }
}
