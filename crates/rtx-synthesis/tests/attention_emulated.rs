//! The generated attention kernels run on the CPU through the host emulator
//! (`templates::elementwise::host_emulation`: g++ and one fiber per CUDA thread, lockstep at
//! every barrier / shuffle), with the inline-PTX primitives replaced by host versions that
//! follow the PTX ISA definitions:
//! - `ldmatrix.x4` (and `.trans`): lane `l` gets, from matrix `i` (row addresses from lanes
//!   `8i..8i+7`), row `l/4` columns `2(l%4)..+1` (`.trans`: rows `2(l%4)..+1` of column `l/4`);
//! - `mma.m16n8k16.row.col`: the documented A / B / C fragment layouts, exact f32 products of
//!   the f16/bf16 inputs;
//! - `cp.async`: queued per thread and performed at `cp.async.wait_group` (the latest moment
//!   allowed) or at issue (the earliest), so a missing wait or barrier shows up as stale or
//!   early data; shared memory is poisoned (0xFF = NaN) before every block.
//!
//! Every output row is compared with the f64 reference (same bound as the GPU test). This
//! checks fragment layouts, ldmatrix addressing, the swizzle, masking, the online softmax, the
//! tile pipeline and the epilogue without a GPU; not device numerics or performance.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
mod attention_support;
use attention_support::{decode, encode, row_error};
use rtx_synthesis::templates::attention::device::ATTN_PRIMITIVES;
use rtx_synthesis::templates::attention::{
    attention_f64, AttentionConfig, AttentionInputs, AttentionProblem, AttentionTemplate,
};
use rtx_synthesis::templates::elementwise::host_emulation::{host_compiler, run_units};
use rtx_synthesis::templates::{KernelSource, Template};
use rtx_synthesis::{Arch, DType};

/// Host versions of the primitives (inside the kernel's namespace, after the constants).
const HOST_PRIMITIVES: &str = r#"
alignas(128) static unsigned char attn_emu_smem[256 * 1024];
static bool attn_emu_immediate = false;
struct AttnEmuCopy { unsigned dst; const void* src; int bytes; };
static std::vector<AttnEmuCopy> attn_emu_open[1024];
static std::vector<std::vector<AttnEmuCopy>> attn_emu_groups[1024];
static unsigned attn_emu_addr[2][1024];
static unsigned attn_emu_a[2][1024][4];
static unsigned attn_emu_b[2][1024][2];

static void attn_emu_fail(const char* what) { fprintf(stderr, "RTX_EMU attention: %s\n", what); exit(3); }
static inline unsigned attn_smem_addr(const void* p) {
  const unsigned char* c = (const unsigned char*)p;
  if (c < attn_emu_smem || c >= attn_emu_smem + sizeof(attn_emu_smem)) attn_emu_fail("address outside shared memory");
  return (unsigned)(c - attn_emu_smem);
}
static inline void attn_emu_apply(const AttnEmuCopy& c) {
  if (c.dst % 16 != 0 || c.dst + 16 > sizeof(attn_emu_smem)) attn_emu_fail("misaligned cp.async destination");
  if (c.bytes != 0 && c.bytes != 16) attn_emu_fail("partial cp.async");
  for (int i = 0; i < 16; ++i) attn_emu_smem[c.dst + i] = i < c.bytes ? ((const unsigned char*)c.src)[i] : 0;
}
static inline void attn_cp_async16(unsigned dst, const void* src, int src_bytes) {
  if (((uintptr_t)src) % 16 != 0) attn_emu_fail("misaligned cp.async source");
  AttnEmuCopy c{dst, src, src_bytes};
  if (attn_emu_immediate) attn_emu_apply(c); else attn_emu_open[threadIdx.x].push_back(c);
}
static inline void attn_commit() {
  attn_emu_groups[threadIdx.x].push_back(attn_emu_open[threadIdx.x]);
  attn_emu_open[threadIdx.x].clear();
}
template <int N> static inline void attn_wait() {
  auto& q = attn_emu_groups[threadIdx.x];
  while ((int)q.size() > N) {
    for (auto& c : q.front()) attn_emu_apply(c);
    q.erase(q.begin());
  }
}
static inline void __syncwarp() { rtxemu::yield(); }
static inline unsigned attn_emu_bank() { return (unsigned)(rtxemu::fibers[rtxemu::cur].syncs & 1); }
static inline void attn_emu_ldsm(unsigned (&r)[4], unsigned addr, bool trans) {
  const unsigned t = threadIdx.x;
  unsigned* bank = attn_emu_addr[attn_emu_bank()];
  bank[t] = addr;
  rtxemu::yield();
  const unsigned w0 = t & ~31u, l = t & 31u;
  for (int i = 0; i < 4; ++i) {
    unsigned e[2];
    for (int k = 0; k < 2; ++k) {
      const unsigned row = trans ? 2 * (l % 4) + k : l / 4;
      const unsigned col = trans ? l / 4 : 2 * (l % 4) + k;
      const unsigned a = bank[w0 + 8 * i + row];
      if (a % 16 != 0 || a + 16 > sizeof(attn_emu_smem)) attn_emu_fail("bad ldmatrix row address");
      uint16_t v;
      memcpy(&v, attn_emu_smem + a + 2 * col, 2);
      e[k] = v;
    }
    r[i] = e[0] | (e[1] << 16);
  }
}
static inline void attn_ldsm_x4(unsigned (&r)[4], unsigned addr) { attn_emu_ldsm(r, addr, false); }
static inline void attn_ldsm_x4_t(unsigned (&r)[4], unsigned addr) { attn_emu_ldsm(r, addr, true); }
static inline float attn_emu_f(unsigned reg, int hi) {
  const uint16_t bits = (uint16_t)(hi ? reg >> 16 : reg & 0xffffu);
  if (KIND == 0) { __half h; h.bits = bits; return __half2float(h); }
  __nv_bfloat16 h; h.bits = bits; return __bfloat162float(h);
}
static inline void attn_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const unsigned t = threadIdx.x, bk = attn_emu_bank();
  for (int i = 0; i < 4; ++i) attn_emu_a[bk][t][i] = a[i];
  attn_emu_b[bk][t][0] = b0;
  attn_emu_b[bk][t][1] = b1;
  rtxemu::yield();
  const unsigned w0 = t & ~31u, l = t & 31u, g = l / 4, tq = l % 4;
  auto A = [&](int row, int k) {
    return attn_emu_f(attn_emu_a[bk][w0 + (row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k % 2);
  };
  auto B = [&](int k, int n) { return attn_emu_f(attn_emu_b[bk][w0 + n * 4 + (k % 8) / 2][k >= 8], k % 2); };
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * tq + (e & 1);
    float acc = 0.0f;
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[e] += acc;
  }
}
static inline float attn_exp2(float x) { return exp2f(x); }
"#;

/// The kernel source with the host primitives and a static shared-memory array.
fn host_source(src: &KernelSource) -> KernelSource {
    assert!(
        src.code.contains(ATTN_PRIMITIVES.trim()),
        "primitives block not found"
    );
    let decl = "extern __shared__ __align__(128) unsigned char attn_smem[];";
    assert!(src.code.contains(decl));
    let code = src
        .code
        .replace(ATTN_PRIMITIVES.trim(), HOST_PRIMITIVES)
        .replace(decl, "unsigned char* const attn_smem = attn_emu_smem;");
    KernelSource {
        code,
        ..src.clone()
    }
}

struct Launch {
    problem: AttentionProblem,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    out: std::path::PathBuf,
}

#[test]
fn emulated_on_the_host_cpu() {
    if let Err(e) = host_compiler() {
        eprintln!("SKIP emulated_on_the_host_cpu: {e}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    eprintln!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let cfg = |head_dim, block_m, block_n, warps, stages| AttentionConfig {
        head_dim,
        block_m,
        block_n,
        warps,
        stages,
    };
    // (config, causal, dtype, copies at issue)
    let plan = [
        (cfg(64, 128, 128, 8, 2), false, DType::F16, false),
        (cfg(64, 128, 128, 8, 2), true, DType::Bf16, true),
        (cfg(64, 64, 32, 4, 1), true, DType::F16, false),
        (cfg(64, 128, 64, 4, 2), false, DType::Bf16, false),
        (cfg(64, 128, 64, 4, 2), true, DType::F16, true),
        (cfg(64, 64, 128, 4, 2), true, DType::Bf16, false),
        (cfg(128, 128, 64, 8, 2), false, DType::Bf16, false),
        (cfg(128, 128, 64, 8, 2), true, DType::F16, false),
        (cfg(128, 128, 32, 4, 2), true, DType::Bf16, false),
        (cfg(128, 64, 64, 4, 1), false, DType::F16, true),
        (cfg(128, 128, 64, 8, 1), true, DType::Bf16, false),
        (cfg(128, 64, 32, 4, 2), false, DType::F16, false),
    ];
    let t = AttentionTemplate;
    let mut units = Vec::new();
    let mut launches = Vec::new();
    for (u, (c, causal, dtype, immediate)) in plan.iter().enumerate() {
        let base = AttentionProblem::new(1, 2, 1, c.head_dim, *causal, *dtype);
        let src = t
            .emit(&base, c, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{e}"));
        let ns = format!("k{u}");
        let shapes: &[(u32, u32, u32)] = if *causal {
            &[(1, 1, 1), (2, 17, 17), (1, 150, 150), (1, 70, 33)]
        } else {
            &[(1, 1, 1), (1, 33, 161), (2, 130, 70)]
        };
        let mut main = String::new();
        for (si, &(batch, seq_q, seq_k)) in shapes.iter().enumerate() {
            let p = AttentionProblem {
                batch,
                seq_q,
                seq_k,
                ..base
            };
            let nq = p.q_elems().unwrap() as usize;
            let nk = p.kv_elems().unwrap() as usize;
            let mut gen = |n: usize, a: f32| {
                (0..n)
                    .map(|_| rng.random_range(-a..a))
                    .collect::<Vec<f32>>()
            };
            let (qb, q) = encode(*dtype, &gen(nq, 2.0));
            let (kb, k) = encode(*dtype, &gen(nk, 2.0));
            let (vb, v) = encode(*dtype, &gen(nk, 1.0));
            let path = |n: &str| dir.path().join(format!("u{u}_s{si}_{n}.bin"));
            for (n, b) in [("q", &qb), ("k", &kb), ("v", &vb)] {
                std::fs::write(path(n), b).expect("write input");
            }
            let d = t.launch(&p, c);
            main.push_str(&format!(
                r#"  {{
    unsigned char* q = rtx_load("{q}", {qbytes});
    unsigned char* k = rtx_load("{k}", {kbytes});
    unsigned char* v = rtx_load("{v}", {kbytes});
    unsigned char* o = rtx_poison({qbytes});
    {ns}::attn_emu_immediate = {imm};
    rtxemu::body = [&] {{ {ns}::{entry}((const {ns}::T*)q, (const {ns}::T*)k, (const {ns}::T*)v, ({ns}::T*)o, {seq_q}, {seq_k}, {sl:e}f, {strides}); }};
    gridDim.x = {gx}; gridDim.y = {gy}; gridDim.z = {gz}; blockDim.x = {threads};
    for (unsigned z = 0; z < {gz}; ++z) for (unsigned y = 0; y < {gy}; ++y) for (unsigned x = 0; x < {gx}; ++x) {{
      blockIdx.y = y; blockIdx.z = z;
      memset({ns}::attn_emu_smem, 0xFF, sizeof({ns}::attn_emu_smem));
      rtxemu::run_block(x, {threads});
    }}
    rtx_save("{out}", o, {qbytes});
  }}
"#,
                q = path("q").display(),
                k = path("k").display(),
                v = path("v").display(),
                out = path("o").display(),
                qbytes = nq * 2,
                kbytes = nk * 2,
                imm = immediate,
                entry = src.entry,
                sl = AttentionTemplate::scale_log2(&p),
                strides = {
                    let l = rtx_synthesis::templates::attention::AttentionLayout::contiguous(&p);
                    [l.q, l.k, l.v, l.o].iter().map(|s| format!("{}LL, {}LL, {}", s.batch, s.head, s.row)).collect::<Vec<_>>().join(", ")
                },
                gx = d.grid[0],
                gy = d.grid[1],
                gz = d.grid[2],
                threads = d.block[0],
            ));
            launches.push((
                format!("{} {p:?}", src.entry),
                Launch {
                    problem: p,
                    q,
                    k,
                    v,
                    out: path("o"),
                },
            ));
        }
        units.push((ns, host_source(&src), main));
    }
    run_units(units, dir.path(), "attn_emu").unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for (name, l) in &launches {
        let p = &l.problem;
        let got = decode(p.dtype, &std::fs::read(&l.out).expect("output"));
        let want = attention_f64(
            p,
            &AttentionInputs {
                q: &l.q,
                k: &l.k,
                v: &l.v,
            },
        )
        .unwrap();
        let d = p.head_dim as usize;
        let mut worst = 0.0f64;
        for r in 0..(p.batch * p.heads * p.seq_q) as usize {
            let e = row_error(&got[r * d..(r + 1) * d], &want[r * d..(r + 1) * d]);
            if e > p.dtype.rel_tolerance() && failures.len() < 20 {
                failures.push(format!(
                    "{name}: row {r} error {e:.3e}; got {:?}.. want {:?}..",
                    &got[r * d..r * d + 4],
                    &want[r * d..r * d + 4]
                ));
            }
            worst = worst.max(e);
        }
        eprintln!(
            "{} worst {worst:.3e}: {name}",
            if worst <= p.dtype.rel_tolerance() {
                "PASS"
            } else {
                "FAIL"
            }
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
