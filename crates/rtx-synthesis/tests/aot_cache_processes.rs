//! The kernel cache across real processes: several children (this test binary re-executed with
//! a child-mode variable) fill one cache folder at once with overlapping kernels; a warm child
//! process whose kernels are all cached makes zero NVRTC calls.

use rtx_synthesis::aot::{cache_key, compile, nvrtc_calls, CacheEntry, KernelCache};
use rtx_synthesis::templates::KernelSource;
use rtx_synthesis::Arch;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rtx_synthesis::aot::nvrtc_or_skip;

/// Selects a child mode (`fill` or `warm`) when this binary is re-executed.
const CHILD_ENV: &str = "RTX_AOT_TEST_CHILD";
/// The shared cache folder (fill) given to a child.
const DIR_ENV: &str = "RTX_AOT_TEST_DIR";
/// The child's index.
const ID_ENV: &str = "RTX_AOT_TEST_ID";
/// File whose appearance starts all fill children at once.
const GO_FILE: &str = "go";

const CHILDREN: usize = 4;
const ROUNDS: usize = 3;
const WINDOW: usize = 12;
const SHIFT: usize = 4;

/// 12 distinct kernels x 2 targets.
fn items() -> Vec<(KernelSource, Arch)> {
    let mut v = Vec::new();
    for i in 0..12 {
        let src = KernelSource {
            entry: format!("proc_k{i}"),
            code: format!(
                "extern \"C\" __global__ void proc_k{i}(const float* x, float* y, int n) {{\n  \
                 __shared__ float s[{s}];\n  int t = threadIdx.x;\n  s[t % {s}] = x[t];\n  \
                 __syncthreads();\n  if (t < n) y[t] = s[(t + {i}) % {s}] * {i}.25f;\n}}\n",
                s = 32 * (i + 1)
            ),
            template: "process_test".into(),
            template_version: 1,
            options: vec![],
        };
        v.push((src.clone(), Arch::Sm90a));
        v.push((src, Arch::Sm120));
    }
    v
}

fn spawn_child(test: &str, mode: &str, envs: &[(&str, &Path)], id: usize) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .env(ID_ENV, id.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

fn wait_ok(child: Child, what: &str) -> String {
    let out = child.wait_with_output().expect("wait for child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    // The child must really have run the test body, not matched zero tests.
    assert!(text.contains("1 passed"), "{what} ran no test:\n{text}");
    text
}

/// Child: wait for the go file, then look up / compile / re-insert a window of the items
/// several times, racing the other children on the same keys.
fn fill_child() {
    let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("child needs its dir"));
    let id: usize = std::env::var(ID_ENV)
        .expect("child id")
        .parse()
        .expect("child id");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !dir.join(GO_FILE).exists() {
        assert!(Instant::now() < deadline, "child {id}: no go signal");
        std::thread::sleep(Duration::from_millis(2));
    }
    let all = items();
    let mine: Vec<&(KernelSource, Arch)> = (0..WINDOW)
        .map(|k| &all[(id * SHIFT + k) % all.len()])
        .collect();
    let cache = KernelCache::open(&dir).expect("open shared cache");
    for round in 0..ROUNDS {
        for (src, arch) in &mine {
            let k = cache
                .get_or_compile(src, *arch)
                .expect("get_or_compile in child");
            assert_eq!(&k.cubin[..4], b"\x7fELF");
            // Rewrite the entry to race the atomic replacement against other writers.
            let c = compile(src, *arch).expect("compile in child");
            cache.insert(src, &c).expect("insert in child");
            let _ = round;
        }
    }
    let s = cache.session_counters();
    assert_eq!(s.hits + s.misses, (ROUNDS * WINDOW) as u64);
    assert_eq!(s.corrupt_discarded, 0, "child {id} saw a corrupt entry");
    assert_eq!(s.write_failures, 0);
    eprintln!("child {id}: {s:?}");
}

#[test]
fn concurrent_processes_fill_one_cache_without_loss_or_corruption() {
    const NAME: &str = "concurrent_processes_fill_one_cache_without_loss_or_corruption";
    if std::env::var(CHILD_ENV).as_deref() == Ok("fill") {
        return fill_child();
    }
    if !nvrtc_or_skip(NAME) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kernels");
    std::fs::create_dir_all(&dir).unwrap();
    let children: Vec<Child> = (0..CHILDREN)
        .map(|i| spawn_child(NAME, "fill", &[(DIR_ENV, &dir)], i))
        .collect();
    std::fs::write(dir.join(GO_FILE), b"").unwrap();
    for (i, c) in children.into_iter().enumerate() {
        let log = wait_ok(c, &format!("fill child {i}"));
        eprintln!(
            "{}",
            log.lines()
                .filter(|l| l.starts_with("child"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    std::fs::remove_file(dir.join(GO_FILE)).unwrap();

    // Every key any child touched is present, verifies, and holds the right binary.
    let all = items();
    let cache = KernelCache::open(&dir).unwrap();
    for (src, arch) in &all {
        let key = cache_key(src, *arch).unwrap();
        let bytes = std::fs::read(cache.entry_path(&key))
            .unwrap_or_else(|e| panic!("{} {arch} missing: {e}", src.entry));
        let entry = CacheEntry::decode_for(&bytes, &key)
            .unwrap_or_else(|e| panic!("{} {arch} corrupt: {e}", src.entry));
        assert_eq!(entry.entry, src.entry);
        assert_eq!(entry.arch, *arch);
        let fresh = compile(src, *arch).unwrap();
        assert_eq!(entry.cubin, fresh.cubin, "{} {arch}", src.entry);
        assert_eq!(entry.resources, fresh.resources);
        assert!(cache.get_or_compile(src, *arch).unwrap().hit);
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains(".tmp.")),
        "temp files left behind: {names:?}"
    );
    assert_eq!(cache.list().unwrap().len(), all.len());
    let s = cache.stats().unwrap();
    assert_eq!(s.entries, all.len() as u64);
    assert_eq!(s.corrupt_discarded, 0);
    // No child's counters were lost in the concurrent stats merge.
    let child_lookups = (CHILDREN * ROUNDS * WINDOW) as u64;
    assert_eq!(s.hits + s.misses, child_lookups + all.len() as u64, "{s:?}");
    // Each key was compiled (missed) at least once, by some child.
    assert!(s.misses >= all.len() as u64, "{s:?}");
}

/// Child: everything is cached; load it all through the default location and count NVRTC calls.
fn warm_child() {
    let dir = KernelCache::default_dir().unwrap();
    let root = PathBuf::from(std::env::var_os("RTX_CACHE_DIR").expect("child gets RTX_CACHE_DIR"));
    assert_eq!(
        dir,
        root.join("kernels"),
        "RTX_CACHE_DIR overrides the location"
    );
    let cache = KernelCache::open_default().unwrap();
    let all = items();
    let started = Instant::now();
    for (src, arch) in &all {
        let k = cache.get_or_compile(src, *arch).unwrap();
        assert!(k.hit, "{} {arch} was not cached", src.entry);
        if let Err(why) = k.ptxas_report(&src.entry) {
            eprintln!("SKIP resource check of {} {arch}: {why}", src.entry);
        }
    }
    let per_kernel = started.elapsed() / all.len() as u32;
    let many = cache.get_or_compile_many(&all, None);
    assert!(many.iter().all(|r| r.as_ref().is_ok_and(|k| k.hit)));
    assert_eq!(nvrtc_calls(), 0, "a warm start makes no NVRTC calls");
    eprintln!(
        "warm child: {} kernels, {per_kernel:?} per cached load (debug build)",
        all.len()
    );
}

#[test]
fn warm_start_makes_zero_nvrtc_calls() {
    const NAME: &str = "warm_start_makes_zero_nvrtc_calls";
    if std::env::var(CHILD_ENV).as_deref() == Ok("warm") {
        return warm_child();
    }
    if !nvrtc_or_skip(NAME) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let cache = KernelCache::open(root.path().join("kernels")).unwrap();
    let all = items();
    for r in cache.get_or_compile_many(&all, None) {
        r.unwrap();
    }
    drop(cache);
    let log = wait_ok(
        spawn_child(NAME, "warm", &[("RTX_CACHE_DIR", root.path())], 0),
        "warm child",
    );
    eprintln!(
        "{}",
        log.lines()
            .filter(|l| l.starts_with("warm child"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The child's hits were merged into the lifetime counters.
    let s = KernelCache::open(root.path().join("kernels"))
        .unwrap()
        .stats()
        .unwrap();
    assert_eq!((s.hits, s.misses), (2 * all.len() as u64, all.len() as u64));
}
