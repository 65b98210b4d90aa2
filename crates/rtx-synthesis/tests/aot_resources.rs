//! Resource reports from real NVRTC compiles: static smem, spills, stack frames, barriers.

use rtx_synthesis::aot::{compile, Compiled};
use rtx_synthesis::templates::KernelSource;
use rtx_synthesis::Arch;

use rtx_synthesis::aot::nvrtc_or_skip;

fn source(entry: &str, code: &str, options: &[&str]) -> KernelSource {
    KernelSource {
        entry: entry.into(),
        code: code.into(),
        template: "aot_resources_test".into(),
        template_version: 1,
        options: options.iter().map(|s| s.to_string()).collect(),
    }
}

const SMEM_AND_STACK: &str = r#"
extern "C" __global__ void with_smem(const float* x, float* y) {
  __shared__ float tile[32][33];
  __shared__ double d[64];
  int t = threadIdx.x;
  tile[t % 32][t % 33] = x[t]; d[t % 64] = x[t];
  __syncthreads();
  y[t] = tile[(t + 1) % 32][t % 33] + d[(t + 3) % 64];
}
extern "C" __global__ void with_stack(const float* x, float* y, int k) {
  float a[64];
  for (int i = 0; i < k; ++i) a[(i * 7 + k) & 63] = x[i * threadIdx.x];
  y[threadIdx.x] = a[x[k] > 0 ? k & 63 : 3];
}
extern "C" __global__ void with_barriers(float* y) {
  asm volatile("bar.sync 3, 64;");
  y[threadIdx.x] = 1.0f;
}
"#;

const SPILLER: &str = r#"
extern "C" __global__ void __launch_bounds__(1024, 2) spiller(const float* x, float* y) {
  float acc[48];
  #pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = x[threadIdx.x + i * 1024];
  #pragma unroll
  for (int j = 0; j < 16; ++j) {
    #pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + j) % 48] + x[i + j];
  }
  float s = 0;
  #pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i];
  y[threadIdx.x] = s;
}
"#;

fn report<'a>(c: &'a Compiled, entry: &str) -> &'a rtx_synthesis::aot::ResourceUsage {
    c.resources_for(entry)
        .unwrap_or_else(|| panic!("no report for {entry} in:\n{}", c.log))
}

/// Whether `c`'s log has ptxas lines; prints why a test skips its resource checks otherwise
/// (the compile itself has been checked by then). The driver-attribute source of the same
/// report is covered by the GPU test `aot_driver_resources`.
fn has_ptxas_lines(test: &str, c: &Compiled, entry: &str) -> bool {
    match c.ptxas_report(entry) {
        Ok(_) => true,
        Err(why) => {
            eprintln!("SKIP {test} ({}): {why}", c.arch);
            false
        }
    }
}

#[test]
fn static_smem_stack_and_barriers_are_reported() {
    if !nvrtc_or_skip("static_smem_stack_and_barriers_are_reported") {
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90a, Arch::Sm120] {
        let c = compile(&source("with_smem", SMEM_AND_STACK, &[]), arch).unwrap();
        if !has_ptxas_lines(
            "static_smem_stack_and_barriers_are_reported",
            &c,
            "with_smem",
        ) {
            continue;
        }
        assert_eq!(c.resources.len(), 3, "{arch}:\n{}", c.log);
        assert!(c.resources.iter().all(|r| r.is_entry && r.arch == arch));
        let smem = report(&c, "with_smem");
        // 32*33 floats + 64 doubles.
        assert_eq!(smem.shared_bytes, 32 * 33 * 4 + 64 * 8, "{arch}");
        assert_eq!(smem.barriers, 1, "{arch}: __syncthreads uses barrier 0");
        assert!(smem.registers > 0 && !smem.spills());
        let stack = report(&c, "with_stack");
        assert_eq!(
            stack.stack_frame_bytes,
            64 * 4,
            "{arch}: the local array lives on the stack"
        );
        assert_eq!(stack.cumulative_stack_bytes, Some(256));
        assert_eq!(stack.shared_bytes, 0);
        assert_eq!(
            report(&c, "with_barriers").barriers,
            4,
            "{arch}: bar.sync 3 needs barriers 0..=3"
        );
        // NVRTC 13 prints constant banks for sm_8x only.
        assert_eq!(
            smem.const_bytes.is_some(),
            arch == Arch::Sm80,
            "{arch}:\n{}",
            c.log
        );
    }
}

#[test]
fn register_cap_spills_are_reported() {
    if !nvrtc_or_skip("register_cap_spills_are_reported") {
        return;
    }
    let capped = compile(
        &source("spiller", SPILLER, &["-maxrregcount=16"]),
        Arch::Sm90a,
    )
    .unwrap();
    if !has_ptxas_lines("register_cap_spills_are_reported", &capped, "spiller") {
        return;
    }
    let r = report(&capped, "spiller");
    assert!(r.spills(), "{}", capped.log);
    assert!(r.spill_store_bytes > 0 && r.spill_load_bytes > 0);
    assert!(
        r.registers <= 32,
        "1024 threads x 2 blocks caps registers at 32: {}",
        r.registers
    );
    assert!(r.stack_frame_bytes > 0);
    let free = compile(
        &source(
            "spiller",
            &SPILLER.replace("__launch_bounds__(1024, 2) ", ""),
            &[],
        ),
        Arch::Sm90a,
    )
    .unwrap();
    let f = report(&free, "spiller");
    assert!(
        !f.spills(),
        "without the cap it fits in registers:\n{}",
        free.log
    );
    assert!(f.registers > r.registers);
}

#[test]
fn device_functions_are_reported_but_not_as_entries() {
    if !nvrtc_or_skip("device_functions_are_reported_but_not_as_entries") {
        return;
    }
    let code = r#"
__device__ __noinline__ float callee(float v) { printf("%f\n", v); return v * 2; }
extern "C" __global__ void with_call(const float* x, float* y) { y[threadIdx.x] = callee(x[threadIdx.x]); }
"#;
    let c = compile(&source("with_call", code, &[]), Arch::Sm90a).unwrap();
    if !has_ptxas_lines(
        "device_functions_are_reported_but_not_as_entries",
        &c,
        "with_call",
    ) {
        return;
    }
    let k = report(&c, "with_call");
    assert!(k.is_entry && k.registers > 0);
    assert!(k
        .cumulative_stack_bytes
        .is_some_and(|s| s >= k.stack_frame_bytes));
    let callee = c
        .resources
        .iter()
        .find(|r| !r.is_entry)
        .expect("callee reported");
    assert_eq!(callee.function, "_Z6calleef");
    assert_eq!(callee.registers, 0);
}
