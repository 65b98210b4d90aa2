//! Replays the guided strategy over every recorded timing table in
//! `tests/fixtures/tuning/*.json` (fully measured on a real GPU, see the README there) and
//! checks that it gets within 3% of the exhaustive best while measuring at most 15% of the
//! space. The strategy gets the same analytic cost model a live run of the table's template
//! would use (rebuilt from the table's template, problem and device; it never sees the
//! timings). With no fixture files it says so and passes on exactly that condition: it never
//! substitutes made-up timings.

use rtx_synthesis::tuner::replay::fixture_files;
use rtx_synthesis::tuner::{
    cost_model_for_table, replay, Budget, Guided, ReplayTable, TuneOptions,
};
use std::path::PathBuf;

const MAX_GAP: f64 = 0.03;
const MAX_FRACTION: f64 = 0.15;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("tuning")
}

/// Replays every fixture; returns the gap misses (the determinism and budget rules are asserted).
fn replay_all() -> Vec<String> {
    let dir = fixture_dir();
    assert!(
        dir.join("README.md").is_file(),
        "fixture directory missing: {}",
        dir.display()
    );
    let files = fixture_files(&dir).unwrap();
    if files.is_empty() {
        eprintln!(
            "NO FIXTURES: found no *.json timing tables in {}; the guided-vs-exhaustive replay check \
             (within {:.0}% after at most {:.0}% of the space) has nothing to replay yet",
            dir.display(),
            MAX_GAP * 100.0,
            MAX_FRACTION * 100.0
        );
        return Vec::new();
    }
    let batch = TuneOptions::default().compile_batch;
    let mut misses = Vec::new();
    for f in files {
        let table = ReplayTable::load(&f).unwrap_or_else(|e| panic!("{e}"));
        let model = cost_model_for_table(&table);
        assert!(
            model.is_some(),
            "{}: no cost model for template {} on {} (problem {})",
            f.display(),
            table.template,
            table.device,
            table.problem
        );
        let run = || {
            replay(
                &table,
                &mut Guided::new(0, Budget::Fraction(MAX_FRACTION)),
                batch,
                model.as_deref(),
            )
        };
        let r = run();
        assert_eq!(r, run(), "{}: the replay is not deterministic", f.display());
        let gap = r
            .gap(&table)
            .unwrap_or_else(|| panic!("{}: nothing measurable", f.display()));
        eprintln!(
            "{}: {} on {} ({} configs): guided measured {} ({:.1}%), gap to exhaustive best {:.2}%",
            f.file_name().unwrap_or_default().to_string_lossy(),
            table.template,
            table.device,
            r.space,
            r.measured,
            r.measured_fraction() * 100.0,
            gap * 100.0
        );
        assert!(
            r.measured_fraction() <= MAX_FRACTION,
            "{}: measured {:.1}%",
            f.display(),
            r.measured_fraction() * 100.0
        );
        if gap > MAX_GAP {
            misses.push(format!(
                "{}: guided ends {:.2}% behind the exhaustive best",
                f.display(),
                gap * 100.0
            ));
        }
    }
    misses
}

#[test]
fn guided_replays_deterministically_within_its_budget() {
    let misses = replay_all();
    if !misses.is_empty() {
        eprintln!(
            "GAP MISSES (the test below fails on them):\n{}",
            misses.join("\n")
        );
    }
}

/// The target on the recorded H200 tables (issue 4): with the wgmma cost model the guided
/// strategy reaches the exhaustive best on all three 2026-12-02 tables after 14.8% of the space
/// (before the model: 0.0%, 8.8% and 52.8% behind).
#[test]
fn guided_reaches_the_exhaustive_best_on_recorded_tables() {
    let misses = replay_all();
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
