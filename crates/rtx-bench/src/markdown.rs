//! Markdown rendering of a report (stdout and `report.md`).
//!
//! One table per suite: case, median, spread, achieved rate (TFLOP/s or GB/s), the ratio to
//! each baseline (`baseline / ours`, > 1 means ours is faster) and the verification result.
//! Compile cases get their own table with the ptxas resource figures.

use crate::report::{Case, CaseStatus, Clock, GpuPresence, Report};
use crate::suite_id::SuiteId;
use std::fmt::Write;

/// A time in microseconds, in the largest unit that keeps it readable.
pub fn fmt_us(t: f64) -> String {
    if !t.is_finite() {
        return "-".into();
    }
    if t < 1_000.0 {
        format!("{t:.1} us")
    } else if t < 1_000_000.0 {
        format!("{:.2} ms", t / 1e3)
    } else {
        format!("{:.2} s", t / 1e6)
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
}

fn opt_u32(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn rate(c: &Case) -> String {
    match (c.throughput.tflops, c.throughput.gbps) {
        (Some(t), _) if c.flops.unwrap_or(0.0) > 0.0 => format!("{t:.1} TFLOP/s"),
        (_, Some(g)) => format!("{g:.0} GB/s"),
        _ => "-".into(),
    }
}

fn status_text(c: &Case) -> Option<String> {
    match &c.status {
        CaseStatus::Measured => None,
        CaseStatus::NotAvailable { reason } => Some(format!("not available yet: {reason}")),
        CaseStatus::Failed { error } => {
            Some(format!("FAILED: {}", error.lines().next().unwrap_or("")))
        }
    }
}

fn header(r: &Report, s: &mut String) {
    let _ = writeln!(s, "# rtx-bench report\n");
    match r.device.gpu {
        GpuPresence::Present => {
            if let Some(i) = &r.device.info {
                let _ = writeln!(
                    s,
                    "- device: {} (sm_{}{}, {} SMs, {:.0} GiB)",
                    i.name,
                    i.compute_capability.0,
                    i.compute_capability.1,
                    i.sm_count,
                    i.total_mem as f64 / (1u64 << 30) as f64
                );
            }
        }
        GpuPresence::Absent => {
            let _ = writeln!(
                s,
                "- device: no CUDA GPU ({}); only host-side figures (compile times, resources), no GPU figures",
                r.device.absent_reason.as_deref().unwrap_or("unknown reason")
            );
        }
    }
    if let Some(p) = &r.device.profile {
        let mut parts = Vec::new();
        if let Some(bw) = p.copy_gbps {
            parts.push(format!("copy {bw:.0} GB/s"));
        }
        for (d, t) in &p.compute_tflops {
            parts.push(format!("{d} {t:.1} TFLOP/s"));
        }
        if !parts.is_empty() {
            let _ = writeln!(
                s,
                "- measured ceilings: {} ({})",
                parts.join(", "),
                p.source
            );
        }
    }
    let t = &r.tool_versions;
    let _ = writeln!(
        s,
        "- git {} · rtx {} · nvrtc {} · driver {} · cuda {}",
        r.git_commit
            .as_deref()
            .map_or("unknown", |c| &c[..c.len().min(12)]),
        t.rtx,
        t.nvrtc.as_deref().unwrap_or("-"),
        t.driver.as_deref().unwrap_or("-"),
        t.cuda.as_deref().unwrap_or("-")
    );
    let _ = writeln!(s, "- command: `{}`", r.command.join(" "));
    let _ = writeln!(
        s,
        "- ratios are baseline time / our time (> 1: ours is faster)"
    );
    if r.cases
        .iter()
        .any(|c| c.baselines.cublas.is_some_and(|b| b.interleaved))
    {
        let _ = writeln!(s, "- vs cuBLAS marked `*`: cuBLAS timed alternately with that row (same rounds, same GPU state)");
    }
    for sr in &r.suites {
        if let Some(why) = &sr.skipped {
            let _ = writeln!(s, "- suite {} skipped: {why}", sr.suite);
        }
    }
}

fn perf_table(cases: &[&Case], s: &mut String) {
    let _ = writeln!(
        s,
        "| case | median | spread | rate | vs cuBLAS | vs untuned | vs torch | verified |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for c in cases {
        if let Some(st) = status_text(c) {
            let _ = writeln!(s, "| {} | {} | | | | | | |", cell(&c.name), cell(&st));
            continue;
        }
        let clock = if c.clock == Clock::Host {
            " (host)"
        } else {
            ""
        };
        let verified = c.verified.map_or_else(
            || "-".into(),
            |v| {
                format!(
                    "{} {:.1e} <= {:.0e}",
                    if v.ok { "ok" } else { "WRONG" },
                    v.rel_err,
                    v.bound
                )
            },
        );
        let _ = writeln!(
            s,
            "| {} | {}{} | {:.1}% | {} | {} | {} | {} | {} |",
            cell(&c.name),
            c.median_us.map_or_else(|| "-".into(), fmt_us),
            clock,
            c.rel_spread.unwrap_or(0.0) * 100.0,
            rate(c),
            ratio(c.baselines.cublas.map(|b| b.ratio))
                + if c.baselines.cublas.is_some_and(|b| b.interleaved) {
                    "*"
                } else {
                    ""
                },
            ratio(c.baselines.untuned.map(|b| b.ratio)),
            ratio(c.baselines.torch.map(|b| b.ratio)),
            verified
        );
    }
}

/// How far a paired cuBLAS median may sit from the problem's own cuBLAS row before the report
/// says so (5%).
pub const DRIFT_NOTE_AT: f64 = 0.05;

/// Lists the rows whose alternately timed cuBLAS median sits more than [`DRIFT_NOTE_AT`] from
/// the problem's separately timed cuBLAS row (`cublas <problem>` for `<candidate> <problem>`). The card's state moved
/// between the two (clocks under a power limit, most often at large power-bound shapes), so the
/// `*` ratio, which compares both in the later state, and the ratio of the two rows' medians
/// differ; the note gives both medians so a reader can see which figure is which.
fn baseline_drift(cases: &[&Case], s: &mut String) {
    let mut notes = Vec::new();
    for c in cases {
        let Some(paired) = c.baselines.cublas.filter(|b| b.interleaved) else {
            continue;
        };
        // The problem's cuBLAS row: `cublas <problem>` for a row named `<candidate> <problem>`.
        let Some((_, problem)) = c.name.split_once(' ') else {
            continue;
        };
        let Some(alone) = cases
            .iter()
            .find(|r| {
                r.name.strip_prefix("cublas ") == Some(problem) && r.status == CaseStatus::Measured
            })
            .and_then(|r| r.median_us)
        else {
            continue;
        };
        let drift = paired.median_us / alone - 1.0;
        if drift.abs() > DRIFT_NOTE_AT && alone > 0.0 {
            notes.push(format!(
                "- {}: cuBLAS {} alone, {} timed alternately with this row ({:+.1}%): the `*` ratio compares both in the later card state",
                cell(&c.name),
                fmt_us(alone),
                fmt_us(paired.median_us),
                drift * 100.0
            ));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(
            s,
            "\ncuBLAS moved by more than {:.0}% between its own row and a paired run:\n",
            DRIFT_NOTE_AT * 100.0
        );
        for n in notes {
            let _ = writeln!(s, "{n}");
        }
    }
}

fn compile_table(cases: &[&Case], s: &mut String) {
    let _ = writeln!(
        s,
        "| kernel | arch | cold compile | cache load | module load | regs | spill st/ld B | stack B | smem B | cubin B |"
    );
    let _ = writeln!(
        s,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for c in cases {
        let Some(ci) = &c.compile else { continue };
        let time = match status_text(c) {
            Some(st) => st,
            None => c.median_us.map_or_else(|| "-".into(), fmt_us),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} |",
            cell(&ci.entry),
            ci.arch,
            cell(&time),
            ci.cache_load_us.map_or_else(|| "-".into(), fmt_us),
            ci.module_load_us.map_or_else(|| "-".into(), fmt_us),
            opt_u32(ci.registers),
            opt_u32(ci.spill_store_bytes),
            opt_u32(ci.spill_load_bytes),
            opt_u32(ci.stack_bytes),
            opt_u32(ci.smem_bytes),
            ci.cubin_bytes
        );
    }
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    header(r, &mut s);
    for suite in SuiteId::ALL {
        let cases: Vec<&Case> = r.cases.iter().filter(|c| c.suite == suite).collect();
        if cases.is_empty() {
            continue;
        }
        let (compile, perf): (Vec<&Case>, Vec<&Case>) =
            cases.into_iter().partition(|c| c.compile.is_some());
        if !perf.is_empty() {
            let _ = writeln!(s, "\n## {suite}\n");
            perf_table(&perf, &mut s);
            baseline_drift(&perf, &mut s);
        }
        if !compile.is_empty() {
            let _ = writeln!(s, "\n## {suite}: compile and resources\n");
            compile_table(&compile, &mut s);
        }
    }
    if r.cases.is_empty() {
        let _ = writeln!(s, "\n(no cases)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CompileInfo, MeasuredBaseline};
    use crate::stats::Summary;

    #[test]
    fn renders_rows_ratios_and_unavailable_cases() {
        let mut r = crate::report::tests::sample_report();
        r.cases[0].baselines.cublas = Some(MeasuredBaseline {
            median_us: 90.0,
            ratio: 0.9,
            interleaved: false,
        });
        let md = render(&r);
        assert!(md.contains("# rtx-bench report"));
        assert!(md.contains("no CUDA GPU (test)"), "{md}");
        assert!(md.contains("## gemm"));
        assert!(
            md.contains("| cublas bf16 4096x4096x4096 | 100.0 us | 2.0% |"),
            "{md}"
        );
        assert!(md.contains("TFLOP/s"), "{md}");
        assert!(md.contains("| 0.90x | - | 1.10x | ok"), "{md}");
        assert!(
            !md.contains("marked `*`"),
            "no interleaved baseline, no legend: {md}"
        );
        r.cases[0].baselines.cublas = Some(MeasuredBaseline {
            median_us: 90.0,
            ratio: 0.9,
            interleaved: true,
        });
        let md = render(&r);
        assert!(
            md.contains("| 0.90x* | - | 1.10x | ok") && md.contains("marked `*`"),
            "{md}"
        );
        assert!(
            md.contains("not available yet: no attention template yet"),
            "{md}"
        );
        assert!(md.contains("command: `rtx-bench --quick`"));
    }

    #[test]
    fn a_paired_cublas_far_from_its_own_row_is_noted() {
        let mut r = crate::report::tests::sample_report();
        let s = Summary {
            median_us: 3150.0,
            p20_us: 3140.0,
            p80_us: 3160.0,
            rel_spread: 0.006,
            samples: 20,
        };
        let mut rtx = Case::measured(
            SuiteId::Gemm,
            "rtx-wgmma-default bf16 4096x4096x4096",
            "4096x4096x4096",
            Clock::Gpu,
            &s,
        )
        .with_dtype("bf16");
        // The cuBLAS row ran 100 us; paired with this row it ran 108 us (+8%).
        rtx.baselines.cublas = Some(MeasuredBaseline {
            median_us: 108.0,
            ratio: 108.0 / 3150.0,
            interleaved: true,
        });
        r.cases.push(rtx.clone());
        let md = render(&r);
        assert!(
            md.contains("cuBLAS moved by more than 5%")
                && md.contains(
                    "- rtx-wgmma-default bf16 4096x4096x4096: cuBLAS 100.0 us alone, 108.0 us timed alternately with this row (+8.0%)"
                ),
            "{md}"
        );
        // Within 5%: no note. Another problem's cuBLAS row is not this row's.
        for (median, name) in [
            (104.0, "rtx-wgmma-default bf16 4096x4096x4096"),
            (108.0, "rtx-wgmma-default f16 4096x4096x4096"),
        ] {
            let mut r = crate::report::tests::sample_report();
            let mut c = rtx.clone();
            c.name = name.into();
            c.baselines.cublas = Some(MeasuredBaseline {
                median_us: median,
                ratio: median / 3150.0,
                interleaved: true,
            });
            r.cases.push(c);
            assert!(!render(&r).contains("cuBLAS moved"), "{median} {name}");
        }
    }

    #[test]
    fn compile_cases_get_a_resource_table() {
        let mut r = crate::report::tests::sample_report();
        let s = Summary {
            median_us: 250_000.0,
            p20_us: 250_000.0,
            p80_us: 250_000.0,
            rel_spread: 0.0,
            samples: 1,
        };
        let mut c = Case::measured(
            SuiteId::Aot,
            "compile saxpy_f32 sm_90a",
            "-",
            Clock::Host,
            &s,
        );
        c.compile = Some(CompileInfo {
            arch: "sm_90a".into(),
            family: "samples".into(),
            entry: "saxpy_f32".into(),
            registers: Some(8),
            spill_store_bytes: Some(0),
            spill_load_bytes: Some(0),
            stack_bytes: Some(0),
            smem_bytes: None,
            cubin_bytes: 3000,
            cache_load_us: Some(41.0),
            module_load_us: None,
        });
        r.cases.push(c);
        let md = render(&r);
        assert!(md.contains("## aot: compile and resources"), "{md}");
        assert!(
            md.contains(
                "| saxpy_f32 | sm_90a | 250.00 ms | 41.0 us | - | 8 | 0/0 | 0 | - | 3000 |"
            ),
            "{md}"
        );
    }

    #[test]
    fn pipes_in_names_are_escaped_and_times_scale() {
        assert_eq!(cell("a|b"), "a\\|b");
        assert_eq!(fmt_us(12.34), "12.3 us");
        assert_eq!(fmt_us(12_340.0), "12.34 ms");
        assert_eq!(fmt_us(2_500_000.0), "2.50 s");
        assert_eq!(fmt_us(f64::NAN), "-");
    }
}
