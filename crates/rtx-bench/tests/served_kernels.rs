//! The kernels a full GEMM run (`shapes::problems(false)`, issue 4's shapes) serves untuned on a
//! 132-SM sm_90a card (the H200 of the device calls), plus the A/B guard 96 x 11008 x 4096:
//! family, entry and a blake3 of the CUDA source of `Synth::gemm`'s family and default config.
//! The list is checked in (`fixtures/served_kernels_sm90a_132.txt`), so any change to what those
//! rows run shows up in review, and a PERF.md figure measured on an earlier build still
//! describes the current one where its line is unchanged.
//!
//! After a deliberate kernel change: `RTX_BLESS=1 cargo test -p rtx-bench --test
//! served_kernels`, and say in PERF.md which measured rows it makes stale.

use rtx_bench::suites::gemm::shapes::{problems, shape_name, GemmFilter};
use rtx_runtime::DeviceInfo;
use rtx_synthesis::synth::family::GemmFamily;
use rtx_synthesis::synth::gemm::{select_family, GemmFamilyKind};
use rtx_synthesis::templates::gemm::mma::MmaGemm;
use rtx_synthesis::templates::gemm::simt::SimtGemm;
use rtx_synthesis::templates::gemm::wgmma::WgmmaGemm;
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::Arch;

/// The shape the small-M A/B calls (DB, DC) check beside issue 4's.
const GUARD: (u32, u32, u32) = (96, 11008, 4096);

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/served_kernels_sm90a_132.txt"
);

/// `family entry blake3(source)` of `f`'s default config for `p`.
fn served<F: GemmFamily>(f: F, p: &GemmProblem) -> String {
    let c = f.default_config(p, Arch::Sm90a);
    let src = f
        .emit(p, &c, Arch::Sm90a)
        .unwrap_or_else(|e| panic!("{}: {e}", shape_name(p)));
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
    let guard = GemmFilter {
        dtypes: None,
        shapes: Some(vec![GUARD]),
    };
    let mut out = String::new();
    for p in problems(false)
        .into_iter()
        .chain(guard.apply(problems(false)))
    {
        let line = match select_family(&p, Arch::Sm90a, &info).unwrap() {
            GemmFamilyKind::Wgmma => served(WgmmaGemm::for_device(&info), &p),
            GemmFamilyKind::Mma => served(MmaGemm::for_device(&info), &p),
            GemmFamilyKind::Simt => served(SimtGemm::for_device(&info), &p),
        };
        out += &format!("{} {} {line}\n", shape_name(&p), p.dtype);
    }
    out
}

#[test]
fn full_run_rows_serve_the_recorded_kernels() {
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
