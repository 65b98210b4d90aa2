//! Criterion: CPU cost of rendering a report (Markdown, JSON out and back). The report is built
//! in memory with placeholder figures: they exercise formatting only and are never printed.

use criterion::{criterion_group, criterion_main, Criterion};
use rtx_bench::markdown;
use rtx_bench::report::{
    Case, Clock, DeviceSection, MeasuredBaseline, Report, ToolVersions, Verified,
};
use rtx_bench::stats::Summary;
use rtx_bench::SuiteId;
use std::hint::black_box;

fn report(cases: usize) -> Report {
    let mut r = Report::new(
        0,
        None,
        ToolVersions::default(),
        DeviceSection::absent("criterion input"),
        vec!["bench".into()],
    );
    for i in 0..cases {
        let t = 10.0 + i as f64;
        let s = Summary {
            median_us: t,
            p20_us: t * 0.99,
            p80_us: t * 1.01,
            rel_spread: 0.02,
            samples: 50,
        };
        let n = 512 + i as u32;
        let mut c = Case::measured(
            SuiteId::Gemm,
            format!("case {i} bf16 {n}x{n}x{n}"),
            format!("{n}x{n}x{n}"),
            Clock::Gpu,
            &s,
        )
        .with_dtype("bf16")
        .with_work(
            Some(2.0 * (n as f64).powi(3)),
            Some(6.0 * (n as f64).powi(2)),
        );
        c.baselines.cublas = c.measured_baseline(t * 1.1);
        c.verified = Some(Verified::new(1e-3, 2e-2));
        r.cases.push(c);
    }
    r.cases[0].baselines.untuned = Some(MeasuredBaseline {
        median_us: 1.0,
        ratio: 1.0,
        interleaved: false,
    });
    r
}

fn render(c: &mut Criterion) {
    let r = report(200);
    c.bench_function("markdown 200 cases", |b| {
        b.iter(|| black_box(markdown::render(black_box(&r))))
    });
    c.bench_function("json write 200 cases", |b| {
        b.iter(|| black_box(r.to_json()))
    });
    let text = r.to_json();
    c.bench_function("json read 200 cases", |b| {
        b.iter(|| black_box(Report::from_json(black_box(&text))))
    });
}

criterion_group!(benches, render);
criterion_main!(benches);
