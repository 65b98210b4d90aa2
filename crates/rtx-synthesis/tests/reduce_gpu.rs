//! GPU correctness of the softmax / LayerNorm / RMSNorm kernels (skips without a device or
//! NVRTC).
//!
//! For every op (with and without affine parameters and the fused residual), dtype and several
//! thread mappings (sub-warp, warp, multi-warp and 1024-thread rows; register-cached and
//! looped), one kernel is built and run over every row length it accepts among
//! 1, 3, 63, 64, 1000, 3072, 4097 and 65536 (row length is a run-time argument). Inputs are
//! fresh random values; rows 0..4 carry NaN, +Inf, -Inf and (softmax) an all -Inf row. Outputs
//! are poisoned (0xFF) inside guard bytes, every element is compared with the f64 reference and
//! the guards must be untouched. Offsetting every base pointer by one element forces the scalar
//! path. One `PASS` / `FAIL` line per case.
//!
//! `emulated_on_the_host_cpu` runs every kernel of the list through the host emulator
//! (`host_emulation`: g++ and CPU fibers with lockstep shuffles / barriers) on short batches
//! of rows, so indexing, masking, the reductions and NaN/Inf handling are checked without a GPU
//! (a representative subset by default; `RTX_EMU_FULL=1` runs every kernel).
//!
//! `RTX_MEM_BENCH=1` also times softmax / LayerNorm / RMSNorm on 16384 x 3072 bf16 (printed).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rtx_runtime::{Device, DeviceBuffer, Event, Stream};
use rtx_synthesis::templates::elementwise::host_emulation::{host_compiler, run_units};
use rtx_synthesis::templates::elementwise::reference::compare;
use rtx_synthesis::templates::elementwise::{DeviceSlice, DeviceSliceMut};
use rtx_synthesis::templates::reduce::reference::{row_reduce_f64, RowInputs};
use rtx_synthesis::templates::reduce::{
    RowBuffers, RowConfig, RowOp, RowProblem, RowReduceKernel, RowReduceTemplate, RowStrategy,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};
mod gpu_support;
use gpu_support::{
    encode, gpu_or_skip, poisoned, report_case, unguard, upload_at, HostTensor, GUARD,
};

const COLS: [u32; 8] = [1, 3, 63, 64, 1000, 3072, 4097, 65536];

/// The ops under test.
fn problems(dtype: DType) -> Vec<RowProblem> {
    vec![
        RowProblem::softmax(1, 1, dtype),
        RowProblem::layernorm(1, 1, dtype, true, true, 1e-5),
        RowProblem::layernorm(1, 1, dtype, false, false, 1e-5),
        RowProblem::rmsnorm(1, 1, dtype, true, 1e-6),
        RowProblem::layernorm(1, 1, dtype, true, true, 1e-5).with_residual(),
        RowProblem::rmsnorm(1, 1, dtype, true, 1e-6).with_residual(),
    ]
}

/// Thread mappings under test for one problem; each is paired with the longest row it takes.
fn configs(p: &RowProblem) -> Vec<RowConfig> {
    let v = (16 / p.dtype.size_bytes()) as u32;
    let regs = |tpr: u32, rpb: u32, cols: u32| RowConfig {
        vec: v,
        threads_per_row: tpr,
        rows_per_block: rpb,
        strategy: RowStrategy::Registers {
            chunks: cols.div_ceil(tpr * v),
        },
    };
    let mut c = vec![
        // Sub-warp rows (4 threads), several rows per warp.
        regs(4, 64, 64),
        // Warp per row.
        regs(32, 4, 1000),
        // The default for 3072 (multi-warp row).
        RowReduceTemplate.default_config(
            &RowProblem {
                cols: 3072,
                rows: 1024,
                ..*p
            },
            Arch::Sm90a,
        ),
        // Three warps per row, two rows per block.
        regs(96, 2, 4097),
        // 1024 threads per row.
        regs(1024, 1, 4097),
        // Looped: warp per row, and 512 threads per row.
        RowConfig {
            vec: v,
            threads_per_row: 32,
            rows_per_block: 8,
            strategy: RowStrategy::Looped { unroll: 2 },
        },
        RowConfig {
            vec: v,
            threads_per_row: 512,
            rows_per_block: 1,
            strategy: RowStrategy::Looped { unroll: 2 },
        },
        // Scalar-only vector width.
        RowConfig {
            vec: 1,
            threads_per_row: 128,
            rows_per_block: 2,
            strategy: RowStrategy::Looped { unroll: 4 },
        },
    ];
    c.dedup();
    c
}

fn rows_for(cols: u32) -> u32 {
    ((1u32 << 21) / cols).clamp(5, 257)
}

/// Input values: row r is offset by (r % 3) * 4 so LayerNorm sees shifted means; rows 0..4 get
/// NaN / +Inf / -Inf / an all -Inf row (softmax).
fn gen_x(rng: &mut SmallRng, p: &RowProblem) -> Vec<f32> {
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let mut x: Vec<f32> = (0..rows * cols)
        .map(|i| rng.random_range(-3.0f32..3.0) + ((i / cols) % 3) as f32 * 4.0)
        .collect();
    if rows >= 5 {
        let at = |r: usize, rng: &mut SmallRng| r * cols + rng.random_range(0..cols);
        let i = at(0, rng);
        x[i] = f32::NAN;
        let i = at(1, rng);
        x[i] = f32::INFINITY;
        let i = at(2, rng);
        x[i] = f32::NEG_INFINITY;
        if p.op == RowOp::Softmax {
            x[3 * cols..4 * cols]
                .iter_mut()
                .for_each(|v| *v = f32::NEG_INFINITY);
        }
    }
    x
}

/// Inputs and reference outputs of one (kernel, shape, offset).
struct Prepared {
    p: RowProblem,
    off: usize,
    x: HostTensor,
    r: Option<HostTensor>,
    w: Option<HostTensor>,
    b: Option<HostTensor>,
    want_y: Vec<f64>,
    want_h: Option<Vec<f64>>,
}

fn prepare(
    base: &RowProblem,
    rows: u32,
    cols: u32,
    off_elems: usize,
    rng: &mut SmallRng,
) -> Result<Prepared, String> {
    let p = RowProblem {
        rows,
        cols,
        ..*base
    };
    let d = p.dtype;
    let n = rows as usize * cols as usize;
    let x = encode(d, &gen_x(rng, &p));
    let r = p.residual.then(|| {
        encode(
            d,
            &(0..n)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect::<Vec<_>>(),
        )
    });
    let w = p.op.has_weight().then(|| {
        encode(
            d,
            &(0..cols)
                .map(|_| rng.random_range(0.5f32..1.5))
                .collect::<Vec<_>>(),
        )
    });
    let b = p.op.has_bias().then(|| {
        encode(
            d,
            &(0..cols)
                .map(|_| rng.random_range(-0.5f32..0.5))
                .collect::<Vec<_>>(),
        )
    });
    let want = row_reduce_f64(
        &p,
        &RowInputs {
            x: &x.vals,
            residual: r.as_ref().map(|t| &t.vals[..]),
            weight: w.as_ref().map(|t| &t.vals[..]),
            bias: b.as_ref().map(|t| &t.vals[..]),
        },
    )
    .map_err(|e| format!("reference: {e}"))?;
    Ok(Prepared {
        p,
        off: off_elems * d.size_bytes(),
        x,
        r,
        w,
        b,
        want_y: want.y,
        want_h: want.residual_out,
    })
}

/// Checks y (and residual_out) given their raw bytes with guards.
fn check(pr: &Prepared, y: &[u8], h: Option<&[u8]>) -> Result<f64, String> {
    let p = &pr.p;
    let d = p.dtype;
    let (n, cols) = (p.rows as usize * p.cols as usize, p.cols as usize);
    let tol = d.rel_tolerance();
    // Softmax outputs are probabilities (relative error down to f16's smallest normal); norm
    // outputs are O(1) (error relative to max(|want|, 1)).
    let floor: f64 = match (p.op, d) {
        (RowOp::Softmax, DType::F16) => 6.1e-5,
        (RowOp::Softmax, _) => 1e-30,
        _ => 1.0,
    };
    let got = unguard(y, d, pr.off, n).map_err(|e| format!("y: {e}"))?;
    // LayerNorm's (x - mean) cancels: f32 rounding of x and mean, scaled by rstd, bounds its
    // error, so each row's floor grows with max|x| * rstd (large for nearly constant rows).
    let src: &[f64] = pr.want_h.as_deref().unwrap_or(&pr.x.vals);
    let wmax =
        pr.w.as_ref()
            .map_or(1.0, |w| w.vals.iter().fold(0.0f64, |a, v| a.max(v.abs())));
    let mut worst = 0.0f64;
    for r in 0..p.rows as usize {
        let row = r * cols..(r + 1) * cols;
        let row_floor = if let RowOp::LayerNorm { .. } = p.op {
            let xs = &src[row.clone()];
            let mean = xs.iter().sum::<f64>() / cols as f64;
            let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
            let amax = xs.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            floor.max(amax / (var + p.eps as f64).sqrt() * wmax)
        } else {
            floor
        };
        let e = compare(&got[row.clone()], &pr.want_y[row], d, tol, row_floor)
            .map_err(|m| format!("y ({r}, {}): {m} (row floor {row_floor:.3e})", m.index))?;
        worst = worst.max(e);
    }
    if let Some(want_h) = &pr.want_h {
        let h = h.ok_or("residual_out missing")?;
        let got = unguard(h, d, pr.off, n).map_err(|e| format!("residual_out: {e}"))?;
        compare(&got, want_h, d, tol, 1e-3)
            .map_err(|m| format!("residual_out ({}, {}): {m}", m.index / cols, m.index % cols))?;
    }
    Ok(worst)
}

fn run_one(
    dev: &Device,
    s: &Stream,
    k: &RowReduceKernel,
    rows: u32,
    cols: u32,
    off_elems: usize,
    rng: &mut SmallRng,
) -> Result<f64, String> {
    let pr = prepare(k.problem(), rows, cols, off_elems, rng)?;
    let (d, off, n) = (pr.p.dtype, pr.off, rows as usize * cols as usize);
    let xb = upload_at(dev, s, &pr.x, off);
    let rb = pr.r.as_ref().map(|t| upload_at(dev, s, t, off));
    let wb = pr.w.as_ref().map(|t| upload_at(dev, s, t, off));
    let bb = pr.b.as_ref().map(|t| upload_at(dev, s, t, off));
    let mut yb = poisoned(dev, s, n * d.size_bytes(), off);
    let mut hb =
        pr.p.residual
            .then(|| poisoned(dev, s, n * d.size_bytes(), off));
    let bufs = RowBuffers {
        x: DeviceSlice::at(&xb, off),
        residual: rb.as_ref().map(|b| DeviceSlice::at(b, off)),
        weight: wb.as_ref().map(|b| DeviceSlice::at(b, off)),
        bias: bb.as_ref().map(|b| DeviceSlice::at(b, off)),
        y: DeviceSliceMut::at(&mut yb, off),
        residual_out: hb.as_mut().map(|b| DeviceSliceMut::at(b, off)),
    };
    k.launch_shape(s, bufs, rows, cols)
        .map_err(|e| format!("launch: {e}"))?;
    s.synchronize().map_err(|e| format!("kernel: {e}"))?;
    let y: Vec<u8> = yb.download(s).map_err(|e| format!("download: {e}"))?;
    let h: Option<Vec<u8>> = match &hb {
        Some(b) => Some(b.download(s).map_err(|e| format!("download: {e}"))?),
        None => None,
    };
    check(&pr, &y, h.as_deref())
}

struct Case {
    name: String,
    problem: RowProblem,
    config: RowConfig,
}

fn build_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for d in [DType::F32, DType::F16, DType::Bf16] {
        for p in problems(d) {
            for c in configs(&p) {
                // Build for the longest accepted row among COLS.
                let Some(&cols) = COLS.iter().rev().find(|&&cols| {
                    RowReduceTemplate
                        .check(&RowProblem { cols, rows: 1, ..p }, &c, Arch::Sm90a)
                        .is_ok()
                }) else {
                    continue;
                };
                let problem = RowProblem {
                    cols,
                    rows: rows_for(cols),
                    ..p
                };
                let name = RowReduceTemplate::entry_name(&problem, &c);
                cases.push(Case {
                    name,
                    problem,
                    config: c,
                });
            }
        }
    }
    cases
}

#[test]
fn case_list_is_valid() {
    let cases = build_cases();
    assert!(cases.len() >= 6 * 3 * 6, "{} cases", cases.len());
    for c in &cases {
        RowReduceTemplate
            .check(&c.problem, &c.config, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        // Every mapping reaches at least the short rows.
        assert!(
            c.problem.cols >= 63 || c.config.threads_per_row <= 4,
            "{}: only {} cols",
            c.name,
            c.problem.cols
        );
    }
    for strategy in ["_r", "_l"] {
        assert!(cases.iter().any(|c| c.name.contains(strategy)));
    }
}

#[test]
fn row_kernels_match_the_f64_reference() {
    let Some((dev, s)) = gpu_or_skip("row_kernels_match_the_f64_reference") else {
        return;
    };
    let filter = std::env::var("RTX_ROW_CASE").ok();
    let cases: Vec<Case> = build_cases()
        .into_iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .collect();
    let kernels: Vec<Result<RowReduceKernel, String>> = cases
        .par_iter()
        .map(|c| {
            RowReduceKernel::build(&dev, &c.problem, &c.config).map_err(|e| format!("build: {e}"))
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(1234);
    let mut failures = 0;
    for (c, k) in cases.iter().zip(&kernels) {
        let k = match k {
            Ok(k) => k,
            Err(e) => {
                println!("FAIL {}: {e}", c.name);
                failures += 1;
                continue;
            }
        };
        for &cols in COLS.iter().filter(|&&cols| cols <= c.problem.cols) {
            let rows = rows_for(cols);
            let offsets: &[usize] = if cols == 3072 || cols == 1000 {
                &[0, 1]
            } else {
                &[0]
            };
            for &off in offsets {
                let name = format!("{} {rows}x{cols} offset{off}", c.name);
                report_case(
                    &name,
                    run_one(&dev, &s, k, rows, cols, off, &mut rng),
                    &mut failures,
                );
            }
        }
    }
    assert_eq!(
        failures, 0,
        "{failures} row case(s) failed (see FAIL lines)"
    );
}

#[test]
fn launch_refuses_rows_beyond_register_capacity() {
    let Some((dev, s)) = gpu_or_skip("launch_refuses_rows_beyond_register_capacity") else {
        return;
    };
    let p = RowProblem::softmax(4, 256, DType::F32);
    let c = RowConfig {
        vec: 4,
        threads_per_row: 32,
        rows_per_block: 4,
        strategy: RowStrategy::Registers { chunks: 2 },
    };
    let k = RowReduceKernel::build(&dev, &p, &c).expect("build");
    let x = dev.alloc(4 * 512 * 4, &s).unwrap();
    let mut y = dev.alloc(4 * 512 * 4, &s).unwrap();
    let bufs = RowBuffers {
        x: DeviceSlice::whole(&x),
        residual: None,
        weight: None,
        bias: None,
        y: DeviceSliceMut::whole(&mut y),
        residual_out: None,
    };
    let err = k.launch_shape(&s, bufs, 4, 512).unwrap_err();
    assert!(err.to_string().contains("capacity"), "{err}");
    println!("PASS launch_refuses_rows_beyond_register_capacity");
}

#[test]
fn bench_rows_bandwidth() {
    if std::env::var_os("RTX_MEM_BENCH").is_none() {
        return;
    }
    let Some((dev, s)) = gpu_or_skip("bench_rows_bandwidth") else {
        return;
    };
    let (rows, cols) = (16384u32, 3072u32);
    let d = DType::Bf16;
    for base in [
        RowProblem::softmax(rows, cols, d),
        RowProblem::layernorm(rows, cols, d, true, true, 1e-5),
        RowProblem::rmsnorm(rows, cols, d, true, 1e-6),
        RowProblem::layernorm(rows, cols, d, true, true, 1e-5).with_residual(),
    ] {
        let mut rng = SmallRng::seed_from_u64(3);
        let n = rows as usize * cols as usize;
        let t = encode(
            d,
            &(0..n)
                .map(|_| rng.random_range(-3.0f32..3.0))
                .collect::<Vec<_>>(),
        );
        let v = encode(
            d,
            &(0..cols)
                .map(|_| rng.random_range(0.5f32..1.5))
                .collect::<Vec<_>>(),
        );
        let (xb, rb, wb, bb) = (
            upload_at(&dev, &s, &t, 0),
            upload_at(&dev, &s, &t, 0),
            upload_at(&dev, &s, &v, 0),
            upload_at(&dev, &s, &v, 0),
        );
        let mut yb = dev.alloc(n * 2, &s).unwrap();
        let mut hb = dev.alloc(n * 2, &s).unwrap();
        let def = RowReduceTemplate.default_config(&base, Arch::Sm90a);
        let mut cands = vec![def];
        // A spread of mappings: register-cached with 32..1024 threads per row and 1-8 rows per
        // block, and looped variants.
        for tpr in [32u32, 64, 128, 256, 512, 1024] {
            for rpb in [1u32, 2, 4, 8] {
                if tpr * rpb < 128 || tpr * rpb > 1024 {
                    continue;
                }
                let chunks = cols.div_ceil(tpr * 8);
                cands.push(RowConfig {
                    vec: 8,
                    threads_per_row: tpr,
                    rows_per_block: rpb,
                    strategy: RowStrategy::Registers { chunks },
                });
            }
        }
        for (tpr, unroll) in [(256u32, 2u32), (512, 2), (512, 4), (1024, 1)] {
            cands.push(RowConfig {
                vec: 8,
                threads_per_row: tpr,
                rows_per_block: 1,
                strategy: RowStrategy::Looped { unroll },
            });
        }
        cands.retain(|c| RowReduceTemplate.check(&base, c, Arch::Sm90a).is_ok());
        cands.dedup();
        for c in cands {
            let k = RowReduceKernel::build(&dev, &base, &c).expect("build");
            let launch = |yb: &mut DeviceBuffer, hb: &mut DeviceBuffer| {
                k.launch(&s, bufs_with(&xb, &rb, &wb, &bb, yb, hb, &base))
                    .unwrap()
            };
            launch(&mut yb, &mut hb);
            let (a, e) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
            a.record(&s).unwrap();
            let iters = 20;
            for _ in 0..iters {
                launch(&mut yb, &mut hb);
            }
            e.record(&s).unwrap();
            e.synchronize().unwrap();
            let ms = a.elapsed_ms(&e).unwrap() as f64 / iters as f64;
            let gbs = base.bytes_moved() as f64 / (ms * 1e-3) / 1e9;
            println!(
                "BENCH {:?} res={} {d} {rows}x{cols} {c:?}: {ms:.3} ms, {gbs:.0} GB/s",
                base.op, base.residual
            );
        }
    }
}

fn bufs_with<'a>(
    xb: &'a DeviceBuffer,
    rb: &'a DeviceBuffer,
    wb: &'a DeviceBuffer,
    bb: &'a DeviceBuffer,
    yb: &'a mut DeviceBuffer,
    hb: &'a mut DeviceBuffer,
    p: &RowProblem,
) -> RowBuffers<'a> {
    RowBuffers {
        x: DeviceSlice::whole(xb),
        residual: p.residual.then(|| DeviceSlice::whole(rb)),
        weight: p.op.has_weight().then(|| DeviceSlice::whole(wb)),
        bias: p.op.has_bias().then(|| DeviceSlice::whole(bb)),
        y: DeviceSliceMut::whole(yb),
        residual_out: if p.residual {
            Some(DeviceSliceMut::whole(hb))
        } else {
            None
        },
    }
}

/// The cases the emulator runs by default (all with `RTX_EMU_FULL=1`): f32 and bf16 (f16
/// differs from bf16 only in its conversions), every op, a spread of thread mappings.
fn emu_default_subset(c: &Case) -> bool {
    let cfg = &c.config;
    let mapping = match (cfg.strategy, cfg.threads_per_row) {
        (RowStrategy::Registers { .. }, 4 | 96 | 1024) => true,
        (RowStrategy::Looped { .. }, 32) => true,
        (RowStrategy::Looped { .. }, _) => cfg.vec == 1,
        _ => false,
    };
    c.problem.dtype != DType::F16 && mapping
}

fn emu_rows(cols: u32) -> u32 {
    match cols {
        0..=64 => 70,
        65..=4097 => 9,
        _ => 5,
    }
}

#[test]
fn emulated_on_the_host_cpu() {
    if let Err(e) = host_compiler() {
        println!("SKIP emulated_on_the_host_cpu: {e}");
        return;
    }
    let filter = std::env::var("RTX_ROW_CASE").ok();
    let full = std::env::var_os("RTX_EMU_FULL").is_some();
    let cases: Vec<Case> = build_cases()
        .into_iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .filter(|c| full || filter.is_some() || emu_default_subset(c))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rng = SmallRng::seed_from_u64(4321);
    let mut units = Vec::new();
    let mut jobs: Vec<(
        Prepared,
        String,
        std::path::PathBuf,
        Option<std::path::PathBuf>,
    )> = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        let src = RowReduceTemplate
            .emit(&c.problem, &c.config, Arch::Sm90a)
            .expect("emit");
        let ns = format!("k{ci}");
        let mut main = String::new();
        for &cols in COLS.iter().filter(|&&cols| cols <= c.problem.cols) {
            let rows = emu_rows(cols);
            let offsets: &[usize] = if matches!(cols, 63 | 1000 | 4097) {
                &[0, 1]
            } else {
                &[0]
            };
            for &off in offsets {
                let j = jobs.len();
                let pr = prepare(&c.problem, rows, cols, off, &mut rng).expect("prepare");
                let t = pr.p.dtype.cuda_type();
                let n_bytes = rows as usize * cols as usize * pr.p.dtype.size_bytes();
                main.push_str("  {\n");
                let mut args = Vec::new();
                let input = |name: &str, h: &HostTensor, main: &mut String| {
                    let mut bytes = vec![0u8; pr.off];
                    bytes.extend_from_slice(&h.bytes);
                    bytes.extend(std::iter::repeat_n(0u8, GUARD));
                    let path = dir.path().join(format!("j{j}_{name}.bin"));
                    std::fs::write(&path, &bytes).unwrap();
                    main.push_str(&format!(
                        "    unsigned char* {name} = rtx_load({:?}, {});\n",
                        path.display().to_string(),
                        bytes.len()
                    ));
                    format!("(const {t}*)({name} + {})", pr.off)
                };
                args.push(input("x", &pr.x, &mut main));
                let mut names = vec!["x"];
                for (name, h) in [("r", &pr.r), ("w", &pr.w), ("b", &pr.b)] {
                    if let Some(h) = h {
                        args.push(input(name, h, &mut main));
                        names.push(name);
                    }
                }
                let total = pr.off + n_bytes + GUARD;
                let ypath = dir.path().join(format!("j{j}_y.bin"));
                let hpath =
                    pr.p.residual
                        .then(|| dir.path().join(format!("j{j}_h.bin")));
                main.push_str(&format!("    unsigned char* y = rtx_poison({total});\n"));
                args.push(format!("({t}*)(y + {})", pr.off));
                if hpath.is_some() {
                    main.push_str(&format!("    unsigned char* h = rtx_poison({total});\n"));
                    args.push(format!("({t}*)(h + {})", pr.off));
                }
                args.push(format!("{rows}"));
                args.push(format!("{cols}"));
                if pr.p.op.is_norm() {
                    args.push(format!("__uint_as_float(0x{:08x}u)", pr.p.eps.to_bits()));
                }
                let dims = RowReduceTemplate.launch(&pr.p, &c.config);
                main.push_str(&format!(
                    "    rtx_launch({}, {}, [&] {{ {ns}::{}({}); }});\n",
                    dims.grid[0],
                    dims.block[0],
                    src.entry,
                    args.join(", ")
                ));
                main.push_str(&format!(
                    "    rtx_save({:?}, y, {total});\n",
                    ypath.display().to_string()
                ));
                if let Some(hp) = &hpath {
                    main.push_str(&format!(
                        "    rtx_save({:?}, h, {total});\n    free(h);\n",
                        hp.display().to_string()
                    ));
                }
                main.push_str("    free(y);\n");
                for name in names {
                    main.push_str(&format!("    free({name});\n"));
                }
                main.push_str("  }\n");
                jobs.push((
                    pr,
                    format!("{} {rows}x{cols} offset{off}", c.name),
                    ypath,
                    hpath,
                ));
            }
        }
        units.push((ns, src, main));
    }
    let (n_kernels, t0) = (units.len(), std::time::Instant::now());
    run_units(units, dir.path(), "row_emu").unwrap_or_else(|e| panic!("{e}"));
    println!(
        "emulator: {n_kernels} kernels, {} jobs in {:?}",
        jobs.len(),
        t0.elapsed()
    );
    let mut failures = 0;
    for (pr, name, ypath, hpath) in &jobs {
        let y = std::fs::read(ypath).expect("y file");
        let h = hpath.as_ref().map(|p| std::fs::read(p).expect("h file"));
        match check(pr, &y, h.as_deref()) {
            Ok(worst) => println!("PASS emulated {name}: worst scaled error {worst:.2e}"),
            Err(e) => {
                println!("FAIL emulated {name}: {e}");
                failures += 1;
            }
        }
    }
    assert!(!jobs.is_empty());
    assert_eq!(
        failures, 0,
        "{failures} emulated row case(s) failed (see FAIL lines)"
    );
}
