//! Tuning requests and reports of the user API ([`super::Synth::tune_gemm`]).

use crate::templates::gemm::GemmProblem;
use crate::tuner::{
    Budget, CandidateRecord, DbEntry, MeasureProtocol, ProgressSnapshot, ReplayTable, TuneOutcome,
    TuneProgress, WorkerCommand, WorkerStats,
};
use std::str::FromStr;
use std::time::Duration;

/// Which search strategy a tuning run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StrategyKind {
    /// Cost-guided local search (the default).
    #[default]
    Guided,
    /// Every config of the (possibly capped) space.
    Exhaustive,
    /// Uniform random sample.
    Random,
}

impl FromStr for StrategyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "guided" => Ok(StrategyKind::Guided),
            "exhaustive" => Ok(StrategyKind::Exhaustive),
            "random" => Ok(StrategyKind::Random),
            _ => Err(format!(
                "unknown strategy `{s}` (guided, exhaustive, random)"
            )),
        }
    }
}

/// One tuning run's knobs.
pub struct TuneRequest<'a> {
    /// The search strategy.
    pub strategy: StrategyKind,
    /// Measurements the guided/random strategies may spend (exhaustive measures everything).
    pub budget: Budget,
    /// Wall-clock budget of the search (compiles included; re-confirmation runs after it).
    pub time_budget: Duration,
    /// Called after every compile batch and measurement.
    pub progress: Option<&'a (dyn Fn(&ProgressSnapshot) + 'a)>,
    /// Seed of the strategy and of the verification inputs.
    pub seed: u64,
    /// How each candidate is timed.
    pub protocol: MeasureProtocol,
    /// Cap the space at this many configs, evenly spread ([`super::CappedSpace`]).
    pub space_limit: Option<usize>,
    /// Run candidates in worker processes started with this command (fault isolation).
    pub isolate: Option<WorkerCommand>,
    /// Store the winner in the tuning database (default true).
    pub store: bool,
    /// Configs compiled in parallel per step; `None` = 4 for the guided strategy (it learns
    /// from each step) and the machine's cores (4..=16) for exhaustive and random.
    pub compile_batch: Option<usize>,
    /// Search only the configs whose fields have these values (e.g. `{"cluster_m": 2}`).
    pub filter: Option<super::ConfigFilter>,
    /// Tune this template family instead of the one `gemm` serves for the problem (for
    /// comparison: such a winner is not stored). It must accept the problem
    /// ([`super::check_family`]).
    pub family: Option<super::GemmFamilyKind>,
}

impl TuneRequest<'_> {
    /// The compile batch this request runs with (see [`TuneRequest::compile_batch`]).
    pub fn resolved_compile_batch(&self) -> usize {
        match (self.compile_batch, self.strategy) {
            (Some(n), _) => n.max(1),
            (None, StrategyKind::Guided) => 4,
            (None, _) => std::thread::available_parallelism()
                .map_or(4, |n| n.get())
                .clamp(4, 16),
        }
    }
}

impl Default for TuneRequest<'_> {
    fn default() -> Self {
        TuneRequest {
            strategy: StrategyKind::Guided,
            budget: Budget::Fraction(0.15),
            time_budget: Duration::from_secs(60),
            progress: None,
            seed: 0x5eed,
            protocol: MeasureProtocol::default(),
            space_limit: None,
            isolate: None,
            store: true,
            compile_batch: None,
            filter: None,
            family: None,
        }
    }
}

/// Adapts a progress closure to [`TuneProgress`].
pub(crate) struct FnProgress<'a>(pub(crate) Option<&'a (dyn Fn(&ProgressSnapshot) + 'a)>);

impl TuneProgress for FnProgress<'_> {
    fn update(&mut self, snapshot: &ProgressSnapshot) {
        if let Some(f) = self.0 {
            f(snapshot)
        }
    }
}

/// What a tuning run found.
#[derive(Debug, Clone)]
pub struct GemmTuneReport {
    /// The tuned problem.
    pub problem: GemmProblem,
    /// The template family that was tuned.
    pub template: &'static str,
    /// Its version.
    pub template_version: u32,
    /// The run, with configs in JSON form.
    pub outcome: TuneOutcome<serde_json::Value>,
    /// The database entry built from it (stored when the request said so).
    pub entry: DbEntry,
    /// Whether the entry was written to the database.
    pub stored: bool,
    /// Worker process statistics, for isolated runs.
    pub worker: Option<WorkerStats>,
    /// The family's default config for the problem, in JSON form.
    pub default_config: serde_json::Value,
}

impl GemmTuneReport {
    /// The winner's final median time, microseconds.
    pub fn best_us(&self) -> Option<f64> {
        self.outcome.best.final_stats().map(|s| s.median_us)
    }

    /// The winner's throughput, TFLOP/s.
    pub fn best_tflops(&self) -> Option<f64> {
        self.best_us().map(|us| tflops(&self.problem, us))
    }

    /// The measured table as a replay fixture (run with the exhaustive strategy so every row is
    /// measured).
    pub fn replay_table(&self, device: &str, default: Option<serde_json::Value>) -> ReplayTable {
        ReplayTable::from_outcome(
            &self.outcome,
            device,
            self.template,
            self.template_version,
            format!("{:?}", self.problem),
            default,
        )
    }
}

/// TFLOP/s of `p` run in `us` microseconds.
pub fn tflops(p: &GemmProblem, us: f64) -> f64 {
    p.flops() / (us * 1e-6) / 1e12
}

/// A run's outcome with its configs replaced by their JSON form.
pub(crate) fn erase_outcome<C>(o: TuneOutcome<C>) -> TuneOutcome<serde_json::Value> {
    let erase = |r: CandidateRecord<C>| CandidateRecord {
        index: r.index,
        config: r.config_json.clone(),
        config_json: r.config_json,
        complexity: r.complexity,
        resources: r.resources,
        result: r.result,
    };
    TuneOutcome {
        best: erase(o.best),
        table: o.table.into_iter().map(erase).collect(),
        measured: o.measured,
        failed: o.failed,
        pruned: o.pruned,
        space: o.space,
        elapsed: o.elapsed,
        strategy: o.strategy,
        stopped_by_time: o.stopped_by_time,
        stopped_by_fault: o.stopped_by_fault,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn strategies_parse() {
        assert_eq!(
            "guided".parse::<StrategyKind>().unwrap(),
            StrategyKind::Guided
        );
        assert_eq!(
            "exhaustive".parse::<StrategyKind>().unwrap(),
            StrategyKind::Exhaustive
        );
        assert_eq!(
            "random".parse::<StrategyKind>().unwrap(),
            StrategyKind::Random
        );
        assert!("greedy"
            .parse::<StrategyKind>()
            .unwrap_err()
            .contains("greedy"));
    }

    #[test]
    fn tflops_of_a_known_gemm() {
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        // 2 * 4096^3 = 137.4 GFLOP in 1 ms = 137.4 TFLOP/s.
        assert!((tflops(&p, 1000.0) - 137.438_953_472).abs() < 1e-6);
    }
}
