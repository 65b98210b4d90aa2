//! AOT suite: every registry kernel compiled cold with NVRTC for each target (host wall time and
//! ptxas resource use), and, with a GPU, the warm path for the device's target: loading the
//! cached cubin from disk and loading it as a module on the device.
//!
//! It also times a whole process start that needs every kernel of the run for the first target:
//! `rtx-bench` re-executed as a child ([`startup_child`]) over an empty cache folder (every kernel
//! compiled) and then over the same, now warm, folder (every kernel loaded; the child reports its
//! NVRTC call count, which must be 0).
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

/// Set to a cache folder, `rtx-bench` runs as a start-up child ([`startup_child`]).
pub const STARTUP_CHILD_ENV: &str = "RTX_BENCH_STARTUP_CHILD";

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

/// A case of this suite that cannot be measured: host clock, like every aot case (this suite
/// never reports a GPU figure, not even an absent one).
fn host_not_available(name: String, why: String) -> Case {
    let mut c = Case::not_available(SuiteId::Aot, name, "-", why);
    c.clock = Clock::Host;
    c
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
            return Ok(vec![host_not_available(
                "nvrtc".into(),
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
        if let Some(&arch) = ctx.compile_archs.first() {
            out.extend(startup_cases(
                arch,
                ctx.quick,
                ctx.registry.max_per_template,
            ));
        }
        Ok(out)
    }
}

/// The start-up child: opens the kernel cache at `$RTX_BENCH_STARTUP_CHILD`, gets every registry
/// kernel for `$RTX_BENCH_STARTUP_ARCH` through it (compiling what is missing, in parallel as
/// `cargo xtask codegen` does), prints `kernels=<n> failed=<n> nvrtc_calls=<n>` and returns the
/// exit code; `None` when the variable is unset (a normal run).
pub fn startup_child() -> Option<i32> {
    let dir = std::env::var_os(STARTUP_CHILD_ENV)?;
    let arch = std::env::var("RTX_BENCH_STARTUP_ARCH")
        .ok()
        .and_then(|a| a.parse::<Arch>().ok());
    let Some(arch) = arch else {
        eprintln!(
            "rtx-bench start-up child: RTX_BENCH_STARTUP_ARCH is missing or not a known target"
        );
        return Some(2);
    };
    let max = std::env::var("RTX_BENCH_STARTUP_MAX")
        .ok()
        .and_then(|m| m.parse().ok());
    let cache = match KernelCache::open(std::path::PathBuf::from(dir)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtx-bench start-up child: {e}");
            return Some(1);
        }
    };
    let (cases, _) = all_cases(
        &[arch],
        &crate::registry::RegistryOptions {
            max_per_template: max,
            families: None,
        },
    );
    let items: Vec<_> = cases.into_iter().map(|(a, c)| (c.source, a)).collect();
    let before = aot::nvrtc_calls();
    let results = cache.get_or_compile_many(&items, None);
    let failed = results.iter().filter(|r| r.is_err()).count();
    println!(
        "kernels={} failed={failed} nvrtc_calls={}",
        items.len(),
        aot::nvrtc_calls() - before
    );
    Some(0)
}

/// `kernels=.. failed=.. nvrtc_calls=..` of a child's output.
fn child_counts(stdout: &str) -> Option<(u64, u64, u64)> {
    let line = stdout.lines().find(|l| l.starts_with("kernels="))?;
    let get = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
    };
    Some((get("kernels=")?, get("failed=")?, get("nvrtc_calls=")?))
}

/// The two start-up cases (empty, then warm cache) for `arch`, or one not-available case when
/// this process is not the `rtx-bench` binary (e.g. a test harness) and cannot re-execute itself.
fn startup_cases(arch: Arch, quick: bool, max_per_template: Option<usize>) -> Vec<Case> {
    let names = [
        "process start, every kernel, empty cache",
        "process start, every kernel, warm cache",
    ]
    .map(|n| format!("{n} {arch}"));
    let exe = std::env::current_exe().ok().filter(|e| {
        e.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rtx-bench"))
    });
    let Some(exe) = exe else {
        return vec![host_not_available(
            names[0].clone(),
            "needs the rtx-bench binary (this process cannot re-execute itself as a start-up child)".into(),
        )];
    };
    let dir = std::env::temp_dir().join(format!("rtx-bench-startup-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = Vec::new();
    for name in names {
        let started = Instant::now();
        let mut cmd = std::process::Command::new(&exe);
        cmd.env(STARTUP_CHILD_ENV, &dir)
            .env("RTX_BENCH_STARTUP_ARCH", arch.sm_name());
        if let Some(m) = max_per_template {
            cmd.env("RTX_BENCH_STARTUP_MAX", m.to_string());
        }
        let result = cmd.output();
        let us = started.elapsed().as_secs_f64() * 1e6;
        let counts = result
            .as_ref()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| child_counts(&String::from_utf8_lossy(&o.stdout)));
        match counts {
            Some((kernels, failed, nvrtc)) => {
                let s = Summary {
                    median_us: us,
                    p20_us: us,
                    p80_us: us,
                    rel_spread: 0.0,
                    samples: 1,
                };
                out.push(Case::measured(SuiteId::Aot, name, "-", Clock::Host, &s).with_note(format!(
                    "a new rtx-bench process gets {kernels} kernels for {arch} through the kernel cache ({failed} failed to compile, {nvrtc} NVRTC calls){}; host wall time including process start",
                    if quick { ", --quick registry" } else { "" }
                )));
            }
            None => {
                let why = match &result {
                    Ok(o) => format!(
                        "start-up child exited with {}: {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .last()
                            .unwrap_or("")
                    ),
                    Err(e) => format!("could not start {}: {e}", exe.display()),
                };
                out.push(Case::failed(SuiteId::Aot, name, "-", Clock::Host, why));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::samples;

    #[test]
    fn compiles_samples_and_reads_their_resources() {
        if !rtx_synthesis::aot::nvrtc_or_skip("compiles_samples_and_reads_their_resources") {
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
    fn child_counts_parse_and_reject_garbage() {
        assert_eq!(
            child_counts("noise\nkernels=12 failed=1 nvrtc_calls=0\n"),
            Some((12, 1, 0))
        );
        assert_eq!(child_counts("kernels=12 failed=x nvrtc_calls=0"), None);
        assert_eq!(child_counts(""), None);
    }

    #[test]
    fn startup_cases_need_the_rtx_bench_binary() {
        // A test harness is not rtx-bench: one not-available case, no child started.
        let cases = startup_cases(Arch::Sm90a, true, Some(3));
        assert_eq!(cases.len(), 1);
        assert!(!cases[0].is_measured());
        assert_eq!(cases[0].clock, Clock::Host);
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
