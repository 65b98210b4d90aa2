//! GPU integration test of the SIMT and mma.sync GEMM templates: every case runs the generated
//! kernel on fresh random inputs (output poisoned with 0xFF first), compares against the f64
//! reference (inputs rounded to the dtype) with `rel_error < dtype.rel_tolerance()`, and checks
//! that no NaN (unwritten element) remains. Prints one PASS/FAIL line per case.
//!
//! Skips (printing why) without NVRTC or without a CUDA device; set `RTX_REQUIRE_GPU=1` to make a
//! missing device a failure.

use half::{bf16, f16};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rtx_runtime::{Device, DeviceBuffer, RuntimeError, Stream};
use rtx_synthesis::aot::{self, nvrtc_or_skip};
use rtx_synthesis::templates::gemm::reference::{gemm_f64, rel_error, GemmRefInputs};
use rtx_synthesis::templates::gemm::{
    alloc_split_k_workspace, launch_gemm, Activation, ExtraArg, GemmBuffers, GemmProblem, Layout,
    MmaConfig, MmaGemm, SimtConfig, SimtGemm,
};
use rtx_synthesis::templates::{KernelSource, LaunchDims, Template};
use rtx_synthesis::{Arch, DType};

/// The relative-error bound of `p`: the dtype's ([`DType::rel_tolerance`]); for f32, at least
/// `2 * 2^-24 * sqrt(K)`. fp32 accumulation error of a K-long dot product of random-sign terms
/// grows like `eps * sqrt(K)` (measured ~0.3 eps sqrt(K) on the H200, e.g. 1.1e-6 at K=4096), so
/// the fixed 1e-5 holds up to K ~ 7000 and the scaled bound keeps ~7x headroom beyond.
fn tolerance(p: &GemmProblem) -> f64 {
    let base = p.dtype.rel_tolerance();
    if p.dtype == DType::F32 {
        // f32::EPSILON = 2^-23 = 2 * 2^-24.
        base.max(f32::EPSILON as f64 * (p.k as f64).sqrt())
    } else {
        base
    }
}

#[derive(Debug, Clone, Copy)]
enum Kernel {
    Simt(Option<SimtConfig>),
    Mma(Option<MmaConfig>),
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    p: GemmProblem,
    kernel: Kernel,
}

/// A problem whose leading dimensions are the natural ones rounded up to `align` elements, plus
/// `align` more when `pad` (so rows are not packed); batch strides follow the padded layout.
#[allow(clippy::too_many_arguments)]
fn prob(
    m: u32,
    n: u32,
    k: u32,
    d: DType,
    la: Layout,
    lb: Layout,
    align: u32,
    pad: bool,
    batch: u32,
) -> GemmProblem {
    let mut p = GemmProblem::new(m, n, k, d, la, lb);
    let up = |x: u32| x.div_ceil(align) * align + if pad { align } else { 0 };
    p.lda = up(p.lda);
    p.ldb = up(p.ldb);
    p.ldc = if pad { p.ldc + 3 } else { p.ldc };
    let rows_a = if la == Layout::Row { m } else { k };
    let rows_b = if lb == Layout::Row { k } else { n };
    p.stride_a = p.lda as u64 * rows_a as u64;
    p.stride_b = p.ldb as u64 * rows_b as u64;
    p.stride_c = p.ldc as u64 * m as u64;
    p.batch = batch;
    p
}

fn with_epilogue(
    mut p: GemmProblem,
    alpha: f32,
    beta: f32,
    bias: bool,
    act: Activation,
    residual: bool,
    out: DType,
) -> GemmProblem {
    p.epilogue.alpha = alpha;
    p.epilogue.beta = beta;
    p.epilogue.bias = bias;
    p.epilogue.activation = act;
    p.epilogue.residual = residual;
    p.epilogue.out_dtype = out;
    p
}

fn lname(l: Layout) -> char {
    if l == Layout::Row {
        'n'
    } else {
        't'
    }
}

fn cases(arch: Arch) -> Vec<Case> {
    use Layout::{Col, Row};
    let layouts = [(Row, Row), (Row, Col), (Col, Row), (Col, Col)];
    let mut v = Vec::new();
    let mut add = |name: String, p: GemmProblem, kernel: Kernel| v.push(Case { name, p, kernel });
    // ---------------- SIMT (f32) ----------------
    add(
        "simt nn 256^3 default".into(),
        prob(256, 256, 256, DType::F32, Row, Row, 1, false, 1),
        Kernel::Simt(None),
    );
    for (la, lb) in layouts {
        let p = prob(129, 257, 67, DType::F32, la, lb, 1, false, 1);
        add(
            format!("simt {}{} 129x257x67 default (vec 1)", lname(la), lname(lb)),
            p,
            Kernel::Simt(None),
        );
    }
    let base = SimtConfig {
        bm: 128,
        bn: 128,
        bk: 8,
        tm: 8,
        tn: 8,
        stages: 2,
        vec: 4,
        group_m: 8,
        min_blocks: 2,
    };
    let async_ok = arch.has_cp_async();
    for (la, lb) in layouts {
        let p = prob(129, 257, 67, DType::F32, la, lb, 4, true, 1);
        add(
            format!("simt {}{} 129x257x67 padded vec4 s2", lname(la), lname(lb)),
            p,
            Kernel::Simt(Some(base)),
        );
        if async_ok {
            let c = SimtConfig {
                bk: 16,
                stages: 3,
                min_blocks: 1,
                ..base
            };
            add(
                format!(
                    "simt {}{} 129x257x67 padded vec4 cp.async s3",
                    lname(la),
                    lname(lb)
                ),
                p,
                Kernel::Simt(Some(c)),
            );
        }
    }
    if async_ok {
        let c = SimtConfig {
            bm: 64,
            bn: 64,
            bk: 16,
            tm: 4,
            tn: 4,
            stages: 4,
            vec: 2,
            group_m: 1,
            min_blocks: 2,
        };
        let p = prob(200, 130, 333, DType::F32, Col, Col, 2, false, 1);
        add(
            "simt tt 200x130x333 64x64 cp.async s4 vec2".into(),
            p,
            Kernel::Simt(Some(c)),
        );
    }
    // The large-output default (128x256x8, 8x16 thread tiles) in every layout: aligned and odd.
    for (la, lb) in layouts {
        let p = prob(2048, 2048, 516, DType::F32, la, lb, 4, false, 1);
        add(
            format!(
                "simt {}{} 2048x2048x516 default 128x256 8x16",
                lname(la),
                lname(lb)
            ),
            p,
            Kernel::Simt(None),
        );
        let p = prob(2050, 2049, 515, DType::F32, la, lb, 1, false, 1);
        add(
            format!(
                "simt {}{} 2050x2049x515 default 128x256 8x16 (vec 1)",
                lname(la),
                lname(lb)
            ),
            p,
            Kernel::Simt(None),
        );
    }
    if async_ok {
        // cp.async ring with the K-contiguous operand transposed by 4-byte copies, wide tile.
        let c = SimtConfig {
            bm: 128,
            bn: 256,
            bk: 16,
            tm: 8,
            tn: 16,
            stages: 3,
            vec: 4,
            group_m: 8,
            min_blocks: 1,
        };
        for (la, lb) in layouts {
            let p = prob(300, 520, 77, DType::F32, la, lb, 4, false, 2);
            add(
                format!(
                    "simt {}{} batch2 300x520x77 128x256 8x16 cp.async s3",
                    lname(la),
                    lname(lb)
                ),
                p,
                Kernel::Simt(Some(c)),
            );
        }
    }
    // Long K: the fp32 bound scales with sqrt(K) (see `tolerance`).
    add(
        "simt nt 64x64x65536 default".into(),
        prob(64, 64, 65536, DType::F32, Row, Col, 4, false, 1),
        Kernel::Simt(None),
    );
    add(
        "simt nn 1x1x1".into(),
        prob(1, 1, 1, DType::F32, Row, Row, 1, false, 1),
        Kernel::Simt(None),
    );
    let p = with_epilogue(
        prob(100, 72, 50, DType::F32, Row, Col, 4, false, 3),
        1.5,
        0.5,
        true,
        Activation::GeluTanh,
        true,
        DType::F32,
    );
    add(
        "simt nt batch3 100x72x50 bias+gelu_tanh+residual beta=0.5".into(),
        p,
        Kernel::Simt(None),
    );
    let c = SimtConfig {
        bm: 128,
        bn: 256,
        bk: 8,
        tm: 16,
        tn: 8,
        stages: 2,
        vec: 4,
        group_m: 8,
        min_blocks: 1,
    };
    add(
        "simt nn 512^3 128x256 tm16".into(),
        prob(512, 512, 512, DType::F32, Row, Row, 4, false, 1),
        Kernel::Simt(Some(c)),
    );
    for (act, (la, lb)) in [Activation::Relu, Activation::Silu, Activation::GeluErf]
        .into_iter()
        .zip([(Col, Row), (Row, Row), (Col, Col)])
    {
        let p = with_epilogue(
            prob(300, 200, 100, DType::F32, la, lb, 4, false, 1),
            -1.0,
            0.0,
            true,
            act,
            false,
            DType::F32,
        );
        add(
            format!("simt {}{} 300x200x100 bias+{act:?}", lname(la), lname(lb)),
            p,
            Kernel::Simt(None),
        );
    }

    // ---------------- mma.sync (f16 / bf16 / tf32) ----------------
    for d in [DType::F16, DType::Bf16, DType::Tf32] {
        let chunk = 16 / d.size_bytes() as u32;
        for (la, lb) in layouts {
            let p = prob(129, 257, 67, d, la, lb, chunk, false, 1);
            add(
                format!("mma {d} {}{} 129x257x67 default", lname(la), lname(lb)),
                p,
                Kernel::Mma(None),
            );
        }
        add(
            format!("mma {d} nn 1x1x1"),
            prob(1, 1, 1, d, Row, Row, chunk, false, 1),
            Kernel::Mma(None),
        );
    }
    add(
        "mma f16 nn 256^3 default".into(),
        prob(256, 256, 256, DType::F16, Row, Row, 8, false, 1),
        Kernel::Mma(None),
    );
    add(
        "mma bf16 nt 512^3 default".into(),
        prob(512, 512, 512, DType::Bf16, Row, Col, 8, false, 1),
        Kernel::Mma(None),
    );
    let p = with_epilogue(
        prob(100, 70, 50, DType::Bf16, Col, Row, 8, true, 3),
        1.0,
        -0.75,
        true,
        Activation::GeluErf,
        true,
        DType::F32,
    );
    add(
        "mma bf16 tn batch3 100x70x50 bias+gelu_erf+residual beta=-0.75 out f32".into(),
        p,
        Kernel::Mma(None),
    );
    let mb = MmaConfig {
        bm: 128,
        bn: 128,
        bk: 32,
        warps_m: 2,
        warps_n: 2,
        stages: 4,
        split_k: 1,
        swizzle: true,
        group_m: 8,
    };
    let p = with_epilogue(
        prob(64, 96, 1000, DType::F16, Row, Col, 8, false, 1),
        0.5,
        1.0,
        true,
        Activation::GeluTanh,
        true,
        DType::F16,
    );
    add(
        "mma f16 nt 64x96x1000 split-k 4 bias+gelu_tanh+residual beta=1".into(),
        p,
        Kernel::Mma(Some(MmaConfig { split_k: 4, ..mb })),
    );
    let p = prob(130, 70, 2000, DType::Tf32, Row, Row, 4, true, 2);
    add(
        "mma tf32 nn batch2 130x70x2000 split-k 3".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            bk: 16,
            split_k: 3,
            ..mb
        })),
    );
    let p = prob(1, 1, 64, DType::Bf16, Col, Col, 8, false, 1);
    add(
        "mma bf16 tt 1x1x64 split-k 2".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            split_k: 2,
            stages: 2,
            ..mb
        })),
    );
    let p = prob(333, 190, 250, DType::F16, Col, Row, 8, true, 1);
    add(
        "mma f16 tn 333x190x250 padded smem s3".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            swizzle: false,
            stages: 3,
            ..mb
        })),
    );
    let p = prob(333, 190, 250, DType::Bf16, Row, Row, 8, false, 1);
    add(
        "mma bf16 nn 333x190x250 s2 group1".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            stages: 2,
            group_m: 1,
            ..mb
        })),
    );
    let p = prob(300, 300, 300, DType::F16, Col, Col, 8, false, 1);
    let c = MmaConfig {
        bm: 64,
        bn: 64,
        bk: 64,
        stages: 5,
        ..mb
    };
    add(
        "mma f16 tt 300^3 64x64x64 s5".into(),
        p,
        Kernel::Mma(Some(c)),
    );
    let p = prob(520, 260, 256, DType::Bf16, Row, Col, 8, false, 1);
    let c = MmaConfig {
        bm: 256,
        bn: 128,
        warps_m: 4,
        warps_n: 2,
        stages: 3,
        ..mb
    };
    add(
        "mma bf16 nt 520x260x256 256x128 8 warps".into(),
        p,
        Kernel::Mma(Some(c)),
    );
    // Exactly 48 KiB of dynamic shared memory (3 swizzled stages of 64x64 bf16 A and B) plus
    // split-K's static bytes: above the driver's default limit (48 KiB minus static), so the
    // launch must opt in (`Function::ensure_dynamic_smem`). Call CT on the H200 saw this config
    // refused when the launch compared with 48 KiB.
    let p = prob(96, 1024, 2048, DType::Bf16, Row, Row, 8, false, 1);
    add(
        "mma bf16 nn 96x1024x2048 64x64x64 s3 split-k 2 (48 KiB dynamic + static)".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            bm: 64,
            bn: 64,
            bk: 64,
            stages: 3,
            split_k: 2,
            ..mb
        })),
    );
    let p = prob(200, 200, 200, DType::Tf32, Col, Row, 4, false, 1);
    add(
        "mma tf32 tn 200^3 bk32 padded".into(),
        p,
        Kernel::Mma(Some(MmaConfig {
            bk: 32,
            stages: 3,
            swizzle: false,
            ..mb
        })),
    );
    let p = with_epilogue(
        prob(150, 140, 130, DType::F16, Row, Row, 8, false, 1),
        1.0,
        0.0,
        false,
        Activation::Silu,
        false,
        DType::Bf16,
    );
    add(
        "mma f16 nn 150x140x130 silu out bf16".into(),
        p,
        Kernel::Mma(None),
    );
    v
}

/// Host copy of one operand: the device bytes and the f64 values the GPU sees.
struct HostData {
    bytes: Vec<u8>,
    values: Vec<f64>,
}

fn random_data(rng: &mut SmallRng, d: DType, len: u64) -> HostData {
    let raw: Vec<f32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    match d {
        DType::F32 | DType::Tf32 => HostData {
            values: raw.iter().map(|&x| x as f64).collect(),
            bytes: bytemuck::cast_slice(&raw).to_vec(),
        },
        DType::F16 => {
            let h: Vec<f16> = raw.iter().map(|&x| f16::from_f32(x)).collect();
            HostData {
                values: h.iter().map(|x| x.to_f64()).collect(),
                bytes: bytemuck::cast_slice(&h).to_vec(),
            }
        }
        DType::Bf16 => {
            let h: Vec<bf16> = raw.iter().map(|&x| bf16::from_f32(x)).collect();
            HostData {
                values: h.iter().map(|x| x.to_f64()).collect(),
                bytes: bytemuck::cast_slice(&h).to_vec(),
            }
        }
    }
}

fn decode(d: DType, bytes: &[u8]) -> Vec<f64> {
    match d {
        DType::F32 | DType::Tf32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
    }
}

fn upload(dev: &Device, stream: &Stream, bytes: &[u8]) -> Result<DeviceBuffer, RuntimeError> {
    let mut b = dev.alloc(bytes.len().max(16), stream)?;
    b.upload(bytes, stream)?;
    Ok(b)
}

struct Built {
    case: Case,
    src: KernelSource,
    dims: LaunchDims,
    mma: Option<MmaConfig>,
    cubin: Result<Vec<u8>, String>,
}

fn build(case: Case, arch: Arch) -> Result<Built, String> {
    let p = &case.p;
    let (src, dims, mma) = match case.kernel {
        Kernel::Simt(c) => {
            let t = SimtGemm;
            let c = c.unwrap_or_else(|| t.default_config(p, arch));
            (
                t.emit(p, &c, arch).map_err(|e| e.to_string())?,
                t.launch(p, &c),
                None,
            )
        }
        Kernel::Mma(c) => {
            let t = MmaGemm::default();
            let c = c.unwrap_or_else(|| t.default_config(p, arch));
            (
                t.emit(p, &c, arch).map_err(|e| e.to_string())?,
                t.launch(p, &c),
                Some(c),
            )
        }
    };
    let cubin = aot::compile(&src, arch)
        .map(|c| c.cubin)
        .map_err(|e| e.to_string());
    Ok(Built {
        case,
        src,
        dims,
        mma,
        cubin,
    })
}

/// Runs one built case; returns the relative error on success.
fn run(b: &Built, dev: &Device, stream: &Stream, seed: u64) -> Result<f64, String> {
    let re = |e: RuntimeError| e.to_string();
    let p = &b.case.p;
    let cubin = b.cubin.as_ref().map_err(|e| format!("compile: {e}"))?;
    let module = dev.load_module(cubin).map_err(re)?;
    let f = module.function(&b.src.entry).map_err(re)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let (ea, eb, ec) = p.buffer_elems();
    let out = p.epilogue.out_dtype;
    let a = random_data(&mut rng, p.dtype, ea);
    let bb = random_data(&mut rng, p.dtype, eb);
    let c0 = random_data(&mut rng, out, ec);
    let bias = random_data(&mut rng, out, p.n as u64);
    let res = random_data(&mut rng, out, ec);
    let da = upload(dev, stream, &a.bytes).map_err(re)?;
    let db = upload(dev, stream, &bb.bytes).map_err(re)?;
    let dbias = upload(dev, stream, &bias.bytes).map_err(re)?;
    let dres = upload(dev, stream, &res.bytes).map_err(re)?;
    let mut dc = dev.alloc(c0.bytes.len(), stream).map_err(re)?;
    dc.fill_u8(0xFF, stream).map_err(re)?;
    if p.epilogue.beta != 0.0 {
        dc.upload(&c0.bytes, stream).map_err(re)?;
    }
    let ws = match b.mma {
        Some(c) => alloc_split_k_workspace(dev, stream, p, &c).map_err(re)?,
        None => None,
    };
    let extra: Vec<ExtraArg> = ws.iter().map(ExtraArg::Buffer).collect();
    let launch = |dc: &mut DeviceBuffer| -> Result<Vec<f64>, String> {
        let mut bufs = GemmBuffers {
            a: &da,
            b: &db,
            c: dc,
            bias: p.epilogue.bias.then_some(&dbias),
            residual: p.epilogue.residual.then_some(&dres),
        };
        launch_gemm(&f, b.dims, p, &mut bufs, &extra, stream).map_err(|e| e.to_string())?;
        stream.synchronize().map_err(re)?;
        Ok(decode(out, &dc.download::<u8>(stream).map_err(re)?))
    };
    let got = launch(&mut dc)?;
    let want = gemm_f64(
        p,
        &GemmRefInputs {
            a: &a.values,
            b: &bb.values,
            c: (p.epilogue.beta != 0.0).then_some(&c0.values[..]),
            bias: Some(&bias.values),
            residual: Some(&res.values),
        },
    );
    // Only the logical elements (padding columns of C are not the kernel's to write).
    let (mut g, mut w) = (Vec::new(), Vec::new());
    for bt in 0..p.batch as u64 {
        for i in 0..p.m as u64 {
            for j in 0..p.n as u64 {
                let idx = (bt * p.stride_c + i * p.ldc as u64 + j) as usize;
                if got[idx].is_nan() {
                    return Err(format!(
                        "NaN (unwritten or invalid) at batch {bt} row {i} col {j}"
                    ));
                }
                g.push(got[idx]);
                w.push(want[idx]);
            }
        }
    }
    let err = rel_error(&g, &w);
    let tol = tolerance(p);
    if err.is_nan() || err >= tol {
        return Err(format!("rel_error {err:.3e} >= {tol:.0e}"));
    }
    if let Some(c) = b.mma.filter(|c| c.split_k > 1) {
        // The counters must have been reset: a second launch on the same workspace (C restored)
        // must reproduce the first result bit for bit (slices are summed in a fixed order).
        if p.epilogue.beta != 0.0 {
            dc.upload(&c0.bytes, stream).map_err(re)?;
        } else {
            dc.fill_u8(0xFF, stream).map_err(re)?;
        }
        let again = launch(&mut dc)?;
        let same = got
            .iter()
            .zip(&again)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
        if !same {
            return Err(format!(
                "split_k={} relaunch differs (counters not reset?)",
                c.split_k
            ));
        }
    }
    Ok(err)
}

#[test]
fn gemm_templates_match_the_reference_on_gpu() {
    if !nvrtc_or_skip("gemm_templates_match_the_reference_on_gpu") {
        return;
    }
    if Device::count() == 0 {
        assert!(
            std::env::var_os("RTX_REQUIRE_GPU").is_none(),
            "RTX_REQUIRE_GPU is set but no CUDA device is usable"
        );
        eprintln!("SKIP gemm_templates_match_the_reference_on_gpu: no CUDA device");
        return;
    }
    let dev = Device::open(0).expect("Device::count() > 0 but Device::open(0) failed");
    let stream = dev.new_stream().expect("new_stream");
    let (maj, min) = dev.info().compute_capability;
    let arch = Arch::for_compute_capability(maj, min).expect("a known GPU architecture");
    eprintln!("device: {} ({arch})", dev.info().name);
    let all = cases(arch);
    let started = std::time::Instant::now();
    let built: Vec<Result<Built, (String, String)>> = all
        .into_par_iter()
        .map(|c| {
            let name = c.name.clone();
            build(c, arch).map_err(|e| (name, e))
        })
        .collect();
    eprintln!(
        "compiled {} kernels in {:.1}s",
        built.len(),
        started.elapsed().as_secs_f64()
    );
    let mut failures = Vec::new();
    for (i, b) in built.iter().enumerate() {
        let b = match b {
            Ok(b) => b,
            Err((name, e)) if e.contains("shared memory") => {
                eprintln!("SKIP {name}: does not fit this GPU ({e})");
                continue;
            }
            Err((name, e)) => {
                eprintln!("FAIL {name}: {e}");
                failures.push(name.clone());
                continue;
            }
        };
        match run(b, &dev, &stream, 0x5eed + i as u64) {
            Ok(err) => eprintln!("PASS {} rel_error={err:.2e} ({})", b.case.name, b.src.entry),
            Err(e) => {
                eprintln!("FAIL {} ({}): {e}", b.case.name, b.src.entry);
                failures.push(b.case.name.clone());
                if e.contains("ILLEGAL") || e.contains("LAUNCH_FAILED") || e.contains("MISALIGNED")
                {
                    eprintln!("context is unusable after a device fault; stopping");
                    break;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} GEMM case(s) failed: {failures:?}",
        failures.len()
    );
}

/// The opt-in case above needs exactly 48 KiB of dynamic shared memory (if the layout changes,
/// pick a config that does, or the case no longer tests the opt-in).
#[test]
fn the_opt_in_case_uses_exactly_48_kib_of_dynamic_smem() {
    let c = cases(Arch::Sm90a)
        .into_iter()
        .find(|c| c.name.contains("48 KiB dynamic"))
        .expect("the case");
    let Kernel::Mma(Some(cfg)) = c.kernel else {
        panic!("an mma case")
    };
    assert_eq!(
        MmaGemm::default().launch(&c.p, &cfg).dynamic_smem,
        48 * 1024
    );
}

#[test]
fn gpu_cases_are_valid_configs() {
    for arch in [Arch::Sm90a, Arch::Sm120, Arch::Sm80] {
        let all = cases(arch);
        assert!(all.len() >= 30, "{} cases", all.len());
        for c in all {
            let r = match c.kernel {
                Kernel::Simt(cfg) => {
                    let t = SimtGemm;
                    t.check(
                        &c.p,
                        &cfg.unwrap_or_else(|| t.default_config(&c.p, arch)),
                        arch,
                    )
                }
                Kernel::Mma(cfg) => {
                    let t = MmaGemm::default();
                    t.check(
                        &c.p,
                        &cfg.unwrap_or_else(|| t.default_config(&c.p, arch)),
                        arch,
                    )
                }
            };
            // Only a shared-memory budget may exclude a case on a smaller part.
            if let Err(e) = r {
                assert!(
                    arch != Arch::Sm90a && e.reason.contains("shared memory"),
                    "{arch} {}: {e}",
                    c.name
                );
            }
        }
    }
}
