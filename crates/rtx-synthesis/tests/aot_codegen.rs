//! The `cargo xtask codegen` path end to end on a small manifest
//! (`tests/fixtures/ops/small.json`): plan for sm_90a and sm_120, compile into a bundle folder,
//! then open the bundle as a deployment would and look every needed kernel up, asserting that
//! the lookups make zero NVRTC calls; `--check` then finds the bundle current. With a GPU, each
//! cubin for the device's architecture is also loaded as a module.
//!
//! Without NVRTC it prints `SKIP ...: <reason>` and passes, unless `RTX_REQUIRE_NVRTC=1`.

use rtx_synthesis::aot::codegen::{self, OpsManifest};
use rtx_synthesis::aot::{nvrtc_calls, nvrtc_or_skip, Bundle};
use rtx_synthesis::Arch;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The manifest, embedded so the test binary also runs from a `cargo xtask gpu-bundle` folder.
const SMALL: &[u8] = include_bytes!("fixtures/ops/small.json");

#[test]
fn codegen_bundle_serves_every_kernel_without_nvrtc() {
    if !nvrtc_or_skip("codegen_bundle_serves_every_kernel_without_nvrtc") {
        return;
    }
    let archs = codegen::parse_archs("sm_90a,sm_120").unwrap();
    let path = Path::new("tests/fixtures/ops/small.json");
    let m = OpsManifest::parse(SMALL, path).unwrap();
    let plan = codegen::plan(&archs, Some((&m, path)), None).unwrap();
    assert_eq!(plan.kernels.len(), 6, "3 ops x 2 archs");
    let dir = tempfile::tempdir().unwrap();
    let reported = AtomicUsize::new(0);
    let before = nvrtc_calls();
    let built = codegen::build(&plan, dir.path(), Some(2), &|p| {
        assert!(p.done <= p.total && p.compile_time.is_some());
        reported.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    assert_eq!(nvrtc_calls() - before, 6, "one NVRTC call per kernel");
    assert_eq!(
        reported.load(Ordering::SeqCst),
        6,
        "progress for every kernel"
    );
    assert_eq!(built.manifest.entries.len(), 6);

    // The deployment side: open the bundle and look every kernel up by its source.
    let calls = nvrtc_calls();
    let bundle = Bundle::open(dir.path()).unwrap();
    let again = codegen::plan(&archs, Some((&m, path)), None).unwrap();
    for k in &again.kernels {
        let cubin = bundle
            .get_source(&k.source, k.arch)
            .unwrap_or_else(|| panic!("{} ({}) is not in the bundle", k.source.entry, k.arch));
        let (kind, _) = rtx_runtime::prepare_image(cubin).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kind, rtx_runtime::ImageKind::Cubin);
        let e = bundle.entry(&k.source.entry, k.arch).unwrap();
        assert_eq!(e.template, k.source.template);
    }
    assert_eq!(
        nvrtc_calls(),
        calls,
        "serving from the bundle makes no NVRTC call"
    );
    let check = codegen::check(&again, dir.path()).unwrap();
    assert!(check.is_current(), "{check:?}");
    let only90 = codegen::plan(&[Arch::Sm90a], Some((&m, path)), None).unwrap();
    assert_eq!(codegen::check(&only90, dir.path()).unwrap().extra.len(), 3);
    assert_eq!(nvrtc_calls(), calls);

    match rtx_runtime::Device::try_count() {
        Ok(n) if n > 0 => {
            let dev = rtx_runtime::Device::open(0).unwrap();
            let (ma, mi) = dev.info().compute_capability;
            let arch = Arch::for_compute_capability(ma, mi).unwrap();
            for k in again.kernels.iter().filter(|k| k.arch == arch) {
                let module = dev
                    .load_module(bundle.get_source(&k.source, arch).unwrap())
                    .unwrap();
                module.function(&k.source.entry).unwrap();
            }
            assert_eq!(
                nvrtc_calls(),
                calls,
                "loading on the device makes no NVRTC call"
            );
        }
        other => eprintln!("SKIP codegen module load: no CUDA device ({other:?})"),
    }
}
