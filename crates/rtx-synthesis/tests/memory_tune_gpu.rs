//! GPU test of memory-bound tuning (skips without a device or NVRTC): tunes softmax bf16 and
//! the fused 8-op chain bf16 on a small budget into a fresh tuning database, checks that the
//! winner is served back from the database (exact for the tuned shape, nearest bucket for a
//! neighbour) and that the served config verifies again on fresh inputs. Prints one line per op
//! with the winner's and the default's GB/s.

use rtx_runtime::Device;
use rtx_synthesis::aot::KernelCache;
use rtx_synthesis::synth::{MemoryGpuBackend, MemoryOp, StrategyKind, Synth, TuneRequest};
use rtx_synthesis::templates::elementwise::{presets, ElementwiseProblem, ElementwiseTemplate};
use rtx_synthesis::templates::reduce::{RowProblem, RowReduceTemplate};
use rtx_synthesis::templates::Template;
use rtx_synthesis::tuner::{LookupSource, MeasureProtocol, TuneBackend, TuneTask, TuningDb};
use rtx_synthesis::DType;
use std::time::Duration;
mod gpu_support;
use gpu_support::device_or_skip;

fn request() -> TuneRequest<'static> {
    TuneRequest {
        strategy: StrategyKind::Exhaustive,
        time_budget: Duration::from_secs(60),
        space_limit: Some(8),
        protocol: MeasureProtocol {
            min_reps: 5,
            max_reps: 40,
            max_time_ms: 200.0,
            ..MeasureProtocol::default()
        },
        store: true,
        ..TuneRequest::default()
    }
}

/// Re-verifies `config` on fresh inputs through a separate backend.
fn verify_again<T: MemoryOp>(
    device: &Device,
    cache: &std::sync::Arc<KernelCache>,
    t: &T,
    p: &T::Problem,
    config: &T::Config,
    synth: &Synth,
) {
    let backend = MemoryGpuBackend::<T>::with_device(device.clone(), cache.clone());
    let task = TuneTask {
        template: t,
        problem: p,
        arch: synth.arch(),
    };
    for seed in [0x1234u64, 0xfeed] {
        let r = backend
            .verify(&task, config, seed)
            .expect("verification ran");
        assert!(
            r.passed(),
            "served config {config:?} fails on fresh inputs: {r:?}"
        );
    }
}

#[test]
fn tunes_softmax_and_chain8_and_serves_the_winners() {
    let Some(device) = device_or_skip("tunes_softmax_and_chain8_and_serves_the_winners") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("tuning.db");
    let cache = KernelCache::open_default().expect("kernel cache");
    let synth = Synth::with_stores(&device, cache, TuningDb::open(&db_path).unwrap()).unwrap();
    let cache = synth.cache().clone();

    // Softmax bf16, 4096 x 3072 (48 MiB in + 48 MiB out).
    let sm = RowProblem::softmax(4096, 3072, DType::Bf16);
    let r = synth.tune_rows(&sm, &request()).expect("softmax tuning");
    let best: rtx_synthesis::templates::reduce::RowConfig =
        serde_json::from_value(r.outcome.best.config.clone()).unwrap();
    let best_us = r.best_us().expect("a measured winner");
    println!(
        "softmax bf16 4096x3072: winner {best:?} {:.1} us {:.0} GB/s; default {} {:?} us; {} measured, {} failed",
        best_us,
        r.gbps(best_us),
        r.default_config,
        r.default_us,
        r.outcome.measured,
        r.outcome.failed
    );
    assert!(r.stored && r.outcome.measured >= 2);
    let served = synth.row_config(&sm).unwrap();
    assert_eq!(
        (served.config, served.source.clone()),
        (best, LookupSource::Exact)
    );
    verify_again(
        &device,
        &cache,
        &RowReduceTemplate,
        &sm,
        &served.config,
        &synth,
    );
    let near = synth
        .row_config(&RowProblem::softmax(8192, 3072, DType::Bf16))
        .unwrap();
    assert!(
        matches!(near.source, LookupSource::NearestBucket { .. }),
        "{:?}",
        near.source
    );

    // The fused 8-op chain bf16, 4096 x 4096 (3 x 32 MiB + a row).
    let ch = ElementwiseProblem::new(presets::chain8(DType::Bf16).unwrap(), 4096, 4096);
    let r = synth
        .tune_elementwise(&ch, &request())
        .expect("chain8 tuning");
    let best: rtx_synthesis::templates::elementwise::ElementwiseConfig =
        serde_json::from_value(r.outcome.best.config.clone()).unwrap();
    let best_us = r.best_us().expect("a measured winner");
    println!(
        "chain8 bf16 4096x4096: winner {best:?} {:.1} us {:.0} GB/s; default {} {:?} us; speedup {:?}",
        best_us,
        r.gbps(best_us),
        r.default_config,
        r.default_us,
        r.speedup()
    );
    assert!(
        r.default_us.is_some(),
        "the default is timed under the same protocol"
    );
    let served = synth.elementwise_config(&ch).unwrap();
    assert_eq!(
        (served.config, served.source.clone()),
        (best, LookupSource::Exact)
    );
    verify_again(
        &device,
        &cache,
        &ElementwiseTemplate,
        &ch,
        &served.config,
        &synth,
    );

    // A reopened database serves the same winners.
    drop(synth);
    let synth = Synth::with_stores(
        &device,
        KernelCache::open_default().unwrap(),
        TuningDb::open(&db_path).unwrap(),
    )
    .unwrap();
    assert_eq!(synth.elementwise_config(&ch).unwrap().config, best);
    assert_eq!(synth.row_config(&sm).unwrap().source, LookupSource::Exact);
    // The default config is what an untuned problem gets.
    let other = ElementwiseProblem::new(presets::silu_gate(DType::Bf16).unwrap(), 4096, 4096);
    let d = synth.elementwise_config(&other).unwrap();
    assert_eq!(
        (d.config, d.source),
        (
            ElementwiseTemplate.default_config(&other, synth.arch()),
            LookupSource::Default
        )
    );
}
