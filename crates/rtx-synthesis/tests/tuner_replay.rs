//! Replays the guided strategy over every recorded timing table in
//! `tests/fixtures/tuning/*.json` (fully measured on a real GPU, see the README there) and
//! checks that it gets within 3% of the exhaustive best while measuring at most 15% of the
//! space. With no fixture files it says so and passes on exactly that condition: it never
//! substitutes made-up timings.

use rtx_synthesis::tuner::replay::fixture_files;
use rtx_synthesis::tuner::{replay, Budget, Guided, ReplayTable, TuneOptions};
use std::path::PathBuf;

const MAX_GAP: f64 = 0.03;
const MAX_FRACTION: f64 = 0.15;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("tuning")
}

#[test]
fn guided_reaches_the_exhaustive_best_on_recorded_tables() {
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
        return;
    }
    let batch = TuneOptions::default().compile_batch;
    for f in files {
        let table = ReplayTable::load(&f).unwrap_or_else(|e| panic!("{e}"));
        let run = || replay(&table, &mut Guided::new(0, Budget::Fraction(MAX_FRACTION)), batch, None);
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
        assert!(
            gap <= MAX_GAP,
            "{}: guided ends {:.2}% behind the exhaustive best",
            f.display(),
            gap * 100.0
        );
    }
}
