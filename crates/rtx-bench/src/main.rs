//! rtx-bench: the benchmark driver (see `cargo xtask bench`).
fn main() {}
