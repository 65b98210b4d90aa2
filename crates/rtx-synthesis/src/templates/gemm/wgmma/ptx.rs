//! Inline-PTX device helpers of the wgmma GEMM kernel: mbarriers, TMA copies, cluster
//! primitives, `setmaxnreg`, wgmma fences, shared-memory matrix descriptors, and the
//! `wgmma.mma_async` instruction wrapper generated from its N.

use crate::templates::codegen::CudaWriter;
use crate::DType;

/// wgmma descriptor swizzle field (bits 62-63) for the 128-byte swizzle.
pub const DESC_SWIZZLE_128B: u64 = 1;
/// Stride byte offset: distance between 8-row core-matrix groups of a 128B-swizzled tile.
pub const DESC_SBO_BYTES: u64 = 1024;
/// Leading byte offset of a K-major swizzled operand (unused by the hardware; canonical value 16).
pub const DESC_LBO_K_MAJOR: u64 = 16;
/// Leading byte offset of an MN-major operand: distance between 64-element MN columns (one
/// 64 x 64 TMA box = 64 K rows of 128 bytes).
pub const DESC_LBO_MN_MAJOR: u64 = 64 * 128;

/// The constant (non-address) bits of a 128B-swizzled wgmma shared-memory descriptor:
/// LBO >> 4 at bits 16-29, SBO >> 4 at bits 32-45, swizzle mode at bits 62-63, base offset 0.
pub fn descriptor_bits(k_major: bool) -> u64 {
    let lbo = if k_major {
        DESC_LBO_K_MAJOR
    } else {
        DESC_LBO_MN_MAJOR
    };
    ((lbo >> 4) & 0x3FFF) << 16 | ((DESC_SBO_BYTES >> 4) & 0x3FFF) << 32 | DESC_SWIZZLE_128B << 62
}

/// Full descriptor of the operand tile at shared-memory byte address `addr` (start address >> 4
/// in bits 0-13).
pub fn descriptor(addr: u32, k_major: bool) -> u64 {
    descriptor_bits(k_major) | ((addr as u64 & 0x3FFFF) >> 4)
}

/// The PTX type name wgmma uses for an input dtype (`bf16` / `f16` / `tf32`).
pub fn wgmma_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bf16 => "bf16",
        DType::Tf32 => "tf32",
        _ => "f16",
    }
}

/// K of one wgmma instruction: 8 for tf32, 16 for the 2-byte types (32 bytes of K either way).
pub fn wgmma_k(dtype: DType) -> u32 {
    if dtype == DType::Tf32 {
        8
    } else {
        16
    }
}

/// Name of the generated wrapper for `wgmma.mma_async.m64n{n}k{8|16}`.
pub fn wgmma_fn_name(n: u32, dtype: DType) -> String {
    format!("wgmma_m64n{n}k{}", wgmma_k(dtype))
}

/// The PTX instruction text (operands numbered as in the generated wrapper) for an m64nNk16
/// (m64nNk8 for tf32) f32-accumulating wgmma with both operands in shared memory.
///
/// The transpose immediates exist for f16/bf16 only: a tf32 instruction has none (both of its
/// operands must be K-major in shared memory), so `trans_a`/`trans_b` must be false for tf32.
pub fn wgmma_instruction(n: u32, dtype: DType, trans_a: bool, trans_b: bool) -> String {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let t = wgmma_type(dtype);
    let tail = if dtype == DType::Tf32 {
        debug_assert!(!trans_a && !trans_b, "tf32 wgmma has no transpose");
        String::new()
    } else {
        format!(", {}, {}", trans_a as u32, trans_b as u32)
    };
    format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k{}.f32.{t}.{t} {{{}}}, %{}, %{}, p, 1, 1{tail};",
        wgmma_k(dtype),
        list.join(", "),
        regs,
        regs + 1,
    )
}

/// Emits `wgmma_m64n{n}k{k}(float (&d)[n/2], u64 desc_a, u64 desc_b, int scale_d)`: D (+)= A*B with
/// `scale_d == 0` overwriting D. Transposes are baked: `trans_a`/`trans_b` set for MN-major operands
/// (f16/bf16 only).
pub fn emit_wgmma_fn(w: &mut CudaWriter, n: u32, dtype: DType, trans_a: bool, trans_b: bool) {
    let regs = n / 2;
    w.comment(format!(
        "m64n{n}k{} wgmma, fp32 accumulators: thread t of the warpgroup holds rows 16*(t/32) + (t%32)/4 (+8), cols 8*i + 2*(t%4) (+1)",
        wgmma_k(dtype)
    ));
    w.open(format!(
        "__device__ __forceinline__ void {}(float (&d)[{regs}], unsigned long long da, unsigned long long db, int scale_d)",
        wgmma_fn_name(n, dtype)
    ));
    emit_wgmma_asm(
        w,
        regs,
        regs + 2,
        &wgmma_instruction(n, dtype, trans_a, trans_b),
        "\"l\"(da), \"l\"(db), \"r\"(scale_d)",
    );
    w.close("");
}

/// The `asm volatile` of a wgmma wrapper: a predicate set from operand `%{scale}` (scale-d), the
/// `instruction`, the `regs` accumulators `d[]` as read-write outputs (8 a line), then `inputs`.
fn emit_wgmma_asm(w: &mut CudaWriter, regs: u32, scale: u32, instruction: &str, inputs: &str) {
    w.line("asm volatile(");
    w.line("  \"{\\n.reg .pred p;\\n\"");
    w.line(format!("  \"setp.ne.b32 p, %{scale}, 0;\\n\""));
    w.line(format!("  \"{instruction}\\n}}\\n\""));
    let outs: Vec<String> = (0..regs).map(|i| format!("\"+f\"(d[{i}])")).collect();
    for (i, chunk) in outs.chunks(8).enumerate() {
        let lead = if i == 0 { ": " } else { "  " };
        w.line(format!(
            "  {lead}{}{}",
            chunk.join(", "),
            if (i + 1) * 8 < outs.len() { "," } else { "" }
        ));
    }
    w.line(format!("  : {inputs}"));
    w.line("  : \"memory\");");
}

/// Name of the generated wrapper for the register-A `wgmma.mma_async.m64n{n}k8` (tf32).
pub fn wgmma_rs_fn_name(n: u32) -> String {
    format!("wgmma_m64n{n}k8_rs")
}

/// The PTX instruction text of an m64nNk8 tf32 wgmma whose A comes from four registers of each
/// thread (operands numbered as in the generated wrapper: the accumulators, the four A
/// registers, the B descriptor).
pub fn wgmma_rs_instruction(n: u32) -> String {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let a: Vec<String> = (regs..regs + 4).map(|i| format!("%{i}")).collect();
    format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{{}}}, {{{}}}, %{}, p, 1, 1;",
        list.join(", "),
        a.join(", "),
        regs + 4,
    )
}

/// Emits `wgmma_m64n{n}k8_rs(float (&d)[n/2], unsigned a0..a3, u64 desc_b, int scale_d)`: D (+)=
/// A*B for tf32 with A from registers. Thread t of the warpgroup holds A rows
/// 16*(t/32) + (t%32)/4 (a0, a2) and that + 8 (a1, a3), K columns t%4 (a0, a1) and t%4 + 4
/// (a2, a3) of the instruction's 64 x 8 A.
pub fn emit_wgmma_rs_fn(w: &mut CudaWriter, n: u32) {
    let regs = n / 2;
    w.comment(format!(
        "m64n{n}k8 tf32 wgmma, A from registers: a0 (r, k), a1 (r + 8, k), a2 (r, k + 4), a3 (r + 8, k + 4) with r = 16*(t/32) + (t%32)/4, k = t%4"
    ));
    w.open(format!(
        "__device__ __forceinline__ void {}(float (&d)[{regs}], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long db, int scale_d)",
        wgmma_rs_fn_name(n)
    ));
    emit_wgmma_asm(
        w,
        regs,
        regs + 5,
        &wgmma_rs_instruction(n),
        "\"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(db), \"r\"(scale_d)",
    );
    w.close("");
}

/// The 32-bit shared-memory load a register-A kernel reads its A fragments with (volatile, so it
/// stays after the full-barrier wait that publishes the stage).
pub const LDS_U32_HELPER: &str = r#"__device__ __forceinline__ unsigned lds_u32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}"#;

/// Device helpers of the cluster split-K exchange (`cluster_k` 2): mapping a shared-memory
/// offset into the peer CTA, the `st.async` push that completes transaction bytes on the peer's
/// mbarrier, and a vector shared-memory load.
pub const CLUSTER_K_HELPERS: &str = r#"// The address of shared-memory offset `addr` in CTA `cta` of this cluster.
__device__ __forceinline__ unsigned mapa_peer(unsigned addr, unsigned cta) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(cta));
  return r;
}
// Store 16 bytes at cluster address `dst` (another CTA's shared memory) and complete 16
// transaction bytes on the mbarrier at cluster address `bar` in that CTA.
__device__ __forceinline__ void st_async_f4(unsigned dst, unsigned bar, float a, float b, float c, float d) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%2, %3, %4, %5}, [%1];"
               :: "r"(dst), "r"(bar), "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(__float_as_uint(c)),
                  "r"(__float_as_uint(d)) : "memory");
}
// Spin until the phase with parity `parity` of this CTA's mbarrier has completed, acquiring at
// cluster scope: what the phase publishes was written (or read) by the peer CTA.
// (The retry loop is in the PTX: labels inside the braces are local to each inlined copy.)
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}"
               :: "r"(bar), "r"(parity) : "memory");
}
// Arrive on the mbarrier at the same offset in CTA `cta`, releasing at cluster scope (this
// thread's reads of the buffer the barrier guards are done before the peer writes it again).
__device__ __forceinline__ void mbar_arrive_release_cluster(unsigned bar, unsigned cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}"
               :: "r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ float4 ld_shared_f4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
  return v;
}"#;

/// Device helpers every variant uses (verbatim PTX wrappers; no parameters).
pub const DEVICE_HELPERS: &str = r#"// 128-byte opaque CUtensorMap (128-byte aligned as in CUDA 13 cuda.h), passed by value as a __grid_constant__ kernel parameter.
struct __align__(128) TmaMap { unsigned long long v[16]; };

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Arrive on the mbarrier at the same offset in CTA `cta` of this cluster. Default (.release.cta)
// semantics: the arrival only says "my wgmmas have finished reading this stage"; there is no
// generic-proxy data to publish to the cluster, and a .release.cluster arrive costs the consumer
// a cluster-wide fence per k-block.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}"
               :: "r"(bar), "r"(cta) : "memory");
}
// Spin until the phase with parity `parity` of the mbarrier has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void prefetch_tmap(const TmaMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// TMA: one box of a rank-3 map into this CTA's shared memory; completes tx bytes on `bar`.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaMap* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// TMA multicast: the box lands at offset `dst` (and completes tx on `bar`) in every CTA of `mask`.
__device__ __forceinline__ void tma_load_3d_multicast(unsigned dst, const TmaMap* map, unsigned bar, int c0, int c1, int c2, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "h"(mask), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Named barriers (ids 1.. ; 0 is __syncthreads): arrive without waiting / arrive and wait.
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
// Keeps the compiler from touching accumulators across wgmma.wait_group.
__device__ __forceinline__ void fence_operand(float& x) {
  asm volatile("" : "+f"(x) :: "memory");
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_fields_land_in_their_bits() {
        let d = descriptor(0x1_2400, true);
        assert_eq!(d & 0x3FFF, 0x1_2400 >> 4, "start address >> 4 in bits 0-13");
        assert_eq!((d >> 16) & 0x3FFF, 1, "K-major LBO = 16 bytes");
        assert_eq!((d >> 32) & 0x3FFF, 64, "SBO = 1024 bytes");
        assert_eq!((d >> 49) & 0x7, 0, "base offset 0 (1024-aligned tiles)");
        assert_eq!(d >> 62, 1, "128B swizzle");
        let mn = descriptor(0, false);
        assert_eq!((mn >> 16) & 0x3FFF, 512, "MN-major LBO = 8192 bytes");
        // The last 1024-aligned tile below sm_90's 227 KiB of shared memory keeps its whole
        // address in the 14-bit start field, without touching the fields above it.
        let top = 227 * 1024 - 1024;
        assert_eq!(descriptor(top, true) & 0x3FFF, (top >> 4) as u64);
        assert_eq!(descriptor(top, true) >> 14, descriptor(0, true) >> 14);
    }

    #[test]
    fn instruction_is_generated_from_n() {
        for n in [64u32, 128, 192, 256] {
            let s = wgmma_instruction(n, DType::Bf16, false, true);
            assert!(s.starts_with(&format!(
                "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{%0, %1,"
            )));
            assert!(s.contains(&format!("%{}}}", n / 2 - 1)), "{s}");
            assert!(
                s.ends_with(&format!("%{}, %{}, p, 1, 1, 0, 1;", n / 2, n / 2 + 1)),
                "{s}"
            );
        }
        assert!(wgmma_instruction(64, DType::F16, true, false).contains(".f32.f16.f16"));
    }

    #[test]
    fn tf32_instruction_is_k8_without_transpose_immediates() {
        for n in [64u32, 128, 192, 256] {
            let s = wgmma_instruction(n, DType::Tf32, false, false);
            assert!(
                s.starts_with(&format!(
                    "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 {{%0, %1,"
                )),
                "{s}"
            );
            assert!(
                s.ends_with(&format!("%{}, %{}, p, 1, 1;", n / 2, n / 2 + 1)),
                "{s}"
            );
        }
        assert_eq!(wgmma_fn_name(256, DType::Tf32), "wgmma_m64n256k8");
        assert_eq!(wgmma_fn_name(256, DType::Bf16), "wgmma_m64n256k16");
        assert_eq!(
            wgmma_k(DType::Tf32) * 4,
            wgmma_k(DType::F16) * 2,
            "32 bytes of K per instruction"
        );
    }

    #[test]
    fn wrapper_lists_every_accumulator() {
        let mut w = CudaWriter::new();
        emit_wgmma_fn(&mut w, 256, DType::Bf16, false, false);
        let s = w.finish();
        assert!(s.contains("float (&d)[128]"));
        assert!(s.contains("\"+f\"(d[127])") && !s.contains("d[128]"));
        assert!(s.contains("setp.ne.b32 p, %130, 0;"));
    }
}
