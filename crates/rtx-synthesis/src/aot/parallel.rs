//! Parallel NVRTC compilation on a dedicated, bounded rayon pool.
//!
//! Each live NVRTC program holds a lot of host memory (the front end, optimizer and ptxas all
//! run in-process), so the pool is capped at `min(available cores, memory cap)`, where the memory
//! cap is available RAM divided by [`NVRTC_INSTANCE_BYTES`]. `RTX_COMPILE_JOBS` overrides the
//! default. A dedicated pool keeps compiles off the global rayon pool the caller may be using.

use super::nvrtc::{compile, CompileError, Compiled};
use crate::templates::KernelSource;
use crate::Arch;
use rayon::prelude::*;

/// Environment variable fixing the default number of concurrent NVRTC compiles.
pub const COMPILE_JOBS_ENV: &str = "RTX_COMPILE_JOBS";

/// Host memory budgeted per concurrent NVRTC compile. Measured here (NVRTC 13, sm_90a): the
/// first compile of a 4-kernel, 64-accumulator file raised peak RSS by ~75 MiB (library included)
/// and a second concurrent one by ~20 MiB more; heavily templated kernels need far more, so the
/// budget is deliberately generous.
pub const NVRTC_INSTANCE_BYTES: u64 = 1 << 30;

/// Available physical memory in bytes, where the platform tells (Linux `/proc/meminfo`).
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The default number of concurrent compiles: `RTX_COMPILE_JOBS` if set to a positive number,
/// else `min(available cores, available memory / NVRTC_INSTANCE_BYTES)`, at least 1.
pub fn default_jobs() -> usize {
    if let Some(n) = std::env::var(COMPILE_JOBS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        if n > 0 {
            return n;
        }
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem_cap = available_memory_bytes()
        .map(|b| (b / NVRTC_INSTANCE_BYTES).max(1) as usize)
        .unwrap_or(cores);
    cores.min(mem_cap).max(1)
}

/// Compiles every `(source, arch)` pair with at most `jobs` NVRTC instances alive at once
/// (`None`: [`default_jobs`]). Results come back in input order, one per pair.
pub fn compile_many(
    items: &[(KernelSource, Arch)],
    jobs: Option<usize>,
) -> Vec<Result<Compiled, CompileError>> {
    let refs: Vec<(&KernelSource, Arch)> = items.iter().map(|(s, a)| (s, *a)).collect();
    compile_many_refs(&refs, jobs)
}

/// [`compile_many`] over borrowed sources.
pub fn compile_many_refs(
    items: &[(&KernelSource, Arch)],
    jobs: Option<usize>,
) -> Vec<Result<Compiled, CompileError>> {
    let jobs = jobs.unwrap_or_else(default_jobs);
    map_bounded(items, jobs, |(s, a)| compile(s, *a))
}

/// Applies `f` to every item on a dedicated pool of at most `jobs` threads (so at most `jobs`
/// calls run at once) and returns the results in input order. Nothing is shared between the
/// calls but `f` itself: no lock is held around a call, so independent calls overlap fully.
/// With `jobs <= 1`, one item, or a pool that cannot start (logged), it runs serially on the
/// calling thread.
pub fn map_bounded<T, R, F>(items: &[T], jobs: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let jobs = jobs.clamp(1, items.len().max(1));
    if jobs == 1 || items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    match rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .thread_name(|i| format!("rtx-nvrtc-{i}"))
        .build()
    {
        // One item per task: a thread takes the next item only when its current one is done.
        Ok(pool) => pool.install(|| items.par_iter().with_max_len(1).map(&f).collect()),
        Err(e) => {
            tracing::warn!(error = %e, "could not start the compile pool; compiling serially");
            items.iter().map(&f).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(i: usize) -> KernelSource {
        KernelSource {
            entry: format!("scale_{i}"),
            code: format!(
                "extern \"C\" __global__ void scale_{i}(float* y, int n) {{\n  int t = blockIdx.x * blockDim.x + threadIdx.x;\n  if (t < n) y[t] *= {i}.5f;\n}}\n"
            ),
            template: "test".into(),
            template_version: 1,
            options: vec![],
        }
    }

    /// The pool bounds concurrency at `jobs` and does not serialize: 12 calls that each wait
    /// 60 ms (waiting needs no core, so this holds on a loaded machine) finish about `jobs`
    /// times faster than serially, and never more than `jobs` run at once.
    #[test]
    fn map_bounded_caps_concurrency_without_serializing() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};
        let items: Vec<usize> = (0..12).collect();
        for jobs in [1usize, 2, 3] {
            let live = AtomicUsize::new(0);
            let peak = AtomicUsize::new(0);
            let t = Instant::now();
            let out = map_bounded(&items, jobs, |&i| {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(60));
                live.fetch_sub(1, Ordering::SeqCst);
                i * 10
            });
            let wall = t.elapsed().as_secs_f64();
            assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
            assert_eq!(peak.load(Ordering::SeqCst), jobs, "jobs={jobs}");
            let serial = 12.0 * 0.060;
            assert!(
                wall < serial / jobs as f64 * 1.6 + 0.05,
                "jobs={jobs}: {wall:.3} s vs serial {serial:.3} s"
            );
        }
        assert!(map_bounded(&[] as &[u8], 4, |_| 0).is_empty());
    }

    #[test]
    fn default_jobs_is_positive_and_bounded_by_cores() {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let j = default_jobs();
        assert!(j >= 1);
        if std::env::var_os(COMPILE_JOBS_ENV).is_none() {
            assert!(j <= cores);
        }
    }

    #[test]
    fn parallel_results_match_serial_in_order() {
        if !crate::aot::nvrtc_or_skip("parallel_results_match_serial_in_order") {
            return;
        }
        let mut items: Vec<(KernelSource, Arch)> =
            (0..6).map(|i| (kernel(i), Arch::Sm90a)).collect();
        let mut bad = kernel(99);
        bad.code.push_str("not C++;\n");
        items.insert(3, (bad, Arch::Sm120));
        let par = compile_many(&items, Some(2));
        let ser = compile_many(&items, Some(1));
        assert_eq!(par.len(), items.len());
        for (i, (p, s)) in par.iter().zip(&ser).enumerate() {
            match (p, s) {
                (Ok(p), Ok(s)) => {
                    assert_eq!(p.cubin, s.cubin, "item {i}: NVRTC output is deterministic");
                    assert_eq!(p.resources, s.resources, "item {i}: same resource report");
                    if let Err(why) = p.ptxas_report(&items[i].0.entry) {
                        eprintln!("SKIP resource check of item {i}: {why}");
                    }
                }
                (Err(CompileError::Nvrtc { entry, .. }), Err(_)) => assert_eq!(entry, "scale_99"),
                other => panic!("item {i}: parallel and serial disagree: {other:?}"),
            }
        }
        assert!(par[3].is_err() && par[2].is_ok() && par[4].is_ok());
        assert!(compile_many(&[], None).is_empty());
    }
}
