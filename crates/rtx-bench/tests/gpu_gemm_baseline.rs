//! On a GPU: cuBLAS (and the sample candidate) on small and odd shapes, verified against the
//! sampled f64 reference. Skips without a GPU.

use rtx_bench::registry::RegistryOptions;
use rtx_bench::report::CaseStatus;
use rtx_bench::suites::gemm::run_problems;
use rtx_bench::suites::SuiteContext;
use rtx_bench::timing::TimingConfig;
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::DType;

#[test]
fn cublas_and_sample_results_are_verified() {
    let gpu = match rtx_bench::gpu::detect() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("SKIP cublas_and_sample_results_are_verified: {e}");
            return;
        }
    };
    let ctx = SuiteContext {
        gpu: Some(&gpu),
        quick: true,
        timing: TimingConfig {
            min_samples: 3,
            max_samples: 5,
            ..TimingConfig::quick()
        },
        registry: RegistryOptions::quick(),
        compile_archs: vec![gpu.arch],
        show_progress: false,
        tune: None,
        gemm_filter: Default::default(),
        checkpoint: None,
    };
    let mut problems = Vec::new();
    for d in DType::ALL {
        problems.push(GemmProblem::nn(256, 256, 256, d));
        problems.push(GemmProblem::nn(100, 70, 33, d));
    }
    let cases = run_problems(&ctx, &problems).unwrap();
    let mut cublas = 0;
    for c in &cases {
        assert!(!matches!(c.status, CaseStatus::Failed { .. }), "{c:?}");
        if c.is_measured() {
            let v = c
                .verified
                .unwrap_or_else(|| panic!("unverified case {c:?}"));
            assert!(v.ok, "{}: rel_err {} > {}", c.name, v.rel_err, v.bound);
            assert!(c.median_us.unwrap() > 0.0);
            cublas += c.name.starts_with("cublas ") as usize;
        }
    }
    assert_eq!(cublas, problems.len(), "{cases:#?}");
    assert!(cases
        .iter()
        .any(|c| c.name.starts_with("sample-naive ") && c.baselines.cublas.is_some()));
    // Every measured candidate's cuBLAS figure was timed alternately with it.
    for c in cases
        .iter()
        .filter(|c| c.is_measured() && !c.name.starts_with("cublas "))
    {
        let b = c
            .baselines
            .cublas
            .unwrap_or_else(|| panic!("{} has no cuBLAS baseline", c.name));
        assert!(b.interleaved && b.median_us > 0.0, "{}: {b:?}", c.name);
    }
}
