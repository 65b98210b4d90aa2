//! Shared by the compile tests: NVRTC is there, or the test says why it skips.

use rtx_synthesis::aot::Toolchain;

/// True when NVRTC and the CUDA headers load; otherwise prints `SKIP <test>: <why>` and returns
/// false, or fails when `RTX_REQUIRE_NVRTC` is set (CI and `cargo xtask test` set it, so a
/// missing toolchain there is an error, not a silent skip).
pub fn nvrtc_or_skip(test: &str) -> bool {
    match Toolchain::get() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            assert!(std::env::var_os("RTX_REQUIRE_NVRTC").is_none(), "RTX_REQUIRE_NVRTC is set but: {e}");
            false
        }
    }
}
