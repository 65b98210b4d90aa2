//! AOT compiler benchmarks (CPU side): 64 distinct kernel instances compiled serially vs on the
//! bounded parallel pool, and per kernel a cold NVRTC compile vs a warm cache load.
//!
//! Run: `LD_LIBRARY_PATH=<nvrtc lib dir> cargo bench -p rtx-synthesis --bench aot`.
//! `RTX_AOT_AB=3` instead alternates 3 serial/parallel rounds, each through a fresh, empty
//! `KernelCache` (`get_or_compile_many`, the path `cargo xtask codegen` takes), and prints both
//! wall times, the ratio and the issue's target (>= 1.7x on 2 cores); `RTX_COMPILE_JOBS` sets the
//! parallel bound. Without NVRTC the benchmarks are skipped with a message.

use criterion::{criterion_group, BenchmarkId, Criterion};
use rtx_synthesis::aot::{compile, compile_many, default_jobs, KernelCache, Toolchain};
use rtx_synthesis::templates::KernelSource;
use rtx_synthesis::Arch;
use std::time::Duration;

/// A shared-memory tiled SGEMM instance; `(tile, unroll, id)` make every instance distinct.
fn instance(tile: u32, unroll: u32, id: u32) -> KernelSource {
    let entry = format!("bench_sgemm_t{tile}_u{unroll}_{id}");
    let code = format!(
        r#"extern "C" __global__ void {entry}(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K, float alpha) {{
  __shared__ float As[{tile}][{tile} + 1];
  __shared__ float Bs[{tile}][{tile} + 1];
  const int tx = threadIdx.x % {tile}, ty = threadIdx.x / {tile};
  const int row = blockIdx.y * {tile} + ty, col = blockIdx.x * {tile} + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += {tile}) {{
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (col < N && k0 + ty < K) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    #pragma unroll {unroll}
    for (int k = 0; k < {tile}; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }}
  if (row < M && col < N) C[row * N + col] = alpha * acc + {id}.0f * 1e-30f;
}}
"#
    );
    KernelSource {
        entry,
        code,
        template: "bench_sgemm".into(),
        template_version: 1,
        options: vec![],
    }
}

fn instances() -> Vec<(KernelSource, Arch)> {
    let mut v = Vec::new();
    let mut id = 0;
    while v.len() < 64 {
        for tile in [8u32, 16, 32] {
            for unroll in [1u32, 4, 8, 16] {
                if v.len() < 64 {
                    v.push((instance(tile, unroll, id), Arch::Sm90a));
                    id += 1;
                }
            }
        }
    }
    v
}

fn bench_parallel(c: &mut Criterion) {
    if let Err(e) = Toolchain::get() {
        eprintln!("SKIP aot benches: {e}");
        return;
    }
    let items = instances();
    let jobs = default_jobs();
    eprintln!("compile_64: default_jobs() = {jobs}");
    let mut g = c.benchmark_group("compile_64_instances");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    g.bench_function("serial", |b| {
        b.iter(|| {
            let r = compile_many(&items, Some(1));
            assert!(r.iter().all(Result::is_ok));
        })
    });
    g.bench_function(BenchmarkId::new("parallel", jobs), |b| {
        b.iter(|| {
            let r = compile_many(&items, None);
            assert!(r.iter().all(Result::is_ok));
        })
    });
    g.finish();
}

fn bench_cold_vs_warm(c: &mut Criterion) {
    if Toolchain::get().is_err() {
        return;
    }
    let src = instance(32, 8, 1000);
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = KernelCache::open(dir.path()).expect("cache");
    let first = cache.get_or_compile(&src, Arch::Sm90a).expect("compile");
    assert!(!first.hit);
    let mut g = c.benchmark_group("per_kernel");
    g.sample_size(20);
    g.bench_function("cold_nvrtc_compile", |b| {
        b.iter(|| compile(&src, Arch::Sm90a).expect("compile"))
    });
    g.bench_function("warm_cache_load", |b| {
        b.iter(|| {
            let k = cache.get_or_compile(&src, Arch::Sm90a).expect("load");
            assert!(k.hit);
            k
        })
    });
    g.finish();
    eprintln!("cubin size {} bytes", first.cubin.len());
}

/// Process CPU time (user + system) in seconds, from `/proc/self/stat` (Linux; `None` elsewhere).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15 (1-based).
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// `RTX_AOT_AB=<rounds>`: instead of criterion, alternate serial and parallel runs of the 64
/// instances (so both see the same background load), each into a fresh, empty kernel cache, and
/// print wall and CPU time of each, then the median ratio against the 1.7x target.
fn ab_rounds(rounds: usize) {
    if let Err(e) = Toolchain::get() {
        eprintln!("SKIP aot A/B: {e}");
        return;
    }
    let items = instances();
    let jobs = default_jobs();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "compile_64 A/B: {} distinct instances, {rounds} rounds, cores={cores}, parallel jobs={jobs} (RTX_COMPILE_JOBS overrides)",
        items.len()
    );
    let mut serial = Vec::new();
    let mut parallel = Vec::new();
    for round in 0..rounds.max(1) {
        for (name, j, out) in [
            ("serial", 1, &mut serial),
            ("parallel", jobs, &mut parallel),
        ] {
            let dir = tempfile::tempdir().expect("temp dir");
            let cache = KernelCache::open(dir.path()).expect("empty cache");
            let cpu0 = process_cpu_seconds();
            let t = std::time::Instant::now();
            let r = cache.get_or_compile_many(&items, Some(j));
            let wall = t.elapsed().as_secs_f64();
            let cpu = cpu0.and_then(|c0| process_cpu_seconds().map(|c1| c1 - c0));
            assert!(
                r.iter().all(|k| k.as_ref().is_ok_and(|k| !k.hit)),
                "every compile is a miss"
            );
            println!(
                "round {round} {name:>8} jobs={j}: wall {wall:.2} s, cpu {:.2} s",
                cpu.unwrap_or(f64::NAN)
            );
            out.push(wall);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (s, p) = (med(&mut serial), med(&mut parallel));
    let ratio = s / p;
    println!(
        "median wall: serial {s:.2} s, parallel {p:.2} s, speedup {ratio:.2}x (jobs={jobs}, cores={cores}); target >= 1.70x on 2 cores: {}",
        if jobs < 2 {
            "not applicable (one job)"
        } else if ratio >= 1.7 {
            "met"
        } else {
            "NOT met"
        }
    );
}

criterion_group!(benches, bench_parallel, bench_cold_vs_warm);

fn main() {
    if let Some(rounds) = std::env::var("RTX_AOT_AB")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return ab_rounds(rounds);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
