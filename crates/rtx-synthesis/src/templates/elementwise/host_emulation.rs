//! Running generated memory-bound kernels on the CPU, for testing their *logic* on machines
//! without a GPU.
//!
//! [`HOST_SHIM`] is a C++17 header that lets the CUDA C++ these templates emit compile with a
//! host compiler (g++): the storage types and their round-to-nearest-even conversions, `uint2`
//! / `uint4`, `threadIdx` & co., and a cooperative scheduler that runs every thread of a block
//! as a fiber (a minimal x86-64 context switch). `__syncthreads()` and `__shfl_xor_sync()` are scheduling points; all
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

// Minimal x86-64 SysV context switch: saves the callee-saved registers on the current stack,
// stores the stack pointer to *from, loads `to` and restores (ucontext would make a signal-mask
// system call per switch).
extern "C" void rtx_switch(void** from, void* to);
asm(R"(
.text
.globl rtx_switch
.type rtx_switch, @function
rtx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");

namespace rtxemu {
struct Fiber { void* sp; std::vector<char> stack; bool done; long syncs; };
static std::vector<Fiber> fibers;
static void* main_sp = nullptr;
static int cur = -1;
static std::function<void()> body;
static float slots[2][1024];
static const size_t STACK = 64 * 1024;

static void trampoline() {
  body();
  fibers[cur].done = true;
  rtx_switch(&fibers[cur].sp, main_sp);
  __builtin_trap();
}
static void yield() {
  fibers[cur].syncs++;
  rtx_switch(&fibers[cur].sp, main_sp);
}
static void run_block(unsigned bx, unsigned n) {
  if (fibers.size() < n) fibers.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    if (f.stack.size() < STACK) f.stack.resize(STACK);
    uintptr_t top = ((uintptr_t)(f.stack.data() + f.stack.size())) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;                 // fake return address of trampoline
    *--sp = (void*)&trampoline;      // popped by `ret`
    for (int r = 0; r < 6; ++r) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
    f.sp = sp;
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
      rtx_switch(&main_sp, fibers[i].sp);
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
// All threads deposit, yield once, then read their partner's value. Consecutive shuffles use
// alternating slot banks (threads are in lockstep), so a bank is only rewritten after every
// thread has read it.
static inline float __shfl_xor_sync(unsigned mask, float v, int o) {
  if (mask != 0xffffffffu || o < 0 || o > 31) { fprintf(stderr, "RTX_EMU bad shuffle\n"); exit(3); }
  const unsigned t = threadIdx.x;
  float* bank = rtxemu::slots[rtxemu::fibers[rtxemu::cur].syncs & 1];
  bank[t] = v;
  rtxemu::yield();
  return bank[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
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

/// The host compiler, if `g++ --version` runs (x86-64 hosts only: the fiber switch is x86-64
/// assembly).
pub fn host_compiler() -> Result<&'static str, EmulationError> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err(EmulationError::NoCompiler(
            "the emulator's fiber switch needs x86-64 Linux".into(),
        ));
    }
    match std::process::Command::new("g++").arg("--version").output() {
        Ok(o) if o.status.success() => Ok("g++"),
        Ok(o) => Err(EmulationError::NoCompiler(
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )),
        Err(e) => Err(EmulationError::NoCompiler(e.to_string())),
    }
}

/// Writes `program` to `dir/name.cpp` and builds it with `g++ -std=c++17 -O1`; returns the
/// executable's path.
pub fn compile_program(
    program: &str,
    dir: &std::path::Path,
    name: &str,
) -> Result<std::path::PathBuf, EmulationError> {
    let cxx = host_compiler()?;
    let src = dir.join(format!("{name}.cpp"));
    let exe = dir.join(name);
    std::fs::write(&src, program).map_err(|source| EmulationError::Io {
        what: format!("writing {}", src.display()),
        source,
    })?;
    let out = std::process::Command::new(cxx)
        .args([
            "-std=c++17",
            std::env::var("RTX_EMU_OPT").as_deref().unwrap_or("-O1"),
            "-w",
            "-o",
        ])
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
    Ok(exe)
}

/// Runs a program built by [`compile_program`].
pub fn run_program(exe: &std::path::Path) -> Result<(), EmulationError> {
    let run = std::process::Command::new(exe)
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

/// Splits `units` (a kernel and the `main` code that launches it) into as many programs as
/// the machine has cores (at most 8), then compiles and runs them concurrently; returns the
/// first failure.
pub fn run_units(
    units: Vec<(String, KernelSource, String)>,
    dir: &std::path::Path,
    name: &str,
) -> Result<(), EmulationError> {
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8)
        .min(units.len().max(1));
    let mut groups: Vec<(Vec<(String, KernelSource)>, String)> =
        (0..n).map(|_| (Vec::new(), String::new())).collect();
    for (i, (ns, src, main)) in units.into_iter().enumerate() {
        let g = &mut groups[i % n];
        g.0.push((ns, src));
        g.1.push_str(&main);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .enumerate()
            .map(|(i, (kernels, main))| {
                scope.spawn(move || {
                    compile_and_run(&host_program(kernels, main), dir, &format!("{name}{i}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(EmulationError::Compile("emulation thread panicked".into()))
                })
            })
            .collect::<Result<Vec<()>, _>>()
    })?;
    Ok(())
}

/// [`compile_program`] then [`run_program`].
pub fn compile_and_run(
    program: &str,
    dir: &std::path::Path,
    name: &str,
) -> Result<(), EmulationError> {
    run_program(&compile_program(program, dir, name)?)
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
