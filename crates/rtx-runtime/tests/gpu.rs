//! GPU integration tests. Each test prints `SKIP <name>: no CUDA device (<reason>)` and returns
//! when no device is usable (set `RTX_REQUIRE_GPU=1` to make that a failure instead). Tests take a
//! process-wide lock so allocator statistics are not disturbed by concurrent tests.

use rtx_runtime::{
    blas::{Blas, BlasDtype, BlasGemm},
    encode_tensor_map_2d, Device, Event, KernelArgs, LaunchConfig, RuntimeError, Stream, Swizzle,
    TensorMap2d, TensorMapDtype,
};
use std::sync::{Mutex, MutexGuard};

static GPU: Mutex<()> = Mutex::new(());

struct Gpu {
    dev: Device,
    stream: Stream,
    _lock: MutexGuard<'static, ()>,
}

fn gpu(name: &str) -> Option<Gpu> {
    let lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let reason = match Device::try_count() {
        Ok(n) if n > 0 => {
            let dev = Device::open(0).unwrap_or_else(|e| {
                panic!("{name}: {n} device(s) reported but Device::open(0) failed: {e}")
            });
            let stream = dev
                .new_stream()
                .unwrap_or_else(|e| panic!("{name}: new_stream failed: {e}"));
            return Some(Gpu {
                dev,
                stream,
                _lock: lock,
            });
        }
        Ok(_) => "driver loaded, 0 devices".to_string(),
        Err(e) => e.to_string(),
    };
    if std::env::var_os("RTX_REQUIRE_GPU").is_some() {
        panic!("{name}: RTX_REQUIRE_GPU is set but no CUDA device is usable ({reason})");
    }
    eprintln!("SKIP {name}: no CUDA device ({reason})");
    None
}

/// Loads a module, failing with the driver / NVRTC versions (a PTX ISA newer than the driver
/// supports shows up here as CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
fn load(g: &Gpu, image: &[u8], what: &str) -> rtx_runtime::Module {
    g.dev.load_module(image).unwrap_or_else(|e| {
        panic!(
            "loading {what} failed: {e} (driver {:?}, NVRTC {:?})",
            g.dev.info().driver_version,
            g.dev.info().nvrtc_version
        )
    })
}

/// Deterministic pseudo-random numbers (xorshift64*), no extra dependency.
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in [-1, 1).
    fn f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }
}

#[test]
fn count_never_panics_and_open_out_of_range_is_typed() {
    let n = Device::count();
    assert_eq!(n, Device::try_count().unwrap_or(0));
    if !rtx_runtime::driver_available() {
        assert_eq!(n, 0, "no driver library but count() = {n}");
    }
    match Device::open(n) {
        Err(RuntimeError::NoDevice { ordinal, count }) => {
            assert_eq!((ordinal, count), (n, n));
        }
        Err(RuntimeError::NoDriver) | Err(RuntimeError::Driver { .. }) if n == 0 => {}
        other => panic!("Device::open({n}) with {n} device(s): expected an error, got {other:?}"),
    }
}

#[test]
fn device_info_is_sane() {
    let Some(g) = gpu("device_info_is_sane") else {
        return;
    };
    let i = g.dev.info();
    eprintln!("device info: {i:#?}");
    assert!(!i.name.is_empty(), "empty device name");
    assert!(i.sm_count > 0, "sm_count = {}", i.sm_count);
    assert!(
        i.compute_capability.0 >= 7,
        "compute capability {:?} < 7.0",
        i.compute_capability
    );
    assert_eq!(i.warp_size, 32, "warp size");
    assert!(
        i.max_threads_per_block >= 1024,
        "{}",
        i.max_threads_per_block
    );
    assert!(i.max_block_dims[0] >= 1024 && i.max_block_dims[2] >= 64);
    assert!(i.max_grid_dims[0] >= 65535 && i.max_grid_dims[1] >= 65535);
    assert!(
        i.smem_per_block_optin >= i.smem_per_block && i.smem_per_block >= 48 * 1024,
        "smem per block {} / opt-in {}",
        i.smem_per_block,
        i.smem_per_block_optin
    );
    assert!(i.smem_per_sm >= i.smem_per_block_optin);
    assert!(i.regs_per_sm >= 65536 && i.regs_per_block >= 32768);
    assert!(i.l2_bytes >= 1 << 20, "L2 {} bytes", i.l2_bytes);
    assert!(i.mem_bus_width_bits > 0);
    assert!(i.total_mem >= 1 << 30, "total memory {} bytes", i.total_mem);
    assert!(
        i.driver_version.0 >= 11,
        "driver version {:?}",
        i.driver_version
    );
    let (free, total) = g.dev.mem_info().expect("mem_info");
    assert!(
        free > 0 && free <= total,
        "mem_info free {free} total {total}"
    );
    assert!(
        total as u64 <= i.total_mem && total as u64 >= i.total_mem / 10 * 9,
        "mem_info total {total} vs cuDeviceTotalMem {}",
        i.total_mem
    );
    // The same ordinal opened twice is the same device (one allocator).
    let again = Device::open(0).expect("reopen");
    assert!(std::ptr::eq(again.allocator(), g.dev.allocator()));
}

#[test]
fn upload_download_round_trip_and_copy() {
    let Some(g) = gpu("upload_download_round_trip_and_copy") else {
        return;
    };
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for n in [1usize, 7, 1000, (1 << 20) + 3, 3 << 22] {
        let host: Vec<u32> = (0..n).map(|_| rng.next_u32()).collect();
        let mut buf = g.dev.alloc(n * 4, &g.stream).expect("alloc");
        assert_eq!(buf.len(), n * 4);
        assert!(buf.capacity() >= buf.len());
        buf.upload(&host, &g.stream).expect("upload");
        let back: Vec<u32> = buf.download(&g.stream).expect("download");
        if let Some(i) = (0..n).find(|&i| back[i] != host[i]) {
            panic!(
                "round trip of {n} u32: first mismatch at {i}: got {:#x}, uploaded {:#x}",
                back[i], host[i]
            );
        }
        let mut copy = g.dev.alloc(n * 4, &g.stream).expect("alloc copy");
        copy.fill_u8(0, &g.stream).expect("fill");
        copy.copy_from(&buf, &g.stream).expect("copy_from");
        let back2: Vec<u32> = copy.download(&g.stream).expect("download copy");
        assert!(back2 == host, "device-to-device copy of {n} u32 differs");
    }
    // f32 / bf16 element types.
    let hf: Vec<f32> = (0..4099).map(|_| rng.f32()).collect();
    let mut b = g.dev.alloc(hf.len() * 4, &g.stream).unwrap();
    b.upload(&hf, &g.stream).unwrap();
    assert_eq!(b.download::<f32>(&g.stream).unwrap(), hf);
    let hb: Vec<half::bf16> = hf.iter().map(|&x| half::bf16::from_f32(x)).collect();
    let mut b = g.dev.alloc(hb.len() * 2, &g.stream).unwrap();
    b.upload(&hb, &g.stream).unwrap();
    assert_eq!(b.download::<half::bf16>(&g.stream).unwrap(), hb);
    // Oversized upload and misaligned download are typed errors.
    let small = g.dev.alloc(6, &g.stream).unwrap();
    assert!(matches!(
        small.download::<u32>(&g.stream),
        Err(RuntimeError::InvalidArgument { .. })
    ));
    let mut small = small;
    assert!(matches!(
        small.upload(&[0u32; 2], &g.stream),
        Err(RuntimeError::InvalidArgument { .. })
    ));
}

#[test]
fn fill_u8_poisons_every_byte() {
    let Some(g) = gpu("fill_u8_poisons_every_byte") else {
        return;
    };
    for n in [1usize, 513, 1 << 20, (5 << 20) + 11] {
        let mut buf = g.dev.alloc(n, &g.stream).unwrap();
        buf.upload(&vec![0u8; n], &g.stream).unwrap();
        buf.fill_u8(0xAB, &g.stream).unwrap();
        let back: Vec<u8> = buf.download(&g.stream).unwrap();
        assert_eq!(back.len(), n);
        if let Some(i) = back.iter().position(|&b| b != 0xAB) {
            panic!("fill_u8(0xAB) over {n} bytes: byte {i} is {:#x}", back[i]);
        }
    }
    // As f32, 0xFF poison is NaN.
    let mut buf = g.dev.alloc(64, &g.stream).unwrap();
    buf.fill_u8(0xFF, &g.stream).unwrap();
    assert!(buf
        .download::<f32>(&g.stream)
        .unwrap()
        .iter()
        .all(|x| x.is_nan()));
}

#[test]
fn event_timing_is_positive() {
    let Some(g) = gpu("event_timing_is_positive") else {
        return;
    };
    let start = Event::new(&g.dev).expect("event");
    let end = Event::new(&g.dev).expect("event");
    let mut buf = g.dev.alloc(256 << 20, &g.stream).unwrap();
    start.record(&g.stream).unwrap();
    for i in 0..8 {
        buf.fill_u8(i, &g.stream).unwrap();
    }
    end.record(&g.stream).unwrap();
    let ms = start.elapsed_ms(&end).expect("elapsed_ms");
    eprintln!("8 x memset of 256 MiB: {ms} ms (informational)");
    assert!(ms > 0.0 && ms.is_finite(), "elapsed {ms} ms");
    assert!(
        end.query().unwrap(),
        "end event not complete after elapsed_ms"
    );
    // A stream can wait on an event recorded elsewhere.
    let s2 = g.dev.new_stream().unwrap();
    s2.wait_event(&end).unwrap();
    s2.synchronize().unwrap();
    g.dev.synchronize().unwrap();
}

#[test]
fn absurd_allocation_is_out_of_memory_not_panic() {
    let Some(g) = gpu("absurd_allocation_is_out_of_memory_not_panic") else {
        return;
    };
    const PIB: usize = 1 << 50;
    let before = g.dev.allocator().stats();
    match g.dev.alloc(PIB, &g.stream) {
        Err(RuntimeError::OutOfMemory {
            requested,
            free,
            total,
        }) => {
            assert_eq!(requested, PIB, "OutOfMemory must report the requested size");
            assert!(total > 0 && free <= total, "free {free} total {total}");
            eprintln!("1 PiB request: OutOfMemory, free {free} of {total}");
        }
        Err(e) => panic!("1 PiB allocation: expected OutOfMemory, got {e}"),
        Ok(b) => panic!("1 PiB allocation succeeded?! ptr {:#x}", b.ptr()),
    }
    let after = g.dev.allocator().stats();
    assert_eq!(
        after.oom_retries,
        before.oom_retries + 1,
        "cache not emptied and retried"
    );
    assert_eq!(after.cached, 0, "cache must be empty after an OOM retry");
    // usize::MAX overflows the size classes: still OutOfMemory, not a panic.
    assert!(matches!(
        g.dev.alloc(usize::MAX, &g.stream),
        Err(RuntimeError::OutOfMemory { .. })
    ));
    // The allocator keeps working.
    let mut b = g.dev.alloc(1 << 20, &g.stream).expect("alloc after OOM");
    b.fill_u8(1, &g.stream).unwrap();
    g.stream.synchronize().unwrap();
}

#[test]
fn allocator_reuses_freed_blocks_on_the_same_stream() {
    let Some(g) = gpu("allocator_reuses_freed_blocks_on_the_same_stream") else {
        return;
    };
    let a = g.dev.allocator();
    a.empty_cache().unwrap();
    let s0 = a.stats();
    let b = g.dev.alloc(3 << 20, &g.stream).unwrap();
    let ptr = b.ptr();
    let s1 = a.stats();
    assert_eq!(s1.misses, s0.misses + 1);
    assert_eq!(s1.in_use, s0.in_use + b.capacity());
    assert!(s1.peak >= s1.in_use);
    drop(b);
    let s2 = a.stats();
    assert_eq!(s2.in_use, s0.in_use, "in_use after free");
    assert_eq!(s2.cached, s0.cached + (3 << 20), "freed block not cached");
    let b = g.dev.alloc((3 << 20) - 100, &g.stream).unwrap();
    let s3 = a.stats();
    assert_eq!(
        s3.hits,
        s2.hits + 1,
        "re-alloc of the same class was not a cache hit"
    );
    assert_eq!(b.ptr(), ptr, "cache hit should return the same block");
    drop(b);
    // Another stream does not get this stream's block.
    let other = g.dev.new_stream().unwrap();
    let c = g.dev.alloc(3 << 20, &other).unwrap();
    assert_ne!(c.ptr(), ptr, "block crossed streams");
    drop(c);
    let cached_before = a.stats().cached;
    drop(other); // retires the stream: its cached block goes back to the driver
    assert_eq!(a.stats().cached, cached_before - (3 << 20));
    let freed = a.empty_cache().unwrap();
    assert!(freed >= 3 << 20, "empty_cache freed {freed}");
    assert_eq!(a.stats().cached, 0);
    // Allocation through a stream of another device handle is refused cleanly (same device ok).
    let z = g.dev.alloc(0, &g.stream).unwrap();
    assert!(z.is_empty() && z.ptr() != 0);
}

#[test]
fn device_usable_from_other_threads_without_manual_binding() {
    let Some(g) = gpu("device_usable_from_other_threads_without_manual_binding") else {
        return;
    };
    let handles: Vec<_> = (0..4u32)
        .map(|t| {
            let dev = g.dev.clone();
            std::thread::spawn(move || -> Result<(), RuntimeError> {
                let s = dev.new_stream()?;
                let data: Vec<u32> = (0..10_000).map(|i| i * 31 + t).collect();
                let mut b = dev.alloc(data.len() * 4, &s)?;
                b.upload(&data, &s)?;
                assert_eq!(b.download::<u32>(&s)?, data, "thread {t} round trip");
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread panicked").expect("thread failed");
    }
}

const NOOP_PTX: &str = "\
.version 8.0
.target sm_80
.address_size 64
.visible .entry noop(.param .u64 p)
{
    ret;
}
";

#[test]
fn launch_limits_are_refused_before_the_driver() {
    let Some(g) = gpu("launch_limits_are_refused_before_the_driver") else {
        return;
    };
    let m = load(&g, NOOP_PTX.as_bytes(), "hand-written noop PTX");
    let f = m.function("noop").expect("function noop");
    let attrs = f.attributes().unwrap();
    eprintln!("noop attributes: {attrs:?}");
    assert_eq!(attrs.ptx_version, 80, "PTX version of noop");
    assert!(attrs.max_threads_per_block >= 1024);
    let launch =
        |cfg: LaunchConfig, args: &mut KernelArgs| unsafe { f.launch(&g.stream, &cfg, args) };
    let mut args = KernelArgs::new();
    args.u64(0);
    let expect_invalid = |r: Result<(), RuntimeError>, what: &str, needle: &str| match r {
        Err(RuntimeError::InvalidLaunch { reason }) => {
            assert!(
                reason.contains(needle),
                "{what}: reason `{reason}` lacks `{needle}`"
            )
        }
        other => panic!("{what}: expected InvalidLaunch, got {other:?}"),
    };
    expect_invalid(
        launch(LaunchConfig::new([1, 1, 1], [2048, 1, 1], 0), &mut args),
        "block 2048",
        "2048",
    );
    expect_invalid(
        launch(LaunchConfig::new([1, 1, 1], [32, 32, 2], 0), &mut args),
        "2048 threads",
        "threads per block",
    );
    expect_invalid(
        launch(LaunchConfig::new([1, 1 << 16, 1], [32, 1, 1], 0), &mut args),
        "grid.y",
        "grid.y",
    );
    expect_invalid(
        launch(LaunchConfig::new([0, 1, 1], [32, 1, 1], 0), &mut args),
        "empty grid",
        "grid.x is 0",
    );
    let optin = g.dev.info().smem_per_block_optin;
    expect_invalid(
        launch(
            LaunchConfig::new([1, 1, 1], [32, 1, 1], optin + 1),
            &mut args,
        ),
        "smem above opt-in",
        "opt-in",
    );
    expect_invalid(
        launch(
            LaunchConfig::new([1, 1, 1], [32, 1, 1], 64 << 10),
            &mut args,
        ),
        "64 KiB without opt-in",
        "set_max_dynamic_smem",
    );
    let mut bad_args = KernelArgs::new();
    bad_args.bytes(&[0u8; 8], 3);
    expect_invalid(
        launch(LaunchConfig::new([1, 1, 1], [32, 1, 1], 0), &mut bad_args),
        "bad argument alignment",
        "alignment",
    );
    assert!(f.set_max_dynamic_smem(optin + 1).is_err());
    // After opting in, 64 KiB launches; so do the exact limits.
    f.set_max_dynamic_smem(64 << 10)
        .expect("set_max_dynamic_smem");
    launch(
        LaunchConfig::new([1, 1, 1], [32, 1, 1], 64 << 10),
        &mut args,
    )
    .expect("64 KiB launch");
    launch(LaunchConfig::new([2, 3, 4], [1024, 1, 1], 0), &mut args).expect("1024 threads");
    g.stream.synchronize().expect("sync after noop launches");
    // Missing function and garbage images are typed errors.
    assert!(matches!(
        m.function("nope"),
        Err(RuntimeError::MissingFunction { name }) if name == "nope"
    ));
    assert!(matches!(
        g.dev.load_module(b"definitely not a module"),
        Err(RuntimeError::ModuleLoad { .. })
    ));
    match g.dev.load_module(
        b".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry x() { bogus; }\n",
    ) {
        Err(RuntimeError::ModuleLoad { kind, code, log }) => {
            eprintln!("bad PTX: {code}: {log}");
            assert_eq!(kind, "ptx");
            assert!(code.starts_with("CUDA_ERROR"), "{code}");
            assert!(
                !log.is_empty(),
                "JIT error log was empty for invalid PTX ({code})"
            );
        }
        other => panic!("invalid PTX: expected ModuleLoad, got {other:?}"),
    }
}

const AXPB_SRC: &str = r#"
struct Coef { float a; float b; };
extern "C" __global__ void axpb(const float* x, float* y, Coef c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = c.a * x[i] + c.b + (float)(i % 7u);
}
"#;

#[test]
fn nvrtc_kernel_runs_over_a_million_elements() {
    let Some(g) = gpu("nvrtc_kernel_runs_over_a_million_elements") else {
        return;
    };
    // SAFETY: only tries to dlopen libnvrtc.
    if !unsafe { rtx_runtime::cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP nvrtc_kernel_runs_over_a_million_elements: libnvrtc not loadable");
        return;
    }
    let ptx = rtx_runtime::cudarc::nvrtc::compile_ptx(AXPB_SRC).expect("NVRTC compile of axpb");
    let m = load(&g, ptx.to_src().as_bytes(), "NVRTC PTX of axpb");
    let f = m.function("axpb").expect("function axpb");
    eprintln!("axpb: {} registers", f.num_regs().unwrap());
    const N: usize = 1 << 20;
    // Small integers keep every operation exact, so the check is bit-exact whether or not the
    // compiler contracts a*x+b into an FMA.
    let x: Vec<f32> = (0..N).map(|i| ((i * 37) % 1000) as f32).collect();
    let mut dx = g.dev.alloc(N * 4, &g.stream).unwrap();
    let mut dy = g.dev.alloc(N * 4, &g.stream).unwrap();
    dx.upload(&x, &g.stream).unwrap();
    dy.fill_u8(0xFF, &g.stream).unwrap(); // NaN poison: untouched outputs show up
    let (a, b) = (2.0f32, 0.5f32);
    let mut coef = [0u8; 8];
    coef[..4].copy_from_slice(&a.to_ne_bytes());
    coef[4..].copy_from_slice(&b.to_ne_bytes());
    let mut args = KernelArgs::new();
    args.ptr(&dx).ptr(&dy).bytes(&coef, 4).u32(N as u32);
    let cfg = LaunchConfig::for_elements(N as u64, 256).unwrap();
    // SAFETY: arguments match `axpb(const float*, float*, Coef, unsigned)`; buffers hold N floats.
    unsafe { f.launch(&g.stream, &cfg, &mut args) }.expect("launch axpb");
    let y: Vec<f32> = dy.download(&g.stream).expect("download y");
    let mut bad = 0usize;
    for i in 0..N {
        let want = a * x[i] + b + (i % 7) as f32;
        if y[i] != want {
            if bad < 5 {
                eprintln!(
                    "y[{i}] = {} (bits {:#x}), want {want}",
                    y[i],
                    y[i].to_bits()
                );
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{bad} of {N} outputs wrong");
}

fn gemm_ref(p: &BlasGemm, a: &[f64], b: &[f64], c0: &[f64], batch: usize) -> Vec<f64> {
    let (m, n, k) = (p.m, p.n, p.k);
    let mut c = c0.to_vec();
    let at = |i: usize, l: usize| {
        if p.transa {
            a[batch * p.stride_a as usize + l * p.lda + i]
        } else {
            a[batch * p.stride_a as usize + i * p.lda + l]
        }
    };
    let bt = |l: usize, j: usize| {
        if p.transb {
            b[batch * p.stride_b as usize + j * p.ldb + l]
        } else {
            b[batch * p.stride_b as usize + l * p.ldb + j]
        }
    };
    for i in 0..m {
        for j in 0..n {
            let acc: f64 = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
            let idx = batch * p.stride_c as usize + i * p.ldc + j;
            c[idx] = p.alpha as f64 * acc + p.beta as f64 * c0[idx];
        }
    }
    c
}

/// Runs one GEMM with random data and returns max|c - ref| / max|ref|.
fn run_gemm(g: &Gpu, blas: &Blas, mut p: BlasGemm, rng: &mut Rng) -> f64 {
    let (a_rows, a_cols) = if p.transa { (p.k, p.m) } else { (p.m, p.k) };
    let (b_rows, b_cols) = if p.transb { (p.n, p.k) } else { (p.k, p.n) };
    p.lda = a_cols;
    p.ldb = b_cols;
    p.ldc = p.n;
    p.stride_a = (a_rows * a_cols) as i64;
    p.stride_b = (b_rows * b_cols) as i64;
    p.stride_c = (p.m * p.n) as i64;
    let na = a_rows * a_cols * p.batch;
    let nb = b_rows * b_cols * p.batch;
    let nc = p.m * p.n * p.batch;
    let mut gen = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.f32()).collect() };
    let (af, bf, cf) = (gen(na), gen(nb), gen(nc));
    let es = p.dtype.size();
    let mut da = g.dev.alloc(na * es, &g.stream).unwrap();
    let mut db = g.dev.alloc(nb * es, &g.stream).unwrap();
    let mut dc = g.dev.alloc(nc * p.c_size(), &g.stream).unwrap();
    // Upload in the device type and keep the *rounded* inputs for the reference.
    let (a64, b64, c64): (Vec<f64>, Vec<f64>, Vec<f64>);
    match p.dtype {
        BlasDtype::F32 | BlasDtype::Tf32 => {
            da.upload(&af, &g.stream).unwrap();
            db.upload(&bf, &g.stream).unwrap();
            a64 = af.iter().map(|&x| x as f64).collect();
            b64 = bf.iter().map(|&x| x as f64).collect();
        }
        BlasDtype::Bf16 => {
            let ah: Vec<half::bf16> = af.iter().map(|&x| half::bf16::from_f32(x)).collect();
            let bh: Vec<half::bf16> = bf.iter().map(|&x| half::bf16::from_f32(x)).collect();
            da.upload(&ah, &g.stream).unwrap();
            db.upload(&bh, &g.stream).unwrap();
            a64 = ah.iter().map(|x| x.to_f64()).collect();
            b64 = bh.iter().map(|x| x.to_f64()).collect();
        }
        BlasDtype::F16 => {
            let ah: Vec<half::f16> = af.iter().map(|&x| half::f16::from_f32(x)).collect();
            let bh: Vec<half::f16> = bf.iter().map(|&x| half::f16::from_f32(x)).collect();
            da.upload(&ah, &g.stream).unwrap();
            db.upload(&bh, &g.stream).unwrap();
            a64 = ah.iter().map(|x| x.to_f64()).collect();
            b64 = bh.iter().map(|x| x.to_f64()).collect();
        }
    }
    match (p.dtype, p.c_f32) {
        (BlasDtype::F32 | BlasDtype::Tf32, _) | (_, true) => {
            dc.upload(&cf, &g.stream).unwrap();
            c64 = cf.iter().map(|&x| x as f64).collect();
        }
        (BlasDtype::Bf16, false) => {
            let ch: Vec<half::bf16> = cf.iter().map(|&x| half::bf16::from_f32(x)).collect();
            dc.upload(&ch, &g.stream).unwrap();
            c64 = ch.iter().map(|x| x.to_f64()).collect();
        }
        (BlasDtype::F16, false) => {
            let ch: Vec<half::f16> = cf.iter().map(|&x| half::f16::from_f32(x)).collect();
            dc.upload(&ch, &g.stream).unwrap();
            c64 = ch.iter().map(|x| x.to_f64()).collect();
        }
    }
    p.a = da.ptr();
    p.b = db.ptr();
    p.c = dc.ptr();
    blas.gemm(&p).unwrap_or_else(|e| panic!("gemm {p:?}: {e}"));
    let c_out: Vec<f64> = match (p.dtype, p.c_f32) {
        (BlasDtype::F32 | BlasDtype::Tf32, _) | (_, true) => dc
            .download::<f32>(&g.stream)
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        (BlasDtype::Bf16, false) => dc
            .download::<half::bf16>(&g.stream)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        (BlasDtype::F16, false) => dc
            .download::<half::f16>(&g.stream)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
    };
    let mut want = c64.clone();
    for bi in 0..p.batch {
        let r = gemm_ref(&p, &a64, &b64, &c64, bi);
        let s = bi * p.stride_c as usize;
        want[s..s + p.m * p.n].copy_from_slice(&r[s..s + p.m * p.n]);
    }
    let max_ref = want.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
    let max_err = c_out
        .iter()
        .zip(&want)
        .fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(
        c_out.iter().all(|x| x.is_finite()),
        "non-finite output for {p:?}"
    );
    max_err / max_ref
}

#[test]
fn cublas_gemm_matches_cpu_reference() {
    let Some(g) = gpu("cublas_gemm_matches_cpu_reference") else {
        return;
    };
    let blas = match Blas::new(&g.dev, &g.stream) {
        Ok(b) => b,
        Err(RuntimeError::NoLibrary { lib }) => {
            eprintln!("SKIP cublas_gemm_matches_cpu_reference: lib{lib} not loadable");
            return;
        }
        Err(e) => panic!("Blas::new: {e}"),
    };
    let mut rng = Rng(42);
    let base = |dtype| BlasGemm::new(dtype, 64, 48, 32, 0, 0, 0).unwrap();
    let cases: Vec<(BlasGemm, f64, &str)> = {
        let mut v = Vec::new();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            v.push((
                BlasGemm {
                    transa: ta,
                    transb: tb,
                    ..base(BlasDtype::F32)
                },
                1e-5,
                "sgemm",
            ));
            v.push((
                BlasGemm {
                    transa: ta,
                    transb: tb,
                    ..base(BlasDtype::Bf16)
                },
                2e-2,
                "bf16",
            ));
        }
        v.push((
            BlasGemm {
                alpha: 0.75,
                beta: 0.5,
                ..base(BlasDtype::F32)
            },
            1e-5,
            "sgemm alpha/beta",
        ));
        v.push((
            BlasGemm {
                batch: 3,
                ..base(BlasDtype::F32)
            },
            1e-5,
            "sgemm batched",
        ));
        v.push((
            BlasGemm {
                batch: 3,
                transb: true,
                ..base(BlasDtype::Bf16)
            },
            2e-2,
            "bf16 batched",
        ));
        v.push((
            BlasGemm {
                c_f32: true,
                ..base(BlasDtype::Bf16)
            },
            1e-4,
            "bf16 -> f32",
        ));
        v.push((base(BlasDtype::F16), 5e-3, "f16"));
        v.push((base(BlasDtype::Tf32), 1e-2, "tf32"));
        v.push((
            BlasGemm {
                m: 33,
                n: 17,
                k: 9,
                ..base(BlasDtype::F32)
            },
            1e-5,
            "sgemm odd shape",
        ));
        v
    };
    for (p, tol, what) in cases {
        let err = run_gemm(&g, &blas, p, &mut rng);
        eprintln!(
            "{what} m={} n={} k={} ta={} tb={} batch={}: rel err {err:.3e} (tol {tol:.0e})",
            p.m, p.n, p.k, p.transa, p.transb, p.batch
        );
        assert!(
            err < tol,
            "{what} (transa={}, transb={}, batch={}): relative error {err:.3e} >= {tol:.0e}",
            p.transa,
            p.transb,
            p.batch
        );
    }
    // Bad leading dimension is refused before cuBLAS.
    let bad = BlasGemm {
        lda: 1,
        ..BlasGemm::new(BlasDtype::F32, 64, 48, 32, 16, 16, 16).unwrap()
    };
    assert!(matches!(blas.gemm(&bad), Err(RuntimeError::Blas { .. })));
}

#[test]
fn tensor_map_encodes_for_a_real_buffer() {
    let Some(g) = gpu("tensor_map_encodes_for_a_real_buffer") else {
        return;
    };
    let buf = g.dev.alloc(256 * 512 * 2, &g.stream).unwrap();
    let desc = TensorMap2d::new(
        buf.ptr(),
        TensorMapDtype::Bf16,
        256,
        512,
        64,
        64,
        Swizzle::B128,
    );
    let map = encode_tensor_map_2d(&desc).expect("encode bf16 64x64 128B-swizzled tile");
    assert!(map.iter().any(|&b| b != 0), "encoded map is all zeros");
    let map2 = encode_tensor_map_2d(&TensorMap2d {
        box_rows: 32,
        ..desc
    })
    .unwrap();
    assert_ne!(map, map2, "different boxes encoded identically");
    assert!(matches!(
        encode_tensor_map_2d(&TensorMap2d {
            address: buf.ptr() + 8,
            ..desc
        }),
        Err(RuntimeError::TensorMap { .. })
    ));
    // It can be passed by value as a kernel argument.
    let mut args = KernelArgs::new();
    args.bytes(&map, rtx_runtime::tensor_map::TENSOR_MAP_ALIGN);
    assert!(args.error().is_none());
}

const TMA_SRC: &str = r#"
struct alignas(64) TMap { unsigned long long v[16]; };
extern "C" __global__ void tma_tile(const __grid_constant__ TMap map, float* out, int r0, int c0) {
    __shared__ alignas(128) float tile[32 * 32];
    __shared__ alignas(8) unsigned long long bar;
    unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned smem = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar_addr), "r"(32 * 32 * 4) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(smem), "l"(&map), "r"(c0), "r"(r0), "r"(bar_addr) : "memory");
    }
    asm volatile("{\n"
                 ".reg .pred P1;\n"
                 "TMA_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra TMA_DONE;\n"
                 "bra TMA_WAIT;\n"
                 "TMA_DONE:\n"
                 "}\n" :: "r"(bar_addr), "r"(0) : "memory");
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) out[i] = tile[i];
}
"#;

/// End-to-end TMA: a tile loaded through an encoded map must match the tensor, with zeros out of
/// bounds (this checks the dimension order and stride encoding of `encode_tensor_map_2d`).
#[test]
fn tensor_map_drives_a_real_tma_load() {
    let Some(g) = gpu("tensor_map_drives_a_real_tma_load") else {
        return;
    };
    if g.dev.info().compute_capability.0 < 9 {
        eprintln!("SKIP tensor_map_drives_a_real_tma_load: TMA needs sm_90+");
        return;
    }
    // SAFETY: only tries to dlopen libnvrtc.
    if !unsafe { rtx_runtime::cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP tensor_map_drives_a_real_tma_load: libnvrtc not loadable");
        return;
    }
    let opts = rtx_runtime::cudarc::nvrtc::CompileOptions {
        arch: Some("compute_90"),
        ..Default::default()
    };
    let ptx = rtx_runtime::cudarc::nvrtc::compile_ptx_with_opts(TMA_SRC, opts)
        .expect("NVRTC compile of tma_tile");
    let m = g
        .dev
        .load_module(ptx.to_src().as_bytes())
        .expect("load tma PTX");
    let f = m.function("tma_tile").expect("function tma_tile");
    let (rows, cols) = (100usize, 72usize);
    let host: Vec<f32> = (0..rows * cols)
        .map(|i| ((i / cols) * 1000 + i % cols) as f32)
        .collect();
    let mut src = g.dev.alloc(host.len() * 4, &g.stream).unwrap();
    src.upload(&host, &g.stream).unwrap();
    let desc = TensorMap2d::new(
        src.ptr(),
        TensorMapDtype::F32,
        rows as u64,
        cols as u64,
        32,
        32,
        Swizzle::None,
    );
    let map = encode_tensor_map_2d(&desc).expect("encode f32 32x32 tile map");
    for (r0, c0) in [(0i32, 0i32), (40, 16), (80, 48)] {
        let mut out = g.dev.alloc(32 * 32 * 4, &g.stream).unwrap();
        out.fill_u8(0xFF, &g.stream).unwrap();
        let mut args = KernelArgs::new();
        args.bytes(&map, rtx_runtime::tensor_map::TENSOR_MAP_ALIGN)
            .ptr(&out)
            .i32(r0)
            .i32(c0);
        // SAFETY: arguments match `tma_tile(TMap, float*, int, int)`; `out` holds 32x32 floats.
        unsafe {
            f.launch(
                &g.stream,
                &LaunchConfig::new([1, 1, 1], [128, 1, 1], 0),
                &mut args,
            )
        }
        .expect("launch tma_tile");
        let tile: Vec<f32> = out.download(&g.stream).expect("download tile");
        for i in 0..32 {
            for j in 0..32 {
                let (r, c) = (r0 as usize + i, c0 as usize + j);
                let want = if r < rows && c < cols {
                    host[r * cols + c]
                } else {
                    0.0
                };
                let got = tile[i * 32 + j];
                assert!(
                    got == want,
                    "TMA tile at ({r0},{c0}): element ({i},{j}) = {got}, want {want}"
                );
            }
        }
    }
}
