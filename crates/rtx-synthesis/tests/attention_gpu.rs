//! GPU correctness of the fused attention kernels (skips without a device or NVRTC).
//!
//! For every shape class (seq 1, 17, 512, 2048; head_dim 64 and 128; causal and not; f16 and
//! bf16) the default config runs on fresh random inputs (Q, K in [-2, 2), V in [-1, 1)); the
//! output is poisoned (0xFF = NaN) first, with guard bytes after it that must stay untouched.
//! Sampled rows (all rows when few, else the first, the last and random ones of every head
//! class) are compared with the f64 reference: `|got - want| <= 2e-2 * max(|want|, rms(row))`.
//! A second pass runs every valid config of the space on one mid-size shape per class, and
//! `seq_q != seq_k` shapes check the causal top-left alignment. One `PASS` / `FAIL` line per case.
//!
//! `RTX_ATTN_BENCH=1` also times every valid config at B4 H16 S2048 (printed, events, no L2
//! flush), to pick defaults.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::{Device, DeviceBuffer, Event, Stream};
mod attention_support;
use attention_support::{decode, encode, row_error};
mod gpu_support;
use gpu_support::gpu_or_skip;
use rtx_synthesis::templates::attention::{
    attention_row_f64, AttentionBuffers, AttentionConfig, AttentionInputs, AttentionKernel,
    AttentionProblem, AttentionTemplate,
};
use rtx_synthesis::templates::elementwise::{DeviceSlice, DeviceSliceMut};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

const GUARD: usize = 256;

fn arch_of(dev: &Device) -> Arch {
    let (ma, mi) = dev.info().compute_capability;
    Arch::for_compute_capability(ma, mi).expect("known arch")
}

/// Host inputs of one problem (stored bytes and their f64 values).
struct Inputs {
    qb: Vec<u8>,
    kb: Vec<u8>,
    vb: Vec<u8>,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
}

fn inputs(p: &AttentionProblem, rng: &mut SmallRng) -> Inputs {
    let nq = p.q_elems().unwrap() as usize;
    let nk = p.kv_elems().unwrap() as usize;
    let mut gen = |n: usize, a: f32| {
        (0..n)
            .map(|_| rng.random_range(-a..a))
            .collect::<Vec<f32>>()
    };
    let (qb, q) = encode(p.dtype, &gen(nq, 2.0));
    let (kb, k) = encode(p.dtype, &gen(nk, 2.0));
    let (vb, v) = encode(p.dtype, &gen(nk, 1.0));
    Inputs {
        qb,
        kb,
        vb,
        q,
        k,
        v,
    }
}

fn upload(dev: &Device, s: &Stream, bytes: &[u8]) -> DeviceBuffer {
    let mut b = dev.alloc(bytes.len(), s).expect("alloc input");
    b.upload(bytes, s).expect("upload");
    b
}

/// Rows to check: every row when there are at most 512, else 256 sampled (first, last, random).
fn sample_rows(p: &AttentionProblem, rng: &mut SmallRng) -> Vec<(u32, u32, u32)> {
    let total = p.batch as u64 * p.heads as u64 * p.seq_q as u64;
    let at = |r: u64| {
        let i = (r % p.seq_q as u64) as u32;
        let bh = r / p.seq_q as u64;
        (
            (bh / p.heads as u64) as u32,
            (bh % p.heads as u64) as u32,
            i,
        )
    };
    if total <= 512 {
        return (0..total).map(at).collect();
    }
    let mut v = vec![at(0), at(total - 1), at(p.seq_q as u64 - 1)];
    while v.len() < 256 {
        v.push(at(rng.random_range(0..total)));
    }
    v
}

/// Runs `kernel` on `p` (fresh inputs) and checks sampled rows; returns the worst error.
fn run_case(
    dev: &Device,
    s: &Stream,
    kernel: &AttentionKernel,
    p: &AttentionProblem,
    rng: &mut SmallRng,
) -> Result<f64, String> {
    let x = inputs(p, rng);
    let (qd, kd, vd) = (
        upload(dev, s, &x.qb),
        upload(dev, s, &x.kb),
        upload(dev, s, &x.vb),
    );
    let o_bytes = x.qb.len();
    let mut od = dev
        .alloc(o_bytes + GUARD, s)
        .map_err(|e| format!("alloc: {e}"))?;
    od.fill_u8(0xFF, s).map_err(|e| format!("poison: {e}"))?;
    let bufs = AttentionBuffers {
        q: DeviceSlice::whole(&qd),
        k: DeviceSlice::whole(&kd),
        v: DeviceSlice::whole(&vd),
        o: DeviceSliceMut::whole(&mut od),
    };
    kernel
        .launch_problem(s, bufs, p)
        .map_err(|e| format!("launch: {e}"))?;
    s.synchronize().map_err(|e| format!("kernel: {e}"))?;
    let all: Vec<u8> = od.download(s).map_err(|e| format!("download: {e}"))?;
    if let Some(i) = all[o_bytes..].iter().position(|&b| b != 0xFF) {
        return Err(format!("guard byte {i} after O was overwritten"));
    }
    let got = decode(p.dtype, &all[..o_bytes]);
    let inp = AttentionInputs {
        q: &x.q,
        k: &x.k,
        v: &x.v,
    };
    let d = p.head_dim as usize;
    let tol = p.dtype.rel_tolerance();
    let mut worst = 0.0f64;
    for (b, h, i) in sample_rows(p, rng) {
        let want = attention_row_f64(p, &inp, b, h, i).map_err(|e| e.to_string())?;
        let r = ((b as usize * p.heads as usize + h as usize) * p.seq_q as usize + i as usize) * d;
        let e = row_error(&got[r..r + d], &want);
        if e > tol {
            return Err(format!(
                "row (b {b}, h {h}, i {i}): error {e:.3e} > {tol:.1e}; got {:?}.. want {:?}..",
                &got[r..r + 4],
                &want[..4]
            ));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(11, |d| d.as_nanos() as u64)
}

/// Shapes `(batch, heads, seq_q, seq_k)` of the shape classes.
const SHAPES: [(u32, u32, u32, u32); 6] = [
    (2, 3, 1, 1),
    (2, 3, 17, 17),
    (2, 4, 512, 512),
    (1, 4, 2048, 2048),
    (1, 2, 100, 300),
    (1, 2, 300, 100),
];

#[test]
fn default_configs_match_the_reference_on_every_shape_class() {
    let Some((dev, s)) = gpu_or_skip("default_configs_match_the_reference_on_every_shape_class")
    else {
        return;
    };
    let arch = arch_of(&dev);
    let seed = seed();
    println!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let t = AttentionTemplate;
    let mut failures = Vec::new();
    for dtype in [DType::F16, DType::Bf16] {
        for d in [64, 128] {
            for causal in [false, true] {
                let base = AttentionProblem::new(1, 1, 1, d, causal, dtype);
                let c = t.default_config(&base, arch);
                let kernel = AttentionKernel::build(&dev, &base, &c)
                    .unwrap_or_else(|e| panic!("build {c:?}: {e}"));
                for (batch, heads, seq_q, seq_k) in SHAPES {
                    let p = AttentionProblem {
                        batch,
                        heads,
                        seq_q,
                        seq_k,
                        ..base
                    };
                    let name = format!(
                        "{} B{batch} H{heads} Sq{seq_q} Sk{seq_k}",
                        kernel.kernel().source().entry
                    );
                    match run_case(&dev, &s, &kernel, &p, &mut rng) {
                        Ok(w) => println!("PASS {name}: worst {w:.3e}"),
                        Err(e) => {
                            println!("FAIL {name}: {e}");
                            failures.push(format!("{name}: {e}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_valid_config_matches_the_reference() {
    let Some((dev, s)) = gpu_or_skip("every_valid_config_matches_the_reference") else {
        return;
    };
    let arch = arch_of(&dev);
    let seed = seed() ^ 0x5eed;
    println!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let t = AttentionTemplate;
    let mut failures = Vec::new();
    for dtype in [DType::F16, DType::Bf16] {
        for d in [64, 128] {
            for causal in [false, true] {
                let p = AttentionProblem {
                    seq_k: 333,
                    ..AttentionProblem::new(2, 2, 300, d, causal, dtype)
                };
                for c in t.valid_space(&p, arch) {
                    let kernel = match AttentionKernel::build(&dev, &p, &c) {
                        Ok(k) => k,
                        Err(e) => {
                            failures.push(format!("build {c:?}: {e}"));
                            continue;
                        }
                    };
                    let name = kernel.kernel().source().entry.clone();
                    match run_case(&dev, &s, &kernel, &p, &mut rng) {
                        Ok(w) => println!("PASS {name}: worst {w:.3e}"),
                        Err(e) => {
                            println!("FAIL {name}: {e}");
                            failures.push(format!("{name}: {e}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn launch_refuses_mismatched_problems_and_small_buffers() {
    let Some((dev, s)) = gpu_or_skip("launch_refuses_mismatched_problems_and_small_buffers") else {
        return;
    };
    let p = AttentionProblem::new(1, 2, 64, 64, false, DType::Bf16);
    let c = AttentionTemplate.default_config(&p, arch_of(&dev));
    let kernel = AttentionKernel::build(&dev, &p, &c).expect("build");
    let n = p.q_elems().unwrap() as usize * 2;
    let q = dev.alloc(n, &s).unwrap();
    let small = dev.alloc(n / 2, &s).unwrap();
    let mut o = dev.alloc(n, &s).unwrap();
    let e = kernel.launch(&s, bufs(&q, &small, &mut o)).unwrap_err();
    assert!(e.to_string().contains('k'), "{e}");
    let causal = AttentionProblem { causal: true, ..p };
    let e = kernel
        .launch_problem(&s, bufs(&q, &q, &mut o), &causal)
        .unwrap_err();
    assert!(e.to_string().contains("built for"), "{e}");
    let bad = AttentionBuffers {
        q: DeviceSlice::at(&q, 2),
        ..bufs(&q, &q, &mut o)
    };
    assert!(kernel.launch(&s, bad).is_err());
}

fn bufs<'a>(
    q: &'a DeviceBuffer,
    k: &'a DeviceBuffer,
    o: &'a mut DeviceBuffer,
) -> AttentionBuffers<'a> {
    AttentionBuffers {
        q: DeviceSlice::whole(q),
        k: DeviceSlice::whole(k),
        v: DeviceSlice::whole(q),
        o: DeviceSliceMut::whole(o),
    }
}

#[test]
fn sweep_timings_when_asked() {
    if std::env::var_os("RTX_ATTN_BENCH").is_none() {
        return;
    }
    let Some((dev, s)) = gpu_or_skip("sweep_timings_when_asked") else {
        return;
    };
    let arch = arch_of(&dev);
    let t = AttentionTemplate;
    let mut rng = SmallRng::seed_from_u64(seed());
    for dtype in [DType::Bf16] {
        for d in [64, 128] {
            for causal in [false, true] {
                let p = AttentionProblem::new(4, 16, 2048, d, causal, dtype);
                let x = inputs(&p, &mut rng);
                let (qd, kd, vd) = (
                    upload(&dev, &s, &x.qb),
                    upload(&dev, &s, &x.kb),
                    upload(&dev, &s, &x.vb),
                );
                let mut od = dev.alloc(x.qb.len(), &s).unwrap();
                let default = t.default_config(&p, arch);
                let mut rows: Vec<(f64, AttentionConfig)> = Vec::new();
                for c in t.valid_space(&p, arch) {
                    let Ok(kernel) = AttentionKernel::build(&dev, &p, &c) else {
                        continue;
                    };
                    let run = |od: &mut DeviceBuffer| {
                        let b = AttentionBuffers {
                            q: DeviceSlice::whole(&qd),
                            k: DeviceSlice::whole(&kd),
                            v: DeviceSlice::whole(&vd),
                            o: DeviceSliceMut::whole(od),
                        };
                        kernel.launch(&s, b).expect("launch");
                    };
                    for _ in 0..3 {
                        run(&mut od);
                    }
                    let (e0, e1) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
                    let reps = 20;
                    e0.record(&s).unwrap();
                    for _ in 0..reps {
                        run(&mut od);
                    }
                    e1.record(&s).unwrap();
                    e1.synchronize().unwrap();
                    let us = e0.elapsed_ms(&e1).unwrap() as f64 * 1e3 / reps as f64;
                    rows.push((us, c));
                }
                rows.sort_by(|a, b| a.0.total_cmp(&b.0));
                for (us, c) in &rows {
                    println!(
                        "BENCH {dtype} d{d} causal={causal} {:8.1} us {:6.1} TFLOP/s {c:?}{}",
                        us,
                        p.flops() / (us * 1e6),
                        if *c == default { "  <- default" } else { "" }
                    );
                }
            }
        }
    }
}

/// Q, K and V read in place from a packed `[batch * seq, 3 * heads * head_dim]` projection and O
/// written into `[batch * seq, heads * head_dim]` (a transformer layer's layout) through
/// `launch_strided` match the reference on every sampled row; a misaligned row stride is refused.
#[test]
fn packed_qkv_layout_matches_the_reference() {
    use rtx_synthesis::templates::attention::AttentionLayout;
    let test = "packed_qkv_layout_matches_the_reference";
    let Some((dev, s)) = gpu_or_skip(test) else {
        return;
    };
    let arch = arch_of(&dev);
    let seed = seed();
    println!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let t = AttentionTemplate;
    for (dtype, d, causal, (batch, heads, seq)) in [
        (DType::Bf16, 64, false, (3, 12, 200)),
        (DType::F16, 128, true, (2, 4, 77)),
        (DType::Bf16, 128, false, (2, 2, 512)),
    ] {
        let p = AttentionProblem::new(batch, heads, seq, d, causal, dtype);
        let c = t.default_config(&p, arch);
        let kernel =
            AttentionKernel::build(&dev, &p, &c).unwrap_or_else(|e| panic!("build {c:?}: {e}"));
        let x = inputs(&p, &mut rng);
        let (b_, h_, s_, d_) = (batch as usize, heads as usize, seq as usize, d as usize);
        let width = 3 * h_ * d_;
        let mut packed = vec![0u8; b_ * s_ * width * 2];
        for (ti, src) in [&x.qb, &x.kb, &x.vb].into_iter().enumerate() {
            for b in 0..b_ {
                for h in 0..h_ {
                    for i in 0..s_ {
                        let from = (((b * h_ + h) * s_ + i) * d_) * 2;
                        let to = ((b * s_ + i) * width + ti * h_ * d_ + h * d_) * 2;
                        packed[to..to + d_ * 2].copy_from_slice(&src[from..from + d_ * 2]);
                    }
                }
            }
        }
        let qkv = upload(&dev, &s, &packed);
        let o_bytes = b_ * s_ * h_ * d_ * 2;
        let mut od = dev.alloc(o_bytes + GUARD, &s).expect("alloc");
        od.fill_u8(0xFF, &s).expect("poison");
        let layout = AttentionLayout::packed_qkv(&p);
        kernel
            .launch_strided(
                &s,
                AttentionBuffers::packed_qkv(&p, &qkv, &mut od),
                &p,
                &layout,
            )
            .unwrap_or_else(|e| panic!("{p:?}: launch: {e}"));
        s.synchronize().expect("kernel");
        let all: Vec<u8> = od.download(&s).expect("download");
        assert!(
            all[o_bytes..].iter().all(|&b| b == 0xFF),
            "{p:?}: guard bytes after O overwritten"
        );
        let got = decode(dtype, &all[..o_bytes]);
        let inp = AttentionInputs {
            q: &x.q,
            k: &x.k,
            v: &x.v,
        };
        let mut worst = 0.0f64;
        for (b, h, i) in sample_rows(&p, &mut rng) {
            let want = attention_row_f64(&p, &inp, b, h, i).expect("reference");
            let r = (b as usize * s_ + i as usize) * h_ * d_ + h as usize * d_;
            let e = row_error(&got[r..r + d_], &want);
            assert!(
                e <= dtype.rel_tolerance(),
                "{p:?} row (b {b}, h {h}, i {i}): error {e:.3e}"
            );
            worst = worst.max(e);
        }
        println!("PASS packed {dtype} d{d} causal {causal} B{batch} H{heads} S{seq}: worst row error {worst:.2e}");
        let mut bad = layout;
        bad.q.row += 1;
        let e = kernel
            .launch_strided(
                &s,
                AttentionBuffers::packed_qkv(&p, &qkv, &mut od),
                &p,
                &bad,
            )
            .unwrap_err();
        assert!(e.to_string().contains("row stride"), "{e}");
    }
}
