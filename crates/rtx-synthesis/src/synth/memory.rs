//! The memory-bound ops in the user API: look the config of a fused elementwise graph or a row
//! op (softmax / LayerNorm / RMSNorm) up in the tuning database (exact / nearest shape bucket /
//! default, traced as for GEMM), and tune one on the device ([`Synth::tune_elementwise`],
//! [`Synth::tune_rows`]) through the same [`Tuner`], [`crate::tuner::MeasureProtocol`] and database as GEMM,
//! with [`MemoryGpuBackend`] over the bounded [`MemorySpace`].

use super::gemm::source_name;
use super::memory_backend::{MemoryGpuBackend, MemoryOp, MemorySpace};
use super::tune::{erase_outcome, FnProgress, StrategyKind, TuneRequest};
use super::{Synth, SynthError, RUNNERS_UP};
use crate::templates::elementwise::{ElementwiseConfig, ElementwiseProblem, ElementwiseTemplate};
use crate::templates::reduce::{RowConfig, RowProblem, RowReduceTemplate};
use crate::templates::Template;
use crate::tuner::{
    CandidateResult, DbEntry, Exhaustive, Guided, Lookup, LookupPolicy, ProblemSignature,
    RandomSearch, Strategy, TuneBackend, TuneOptions, TuneOutcome, TuneTask, Tuner,
};
use serde_json::Value;

/// What a memory-bound tuning run found.
#[derive(Debug, Clone)]
pub struct MemoryTuneReport {
    /// The tuned op's signature in words.
    pub op: String,
    /// The template that was tuned.
    pub template: &'static str,
    /// Its version.
    pub template_version: u32,
    /// Bytes one launch moves (every tensor once): the GB/s numerator.
    pub bytes: u64,
    /// The run, with configs in JSON form.
    pub outcome: TuneOutcome<Value>,
    /// The database entry built from it (stored when the request said so).
    pub entry: DbEntry,
    /// Whether the entry was written to the database.
    pub stored: bool,
    /// The template's default config for the problem, in JSON form.
    pub default_config: Value,
    /// The default config's median under the same protocol (from the run's table, or timed
    /// after it when the search did not reach it), microseconds.
    pub default_us: Option<f64>,
}

impl MemoryTuneReport {
    /// The winner's final median time, microseconds.
    pub fn best_us(&self) -> Option<f64> {
        self.outcome.best.final_stats().map(|s| s.median_us)
    }

    /// GB/s of a launch that took `us` microseconds.
    pub fn gbps(&self, us: f64) -> f64 {
        self.bytes as f64 / (us * 1e-6) / 1e9
    }

    /// Default time over tuned time (> 1: the tuned config is faster).
    pub fn speedup(&self) -> Option<f64> {
        Some(self.default_us? / self.best_us()?)
    }
}

impl Synth {
    /// The config to launch the fused elementwise `problem` with: the tuning database's exact
    /// entry, the nearest tuned shape of the same graph, or the template's default (logged).
    pub fn elementwise_config(
        &self,
        problem: &ElementwiseProblem,
    ) -> Result<Lookup<ElementwiseConfig>, SynthError> {
        problem
            .validate()
            .map_err(|e| SynthError::InvalidProblem(e.to_string()))?;
        self.memory_lookup(&ElementwiseTemplate, problem)
    }

    /// The config to launch the row op `problem` with (see [`Synth::elementwise_config`]).
    pub fn row_config(&self, problem: &RowProblem) -> Result<Lookup<RowConfig>, SynthError> {
        problem
            .validate()
            .map_err(|e| SynthError::InvalidProblem(e.to_string()))?;
        self.memory_lookup(&RowReduceTemplate, problem)
    }

    fn memory_lookup<T: Template>(
        &self,
        t: &T,
        problem: &T::Problem,
    ) -> Result<Lookup<T::Config>, SynthError>
    where
        T::Problem: ProblemSignature,
    {
        let found = self.lock_db().lookup(
            t,
            problem,
            self.arch,
            &self.device_key,
            &LookupPolicy::default(),
        )?;
        tracing::info!(
            template = t.name(),
            source = source_name(&found.source),
            config = ?found.config,
            "{}: serving a {} config",
            problem.signature(),
            source_name(&found.source)
        );
        Ok(found)
    }

    /// Tunes the fused elementwise `problem` on this device over its bounded space
    /// ([`MemorySpace`], `req.space_limit` configs at most) and, when `req.store`, stores the
    /// winner so later [`Synth::elementwise_config`] calls serve it. `req.isolate` is not
    /// supported for memory-bound ops (their kernels cannot hang on a bad tile config) and is
    /// ignored with a warning.
    pub fn tune_elementwise(
        &self,
        problem: &ElementwiseProblem,
        req: &TuneRequest<'_>,
    ) -> Result<MemoryTuneReport, SynthError> {
        problem
            .validate()
            .map_err(|e| SynthError::InvalidProblem(e.to_string()))?;
        self.tune_memory(ElementwiseTemplate, problem, req)
    }

    /// Tunes the row op `problem` (see [`Synth::tune_elementwise`]).
    pub fn tune_rows(
        &self,
        problem: &RowProblem,
        req: &TuneRequest<'_>,
    ) -> Result<MemoryTuneReport, SynthError> {
        problem
            .validate()
            .map_err(|e| SynthError::InvalidProblem(e.to_string()))?;
        self.tune_memory(RowReduceTemplate, problem, req)
    }

    fn tune_memory<T: MemoryOp>(
        &self,
        t: T,
        p: &T::Problem,
        req: &TuneRequest<'_>,
    ) -> Result<MemoryTuneReport, SynthError>
    where
        T::Problem: ProblemSignature,
    {
        if req.isolate.is_some() {
            tracing::warn!(
                "worker isolation is not supported for memory-bound ops; tuning in-process"
            );
        }
        let _gpu = crate::tuner::gpu_lock::acquire_run(&self.device)?;
        let space = MemorySpace::new(t, req.space_limit);
        let backend = MemoryGpuBackend::<MemorySpace<T>>::with_device(
            self.device.clone(),
            self.cache.clone(),
        );
        let mut strategy: Box<dyn Strategy> = match req.strategy {
            StrategyKind::Guided => Box::new(Guided::new(req.seed, req.budget)),
            StrategyKind::Exhaustive => Box::new(Exhaustive::new()),
            StrategyKind::Random => Box::new(RandomSearch::new(req.seed, req.budget)),
        };
        let tuner = Tuner::new(TuneOptions {
            time_budget: req.time_budget,
            seed: req.seed,
            compile_batch: req.resolved_compile_batch(),
            ..TuneOptions::default()
        });
        let mut progress = FnProgress(req.progress);
        let outcome = tuner.tune(
            &space,
            p,
            self.arch,
            &backend,
            strategy.as_mut(),
            &req.protocol,
            &mut progress,
        )?;
        let entry =
            DbEntry::from_outcome(&space, p, self.arch, &self.device_key, &outcome, RUNNERS_UP)?;
        let default = space.default_config(p, self.arch);
        let mut default_us = outcome
            .table
            .iter()
            .find(|r| r.config == default)
            .and_then(|r| r.final_stats())
            .map(|s| s.median_us);
        if default_us.is_none() {
            let task = TuneTask {
                template: &space,
                problem: p,
                arch: self.arch,
            };
            match backend.evaluate(&task, &default, req.seed ^ 0xdef, &req.protocol) {
                Ok(e) => default_us = Some(e.stats.median_us),
                Err(e) => tracing::warn!(error = %e, "the default config could not be measured"),
            }
        }
        if req.store {
            self.lock_db().insert(entry.clone())?;
            tracing::info!(
                template = space.name(),
                "stored the tuned config for {}",
                p.signature()
            );
        }
        let failed_default = outcome
            .table
            .iter()
            .any(|r| r.config == default && matches!(r.result, CandidateResult::Failed(_)));
        if failed_default {
            tracing::warn!(
                template = space.name(),
                "the default config failed verification or timing for {}",
                p.signature()
            );
        }
        Ok(MemoryTuneReport {
            op: p.signature().to_string(),
            template: space.name(),
            template_version: space.version(),
            bytes: space.bytes_moved(p),
            outcome: erase_outcome(outcome),
            entry,
            stored: req.store,
            default_config: serde_json::to_value(&default).unwrap_or(Value::Null),
            default_us,
        })
    }
}
