//! GPU correctness of the wgmma GEMM template (skips without an sm_90 device or NVRTC).
//!
//! Every case compiles one kernel, fills A/B (and C/bias/residual when the epilogue reads them)
//! with fresh random values, poisons C otherwise (0xFF bytes = NaN), runs the kernel with a hang
//! watchdog and compares against the f64 reference: the full output for small problems, a
//! random sample of 2048 elements (plus a NaN scan of every element) for large ones. Padding
//! columns of C (ldc > n) must stay untouched.
//!
//! tf32 cases (names start with `tf32_`) cover NN/NT/TN/TT (M/N-major operands go through the
//! staging pre-pass, whose buffer is poisoned with NaN first), odd shapes, batching with a
//! broadcast operand, the fused epilogue, split-K, ping-pong and clusters; bound 5e-3.
//!
//! `RTX_WGMMA_CASE=<substring>[,<substring>...]` restricts the correctness run to case names
//! matching any of them.
//! `RTX_WGMMA_BENCH=1` additionally times a few configs against cuBLAS (printed, not asserted);
//! bf16 and tf32 shapes (`RTX_WGMMA_BENCH_SHAPE=tf32` for the tf32 ones only).

use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rtx_runtime::{Blas, BlasDtype, BlasGemm, Device, DeviceBuffer, Event, Function, Stream};
use rtx_synthesis::aot::{self, nvrtc_or_skip};
use rtx_synthesis::synth::inputs::decode_output;
use rtx_synthesis::templates::gemm::reference::{activate, gemm_f64, rel_error, GemmRefInputs};
use rtx_synthesis::templates::gemm::wgmma::{WgmmaBuffers, WgmmaConfig, WgmmaGemm};
use rtx_synthesis::templates::gemm::{Activation, GemmProblem, Layout};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};
use std::time::{Duration, Instant};
mod gpu_support;
use gpu_support::device_with_cc_or_skip;

/// Device 0 when it is an sm_90 part, else a printed skip.
fn device_or_skip(test: &str) -> Option<Device> {
    device_with_cc_or_skip(test, (9, 0), "the wgmma template needs sm_90a")
}

/// Host copy of an operand: raw bits for upload and the f64 values the GPU sees.
struct HostData {
    bits16: Vec<u16>,
    bits32: Vec<f32>,
    vals: Vec<f64>,
}

fn random_data(rng: &mut SmallRng, n: usize, dtype: DType, scale: f32) -> HostData {
    let mut h = HostData {
        bits16: Vec::new(),
        bits32: Vec::new(),
        vals: Vec::with_capacity(n),
    };
    for _ in 0..n {
        let x: f32 = rng.random_range(-1.0f32..1.0) * scale;
        match dtype {
            DType::Bf16 => {
                let v = bf16::from_f32(x);
                h.bits16.push(v.to_bits());
                h.vals.push(v.to_f64());
            }
            DType::F16 => {
                let v = f16::from_f32(x);
                h.bits16.push(v.to_bits());
                h.vals.push(v.to_f64());
            }
            DType::F32 | DType::Tf32 => {
                h.bits32.push(x);
                h.vals.push(x as f64);
            }
        }
    }
    h
}

fn upload(dev: &Device, s: &Stream, h: &HostData) -> DeviceBuffer {
    let bytes = if h.bits16.is_empty() {
        h.bits32.len() * 4
    } else {
        h.bits16.len() * 2
    };
    let mut b = dev.alloc(bytes.max(16), s).unwrap();
    if h.bits16.is_empty() {
        b.upload(&h.bits32, s).unwrap();
    } else {
        b.upload(&h.bits16, s).unwrap();
    }
    b
}

/// The first `n` elements of `buf` as f64.
fn download(buf: &DeviceBuffer, s: &Stream, dtype: DType, n: usize) -> Vec<f64> {
    decode_output(
        &buf.download::<u8>(s).unwrap()[..n * dtype.size_bytes()],
        dtype,
    )
}

/// Waits for `stream` with a deadline, so a deadlocked kernel fails the test instead of hanging it.
fn wait_or_hang(dev: &Device, stream: &Stream, what: &str, limit: Duration) -> Result<(), String> {
    let ev = Event::new(dev).map_err(|e| e.to_string())?;
    ev.record(stream).map_err(|e| e.to_string())?;
    let start = Instant::now();
    loop {
        match ev.query() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => return Err(format!("{what}: {e}")),
        }
        if start.elapsed() > limit {
            // The context cannot be recovered from a hung kernel; end the process loudly.
            eprintln!("FATAL {what}: kernel still running after {limit:?} (mbarrier deadlock?)");
            std::process::exit(3);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn compile_load(
    dev: &Device,
    t: &WgmmaGemm,
    p: &GemmProblem,
    c: &WgmmaConfig,
) -> (Function, String) {
    let (out, entry) = compile(t, p, c);
    (load(dev, &out, &entry), entry)
}

/// Emits and compiles one kernel (no device needed: the reference test runs these in parallel).
fn compile(t: &WgmmaGemm, p: &GemmProblem, c: &WgmmaConfig) -> (aot::Compiled, String) {
    let src = t.emit(p, c, Arch::Sm90a).unwrap_or_else(|e| panic!("{e}"));
    let out = aot::compile(&src, Arch::Sm90a).unwrap_or_else(|e| panic!("{e}"));
    (out, src.entry)
}

fn load(dev: &Device, out: &aot::Compiled, entry: &str) -> Function {
    let module = dev
        .load_module(&out.cubin)
        .unwrap_or_else(|e| panic!("{entry}: {e}"));
    module.function(entry).unwrap()
}

/// f64 reference of output element (batch, i, j) (same formula as `reference::gemm_f64`).
#[allow(clippy::too_many_arguments)]
fn ref_element(
    p: &GemmProblem,
    a: &[f64],
    b: &[f64],
    c: Option<&[f64]>,
    bias: Option<&[f64]>,
    res: Option<&[f64]>,
    bt: usize,
    i: usize,
    j: usize,
) -> f64 {
    let a0 = bt * p.stride_a as usize;
    let b0 = bt * p.stride_b as usize;
    let ci = bt * p.stride_c as usize + i * p.ldc as usize + j;
    let mut acc = 0.0;
    for l in 0..p.k as usize {
        let av = match p.layout_a {
            Layout::Row => a[a0 + i * p.lda as usize + l],
            Layout::Col => a[a0 + l * p.lda as usize + i],
        };
        let bv = match p.layout_b {
            Layout::Row => b[b0 + l * p.ldb as usize + j],
            Layout::Col => b[b0 + j * p.ldb as usize + l],
        };
        acc += av * bv;
    }
    let e = &p.epilogue;
    let mut v = e.alpha as f64 * acc;
    if e.beta != 0.0 {
        v += e.beta as f64 * c.map_or(0.0, |c| c[ci]);
    }
    if e.bias {
        v += bias.map_or(0.0, |b| b[j]);
    }
    v = activate(e.activation, v);
    if e.residual {
        v += res.map_or(0.0, |r| r[ci]);
    }
    v
}

struct Case {
    name: &'static str,
    p: GemmProblem,
    c: WgmmaConfig,
    /// Compare a random sample of this many outputs instead of all.
    sample: Option<usize>,
    /// Launch as if the device had this many SMs (persistent grids with several units per block).
    sms: Option<u32>,
}

#[allow(clippy::too_many_arguments)]
fn cfg(
    bm: u32,
    bn: u32,
    consumers: u32,
    wgmma_n: u32,
    stages: u32,
    cluster_m: u32,
    persistent: bool,
    raster_group: u32,
) -> WgmmaConfig {
    WgmmaConfig {
        cluster_m,
        persistent,
        raster_group,
        ..WgmmaConfig::basic(bm, bn, 64, consumers, wgmma_n, stages)
    }
}

/// `c` with the tf32 stage depth (32 four-byte elements = 128 bytes of K).
fn tf(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig { bk: 32, ..c }
}

/// The tf32 cases: every layout (M/N-major operands staged), odd shapes, batching, epilogue,
/// split-K, ping-pong, clusters, and the two bench shapes (sampled).
fn tf32_cases() -> Vec<Case> {
    use Layout::{Col, Row};
    let t = WgmmaGemm::default();
    // The first ladder rung (128 x 256, direct stores) with the tf32 depth; the model's
    // 192 x 160 pick for tf32 has its own default_ case below.
    let def = t.rung_config(
        &GemmProblem::nn(64, 64, 64, DType::Tf32),
        &rtx_synthesis::templates::gemm::wgmma::DEFAULT_LADDER[0],
    );
    assert_eq!(
        (def.bk, def.bm, def.bn, def.tma_store),
        (32, 128, 256, false)
    );
    let tf32 = |m, n, k, la, lb| problem(m, n, k, DType::Tf32, la, lb);
    let mut v = Vec::new();
    for (name, la, lb) in [
        ("tf32_nn_1000x1000x1000_default", Row, Row),
        ("tf32_nt_1000x1000x1000_default", Row, Col),
        ("tf32_tn_1000x1000x1000_default", Col, Col),
        ("tf32_tt_1000x1000x1000_default", Col, Row),
    ] {
        v.push(Case {
            name,
            p: tf32(1000, 1000, 1000, la, lb),
            c: def.clone(),
            sample: None,
            sms: None,
        });
    }
    // Both operands staged: any K and any pitch (odd K, odd padded leading dimensions).
    let mut tt = tf32(333, 517, 1003, Col, Row);
    tt.lda = 339;
    tt.ldb = 521;
    v.push(Case {
        name: "tf32_tt_333x517x1003_odd_pitches",
        p: tt,
        c: def.clone(),
        sample: None,
        sms: None,
    });
    // Only B staged (NN): N odd, A read in place (K a multiple of 4).
    v.push(Case {
        name: "tf32_nn_200x301x260_one_consumer",
        p: tf32(200, 301, 260, Row, Row),
        c: tf(cfg(128, 128, 1, 128, 6, 1, false, 1)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "tf32_nt_64x64x8_tiny_k",
        p: tf32(64, 64, 8, Row, Col),
        c: tf(cfg(64, 64, 1, 64, 2, 1, false, 1)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "tf32_nn_64x64x4_k_below_one_stage",
        p: tf32(64, 64, 4, Row, Row),
        c: def.clone(),
        sample: None,
        sms: None,
    });
    // Batched: TN with a broadcast (stride 0) staged A; NN with per-entry B.
    let mut bt = tf32(192, 320, 136, Col, Col).batched(3);
    bt.stride_a = 0;
    v.push(Case {
        name: "tf32_tn_192x320x136_batch3_broadcast_a",
        p: bt,
        c: tf(cfg(128, 128, 2, 128, 4, 2, true, 8)),
        sample: None,
        sms: Some(4),
    });
    v.push(Case {
        name: "tf32_nn_256x200x96_batch2_persistent",
        p: tf32(256, 200, 96, Row, Row).batched(2),
        c: def.clone(),
        sample: None,
        sms: Some(3),
    });
    // Full epilogue (alpha, beta C, bias, GELU, residual, padded ldc; tf32 GEMMs write f32).
    v.push(Case {
        name: "tf32_nn_300x260x200_full_epilogue",
        p: full_epilogue(tf32(300, 260, 200, Row, Row)),
        c: def.clone(),
        sample: None,
        sms: None,
    });
    let mut silu = full_epilogue(tf32(136, 264, 520, Row, Col));
    silu.epilogue.activation = Activation::Silu;
    v.push(Case {
        name: "tf32_nt_136x264x520_epilogue_silu",
        p: silu,
        c: tf(cfg(128, 256, 2, 128, 4, 1, true, 8)),
        sample: None,
        sms: None,
    });
    // Split-K, ping-pong, clusters.
    v.push(Case {
        name: "tf32_nn_64x1000x2048_split4",
        p: tf32(64, 1000, 2048, Row, Row),
        c: sk(tf(cfg(64, 128, 1, 128, 6, 1, true, 8)), 4),
        sample: None,
        sms: Some(8),
    });
    v.push(Case {
        name: "tf32_tt_300x300x600_split2_pingpong",
        p: full_epilogue(tf32(300, 300, 600, Col, Row)),
        c: sk(pp(tf(cfg(64, 128, 2, 128, 6, 1, true, 8))), 2),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "tf32_nn_500x700x400_pingpong_64x256",
        p: tf32(500, 700, 400, Row, Row),
        c: pp(tf(cfg(64, 256, 2, 256, 4, 1, true, 8))),
        sample: None,
        sms: Some(5),
    });
    v.push(Case {
        name: "tf32_nt_520x1000x512_cluster2",
        p: tf32(520, 1000, 512, Row, Col),
        c: tf(cfg(128, 256, 2, 256, 4, 2, true, 8)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "tf32_nn_1000x1000x1000_cluster2_n128",
        p: tf32(1000, 1000, 1000, Row, Row),
        c: tf(cfg(128, 256, 2, 128, 4, 2, false, 1)),
        sample: None,
        sms: None,
    });
    // The bench shapes, sampled (default config, as the bench's rtx-wgmma-default row runs it).
    for (name, lb) in [
        ("tf32_nn_4096x4096x4096_sampled", Row),
        ("tf32_nt_4096x4096x4096_sampled", Col),
    ] {
        v.push(Case {
            name,
            p: tf32(4096, 4096, 4096, Row, lb),
            c: def.clone(),
            sample: Some(2048),
            sms: None,
        });
    }
    v.push(Case {
        name: "tf32_tt_4000x4000x4096_sampled",
        p: tf32(4000, 4000, 4096, Col, Row),
        c: def.clone(),
        sample: Some(2048),
        sms: None,
    });
    // The transposed product (swap_ab, `swtf_`): no pre-pass; a row-major B is the kernel's
    // M-major A, loaded from the stage into registers (register-A wgmma); a column-major B its
    // K-major A. Edges in both of the kernel's dimensions (a partial 32-row A box, columns past
    // the user's M), K tails, batches, clusters (cluster_m sharing the user's A tile, cuBLAS's
    // cluster_n pairs), column-split consumers and the full epilogue.
    let sw = |c: WgmmaConfig| WgmmaConfig {
        swap_ab: true,
        ..tf(c)
    };
    for (name, p, c, sample, sms) in [
        (
            "swtf_nn_100x1000x520",
            tf32(100, 1000, 520, Row, Row),
            sw(cfg(128, 128, 2, 128, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "swtf_nn_64x520x200_one_consumer",
            tf32(64, 520, 200, Row, Row),
            sw(cfg(64, 64, 1, 64, 4, 1, false, 1)),
            None,
            None,
        ),
        (
            "swtf_nn_256x1000x264_full_epilogue",
            full_epilogue(tf32(256, 1000, 264, Row, Row)),
            sw(cfg(128, 256, 2, 256, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "swtf_nt_100x520x264_k_major",
            tf32(100, 520, 264, Row, Col),
            sw(cfg(128, 128, 2, 128, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "swtf_nn_128x384x200_batch3_cluster2",
            tf32(128, 384, 200, Row, Row).batched(3),
            sw(cfg(64, 128, 1, 128, 4, 2, true, 1)),
            None,
            Some(4),
        ),
        (
            "swtf_nn_160x1000x520_cluster_n_bn80",
            tf32(160, 1000, 520, Row, Row),
            WgmmaConfig {
                cluster_n: 2,
                ..sw(cfg(128, 80, 2, 80, 4, 1, true, 1))
            },
            None,
            None,
        ),
        (
            "swtf_nn_160x1000x520_split_n",
            tf32(160, 1000, 520, Row, Row),
            sn(sw(cfg(64, 160, 2, 80, 4, 1, true, 1))),
            None,
            None,
        ),
        (
            "swtf_nn_128x8192x8192_sampled",
            tf32(128, 8192, 8192, Row, Row),
            sw(cfg(128, 128, 2, 128, 4, 1, true, 1)),
            Some(2048),
            None,
        ),
        // With split-K (`swsk_`): the fix-up sums the kernel's transposed tiles, then the
        // transposed stores; on 4 SMs each block loops over several (tile, slice) units.
        (
            "swsk_tf_nn_100x1000x520_64x80_k3_full_epilogue",
            full_epilogue(tf32(100, 1000, 520, Row, Row)),
            WgmmaConfig {
                split_k: 3,
                ..sw(cfg(64, 80, 1, 80, 6, 1, true, 1))
            },
            None,
            Some(4),
        ),
        (
            "swsk_tf_nt_100x520x264_128x128_k2_batch2",
            tf32(100, 520, 264, Row, Col).batched(2),
            WgmmaConfig {
                split_k: 2,
                ..sw(cfg(128, 128, 2, 128, 4, 1, true, 1))
            },
            None,
            None,
        ),
        (
            "swsk_tf_nn_128x2048x8192_64x128_k4_sampled",
            tf32(128, 2048, 8192, Row, Row),
            WgmmaConfig {
                split_k: 4,
                ..sw(cfg(64, 128, 1, 128, 8, 1, true, 1))
            },
            Some(2048),
            None,
        ),
    ] {
        v.push(Case {
            name,
            p,
            c,
            sample,
            sms,
        });
    }
    v
}

/// `c` with split-K `split_k`.
fn sk(c: WgmmaConfig, split_k: u32) -> WgmmaConfig {
    WgmmaConfig { split_k, ..c }
}

/// `c` with the TMA-store epilogue.
fn ts(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig {
        tma_store: true,
        ..c
    }
}

/// TMA-store epilogue cases: edges clipped by the copy engine, padded ldc (padding untouched),
/// every output type, the full epilogue, batches, ping-pong, clusters and tf32.
fn tma_store_cases() -> Vec<Case> {
    use Layout::{Col, Row};
    let tf32 = |m, n, k, la, lb| problem(m, n, k, DType::Tf32, la, lb);
    let mut v = Vec::new();
    let f32_out = with_f32_out(problem(136, 200, 512, DType::Bf16, Row, Col));
    let mut fe = full_epilogue(problem(200, 136, 1000, DType::F16, Row, Row));
    fe.epilogue.out_dtype = DType::F16;
    let fe32 = with_f32_out(full_epilogue(problem(136, 264, 320, DType::Bf16, Col, Row)));
    v.push(Case {
        name: "ts_nn_300x520x200_odd_tiles",
        p: problem(300, 520, 200, DType::Bf16, Row, Row),
        c: ts(cfg(128, 256, 2, 256, 4, 1, true, 8)),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "ts_nt_136x200x512_f32_out",
        p: f32_out,
        c: ts(cfg(64, 128, 1, 128, 6, 1, true, 1)),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "ts_nn_200x136x1000_full_epilogue_padded_ldc",
        p: fe,
        c: ts(cfg(128, 128, 2, 128, 5, 1, true, 8)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ts_tn_136x264x320_full_epilogue_f32_out",
        p: fe32,
        c: ts(cfg(64, 256, 1, 256, 4, 1, true, 8)),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "ts_nn_520x392x304_pingpong",
        p: problem(520, 392, 304, DType::F16, Row, Row),
        c: ts(pp(cfg(128, 128, 2, 128, 5, 1, true, 8))),
        sample: None,
        sms: Some(5),
    });
    v.push(Case {
        name: "ts_nn_1000x1000x1000_cluster2",
        p: problem(1000, 1000, 1000, DType::Bf16, Row, Row),
        c: ts(cfg(128, 256, 2, 256, 4, 2, true, 8)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ts_nn_256x200x96_batch3",
        p: problem(256, 200, 96, DType::Bf16, Row, Row).batched(3),
        c: ts(cfg(128, 128, 2, 64, 4, 1, true, 1)),
        sample: None,
        sms: Some(4),
    });
    v.push(Case {
        name: "ts_tf32_nt_200x304x260",
        p: tf32(200, 304, 260, Row, Col),
        c: ts(tf(cfg(128, 128, 2, 128, 4, 1, true, 8))),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ts_nn_4096x4096x4096_sampled",
        p: problem(4096, 4096, 4096, DType::Bf16, Row, Row),
        c: ts(cfg(128, 256, 2, 256, 4, 1, true, 8)),
        sample: Some(2048),
        sms: None,
    });
    // swap_ab: the kernel computes C^T = B^T A^T and stores transposed (tile rows along N);
    // `swcn` in cuBLAS's small-M arrangement: a pair along the small M (cluster_n 2) sharing
    // the B^T tile (each CTA loads one 64-row box and multicasts it), or two consumers
    // splitting the columns of a tile covering all of M.
    let sw = |c: WgmmaConfig| WgmmaConfig { swap_ab: true, ..c };
    let cn = |c: WgmmaConfig| WgmmaConfig {
        cluster_n: 2,
        ..sw(c)
    };
    for (name, p, c, sample, sms) in [
        (
            "sw_nn_160x1000x520",
            problem(160, 1000, 520, DType::Bf16, Row, Row),
            sw(cfg(64, 160, 1, 160, 6, 1, true, 1)),
            None,
            None,
        ),
        (
            "sw_nn_160x1024x512_cluster2",
            problem(160, 1024, 512, DType::Bf16, Row, Row),
            sw(cfg(64, 160, 1, 160, 6, 2, true, 1)),
            None,
            None,
        ),
        (
            "sw_nt_100x520x264_full_epilogue",
            full_epilogue(problem(100, 520, 264, DType::Bf16, Row, Col)),
            sw(cfg(128, 128, 2, 128, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "sw_tn_128x384x200_cluster2_f16",
            problem(128, 384, 200, DType::F16, Col, Row),
            sw(cfg(64, 128, 1, 128, 4, 2, true, 1)),
            None,
            None,
        ),
        (
            "sw_tt_64x256x128_batch3",
            problem(64, 256, 128, DType::Bf16, Col, Col).batched(3),
            sw(cfg(128, 64, 1, 64, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "sw_nn_300x256x128_three_column_tiles",
            problem(300, 256, 128, DType::F16, Row, Row),
            sw(cfg(64, 128, 1, 128, 4, 1, false, 1)),
            None,
            None,
        ),
        (
            "sw_nn_160x8192x8192_cluster2_sampled",
            problem(160, 8192, 8192, DType::Bf16, Row, Row),
            sw(cfg(64, 160, 1, 160, 6, 2, true, 1)),
            Some(2048),
            None,
        ),
        (
            "swcn_nn_160x1000x520_bn80",
            problem(160, 1000, 520, DType::Bf16, Row, Row),
            cn(cfg(128, 80, 2, 80, 6, 1, true, 1)),
            None,
            None,
        ),
        (
            // f32 output: the paired store writes float2 (8-byte aligned) where the part lies
            // inside C (rank 0 of each pair), single stores in rank 1's part past M = 100.
            "swcn_nn_100x1024x256_full_epilogue_f32_out",
            with_f32_out(full_epilogue(problem(
                100,
                1024,
                256,
                DType::Bf16,
                Row,
                Row,
            ))),
            cn(cfg(128, 64, 2, 64, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "swcn_nt_100x520x264_full_epilogue_one_consumer",
            full_epilogue(problem(100, 520, 264, DType::Bf16, Row, Col)),
            cn(cfg(128, 64, 1, 64, 4, 1, true, 1)),
            None,
            None,
        ),
        (
            "swcn_tt_40x384x200_rank1_past_m_f16",
            problem(40, 384, 200, DType::F16, Col, Col),
            cn(cfg(128, 64, 2, 64, 4, 1, false, 1)),
            None,
            None,
        ),
        (
            "swcn_tn_160x520x136_batch2_persistent_loop",
            problem(160, 520, 136, DType::Bf16, Col, Row).batched(2),
            cn(cfg(128, 80, 2, 80, 4, 1, true, 1)),
            None,
            Some(4),
        ),
        (
            "swcn_nn_160x8192x8192_bn80_sampled",
            problem(160, 8192, 8192, DType::Bf16, Row, Row),
            cn(cfg(128, 80, 2, 80, 6, 1, true, 1)),
            Some(2048),
            None,
        ),
        (
            "swcn_nn_128x8192x8192_bn64_sampled_f16",
            problem(128, 8192, 8192, DType::F16, Row, Row),
            cn(cfg(128, 64, 2, 64, 8, 1, true, 1)),
            Some(2048),
            None,
        ),
        (
            "swtb_nn_160x1000x520_bn80_8_stages",
            problem(160, 1000, 520, DType::Bf16, Row, Row),
            WgmmaConfig {
                tight_b: true,
                ..cn(cfg(128, 80, 2, 80, 8, 1, true, 1))
            },
            None,
            None,
        ),
        (
            "swtb_nt_150x8192x8192_64x160_8_stages_sampled_f16",
            problem(150, 8192, 8192, DType::F16, Row, Col),
            WgmmaConfig {
                tight_b: true,
                ..sw(cfg(64, 160, 1, 160, 8, 1, true, 1))
            },
            Some(2048),
            None,
        ),
        (
            "swsn_nn_160x1000x520_split_n",
            problem(160, 1000, 520, DType::Bf16, Row, Row),
            sn(sw(cfg(64, 160, 2, 80, 6, 1, true, 1))),
            None,
            None,
        ),
        (
            "swsk_bf_nn_160x1000x520_128x160_k4_batch2_full_epilogue",
            full_epilogue(problem(160, 1000, 520, DType::Bf16, Row, Row)).batched(2),
            WgmmaConfig {
                split_k: 4,
                tight_b: true,
                ..sw(cfg(128, 160, 2, 160, 6, 1, true, 1))
            },
            None,
            Some(4),
        ),
        (
            "swsk_f16_tn_240x1536x2048_64x192_k2",
            problem(240, 1536, 2048, DType::F16, Col, Row),
            WgmmaConfig {
                split_k: 2,
                ..sw(cfg(64, 192, 1, 192, 6, 1, true, 1))
            },
            None,
            None,
        ),
    ] {
        v.push(Case {
            name,
            p,
            c,
            sample,
            sms,
        });
    }
    v
}

/// `p` with an f32 output.
fn with_f32_out(mut p: GemmProblem) -> GemmProblem {
    p.epilogue.out_dtype = DType::F32;
    p
}

/// `c` with column-split consumers.
fn sn(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig { split_n: true, ..c }
}

/// Column-split consumer cases (`split_n`): both epilogues, every layout, edges, the fused
/// epilogue, split-K, clusters, batches and tf32.
fn split_n_cases() -> Vec<Case> {
    use Layout::{Col, Row};
    let mut v = Vec::new();
    for (name, la, lb) in [
        ("sn_nn_296x520x200_64x128", Row, Row),
        ("sn_nt_296x520x200_64x128", Row, Col),
        ("sn_tn_296x520x200_64x128", Col, Col),
        ("sn_tt_296x520x200_64x128", Col, Row),
    ] {
        v.push(Case {
            name,
            p: problem(296, 520, 200, DType::Bf16, la, lb),
            c: sn(cfg(64, 128, 2, 64, 8, 1, false, 1)),
            sample: None,
            sms: None,
        });
    }
    let mut fe = full_epilogue(problem(200, 136, 1000, DType::F16, Row, Row));
    fe.epilogue.out_dtype = DType::F16;
    v.push(Case {
        name: "sn_ts_nn_200x136x1000_full_epilogue",
        p: fe,
        c: ts(sn(cfg(128, 128, 2, 64, 5, 1, true, 8))),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "sn_ts_nn_1000x1000x1000_128x256_cluster2",
        p: problem(1000, 1000, 1000, DType::Bf16, Row, Row),
        c: ts(sn(cfg(128, 256, 2, 128, 4, 2, true, 8))),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "sn_nn_64x1000x2048_split4",
        p: problem(64, 1000, 2048, DType::Bf16, Row, Row),
        c: sk(sn(cfg(64, 128, 2, 64, 6, 1, true, 8)), 4),
        sample: None,
        sms: Some(8),
    });
    v.push(Case {
        name: "sn_ts_nn_256x200x96_batch3",
        p: problem(256, 200, 96, DType::Bf16, Row, Row).batched(3),
        c: ts(sn(cfg(64, 256, 2, 128, 4, 1, true, 1))),
        sample: None,
        sms: Some(4),
    });
    v.push(Case {
        name: "sn_tf32_nt_200x304x260",
        p: problem(200, 304, 260, DType::Tf32, Row, Col),
        c: tf(sn(cfg(64, 256, 2, 128, 4, 1, false, 1))),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "sn_ts_nn_4096x4096x1000_sampled",
        p: problem(4096, 4096, 1000, DType::Bf16, Row, Row),
        c: ts(sn(cfg(128, 256, 2, 128, 4, 1, true, 8))),
        sample: Some(2048),
        sms: None,
    });
    // 192 x 160 (two consumers of 192 x 80, m64n80 wgmmas), K-major B only: partial tiles on
    // both edges, a fused epilogue, tf32 through the staging pre-pass, 4000 x 4000 sampled.
    let t160 = |stages| sn(cfg(192, 160, 2, 80, stages, 1, true, 8));
    v.push(Case {
        name: "t160_nt_300x330x200",
        p: problem(300, 330, 200, DType::Bf16, Row, Col),
        c: t160(4),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "t160_tt_200x170x520_full_epilogue",
        p: full_epilogue(problem(200, 170, 520, DType::F16, Col, Col)),
        c: t160(3),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "t160_nt_400x500x96_batch2",
        p: problem(400, 500, 96, DType::Bf16, Row, Col).batched(2),
        c: t160(4),
        sample: None,
        sms: Some(5),
    });
    v.push(Case {
        name: "t160_tf32_nn_250x330x136",
        p: problem(250, 330, 136, DType::Tf32, Row, Row),
        c: tf(t160(4)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "t160_nt_4000x4000x4096_sampled",
        p: problem(4000, 4000, 4096, DType::Bf16, Row, Col),
        c: t160(4),
        sample: Some(2048),
        sms: None,
    });
    // The same tile with three consumers of 64 x 160 (m64n160 wgmmas, 512 threads).
    let c3 = |stages| cfg(192, 160, 3, 160, stages, 1, true, 8);
    v.push(Case {
        name: "t160c3_nt_300x330x200",
        p: problem(300, 330, 200, DType::Bf16, Row, Col),
        c: c3(4),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "t160c3_tt_200x170x520_full_epilogue",
        p: full_epilogue(problem(200, 170, 520, DType::F16, Col, Col)),
        c: c3(3),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "t160c3_tf32_nn_250x330x136",
        p: problem(250, 330, 136, DType::Tf32, Row, Row),
        c: tf(c3(4)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "t160c3_nt_4000x4000x4096_sampled",
        p: problem(4000, 4000, 4096, DType::F16, Row, Col),
        c: c3(4),
        sample: Some(2048),
        sms: None,
    });
    // An MN-major B (NN, TN): three 64-column boxes per stage, the last one half read; the
    // boxes past N are skipped (N = 328: the third tile column loads one box).
    v.push(Case {
        name: "t160c3_nn_300x328x200",
        p: problem(300, 328, 200, DType::Bf16, Row, Row),
        c: c3(4),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "t160c3_tn_200x168x520_full_epilogue",
        p: full_epilogue(problem(200, 168, 520, DType::F16, Col, Row)),
        c: c3(3),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "t160c3_nn_4000x4000x4096_sampled",
        p: problem(4000, 4000, 4096, DType::Bf16, Row, Row),
        c: c3(4),
        sample: Some(2048),
        sms: None,
    });
    // The TMA-store epilogue of 160 columns: five 32-column boxes of 64 bytes (64-byte swizzle),
    // or ten 16-column ones for an f32 output.
    v.push(Case {
        name: "t160c3_ts_nt_300x328x200",
        p: problem(300, 328, 200, DType::Bf16, Row, Col),
        c: ts(c3(4)),
        sample: None,
        sms: Some(3),
    });
    v.push(Case {
        name: "t160c3_ts_nn_300x328x200",
        p: problem(300, 328, 200, DType::F16, Row, Row),
        c: ts(c3(4)),
        sample: None,
        sms: Some(3),
    });
    let mut fe16 = full_epilogue(problem(200, 168, 520, DType::Bf16, Col, Row));
    fe16.epilogue.out_dtype = DType::Bf16;
    v.push(Case {
        name: "t160c3_ts_tn_200x168x520_full_epilogue",
        p: fe16,
        c: ts(c3(3)),
        sample: None,
        sms: Some(2),
    });
    let f32_out = with_f32_out(problem(330, 504, 136, DType::Bf16, Row, Row));
    v.push(Case {
        name: "t160c3_ts_nn_330x504x136_f32_out",
        p: f32_out,
        c: ts(c3(4)),
        sample: None,
        sms: Some(4),
    });
    v.push(Case {
        name: "t160c3_ts_nn_400x504x96_batch2",
        p: problem(400, 504, 96, DType::Bf16, Row, Row).batched(2),
        c: ts(c3(4)),
        sample: None,
        sms: Some(5),
    });
    v.push(Case {
        name: "t160c3_ts_tf32_nn_250x332x136",
        p: problem(250, 332, 136, DType::Tf32, Row, Row),
        c: ts(tf(c3(3))),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "t160c3_ts_nn_4000x4000x4096_sampled",
        p: problem(4000, 4000, 4096, DType::F16, Row, Row),
        c: ts(c3(4)),
        sample: Some(2048),
        sms: None,
    });
    // What default_config serves where the cost model picks the 192 x 160 rung, and the
    // 128 x 192 rung (the encoder layer's FFN-down GEMM).
    for (name, p, tile) in [
        (
            "default_nn_4000x4000x4096_sampled",
            problem(4000, 4000, 4096, DType::Bf16, Row, Row),
            (192, 160),
        ),
        (
            "default_nn_4096x768x3072_sampled",
            problem(4096, 768, 3072, DType::F16, Row, Row),
            (128, 192),
        ),
        (
            "default_tf32_nn_4000x4000x4096_sampled",
            problem(4000, 4000, 4096, DType::Tf32, Row, Row),
            (192, 160),
        ),
    ] {
        let c = WgmmaGemm::default().default_config(&p, Arch::Sm90a);
        assert_eq!(
            (c.bm, c.bn, c.tma_store),
            (tile.0, tile.1, p.dtype != DType::Tf32),
            "{name}"
        );
        v.push(Case {
            name,
            p,
            c,
            sample: Some(2048),
            sms: None,
        });
    }
    v
}

/// `c` with cluster split-K (two CTAs per tile, partial sums through distributed shared memory).
fn ck(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig { cluster_k: 2, ..c }
}

/// Cluster split-K cases: every layout, edges in M, N and K (an odd number of k-blocks, and two
/// k-blocks: one per CTA), both epilogues, the fused epilogue, column-split consumers, batches,
/// tf32, and persistent grids where one cluster runs many units (the reduction buffer's
/// barriers go through many phases).
fn cluster_k_cases() -> Vec<Case> {
    use Layout::{Col, Row};
    let mut v = Vec::new();
    let c128 = |stages, persistent| ck(cfg(128, 128, 2, 128, stages, 1, persistent, 8));
    v.push(Case {
        name: "ck_nn_1024x1024x1024",
        p: problem(1024, 1024, 1024, DType::Bf16, Row, Row),
        c: ts(c128(4, true)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ck_nn_300x520x200_direct",
        p: problem(300, 520, 200, DType::Bf16, Row, Row),
        c: c128(6, false),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ck_nt_296x520x200_sn_ts_many_units",
        p: problem(296, 520, 200, DType::F16, Row, Col),
        c: ts(sn(ck(cfg(128, 128, 2, 64, 5, 1, true, 1)))),
        sample: None,
        sms: Some(4),
    });
    let mut fe = full_epilogue(problem(200, 136, 1000, DType::F16, Col, Row));
    fe.epilogue.out_dtype = DType::F16;
    v.push(Case {
        name: "ck_tn_200x136x1000_128x64_full_epilogue_one_cluster",
        p: fe,
        c: ck(cfg(128, 64, 2, 64, 8, 1, true, 1)),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "ck_tt_136x264x320_256x128_batch2",
        p: problem(136, 264, 320, DType::Bf16, Col, Col).batched(2),
        c: ck(cfg(256, 128, 2, 128, 3, 1, true, 8)),
        sample: None,
        sms: Some(6),
    });
    v.push(Case {
        name: "ck_nn_250x264x128_two_kblocks",
        p: problem(250, 264, 128, DType::Bf16, Row, Row),
        c: ts(c128(4, true)),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "ck_nn_260x136x192_three_kblocks",
        p: problem(260, 136, 192, DType::Bf16, Row, Row),
        c: c128(6, false),
        sample: None,
        sms: None,
    });
    let f32_out = with_f32_out(problem(136, 200, 512, DType::Bf16, Row, Col));
    v.push(Case {
        name: "ck_nt_136x200x512_ts_f32_out",
        p: f32_out,
        c: ts(c128(4, true)),
        sample: None,
        sms: Some(2),
    });
    v.push(Case {
        name: "ck_tf32_nt_200x304x260",
        p: problem(200, 304, 260, DType::Tf32, Row, Col),
        c: tf(c128(4, false)),
        sample: None,
        sms: None,
    });
    v.push(Case {
        name: "ck_tf32_nn_200x304x260",
        p: problem(200, 304, 260, DType::Tf32, Row, Row),
        c: tf(c128(4, true)),
        sample: None,
        sms: Some(4),
    });
    v.push(Case {
        name: "ck_nn_4096x4096x1000_128x256_sampled",
        p: problem(4096, 4096, 1000, DType::Bf16, Row, Row),
        c: ck(cfg(128, 256, 2, 256, 3, 1, true, 8)),
        sample: Some(2048),
        sms: None,
    });
    v
}

/// `c` with ping-pong consumers.
fn pp(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig {
        pingpong: true,
        ..c
    }
}

/// The epilogue that reads everything: alpha, beta * C, bias, GELU(tanh), residual; ldc padded.
fn full_epilogue(mut p: GemmProblem) -> GemmProblem {
    p.ldc = p.n.next_multiple_of(8) + 8;
    p.stride_c = p.m as u64 * p.ldc as u64;
    p.epilogue.alpha = 0.75;
    p.epilogue.beta = 0.5;
    p.epilogue.bias = true;
    p.epilogue.activation = Activation::GeluTanh;
    p.epilogue.residual = true;
    p
}

fn problem(m: u32, n: u32, k: u32, dtype: DType, la: Layout, lb: Layout) -> GemmProblem {
    GemmProblem::new(m, n, k, dtype, la, lb)
}

fn cases() -> Vec<Case> {
    use Layout::{Col, Row};
    let t = WgmmaGemm::default();
    // The small-shape default rung with direct stores: several cases below have C pitches the
    // TMA store cannot take (the ts_ cases cover the TMA-store epilogue).
    let def = WgmmaConfig {
        tma_store: false,
        ..t.default_config(&GemmProblem::nn(64, 64, 64, DType::Bf16), Arch::Sm90a)
    };
    let small = cfg(128, 128, 1, 128, 4, 1, false, 1);
    let mut v = vec![
        Case {
            name: "nt_128x128x64_one_consumer",
            p: problem(128, 128, 64, DType::Bf16, Row, Col),
            c: small.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_128x128x64_one_consumer",
            p: problem(128, 128, 64, DType::Bf16, Row, Row),
            c: small.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_256x256x256_default",
            p: problem(256, 256, 256, DType::Bf16, Row, Col),
            c: def.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_256x256x256_default_f16",
            p: problem(256, 256, 256, DType::F16, Row, Row),
            c: def.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_1x1x8",
            p: problem(1, 1, 8, DType::Bf16, Row, Col),
            c: cfg(64, 64, 1, 64, 2, 1, false, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_1x1x8_ldb8",
            p: GemmProblem {
                ldb: 8,
                ..problem(1, 1, 8, DType::F16, Row, Row)
            },
            c: cfg(64, 64, 1, 64, 2, 1, false, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_64x8192x64_64x128",
            p: problem(64, 8192, 64, DType::Bf16, Row, Col),
            c: cfg(64, 128, 1, 128, 6, 1, true, 8),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_256x384x1000_k_tail",
            p: problem(256, 384, 1000, DType::Bf16, Row, Col),
            c: def.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "tn_192x200x136_col_a",
            p: problem(192, 200, 136, DType::Bf16, Col, Row),
            c: def.clone(),
            sample: None,
            sms: None,
        },
        Case {
            name: "tt_192x200x136_col_a_col_b",
            p: problem(192, 200, 136, DType::F16, Col, Col),
            c: cfg(128, 128, 2, 64, 4, 1, false, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_512x256x128_256x128_two_m_blocks",
            p: problem(512, 256, 128, DType::Bf16, Row, Col),
            c: cfg(256, 128, 2, 128, 4, 1, true, 8),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_256x384x128_bn192",
            p: problem(256, 384, 128, DType::Bf16, Row, Row),
            c: cfg(128, 192, 2, 192, 4, 1, false, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_384x256x320_wgmma_n64_6_stages",
            p: problem(384, 256, 320, DType::F16, Row, Col),
            c: cfg(128, 128, 2, 64, 6, 1, true, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_300x520x200_cluster2_odd_tiles",
            p: problem(300, 520, 200, DType::Bf16, Row, Row),
            c: cfg(128, 256, 2, 128, 4, 2, true, 8),
            sample: None,
            sms: None,
        },
        Case {
            name: "nt_300x520x200_cluster2_odd_tiles",
            p: problem(300, 520, 200, DType::Bf16, Row, Col),
            c: cfg(128, 128, 2, 128, 5, 2, false, 1),
            sample: None,
            sms: None,
        },
        Case {
            name: "nn_200x392x1000_cluster2_one_consumer_8_stages",
            p: problem(200, 392, 1000, DType::Bf16, Row, Row),
            c: cfg(64, 128, 1, 128, 8, 2, true, 8),
            sample: None,
            sms: Some(8),
        },
        Case {
            name: "tn_136x72x900_12_stages_ring_wraps",
            p: problem(136, 72, 900, DType::F16, Col, Row),
            c: cfg(64, 64, 1, 64, 12, 1, true, 1),
            sample: None,
            sms: Some(2),
        },
    ];
    // Fused epilogues (ldc padded: padding must stay untouched).
    let mut e1 = problem(200, 136, 1000, DType::F16, Row, Row);
    e1.ldc = 144;
    e1.stride_c = 200 * 144;
    e1.epilogue.alpha = 0.75;
    e1.epilogue.beta = 0.5;
    e1.epilogue.bias = true;
    e1.epilogue.activation = Activation::GeluTanh;
    e1.epilogue.residual = true;
    v.push(Case {
        name: "nn_200x136x1000_beta_bias_gelutanh_residual",
        p: e1,
        c: def.clone(),
        sample: None,
        sms: None,
    });
    let mut e2 = problem(200, 136, 1000, DType::Bf16, Row, Col);
    e2.epilogue.bias = true;
    e2.epilogue.activation = Activation::Relu;
    e2.epilogue.out_dtype = DType::F32;
    v.push(Case {
        name: "nt_200x136x1000_bias_relu_f32_out",
        p: e2,
        c: def.clone(),
        sample: None,
        sms: None,
    });
    let mut e3 = problem(130, 72, 256, DType::Bf16, Row, Col);
    e3.ldc = 75; // odd ldc: scalar store path
    e3.stride_c = 130 * 75;
    e3.epilogue.activation = Activation::Silu;
    e3.epilogue.residual = true;
    v.push(Case {
        name: "nt_130x72x256_silu_residual_odd_ldc",
        p: e3,
        c: small.clone(),
        sample: None,
        sms: None,
    });
    let mut e4 = problem(130, 72, 256, DType::F16, Row, Row);
    e4.epilogue.activation = Activation::GeluErf;
    e4.epilogue.beta = -1.0;
    v.push(Case {
        name: "nn_130x72x256_geluerf_beta",
        p: e4,
        c: small.clone(),
        sample: None,
        sms: None,
    });
    // Batched: packed strides, and a broadcast A.
    v.push(Case {
        name: "nt_batch3_130x260x72",
        p: problem(130, 260, 72, DType::Bf16, Row, Col).batched(3),
        c: def.clone(),
        sample: None,
        sms: None,
    });
    let mut b2 = problem(130, 264, 72, DType::F16, Row, Row).batched(2);
    b2.stride_a = 0;
    v.push(Case {
        name: "nn_batch2_broadcast_a",
        p: b2,
        c: cfg(128, 256, 2, 128, 4, 2, false, 1),
        sample: None,
        sms: None,
    });
    // Large shapes, sampled.
    v.push(Case {
        name: "nt_4000x4000x4096_sampled",
        p: problem(4000, 4000, 4096, DType::Bf16, Row, Col),
        c: def.clone(),
        sample: Some(2048),
        sms: None,
    });
    v.push(Case {
        name: "nn_256x8192x8192_sampled",
        p: problem(256, 8192, 8192, DType::Bf16, Row, Row),
        c: cfg(128, 128, 2, 128, 6, 1, true, 8),
        sample: Some(2048),
        sms: None,
    });
    // Split-K (f32 workspace, per-warp arrival counters, epilogue once) and ping-pong consumers.
    let c64 = cfg(64, 128, 1, 128, 6, 1, true, 8);
    let c128 = cfg(128, 128, 2, 128, 6, 1, true, 8);
    let pp64 = pp(cfg(64, 256, 2, 256, 4, 1, true, 8));
    let pp128 = pp(cfg(128, 128, 2, 128, 6, 1, true, 8));
    let mut split_cases = vec![
        (
            "nt_64x1000x1000_split4_k_tail_odd_n",
            problem(64, 1000, 1000, DType::Bf16, Row, Col),
            sk(c64.clone(), 4),
            None,
        ),
        (
            "nn_130x264x192_split3_one_kblock_each",
            problem(130, 264, 192, DType::F16, Row, Row),
            sk(c128.clone(), 3),
            None,
        ),
        (
            "nt_200x136x1000_split3_full_epilogue",
            full_epilogue(problem(200, 136, 1000, DType::Bf16, Row, Col)),
            sk(c128.clone(), 3),
            None,
        ),
        (
            "nn_200x136x1000_split2_full_epilogue_f16",
            full_epilogue(problem(200, 136, 1000, DType::F16, Row, Row)),
            sk(c64.clone(), 2),
            None,
        ),
        (
            "tn_192x200x520_split2_col_a",
            problem(192, 200, 520, DType::Bf16, Col, Row),
            sk(c128.clone(), 2),
            None,
        ),
        (
            "nt_300x520x200_cluster2_split2",
            problem(300, 520, 200, DType::Bf16, Row, Col),
            sk(cfg(128, 128, 2, 128, 5, 2, true, 8), 2),
            None,
        ),
        (
            "nt_batch3_130x260x200_split2",
            problem(130, 260, 200, DType::Bf16, Row, Col).batched(3),
            sk(c64.clone(), 2),
            None,
        ),
        (
            "nt_256x512x640_split4_not_persistent",
            problem(256, 512, 640, DType::Bf16, Row, Col),
            sk(cfg(128, 128, 2, 128, 4, 1, false, 1), 4),
            None,
        ),
        (
            "nt_512x512x1024_split2_few_blocks",
            problem(512, 512, 1024, DType::Bf16, Row, Col),
            sk(c128.clone(), 2),
            Some(3),
        ),
        (
            "nn_512x512x512_pingpong_128x128",
            problem(512, 512, 512, DType::Bf16, Row, Row),
            pp128.clone(),
            None,
        ),
        (
            "nt_512x512x512_pingpong_few_blocks",
            problem(512, 512, 512, DType::Bf16, Row, Col),
            pp128.clone(),
            Some(3),
        ),
        (
            "nt_300x1000x1000_pingpong_64x256_k_tail",
            problem(300, 1000, 1000, DType::Bf16, Row, Col),
            pp64.clone(),
            Some(5),
        ),
        (
            "tt_192x200x136_pingpong_col_a_col_b",
            problem(192, 200, 136, DType::F16, Col, Col),
            pp(cfg(128, 128, 2, 64, 4, 1, true, 1)),
            Some(1),
        ),
        (
            "nn_300x520x200_pingpong_cluster2",
            problem(300, 520, 200, DType::Bf16, Row, Row),
            pp(cfg(128, 128, 2, 128, 5, 2, true, 8)),
            Some(4),
        ),
        (
            "nt_200x136x1000_pingpong_full_epilogue",
            full_epilogue(problem(200, 136, 1000, DType::Bf16, Row, Col)),
            pp128.clone(),
            Some(1),
        ),
        (
            "nn_260x264x1000_pingpong_split3_full_epilogue",
            full_epilogue(problem(260, 264, 1000, DType::F16, Row, Row)),
            sk(pp(cfg(64, 128, 2, 128, 6, 1, true, 8)), 3),
            Some(2),
        ),
    ];
    for (name, p, c, sms) in split_cases.drain(..) {
        v.push(Case {
            name,
            p,
            c,
            sample: None,
            sms,
        });
    }
    v.push(Case {
        name: "nt_64x8192x8192_split2_sampled",
        p: problem(64, 8192, 8192, DType::Bf16, Row, Col),
        c: sk(c64, 2),
        sample: Some(2048),
        sms: None,
    });
    v.push(Case {
        name: "nt_4000x4000x4096_pingpong_sampled",
        p: problem(4000, 4000, 4096, DType::Bf16, Row, Col),
        c: pp128,
        sample: Some(2048),
        sms: None,
    });
    v.push(Case {
        name: "nn_4096x4096x1000_pingpong_64x256_sampled",
        p: problem(4096, 4096, 1000, DType::Bf16, Row, Row),
        c: pp64,
        sample: Some(2048),
        sms: None,
    });
    v.push(Case {
        name: "nn_4096x4096x4096_cluster2_sampled",
        p: problem(4096, 4096, 4096, DType::Bf16, Row, Row),
        c: cfg(128, 256, 2, 256, 4, 2, true, 8),
        sample: Some(2048),
        sms: None,
    });
    v.extend(tf32_cases());
    v.extend(tma_store_cases());
    v.extend(split_n_cases());
    v.extend(cluster_k_cases());
    v
}

/// Runs one case; returns (relative error, worst absolute error) or a failure description.
fn run_case(
    dev: &Device,
    stream: &Stream,
    t: &WgmmaGemm,
    case: &Case,
    kernel: &(aot::Compiled, String),
    seed: u64,
) -> Result<(f64, f64), String> {
    let p = &case.p;
    let mut rng = SmallRng::seed_from_u64(seed);
    let (ea, eb, ec) = p.buffer_elems();
    let out = p.epilogue.out_dtype;
    let a = random_data(&mut rng, ea as usize, p.dtype, 1.0);
    let b = random_data(&mut rng, eb as usize, p.dtype, 1.0);
    let c_init = if p.epilogue.beta != 0.0 {
        Some(random_data(&mut rng, ec as usize, out, 1.0))
    } else {
        None
    };
    let bias = if p.epilogue.bias {
        Some(random_data(&mut rng, p.n as usize, out, 1.0))
    } else {
        None
    };
    let res = if p.epilogue.residual {
        Some(random_data(&mut rng, ec as usize, out, 1.0))
    } else {
        None
    };
    let da = upload(dev, stream, &a);
    let db = upload(dev, stream, &b);
    let mut dc = match &c_init {
        Some(h) => upload(dev, stream, h),
        None => {
            let mut buf = dev
                .alloc((ec as usize * out.size_bytes()).max(16), stream)
                .unwrap();
            buf.fill_u8(0xFF, stream).unwrap();
            buf
        }
    };
    let dbias = bias.as_ref().map(|h| upload(dev, stream, h));
    let dres = res.as_ref().map(|h| upload(dev, stream, h));
    let ws_bytes = case.c.workspace_bytes(p.m, p.n, p.batch) as usize;
    let mut dws = if ws_bytes > 0 {
        // Counters must start at zero; fill the partials with NaN so a missed slice shows.
        let mut w = dev.alloc(ws_bytes, stream).unwrap();
        let part = case.c.workspace_partial_bytes(p.m, p.n, p.batch) as usize / 4;
        let host: Vec<u32> = (0..ws_bytes / 4)
            .map(|i| if i < part { 0x7FC0_0000 } else { 0 })
            .collect();
        w.upload(&host, stream).unwrap();
        Some(w)
    } else {
        None
    };
    // tf32 staging buffer, poisoned (NaN) so an element the pre-pass misses shows in C.
    let st_bytes = WgmmaGemm::staging_bytes(p, &case.c) as usize;
    let mut dst = if st_bytes > 0 {
        let mut w = dev.alloc(st_bytes, stream).unwrap();
        w.fill_u8(0xFF, stream).unwrap();
        Some(w)
    } else {
        None
    };
    let (compiled, entry) = kernel;
    let f = load(dev, compiled, entry);
    let mut bufs = WgmmaBuffers {
        a: &da,
        b: &db,
        c: &mut dc,
        bias: dbias.as_ref(),
        residual: dres.as_ref(),
        workspace: dws.as_mut(),
        staging: dst.as_mut(),
    };
    t.enqueue(&f, p, &case.c, &mut bufs, stream)
        .map_err(|e| format!("{entry}: launch: {e}"))?;
    wait_or_hang(dev, stream, entry, Duration::from_secs(20))?;
    if let Some(w) = &dws {
        // Every launch must leave the arrival counters zero for the next one.
        let part = case.c.workspace_partial_bytes(p.m, p.n, p.batch) as usize / 4;
        let words = w.download::<u32>(stream).unwrap();
        if let Some(i) = words[part..ws_bytes / 4].iter().position(|&x| x != 0) {
            return Err(format!(
                "{entry}: split-K counter {i} is {} after the launch (must be reset to 0)",
                words[part + i]
            ));
        }
    }
    let got = download(&dc, stream, out, ec as usize);
    let cv = c_init.as_ref().map(|h| h.vals.as_slice());
    let bv = bias.as_ref().map(|h| h.vals.as_slice());
    let rv = res.as_ref().map(|h| h.vals.as_slice());
    // Every element of the M x N region was written, and no padding column was.
    for bt in 0..p.batch as usize {
        for i in 0..p.m as usize {
            for j in 0..p.ldc as usize {
                let ci = bt * p.stride_c as usize + i * p.ldc as usize + j;
                if ci >= got.len() {
                    continue;
                }
                let written = !got[ci].is_nan();
                let pad_ok = match cv {
                    Some(c) => got[ci] == c[ci] || (got[ci].is_nan() && c[ci].is_nan()),
                    None => got[ci].is_nan(),
                };
                if j < p.n as usize && !written {
                    return Err(format!("{entry}: C[{bt}][{i}][{j}] not written (NaN)"));
                }
                if j >= p.n as usize && !pad_ok {
                    return Err(format!(
                        "{entry}: padding C[{bt}][{i}][{j}] overwritten with {}",
                        got[ci]
                    ));
                }
            }
        }
    }
    let (want, got_cmp) = match case.sample {
        None => {
            let full = gemm_f64(
                p,
                &GemmRefInputs {
                    a: &a.vals,
                    b: &b.vals,
                    c: cv,
                    bias: bv,
                    residual: rv,
                },
            );
            let mut w = Vec::new();
            let mut g = Vec::new();
            for bt in 0..p.batch as usize {
                for i in 0..p.m as usize {
                    for j in 0..p.n as usize {
                        let ci = bt * p.stride_c as usize + i * p.ldc as usize + j;
                        w.push(full[ci]);
                        g.push(got[ci]);
                    }
                }
            }
            (w, g)
        }
        Some(s) => {
            let mut w = Vec::new();
            let mut g = Vec::new();
            // Always include the four corners, then random elements.
            let corners = [
                (0, 0),
                (0, p.n as usize - 1),
                (p.m as usize - 1, 0),
                (p.m as usize - 1, p.n as usize - 1),
            ];
            for idx in 0..s {
                let bt = rng.random_range(0..p.batch as usize);
                let (i, j) = match corners.get(idx) {
                    Some(&corner) => corner,
                    None => (
                        rng.random_range(0..p.m as usize),
                        rng.random_range(0..p.n as usize),
                    ),
                };
                w.push(ref_element(p, &a.vals, &b.vals, cv, bv, rv, bt, i, j));
                g.push(got[bt * p.stride_c as usize + i * p.ldc as usize + j]);
            }
            (w, g)
        }
    };
    let err = rel_error(&got_cmp, &want);
    let worst = got_cmp
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    let tol = p.dtype.rel_tolerance();
    if p.dtype == DType::Tf32 {
        assert_eq!(tol, 5e-3, "the tf32 bound of the issue");
    }
    if err.is_nan() || err >= tol {
        let first_bad = got_cmp
            .iter()
            .zip(&want)
            .position(|(g, w)| (g - w).abs() > 0.05 * (1.0 + w.abs()));
        return Err(format!("{entry}: rel error {err:.3e} >= {tol:.0e} (worst abs {worst:.3e}, first bad compared index {first_bad:?})"));
    }
    Ok((err, worst))
}

#[test]
fn gpu_cases_are_valid_problems() {
    // Runs without a device: every GPU case must pass check(), so the GPU run tests kernels, not the case list.
    let t = WgmmaGemm::default();
    for case in cases() {
        t.check(&case.p, &case.c, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let (_, _, ec) = case.p.buffer_elems();
        assert!(ec >= case.p.m as u64 * case.p.ldc as u64, "{}", case.name);
    }
}

#[test]
fn split_k_and_pingpong_case_kernels_compile_without_spills() {
    // Needs NVRTC only: the GPU run must not be the first to compile these kernels.
    if !nvrtc_or_skip("split_k_and_pingpong_case_kernels_compile_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    let mut n = 0;
    for case in cases().iter().filter(|c| {
        c.c.split_k > 1 || c.c.pingpong || c.c.tma_store || c.c.cluster_k > 1 || c.c.swap_ab
    }) {
        let src = t
            .emit(&case.p, &case.c, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let out = aot::compile(&src, Arch::Sm90a).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            out.log
                .contains(" 0 bytes spill stores, 0 bytes spill loads"),
            "{} spills:\n{}",
            case.name,
            out.log
        );
        assert!(
            !out.log.contains("serialized"),
            "{} serializes wgmma:\n{}",
            case.name,
            out.log
        );
        n += 1;
    }
    assert!(n >= 24, "only {n} split-K / ping-pong / TMA-store cases");
}

#[test]
fn tf32_cases_cover_every_layout_and_compile_without_spills() {
    let t = WgmmaGemm::default();
    let cases = tf32_cases();
    for (la, lb) in [
        (Layout::Row, Layout::Row),
        (Layout::Row, Layout::Col),
        (Layout::Col, Layout::Row),
        (Layout::Col, Layout::Col),
    ] {
        assert!(
            cases.iter().any(|c| c.p.layout_a == la
                && c.p.layout_b == lb
                && c.p.m == 1000
                && c.p.k == 1000),
            "{la:?}{lb:?}"
        );
    }
    assert!(cases
        .iter()
        .any(|c| c.p.m == 4096 && c.p.n == 4096 && c.p.k == 4096));
    if !nvrtc_or_skip("tf32_cases_cover_every_layout_and_compile_without_spills") {
        return;
    }
    for case in &cases {
        let src = t
            .emit(&case.p, &case.c, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let out = aot::compile(&src, Arch::Sm90a).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            out.log
                .contains(" 0 bytes spill stores, 0 bytes spill loads"),
            "{} spills:\n{}",
            case.name,
            out.log
        );
        assert!(
            !out.log.contains("serialized"),
            "{} serializes wgmma:\n{}",
            case.name,
            out.log
        );
    }
}

#[test]
fn wgmma_gemm_matches_the_f64_reference() {
    let Some(dev) = device_or_skip("wgmma_gemm_matches_the_f64_reference") else {
        return;
    };
    let stream = dev.new_stream().unwrap();
    let t = WgmmaGemm::new(dev.info().sm_count);
    let mut failures = Vec::new();
    // RTX_WGMMA_CASE=<substring>[,<substring>...] runs only the cases matching one of them.
    let filter = std::env::var("RTX_WGMMA_CASE").unwrap_or_default();
    let all = cases();
    let chosen: Vec<(usize, &Case, WgmmaGemm)> = all
        .iter()
        .enumerate()
        .filter(|(_, case)| filter.split(',').any(|f| case.name.contains(f)))
        .map(|(i, case)| (i, case, case.sms.map_or(t, WgmmaGemm::new)))
        .collect();
    // NVRTC + ptxas take about 1-2 s a kernel: compiled one after another, the ~90 cases took
    // 131-200 s of the device call (call BM's 200 s timeout cut one run). All of them first,
    // on every core, then the GPU part one case at a time.
    let started = Instant::now();
    let kernels: Vec<(aot::Compiled, String)> = chosen
        .par_iter()
        .map(|(_, case, tc)| compile(tc, &case.p, &case.c))
        .collect();
    eprintln!(
        "compiled {} case kernels in {:?}",
        kernels.len(),
        started.elapsed()
    );
    for ((i, case, tc), kernel) in chosen.iter().zip(&kernels) {
        let started = Instant::now();
        match run_case(&dev, &stream, tc, case, kernel, 0x5eed + *i as u64) {
            Ok((err, worst)) => eprintln!(
                "PASS {:<48} rel {err:.2e} worst-abs {worst:.2e} ({:?})",
                case.name,
                started.elapsed()
            ),
            Err(msg) => {
                eprintln!("FAIL {:<48} {msg}", case.name);
                failures.push(format!("{}: {msg}", case.name));
                // A faulted kernel poisons the context: later cases would only repeat the error.
                if dev.synchronize().is_err() {
                    eprintln!("context is unusable after {}; stopping", case.name);
                    break;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Mean time of `iters` runs of `f` on `stream`, in ms.
fn time_ms(dev: &Device, stream: &Stream, iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    wait_or_hang(dev, stream, "warmup", Duration::from_secs(30)).unwrap();
    let (e0, e1) = (Event::new(dev).unwrap(), Event::new(dev).unwrap());
    e0.record(stream).unwrap();
    for _ in 0..iters {
        f();
    }
    e1.record(stream).unwrap();
    wait_or_hang(dev, stream, "timing", Duration::from_secs(60)).unwrap();
    e0.elapsed_ms(&e1).unwrap() as f64 / iters as f64
}

/// Configs timed for one bench shape: a common set plus shape-specific split-K / ping-pong ones.
fn bench_configs(m: u32, n: u32, k: u32) -> Vec<WgmmaConfig> {
    let big = cfg(128, 256, 2, 256, 4, 1, true, 8);
    let c1 = cfg(128, 128, 1, 128, 6, 1, true, 8);
    let c64 = cfg(64, 128, 1, 128, 6, 1, true, 8);
    let pp128 = pp(cfg(128, 128, 2, 128, 6, 1, true, 8));
    let pp64 = pp(cfg(64, 256, 2, 256, 4, 1, true, 8));
    let pp64n = pp(cfg(64, 128, 2, 128, 6, 1, true, 8));
    let mut v = vec![
        big.clone(),
        WgmmaConfig {
            cluster_m: 2,
            ..big.clone()
        },
        c1.clone(),
        pp128.clone(),
        pp64.clone(),
    ];
    if m >= 1024 && n >= 1024 {
        v.push(WgmmaConfig {
            cluster_m: 2,
            ..pp128.clone()
        });
        v.push(WgmmaConfig {
            cluster_m: 2,
            ..pp64.clone()
        });
        v.push(WgmmaConfig {
            stages: 5,
            ..pp128.clone()
        });
    }
    if m * n <= 1024 * 1024 || m <= 256 {
        // Too few tiles to fill the SMs: split K, smaller tiles.
        v.push(c64.clone());
        v.push(pp64n.clone());
        for s in [2, 4] {
            v.push(sk(c64.clone(), s));
            v.push(sk(pp64n.clone(), s));
            v.push(sk(cfg(128, 128, 2, 128, 6, 1, true, 8), s));
        }
        v.push(sk(cfg(64, 256, 1, 256, 4, 1, true, 8), 4));
        v.push(sk(pp64.clone(), 2));
        v.push(sk(pp64.clone(), 4));
        v.push(sk(pp128.clone(), 2));
        v.push(sk(cfg(64, 64, 1, 64, 6, 1, true, 8), 2));
    }
    if k <= 1024 {
        v.push(WgmmaConfig {
            stages: 5,
            ..pp128.clone()
        });
        v.push(pp64n);
    }
    v.sort();
    v.dedup();
    v
}

#[test]
fn bench_against_cublas() {
    if std::env::var_os("RTX_WGMMA_BENCH").is_none() {
        eprintln!("SKIP bench_against_cublas: set RTX_WGMMA_BENCH=1 to time the wgmma kernels against cuBLAS");
        return;
    }
    let Some(dev) = device_or_skip("bench_against_cublas") else {
        return;
    };
    let stream = dev.new_stream().unwrap();
    let t = WgmmaGemm::new(dev.info().sm_count);
    let blas = Blas::new(&dev, &stream).ok();
    // RTX_WGMMA_BENCH_SHAPE=<comma-separated substrings of "MxNxK NT|NN"> restricts the shapes.
    let filter = std::env::var("RTX_WGMMA_BENCH_SHAPE").unwrap_or_default();
    let shapes: [(u32, u32, u32, Layout, DType); 12] = [
        (4096, 4096, 4096, Layout::Col, DType::Bf16),
        (4096, 4096, 4096, Layout::Row, DType::Bf16),
        (8192, 8192, 8192, Layout::Col, DType::Bf16),
        (512, 512, 512, Layout::Col, DType::Bf16),
        (1024, 1024, 1024, Layout::Col, DType::Bf16),
        (4000, 4000, 4096, Layout::Col, DType::Bf16),
        (64, 8192, 8192, Layout::Col, DType::Bf16),
        (256, 8192, 8192, Layout::Row, DType::Bf16),
        (4096, 4096, 1000, Layout::Col, DType::Bf16),
        // tf32: NN stages B through the pre-pass (its time included), NT reads both in place.
        (4096, 4096, 4096, Layout::Row, DType::Tf32),
        (4096, 4096, 4096, Layout::Col, DType::Tf32),
        (8192, 8192, 8192, Layout::Row, DType::Tf32),
    ];
    let mut rng = SmallRng::seed_from_u64(7);
    let mut summary = Vec::new();
    for (m, n, k, lb, dt) in shapes {
        let shape = format!(
            "{m}x{n}x{k} {}",
            if lb == Layout::Col { "NT" } else { "NN" }
        );
        let label = format!("{dt} {shape}");
        if !filter.split(',').any(|f| label.contains(f)) {
            continue;
        }
        let p = problem(m, n, k, dt, Layout::Row, lb);
        let out = p.epilogue.out_dtype;
        let (ea, eb, ec) = p.buffer_elems();
        let da = upload(&dev, &stream, &random_data(&mut rng, ea as usize, dt, 1.0));
        let db = upload(&dev, &stream, &random_data(&mut rng, eb as usize, dt, 1.0));
        let mut dc = dev.alloc(ec as usize * out.size_bytes(), &stream).unwrap();
        let dref = dev.alloc(ec as usize * out.size_bytes(), &stream).unwrap();
        let flops = p.flops();
        let mut cublas = None;
        if let Some(bl) = &blas {
            let bdt = if dt == DType::Tf32 {
                BlasDtype::Tf32
            } else {
                BlasDtype::Bf16
            };
            let mut g = BlasGemm::new(
                bdt,
                m as usize,
                n as usize,
                k as usize,
                da.ptr(),
                db.ptr(),
                dref.ptr(),
            )
            .unwrap();
            g.transb = lb == Layout::Col;
            g.ldb = p.ldb as usize;
            let ms = time_ms(&dev, &stream, 20, || bl.gemm(&g).unwrap());
            cublas = Some(flops / ms / 1e9);
            eprintln!("{label}: cuBLAS {:.0} TF/s", flops / ms / 1e9);
        }
        let mut best: Option<(f64, String)> = None;
        let configs: Vec<WgmmaConfig> = if dt == DType::Tf32 {
            let mut v: Vec<WgmmaConfig> = bench_configs(m, n, k).into_iter().map(tf).collect();
            v.insert(0, t.default_config(&p, Arch::Sm90a));
            v.dedup();
            v
        } else {
            bench_configs(m, n, k)
        };
        for c in configs {
            if let Err(e) = t.check(&p, &c, Arch::Sm90a) {
                eprintln!("{label}: skip {}: {}", c.tag(), e.reason);
                continue;
            }
            let (f, _) = compile_load(&dev, &t, &p, &c);
            let wsb = c.workspace_bytes(p.m, p.n, p.batch) as usize;
            let mut ws = if wsb > 0 {
                let mut w = dev.alloc(wsb, &stream).unwrap();
                w.fill_u8(0, &stream).unwrap();
                Some(w)
            } else {
                None
            };
            let stb = WgmmaGemm::staging_bytes(&p, &c) as usize;
            let mut st = if stb > 0 {
                Some(dev.alloc(stb, &stream).unwrap())
            } else {
                None
            };
            let mut time_with = |tt: &WgmmaGemm| {
                time_ms(&dev, &stream, 20, || {
                    let mut bufs = WgmmaBuffers {
                        a: &da,
                        b: &db,
                        c: &mut dc,
                        bias: None,
                        residual: None,
                        workspace: ws.as_mut(),
                        staging: st.as_mut(),
                    };
                    tt.enqueue(&f, &p, &c, &mut bufs, &stream).unwrap();
                })
            };
            let ms = time_with(&t);
            if c.cluster_m > 1 && c.persistent {
                // Diagnostic for the slow cluster path: if fewer than sm_count / 2 clusters can be
                // co-resident (GPCs with odd SM counts), a full persistent grid runs a second wave.
                for fewer in [4u32, 8, 16] {
                    let tt = WgmmaGemm::new(t.sm_count.saturating_sub(fewer));
                    let ms2 = time_with(&tt);
                    eprintln!(
                        "{label}: {} with a {}-block persistent grid: {:.0} TF/s",
                        c.tag(),
                        tt.launch(&p, &c).grid[0],
                        flops / ms2 / 1e9
                    );
                }
            }
            let tflops = flops / ms / 1e9;
            let mut agree = String::new();
            if blas.is_some() {
                let ours = download(&dc, &stream, out, ec as usize);
                let theirs = download(&dref, &stream, out, ec as usize);
                let e = rel_error(&ours, &theirs);
                agree = format!(" (vs cuBLAS rel {e:.1e})");
                if e.is_nan() || e >= dt.rel_tolerance() {
                    agree.push_str(" MISMATCH");
                }
            }
            let ratio = cublas.map_or(String::new(), |cb| {
                format!(" = {:.1}% of cuBLAS", 100.0 * tflops / cb)
            });
            eprintln!("{label}: {} {tflops:.0} TF/s{ratio}{agree}", c.tag());
            if !agree.contains("MISMATCH") && best.as_ref().is_none_or(|(b, _)| tflops > *b) {
                best = Some((tflops, c.tag()));
            }
        }
        if let Some((tf, tag)) = best {
            let ratio = cublas.map_or(String::new(), |cb| {
                format!(" vs cuBLAS {cb:.0} TF/s = {:.1}%", 100.0 * tf / cb)
            });
            summary.push(format!("BEST {label}: {tag} {tf:.0} TF/s{ratio}"));
        }
    }
    for line in &summary {
        eprintln!("{line}");
    }
    assert!(
        !summary.is_empty() || !filter.is_empty(),
        "no shape produced a timing"
    );
}
