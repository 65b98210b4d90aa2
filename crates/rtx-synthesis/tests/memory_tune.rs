//! CPU tests of memory-bound tuning: tuning-database keys of elementwise graphs and row ops,
//! encode/decode and lookup (exact / nearest bucket / default) of their entries, and the tuner
//! over the bounded memory space with a dummy backend (picks the fastest verified config,
//! refuses a wrong one). No GPU and no NVRTC: templates are only emitted.

use proptest::prelude::*;
use rtx_synthesis::synth::{MemoryOp, MemorySpace};
use rtx_synthesis::templates::elementwise::{
    presets, ElementwiseConfig, ElementwiseProblem, ElementwiseTemplate, GridMode,
};
use rtx_synthesis::templates::reduce::{RowProblem, RowReduceTemplate};
use rtx_synthesis::templates::Template;
use rtx_synthesis::tuner::db::{decode, encode};
use rtx_synthesis::tuner::{
    run_protocol, CandidateError, CandidateResult, DbEntry, DeviceKey, Exhaustive, LookupPolicy,
    LookupSource, MeasureProtocol, NoProgress, ProblemSignature, ResourceUsage, StoredConfig,
    TimingStats, TuneBackend, TuneKey, TuneOptions, TuneTask, Tuner, TuningDb, VerifyReport,
    Warmup,
};
use rtx_synthesis::{Arch, DType};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

const ARCH: Arch = Arch::Sm90a;

fn device() -> DeviceKey {
    DeviceKey::new("NVIDIA H200", (9, 0), (13, 0))
}

fn chain8(dtype: DType, rows: u32, cols: u32) -> ElementwiseProblem {
    ElementwiseProblem::new(presets::chain8(dtype).unwrap(), rows, cols)
}

fn stats(us: f64) -> TimingStats {
    TimingStats::from_samples(vec![us; 3]).unwrap()
}

/// A one-config database entry for `problem`, fingerprinted as `lookup` re-checks it.
fn entry<T: Template>(t: &T, p: &T::Problem, c: &T::Config, us: f64) -> DbEntry
where
    T::Problem: ProblemSignature,
{
    let fp = t
        .emit(p, c, ARCH)
        .unwrap()
        .fingerprint()
        .to_hex()
        .to_string();
    DbEntry {
        key: TuneKey::new(t, p, ARCH, &device()).unwrap(),
        winner: StoredConfig {
            config: serde_json::to_value(c).unwrap(),
            fingerprint: fp,
            stats: stats(us),
        },
        runners_up: vec![],
        meta: rtx_synthesis::tuner::db::EntryMeta {
            created_unix_s: 1,
            strategy: "exhaustive".into(),
            measured: 1,
            failed: 0,
            space: 1,
            tuner_version: "test".into(),
        },
    }
}

#[test]
fn elementwise_signatures_name_graph_shape_and_dtypes() {
    let p = chain8(DType::Bf16, 32768, 4096);
    let s = p.signature();
    assert_eq!(s.op, "elementwise");
    assert_eq!(s.shape, vec![32768, 4096]);
    assert_eq!(
        s.dtypes,
        vec![DType::Bf16; 4],
        "three inputs then the output"
    );
    assert_eq!(s.layouts, vec!["full", "full", "row"]);
    let get = |k: &str| s.attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("graph"), Some(p.graph.fingerprint()));
    assert_eq!(get("align_cols").as_deref(), Some("16"));
    assert_eq!(get("index64").as_deref(), Some("false"));
    // Another graph or dtype is another family; another shape is the same family.
    let other = ElementwiseProblem::new(presets::silu_gate(DType::Bf16).unwrap(), 32768, 4096);
    assert_ne!(other.signature().family(), s.family());
    assert_ne!(
        chain8(DType::F16, 32768, 4096).signature().family(),
        s.family()
    );
    assert_eq!(
        chain8(DType::Bf16, 1024, 4096).signature().family(),
        s.family()
    );
    // An odd row length is not served a config tuned for aligned rows.
    assert_ne!(
        chain8(DType::Bf16, 32768, 4095).signature().family(),
        s.family()
    );
    let t = ElementwiseTemplate;
    let k1 = TuneKey::new(&t, &p, ARCH, &device()).unwrap();
    let k2 = TuneKey::new(&t, &chain8(DType::Bf16, 2048, 8192), ARCH, &device()).unwrap();
    assert_eq!(
        k1.family(),
        k2.family(),
        "the elementwise code does not depend on the shape"
    );
    assert!(
        k1.to_string()
            .starts_with("elementwise[bf16,bf16,bf16,bf16|full,full,row|32768x4096]"),
        "{k1}"
    );
}

#[test]
fn row_signatures_name_kind_shape_dtype_and_affine() {
    let sm = RowProblem::softmax(16384, 3072, DType::Bf16);
    let s = sm.signature();
    assert_eq!(
        (s.op.as_str(), s.shape.clone(), s.dtypes.clone()),
        ("row_softmax", vec![16384, 3072], vec![DType::Bf16])
    );
    let ln = RowProblem::layernorm(16384, 3072, DType::Bf16, false, false, 1e-5);
    let ln_affine = RowProblem::layernorm(16384, 3072, DType::Bf16, true, true, 1e-5);
    let rms = RowProblem::rmsnorm(16384, 3072, DType::Bf16, false, 1e-6);
    let fams = [
        s.family(),
        ln.signature().family(),
        ln_affine.signature().family(),
        rms.signature().family(),
    ];
    for i in 0..fams.len() {
        for j in i + 1..fams.len() {
            assert_ne!(fams[i], fams[j]);
        }
    }
    assert_ne!(
        ln.with_residual().signature().family(),
        ln.signature().family()
    );
    // eps is a kernel argument, not part of the key.
    assert_eq!(
        RowProblem::layernorm(16384, 3072, DType::Bf16, false, false, 1e-6).signature(),
        ln.signature()
    );
    // Row kernels fingerprint the template at a canonical row length, so tuned shapes of one
    // op share a family and the nearest-bucket lookup can borrow across row lengths.
    let t = RowReduceTemplate;
    let a = TuneKey::new(&t, &sm, ARCH, &device()).unwrap();
    let b = TuneKey::new(
        &t,
        &RowProblem::softmax(4096, 16384, DType::Bf16),
        ARCH,
        &device(),
    )
    .unwrap();
    assert_eq!(a.family(), b.family());
    assert_ne!(a, b);
}

#[test]
fn lookup_serves_exact_then_nearest_then_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = TuningDb::open(dir.path().join("tuning.db")).unwrap();
    let t = ElementwiseTemplate;
    let p = chain8(DType::Bf16, 32768, 4096);
    let tuned = ElementwiseConfig {
        vec: 8,
        threads: 512,
        unroll: 4,
        grid: GridMode::OneShot,
    };
    assert_ne!(tuned, t.default_config(&p, ARCH));
    db.insert(entry(&t, &p, &tuned, 200.0)).unwrap();
    let pol = LookupPolicy::default();
    let exact = db.lookup(&t, &p, ARCH, &device(), &pol).unwrap();
    assert_eq!((exact.config, exact.source), (tuned, LookupSource::Exact));
    let near = db
        .lookup(&t, &chain8(DType::Bf16, 16384, 4096), ARCH, &device(), &pol)
        .unwrap();
    assert_eq!(near.config, tuned);
    assert!(
        matches!(near.source, LookupSource::NearestBucket { ref from, .. } if from == &vec![32768, 4096])
    );
    let far = chain8(DType::Bf16, 64, 64);
    let d = db.lookup(&t, &far, ARCH, &device(), &pol).unwrap();
    assert_eq!(
        (d.config, d.source),
        (t.default_config(&far, ARCH), LookupSource::Default)
    );

    // Row ops: an entry survives a reopen and is served to a nearby row length when it fits.
    let rt = RowReduceTemplate;
    let sm = RowProblem::softmax(16384, 3072, DType::Bf16);
    let space = MemorySpace::new(rt, None).space(&sm, ARCH);
    let pick = space[space.len() / 2];
    db.insert(entry(&rt, &sm, &pick, 150.0)).unwrap();
    let db = TuningDb::open(dir.path().join("tuning.db")).unwrap();
    let got = db.lookup(&rt, &sm, ARCH, &device(), &pol).unwrap();
    assert_eq!((got.config, got.source), (pick, LookupSource::Exact));
    let other = RowProblem::softmax(8192, 3072, DType::Bf16);
    let got = db.lookup(&rt, &other, ARCH, &device(), &pol).unwrap();
    assert!(
        matches!(got.source, LookupSource::NearestBucket { .. }),
        "{:?}",
        got.source
    );
    let ln = RowProblem::layernorm(16384, 3072, DType::Bf16, false, false, 1e-5);
    assert_eq!(
        db.lookup(&rt, &ln, ARCH, &device(), &pol).unwrap().source,
        LookupSource::Default
    );
}

fn arb_row_problem() -> impl Strategy<Value = RowProblem> {
    (
        0u8..5,
        1u32..100_000,
        1u32..70_000,
        prop_oneof![Just(DType::F32), Just(DType::F16), Just(DType::Bf16)],
    )
        .prop_map(|(k, rows, cols, d)| match k {
            0 => RowProblem::softmax(rows, cols, d),
            1 => RowProblem::layernorm(rows, cols, d, false, false, 1e-5),
            2 => RowProblem::layernorm(rows, cols, d, true, true, 1e-5).with_residual(),
            3 => RowProblem::rmsnorm(rows, cols, d, true, 1e-6),
            _ => RowProblem::rmsnorm(rows, cols, d, false, 1e-6).with_residual(),
        })
}

fn roundtrip(entries: Vec<DbEntry>) {
    let bytes = encode(&entries).unwrap();
    let back = decode(&bytes, Path::new("mem.db")).unwrap();
    assert_eq!(back, entries);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn row_entries_encode_and_decode(p in arb_row_problem(), pick in 0usize..1000, us in 1.0f64..1e6) {
        let t = RowReduceTemplate;
        let space = MemorySpace::new(t, None).space(&p, ARCH);
        let c = if space.is_empty() { t.default_config(&p, ARCH) } else { space[pick % space.len()] };
        let e = entry(&t, &p, &c, us);
        let back: rtx_synthesis::templates::reduce::RowConfig = serde_json::from_value(e.winner.config.clone()).unwrap();
        prop_assert_eq!(back, c);
        roundtrip(vec![e]);
    }

    #[test]
    fn elementwise_entries_encode_and_decode(
        rows in 1u32..70_000,
        cols in 1u32..70_000,
        d in prop_oneof![Just(DType::F32), Just(DType::F16), Just(DType::Bf16)],
        which in 0u8..3,
        pick in 0usize..1000,
    ) {
        let g = match which {
            0 => presets::chain8(d).unwrap(),
            1 => presets::silu_gate(d).unwrap(),
            _ => presets::bias_gelu(d, presets::GeluForm::Erf).unwrap(),
        };
        let p = ElementwiseProblem::new(g, rows, cols);
        let t = ElementwiseTemplate;
        let space = MemorySpace::new(t, None).space(&p, ARCH);
        prop_assert!(!space.is_empty());
        let c = space[pick % space.len()];
        let e = entry(&t, &p, &c, 10.0);
        prop_assert_eq!(&e.key.op, &p.signature());
        roundtrip(vec![e.clone(), entry(&t, &p, &t.default_config(&p, ARCH), 11.0)]);
    }
}

/// A dummy backend over the bounded elementwise space: "time" falls with the bytes each thread
/// keeps in flight (a fixed test input that steers the tuner, not a measurement); one config,
/// the fastest of all, computes a wrong result.
struct DummyMemBackend {
    wrong: ElementwiseConfig,
    verifies: AtomicUsize,
}

impl DummyMemBackend {
    fn model_us(c: &ElementwiseConfig) -> f64 {
        let in_flight = (c.vec * c.unroll) as f64 * (c.threads as f64).sqrt();
        1000.0 / in_flight
    }
}

impl TuneBackend<MemorySpace<ElementwiseTemplate>> for DummyMemBackend {
    fn compile(
        &self,
        task: &TuneTask<'_, MemorySpace<ElementwiseTemplate>>,
        config: &ElementwiseConfig,
    ) -> Result<ResourceUsage, CandidateError> {
        task.template.emit(task.problem, config, task.arch)?;
        Ok(ResourceUsage::default())
    }

    fn compile_parallelism(&self) -> usize {
        1
    }

    fn verify(
        &self,
        _task: &TuneTask<'_, MemorySpace<ElementwiseTemplate>>,
        config: &ElementwiseConfig,
        _seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        self.verifies.fetch_add(1, Ordering::Relaxed);
        let rel_err = if *config == self.wrong { 0.5 } else { 1e-3 };
        Ok(VerifyReport {
            rel_err,
            bound: 2e-2,
        })
    }

    fn time(
        &self,
        _task: &TuneTask<'_, MemorySpace<ElementwiseTemplate>>,
        config: &ElementwiseConfig,
        protocol: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let us = Self::model_us(config);
        run_protocol(protocol, |_| Ok(us))
    }
}

#[test]
fn tuner_picks_the_fastest_verified_memory_config_and_refuses_a_wrong_one() {
    let space = MemorySpace::new(ElementwiseTemplate, None);
    let p = chain8(DType::Bf16, 32768, 4096);
    let configs = space.space(&p, ARCH);
    let by_speed = |a: &&ElementwiseConfig, b: &&ElementwiseConfig| {
        DummyMemBackend::model_us(a).total_cmp(&DummyMemBackend::model_us(b))
    };
    let mut sorted: Vec<&ElementwiseConfig> = configs.iter().collect();
    sorted.sort_by(by_speed);
    let wrong = *sorted[0];
    let backend = DummyMemBackend {
        wrong,
        verifies: AtomicUsize::new(0),
    };
    let protocol = MeasureProtocol {
        warmup: Warmup::Iters(0),
        min_reps: 3,
        max_reps: 3,
        flush_l2: false,
        ..MeasureProtocol::default()
    };
    let tuner = Tuner::new(TuneOptions {
        overlap_compile: false,
        ..TuneOptions::default()
    });
    let outcome = tuner
        .tune(
            &space,
            &p,
            ARCH,
            &backend,
            &mut Exhaustive::new(),
            &protocol,
            &mut NoProgress,
        )
        .unwrap();
    assert_ne!(outcome.best.config, wrong, "a wrong config never wins");
    let best_us = outcome.best.final_stats().unwrap().median_us;
    let fastest_verified = sorted
        .iter()
        .skip(1)
        .map(|c| DummyMemBackend::model_us(c))
        .next()
        .unwrap();
    assert!(
        (best_us - fastest_verified).abs() <= 0.03 * fastest_verified,
        "{best_us} vs {fastest_verified}"
    );
    let rec = outcome.table.iter().find(|r| r.config == wrong).unwrap();
    assert!(
        matches!(
            &rec.result,
            CandidateResult::Failed(CandidateError::WrongResult { .. })
        ),
        "{:?}",
        rec.result
    );
    assert!(backend.verifies.load(Ordering::Relaxed) >= configs.len());
    // The outcome becomes a database entry that serves the bare template.
    let e = DbEntry::from_outcome(&space, &p, ARCH, &device(), &outcome, 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
    db.insert(e).unwrap();
    let found = db
        .lookup(
            &ElementwiseTemplate,
            &p,
            ARCH,
            &device(),
            &LookupPolicy::default(),
        )
        .unwrap();
    assert_eq!(
        (found.config, found.source),
        (outcome.best.config, LookupSource::Exact)
    );
    assert!(found.fallbacks.iter().all(|c| *c != wrong));
    // The bounded space is what the bench tunes: a few dozen configs, all 8- or 16-byte accesses.
    assert!(configs.len() <= 48 && configs.iter().all(|c| c.vec * 2 >= 8));
    assert!(ElementwiseTemplate.bytes_moved(&p) >= 3 * (256u64 << 20));
}
