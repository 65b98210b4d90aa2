//! Tuning suite: how many measurements each search strategy needs to reach the best config, by
//! replaying the fully measured timing tables recorded on the H200
//! (`crates/rtx-synthesis/tests/fixtures/tuning/*.json`, embedded at build time) through the real
//! strategies. No GPU time is spent and nothing is timed in this run: every figure is a row of a
//! recorded table, and each case's note names the table it came from.
//!
//! Per table and strategy (exhaustive, random and guided at 15% of the space, guided with the
//! template's cost model, as `rtx-tune` runs it): the recorded time of the best config the
//! strategy found (`median_us`), the measurements it spent (`samples`), and in the note the
//! measurements it needed to get within 3% of the table's best, and its final gap. The tuned-vs-
//! default gain on this run's GPU is in the GEMM and memory suites (`vs untuned` of the tuned rows).

use super::{Suite, SuiteContext, SuiteError};
use crate::report::{Case, Clock};
use crate::stats::Summary;
use crate::suite_id::SuiteId;
use rtx_synthesis::tuner::{
    cost_model_for_table, replay, Budget, CostModel, Exhaustive, Guided, RandomSearch,
    ReplayResult, ReplayTable, Strategy, TuneOptions,
};

/// The recorded tables: (file name, JSON).
const TABLES: [(&str, &str); 3] = [
    ("fixture_wgmma_bf16_nn_4096_4096_4096.json", include_str!("../../../rtx-synthesis/tests/fixtures/tuning/fixture_wgmma_bf16_nn_4096_4096_4096.json")),
    ("fixture_wgmma_bf16_nt_1024_1024_1024.json", include_str!("../../../rtx-synthesis/tests/fixtures/tuning/fixture_wgmma_bf16_nt_1024_1024_1024.json")),
    ("fixture_wgmma_bf16_nn_256_8192_8192.json", include_str!("../../../rtx-synthesis/tests/fixtures/tuning/fixture_wgmma_bf16_nn_256_8192_8192.json")),
];

/// Fraction of the space the random and guided strategies may measure (as `rtx-tune`'s default).
pub const FRACTION: f64 = 0.15;

/// "Reached the best": within this fraction of the table's fastest config.
pub const NEAR: f64 = 0.03;

/// Measurements (run-time proposals, pruned ones are free) a replay spent before it first saw a
/// config within `NEAR` of the table's best; `None` when it never did.
pub fn measurements_to_near_best(table: &ReplayTable, r: &ReplayResult) -> Option<usize> {
    let t = |i: usize| table.configs.get(i).and_then(|row| row.median_us);
    let best = t(r.exhaustive_best?)?;
    let mut spent = 0;
    for &i in &r.proposals {
        let row = table.configs.get(i)?;
        let static_fail = row.failed.as_deref().is_some_and(|f| {
            rtx_synthesis::tuner::CandidateError::kind_is_static(f.split(':').next().unwrap_or(""))
        });
        if !static_fail {
            spent += 1;
        }
        if t(i).is_some_and(|m| m <= best * (1.0 + NEAR)) {
            return Some(spent);
        }
    }
    None
}

/// The tuning suite.
pub struct TuningSuite;

/// `wgmma_bf16_nn_4096_4096_4096` for `fixture_wgmma_bf16_nn_4096_4096_4096.json`.
fn table_label(file: &str) -> &str {
    file.trim_start_matches("fixture_")
        .trim_end_matches(".json")
}

fn table_case(
    file: &str,
    table: &ReplayTable,
    name: &str,
    strategy: &mut dyn Strategy,
    model: Option<&dyn CostModel>,
) -> Case {
    let batch = TuneOptions::default().compile_batch;
    let r = replay(table, strategy, batch, model);
    let label = table_label(file);
    let case_name = format!("tuner {name} {label}");
    let found = r
        .best_found
        .and_then(|i| table.configs.get(i))
        .and_then(|row| row.median_us);
    let Some(found) = found else {
        return Case::failed(
            SuiteId::Tuning,
            case_name,
            label,
            Clock::Gpu,
            "the strategy measured no working config",
        );
    };
    let summary = Summary {
        median_us: found,
        p20_us: found,
        p80_us: found,
        rel_spread: 0.0,
        samples: r.measured,
    };
    let near = measurements_to_near_best(table, &r).map_or(
        format!("never within {:.0}% of the best", NEAR * 100.0),
        |n| {
            format!(
                "within {:.0}% of the best after {n} ({:.1}% of the space)",
                NEAR * 100.0,
                100.0 * n as f64 / r.space.max(1) as f64
            )
        },
    );
    let gap = r
        .gap(table)
        .map_or("-".to_string(), |g| format!("{:.2}%", 100.0 * g));
    Case::measured(SuiteId::Tuning, case_name, label, Clock::Gpu, &summary).with_dtype("bf16").with_note(format!(
        "replayed over the timing table recorded on {} ({file}, {} configs); measured {} ({:.1}%), {near}, \
         ends {gap} behind the exhaustive best; median_us is the recorded time of the config it ends with (no GPU time in this run)",
        table.device,
        r.space,
        r.measured,
        100.0 * r.measured_fraction(),
    ))
}

impl Suite for TuningSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Tuning
    }
    /// Runs with the GPU suites only: without a GPU, `rtx-bench` prints no GPU-clock figure,
    /// recorded ones included.
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, _ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        Ok(replay_cases())
    }
}

/// Every embedded table replayed through the three strategies (a table that does not parse is
/// one failed case).
pub fn replay_cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (file, json) in TABLES {
        let parsed = serde_json::from_str::<ReplayTable>(json).map_err(|e| e.to_string());
        let table = match parsed.and_then(|t| t.validate().map(|_| t)) {
            Ok(t) => t,
            Err(e) => {
                out.push(Case::failed(
                    SuiteId::Tuning,
                    format!("tuner table {file}"),
                    "-",
                    Clock::Gpu,
                    e,
                ));
                continue;
            }
        };
        let model = cost_model_for_table(&table);
        out.push(table_case(
            file,
            &table,
            "exhaustive",
            &mut Exhaustive::new(),
            None,
        ));
        out.push(table_case(
            file,
            &table,
            "random",
            &mut RandomSearch::new(0, Budget::Fraction(FRACTION)),
            None,
        ));
        out.push(table_case(
            file,
            &table,
            "guided",
            &mut Guided::new(0, Budget::Fraction(FRACTION)),
            model.as_deref(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_replays_and_exhaustive_reaches_the_best() {
        let ctx_cases = replay_cases();
        assert_eq!(ctx_cases.len(), 3 * TABLES.len());
        for c in &ctx_cases {
            eprintln!(
                "{}: {:.1} us, {} measured; {}",
                c.name,
                c.median_us.unwrap_or(f64::NAN),
                c.samples,
                c.note.as_deref().unwrap_or("")
            );
            assert!(c.is_measured(), "{}: {:?}", c.name, c.status);
            assert!(
                c.note
                    .as_deref()
                    .unwrap_or("")
                    .contains("replayed over the timing table"),
                "{}",
                c.name
            );
        }
        for chunk in ctx_cases.chunks(3) {
            let (ex, guided) = (&chunk[0], &chunk[2]);
            assert!(
                ex.note.as_deref().unwrap().contains("ends 0.00% behind"),
                "{:?}",
                ex.note
            );
            // Guided spends at most 15% of the space; exhaustive spends all of it.
            assert!(
                guided.samples < ex.samples,
                "{} vs {}",
                guided.samples,
                ex.samples
            );
            assert!(guided.median_us.unwrap() >= ex.median_us.unwrap());
        }
    }
}
