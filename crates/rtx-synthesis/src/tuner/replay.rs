//! Strategies replayed offline over recorded timing tables.
//!
//! A fixture is a fully measured table from a real GPU (recorded with the exhaustive strategy,
//! [`ReplayTable::from_outcome`]), as JSON:
//! `{ device, template, template_version, problem, default?, configs: [ { config, median_us,
//! rel_spread, failed } ] }`, where `failed` is `"<kind>: <message>"` with a
//! [`CandidateError::kind`] name. A replay feeds a strategy the recorded results in the order
//! it asks for them, exactly as the tuner would (same batch size, same [`SearchSpace`], static
//! failures observed as pruned), so its choices and their cost can be checked without a GPU.

use super::backend::CandidateError;
use super::space::SearchSpace;
use super::strategy::{CostModel, Observation, Strategy};
use super::tuner::{CandidateResult, TuneOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One recorded config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRow {
    /// The config in its serde JSON form.
    pub config: Value,
    /// Recorded median time (absent for failures).
    #[serde(default)]
    pub median_us: Option<f64>,
    /// Recorded relative spread (absent for failures).
    #[serde(default)]
    pub rel_spread: Option<f64>,
    /// `"<kind>: <message>"` when the config failed.
    #[serde(default)]
    pub failed: Option<String>,
}

impl ReplayRow {
    /// The [`CandidateError::kind`] of a failed row.
    pub fn failure_kind(&self) -> Option<&str> {
        self.failed
            .as_deref()
            .map(|f| f.split(':').next().unwrap_or(f).trim())
    }

    /// What a strategy observes when it proposes this row.
    pub fn observation(&self) -> Observation {
        match (self.failure_kind(), self.median_us) {
            (Some(kind), _) if CandidateError::kind_is_static(kind) => Observation::Pruned {
                kind: kind.to_string(),
            },
            (Some(kind), _) => Observation::Failed {
                kind: kind.to_string(),
            },
            (None, Some(m)) => Observation::Measured {
                median_us: m,
                rel_spread: self.rel_spread.unwrap_or(0.0),
            },
            (None, None) => Observation::Failed {
                kind: "unmeasurable".into(),
            },
        }
    }
}

/// A fully measured table for one (device, template, problem).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayTable {
    /// Device name (and whatever else identifies it).
    pub device: String,
    /// Template name.
    pub template: String,
    /// Template version.
    pub template_version: u32,
    /// The problem, in words.
    pub problem: String,
    /// The template's default config, when recorded (strategies start from it).
    #[serde(default)]
    pub default: Option<Value>,
    /// Every config of the searched space.
    pub configs: Vec<ReplayRow>,
}

/// A fixture that cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("fixture {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The JSON does not parse or breaks the format.
    #[error("fixture {path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// What a replay did.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayResult {
    /// The strategy's name.
    pub strategy: String,
    /// Row indices in the order the strategy proposed them.
    pub proposals: Vec<usize>,
    /// Proposals that cost GPU time (measured or failed at run time).
    pub measured: usize,
    /// Proposals pruned statically.
    pub pruned: usize,
    /// Rows in the table.
    pub space: usize,
    /// Fastest row the strategy saw.
    pub best_found: Option<usize>,
    /// Fastest row of the whole table.
    pub exhaustive_best: Option<usize>,
}

impl ReplayResult {
    /// `found / best - 1` (0.03 means 3% slower than the exhaustive best).
    pub fn gap(&self, table: &ReplayTable) -> Option<f64> {
        let t = |i: usize| table.configs.get(i).and_then(|r| r.median_us);
        Some(t(self.best_found?)? / t(self.exhaustive_best?)? - 1.0)
    }

    /// `measured / space`.
    pub fn measured_fraction(&self) -> f64 {
        if self.space == 0 {
            0.0
        } else {
            self.measured as f64 / self.space as f64
        }
    }
}

fn fastest(table: &ReplayTable, rows: impl Iterator<Item = usize>) -> Option<usize> {
    rows.filter(|&i| matches!(table.configs[i].observation(), Observation::Measured { .. }))
        .min_by(|&a, &b| {
            let (x, y) = (
                table.configs[a].median_us.unwrap_or(f64::INFINITY),
                table.configs[b].median_us.unwrap_or(f64::INFINITY),
            );
            x.total_cmp(&y).then(a.cmp(&b))
        })
}

impl ReplayTable {
    /// Reads and validates a fixture file.
    pub fn load(path: &Path) -> Result<ReplayTable, ReplayError> {
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let t: ReplayTable = serde_json::from_str(&text).map_err(|e| ReplayError::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        t.validate().map_err(|reason| ReplayError::Format {
            path: path.to_path_buf(),
            reason,
        })?;
        Ok(t)
    }

    /// Checks that every row is either failed or has a finite, non-negative median, and that
    /// no config appears twice.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.configs.iter().enumerate() {
            if !seen.insert(r.config.to_string()) {
                return Err(format!("row {i}: config {} appears twice", r.config));
            }
            if r.failed.is_none() && !r.median_us.is_some_and(|m| m.is_finite() && m >= 0.0) {
                return Err(format!("row {i}: neither failed nor a finite median_us"));
            }
        }
        if self.configs.is_empty() {
            return Err("no configs".into());
        }
        Ok(())
    }

    /// Writes the fixture as pretty JSON, atomically (a crash leaves the old file or none), making
    /// the parent folder when it does not exist.
    pub fn save(&self, path: &Path) -> Result<(), ReplayError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| ReplayError::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        crate::aot::fsio::write_atomic_making_parent(path, (text + "\n").as_bytes()).map_err(
            |source| ReplayError::Io {
                path: path.to_path_buf(),
                source,
            },
        )
    }

    /// A fixture from a tuning run (use the exhaustive strategy so every row is measured).
    /// Rows use each candidate's first timing, so every row was measured the same way;
    /// configs `check()` rejected are left out (they are not part of the searched space).
    pub fn from_outcome<C>(
        outcome: &TuneOutcome<C>,
        device: impl Into<String>,
        template: impl Into<String>,
        template_version: u32,
        problem: impl Into<String>,
        default: Option<Value>,
    ) -> ReplayTable {
        let configs = outcome
            .table
            .iter()
            .filter_map(|r| {
                let (median_us, rel_spread, failed) = match &r.result {
                    CandidateResult::Measured { stats, .. } => {
                        (Some(stats.median_us), Some(stats.rel_spread), None)
                    }
                    CandidateResult::Pruned(CandidateError::Rejected(_))
                    | CandidateResult::NotMeasured => return None,
                    CandidateResult::Failed(e) | CandidateResult::Pruned(e) => {
                        let msg = e.to_string();
                        let first = msg.lines().next().unwrap_or("");
                        (None, None, Some(format!("{}: {first}", e.kind())))
                    }
                };
                Some(ReplayRow {
                    config: r.config_json.clone(),
                    median_us,
                    rel_spread,
                    failed,
                })
            })
            .collect();
        ReplayTable {
            device: device.into(),
            template: template.into(),
            template_version,
            problem: problem.into(),
            default,
            configs,
        }
    }

    /// The search space the strategies see (the default marked, the hint attached).
    pub fn space(&self, cost_model: Option<&dyn CostModel>) -> SearchSpace {
        let space = SearchSpace::new(self.configs.iter().map(|r| r.config.clone()).collect());
        let default = self.default.as_ref().and_then(|d| space.index_of(d));
        let space = space.with_default(default);
        match cost_model {
            Some(m) => {
                let hint = self
                    .configs
                    .iter()
                    .map(|r| m.estimate(&r.config).unwrap_or(f64::NAN))
                    .collect();
                space.clone().with_hint(hint).unwrap_or(space)
            }
            None => space,
        }
    }
}

/// Replays `strategy` over `table`, proposing `batch` configs at a time as the tuner does.
pub fn replay(
    table: &ReplayTable,
    strategy: &mut dyn Strategy,
    batch: usize,
    cost_model: Option<&dyn CostModel>,
) -> ReplayResult {
    let space = table.space(cost_model);
    let mut proposals = Vec::new();
    let mut done = vec![false; table.configs.len()];
    let (mut measured, mut pruned) = (0, 0);
    loop {
        let mut p = strategy.propose(&space, batch.max(1));
        p.retain(|&i| i < done.len() && !std::mem::replace(&mut done[i], true));
        if p.is_empty() {
            break;
        }
        for i in p {
            let obs = table.configs[i].observation();
            match obs {
                Observation::Pruned { .. } => pruned += 1,
                _ => measured += 1,
            }
            proposals.push(i);
            strategy.observe(&space, i, &obs);
        }
    }
    ReplayResult {
        strategy: strategy.name(),
        best_found: fastest(table, proposals.iter().copied()),
        exhaustive_best: fastest(table, 0..table.configs.len()),
        proposals,
        measured,
        pruned,
        space: table.configs.len(),
    }
}

/// The `*.json` fixture files in `dir`, sorted (empty if the directory has none).
pub fn fixture_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuner::strategy::{Budget, Exhaustive, Guided, RandomSearch};
    use serde_json::json;

    /// SYNTHETIC table for testing the replay mechanics only: these are made-up numbers, not
    /// measurements, and say nothing about any strategy's quality on real kernels.
    fn synthetic_table() -> ReplayTable {
        let mut configs = Vec::new();
        for bm in [32, 64, 128, 256] {
            for bn in [32, 64, 128, 256] {
                for stages in [2, 3, 4] {
                    let failed = match (bm, bn) {
                        (256, 256) => {
                            Some("resources: spills (64 B stores, 64 B loads)".to_string())
                        }
                        (32, 256) => {
                            Some("wrong_result: relative error 1e0 exceeds 2e-2".to_string())
                        }
                        _ => None,
                    };
                    let median_us = failed.is_none().then(|| {
                        100.0
                            + ((bm as f64).log2() - 7.0).abs() * 10.0
                            + ((bn as f64).log2() - 7.0).abs() * 7.0
                            + stages as f64
                    });
                    configs.push(ReplayRow {
                        config: json!({"bm": bm, "bn": bn, "stages": stages}),
                        rel_spread: median_us.map(|_| 0.01),
                        median_us,
                        failed,
                    });
                }
            }
        }
        ReplayTable {
            device: "SYNTHETIC (no device)".into(),
            template: "synthetic".into(),
            template_version: 1,
            problem: "synthetic".into(),
            default: Some(json!({"bm": 64, "bn": 64, "stages": 2})),
            configs,
        }
    }

    #[test]
    fn synthetic_rows_map_to_observations() {
        let t = synthetic_table();
        t.validate().unwrap();
        let kinds: Vec<_> = t.configs.iter().filter_map(|r| r.failure_kind()).collect();
        assert!(kinds.contains(&"resources") && kinds.contains(&"wrong_result"));
        let spill = t
            .configs
            .iter()
            .find(|r| r.failure_kind() == Some("resources"))
            .unwrap();
        assert_eq!(
            spill.observation(),
            Observation::Pruned {
                kind: "resources".into()
            }
        );
        let wrong = t
            .configs
            .iter()
            .find(|r| r.failure_kind() == Some("wrong_result"))
            .unwrap();
        assert_eq!(
            wrong.observation(),
            Observation::Failed {
                kind: "wrong_result".into()
            }
        );
    }

    #[test]
    fn synthetic_exhaustive_replay_sees_everything() {
        let t = synthetic_table();
        let r = replay(&t, &mut Exhaustive::new(), 4, None);
        assert_eq!(r.proposals.len(), t.configs.len());
        assert_eq!(r.pruned, 3, "the three spilling rows cost no budget");
        assert_eq!(r.measured, t.configs.len() - 3);
        assert_eq!(r.best_found, r.exhaustive_best);
        assert_eq!(r.gap(&t), Some(0.0));
        let d = t.space(None).default_index().unwrap();
        assert_eq!(r.proposals[0], d, "the recorded default goes first");
    }

    #[test]
    fn synthetic_replays_are_deterministic_and_budgeted() {
        let t = synthetic_table();
        for mk in [
            || Box::new(Guided::new(9, Budget::Fraction(0.25))) as Box<dyn Strategy>,
            || Box::new(RandomSearch::new(9, Budget::Fraction(0.25))) as Box<dyn Strategy>,
        ] {
            let a = replay(&t, mk().as_mut(), 4, None);
            let b = replay(&t, mk().as_mut(), 4, None);
            assert_eq!(a, b);
            assert_eq!(a.measured, Budget::Fraction(0.25).limit(t.configs.len()));
            assert!(a.measured_fraction() <= 0.25);
            assert!(a.gap(&t).unwrap() >= 0.0);
        }
    }

    #[test]
    fn fixtures_round_trip_and_reject_bad_rows() {
        let dir = tempfile::tempdir().unwrap();
        let t = synthetic_table();
        let p = dir.path().join("synthetic.json");
        t.save(&p).unwrap();
        assert_eq!(fixture_files(dir.path()).unwrap(), vec![p.clone()]);
        // A folder that does not exist yet is made: a long exhaustive run never ends unsaved.
        let nested = dir.path().join("new").join("folder").join("t.json");
        t.save(&nested).unwrap();
        assert_eq!(
            ReplayTable::load(&nested).unwrap().configs.len(),
            t.configs.len()
        );
        assert!(matches!(t.save(dir.path()), Err(ReplayError::Io { .. })));
        let back = ReplayTable::load(&p).unwrap();
        assert_eq!(back.configs.len(), t.configs.len());
        assert_eq!(back.default, t.default);
        let mut bad = t.clone();
        bad.configs[0].median_us = None;
        bad.configs[0].failed = None;
        assert!(bad.validate().unwrap_err().contains("row 0"));
        let mut dup = t;
        dup.configs.push(dup.configs[1].clone());
        assert!(dup.validate().unwrap_err().contains("twice"));
        std::fs::write(&p, "{\"device\": 1}").unwrap();
        assert!(matches!(
            ReplayTable::load(&p),
            Err(ReplayError::Format { .. })
        ));
    }
}
