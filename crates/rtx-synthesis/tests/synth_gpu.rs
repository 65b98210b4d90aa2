//! GPU tests of the synthesizer's user API (skip with a printed reason without a CUDA device or
//! NVRTC): an untuned shape is served the default config and matches cuBLAS; a tiny tuning run
//! stores an entry that a fresh `Synth` serves exactly (and to a nearby shape as the nearest
//! bucket); launches check their buffers; an f32 GEMM on sm_90a has no template yet; an
//! isolated run measures candidates in worker processes (this test binary re-executed as the
//! worker, `worker_child_entry`).

use rtx_runtime::{Blas, Device, DeviceBuffer, Stream};
use rtx_synthesis::aot::KernelCache;
use rtx_synthesis::synth::backend::{blas_call, output_offsets};
use rtx_synthesis::synth::inputs::{decode_output, HostMatrix};
use rtx_synthesis::synth::{
    GemmBuffers, GemmFamily, GemmGpuBackend, GemmLaunchError, GemmSpec, StrategyKind, Synth,
    SynthError, TuneRequest,
};
use rtx_synthesis::templates::gemm::reference::{gemm_f64, rel_error, GemmRefInputs};
use rtx_synthesis::templates::gemm::wgmma::WgmmaGemm;
use rtx_synthesis::templates::gemm::{Activation, GemmProblem, Layout};
use rtx_synthesis::tuner::{
    worker_main, Budget, LookupSource, MeasureProtocol, TuningDb, Warmup, WorkerCommand,
};
use rtx_synthesis::{Arch, DType};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
mod gpu_support;
use gpu_support::device_or_skip;

/// Set (to the problem's JSON) when this binary runs as a tuning worker.
const CHILD_ENV: &str = "RTX_SYNTH_TEST_WORKER";

fn synth_with_db(dev: &Device, db: &Path) -> Synth {
    let cache = KernelCache::open_default().expect("kernel cache");
    let db = TuningDb::open(db).expect("tuning db");
    Synth::with_stores(dev, cache, db).expect("synth")
}

fn upload(dev: &Device, s: &Stream, h: &HostMatrix) -> DeviceBuffer {
    let mut b = dev.alloc(h.bytes().len().max(16), s).unwrap();
    b.upload(h.bytes(), s).unwrap();
    b
}

/// Runs `spec` through `synth` on fresh inputs and returns its relative error against cuBLAS
/// (fp32 output) over the full output; panics on any NaN.
fn run_against_cublas(synth: &Synth, spec: &GemmSpec, seed: u64) -> (f64, LookupSource) {
    let dev = synth.device();
    let s = dev.new_stream().unwrap();
    let k = synth.gemm(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    let p = *k.problem();
    let (ea, eb, ec) = p.buffer_elems();
    let a = HostMatrix::seeded(seed, ea as usize, p.dtype, 1.0);
    let b = HostMatrix::seeded(seed + 1, eb as usize, p.dtype, 1.0);
    let (da, db) = (upload(dev, &s, &a), upload(dev, &s, &b));
    let out = p.epilogue.out_dtype;
    let mut dc = dev.alloc(ec as usize * out.size_bytes(), &s).unwrap();
    dc.fill_u8(0xFF, &s).unwrap();
    k.launch(&s, &da, &db, &mut dc)
        .unwrap_or_else(|e| panic!("{}: {e}", k.entry()));
    s.synchronize()
        .unwrap_or_else(|e| panic!("{}: {e}", k.entry()));
    let got = decode_output(&dc.download::<u8>(&s).unwrap(), out);
    let mut dref = dev.alloc(ec as usize * 4, &s).unwrap();
    dref.fill_u8(0xFF, &s).unwrap();
    let blas = Blas::new(dev, &s).unwrap();
    blas.gemm(&blas_call(
        &p,
        da.ptr(),
        db.ptr(),
        dref.ptr(),
        matches!(p.dtype, DType::F16 | DType::Bf16),
    ))
    .unwrap();
    s.synchronize().unwrap();
    let want = dref.download::<f32>(&s).unwrap();
    let (g, w): (Vec<f64>, Vec<f64>) = output_offsets(&p).map(|o| (got[o], want[o] as f64)).unzip();
    let nan = g.iter().position(|v| !v.is_finite());
    assert!(
        nan.is_none(),
        "{}: output element {nan:?} is not finite",
        k.entry()
    );
    (rel_error(&g, &w), k.source().clone())
}

#[test]
fn untuned_shape_is_served_the_default_and_matches_cublas() {
    let Some(dev) = device_or_skip("untuned_shape_is_served_the_default_and_matches_cublas") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_with_db(&dev, &dir.path().join("tuning.db"));
    for spec in [
        GemmSpec::new(1000, 1000, 1024, DType::Bf16).with_layouts(Layout::Row, Layout::Col),
        GemmSpec::new(384, 264, 200, DType::F16),
    ] {
        let (err, source) = run_against_cublas(&synth, &spec, 11);
        assert_eq!(
            source,
            LookupSource::Default,
            "{spec:?}: an empty database serves the default"
        );
        assert!(
            err < spec.dtype.rel_tolerance(),
            "{spec:?}: rel error {err:e}"
        );
        eprintln!(
            "SYNTH default {}x{}x{} {}: rel error {err:.2e}",
            spec.m, spec.n, spec.k, spec.dtype
        );
    }
}

#[test]
fn launches_check_buffers_and_fused_epilogues_match_the_reference() {
    let Some(dev) =
        device_or_skip("launches_check_buffers_and_fused_epilogues_match_the_reference")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_with_db(&dev, &dir.path().join("tuning.db"));
    let s = dev.new_stream().unwrap();
    let mut spec = GemmSpec::new(200, 136, 256, DType::Bf16);
    spec.epilogue.bias = true;
    spec.epilogue.activation = Activation::Relu;
    spec.epilogue.out_dtype = DType::F32;
    let k = synth.gemm(&spec).unwrap();
    let p: GemmProblem = *k.problem();
    let (ea, eb, ec) = p.buffer_elems();
    let a = HostMatrix::seeded(21, ea as usize, p.dtype, 1.0);
    let b = HostMatrix::seeded(22, eb as usize, p.dtype, 1.0);
    let bias = HostMatrix::seeded(23, p.n as usize, DType::F32, 1.0);
    let (da, db, dbias) = (
        upload(&dev, &s, &a),
        upload(&dev, &s, &b),
        upload(&dev, &s, &bias),
    );
    let mut dc = dev.alloc(ec as usize * 4, &s).unwrap();
    // The epilogue needs a bias: the plain launch names it.
    match k.launch(&s, &da, &db, &mut dc) {
        Err(SynthError::Launch(GemmLaunchError::MissingBuffer { buffer })) => {
            assert_eq!(buffer, "bias")
        }
        other => panic!("expected a missing-bias error, got {other:?}"),
    }
    // A short C is refused before any kernel runs, naming C.
    let mut short = dev.alloc(ec as usize * 4 - 4, &s).unwrap();
    match k.launch_with(
        &s,
        &mut GemmBuffers {
            a: &da,
            b: &db,
            c: &mut short,
            bias: Some(&dbias),
            residual: None,
        },
    ) {
        Err(SynthError::Launch(GemmLaunchError::BufferTooSmall { buffer, .. })) => {
            assert_eq!(buffer, "C")
        }
        other => panic!("expected a short-C error, got {other:?}"),
    }
    dc.fill_u8(0xFF, &s).unwrap();
    k.launch_with(
        &s,
        &mut GemmBuffers {
            a: &da,
            b: &db,
            c: &mut dc,
            bias: Some(&dbias),
            residual: None,
        },
    )
    .unwrap();
    s.synchronize().unwrap();
    let got = decode_output(&dc.download::<u8>(&s).unwrap(), DType::F32);
    let want = gemm_f64(
        &p,
        &GemmRefInputs {
            a: &a.to_f64(),
            b: &b.to_f64(),
            c: None,
            bias: Some(&bias.to_f64()),
            residual: None,
        },
    );
    assert!(
        got.iter().all(|v| v.is_finite()),
        "unwritten or NaN outputs"
    );
    let err = rel_error(&got, &want);
    assert!(err < p.dtype.rel_tolerance(), "bias+relu rel error {err:e}");
}

#[test]
fn tuned_entry_is_served_exact_and_to_a_nearby_shape() {
    let Some(dev) = device_or_skip("tuned_entry_is_served_exact_and_to_a_nearby_shape") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tuning.db");
    let spec = GemmSpec::new(512, 512, 512, DType::Bf16);
    {
        let synth = synth_with_db(&dev, &db);
        let req = TuneRequest {
            strategy: StrategyKind::Guided,
            budget: Budget::Count(6),
            time_budget: Duration::from_secs(240),
            protocol: MeasureProtocol {
                warmup: Warmup::Iters(3),
                min_reps: 5,
                max_reps: 30,
                max_time_ms: 200.0,
                ..MeasureProtocol::default()
            },
            ..TuneRequest::default()
        };
        let report = synth
            .tune_gemm(&spec, &req)
            .unwrap_or_else(|e| panic!("tuning failed: {e}"));
        assert!(report.stored);
        assert!(
            report.outcome.measured >= 1,
            "{} measured",
            report.outcome.measured
        );
        assert!(
            report.outcome.measured + report.outcome.failed <= 6 + 1,
            "budget of 6 (+ the default) overrun"
        );
        assert!(report.best_us().is_some_and(|us| us > 0.0));
        eprintln!(
            "SYNTH tuned 512^3 bf16: {} measured, {} failed, best {:.1} us = {:.1} TFLOP/s, {}",
            report.outcome.measured,
            report.outcome.failed,
            report.best_us().unwrap_or(f64::NAN),
            report.best_tflops().unwrap_or(f64::NAN),
            report.outcome.best.config
        );
    }
    assert!(db.exists(), "the database file was written");
    let synth = synth_with_db(&dev, &db);
    let (err, source) = run_against_cublas(&synth, &spec, 31);
    assert_eq!(source, LookupSource::Exact);
    assert!(
        err < DType::Bf16.rel_tolerance(),
        "exact: rel error {err:e}"
    );
    let near = GemmSpec::new(520, 512, 512, DType::Bf16);
    let (err, source) = run_against_cublas(&synth, &near, 32);
    match source {
        LookupSource::NearestBucket { from, .. } => assert_eq!(from, vec![512, 512, 512, 1]),
        other => panic!("520x512x512 should borrow the 512^3 entry, got {other:?}"),
    }
    assert!(
        err < DType::Bf16.rel_tolerance(),
        "nearest: rel error {err:e}"
    );
}

#[test]
fn f32_and_tf32_gemms_are_served_by_their_families_and_tune() {
    let Some(dev) = device_or_skip("f32_and_tf32_gemms_are_served_by_their_families_and_tune")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_with_db(&dev, &dir.path().join("tuning.db"));
    // f32 -> SIMT on any arch (the large default tile at 2048^2), tf32 -> wgmma on sm_90a (since
    // e184ba7), else mma.sync.
    let tf32_family = if synth.arch() == Arch::Sm90a {
        "gemm_wgmma"
    } else {
        "gemm_mma"
    };
    for (spec, family) in [
        (GemmSpec::new(2048, 2048, 512, DType::F32), "gemm_simt"),
        (
            GemmSpec::new(333, 257, 129, DType::F32).with_layouts(Layout::Col, Layout::Row),
            "gemm_simt",
        ),
        (
            GemmSpec::new(512, 384, 256, DType::Tf32).with_layouts(Layout::Row, Layout::Col),
            tf32_family,
        ),
    ] {
        let k = synth
            .gemm(&spec)
            .unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        assert_eq!(k.template(), family, "{spec:?}");
        let (err, source) = run_against_cublas(&synth, &spec, 5);
        assert_eq!(source, LookupSource::Default);
        assert!(
            err < spec.dtype.rel_tolerance(),
            "{spec:?}: rel error {err:e}"
        );
        eprintln!(
            "SYNTH {family} {}x{}x{} {}: rel error {err:.2e}",
            spec.m, spec.n, spec.k, spec.dtype
        );
    }
    // A short SIMT tuning run verifies every candidate against cuBLAS (fp32 bound 1e-5), stores
    // the winner, and the next request is served that exact entry.
    let spec = GemmSpec::new(512, 512, 512, DType::F32);
    let req = TuneRequest {
        strategy: StrategyKind::Random,
        budget: Budget::Count(4),
        time_budget: Duration::from_secs(120),
        protocol: MeasureProtocol {
            warmup: Warmup::Iters(3),
            min_reps: 5,
            max_reps: 20,
            max_time_ms: 200.0,
            ..MeasureProtocol::default()
        },
        ..TuneRequest::default()
    };
    let report = synth
        .tune_gemm(&spec, &req)
        .unwrap_or_else(|e| panic!("SIMT tuning failed: {e}"));
    assert_eq!(report.template, "gemm_simt");
    assert!(
        report.outcome.measured >= 1,
        "{} measured",
        report.outcome.measured
    );
    assert!(report.stored);
    let (err, source) = run_against_cublas(&synth, &spec, 6);
    assert_eq!(source, LookupSource::Exact);
    assert!(
        err < DType::F32.rel_tolerance(),
        "tuned SIMT: rel error {err:e}"
    );
}

/// The worker side of `isolated_tuning_measures_in_worker_processes`; a no-op in a normal run.
#[test]
fn worker_child_entry() {
    let Some(json) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let problem: GemmProblem = serde_json::from_str(&json.to_string_lossy()).expect("problem JSON");
    let dev = Device::open(0).expect("worker: device");
    let template = WgmmaGemm::for_device(dev.info());
    let backend = GemmGpuBackend::<WgmmaGemm>::with_device(
        dev,
        Arc::new(KernelCache::open_default().expect("cache")),
    );
    let exit =
        worker_main(&template, &problem, rtx_synthesis::Arch::Sm90a, &backend).expect("worker I/O");
    std::process::exit(exit.code());
}

#[test]
fn isolated_tuning_measures_in_worker_processes() {
    let Some(dev) = device_or_skip("isolated_tuning_measures_in_worker_processes") else {
        return;
    };
    if dev.info().compute_capability != (9, 0) {
        eprintln!("SKIP isolated_tuning_measures_in_worker_processes: the worker serves the sm_90a wgmma family only");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let synth = synth_with_db(&dev, &dir.path().join("tuning.db"));
    let spec = GemmSpec::new(256, 256, 512, DType::Bf16).with_layouts(Layout::Row, Layout::Col);
    let json = serde_json::to_string(&spec.problem().unwrap()).unwrap();
    let exe = std::env::current_exe().expect("test binary path");
    let cmd = WorkerCommand::new(exe)
        .args([
            "worker_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, json);
    let req = TuneRequest {
        strategy: StrategyKind::Random,
        budget: Budget::Count(3),
        time_budget: Duration::from_secs(240),
        protocol: MeasureProtocol {
            warmup: Warmup::Iters(3),
            min_reps: 5,
            max_reps: 20,
            max_time_ms: 200.0,
            ..MeasureProtocol::default()
        },
        isolate: Some(cmd),
        store: false,
        ..TuneRequest::default()
    };
    let report = synth
        .tune_gemm(&spec, &req)
        .unwrap_or_else(|e| panic!("isolated tuning failed: {e}"));
    let w = report.worker.expect("an isolated run reports its workers");
    assert!(w.spawned >= 1, "{w:?}");
    assert!(
        report.outcome.measured >= 1,
        "{} measured",
        report.outcome.measured
    );
    assert!(!report.stored);
    eprintln!(
        "SYNTH isolated: {w:?}, best {:.1} us",
        report.best_us().unwrap_or(f64::NAN)
    );
}

/// Split-K configs of different tile shapes verified one after another through the family's
/// launch path share one per-stream workspace: each must still match the reference (before the
/// counter-range reset, a config's counters could sit on the previous config's f32 partials and
/// every later split-K candidate failed with an infinite error).
#[test]
fn split_k_configs_share_the_stream_workspace_and_stay_correct() {
    use rtx_synthesis::templates::Template;
    use rtx_synthesis::tuner::{TuneBackend, TuneTask};
    let test = "split_k_configs_share_the_stream_workspace_and_stay_correct";
    let Some(dev) = device_or_skip(test) else {
        return;
    };
    if dev.info().compute_capability != (9, 0) {
        eprintln!("SKIP {test}: the wgmma family needs sm_90a");
        return;
    }
    let template = WgmmaGemm::for_device(dev.info());
    let p = GemmProblem::new(512, 384, 4096, DType::Bf16, Layout::Row, Layout::Row);
    let mut configs: Vec<_> = template
        .valid_space(&p, rtx_synthesis::Arch::Sm90a)
        .into_iter()
        .filter(|c| c.split_k > 1)
        .collect();
    // Different (bm, bn, split_k) give different partial sizes and counter offsets.
    configs.sort_by_key(|c| (c.split_k, c.bm, c.bn, c.consumers, c.stages));
    configs.dedup_by_key(|c| (c.split_k, c.bm, c.bn));
    assert!(
        configs.len() >= 3,
        "want several split-K layouts, got {}",
        configs.len()
    );
    let backend = GemmGpuBackend::<WgmmaGemm>::with_device(
        dev,
        Arc::new(KernelCache::open_default().expect("cache")),
    );
    let task = TuneTask {
        template: &template,
        problem: &p,
        arch: rtx_synthesis::Arch::Sm90a,
    };
    for (i, c) in configs.iter().enumerate() {
        backend
            .compile(&task, c)
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
        let r = backend
            .verify(&task, c, 0x5011 + i as u64)
            .unwrap_or_else(|e| panic!("config {i} {c:?}: {e}"));
        assert!(
            r.passed(),
            "config {i} {c:?}: rel error {:e} > {:e}",
            r.rel_err,
            r.bound
        );
    }
    eprintln!(
        "SYNTH split-K: {} layouts verified in turn on one stream",
        configs.len()
    );
}
