//! Device code of the fused attention kernel (verbatim CUDA C++ reading the constants the
//! template writes: `T`, `KIND`, `D`, `BM`, `BN`, `WARPS`, `STAGES`, `CAUSAL`).
//!
//! Fragment layouts (PTX ISA, `mma.m16n8k16`, g = lane / 4, t = lane % 4):
//! - A (16x16, row): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..).
//! - B (16x8, col): b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g).
//! - C/D (16x8 f32): c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1).
//! - `ldmatrix.x4`: lanes 8i..8i+7 give the row addresses of 8x8 matrix i, register i holds
//!   matrix i with lane l owning row l/4, columns 2(l%4)..+1 (`.trans`: column l/4, rows 2(l%4)..+1).
//!
//! Hence S = Q K^T's accumulators of key tiles 2k and 2k+1 are, packed pairwise to 16 bits,
//! exactly the A fragment of P for key slice k of P V (no shared-memory round trip).

/// The hardware primitives (inline PTX: shared addresses, `cp.async`, `ldmatrix`, `mma.sync`,
/// `ex2.approx`), emitted as one block so a host emulation can substitute exactly this text.
pub const ATTN_PRIMITIVES: &str = r#"
__device__ __forceinline__ unsigned attn_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void attn_cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void attn_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void attn_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ void attn_ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void attn_ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
// d += a * b for one 16x8x16 tile.
__device__ __forceinline__ void attn_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (KIND == 0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ float attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
"#;

/// The helpers after the primitives (tile constants, conversion, tile loader).
pub const ATTN_HELPERS: &str = r#"
constexpr int THREADS = WARPS * 32;
constexpr int WROWS = BM / WARPS;        // query rows per warp
constexpr int MT = WROWS / 16;           // 16-row mma tiles per warp
constexpr int NT = BN / 8;               // 8-key accumulator tiles of S
constexpr int DT = D / 8;                // 8-column accumulator tiles of O
constexpr int KQ = D / 16;               // k16 steps of Q K^T
constexpr int KP = BN / 16;              // k16 steps of P V
constexpr int CPR = D / 8;               // 16-byte chunks per row
constexpr bool Q_REGS = MT == 1;
static_assert(WROWS == 16 || WROWS == 32, "rows per warp");
static_assert(BN % 16 == 0 && D % 16 == 0, "tile shape");
static_assert((BN * CPR) % THREADS == 0 && (BM * CPR) % THREADS == 0 && THREADS % CPR == 0, "tile split");

// Element offset of (r, c) in a [rows][D] tile: 16-byte chunks XOR-swizzled by r % 8, so the
// 8 rows of one ldmatrix phase (same logical chunk) hit 8 distinct bank groups.
__device__ __forceinline__ int attn_soff(int r, int c) {
  return r * D + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}
// Two f32 -> one register of two 16-bit values, `lo` in the low half (the lower column).
__device__ __forceinline__ unsigned attn_pack(float lo, float hi) {
  if constexpr (KIND == 0) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
  }
}
// ROWS x D tile of a head (rows row0.., `ld` elements apart, valid rows < lim) -> swizzled shared memory via 16-byte
// cp.async; rows past lim are zero-filled (so masked keys multiply zeros, never garbage).
template <int ROWS>
__device__ __forceinline__ void attn_load_tile(T* s, const T* __restrict__ g, int row0, int lim, int tid, int ld) {
  constexpr int ITERS = ROWS * CPR / THREADS;
  constexpr int RSTEP = THREADS / CPR;
  const int r0 = tid / CPR;
  const int c = (tid % CPR) * 8;
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    const int r = r0 + i * RSTEP;
    const bool ok = row0 + r < lim;
    const T* src = ok ? g + (row0 + r) * ld + c : g;
    attn_cp_async16(attn_smem_addr(s + attn_soff(r, c)), src, ok ? 16 : 0);
  }
}
"#;

/// The kernel body (after the signature
/// `(const T* Q, const T* K, const T* V, T* O, int seq_q, int seq_k, float scale_log2`, then
/// `long long sb, long long sh, int ss` strides in elements for Q, K, V and O).
pub const ATTN_BODY: &str = r#"
extern __shared__ __align__(128) unsigned char attn_smem[];
T* const sQ = reinterpret_cast<T*>(attn_smem);
T* const sK = sQ + BM * D;
T* const sV = sK + STAGES * BN * D;
const int tid = threadIdx.x;
const int warp = tid >> 5;
const int lane = tid & 31;
const int g = lane >> 2;
const int t = lane & 3;
// Heaviest (causal) query tiles first; blocks of one head run together and share K/V in L2.
const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * BM;
// blockIdx.z = batch, blockIdx.y = head; every tensor has its own (batch, head, row) strides.
const long long b_idx = blockIdx.z, h_idx = blockIdx.y;
Q += b_idx * q_sb + h_idx * q_sh;
O += b_idx * o_sb + h_idx * o_sh;
K += b_idx * k_sb + h_idx * k_sh;
V += b_idx * v_sb + h_idx * v_sh;
const int wrow = warp * WROWS;  // first row of this warp inside the block tile
int n_end = seq_k;
if constexpr (CAUSAL) n_end = seq_k < m0 + BM ? seq_k : m0 + BM;
const int ntiles = (n_end + BN - 1) / BN;

// Prologue: group 0 = Q + K tile 0, group 1 = V tile 0.
attn_load_tile<BM>(sQ, Q, m0, seq_q, tid, q_ss);
attn_load_tile<BN>(sK, K, 0, seq_k, tid, k_ss);
attn_commit();
attn_load_tile<BN>(sV, V, 0, seq_k, tid, v_ss);
attn_commit();

float o[MT][DT][4];
float m_run[MT][2];
float l_run[MT][2];
#pragma unroll
for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[mi][dt][e] = 0.0f;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_run[mi][h] = ATTN_NEG_INF;
    l_run[mi][h] = 0.0f;
  }
}

unsigned qf[Q_REGS ? KQ : 1][4];
if constexpr (Q_REGS) {
  attn_wait<1>();
  __syncthreads();
#pragma unroll
  for (int kq = 0; kq < KQ; ++kq)
    attn_ldsm_x4(qf[kq], attn_smem_addr(sQ + attn_soff(wrow + (lane & 15), kq * 16 + (lane >> 4) * 8)));
}

for (int j = 0; j < ntiles; ++j) {
  const int n0 = j * BN;
  const int buf = STAGES == 2 ? (j & 1) : 0;
  const T* sKj = sK + buf * (BN * D);
  const T* sVj = sV + buf * (BN * D);
  attn_wait<1>();  // K tile j (and Q) landed for this thread; V tile j may be in flight
  __syncthreads(); // ... for every thread; and nobody reads the buffers refilled below
  if constexpr (STAGES == 2) {
    if (j + 1 < ntiles) attn_load_tile<BN>(sK + ((j + 1) & 1) * (BN * D), K, n0 + BN, seq_k, tid, k_ss);
    attn_commit();
  }

  // S = Q K^T (raw scores).
  float s[MT][NT][4];
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mi][ni][e] = 0.0f;
    }
  }
#pragma unroll
  for (int kq = 0; kq < KQ; ++kq) {
    unsigned a[MT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
      if constexpr (Q_REGS) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[mi][e] = qf[kq][e];
      } else {
        attn_ldsm_x4(a[mi], attn_smem_addr(sQ + attn_soff(wrow + mi * 16 + (lane & 15), kq * 16 + (lane >> 4) * 8)));
      }
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      // K is [key][d] = B col-major: matrices (keys 0-7 | 8-15) x (d 0-7 | 8-15) -> b0,b1 of tile 2np, b0,b1 of 2np+1.
      unsigned r[4];
      attn_ldsm_x4(r, attn_smem_addr(sKj + attn_soff(np * 16 + (lane & 7) + ((lane >> 4) << 3), kq * 16 + ((lane >> 3) & 1) * 8)));
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        attn_mma(s[mi][2 * np], a[mi], r[0], r[1]);
        attn_mma(s[mi][2 * np + 1], a[mi], r[2], r[3]);
      }
    }
  }

  // Mask keys past seq_k and (causal) keys after the query; only tiles that need it (warp-uniform).
  if (n0 + BN > seq_k || (CAUSAL && n0 + BN - 1 > m0 + wrow)) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + wrow + mi * 16 + g + ((e >> 1) << 3);
          const int col = n0 + ni * 8 + 2 * t + (e & 1);
          if (col >= seq_k || (CAUSAL && col > row)) s[mi][ni][e] = ATTN_NEG_INF;
        }
      }
    }
  }

  // Online softmax: each row lives in one quad (4 lanes); rows g (h = 0) and g + 8 (h = 1).
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m_run[mi][h];
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) mx = fmaxf(mx, fmaxf(s[mi][ni][2 * h], s[mi][ni][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with no key yet keeps max -inf: subtract 0 instead (exp2(-inf) = 0, never NaN).
      const float ms = mx == ATTN_NEG_INF ? 0.0f : mx * scale_log2;
      const float alpha = attn_exp2(fmaf(m_run[mi][h], scale_log2, -ms));
      m_run[mi][h] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = attn_exp2(fmaf(s[mi][ni][2 * h + e], scale_log2, -ms));
          s[mi][ni][2 * h + e] = p;
          sum += p;
        }
      }
      l_run[mi][h] = l_run[mi][h] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[mi][dt][2 * h] *= alpha;
        o[mi][dt][2 * h + 1] *= alpha;
      }
    }
  }

  if constexpr (STAGES == 2) {
    attn_wait<1>();  // V tile j landed (only K tile j + 1 may be in flight)
    __syncthreads();
    if (j + 1 < ntiles) attn_load_tile<BN>(sV + ((j + 1) & 1) * (BN * D), V, n0 + BN, seq_k, tid, v_ss);
    attn_commit();
  } else {
    attn_wait<0>();  // V tile j landed
    __syncthreads(); // and every warp is done reading K tile j
    if (j + 1 < ntiles) {
      attn_load_tile<BN>(sK, K, n0 + BN, seq_k, tid, k_ss);
      attn_commit();
    }
  }

  // O += P V: P's accumulators, packed to 16 bits, are the A fragments (see the module docs).
#pragma unroll
  for (int kp = 0; kp < KP; ++kp) {
    unsigned a[MT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
      a[mi][0] = attn_pack(s[mi][2 * kp][0], s[mi][2 * kp][1]);
      a[mi][1] = attn_pack(s[mi][2 * kp][2], s[mi][2 * kp][3]);
      a[mi][2] = attn_pack(s[mi][2 * kp + 1][0], s[mi][2 * kp + 1][1]);
      a[mi][3] = attn_pack(s[mi][2 * kp + 1][2], s[mi][2 * kp + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < DT / 2; ++dp) {
      // V is [key][d] = B row-major: .trans, matrices (keys 0-7 | 8-15) x (d 0-7 | 8-15) -> b0,b1 of tile 2dp, then 2dp+1.
      unsigned r[4];
      attn_ldsm_x4_t(r, attn_smem_addr(sVj + attn_soff(kp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 16 + ((lane >> 4) << 3))));
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        attn_mma(o[mi][2 * dp], a[mi], r[0], r[1]);
        attn_mma(o[mi][2 * dp + 1], a[mi], r[2], r[3]);
      }
    }
  }

  if constexpr (STAGES == 1) {
    __syncthreads();  // every warp is done reading V tile j
    if (j + 1 < ntiles) {
      attn_load_tile<BN>(sV, V, n0 + BN, seq_k, tid, v_ss);
      attn_commit();
    }
  }
}
attn_wait<0>();

// Epilogue: O / l, staged through this warp's own rows of the Q tile (only this warp reads
// them), then written with 16-byte coalesced stores.
__syncwarp();
#pragma unroll
for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[mi][h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int r = wrow + mi * 16 + g + h * 8;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      *reinterpret_cast<unsigned*>(sQ + attn_soff(r, dt * 8 + 2 * t)) =
          attn_pack(o[mi][dt][2 * h] * inv, o[mi][dt][2 * h + 1] * inv);
    }
  }
}
__syncwarp();
#pragma unroll
for (int i = 0; i < WROWS * CPR / 32; ++i) {
  const int idx = lane + i * 32;
  const int r = wrow + idx / CPR;
  const int c = (idx % CPR) * 8;
  if (m0 + r < seq_q) {
    *reinterpret_cast<uint4*>(O + (m0 + r) * o_ss + c) = *reinterpret_cast<const uint4*>(sQ + attn_soff(r, c));
  }
}
"#;
