//! GPU test of the profiler: measures every ceiling on device 0, prints each figure next to its
//! datasheet value (lines prefixed `PROFILE`), checks plausibility bounds only (no timing is
//! asserted), and round-trips the profile through a `ProfileStore` in a temporary
//! `RTX_CACHE_DIR` (load without re-measuring, then `reprofile`).
//!
//! Skips with a printed reason without a GPU or without NVRTC.

use rtx_runtime::Device;
use rtx_synthesis::aot::nvrtc_or_skip;
use rtx_synthesis::profiler::{
    measure_profile, profile_device, profile_key, MeasureOptions, ProfileStore, Quantity,
};
use rtx_synthesis::DType;
use std::time::Instant;

/// The device-to-device copy the PyTorch anchors measured on the lent H200 (GB/s,
/// `shared/anchors/h200-2026-12-02.json`, read + written bytes).
const H200_ANCHOR_COPY_GBPS: f64 = 4250.5;

#[test]
fn measures_every_ceiling_and_keeps_the_profile() {
    match Device::try_count() {
        Ok(0) | Err(_) => {
            eprintln!(
                "SKIP profiler_gpu: no CUDA device ({})",
                Device::try_count()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "0 devices".into())
            );
            return;
        }
        Ok(_) => {}
    }
    if !nvrtc_or_skip("profiler_gpu") {
        return;
    }
    let started = Instant::now();
    let cache = tempfile::tempdir().unwrap();
    // The only test in this binary: no other thread reads the environment.
    std::env::set_var("RTX_CACHE_DIR", cache.path());
    let dev = Device::open(0).unwrap();
    let info = dev.info().clone();
    eprintln!(
        "PROFILE device {} cc {}.{} driver {:?} {} SMs clock {} MHz mem clock {} MHz bus {} bits L2 {} MiB",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.driver_version,
        info.sm_count,
        info.clock_khz / 1000,
        info.mem_clock_khz / 1000,
        info.mem_bus_width_bits,
        info.l2_bytes >> 20
    );

    let opts = MeasureOptions::default();
    let t = Instant::now();
    let (profile, report) = measure_profile(&dev, &opts).unwrap();
    eprintln!("PROFILE measured in {:.2} s", t.elapsed().as_secs_f64());
    for line in report.lines(profile.datasheet.as_ref()) {
        eprintln!("PROFILE {line}");
    }
    let c = profile.measured;
    let copy = c.copy_gbps.expect("copy bandwidth measured");
    if info.name.contains("H200") {
        let r = copy / H200_ANCHOR_COPY_GBPS;
        eprintln!(
            "PROFILE anchor copy {H200_ANCHOR_COPY_GBPS} GB/s (PyTorch, shared/anchors): measured {copy:.1} GB/s, ratio {r:.3}, within 10%: {}",
            (r - 1.0).abs() <= 0.10
        );
    }

    // Plausibility only.
    let caps = &report.capabilities;
    assert_eq!(caps.sm_count, info.sm_count);
    let fp32 = c.fp32_tflops.expect("fp32 measured");
    assert!(fp32 > 0.0);
    if let Some(d) = &profile.datasheet {
        let r = copy / d.mem_bandwidth_gbps;
        assert!(
            (0.2..=1.1).contains(&r),
            "copy {copy} GB/s is {r:.3} of the datasheet's {}",
            d.mem_bandwidth_gbps
        );
        let r = fp32 / d.fp32_tflops;
        assert!(
            (0.2..=1.1).contains(&r),
            "fp32 {fp32} TFLOP/s is {r:.3} of the datasheet's {}",
            d.fp32_tflops
        );
    }
    if caps.tensor_cores.has_mma_sync() {
        for (dtype, v) in [
            (DType::Tf32, c.tf32_tflops),
            (DType::F16, c.f16_tflops),
            (DType::Bf16, c.bf16_tflops),
        ] {
            let v = v.unwrap_or_else(|| panic!("{} tensor ceiling measured", dtype.name()));
            assert!(
                v > fp32,
                "{} tensor {v} TFLOP/s <= fp32 {fp32}",
                dtype.name()
            );
            let methods: Vec<&str> = report
                .figures_of(Quantity::TensorTflops(dtype))
                .map(|f| f.method.as_str())
                .collect();
            assert!(
                methods.iter().any(|m| m.starts_with("mma.sync")),
                "{methods:?}"
            );
            if caps.tensor_cores.has_wgmma() {
                assert!(
                    methods.iter().any(|m| m.starts_with("wgmma")),
                    "no wgmma figure for {}: {:?}",
                    dtype.name(),
                    report.failures
                );
            }
        }
    }
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let launch = c.launch_overhead_us.expect("launch overhead measured");
    assert!(launch > 0.0 && launch < 1000.0, "{launch} us per launch");
    assert_eq!(
        report.figures_of(Quantity::CopyGbps).count(),
        5,
        "4 kernels + driver copy"
    );
    for f in &report.figures {
        let want = match f.quantity {
            Quantity::LaunchHostUs | Quantity::LaunchDeviceUs => opts.launch_samples,
            _ => opts.runs,
        };
        assert_eq!(f.timing.runs, want, "{}", f.method);
        assert!(f.timing.min_ms <= f.timing.median_ms && f.timing.median_ms <= f.timing.max_ms);
    }

    // The saved profile is served without measuring again; `reprofile` replaces it.
    let store = ProfileStore::open_default().unwrap();
    assert!(store.dir().starts_with(cache.path()), "{:?}", store.dir());
    let path = store.save(&profile).unwrap();
    eprintln!("PROFILE saved {}", path.display());
    let t = Instant::now();
    let loaded = profile_device(&dev, false).unwrap();
    eprintln!("PROFILE loaded in {:.3} s", t.elapsed().as_secs_f64());
    assert_eq!(loaded, profile, "served from disk, bit for bit");
    assert_eq!(
        store.load(&profile_key(&info)).unwrap(),
        Some(profile.clone())
    );
    let t = Instant::now();
    let fresh = profile_device(&dev, true).unwrap();
    eprintln!(
        "PROFILE reprofiled in {:.2} s: copy {:.1} GB/s, fp32 {:.2}, bf16 {:.1} TFLOP/s, launch {:.2} us",
        t.elapsed().as_secs_f64(),
        fresh.measured.copy_gbps.unwrap_or(f64::NAN),
        fresh.measured.fp32_tflops.unwrap_or(f64::NAN),
        fresh.measured.bf16_tflops.unwrap_or(f64::NAN),
        fresh.measured.launch_overhead_us.unwrap_or(f64::NAN)
    );
    assert_eq!(fresh.key(), profile.key());
    assert!(
        fresh.measured.copy_gbps.is_some()
            && fresh.measured.bf16_tflops.is_some() == c.bf16_tflops.is_some()
    );
    assert_eq!(store.load(&fresh.key()).unwrap(), Some(fresh));
    eprintln!("PROFILE total {:.2} s", started.elapsed().as_secs_f64());
}
