//! CUDA C++ emission of the warp-specialized wgmma + TMA GEMM kernel from a typed config.
//!
//! Block = 1 producer warpgroup (one thread issues TMA; `setmaxnreg.dec`) + `consumers`
//! consumer warpgroups (`setmaxnreg.inc`, wgmma from shared memory, fused epilogue stored
//! straight from the accumulator registers with bounds checks). The ring of `stages` buffers
//! is guarded by a `full` mbarrier (TMA transaction bytes) and an `empty` mbarrier (one arrival
//! per consumer warpgroup of the unit per CTA of the cluster) per stage. Work units (tile x K
//! slice) are visited in rasterized order; a block (cluster) loops over units with stride
//! `gridDim.x / cluster size`, so the same code serves the one-unit-per-block and the persistent
//! launch. A cluster along M (`cluster_m`) shares the B tile, one along N (`cluster_n`) the A
//! tile: each CTA loads its share and multicasts it to the pair. The producer runs ahead across
//! units (it only waits for free stages), so the next unit's loads overlap the epilogue.
//! Ping-pong consumers take alternate units, so one's epilogue also overlaps the other's MMAs. Split-K units reduce through the workspace. With
//! `tma_store` the epilogue goes through swizzled shared-memory boxes and `cp.async.bulk.tensor`
//! stores (one more trailing `tmC` map parameter), which drain while the consumer goes on.
//!
//! tf32 kernels read both operands K-major (m64nNk8, no transpose immediates); when the problem
//! has an M/N-major tf32 operand the kernel also carries the staging pre-pass
//! ([`mod@super::staging`]): three extra trailing parameters `stage_a, stage_b, prepass`, and a
//! launch with `prepass != 0` only transposes the operands into the staging buffer.

use super::config::{WgmmaConfig, EPI_WARP_ROWS, PRODUCER_REGS, WARPGROUP};
use super::layout::{
    a_boxes, a_consumer_offset, a_desc_offset, a_register_boxes, a_register_offset, b_boxes,
    b_consumer_offset, b_desc_offset, k16_slices, TmaBox,
};
use super::ptx::{
    descriptor_bits, emit_wgmma_fn, emit_wgmma_rs_fn, wgmma_fn_name, wgmma_k, wgmma_rs_fn_name,
    CLUSTER_K_HELPERS, DEVICE_HELPERS, LDS_U32_HELPER,
};
use super::staging::{a_from_registers, emit_prepass_fns, staging_for};
use super::tma::{a_is_k_major, b_is_k_major, epi_box_cols};
use crate::templates::codegen::CudaWriter;
use crate::templates::gemm::{Activation, GemmProblem};
use crate::DType;

/// The float expression of an activation applied to `v`.
fn activation_body(act: Activation) -> &'static str {
    match act {
        Activation::None => "return v;",
        Activation::Relu => "return fmaxf(v, 0.0f);",
        Activation::GeluTanh => {
            "return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));"
        }
        Activation::GeluErf => "return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));",
        Activation::Silu => "return v / (1.0f + __expf(-v));",
    }
}

/// Conversions between the output type and float: (to float, pair to float2, from float, float2 to pair, pair type).
fn out_conversions(
    out: DType,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
) {
    match out {
        DType::Bf16 => (
            "__bfloat162float(x)",
            "__bfloat1622float2(x)",
            "__float2bfloat16_rn(v)",
            "__floats2bfloat162_rn(v.x, v.y)",
            "__nv_bfloat162",
        ),
        DType::F16 => (
            "__half2float(x)",
            "__half22float2(x)",
            "__float2half_rn(v)",
            "__floats2half2_rn(v.x, v.y)",
            "__half2",
        ),
        DType::F32 | DType::Tf32 => ("x", "x", "v", "v", "float2"),
    }
}

/// Device helpers of the TMA-store epilogue: the epilogue math of one column pair as a float2,
/// the swizzled shared-memory store of a pair, and the bulk-copy store / group primitives.
fn emit_tma_store_fns(w: &mut CudaWriter, p: &GemmProblem) {
    w.lines(
        r#"// The epilogue of columns (col, col + 1) of one row as floats; nothing is read for elements past
// M or N (the TMA store clips them, their value is never written).
__device__ __forceinline__ float2 epi_pair(const TOut* Cb, const TOut* bias, const TOut* Rb, long long off, int col,
                                           int N, bool row_in, bool vec, float a0, float a1, float alpha, float beta) {
  float2 v = make_float2(0.0f, 0.0f);
  if (!row_in) return v;
  if (vec && col + 1 < N) {
    v = epi_vec2(Cb, bias, Rb, off, col, a0, a1, alpha, beta);
  } else {
    if (col < N) v.x = epi1(a0, Cb, bias, Rb, off, col, alpha, beta);
    if (col + 1 < N) v.y = epi1(a1, Cb, bias, Rb, off + 1, col + 1, alpha, beta);
  }
  return v;
}
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// TMA: store one box from this CTA's shared memory into the rank-3 map (clipped at its bounds).
__device__ __forceinline__ void tma_store_3d(const TmaMap* map, unsigned src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
               :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// At most N bulk groups of this thread still reading shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
// At most N bulk groups of this thread not yet complete.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
}"#,
    );
    if p.epilogue.out_dtype.size_bytes() == 4 {
        w.lines(
            r#"__device__ __forceinline__ void st_box(unsigned addr, float2 v) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(addr), "f"(v.x), "f"(v.y) : "memory");
}"#,
        );
    } else {
        w.lines(
            r#"__device__ __forceinline__ unsigned pack_out2(float2 v) {
  const TOut2 o = f2_to_out2(v);
  return *reinterpret_cast<const unsigned*>(&o);
}
// Four 8x8 16-bit matrices, one row address per lane (lanes 8i..8i+7: rows of matrix i); register
// i holds this lane's pair of matrix i in the mma fragment layout (row lane / 4, columns 2 * (lane % 4)).
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}"#,
        );
    }
}

/// The swizzle of a TMA-store staging box with rows of `span` bytes (Swizzle<B,4,3> on the
/// byte offset from the 1024-aligned box: 16-byte chunk bits `[4, 4 + B)` XOR bits `[7, 7 + B)`,
/// B = 3 for the 128-byte swizzle, 2 for the 64-byte one), as the C expression of the value
/// XORed into the chunk index of row `r`: `r % 8` for 128-byte rows, `(r / 2) % 4` for 64-byte rows.
fn epi_row_xor(span: u32, r: &str) -> String {
    match span {
        128 => format!("(unsigned)({r} & 7)"),
        64 => format!("(unsigned)(({r} >> 1) & 3)"),
        _ => unreachable!("TMA-store spans are 64 or 128 bytes"),
    }
}

/// TMA-store epilogue of one unit: per 64-row block and swizzle span of columns (one box: 128
/// bytes, or 64 where a consumer's columns are not a multiple of 64), each warp waits until its
/// 16 rows of the box it is about to fill have been read out by its store of two boxes ago,
/// writes its fragments there (`stmatrix` for 16-bit outputs; swizzled so the 8 rows of a
/// matrix hit distinct banks, see [`epi_row_xor`]), fences the writes toward the async proxy,
/// and its lane 0 stores those 16 rows. Warps synchronize only within themselves
/// (`__syncwarp`), never across the warpgroup, and each lane 0 tracks its own bulk groups.
fn emit_tma_store_epilogue(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    let osz = p.epilogue.out_dtype.size_bytes() as u32;
    let span = c.epi_span_bytes();
    let cols = epi_box_cols(p, c);
    w.comment(format!(
        "TMA-store epilogue: boxes of 64 rows x {span} bytes through two swizzled staging buffers."
    ));
    emit_part_origin(w, c, "trow", "tcol");
    emit_epi_lane_consts(w, p, c);
    emit_store_boxes(w, p, c, "trow", "tcol", |w, mi, cb| {
        if osz == 2 {
            emit_stmatrix_box(w, p, c, mi, cb, cols);
        } else {
            emit_st_box_pairs(w, p, c, mi, cb, cols, osz);
        }
    });
}

/// The boxes of one unit's TMA-store epilogue, per 64-row block `mi` and box `cb` of columns:
/// each warp waits until its 16 rows of the staging buffer it is about to fill have been read out
/// by its store of two boxes ago, `fill(w, mi, cb)` writes its fragments there, the writes are
/// fenced toward the async proxy, and lane 0 stores the warp's 16 rows at (`row`, `col`) + the
/// box's offset.
fn emit_store_boxes(
    w: &mut CudaWriter,
    p: &GemmProblem,
    c: &WgmmaConfig,
    row: &str,
    col: &str,
    mut fill: impl FnMut(&mut CudaWriter, u32, u32),
) {
    let span = c.epi_span_bytes();
    let cols = epi_box_cols(p, c);
    for mi in 0..c.m_iters() {
        for cb in 0..c.cols_per_consumer() / cols {
            w.open(format!("/* rows {}.., columns {}.. */", mi * 64, cb * cols));
            w.line("const unsigned box = ebox + (ebuf & 1u) * EPI_BOX_BYTES;");
            w.line("if (lane == 0) bulk_wait_read<1>();");
            w.line("__syncwarp();");
            fill(w, mi, cb);
            w.line("fence_proxy_async_smem();");
            w.line("__syncwarp();");
            w.line(format!(
                "if (lane == 0) {{ tma_store_3d(&tmC, box + (unsigned)warp * {}u, {col} + {}, {row} + {} + warp * {EPI_WARP_ROWS}, bC); bulk_commit(); }}",
                EPI_WARP_ROWS * span,
                cb * cols,
                mi * 64
            ));
            w.line("++ebuf;");
            w.close("");
        }
    }
}

/// The `stmatrix.x4` steps of box `cb` (boxes of `cols` columns): `(ni, j, c8)` for every pair of
/// 8-column steps `j`, `j + 1` of wgmma `ni` whose columns `c8..` fall in the box.
fn stmatrix_steps(
    c: &WgmmaConfig,
    cols: u32,
    cb: u32,
) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
    (0..c.n_iters())
        .flat_map(move |ni| {
            (0..c.wgmma_n / 8)
                .step_by(2)
                .map(move |j| (ni, j, ni * c.wgmma_n + j * 8))
        })
        .filter(move |&(_, _, c8)| c8 / cols == cb)
}

/// `const float2 {v}` = the epilogue of the accumulator pair `(a0, a1)` at (`row`, `col`) for the
/// TMA-store epilogue. When the epilogue reads nothing (no beta * C, bias or residual) the value
/// is `act(alpha * acc)` with no bounds checks: elements past M or N are computed but the copy
/// engine clips them from the store, so the per-pair row / column tests are dropped.
fn emit_epi_value(
    w: &mut CudaWriter,
    p: &GemmProblem,
    v: &str,
    row: &str,
    col: &str,
    a0: &str,
    a1: &str,
) {
    let e = &p.epilogue;
    if e.beta == 0.0 && !e.bias && !e.residual {
        w.line(format!(
            "const float2 {v} = make_float2(activation(alpha * {a0}), activation(alpha * {a1}));"
        ));
        return;
    }
    w.line(format!("const int row_{v} = {row};"));
    w.line(format!("const int col_{v} = {col};"));
    w.line(format!(
        "const float2 {v} = epi_pair(Cb, bias, Rb, (long long)row_{v} * ldc + col_{v}, col_{v}, N, row_{v} < M, vec, {a0}, {a1}, alpha, beta);"
    ));
}

/// The accumulator pair of 8-column step `j`, row half `h` of wgmma (`mi`, `ni`): registers
/// `4 j + 2 h` and `4 j + 2 h + 1` of its fragment.
fn acc_pair(mi: u32, ni: u32, j: u32, h: u32) -> (String, String) {
    (
        format!("{}[{}]", acc_name(mi, ni), 4 * j + 2 * h),
        format!("{}[{}]", acc_name(mi, ni), 4 * j + 2 * h + 1),
    )
}

/// `const float2 {v}` = the epilogue of the lane's accumulator pair (`mi`, `ni`, step `j`, row
/// half `h`) at its place in the unit at (`trow`, `tcol`) (see [`emit_epi_value`]).
#[allow(clippy::too_many_arguments)]
fn emit_pair_value(
    w: &mut CudaWriter,
    p: &GemmProblem,
    c: &WgmmaConfig,
    v: &str,
    mi: u32,
    ni: u32,
    j: u32,
    h: u32,
) {
    let (a0, a1) = acc_pair(mi, ni, j, h);
    let (row, col) = (
        format!("trow + {} + r_lo + {}", mi * 64, h * 8),
        format!("tcol + {} + cpair", ni * c.wgmma_n + j * 8),
    );
    emit_epi_value(w, p, v, &row, &col, &a0, &a1);
}

/// The 32-bit-output body of one epilogue box: each lane's accumulator pairs, one
/// `st.shared.v2.f32` each, at the swizzled chunk (see [`epi_row_xor`]).
fn emit_st_box_pairs(
    w: &mut CudaWriter,
    p: &GemmProblem,
    c: &WgmmaConfig,
    mi: u32,
    cb: u32,
    cols: u32,
    osz: u32,
) {
    let span = c.epi_span_bytes();
    for ni in 0..c.n_iters() {
        for j in 0..c.wgmma_n / 8 {
            let c8 = ni * c.wgmma_n + j * 8;
            if c8 / cols != cb {
                continue;
            }
            for h in 0..2u32 {
                w.open("");
                w.line(format!("const int r = r_lo + {};", h * 8));
                let (a0, a1) = acc_pair(mi, ni, j, h);
                emit_epi_value(
                    w,
                    p,
                    "v",
                    &format!("trow + {} + r", mi * 64),
                    &format!("tcol + {c8} + cpair"),
                    &a0,
                    &a1,
                );
                w.line(format!(
                    "const unsigned byte = (unsigned)({} + cpair) * {osz}u;",
                    c8 % cols
                ));
                w.line(format!("st_box(box + (unsigned)r * {span}u + ((((byte >> 4) ^ {})) << 4) + (byte & 15u), v);", epi_row_xor(span, "r")));
                w.close("");
            }
        }
    }
}

/// The 16-bit-output body of one epilogue box: per pair of 8-column steps, the epilogue of the
/// lane's four accumulator pairs (rows `r_lo`, `r_lo + 8`; steps `j`, `j + 1`) goes out in one
/// `stmatrix.x4` (four 8x8 matrices; matrix `i` = step `j + i / 2`, row half `i % 2`), whose
/// 16-byte rows land at the swizzled chunk (see [`epi_row_xor`]) as the copy engine expects.
fn emit_stmatrix_box(
    w: &mut CudaWriter,
    p: &GemmProblem,
    c: &WgmmaConfig,
    mi: u32,
    cb: u32,
    cols: u32,
) {
    for (ni, j, c8) in stmatrix_steps(c, cols, cb) {
        w.open("");
        let mut packed = Vec::new();
        for jj in [j, j + 1] {
            for h in 0..2u32 {
                let v = format!("v{}{h}", jj - j);
                emit_pair_value(w, p, c, &v, mi, ni, jj, h);
                packed.push(format!("pack_out2({v})"));
            }
        }
        w.line(format!(
            "stmatrix_x4(box + st_row + ((({}u + st_j) ^ st_x) << 4), {});",
            (c8 % cols) / 8,
            packed.join(", ")
        ));
        w.close("");
    }
}

/// Whether the consumer defers a unit's output stores into the next unit's first k-block: with a
/// TMA-store epilogue and a 16-bit output (row-split or column-split consumers, not ping-pong), the
/// epilogue math runs as soon as the unit's accumulators are final and leaves the outputs packed
/// (two per register, half the accumulators' registers); the next unit's first wgmmas then start
/// at once and the `stmatrix` writes and bulk stores of the packed outputs run while they execute,
/// so the tensor pipe no longer idles for the stores between tiles. The last unit stores after the
/// loop.
pub(crate) fn defers_epilogue(p: &GemmProblem, c: &WgmmaConfig) -> bool {
    c.tma_store
        && !c.pingpong
        && c.split_k == 1
        && c.cluster_k == 1
        && p.epilogue.out_dtype.size_bytes() == 2
}

fn packed_name(mi: u32, ni: u32) -> String {
    format!("pk_{mi}_{ni}")
}

/// Deferred epilogue, math half: the epilogue of every accumulator pair of the unit at
/// (`trow`, `tcol`), packed into `pk_*[2 j + h]` (8-column step `j`, row half `h`), the order in
/// which [`emit_packed_stores`] hands four of them to one `stmatrix.x4`.
fn emit_pack_outputs(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            for j in 0..c.wgmma_n / 8 {
                for h in 0..2u32 {
                    w.open("");
                    emit_pair_value(w, p, c, "v", mi, ni, j, h);
                    w.line(format!(
                        "{}[{}] = pack_out2(v);",
                        packed_name(mi, ni),
                        2 * j + h
                    ));
                    w.close("");
                }
            }
        }
    }
}

/// Deferred epilogue, store half: the packed outputs of the unit at (`erow`, `ecol`) go out box by
/// box as in [`emit_tma_store_epilogue`] (same staging buffers, waits and per-warp stores).
fn emit_packed_stores(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    let cols = epi_box_cols(p, c);
    emit_store_boxes(w, p, c, "erow", "ecol", |w, mi, cb| {
        for (ni, j, c8) in stmatrix_steps(c, cols, cb) {
            let pk = packed_name(mi, ni);
            w.line(format!(
                "stmatrix_x4(box + st_row + ((({}u + st_j) ^ st_x) << 4), {pk}[{}], {pk}[{}], {pk}[{}], {pk}[{}]);",
                (c8 % cols) / 8,
                2 * j,
                2 * j + 1,
                2 * j + 2,
                2 * j + 3
            ));
        }
    });
}

fn emit_epilogue_fns(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    let e = &p.epilogue;
    let (to_f, to_f2, from_f, from_f2, pair) = out_conversions(e.out_dtype);
    w.constant("bool", "EPI_READ_C", e.beta != 0.0);
    w.constant("bool", "EPI_BIAS", e.bias);
    w.constant("bool", "EPI_RESIDUAL", e.residual);
    w.line(format!("typedef {pair} TOut2;"));
    w.line(format!(
        "__device__ __forceinline__ float out_to_f(TOut x) {{ return {to_f}; }}"
    ));
    w.line(format!(
        "__device__ __forceinline__ float2 out2_to_f2(TOut2 x) {{ return {to_f2}; }}"
    ));
    w.line(format!(
        "__device__ __forceinline__ TOut f_to_out(float v) {{ return {from_f}; }}"
    ));
    w.line(format!(
        "__device__ __forceinline__ TOut2 f2_to_out2(float2 v) {{ return {from_f2}; }}"
    ));
    w.line(format!(
        "__device__ __forceinline__ float activation(float v) {{ {} }}",
        activation_body(e.activation)
    ));
    w.lines(
        r#"// out = act(alpha * acc + beta * C + bias[col]) + residual, for one element.
__device__ __forceinline__ float epi1(float acc, const TOut* Cb, const TOut* bias, const TOut* Rb,
                                             long long off, int col, float alpha, float beta) {
  float v = alpha * acc;
  if (EPI_READ_C) v += beta * out_to_f(Cb[off]);
  if (EPI_BIAS) v += out_to_f(bias[col]);
  v = activation(v);
  if (EPI_RESIDUAL) v += out_to_f(Rb[off]);
  return v;
}
// The epilogue of the aligned pair of columns (col, col + 1) of one row, both inside N.
__device__ __forceinline__ float2 epi_vec2(const TOut* Cb, const TOut* bias, const TOut* Rb, long long off, int col,
                                           float a0, float a1, float alpha, float beta) {
  float2 v;
    v = make_float2(alpha * a0, alpha * a1);
    if (EPI_READ_C) {
      const float2 c = out2_to_f2(*reinterpret_cast<const TOut2*>(Cb + off));
      v.x += beta * c.x;
      v.y += beta * c.y;
    }
    if (EPI_BIAS) {
      const float2 b = out2_to_f2(*reinterpret_cast<const TOut2*>(bias + col));
      v.x += b.x;
      v.y += b.y;
    }
    v.x = activation(v.x);
    v.y = activation(v.y);
    if (EPI_RESIDUAL) {
      const float2 r = out2_to_f2(*reinterpret_cast<const TOut2*>(Rb + off));
      v.x += r.x;
      v.y += r.y;
    }
  return v;
}
// Stores the accumulator pair of columns (col, col + 1) of one row; `off` is the element offset of col.
__device__ __forceinline__ void epi_store(TOut* Cb, const TOut* bias, const TOut* Rb, long long off, int col,
                                                 int N, bool vec, float a0, float a1, float alpha, float beta) {
  if (vec && col + 1 < N) {
    *reinterpret_cast<TOut2*>(Cb + off) = f2_to_out2(epi_vec2(Cb, bias, Rb, off, col, a0, a1, alpha, beta));
  } else {
    if (col < N) Cb[off] = f_to_out(epi1(a0, Cb, bias, Rb, off, col, alpha, beta));
    if (col + 1 < N) Cb[off + 1] = f_to_out(epi1(a1, Cb, bias, Rb, off + 1, col + 1, alpha, beta));
  }
}
// An optimization barrier: the value is recomputed where it is used instead of kept live.
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}
// blockIdx.z and gridDim.x / CLUSTER_M, re-read from the special registers at each use.
__device__ __forceinline__ int batch_now() {
  int z;
  asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
  return z;
}
__device__ __forceinline__ int clusters_now() {
  int n;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(n));
  return n / CLUSTER_M;
}
// Tile rows (in clusters), tile columns and k-blocks, recomputed from opaque copies of M, N, K.
__device__ __forceinline__ void sched_dims(int M, int N, int K, int& tiles_mc, int& tiles_n, int& kblocks) {
  tiles_n = (opaque(N) + BN - 1) / BN;
  tiles_mc = ((opaque(M) + BM - 1) / BM + CLUSTER_M - 1) / CLUSTER_M;
  kblocks = (opaque(K) + BK - 1) / BK;
}
// Rasterized tile order: walk RASTER_GROUP tile rows at a time, column by column. One runtime
// division, except in a last, partial group of rows: the first unit's coordinates lie on the
// producer's path to its first load, which is on the critical path of one-wave grids (calls
// BV/BW, session 19: a 150 ns later first load cost 1-2%, two fewer divisions gained 1-2.5%).
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  if (RASTER_GROUP == 1) {
    tm = t / tiles_n;
    tn = t - tm * tiles_n;
    return;
  }
  const int group = RASTER_GROUP * tiles_n;
  const int g = t / group;
  const int first = g * RASTER_GROUP;
  const int r = t - g * group;
  if (tiles_m - first >= RASTER_GROUP) {
    tm = first + r % RASTER_GROUP;
    tn = r / RASTER_GROUP;
    return;
  }
  const int rows = tiles_m - first;
  tm = first + r % rows;
  tn = r / rows;
}
// Work unit u -> (cluster) tile (tm, tn) and K slice `split` = k-blocks [kb0, kb1). The slices of
// one tile are consecutive units, so they run side by side and their partials stay in L2.
__device__ __forceinline__ void unit_coords(int u, int tiles_m, int tiles_n, int kblocks, int& tm, int& tn, int& split,
                                            int& kb0, int& kb1) {
  const int t = u / SPLIT_K;
  split = u - t * SPLIT_K;
  tile_coords(t, tiles_m, tiles_n, tm, tn);
  // 32-bit is enough: kblocks < 2^25 and split < 16.
  kb0 = (int)(((unsigned)split * (unsigned)kblocks) / SPLIT_K);
  kb1 = (int)(((unsigned)(split + 1) * (unsigned)kblocks) / SPLIT_K);
}"#,
    );
    if c.swap_ab {
        w.lines(T_STORE_FN);
    }
}

/// The transposed store of `swap_ab` kernels (only they carry it, so every other kernel's
/// source stays byte-identical).
pub(crate) const T_STORE_FN: &str = r#"// Transposed C (swap_ab): the accumulator pair (row, col), (row, col + 1) of the kernel's
// product C^T lands at C[col][row] and C[col + 1][row]; `off` is the offset of the first, the
// bias runs along the kernel's rows (the user's columns).
__device__ __forceinline__ void epi_store_t(TOut* Cb, const TOut* bias, const TOut* Rb, long long off, int row,
                                            int col, int N, int ldc, float a0, float a1, float alpha, float beta) {
  if (col < N) Cb[off] = f_to_out(epi1(a0, Cb, bias, Rb, off, row, alpha, beta));
  if (col + 1 < N) Cb[off + ldc] = f_to_out(epi1(a1, Cb, bias, Rb, off + ldc, row, alpha, beta));
}
// The same pair where the consumer's part lies inside C and paired access is allowed: the lanes
// of rows `row` and `row ^ 1` (lane ^ 4; `lo` holds the even row) trade one value, so each stores
// two consecutive elements of one row of C, C[col][row..row + 1] (lo) or C[col + 1][row - 1..row],
// in one paired store instead of two single ones. Every lane of the warp must call it.
__device__ __forceinline__ void epi_store_t2(TOut* Cb, const TOut* bias, const TOut* Rb, int row, int col, int ldc,
                                             bool lo, float a0, float a1, float alpha, float beta) {
  const float got = __shfl_xor_sync(0xffffffffu, lo ? a1 : a0, 4);
  const int r = lo ? row : row - 1;
  const long long off = (long long)(lo ? col : col + 1) * ldc + r;
  *reinterpret_cast<TOut2*>(Cb + off) =
      f2_to_out2(epi_vec2(Cb, bias, Rb, off, r, lo ? a0 : got, lo ? got : a1, alpha, beta));
}
"#;

fn emit_constants(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    w.line(format!("typedef {} TIn;", p.dtype.cuda_type()));
    w.line(format!(
        "typedef {} TOut;",
        p.epilogue.out_dtype.cuda_type()
    ));
    w.constant("int", "BM", c.bm);
    w.constant("int", "BN", c.bn);
    w.constant("int", "BK", c.bk);
    w.constant("int", "STAGES", c.stages);
    w.constant("int", "CONSUMERS", c.consumers);
    w.constant("int", "CONSUMERS_PER_UNIT", c.consumers_per_unit());
    w.constant("bool", "PINGPONG", c.pingpong);
    w.constant("int", "SPLIT_K", c.split_k);
    w.constant("int", "WARPS_PER_TILE", c.warps_per_tile());
    w.constant("int", "ACC_REGS", c.acc_regs());
    // Where consumer cwu's part of the tile starts: rows (row split) or columns (split_n).
    let (row_step, col_step) = if c.split_n {
        (0, c.cols_per_consumer())
    } else {
        (c.rows_per_consumer(), 0)
    };
    w.constant("int", "CONSUMER_ROW_STEP", row_step);
    w.constant("int", "CONSUMER_COL_STEP", col_step);
    w.constant("int", "CLUSTER_M", c.cluster_m);
    if c.cluster_n > 1 {
        w.constant("int", "CLUSTER_N", c.cluster_n);
    }
    w.constant("int", "RASTER_GROUP", c.raster_group);
    w.constant("int", "THREADS", c.threads());
    w.constant("unsigned", "A_STAGE_BYTES", c.a_stage_bytes());
    w.constant("unsigned", "B_STAGE_BYTES", c.b_stage_bytes());
    w.constant("unsigned", "STAGE_BYTES", c.stage_bytes());
    w.constant("unsigned", "BAR_OFFSET", c.barrier_offset());
    let (ak, bk) = (a_is_k_major(p, c), b_is_k_major(p, c));
    w.constant(
        "unsigned long long",
        "DESC_A",
        format!("0x{:016x}ull", descriptor_bits(ak)),
    );
    w.constant(
        "unsigned long long",
        "DESC_B",
        format!("0x{:016x}ull", descriptor_bits(bk)),
    );
    w.constant("unsigned", "A_CONSUMER_OFFSET", a_consumer_offset(c));
    w.constant("unsigned", "B_CONSUMER_OFFSET", b_consumer_offset(c));
    if c.tma_store {
        w.constant("unsigned", "EPI_OFFSET", c.epi_offset());
        w.constant("unsigned", "EPI_BOX_BYTES", c.epi_box_bytes());
    }
    if c.cluster_k > 1 {
        w.constant("int", "CLUSTER_K", c.cluster_k);
        w.constant("unsigned", "RED_OFFSET", c.red_offset());
        w.constant("unsigned", "RED_BYTES", c.red_bytes());
    }
}

/// The (inner, outer) TMA coordinates of box `b` of an operand whose M/N tile origin is `mn0`.
fn box_coords(b: &TmaBox, k_major: bool, mn0: &str) -> String {
    if k_major {
        format!("k0 + {}, {mn0} + {}", b.inner, b.outer)
    } else {
        format!("{mn0} + {}, k0 + {}", b.inner, b.outer)
    }
}

/// Producer body: one thread streams A and B slabs into the ring.
fn emit_producer(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    let cl = c.cluster_m;
    let cn = c.cluster_n.max(1);
    w.line(format!(
        "asm volatile(\"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS};\");"
    ));
    w.open("if (wtid == 0)");
    w.line("const int bA = stride_a != 0 ? batch : 0;");
    w.line("const int bB = stride_b != 0 ? batch : 0;");
    w.line("int s = 0;");
    w.line("unsigned ph = 0;");
    if c.split_k > 1 {
        emit_lean_unit_loop(w, "");
    } else {
        w.open("for (int u = cluster_id; u < num_units; u += num_clusters)");
    }
    w.line("int tm, tn, split, kb0, kb1;");
    w.line("unit_coords(u, tiles_mc, tiles_n, kblocks, tm, tn, split, kb0, kb1);");
    emit_cluster_k_range(w, c);
    if cn > 1 {
        w.comment(
            "cluster_n: both CTAs of the pair share the tile row; rank picks the column tile.",
        );
        w.line("const int m0 = tm * BM;");
        w.line("const int n0 = (tn * CLUSTER_N + (int)rank) * BN;");
    } else {
        w.line("const int m0 = (tm * CLUSTER_M + (int)rank) * BM;");
        w.line("const int n0 = tn * BN;");
    }
    let (ak, bk) = (a_is_k_major(p, c), b_is_k_major(p, c));
    let a = if a_from_registers(p, c) {
        a_register_boxes(c)
    } else {
        a_boxes(c, ak)
    };
    let b: Vec<Vec<TmaBox>> = (0..cl).map(|r| b_boxes(c, bk, r)).collect();
    w.comment("Boxes whose M/N origin is past the edge are skipped (they would only feed masked outputs);");
    w.comment("a block of a cluster past M still multicasts its share of B. tx = bytes landing in this CTA.");
    for (j, x) in a.iter().enumerate() {
        w.line(format!("const bool la{j} = m0 + {} < M;", x.mn));
    }
    for (r, boxes) in b.iter().enumerate() {
        for (j, x) in boxes.iter().enumerate() {
            w.line(format!("const bool lb{r}_{j} = n0 + {} < N;", x.mn));
        }
    }
    let mut terms: Vec<String> = a
        .iter()
        .enumerate()
        .map(|(j, x)| format!("(la{j} ? {}u : 0u)", x.bytes))
        .collect();
    for (r, boxes) in b.iter().enumerate() {
        terms.extend(
            boxes
                .iter()
                .enumerate()
                .map(|(j, x)| format!("(lb{r}_{j} ? {}u : 0u)", x.bytes)),
        );
    }
    w.line(format!("const unsigned tx = {};", terms.join(" + ")));
    w.open("for (int kb = kb0; kb < kb1; ++kb)");
    w.comment("Plain (.acquire.cta) wait even in a cluster: the peer's arrivals carry no data to acquire.");
    w.line("mbar_wait(bar_empty + 8 * s, ph ^ 1);");
    w.line("const unsigned full = bar_full + 8 * s;");
    w.line("const unsigned sa = smem + s * A_STAGE_BYTES;");
    w.line("const unsigned sb = smem + STAGES * A_STAGE_BYTES + s * B_STAGE_BYTES;");
    w.line("const int k0 = kb * BK;");
    w.line("mbar_expect_tx(full, tx);");
    if cn > 1 {
        // Rank r loads A boxes [r * per, (r + 1) * per) and multicasts them to the pair.
        let per = a.len() / cn as usize;
        for r in 0..cn as usize {
            w.open(format!(
                "{}if (rank == {r})",
                if r > 0 { "else " } else { "" }
            ));
            for (j, x) in a.iter().enumerate().skip(r * per).take(per) {
                w.line(format!(
                    "if (la{j}) tma_load_3d_multicast(sa + {}u, &tmA, full, {}, bA, (unsigned short){});",
                    x.smem_offset,
                    box_coords(x, ak, "m0"),
                    (1u32 << cn) - 1
                ));
            }
            w.close("");
        }
    } else {
        for (j, x) in a.iter().enumerate() {
            w.line(format!(
                "if (la{j}) tma_load_3d(sa + {}u, &tmA, full, {}, bA);",
                x.smem_offset,
                box_coords(x, ak, "m0")
            ));
        }
    }
    let mask = (1u32 << cl) - 1;
    for (r, boxes) in b.iter().enumerate() {
        if cl > 1 {
            w.open(format!(
                "{}if (rank == {r})",
                if r > 0 { "else " } else { "" }
            ));
        }
        for (j, x) in boxes.iter().enumerate() {
            let coords = box_coords(x, bk, "n0");
            if cl > 1 {
                w.line(format!(
                    "if (lb{r}_{j}) tma_load_3d_multicast(sb + {}u, &tmB, full, {coords}, bB, (unsigned short){mask});",
                    x.smem_offset
                ));
            } else {
                w.line(format!(
                    "if (lb{r}_{j}) tma_load_3d(sb + {}u, &tmB, full, {coords}, bB);",
                    x.smem_offset
                ));
            }
        }
        if cl > 1 {
            w.close("");
        }
    }
    w.line("if (++s == STAGES) { s = 0; ph ^= 1; }");
    w.close(""); // kb
    w.close(""); // units
    w.close(""); // wtid == 0
}

/// Opens the work-unit loop of a split-K kernel: the schedule sizes are recomputed from the
/// parameters each unit (shadowing the block-level ones) instead of being held in registers
/// across it; the 40-register producer and the fix-up need them.
fn emit_lean_unit_loop(w: &mut CudaWriter, extra_step: &str) {
    w.open(format!(
        "for (int u = cluster_id;; u += clusters_now(){extra_step})"
    ));
    w.line("int tiles_mc, tiles_n, kblocks;");
    w.line("sched_dims(M, N, K, tiles_mc, tiles_n, kblocks);");
    w.line("if (u >= tiles_mc * tiles_n * SPLIT_K) break;");
}

fn acc_name(mi: u32, ni: u32) -> String {
    format!("acc_{mi}_{ni}")
}

/// One k-block of a consumer: wait until stage `s` is full, then its wgmmas over the four k16
/// slices (the first slice scales the old accumulators by `first_scale`: 0 starts a tile) and
/// the commit of the group.
fn emit_kblock_wgmmas(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig, first_scale: &str) {
    if a_from_registers(p, c) {
        return emit_kblock_wgmmas_rs(w, c, first_scale);
    }
    let (ak, bk) = (a_is_k_major(p, c), b_is_k_major(p, c));
    w.line("mbar_wait(bar_full + 8 * s, ph);");
    w.line("const unsigned sa = smem + s * A_STAGE_BYTES + cwu * A_CONSUMER_OFFSET;");
    w.line("const unsigned sb = smem + STAGES * A_STAGE_BYTES + s * B_STAGE_BYTES + cwu * B_CONSUMER_OFFSET;");
    w.line("wgmma_fence();");
    for kk in 0..k16_slices() {
        open_k_slice(w, wgmma_k(p.dtype), kk, first_scale);
        for mi in 0..c.m_iters() {
            w.line(format!(
                "const unsigned long long da{mi} = DESC_A | (((sa + {}u) & 0x3FFFFu) >> 4);",
                a_desc_offset(ak, mi, kk)
            ));
        }
        emit_slice_wgmmas(w, c, bk, kk, &wgmma_fn_name(c.wgmma_n, p.dtype), |mi| {
            format!("da{mi}")
        });
        w.close("");
    }
    w.line("wgmma_commit();");
}

/// The wgmmas of k slice `kk`: the B descriptors of the slice (B K-major or not: `bk`), then
/// `wgmma(acc, a(mi), db, sc)` with the wrapper `wgmma` for every m64 block and instruction.
fn emit_slice_wgmmas(
    w: &mut CudaWriter,
    c: &WgmmaConfig,
    bk: bool,
    kk: u32,
    wgmma: &str,
    a: impl Fn(u32) -> String,
) {
    for ni in 0..c.n_iters() {
        w.line(format!(
            "const unsigned long long db{ni} = DESC_B | (((sb + {}u) & 0x3FFFFu) >> 4);",
            b_desc_offset(c, bk, ni, kk)
        ));
    }
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            w.line(format!(
                "{wgmma}({}, {}, db{ni}, sc);",
                acc_name(mi, ni),
                a(mi)
            ));
        }
    }
}

/// Opens the block of k slice `kk` (of `k` elements) and its scale-d `sc`: the first slice of a
/// tile overwrites the accumulators (`first_scale` 0), every later one accumulates.
fn open_k_slice(w: &mut CudaWriter, k: u32, kk: u32, first_scale: &str) {
    w.open(format!("/* k{k} slice {kk} */"));
    w.line(if kk == 0 {
        format!("const int sc = {first_scale};")
    } else {
        "const int sc = 1;".to_string()
    });
}

/// The register-A form of [`emit_kblock_wgmmas`] (tf32, M-major A): once stage `s` is full and
/// the previous k-block's wgmmas are done (they read the same fragment registers), every lane
/// loads its A fragments of the stage (four per m64 block and k8 slice, at the offsets of
/// [`emit_register_a_lane_consts`]), then the wgmmas take A from them and B from the stage.
///
/// The `wgmma_wait<0>` is required: a wgmma reads its A registers until a wait retires it, and
/// ptxas does not guard them. Without the wait, the SASS of a 128 x 128 kernel (CUDA 13.0
/// NVRTC, cuobjdump) loads the next k-block's fragments (`LDS R88..R103`) after only a
/// `WARPGROUP.DEPBAR.LE gsb0, 0x1`, over the registers the previous k-block's `HGMMA`s read.
/// Two fragment sets kept live across the loop by an empty asm made ptxas serialize every
/// `HGMMA` instead (a wait after each one), so the one set and the wait stay.
fn emit_kblock_wgmmas_rs(w: &mut CudaWriter, c: &WgmmaConfig, first_scale: &str) {
    let bk = true;
    w.line("mbar_wait(bar_full + 8 * s, ph);");
    w.line("wgmma_wait<0>();");
    w.line("const unsigned sa = smem + s * A_STAGE_BYTES + cwu * A_CONSUMER_OFFSET;");
    w.line("const unsigned sb = smem + STAGES * A_STAGE_BYTES + s * B_STAGE_BYTES + cwu * B_CONSUMER_OFFSET;");
    for mi in 0..c.m_iters() {
        for kk in 0..k16_slices() {
            let off = a_register_offset(64 * mi, 8 * kk);
            for j in 0..4 {
                w.line(format!(
                    "const unsigned fa{mi}_{kk}_{j} = lds_u32(sa + ra{j} + {off}u);"
                ));
            }
        }
    }
    w.line("wgmma_fence();");
    for kk in 0..k16_slices() {
        open_k_slice(w, 8, kk, first_scale);
        emit_slice_wgmmas(w, c, bk, kk, &wgmma_rs_fn_name(c.wgmma_n), |mi| {
            format!("fa{mi}_{kk}_0, fa{mi}_{kk}_1, fa{mi}_{kk}_2, fa{mi}_{kk}_3")
        });
        w.close("");
    }
    w.line("wgmma_commit();");
}

/// The lane constants of a register-A consumer: `ra0..ra3`, the byte offsets (from the consumer's
/// A stage base) of this lane's fragments a0..a3 in the first m64 block and k8 slice
/// ([`a_register_offset`] of rows `r` / `r + 8` and K `q` / `q + 4`, r = 16 warp + lane / 4,
/// q = lane % 4); block `mi` and slice `kk` add `a_register_offset(64 mi, 8 kk)`.
fn emit_register_a_lane_consts(w: &mut CudaWriter) {
    w.comment("Register A (tf32, M-major): 32-row boxes of 32 K rows x 128 bytes, 16-byte chunks swizzled by K % 8.");
    w.line("const unsigned rq = (unsigned)(lane & 3);");
    w.line("const unsigned rc = 4u * (unsigned)(warp & 1) + (unsigned)(lane >> 4);");
    w.line(format!(
        "const unsigned rbase = (unsigned)(warp >> 1) * {}u + (unsigned)((lane >> 2) & 3) * 4u;",
        a_register_offset(32, 0)
    ));
    w.line("const unsigned ra0 = rbase + rq * 128u + ((rc ^ rq) << 4);");
    w.line("const unsigned ra1 = rbase + rq * 128u + (((rc + 2u) ^ rq) << 4);");
    w.line("const unsigned ra2 = rbase + (rq + 4u) * 128u + ((rc ^ (rq + 4u)) << 4);");
    w.line("const unsigned ra3 = rbase + (rq + 4u) * 128u + (((rc + 2u) ^ (rq + 4u)) << 4);");
}

/// `const int {row}, {col}`: where this consumer's part of the current unit's tile starts in C.
fn emit_part_origin(w: &mut CudaWriter, c: &WgmmaConfig, row: &str, col: &str) {
    if c.cluster_n > 1 {
        w.line(format!(
            "const int {row} = tm * BM + cwu * CONSUMER_ROW_STEP;"
        ));
        w.line(format!(
            "const int {col} = (tn * CLUSTER_N + (int)rank) * BN + cwu * CONSUMER_COL_STEP;"
        ));
        return;
    }
    w.line(format!(
        "const int {row} = (tm * CLUSTER_M + (int)rank) * BM + cwu * CONSUMER_ROW_STEP;"
    ));
    w.line(format!(
        "const int {col} = tn * BN + cwu * CONSUMER_COL_STEP;"
    ));
}

/// The lane constants of a TMA-store epilogue: the lane's first fragment row and column pair,
/// and for a 16-bit output its `stmatrix` addressing.
fn emit_epi_lane_consts(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    w.line("const int r_lo = warp * 16 + (lane >> 2);");
    w.line("const int cpair = (lane & 3) * 2;");
    if p.epilogue.out_dtype.size_bytes() == 2 {
        emit_stmatrix_lane_consts(w, c.epi_span_bytes());
    }
}

/// The `stmatrix` lane constants of a 16-bit TMA-store epilogue with rows of `span` bytes.
fn emit_stmatrix_lane_consts(w: &mut CudaWriter, span: u32) {
    w.comment("stmatrix: lane l addresses row l % 8 of matrix l / 8 = (8-column step l / 16, row half (l / 8) % 2).");
    w.line("const int st_r = warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);");
    w.line(format!("const unsigned st_row = (unsigned)st_r * {span}u;"));
    w.line(format!(
        "const unsigned st_x = {};",
        epi_row_xor(span, "st_r")
    ));
    w.line("const unsigned st_j = (unsigned)(lane >> 4);");
}

/// Consumer body: wgmma over the ring, release stages, fused epilogue.
fn emit_consumer(w: &mut CudaWriter, p: &GemmProblem, c: &WgmmaConfig) {
    let regs = c.wgmma_n / 2;
    w.line(format!(
        "asm volatile(\"setmaxnreg.inc.sync.aligned.u32 {};\");",
        c.consumer_regs()
    ));
    w.line("const int cw = wg - 1;");
    w.comment("Consumer index within its work unit (ping-pong: each consumer owns whole units).");
    w.line("const int cwu = PINGPONG ? 0 : cw;");
    w.line("const int warp = wtid / 32;");
    w.line("const int lane = wtid % 32;");
    if a_from_registers(p, c) {
        emit_register_a_lane_consts(w);
    }
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            w.line(format!("float {}[{regs}];", acc_name(mi, ni)));
            w.line("#pragma unroll");
            w.line(format!(
                "for (int i = 0; i < {regs}; ++i) {}[i] = 0.0f;",
                acc_name(mi, ni)
            ));
        }
    }
    if c.split_k == 1 {
        w.line("TOut* Cb = C + (long long)batch * stride_c;");
        w.line("const TOut* Rb = EPI_RESIDUAL ? residual + (long long)batch * stride_c : nullptr;");
    }
    w.comment(
        "Paired (2-element) epilogue accesses need even ldc / batch stride and aligned pointers.",
    );
    w.line("unsigned long long ptr_bits = reinterpret_cast<unsigned long long>(C);");
    w.line("if (EPI_BIAS) ptr_bits |= reinterpret_cast<unsigned long long>(bias);");
    w.line("if (EPI_RESIDUAL) ptr_bits |= reinterpret_cast<unsigned long long>(residual);");
    w.line("const bool vec = ((ldc & 1) == 0) && ((stride_c & 1) == 0) && (ptr_bits % (2 * sizeof(TOut)) == 0);");
    if c.tma_store {
        w.line("const unsigned ebox = smem + EPI_OFFSET + (unsigned)cw * 2u * EPI_BOX_BYTES;");
        w.line("unsigned ebuf = 0;");
        w.line("const int bC = stride_c != 0 ? batch : 0;");
    }
    let defer = defers_epilogue(p, c);
    if defer {
        w.comment(format!(
            "TMA-store epilogue: boxes of 64 rows x {} bytes through two swizzled staging buffers,",
            c.epi_span_bytes()
        ));
        w.comment("deferred: a unit's packed outputs wait in pk_* (its tile origin in erow / ecol) until the");
        w.comment("next unit's first wgmmas are issued, or the loop ends.");
        emit_epi_lane_consts(w, p, c);
        for mi in 0..c.m_iters() {
            for ni in 0..c.n_iters() {
                w.line(format!("unsigned {}[{}];", packed_name(mi, ni), regs / 2));
            }
        }
        w.line("int erow = 0, ecol = 0;");
    }
    w.line("int s = 0;");
    w.line("unsigned ph = 0;");
    w.line("int it = 0;");
    if c.cluster_k > 1 {
        w.line("unsigned rph = 0;");
    }
    if c.split_k > 1 {
        emit_lean_unit_loop(w, ", ++it");
    } else {
        w.open("for (int u = cluster_id; u < num_units; u += num_clusters, ++it)");
    }
    w.line("int tm, tn, split, kb0, kb1;");
    w.line("unit_coords(u, tiles_mc, tiles_n, kblocks, tm, tn, split, kb0, kb1);");
    emit_cluster_k_range(w, c);
    if c.pingpong {
        w.comment("Ping-pong: odd units belong to the other consumer; step over their stages of the ring.");
        w.open("if ((it & 1) != cw)");
        w.line("s += kb1 - kb0;");
        w.line("ph ^= (unsigned)((s / STAGES) & 1);");
        w.line("s %= STAGES;");
        w.line("continue;");
        w.close("");
        w.comment("Order: start waiting on this unit's stages only after the other consumer has waited on all of");
        w.comment("the previous unit's, so no full barrier is more than one phase behind what we wait for (the");
        w.comment(
            "parity wait cannot tell phase k from k + 2). Named barriers 1 / 2, 256 threads each.",
        );
        w.line("if (it > 0) named_bar_sync(1 + cw, 256);");
    }
    w.line("int prev = 0;");
    if defer {
        w.open(
            "/* the unit's first k-block, then the previous unit's stores while its wgmmas run */",
        );
        emit_kblock_wgmmas(w, p, c, "0");
        w.open("if (it > 0)");
        emit_packed_stores(w, p, c);
        w.close("");
        w.line("prev = s;");
        w.line("if (++s == STAGES) { s = 0; ph ^= 1; }");
        w.close("");
        w.open("for (int kb = kb0 + 1; kb < kb1; ++kb)");
        emit_kblock_wgmmas(w, p, c, "1");
        w.comment(
            "The previous k-block's wgmmas are done: hand its stage back to the producer(s).",
        );
        w.line("wgmma_wait<1>();");
        emit_release(w, c, "prev");
    } else {
        w.open("for (int kb = kb0; kb < kb1; ++kb)");
        emit_kblock_wgmmas(w, p, c, "kb > kb0 ? 1 : 0");
        w.open("if (kb > kb0)");
        w.comment(
            "The previous k-block's wgmmas are done: hand its stage back to the producer(s).",
        );
        w.line("wgmma_wait<1>();");
        emit_release(w, c, "prev");
        w.close("");
    }
    w.line("prev = s;");
    w.line("if (++s == STAGES) { s = 0; ph ^= 1; }");
    w.close(""); // kb
    if c.pingpong {
        let units = if c.split_k > 1 {
            "tiles_mc * tiles_n * SPLIT_K"
        } else {
            "num_units"
        };
        let step = if c.split_k > 1 {
            "clusters_now()"
        } else {
            "num_clusters"
        };
        w.comment("Hand the ring to the other consumer (only if it has a next unit to wait in).");
        w.line(format!(
            "if (u + {step} < {units}) named_bar_arrive(2 - cw, 256);"
        ));
    }
    w.comment("Every unit has at least one k-block: check() keeps split_k <= k-blocks.");
    w.line("wgmma_wait<0>();");
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            w.line("#pragma unroll");
            w.line(format!(
                "for (int i = 0; i < {regs}; ++i) fence_operand({}[i]);",
                acc_name(mi, ni)
            ));
        }
    }
    emit_release(w, c, "prev");
    if c.split_k > 1 {
        emit_split_k_fixup(w, c);
    }
    if c.cluster_k > 1 {
        emit_cluster_k_exchange(w, c);
    }
    if c.split_k > 1 {
        w.line("TOut* Cb = C + (long long)batch_now() * stride_c;");
        w.line("const TOut* Rb = EPI_RESIDUAL ? residual + (long long)batch_now() * stride_c : nullptr;");
    }
    if c.tma_store {
        if defer {
            emit_part_origin(w, c, "trow", "tcol");
            emit_pack_outputs(w, p, c);
            w.line("erow = trow;");
            w.line("ecol = tcol;");
            w.close(""); // units
            w.comment("The last unit's outputs.");
            w.open("if (it > 0)");
            emit_packed_stores(w, p, c);
            w.close("");
        } else {
            emit_tma_store_epilogue(w, p, c);
            w.close(""); // units
        }
        w.comment("Each warp's last boxes must be read out of shared memory before the block exits (the global");
        w.comment("writes complete with the grid, as CUTLASS's store tail relies on).");
        w.line("if (lane == 0) bulk_wait_read<0>();");
        return;
    }
    w.comment("Epilogue straight from the fragments: a consumer whose whole part of the tile lies inside C");
    w.comment(
        "(and may store pairs) stores without per-pair bounds tests; edge parts test every pair.",
    );
    w.comment(
        "(Split-K kernels keep only the tested path: beside the fix-up a second copy spills.)",
    );
    emit_part_origin(w, c, "part_row", "part_col");
    w.line("const int row0 = part_row + warp * 16 + (lane >> 2);");
    w.line("const int col0 = part_col + (lane & 3) * 2;");
    let checked = |a: &str| {
        format!("if (row < M) epi_store(Cb, bias, Rb, (long long)row * ldc + col, col, N, vec, {a}, alpha, beta);")
    };
    let transposed_edge = |a: &str| {
        format!("if (row < M) epi_store_t(Cb, bias, Rb, (long long)col * ldc + row, row, col, N, ldc, {a}, alpha, beta);")
    };
    if c.swap_ab && c.split_k > 1 {
        w.comment("swap_ab: this kernel's M x N product is C^T; every element goes to its transposed place,");
        w.comment("one by one (split-K keeps only the tested path, as below).");
        emit_direct_store_loops(w, c, transposed_edge);
    } else if c.swap_ab {
        w.comment("swap_ab: this kernel's M x N product is C^T; every element goes to its transposed place,");
        w.comment("in pairs along C's rows where the part lies inside C (`epi_store_t2`), one by one elsewhere.");
        emit_inside_or_edge_stores(
            w,
            c,
            Some("const bool lo = ((lane >> 2) & 1) == 0;"),
            |a| format!("epi_store_t2(Cb, bias, Rb, row, col, ldc, lo, {a}, alpha, beta);"),
            transposed_edge,
        );
    } else if c.split_k > 1 {
        emit_direct_store_loops(w, c, checked);
    } else {
        emit_inside_or_edge_stores(
            w,
            c,
            None,
            |a| {
                format!("*reinterpret_cast<TOut2*>(Cb + (long long)row * ldc + col) = f2_to_out2(epi_vec2(Cb, bias, Rb, (long long)row * ldc + col, col, {a}, alpha, beta));")
            },
            checked,
        );
    }
    w.close(""); // units
}

/// A consumer's stores in two versions: `inside(pair)` (after the line `prelude`) where its whole
/// part of the tile lies inside C and paired access is allowed (`vec`), `edge(pair)` elsewhere.
fn emit_inside_or_edge_stores(
    w: &mut CudaWriter,
    c: &WgmmaConfig,
    prelude: Option<&str>,
    inside: impl Fn(&str) -> String,
    edge: impl Fn(&str) -> String,
) {
    w.open(format!(
        "if (vec && part_row + {} <= M && part_col + {} <= N)",
        c.rows_per_consumer(),
        c.cols_per_consumer()
    ));
    if let Some(line) = prelude {
        w.line(line);
    }
    emit_direct_store_loops(w, c, inside);
    w.close("");
    w.open("else");
    emit_direct_store_loops(w, c, edge);
    w.close("");
}

/// The unrolled loops over a consumer's accumulator pairs, `store(pair)` emitting the statement
/// for the pair `acc[4 j + 2 h], acc[4 j + 2 h + 1]` at (`row`, `col`).
fn emit_direct_store_loops(w: &mut CudaWriter, c: &WgmmaConfig, store: impl Fn(&str) -> String) {
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            w.line("#pragma unroll");
            w.open(format!("for (int j = 0; j < {}; ++j)", c.wgmma_n / 8));
            w.line(format!(
                "const int col = col0 + {} + j * 8;",
                ni * c.wgmma_n
            ));
            w.line("#pragma unroll");
            w.open("for (int h = 0; h < 2; ++h)");
            w.line(format!("const int row = row0 + {} + h * 8;", mi * 64));
            w.line(store(&format!(
                "{a}[4 * j + 2 * h], {a}[4 * j + 2 * h + 1]",
                a = acc_name(mi, ni)
            )));
            w.close("");
            w.close("");
        }
    }
}

/// Split-K: every slice stores its fp32 partial (per warp, float4 per lane, coalesced); the
/// warp that brings a tile's arrival count to `SPLIT_K` resets the counter, sums the slices in
/// slice order (all read back from the workspace, so the result does not depend on which slice
/// finishes last) and falls through to the epilogue; the others skip to their next unit.
fn emit_split_k_fixup(w: &mut CudaWriter, c: &WgmmaConfig) {
    let regs = c.wgmma_n / 2;
    let quads = c.acc_regs() / 4;
    w.comment("Split-K fix-up: partials -> workspace, the last slice of the tile reduces and runs the epilogue.");
    w.open("");
    w.comment("32-bit indices: check() keeps the workspace below 2^31 float4s.");
    w.line("const unsigned tile_slot = ((unsigned)batch_now() * tiles_mc * CLUSTER_M + tm * CLUSTER_M + rank) * tiles_n + tn;");
    w.line("const unsigned wslot = cwu * 4 + warp;");
    w.line(format!(
        "constexpr unsigned slice_f4 = WARPS_PER_TILE * {}u;",
        quads * 32
    ));
    w.line(format!(
        "float4* wt = reinterpret_cast<float4*>(ws) + ((tile_slot * SPLIT_K * WARPS_PER_TILE + wslot) * {}u + lane);",
        quads * 32
    ));
    w.line("float4* wst = wt + split * slice_f4;");
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            let q0 = (mi * c.n_iters() + ni) * regs / 4;
            w.line("#pragma unroll");
            w.line(format!(
                "for (int q = 0; q < {}; ++q) __stcg(wst + ({q0} + q) * 32, make_float4({a}[4 * q], {a}[4 * q + 1], {a}[4 * q + 2], {a}[4 * q + 3]));",
                regs / 4,
                a = acc_name(mi, ni)
            ));
        }
    }
    w.line("__threadfence();");
    w.line("__syncwarp();");
    w.line("unsigned* cnt = counters + (tile_slot * WARPS_PER_TILE + wslot);");
    w.line("unsigned arrived = 0;");
    w.open("if (lane == 0)");
    w.line("arrived = atomicAdd(cnt, 1u);");
    w.line("if (arrived == SPLIT_K - 1) atomicExch(cnt, 0u);  // leave the counter zero for the next launch");
    w.line("__threadfence();");
    w.close("");
    w.line("arrived = __shfl_sync(0xffffffffu, arrived, 0);");
    w.line("if (arrived != SPLIT_K - 1) continue;");
    w.line("__threadfence();");
    w.comment("acc = slice 0, then += slices 1.. in order (the accumulators are dead after the store, so they are the sums).");
    emit_read_slice(w, c, "wt", "=");
    w.open("for (int k = 1; k < SPLIT_K; ++k)");
    w.line("const float4* wk = wt + k * slice_f4;");
    emit_read_slice(w, c, "wk", "+=");
    w.close("");
    w.close("");
}

/// Every accumulator `op` (`=` or `+=`) its values in the split-K slice at `slice` (this lane's
/// float4s, the layout [`emit_split_k_fixup`] stores).
fn emit_read_slice(w: &mut CudaWriter, c: &WgmmaConfig, slice: &str, op: &str) {
    let regs = c.wgmma_n / 2;
    for mi in 0..c.m_iters() {
        for ni in 0..c.n_iters() {
            let q0 = (mi * c.n_iters() + ni) * regs / 4;
            let a = acc_name(mi, ni);
            w.line("#pragma unroll");
            w.open(format!("for (int q = 0; q < {}; ++q)", regs / 4));
            w.line(format!(
                "const float4 v = __ldcg({slice} + ({q0} + q) * 32);"
            ));
            emit_unpack_f4(w, &a, op, |i| {
                if i == 0 {
                    "4 * q".to_string()
                } else {
                    format!("4 * q + {i}")
                }
            });
            w.close("");
        }
    }
}

/// `acc[idx(i)] op v.{x,y,z,w}` for the four lanes `i` of the float4 `v` just loaded.
fn emit_unpack_f4(w: &mut CudaWriter, acc: &str, op: &str, idx: impl Fn(usize) -> String) {
    for (i, lane) in ["x", "y", "z", "w"].iter().enumerate() {
        w.line(format!("{acc}[{}] {op} v.{lane};", idx(i)));
    }
}

/// Cluster split-K: CTA `krank` of the pair keeps its half of the unit's k-blocks (check() keeps
/// at least `cluster_k` of them, so neither half is empty). Nothing without cluster split-K.
fn emit_cluster_k_range(w: &mut CudaWriter, c: &WgmmaConfig) {
    if c.cluster_k > 1 {
        w.line(
            "{ const int mid = kb0 + (kb1 - kb0) / 2; if (krank == 0) kb1 = mid; else kb0 = mid; }",
        );
    }
}

/// Cluster split-K exchange, after a unit's mainloop (accumulators final, stages released):
/// consumer `cw` of CTA `cw` owns its part of the tile. The other CTA's consumer `cw` (same
/// fragment layout) waits until the owner has read out its previous partial, pushes its
/// accumulators into the owner's reduction buffer with `st.async` (16 bytes per store, thread
/// `t`'s q-th float4 at `(q * 128 + t) * 16`, completing RED_BYTES on the owner's `bar_red`) and
/// goes on to its next unit. The owner arms `bar_red` for RED_BYTES, waits, adds the partial to
/// its accumulators (the sum is the same whichever CTA finishes first), hands the buffer back
/// (one remote arrival per warp on the sender's `bar_red + 8`) and falls through to the epilogue.
/// Both waits acquire and the hand-back releases at cluster scope (once per unit, unlike the
/// ring's per-k-block barriers): the buffer's data and its reuse cross CTAs.
fn emit_cluster_k_exchange(w: &mut CudaWriter, c: &WgmmaConfig) {
    let regs = c.wgmma_n / 2;
    let step = 16 * WARPGROUP;
    let quads: Vec<(String, u32)> = (0..c.m_iters())
        .flat_map(|mi| {
            (0..c.n_iters()).flat_map(move |ni| (0..regs / 4).map(move |q| (acc_name(mi, ni), q)))
        })
        .collect();
    w.comment("Cluster split-K: consumer cw of CTA cw owns its part of the tile; the other CTA's consumer cw sends its partial.");
    w.open("if ((unsigned)cw != krank)");
    w.line("mbar_wait_cluster(bar_red + 8, rph ^ 1);");
    w.line("const unsigned peer = krank ^ 1u;");
    w.line("const unsigned rdst = mapa_peer(smem + RED_OFFSET + (unsigned)wtid * 16u, peer);");
    w.line("const unsigned rbar = mapa_peer(bar_red, peer);");
    for (i, (a, q)) in quads.iter().enumerate() {
        w.line(format!(
            "st_async_f4(rdst + {}u, rbar, {a}[{}], {a}[{}], {a}[{}], {a}[{}]);",
            i as u32 * step,
            4 * q,
            4 * q + 1,
            4 * q + 2,
            4 * q + 3
        ));
    }
    w.line("rph ^= 1;");
    w.line("continue;");
    w.close("");
    w.line("if (wtid == 0) mbar_expect_tx(bar_red, RED_BYTES);");
    w.line("mbar_wait_cluster(bar_red, rph);");
    w.open("");
    w.line("const unsigned rsrc = smem + RED_OFFSET + (unsigned)wtid * 16u;");
    for (i, (a, q)) in quads.iter().enumerate() {
        w.open("");
        w.line(format!(
            "const float4 v = ld_shared_f4(rsrc + {}u);",
            i as u32 * step
        ));
        emit_unpack_f4(w, a, "+=", |j| (4 * q + j as u32).to_string());
        w.close("");
    }
    w.close("");
    w.line("__syncwarp();");
    w.line("if (lane == 0) mbar_arrive_release_cluster(bar_red + 8, krank ^ 1u);");
    w.line("rph ^= 1;");
}

/// The kernel constant naming the multicast cluster's size: `CLUSTER_N` for a pair along N,
/// else `CLUSTER_M` (1 without multicast).
fn multicast_size_name(c: &WgmmaConfig) -> &'static str {
    if c.cluster_n > 1 {
        "CLUSTER_N"
    } else {
        "CLUSTER_M"
    }
}

/// One arrival per consumer warpgroup on the `empty` barrier of stage `stage` in every CTA of the cluster.
fn emit_release(w: &mut CudaWriter, c: &WgmmaConfig, stage: &str) {
    if c.multicast_size() > 1 {
        w.line(format!(
            "if (wtid < {}) mbar_arrive_cluster(bar_empty + 8 * {stage}, (unsigned)wtid);",
            multicast_size_name(c)
        ));
    } else {
        w.line(format!(
            "if (wtid == 0) mbar_arrive(bar_empty + 8 * {stage});"
        ));
    }
}

/// The full translation unit for `p` and `c` with entry point `entry`. `c` must have passed
/// [`WgmmaGemm::check`](crate::templates::Template::check) for `p` (its loops unroll over the
/// config's extents), so only [`Template::emit`](crate::templates::Template::emit), which checks
/// first, calls it.
pub(crate) fn kernel_source(p: &GemmProblem, c: &WgmmaConfig, entry: &str) -> String {
    let mut w = CudaWriter::new();
    w.comment(format!(
        "rtx wgmma GEMM: {} {:?}{:?}, config {}",
        p.dtype,
        p.layout_a,
        p.layout_b,
        c.tag()
    ));
    w.include("cuda_fp16.h");
    w.include("cuda_bf16.h");
    w.line("");
    emit_constants(&mut w, p, c);
    w.lines(DEVICE_HELPERS);
    if c.cluster_k > 1 {
        w.lines(CLUSTER_K_HELPERS);
    }
    if a_from_registers(p, c) {
        w.lines(LDS_U32_HELPER);
        emit_wgmma_rs_fn(&mut w, c.wgmma_n);
    } else {
        emit_wgmma_fn(
            &mut w,
            c.wgmma_n,
            p.dtype,
            !a_is_k_major(p, c),
            !b_is_k_major(p, c),
        );
    }
    emit_epilogue_fns(&mut w, p, c);
    if c.tma_store {
        emit_tma_store_fns(&mut w, p);
    }
    let stage = staging_for(p, c);
    if stage.any() {
        emit_prepass_fns(&mut w, stage);
    }
    w.line("");
    let stage_params = if stage.any() {
        ",\n    TIn* stage_a, TIn* stage_b, int prepass"
    } else {
        ""
    };
    let tmc_param = if c.tma_store {
        ",\n    const __grid_constant__ TmaMap tmC"
    } else {
        ""
    };
    let cluster_attr = if c.cluster_size() > 1 {
        format!(" __cluster_dims__({}, 1, 1)", c.cluster_size())
    } else {
        String::new()
    };
    w.open(format!(
        "extern \"C\" __global__ void __launch_bounds__(THREADS, 1){cluster_attr} {entry}(\n    \
         const TIn* __restrict__ A, const TIn* __restrict__ B, TOut* C, const TOut* bias, const TOut* residual,\n    \
         int M, int N, int K, int lda, int ldb, int ldc,\n    \
         long long stride_a, long long stride_b, long long stride_c,\n    \
         float alpha, float beta,\n    \
         const __grid_constant__ TmaMap tmA, const __grid_constant__ TmaMap tmB,\n    \
         float* ws, unsigned* counters{stage_params}{tmc_param})"
    ));
    w.line("extern __shared__ __align__(1024) unsigned char smem_raw[];");
    if stage.any() {
        w.comment("Launch 1 of 2 (prepass != 0): transpose the M/N-major tf32 operands into the K-major staging buffer.");
        w.open("if (prepass)");
        w.line("stage_operands(A, B, stage_a, stage_b, M, N, K, lda, ldb, stride_a, stride_b, smem_raw);");
        w.line("return;");
        w.close("");
    }
    w.comment(
        "128B-swizzled tiles must start on 1024-byte boundaries (wgmma descriptor base offset 0).",
    );
    w.line("const unsigned smem = (smem_u32(smem_raw) + 1023u) & ~1023u;");
    w.line("const unsigned bar_full = smem + BAR_OFFSET;");
    w.line("const unsigned bar_empty = bar_full + 8 * STAGES;");
    if c.cluster_k > 1 {
        w.line("const unsigned bar_red = bar_empty + 8 * STAGES;");
    }
    w.line("const int wg = threadIdx.x / 128;");
    w.line("const int wtid = threadIdx.x % 128;");
    w.open("if (threadIdx.x == 0)");
    w.open("for (int s = 0; s < STAGES; ++s)");
    w.line("mbar_init(bar_full + 8 * s, 1);");
    w.line(format!(
        "mbar_init(bar_empty + 8 * s, CONSUMERS_PER_UNIT * {});",
        multicast_size_name(c)
    ));
    w.close("");
    if c.cluster_k > 1 {
        w.comment("Cluster split-K: the reduction buffer's full (one arrival + RED_BYTES from the peer) and empty");
        w.comment("(one arrival per warp of the peer's owner) barriers.");
        w.line("mbar_init(bar_red, 1);");
        w.line("mbar_init(bar_red + 8, 4);");
    }
    w.line("fence_mbarrier_init();");
    w.line("prefetch_tmap(&tmA);");
    w.line("prefetch_tmap(&tmB);");
    if c.tma_store {
        w.line("prefetch_tmap(&tmC);");
    }
    w.close("");
    if c.multicast_size() > 1 {
        w.line("cluster_sync();");
        w.line("const unsigned rank = cluster_ctarank();");
    } else if c.cluster_k > 1 {
        w.line("cluster_sync();");
        w.comment("Cluster split-K: both CTAs work on the same tiles (rank 0 along M), krank picks the k-blocks.");
        w.line("const unsigned krank = cluster_ctarank();");
        w.line("const unsigned rank = 0;");
    } else {
        w.line("__syncthreads();");
        w.line("const unsigned rank = 0;");
    }
    w.line("const int tiles_m = (M + BM - 1) / BM;");
    if c.cluster_n > 1 {
        w.comment("cluster_n: tile columns counted in pairs (the split-K helpers sched_dims / clusters_now,");
        w.comment(
            "which count clusters along M, are never called: cluster_n kernels have SPLIT_K 1).",
        );
        w.line("const int tiles_n = ((N + BN - 1) / BN + CLUSTER_N - 1) / CLUSTER_N;");
    } else {
        w.line("const int tiles_n = (N + BN - 1) / BN;");
    }
    w.line("const int tiles_mc = (tiles_m + CLUSTER_M - 1) / CLUSTER_M;");
    w.line("const int num_units = tiles_mc * tiles_n * SPLIT_K;");
    w.line("const int kblocks = (K + BK - 1) / BK;");
    w.line("const int batch = blockIdx.z;");
    let cluster = if c.cluster_k > 1 {
        "CLUSTER_K"
    } else {
        multicast_size_name(c)
    };
    w.line(format!("const int cluster_id = blockIdx.x / {cluster};"));
    w.line(format!("const int num_clusters = gridDim.x / {cluster};"));
    w.open("if (wg == 0)");
    emit_producer(&mut w, p, c);
    w.close("");
    w.open("else");
    emit_consumer(&mut w, p, c);
    w.close("");
    if c.cluster_size() > 1 {
        w.comment("No CTA may leave while its peer can still multicast into it or arrive on its barriers.");
        w.line("__syncwarp();");
        w.line("cluster_sync();");
    }
    w.close("");
    w.finish()
}
