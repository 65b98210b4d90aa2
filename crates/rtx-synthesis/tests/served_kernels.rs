//! The kernels `Synth::gemm` serves untuned at issue 4's benchmark shapes on a 132-SM sm_90a
//! card (the H200 of the device calls): family, entry and a blake3 of the CUDA source, for f32,
//! tf32, bf16 and f16, NN. The list is checked in (`fixtures/served_kernels_sm90a_132.txt`), so
//! any change to what those rows run shows up in review, and a PERF.md figure measured on an
//! earlier build still describes the current one where its line is unchanged.
//!
//! After a deliberate kernel change: `RTX_BLESS=1 cargo test -p rtx-synthesis --test
//! served_kernels`, and say in PERF.md which measured rows it makes stale.

use rtx_runtime::DeviceInfo;
use rtx_synthesis::synth::family::GemmFamily;
use rtx_synthesis::synth::gemm::{select_family, GemmFamilyKind, GemmSpec};
use rtx_synthesis::templates::gemm::mma::MmaGemm;
use rtx_synthesis::templates::gemm::simt::SimtGemm;
use rtx_synthesis::templates::gemm::wgmma::WgmmaGemm;
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::{Arch, DType};

/// Issue 4's GEMM shapes (rtx-bench's full run, whose test checks each is here, and
/// `scripts/h200/env.sh`), and the A/B guard 96 x 11008 x 4096.
const SHAPES: [(u32, u32, u32); 13] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4000, 4000, 4096),
    (64, 8192, 8192),
    (128, 8192, 8192),
    (160, 8192, 8192),
    (192, 8192, 8192),
    (256, 8192, 8192),
    (4096, 4096, 1000),
    (96, 11008, 4096),
];

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/served_kernels_sm90a_132.txt"
);

/// `family entry blake3(source)` of `f`'s default config for `p`.
fn served<F: GemmFamily>(f: F, p: &GemmProblem) -> String {
    let c = f.default_config(p, Arch::Sm90a);
    let src = f
        .emit(p, &c, Arch::Sm90a)
        .unwrap_or_else(|e| panic!("{}x{}x{}: {e}", p.m, p.n, p.k));
    format!(
        "{} {} {}",
        F::FAMILY,
        src.entry,
        blake3::hash(src.code.as_bytes()).to_hex()
    )
}

fn table() -> String {
    let info = DeviceInfo {
        name: "NVIDIA H200".into(),
        l2_bytes: 60 << 20,
        ..DeviceInfo::example_sm90()
    };
    let mut out = String::new();
    for (m, n, k) in SHAPES {
        for dtype in [DType::F32, DType::Tf32, DType::Bf16, DType::F16] {
            let p = GemmSpec::new(m, n, k, dtype).problem().unwrap();
            let line = match select_family(&p, Arch::Sm90a, &info).unwrap() {
                GemmFamilyKind::Wgmma => served(WgmmaGemm::for_device(&info), &p),
                GemmFamilyKind::Mma => served(MmaGemm::for_device(&info), &p),
                GemmFamilyKind::Simt => served(SimtGemm::for_device(&info), &p),
            };
            out += &format!("{m}x{n}x{k} {dtype} {line}\n");
        }
    }
    out
}

#[test]
fn issue4_shapes_serve_the_recorded_kernels() {
    let now = table();
    if std::env::var_os("RTX_BLESS").is_some() {
        std::fs::write(FIXTURE, &now).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(FIXTURE).unwrap_or_default();
    let changed: Vec<String> = now
        .lines()
        .zip(recorded.lines().chain(std::iter::repeat("(missing)")))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  now      {a}\n  recorded {b}"))
        .collect();
    assert!(
        changed.is_empty() && now.lines().count() == recorded.lines().count(),
        "the kernels served at issue 4's shapes changed ({} lines); if meant, re-record with \
         RTX_BLESS=1 and note in PERF.md which measured rows are now stale:\n{}",
        changed.len(),
        changed.join("\n")
    );
}
