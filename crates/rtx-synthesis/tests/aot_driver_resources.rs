//! GPU test: the second source of resource reports. Compiles kernels with known resource use,
//! loads each cubin on device 0 and reads `cuFuncGetAttribute` (NUM_REGS, LOCAL_SIZE_BYTES,
//! SHARED_SIZE_BYTES, MAX_THREADS_PER_BLOCK) into a `ResourceReport`, then checks it against
//! ptxas' report when the NVRTC log has one (and prints `RESOURCES` lines with both).
//!
//! Also checks that a repeated compile of the same program still carries ptxas lines on a
//! machine with a CUDA driver (NVRTC >= 12.9 caches compiles there unless `--no-cache`).
//!
//! Skips with a printed reason without a GPU or without NVRTC.

use rtx_synthesis::aot::{compile, resource_report, ResourceReport, ResourceSource, Toolchain};
use rtx_synthesis::templates::KernelSource;
use rtx_synthesis::Arch;
mod gpu_support;
use gpu_support::device_or_skip;

const KERNELS: &str = r#"
extern "C" __global__ void with_smem(const float* x, float* y) {
  __shared__ float tile[32][33];
  __shared__ double d[64];
  int t = threadIdx.x;
  tile[t % 32][t % 33] = x[t]; d[t % 64] = x[t];
  __syncthreads();
  y[t] = tile[(t + 1) % 32][t % 33] + d[(t + 3) % 64];
}
extern "C" __global__ void with_stack(const float* x, float* y, int k) {
  float a[64];
  for (int i = 0; i < k; ++i) a[(i * 7 + k) & 63] = x[i * threadIdx.x];
  y[threadIdx.x] = a[x[k] > 0 ? k & 63 : 3];
}
"#;

#[test]
fn driver_attributes_give_the_same_report_as_ptxas() {
    let Some(dev) = device_or_skip("driver_attributes_give_the_same_report_as_ptxas") else {
        return;
    };
    let (major, minor) = dev.info().compute_capability;
    let arch = Arch::for_compute_capability(major, minor).expect("a supported GPU");
    let src = KernelSource {
        entry: "with_smem".into(),
        code: KERNELS.into(),
        template: "aot_driver_resources".into(),
        template_version: 1,
        options: vec![],
    };
    let first = compile(&src, arch).unwrap();
    let again = compile(&src, arch).unwrap();
    let module = dev.load_module(&first.cubin).unwrap();
    for entry in ["with_smem", "with_stack"] {
        let f = module.function(entry).unwrap();
        let driver = ResourceReport::from_driver(entry, arch, &f.attributes().unwrap());
        let from_log = first.ptxas_report(entry);
        println!(
            "RESOURCES {arch} {entry}: driver {driver:?}; ptxas {from_log:?}; repeat compile ptxas lines: {}",
            again.ptxas_report(entry).is_ok()
        );
        assert_eq!(driver.source, ResourceSource::DriverAttributes);
        assert!(driver.registers > 0 && driver.max_threads_per_block.is_some_and(|t| t > 0));
        match entry {
            "with_smem" => {
                assert_eq!(driver.shared_bytes, 32 * 33 * 4 + 64 * 8);
                assert_eq!(driver.local_bytes, 0);
                assert_eq!(driver.spills(), Some(false));
            }
            _ => {
                assert_eq!(
                    driver.local_bytes,
                    64 * 4,
                    "the local array is local memory"
                );
                assert_eq!(driver.shared_bytes, 0);
            }
        }
        // Whichever source serves it, the combined report exists; without ptxas lines it is
        // the driver's.
        let best = resource_report(&first.resources, entry, arch, Some(&f)).unwrap();
        match from_log {
            Ok(p) => {
                assert_eq!(best, p);
                assert_eq!(p.registers, driver.registers, "{entry}: registers");
                assert_eq!(p.shared_bytes, driver.shared_bytes, "{entry}: smem");
                assert_eq!(p.local_bytes, driver.local_bytes, "{entry}: local memory");
            }
            Err(why) => {
                eprintln!("SKIP ptxas comparison for {entry}: {why}");
                assert_eq!(best, driver);
            }
        }
        // The root-cause fix: with `--no-cache`, a repeat compile runs ptxas again (a first
        // compile with lines and a repeat without is NVRTC's own cache answering).
        if let (true, Err(why)) = (first.ptxas_report(entry).is_ok(), again.ptxas_report(entry)) {
            panic!(
                "the second compile of the same program has no ptxas report ({why}); NVRTC {:?}, options {:?}",
                Toolchain::get().unwrap().nvrtc_version,
                rtx_synthesis::aot::options_for(&src, arch, Toolchain::get().unwrap())
            );
        }
    }
}
