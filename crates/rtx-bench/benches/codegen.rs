//! Criterion: CPU cost of generating kernel sources (the sample kernels and the whole registry).

use criterion::{criterion_group, criterion_main, Criterion};
use rtx_bench::registry::{all_cases, RegistryOptions};
use rtx_bench::samples::SampleKernel;
use rtx_synthesis::{Arch, DType};
use std::hint::black_box;

fn codegen(c: &mut Criterion) {
    c.bench_function("emit sample naive gemm bf16", |b| {
        b.iter(|| black_box(SampleKernel::NaiveGemm(black_box(DType::Bf16)).emit()))
    });
    c.bench_function("registry all cases sm_90a+sm_120", |b| {
        b.iter(|| {
            black_box(all_cases(
                &[Arch::Sm90a, Arch::Sm120],
                &RegistryOptions::default(),
            ))
        })
    });
}

criterion_group!(benches, codegen);
criterion_main!(benches);
