//! Running generated memory-bound kernels on the CPU, for testing their *logic* on machines
//! without a GPU.
//!
//! [`HOST_SHIM`] is a C++17 header that lets the CUDA C++ these templates emit compile with a
//! host compiler (g++): the storage types and their round-to-nearest-even conversions, `uint2`
//! / `uint4`, `threadIdx` & co., and a cooperative scheduler that runs every thread of a block
//! as a `ucontext` fiber. `__syncthreads()` and `__shfl_xor_sync()` are scheduling points; all
//! threads of a block advance in lockstep rounds from one to the next, and a thread that
//! finishes while others still wait at a barrier (divergent synchronization) aborts the run.
//! Blocks run one after another; `__shared__` becomes a function-local `static`.
//!
//! What this checks: indexing, tails, masking, alignment dispatch, shuffle / shared-memory
//! reduction structure and NaN/Inf handling. What it does not: device numerics of the special
//! function unit (host `exp2f`, `expf`, `tanhf`, `erff`, exact `1/sqrtf` stand in), memory
//! ordering, performance.

use crate::templates::KernelSource;

/// The C++ host shim (see the module docs).
pub const HOST_SHIM: &str = r#"// rtx host emulation shim (generated code runs as CPU fibers)
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <math.h>
#include <functional>
#include <vector>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static

struct RtxDim3 { unsigned x = 0, y = 0, z = 0; };
static RtxDim3 threadIdx, blockIdx, blockDim, gridDim;

struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };

static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

struct __half { uint16_t bits; };
struct __nv_bfloat16 { uint16_t bits; };
struct __half2 { __half x, y; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };

static inline float __half2float(__half h) { _Float16 v; memcpy(&v, &h.bits, 2); return (float)v; }
static inline __half __float2half_rn(float f) { _Float16 v = (_Float16)f; __half h; memcpy(&h.bits, &v, 2); return h; }
static inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.bits << 16); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned x = __float_as_uint(f);
  __nv_bfloat16 h;
  if ((x & 0x7fffffffu) > 0x7f800000u) { h.bits = 0x7fff; return h; }
  x += 0x7fffu + ((x >> 16) & 1u);
  h.bits = (uint16_t)(x >> 16);
  return h;
}
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}

namespace rtxemu {
struct Fiber { ucontext_t ctx; std::vector<char> stack; bool done; long syncs; };
static std::vector<Fiber> fibers;
static ucontext_t main_ctx;
static int cur = -1;
static std::function<void()> body;
static float slots[1024];
static const size_t STACK = 256 * 1024;

static void entry(int i) {
  body();
  fibers[i].done = true;
}
static void yield() {
  fibers[cur].syncs++;
  swapcontext(&fibers[cur].ctx, &main_ctx);
}
static void run_block(unsigned bx, unsigned n) {
  if (fibers.size() < n) fibers.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    if (f.stack.size() < STACK) f.stack.resize(STACK);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = &main_ctx;
    makecontext(&f.ctx, (void (*)())entry, 1, (int)i);
    f.done = false;
    f.syncs = 0;
  }
  blockIdx.x = bx;
  for (;;) {
    unsigned live = 0, finished_now = 0;
    for (unsigned i = 0; i < n; ++i) {
      if (fibers[i].done) continue;
      cur = (int)i;
      threadIdx.x = i;
      swapcontext(&main_ctx, &fibers[i].ctx);
      if (fibers[i].done) ++finished_now; else ++live;
    }
    if (live == 0) return;
    long s = -1;
    for (unsigned i = 0; i < n; ++i) {
      if (fibers[i].done) continue;
      if (s < 0) s = fibers[i].syncs;
      if (fibers[i].syncs != s) { fprintf(stderr, "RTX_EMU_DIVERGENCE block %u: threads at different sync points\n", bx); exit(3); }
    }
    if (finished_now > 0) { fprintf(stderr, "RTX_EMU_DIVERGENCE block %u: %u threads exited while %u wait at a barrier\n", bx, finished_now, live); exit(3); }
  }
}
}  // namespace rtxemu

static inline void __syncthreads() { rtxemu::yield(); }
static inline float __shfl_xor_sync(unsigned mask, float v, int o) {
  if (mask != 0xffffffffu || o < 0 || o > 31) { fprintf(stderr, "RTX_EMU bad shuffle\n"); exit(3); }
  const unsigned t = threadIdx.x;
  rtxemu::slots[t] = v;
  rtxemu::yield();
  const float r = rtxemu::slots[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
  rtxemu::yield();
  return r;
}

template <class F> static void rtx_launch(unsigned grid, unsigned block, F f) {
  if (block == 0 || block > 1024) { fprintf(stderr, "RTX_EMU bad block %u\n", block); exit(3); }
  rtxemu::body = f;
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) rtxemu::run_block(b, block);
}

// Buffers: a 256-byte aligned allocation; the tensor starts `offset` bytes in.
static unsigned char* rtx_alloc(size_t total) {
  size_t n = (total + 255) / 256 * 256;
  unsigned char* p = (unsigned char*)aligned_alloc(256, n ? n : 256);
  if (!p) { fprintf(stderr, "RTX_EMU out of memory\n"); exit(3); }
  return p;
}
static unsigned char* rtx_load(const char* path, size_t total) {
  unsigned char* p = rtx_alloc(total);
  FILE* f = fopen(path, "rb");
  if (!f || fread(p, 1, total, f) != total) { fprintf(stderr, "RTX_EMU cannot read %s\n", path); exit(3); }
  fclose(f);
  return p;
}
static unsigned char* rtx_poison(size_t total) {
  unsigned char* p = rtx_alloc(total);
  memset(p, 0xFF, total);
  return p;
}
static void rtx_save(const char* path, const unsigned char* p, size_t total) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, total, f) != total) { fprintf(stderr, "RTX_EMU cannot write %s\n", path); exit(3); }
  fclose(f);
}
"#;

/// One kernel source wrapped for the host: the CUDA headers removed (the shim provides the
/// types) and everything put in namespace `ns`, so several kernels share a translation unit.
pub fn host_kernel(ns: &str, src: &KernelSource) -> String {
    let body: String = src
        .code
        .lines()
        .filter(|l| !l.trim_start().starts_with("#include <cuda_"))
        .map(|l| format!("{l}\n"))
        .collect();
    format!("namespace {ns} {{\n{body}}}  // namespace {ns}\n")
}

/// A whole host program: the shim, the kernels, and `main` running `main_body`.
pub fn host_program(kernels: &[(String, KernelSource)], main_body: &str) -> String {
    let mut s = String::from(HOST_SHIM);
    for (ns, src) in kernels {
        s.push_str(&host_kernel(ns, src));
    }
    s.push_str("int main() {\n");
    s.push_str(main_body);
    s.push_str("  return 0;\n}\n");
    s
}

/// Why a host-emulated run failed.
#[derive(Debug, thiserror::Error)]
pub enum EmulationError {
    /// No usable `g++` on this machine.
    #[error("no host C++ compiler: {0}")]
    NoCompiler(String),
    /// Writing the program or running a tool failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// g++ rejected the program.
    #[error("g++ failed:\n{0}")]
    Compile(String),
    /// The program failed (e.g. divergent synchronization).
    #[error("emulated run failed ({status}):\n{stderr}")]
    Run {
        /// Exit status.
        status: String,
        /// Its stderr.
        stderr: String,
    },
}

/// The host compiler, if `g++ --version` runs.
pub fn host_compiler() -> Result<&'static str, EmulationError> {
    match std::process::Command::new("g++").arg("--version").output() {
        Ok(o) if o.status.success() => Ok("g++"),
        Ok(o) => Err(EmulationError::NoCompiler(
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )),
        Err(e) => Err(EmulationError::NoCompiler(e.to_string())),
    }
}

/// Writes `program` to `dir/name.cpp`, builds it with `g++ -std=c++17 -O1` and runs it.
pub fn compile_and_run(
    program: &str,
    dir: &std::path::Path,
    name: &str,
) -> Result<(), EmulationError> {
    let cxx = host_compiler()?;
    let src = dir.join(format!("{name}.cpp"));
    let exe = dir.join(name);
    std::fs::write(&src, program).map_err(|source| EmulationError::Io {
        what: format!("writing {}", src.display()),
        source,
    })?;
    let out = std::process::Command::new(cxx)
        .args(["-std=c++17", "-O1", "-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|source| EmulationError::Io {
            what: "running g++".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(EmulationError::Compile(
            String::from_utf8_lossy(&out.stderr)
                .chars()
                .take(20000)
                .collect(),
        ));
    }
    let run = std::process::Command::new(&exe)
        .output()
        .map_err(|source| EmulationError::Io {
            what: format!("running {}", exe.display()),
            source,
        })?;
    if !run.status.success() {
        return Err(EmulationError::Run {
            status: run.status.to_string(),
            stderr: String::from_utf8_lossy(&run.stderr).into_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_namespaced_without_cuda_headers() {
        let src = KernelSource {
            entry: "k".into(),
            code: "#include <cuda_fp16.h>\nextern \"C\" __global__ void k() {}\n".into(),
            template: "t".into(),
            template_version: 1,
            options: vec![],
        };
        let p = host_program(
            &[("k0".into(), src)],
            "  rtx_launch(1, 32, [&] { k0::k(); });\n",
        );
        assert!(!p.contains("#include <cuda_fp16.h>"));
        assert!(p.contains("namespace k0 {\nextern \"C\" __global__ void k() {}\n}"));
        assert!(p.ends_with("  return 0;\n}\n"));
    }
}
