//! GPU correctness of the fused elementwise kernels (skips without a device or NVRTC).
//!
//! Every case uploads fresh random inputs (some with NaN / +-Inf sprinkled in), poisons the
//! outputs (0xFF bytes = NaN) inside guard bytes, launches, checks that the guards are untouched
//! and compares every element with the f64 reference (NaN/Inf classes exactly, finite values
//! within a relative bound fitting the storage precision). Shapes include rows of length 1 and
//! odd lengths; offsets of one element move every base pointer off 16-byte alignment so the
//! kernel takes its scalar path. One `PASS` / `FAIL` line per case.
//!
//! `emulated_on_the_host_cpu` runs the same cases (the shorter shapes) through the host
//! emulator (`host_emulation`: g++ and CPU fibers), so the kernels' indexing, tails, alignment
//! dispatch and NaN handling are checked on machines without a GPU too (f32 and bf16 by
//! default; `RTX_EMU_FULL=1` adds f16).
//!
//! `RTX_MEM_BENCH=1` also times the 8-op chain over >= 256 MiB (printed, not asserted).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rtx_runtime::{Device, DeviceBuffer, Event, Stream};
use rtx_synthesis::templates::elementwise::expr::{
    Broadcast, ExprGraph, GraphBuilder, Node, UnaryOp, ValueRef,
};
use rtx_synthesis::templates::elementwise::host_emulation::{host_compiler, run_units};
use rtx_synthesis::templates::elementwise::presets::{bias_gelu, chain8, silu_gate, GeluForm};
use rtx_synthesis::templates::elementwise::reference::{compare, elementwise_f64};
use rtx_synthesis::templates::elementwise::{
    BinaryOp, DeviceSlice, DeviceSliceMut, ElementwiseConfig, ElementwiseKernel,
    ElementwiseProblem, ElementwiseTemplate, GridMode,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};
mod gpu_support;
use gpu_support::{
    encode, gpu_or_skip, poisoned, report_case, unguard, upload_at, HostTensor, GUARD,
};

/// Lowest storage precision anywhere in the graph decides the tolerance.
fn graph_tolerance(g: &ExprGraph) -> f64 {
    let mut dtypes: Vec<DType> = g
        .inputs
        .iter()
        .map(|i| i.dtype)
        .chain(g.outputs.iter().map(|o| o.dtype))
        .collect();
    for n in &g.nodes {
        match *n {
            Node::Const { dtype, .. } => dtypes.push(dtype),
            Node::Unary {
                op: UnaryOp::Cast(t),
                ..
            } => dtypes.push(t),
            _ => {}
        }
    }
    if dtypes.iter().any(|d| d.size_bytes() == 2) {
        2e-2
    } else {
        1e-4
    }
}

/// One test case: a graph, a config (None: the default), shapes and input value range.
struct Case {
    name: String,
    graph: ExprGraph,
    config: Option<ElementwiseConfig>,
    shapes: Vec<(u32, u32)>,
    offsets: Vec<usize>,
    range: (f32, f32),
    specials: bool,
    tol: f64,
}

fn case(
    name: String,
    graph: ExprGraph,
    config: Option<ElementwiseConfig>,
    shapes: &[(u32, u32)],
    offsets: &[usize],
    specials: bool,
) -> Case {
    let tol = graph_tolerance(&graph);
    Case {
        name,
        graph,
        config,
        shapes: shapes.to_vec(),
        offsets: offsets.to_vec(),
        range: (-2.0, 2.0),
        specials,
        tol,
    }
}

/// Exercises every op of the IR on safe arguments (log/sqrt/rsqrt/div domains).
fn math_graph(d: DType) -> ExprGraph {
    let mut b = GraphBuilder::new();
    let x = b.input(d, Broadcast::Full);
    let z = b.input(d, Broadcast::Full);
    let one = b.constant(1.0, d);
    let half = b.constant(0.5, d);
    let quarter = b.constant(0.25, d);
    let ax = b.unary(UnaryOp::Abs, x);
    let t = b.add(ax, one);
    let l = b.unary(UnaryOp::Log, t);
    let sq = b.unary(UnaryOp::Sqrt, ax);
    let xx = b.mul(x, x);
    let xx = b.add(xx, half);
    let rs = b.unary(UnaryOp::Rsqrt, xx);
    let th = b.unary(UnaryOp::Tanh, z);
    let e = b.unary(UnaryOp::Exp, th);
    let az = b.unary(UnaryOp::Abs, z);
    let den = b.add(az, quarter);
    let q = b.div(e, den);
    let p = b.mul(sq, rs);
    let s = b.add(l, p);
    let y = b.sub(s, q);
    b.output(y, d);
    b.build().unwrap()
}

/// NaN-propagating min/max, relu, sigmoid, silu, neg, gelu-erf; two outputs.
fn minmax_graph(d: DType) -> ExprGraph {
    let mut b = GraphBuilder::new();
    let x = b.input(d, Broadcast::Full);
    let z = b.input(d, Broadcast::Full);
    let mn = b.min(x, z);
    let nx = b.unary(UnaryOp::Neg, x);
    let r = b.unary(UnaryOp::Relu, nx);
    let mx = b.max(mn, r);
    let sg = b.unary(UnaryOp::Sigmoid, mx);
    let si = b.unary(UnaryOp::Silu, z);
    let ge = b.unary(UnaryOp::GeluErf, si);
    let y = b.add(sg, ge);
    b.output(y, d).output(mx, d);
    b.build().unwrap()
}

/// Mixed dtypes and every broadcast: y0 (bf16) = x * col + s, y1 (f32) = sigmoid(max(x, row)).
fn broadcast_graph() -> ExprGraph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, Broadcast::Full);
    let row = b.input(DType::Bf16, Broadcast::Row);
    let col = b.input(DType::F16, Broadcast::Col);
    let s = b.input(DType::F32, Broadcast::Scalar);
    let c32 = b.cast(col, DType::F32);
    let r32 = b.cast(row, DType::F32);
    let a = b.mul(x, c32);
    let a = b.add(a, s);
    let y0 = b.cast(a, DType::Bf16);
    let m = b.max(x, r32);
    let y1 = b.unary(UnaryOp::Sigmoid, m);
    b.output(y0, DType::Bf16).output(y1, DType::F32);
    b.build().unwrap()
}

/// A random graph of bounded ops only (no overflow or domain edges, so f32 and f64 agree on
/// which values are finite).
fn random_tame_graph(rng: &mut SmallRng) -> ExprGraph {
    const UN: [UnaryOp; 8] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::GeluErf,
    ];
    const BIN: [BinaryOp; 5] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Max,
        BinaryOp::Min,
    ];
    let d = [DType::F32, DType::F16, DType::Bf16][rng.random_range(0..3)];
    let shapes = [
        Broadcast::Full,
        Broadcast::Row,
        Broadcast::Col,
        Broadcast::Scalar,
    ];
    let mut b = GraphBuilder::new();
    let n_in = rng.random_range(1..=4);
    let mut vals: Vec<ValueRef> = (0..n_in)
        .map(|i| {
            b.input(
                d,
                if i == 0 {
                    Broadcast::Full
                } else {
                    shapes[rng.random_range(0..4)]
                },
            )
        })
        .collect();
    let mut acc = vals[0];
    for &v in &vals[1..].to_vec() {
        acc = b.add(acc, v);
        vals.push(acc);
    }
    let n_ops = rng.random_range(1..=(16 - (n_in - 1)));
    for _ in 0..n_ops {
        let a = vals[rng.random_range(0..vals.len())];
        let v = if rng.random_bool(0.5) {
            b.unary(UN[rng.random_range(0..UN.len())], a)
        } else {
            let c = vals[rng.random_range(0..vals.len())];
            b.binary(BIN[rng.random_range(0..BIN.len())], a, c)
        };
        vals.push(v);
    }
    b.output(*vals.last().unwrap(), d);
    b.build().unwrap()
}

fn gen_input(rng: &mut SmallRng, n: usize, range: (f32, f32), specials: bool) -> Vec<f32> {
    (0..n)
        .map(|i| {
            if specials && n > 4 {
                match i % 97 {
                    5 => return f32::NAN,
                    11 => return f32::INFINITY,
                    23 => return f32::NEG_INFINITY,
                    _ => {}
                }
            }
            rng.random_range(range.0..range.1)
        })
        .collect()
}

/// Inputs and reference outputs of one (case, shape, offset).
struct Prepared {
    rows: u32,
    cols: u32,
    off: usize,
    inputs: Vec<HostTensor>,
    want: Vec<Vec<f64>>,
}

fn prepare(
    c: &Case,
    rows: u32,
    cols: u32,
    off: usize,
    rng: &mut SmallRng,
) -> Result<Prepared, String> {
    let g = &c.graph;
    let mut inputs = Vec::new();
    for (i, spec) in g.inputs.iter().enumerate() {
        let n = spec.broadcast.elems(rows as u64, cols as u64) as usize;
        inputs.push(encode(
            spec.dtype,
            &gen_input(rng, n, c.range, c.specials && i == 0),
        ));
    }
    let want = elementwise_f64(
        g,
        rows as usize,
        cols as usize,
        &inputs.iter().map(|h| h.vals.clone()).collect::<Vec<_>>(),
    )
    .map_err(|e| format!("reference: {e}"))?;
    Ok(Prepared {
        rows,
        cols,
        off,
        inputs,
        want,
    })
}

/// Compares every output (raw bytes with guards) with the reference.
fn check(c: &Case, p: &Prepared, outputs: &[Vec<u8>]) -> Result<f64, String> {
    let n = p.rows as usize * p.cols as usize;
    let mut worst = 0.0f64;
    for (o, spec) in c.graph.outputs.iter().enumerate() {
        let got = unguard(&outputs[o], spec.dtype, p.off * spec.dtype.size_bytes(), n)
            .map_err(|e| format!("output {o}: {e}"))?;
        let finite: Vec<f64> = p.want[o]
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let rms = (finite.iter().map(|v| v * v).sum::<f64>() / finite.len().max(1) as f64).sqrt();
        let floor = 1e-2 * rms.max(1e-3);
        let e = compare(&got, &p.want[o], spec.dtype, c.tol, floor).map_err(|m| {
            let (r, col) = (m.index / p.cols as usize, m.index % p.cols as usize);
            format!("output {o} ({r}, {col}): {m}")
        })?;
        worst = worst.max(e);
    }
    Ok(worst)
}

/// Runs one (case, shape, offset) on the GPU; Ok(worst scaled error) or the failure.
#[allow(clippy::too_many_arguments)]
fn run_one(
    dev: &Device,
    s: &Stream,
    k: &ElementwiseKernel,
    c: &Case,
    rows: u32,
    cols: u32,
    off: usize,
    rng: &mut SmallRng,
) -> Result<f64, String> {
    let g = &c.graph;
    let p = prepare(c, rows, cols, off, rng)?;
    let ins: Vec<DeviceBuffer> = g
        .inputs
        .iter()
        .zip(&p.inputs)
        .map(|(spec, h)| upload_at(dev, s, h, off * spec.dtype.size_bytes()))
        .collect();
    let n = rows as usize * cols as usize;
    let mut outs: Vec<DeviceBuffer> = g
        .outputs
        .iter()
        .map(|o| poisoned(dev, s, n * o.dtype.size_bytes(), off * o.dtype.size_bytes()))
        .collect();
    let in_slices: Vec<DeviceSlice> = ins
        .iter()
        .zip(&g.inputs)
        .map(|(b, spec)| DeviceSlice::at(b, off * spec.dtype.size_bytes()))
        .collect();
    {
        let mut out_slices: Vec<DeviceSliceMut> = outs
            .iter_mut()
            .zip(&g.outputs)
            .map(|(b, o)| DeviceSliceMut::at(b, off * o.dtype.size_bytes()))
            .collect();
        k.launch_shape(s, &in_slices, &mut out_slices, rows, cols)
            .map_err(|e| format!("launch: {e}"))?;
    }
    s.synchronize().map_err(|e| format!("kernel: {e}"))?;
    let bytes: Vec<Vec<u8>> = outs
        .iter()
        .map(|b| b.download(s).map_err(|e| format!("download: {e}")))
        .collect::<Result<_, _>>()?;
    check(c, &p, &bytes)
}

fn build_cases() -> Vec<Case> {
    let shapes: &[(u32, u32)] = &[
        (1, 1),
        (1, 3),
        (3, 63),
        (7, 1000),
        (2, 4097),
        (3, 65536),
        (129, 1024),
    ];
    let mut cases = Vec::new();
    for d in [DType::F32, DType::F16, DType::Bf16] {
        let graphs = [
            ("bias_gelu_erf", bias_gelu(d, GeluForm::Erf).unwrap()),
            ("bias_gelu_tanh", bias_gelu(d, GeluForm::Tanh).unwrap()),
            ("silu_gate", silu_gate(d).unwrap()),
            ("chain8", chain8(d).unwrap()),
        ];
        for (gname, g) in graphs {
            let p = ElementwiseProblem::new(g.clone(), 1, 1);
            let def = ElementwiseTemplate.default_config(&p, Arch::Sm90a);
            cases.push(case(
                format!("{gname}_{d}_default"),
                g.clone(),
                None,
                shapes,
                &[0, 1],
                false,
            ));
            cases.push(case(
                format!("{gname}_{d}_scalar"),
                g.clone(),
                Some(ElementwiseConfig {
                    vec: 1,
                    threads: 128,
                    unroll: 1,
                    grid: GridMode::OneShot,
                }),
                shapes,
                &[0],
                false,
            ));
            cases.push(case(
                format!("{gname}_{d}_stride3"),
                g.clone(),
                Some(ElementwiseConfig {
                    grid: GridMode::Stride { blocks: 3 },
                    unroll: 2,
                    threads: 256,
                    ..def
                }),
                shapes,
                &[0, 1],
                true,
            ));
        }
        cases.push(case(
            format!("math_{d}"),
            math_graph(d),
            None,
            &[(5, 999), (64, 1024)],
            &[0, 1],
            true,
        ));
        cases.push(case(
            format!("minmax_{d}"),
            minmax_graph(d),
            None,
            &[(5, 999), (64, 1024)],
            &[0, 1],
            true,
        ));
    }
    let bshapes: &[(u32, u32)] = &[(1, 1), (9, 1001), (33, 1024), (2, 4096)];
    cases.push(case(
        "broadcast_mixed_default".into(),
        broadcast_graph(),
        None,
        bshapes,
        &[0, 1],
        true,
    ));
    cases.push(case(
        "broadcast_mixed_v4_u4".into(),
        broadcast_graph(),
        Some(ElementwiseConfig {
            vec: 4,
            threads: 128,
            unroll: 4,
            grid: GridMode::OneShot,
        }),
        bshapes,
        &[0],
        false,
    ));
    let mut rng = SmallRng::seed_from_u64(0xe1e3);
    for i in 0..10 {
        let g = random_tame_graph(&mut rng);
        let mut c = case(
            format!("random{i}"),
            g,
            None,
            &[(17, 999), (64, 1024)],
            &[0, 1],
            false,
        );
        c.tol *= 2.0;
        cases.push(c);
    }
    cases
}

#[test]
fn elementwise_kernels_match_the_f64_reference() {
    let Some((dev, s)) = gpu_or_skip("elementwise_kernels_match_the_f64_reference") else {
        return;
    };
    let filter = std::env::var("RTX_EW_CASE").ok();
    let cases: Vec<Case> = build_cases()
        .into_iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .collect();
    // Compile (NVRTC) and load in parallel; run in order.
    let kernels: Vec<Result<ElementwiseKernel, String>> = cases
        .par_iter()
        .map(|c| {
            let p = ElementwiseProblem::new(c.graph.clone(), c.shapes[0].0, c.shapes[0].1);
            let cfg = c
                .config
                .unwrap_or_else(|| ElementwiseTemplate.default_config(&p, Arch::Sm90a));
            ElementwiseKernel::build(&dev, &p, &cfg).map_err(|e| format!("build: {e}"))
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(42);
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
        for &(rows, cols) in &c.shapes {
            for &off in &c.offsets {
                let name = format!("{} {rows}x{cols} offset{off} ({:?})", c.name, k.config());
                report_case(
                    &name,
                    run_one(&dev, &s, k, c, rows, cols, off, &mut rng),
                    &mut failures,
                );
            }
        }
    }
    assert_eq!(
        failures, 0,
        "{failures} elementwise case(s) failed (see FAIL lines)"
    );
}

#[test]
fn launch_refuses_bad_buffers() {
    let Some((dev, s)) = gpu_or_skip("launch_refuses_bad_buffers") else {
        return;
    };
    let p = ElementwiseProblem::new(bias_gelu(DType::F32, GeluForm::Erf).unwrap(), 4, 256);
    let k = ElementwiseKernel::build(
        &dev,
        &p,
        &ElementwiseTemplate.default_config(&p, Arch::Sm90a),
    )
    .expect("build");
    let x = dev.alloc(4 * 256 * 4, &s).unwrap();
    let short_bias = dev.alloc(255 * 4, &s).unwrap();
    let mut y = dev.alloc(4 * 256 * 4, &s).unwrap();
    let err = k
        .launch(
            &s,
            &[DeviceSlice::whole(&x), DeviceSlice::whole(&short_bias)],
            &mut [DeviceSliceMut::whole(&mut y)],
        )
        .unwrap_err();
    assert!(err.to_string().contains("input 1"), "{err}");
    let err = k
        .launch(
            &s,
            &[DeviceSlice::whole(&x)],
            &mut [DeviceSliceMut::whole(&mut y)],
        )
        .unwrap_err();
    assert!(err.to_string().contains("expected 2"), "{err}");
    println!("PASS launch_refuses_bad_buffers");
}

#[test]
fn bench_chain8_bandwidth() {
    if std::env::var_os("RTX_MEM_BENCH").is_none() {
        return;
    }
    let Some((dev, s)) = gpu_or_skip("bench_chain8_bandwidth") else {
        return;
    };
    let (rows, cols) = (16384u32, 3072u32);
    for d in [DType::Bf16, DType::F32] {
        let p = ElementwiseProblem::new(chain8(d).unwrap(), rows, cols);
        let mut rng = SmallRng::seed_from_u64(7);
        let bufs: Vec<DeviceBuffer> = (0..3)
            .map(|i| {
                let n = p.input_elems(i) as usize;
                upload_at(
                    &dev,
                    &s,
                    &encode(d, &gen_input(&mut rng, n, (-2.0, 2.0), false)),
                    0,
                )
            })
            .collect();
        let mut y = dev.alloc(p.elems() as usize * d.size_bytes(), &s).unwrap();
        let def = ElementwiseTemplate.default_config(&p, Arch::Sm90a);
        let mut configs = vec![def];
        for threads in [128, 256, 512] {
            for unroll in [1, 2, 4] {
                for grid in [GridMode::OneShot, GridMode::Stride { blocks: 132 * 4 }] {
                    configs.push(ElementwiseConfig {
                        threads,
                        unroll,
                        grid,
                        ..def
                    });
                }
            }
        }
        for c in configs {
            if ElementwiseTemplate.check(&p, &c, Arch::Sm90a).is_err() {
                continue;
            }
            let k = ElementwiseKernel::build(&dev, &p, &c).expect("build");
            let ins: Vec<DeviceSlice> = bufs.iter().map(DeviceSlice::whole).collect();
            let mut outs = [DeviceSliceMut::whole(&mut y)];
            k.launch(&s, &ins, &mut outs).unwrap();
            let (a, b) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
            a.record(&s).unwrap();
            let iters = 20;
            for _ in 0..iters {
                k.launch(&s, &ins, &mut outs).unwrap();
            }
            b.record(&s).unwrap();
            b.synchronize().unwrap();
            let ms = a.elapsed_ms(&b).unwrap() as f64 / iters as f64;
            let gbs = p.bytes_moved() as f64 / (ms * 1e-3) / 1e9;
            println!(
                "BENCH chain8 {d} {rows}x{cols} ({} MiB moved) {c:?}: {ms:.3} ms, {gbs:.0} GB/s",
                p.bytes_moved() >> 20
            );
        }
    }
}

#[test]
fn emulated_on_the_host_cpu() {
    if let Err(e) = host_compiler() {
        println!("SKIP emulated_on_the_host_cpu: {e}");
        return;
    }
    let filter = std::env::var("RTX_EW_CASE").ok();
    // By default f32 and bf16 (f16 differs only in its conversions); RTX_EMU_FULL=1 runs all.
    let full = std::env::var_os("RTX_EMU_FULL").is_some() || filter.is_some();
    let cases: Vec<Case> = build_cases()
        .into_iter()
        .filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .filter(|c| full || !c.name.contains("_f16"))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rng = SmallRng::seed_from_u64(43);
    let mut units = Vec::new();
    // (case index, prepared data, job name, output files)
    let mut jobs: Vec<(usize, Prepared, String, Vec<std::path::PathBuf>)> = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        let p0 = ElementwiseProblem::new(c.graph.clone(), c.shapes[0].0, c.shapes[0].1);
        let cfg = c
            .config
            .unwrap_or_else(|| ElementwiseTemplate.default_config(&p0, Arch::Sm90a));
        let src = ElementwiseTemplate
            .emit(&p0, &cfg, Arch::Sm90a)
            .expect("emit");
        let ns = format!("k{ci}");
        let mut main = String::new();
        for &(rows, cols) in c
            .shapes
            .iter()
            .filter(|(r, c)| (*r as u64) * (*c as u64) <= 70_000)
        {
            for &off in &c.offsets {
                let j = jobs.len();
                let prep = prepare(c, rows, cols, off, &mut rng).expect("prepare");
                let p = ElementwiseProblem::new(c.graph.clone(), rows, cols);
                let d = ElementwiseTemplate.launch(&p, &cfg);
                main.push_str("  {\n");
                let mut args = Vec::new();
                for (i, (spec, h)) in c.graph.inputs.iter().zip(&prep.inputs).enumerate() {
                    let o = off * spec.dtype.size_bytes();
                    let mut bytes = vec![0u8; o];
                    bytes.extend_from_slice(&h.bytes);
                    bytes.extend(std::iter::repeat_n(0u8, GUARD));
                    let path = dir.path().join(format!("j{j}_i{i}.bin"));
                    std::fs::write(&path, &bytes).unwrap();
                    main.push_str(&format!(
                        "    unsigned char* i{i} = rtx_load({:?}, {});\n",
                        path.display().to_string(),
                        bytes.len()
                    ));
                    args.push(format!("(const {}*)(i{i} + {o})", spec.dtype.cuda_type()));
                }
                let mut outs = Vec::new();
                for (o, spec) in c.graph.outputs.iter().enumerate() {
                    let b = off * spec.dtype.size_bytes();
                    let total = b + p.elems() as usize * spec.dtype.size_bytes() + GUARD;
                    let path = dir.path().join(format!("j{j}_o{o}.bin"));
                    main.push_str(&format!("    unsigned char* o{o} = rtx_poison({total});\n"));
                    args.push(format!("({}*)(o{o} + {b})", spec.dtype.cuda_type()));
                    outs.push((path, total));
                }
                args.push(format!("{rows}u"));
                args.push(format!("{cols}u"));
                main.push_str(&format!(
                    "    rtx_launch({}, {}, [&] {{ {ns}::{}({}); }});\n",
                    d.grid[0],
                    d.block[0],
                    src.entry,
                    args.join(", ")
                ));
                for (o, (path, total)) in outs.iter().enumerate() {
                    main.push_str(&format!(
                        "    rtx_save({:?}, o{o}, {total});\n    free(o{o});\n",
                        path.display().to_string()
                    ));
                }
                for i in 0..c.graph.inputs.len() {
                    main.push_str(&format!("    free(i{i});\n"));
                }
                main.push_str("  }\n");
                jobs.push((
                    ci,
                    prep,
                    format!("{} {rows}x{cols} offset{off} ({cfg:?})", c.name),
                    outs.into_iter().map(|o| o.0).collect(),
                ));
            }
        }
        units.push((ns, src, main));
    }
    let (n_kernels, t0) = (units.len(), std::time::Instant::now());
    run_units(units, dir.path(), "ew_emu").unwrap_or_else(|e| panic!("{e}"));
    println!(
        "emulator: {n_kernels} kernels, {} jobs in {:?}",
        jobs.len(),
        t0.elapsed()
    );
    let mut failures = 0;
    for (ci, prep, name, outs) in &jobs {
        let bytes: Vec<Vec<u8>> = outs
            .iter()
            .map(|p| std::fs::read(p).expect("output file"))
            .collect();
        match check(&cases[*ci], prep, &bytes) {
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
        "{failures} emulated elementwise case(s) failed (see FAIL lines)"
    );
}
