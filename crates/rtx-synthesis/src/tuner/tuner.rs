//! One tuning run: static pruning, a strategy-driven search (candidates compiled in parallel
//! ahead, measured one at a time), re-confirmation of the leaders, and a tie-aware choice of
//! the winner.
//!
//! Invariants:
//! - no candidate wins unless its verification passed (twice when it was re-confirmed);
//! - the winner is chosen on a fresh re-measurement of the leaders (the first measurement chose
//!   them, so it is biased toward lucky samples), and within the noise ([`is_tie`]) the simpler
//!   config (`Template::complexity`) wins;
//! - a sticky fault in a backend that does not isolate faults stops the measuring (every later
//!   call on that context would fail), keeping what was measured before it;
//! - the time budget is checked before each measurement; compiles in flight finish, the rest
//!   are cancelled.

use super::backend::{
    CandidateError, CompileSink, Evaluation, ResourceUsage, TuneBackend, TuneTask, VerifyReport,
};
use super::measure::{is_tie, InvalidProtocol, MeasureProtocol, TimingStats};
use super::space::SearchSpace;
use super::strategy::{CostModel, Observation, SplitMix64, Strategy};
use crate::templates::Template;
use crate::Arch;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Knobs of a tuning run.
#[derive(Clone)]
pub struct TuneOptions {
    /// Wall-clock budget for the search (default 60 s); re-confirmation runs after it.
    pub time_budget: Duration,
    /// Configs proposed, and compiled in parallel, per step (default 4).
    pub compile_batch: usize,
    /// Measure a batch's first candidates while the rest still compile (default true).
    pub overlap_compile: bool,
    /// Leaders re-verified and re-timed at the end (default 3; 0 disables).
    pub reconfirm_top: usize,
    /// Treat a kernel that spills registers as pruned (default true).
    pub prune_spills: bool,
    /// Seed of the verification inputs (each verification draws a new seed from it).
    pub seed: u64,
    /// Optional cost model: seeds the guided search and orders the exhaustive one.
    pub cost_model: Option<Arc<dyn CostModel>>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            time_budget: Duration::from_secs(60),
            compile_batch: 4,
            overlap_compile: true,
            reconfirm_top: 3,
            prune_spills: true,
            seed: 0x5eed,
            cost_model: None,
        }
    }
}

impl std::fmt::Debug for TuneOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuneOptions")
            .field("time_budget", &self.time_budget)
            .field("compile_batch", &self.compile_batch)
            .field("overlap_compile", &self.overlap_compile)
            .field("reconfirm_top", &self.reconfirm_top)
            .field("prune_spills", &self.prune_spills)
            .field("seed", &self.seed)
            .field("cost_model", &self.cost_model.is_some())
            .finish()
    }
}

/// What happened to one config.
#[derive(Debug, Clone, PartialEq)]
pub enum CandidateResult {
    /// Verified and timed.
    Measured {
        /// The verification it passed.
        verify: VerifyReport,
        /// The first timing.
        stats: TimingStats,
        /// The re-confirmation timing, for the leaders.
        reconfirmed: Option<TimingStats>,
    },
    /// Failed on the GPU (wrong result, fault, timeout, crash).
    Failed(CandidateError),
    /// Failed before any GPU time (constraint, compile, resources).
    Pruned(CandidateError),
    /// Never measured (the strategy did not propose it, or the budget ran out).
    NotMeasured,
}

/// One row of the tuning table.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRecord<C> {
    /// Position in `Template::space` order (the default config, when it was not in the space,
    /// comes last).
    pub index: usize,
    /// The config.
    pub config: C,
    /// The config in JSON form.
    pub config_json: Value,
    /// `Template::complexity` of the config.
    pub complexity: u64,
    /// Resource use reported by the compile, when it compiled.
    pub resources: Option<ResourceUsage>,
    /// What happened.
    pub result: CandidateResult,
}

impl<C> CandidateRecord<C> {
    /// The timing the winner choice used: the re-confirmation when there is one.
    pub fn final_stats(&self) -> Option<&TimingStats> {
        match &self.result {
            CandidateResult::Measured {
                stats, reconfirmed, ..
            } => Some(reconfirmed.as_ref().unwrap_or(stats)),
            _ => None,
        }
    }

    /// The error, for failed and pruned candidates.
    pub fn error(&self) -> Option<&CandidateError> {
        match &self.result {
            CandidateResult::Failed(e) | CandidateResult::Pruned(e) => Some(e),
            _ => None,
        }
    }
}

/// The result of a tuning run.
#[derive(Debug, Clone)]
pub struct TuneOutcome<C> {
    /// The winner.
    pub best: CandidateRecord<C>,
    /// Every config of the space (plus the default if it was outside), in space order.
    pub table: Vec<CandidateRecord<C>>,
    /// Candidates verified and timed.
    pub measured: usize,
    /// Candidates that failed on the GPU.
    pub failed: usize,
    /// Candidates pruned statically (constraints, compile errors, resources).
    pub pruned: usize,
    /// Configs that passed `check()` (the searched space).
    pub space: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// The strategy's name.
    pub strategy: String,
    /// True when the time budget ended the search.
    pub stopped_by_time: bool,
    /// True when a sticky fault in a non-isolating backend ended the search.
    pub stopped_by_fault: bool,
}

impl<C> TuneOutcome<C> {
    /// Measured candidates, fastest final median first.
    pub fn ranked(&self) -> Vec<&CandidateRecord<C>> {
        let mut r: Vec<&CandidateRecord<C>> = self
            .table
            .iter()
            .filter(|r| r.final_stats().is_some())
            .collect();
        r.sort_by(|a, b| {
            let (x, y) = (
                a.final_stats().map_or(f64::INFINITY, |s| s.median_us),
                b.final_stats().map_or(f64::INFINITY, |s| s.median_us),
            );
            x.total_cmp(&y).then(a.index.cmp(&b.index))
        });
        r
    }

    /// The first of [`TuneOutcome::ranked`] when it is not the winner, and why it was passed
    /// over; `None` when the fastest measured candidate won.
    pub fn passed_over(&self) -> Option<(&CandidateRecord<C>, PassedOver)> {
        let top = *self.ranked().first()?;
        if top.index == self.best.index {
            return None;
        }
        let reconfirmed = |r: &CandidateRecord<C>| {
            matches!(
                r.result,
                CandidateResult::Measured {
                    reconfirmed: Some(_),
                    ..
                }
            )
        };
        // The winner comes from the re-confirmed leaders when there are any; among them the
        // fastest only loses to a simpler config within its noise.
        let why = if reconfirmed(&self.best) && !reconfirmed(top) {
            PassedOver::NotReconfirmed
        } else {
            PassedOver::TieToSimpler
        };
        Some((top, why))
    }
}

/// Why the fastest measured candidate of a run is not its winner ([`TuneOutcome::passed_over`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassedOver {
    /// It ties with the winner within the measured noise ([`is_tie`]), and ties go to the
    /// simpler config (`Template::complexity`).
    TieToSimpler,
    /// It was timed once, outside the re-confirmed leaders, and the winner is the fastest leader
    /// on its re-measurement (a single lucky sample does not win).
    NotReconfirmed,
}

/// Why a tuning run produced no winner.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    /// The measurement protocol is inconsistent.
    #[error(transparent)]
    InvalidProtocol(#[from] InvalidProtocol),
    /// No config passed the template's constraints.
    #[error("template `{template}` has no valid config for {problem} ({rejected} rejected)")]
    EmptySpace {
        /// Template name.
        template: String,
        /// The problem, debug-printed.
        problem: String,
        /// Configs `check()` rejected.
        rejected: usize,
    },
    /// Nothing was verified and timed.
    #[error("template `{template}`: no candidate passed ({failed} failed, {pruned} pruned{}){}", if *.stopped_by_time { ", time budget spent" } else { "" }, .first_error.as_ref().map(|e| format!("; first failure: {e}")).unwrap_or_default())]
    NoWinner {
        /// Template name.
        template: String,
        /// Candidates that failed on the GPU.
        failed: usize,
        /// Candidates pruned statically.
        pruned: usize,
        /// The first failure, for the message.
        first_error: Option<CandidateError>,
        /// True when the time budget ended the search.
        stopped_by_time: bool,
    },
    /// A config could not be converted to JSON.
    #[error("template `{template}`: config {config} does not serialise: {reason}")]
    Serialize {
        /// Template name.
        template: String,
        /// The config, debug-printed.
        config: String,
        /// serde_json's message.
        reason: String,
    },
}

/// Phase of a tuning run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunePhase {
    /// The strategy is proposing candidates.
    Searching,
    /// The leaders are being re-measured.
    Reconfirming,
    /// Finished.
    Done,
}

/// Counters handed to a [`TuneProgress`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressSnapshot {
    /// Configs in the searched space.
    pub space: usize,
    /// Compiles finished (ok or not).
    pub compiled: usize,
    /// Candidates verified and timed.
    pub measured: usize,
    /// Candidates that failed on the GPU.
    pub failed: usize,
    /// Candidates pruned statically.
    pub pruned: usize,
    /// Fastest median so far, microseconds.
    pub best_us: Option<f64>,
    /// Time since the run started.
    pub elapsed: Duration,
    /// What the run is doing.
    pub phase: TunePhase,
}

/// Receives progress (binaries render it with indicatif).
pub trait TuneProgress {
    /// Called after every compile batch and every measurement, from the tuning thread.
    fn update(&mut self, snapshot: &ProgressSnapshot);
}

/// A [`TuneProgress`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl TuneProgress for NoProgress {
    fn update(&mut self, _snapshot: &ProgressSnapshot) {}
}

/// Runs tuning searches.
#[derive(Debug, Clone, Default)]
pub struct Tuner {
    /// The options every run uses.
    pub options: TuneOptions,
}

struct RunState<C> {
    records: Vec<CandidateRecord<C>>,
    /// Record index of each space index.
    rec_of: Vec<usize>,
    compiled: usize,
    started: Instant,
    space: usize,
    poisoned: bool,
}

impl<C> RunState<C> {
    fn count(&self, f: impl Fn(&CandidateResult) -> bool) -> usize {
        self.records.iter().filter(|r| f(&r.result)).count()
    }

    fn snapshot(&self, phase: TunePhase) -> ProgressSnapshot {
        ProgressSnapshot {
            space: self.space,
            compiled: self.compiled,
            measured: self.count(|r| matches!(r, CandidateResult::Measured { .. })),
            failed: self.count(|r| matches!(r, CandidateResult::Failed(_))),
            pruned: self
                .rec_of
                .iter()
                .filter(|&&i| matches!(self.records[i].result, CandidateResult::Pruned(_)))
                .count(),
            best_us: self
                .records
                .iter()
                .filter_map(|r| r.final_stats())
                .map(|s| s.median_us)
                .min_by(f64::total_cmp),
            elapsed: self.started.elapsed(),
            phase,
        }
    }
}

impl Tuner {
    /// A tuner with these options.
    pub fn new(options: TuneOptions) -> Self {
        Tuner { options }
    }

    /// Searches `template`'s space for `problem` on `arch` (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn tune<T: Template, B: TuneBackend<T> + ?Sized>(
        &self,
        template: &T,
        problem: &T::Problem,
        arch: Arch,
        backend: &B,
        strategy: &mut dyn Strategy,
        protocol: &MeasureProtocol,
        progress: &mut dyn TuneProgress,
    ) -> Result<TuneOutcome<T::Config>, TuneError> {
        let started = Instant::now();
        protocol.validate()?;
        let opts = &self.options;
        let ser = |c: &T::Config| {
            serde_json::to_value(c).map_err(|e| TuneError::Serialize {
                template: template.name().to_string(),
                config: format!("{c:?}"),
                reason: e.to_string(),
            })
        };

        // Static pruning by the template's constraints.
        let mut raw = template.space(problem, arch);
        let default = template.default_config(problem, arch);
        if !raw.contains(&default) {
            raw.push(default.clone());
        }
        let mut st = RunState {
            records: Vec::with_capacity(raw.len()),
            rec_of: Vec::new(),
            compiled: 0,
            started,
            space: 0,
            poisoned: false,
        };
        let mut seen: HashSet<T::Config> = HashSet::new();
        let mut configs = Vec::new();
        for (index, config) in raw.into_iter().enumerate() {
            if !seen.insert(config.clone()) {
                continue;
            }
            let config_json = ser(&config)?;
            let result = match template.check(problem, &config, arch) {
                Ok(()) => {
                    st.rec_of.push(st.records.len());
                    configs.push(config_json.clone());
                    CandidateResult::NotMeasured
                }
                Err(v) => CandidateResult::Pruned(v.into()),
            };
            let complexity = template.complexity(&config);
            st.records.push(CandidateRecord {
                index,
                config,
                config_json,
                complexity,
                resources: None,
                result,
            });
        }
        st.space = configs.len();
        if configs.is_empty() {
            return Err(TuneError::EmptySpace {
                template: template.name().to_string(),
                problem: format!("{problem:?}"),
                rejected: st.records.len(),
            });
        }
        let default_idx = st
            .rec_of
            .iter()
            .position(|&r| st.records[r].config == default);
        let mut space = SearchSpace::new(configs).with_default(default_idx);
        if let Some(model) = &opts.cost_model {
            let hint: Vec<f64> = space
                .configs()
                .iter()
                .map(|c| model.estimate(c).unwrap_or(f64::NAN))
                .collect();
            space = space.clone().with_hint(hint).unwrap_or(space);
        }
        tracing::info!(template = template.name(), strategy = %strategy.name(), space = space.len(), "tuning {problem:?} on {arch}");

        let task = TuneTask {
            template,
            problem,
            arch,
        };
        let mut seeds = SplitMix64::new(opts.seed);
        let mut stopped_by_time = false;
        let mut proposed = vec![false; space.len()];
        progress.update(&st.snapshot(TunePhase::Searching));

        'search: loop {
            if started.elapsed() >= opts.time_budget {
                stopped_by_time = true;
                break;
            }
            if st.poisoned {
                break;
            }
            let mut batch = strategy.propose(&space, opts.compile_batch.max(1));
            batch.retain(|&i| i < proposed.len() && !std::mem::replace(&mut proposed[i], true));
            if batch.is_empty() {
                break;
            }
            let batch_configs: Vec<T::Config> = batch
                .iter()
                .map(|&i| st.records[st.rec_of[i]].config.clone())
                .collect();
            let cancel = AtomicBool::new(false);
            let (tx, rx) = mpsc::channel::<(usize, Result<ResourceUsage, CandidateError>)>();
            let mut stop = false;
            std::thread::scope(|s| {
                let (cancel_ref, cfgs, task_ref) = (&cancel, &batch_configs, &task);
                s.spawn(move || {
                    let emit = move |i: usize, r: Result<ResourceUsage, CandidateError>| {
                        let _ = tx.send((i, r));
                    };
                    backend.compile_many(task_ref, cfgs, &CompileSink::new(&emit, cancel_ref));
                });
                let mut ready: HashMap<usize, Result<ResourceUsage, CandidateError>> =
                    HashMap::new();
                if !opts.overlap_compile {
                    for (i, r) in rx.iter() {
                        st.compiled += 1;
                        ready.insert(i, r);
                    }
                    progress.update(&st.snapshot(TunePhase::Searching));
                }
                for (j, &si) in batch.iter().enumerate() {
                    let compiled = loop {
                        if let Some(r) = ready.remove(&j) {
                            break Some(r);
                        }
                        match rx.recv() {
                            Ok((i, r)) => {
                                st.compiled += 1;
                                ready.insert(i, r);
                            }
                            Err(_) => break None,
                        }
                    };
                    if stop || st.poisoned || started.elapsed() >= opts.time_budget {
                        // Out of time (or context lost): leave the rest unmeasured.
                        stop = true;
                        cancel.store(true, Ordering::Relaxed);
                        continue;
                    }
                    let rec = st.rec_of[si];
                    let obs = match compiled {
                        None => {
                            st.records[rec].result =
                                CandidateResult::Pruned(CandidateError::Compile(
                                    "the backend reported no compile result".into(),
                                ));
                            Observation::Pruned {
                                kind: "compile".into(),
                            }
                        }
                        Some(Err(e)) => self.record_failure(&mut st, rec, e),
                        Some(Ok(usage)) => {
                            st.records[rec].resources = Some(usage.clone());
                            if opts.prune_spills && usage.spills() {
                                let e = CandidateError::Resources {
                                    reason: format!(
                                        "spills ({} B stores, {} B loads)",
                                        usage.spill_store_bytes, usage.spill_load_bytes
                                    ),
                                    usage,
                                };
                                self.record_failure(&mut st, rec, e)
                            } else {
                                let r = evaluate_guarded(
                                    backend,
                                    &task,
                                    &st.records[rec].config,
                                    seeds.next_u64(),
                                    protocol,
                                );
                                match r {
                                    Ok(ev) => {
                                        let obs = Observation::Measured {
                                            median_us: ev.stats.median_us,
                                            rel_spread: ev.stats.rel_spread,
                                        };
                                        st.records[rec].result = CandidateResult::Measured {
                                            verify: ev.verify,
                                            stats: ev.stats,
                                            reconfirmed: None,
                                        };
                                        obs
                                    }
                                    Err(e) => {
                                        if e.poisons_context() && !backend.isolates_faults() {
                                            tracing::error!("{e}: the backend's context is lost; stopping the search with what was measured");
                                            st.poisoned = true;
                                        }
                                        self.record_failure(&mut st, rec, e)
                                    }
                                }
                            }
                        }
                    };
                    strategy.observe(&space, si, &obs);
                    progress.update(&st.snapshot(TunePhase::Searching));
                }
                cancel.store(true, Ordering::Relaxed);
                for (_, _) in rx.iter() {
                    st.compiled += 1;
                }
            });
            if stop {
                stopped_by_time = !st.poisoned;
                break 'search;
            }
        }

        // Re-confirm the leaders on fresh inputs and fresh timings.
        let mut leaders: Vec<usize> = (0..st.records.len())
            .filter(|&r| st.records[r].final_stats().is_some())
            .collect();
        leaders.sort_by(|&a, &b| {
            let (x, y) = (&st.records[a], &st.records[b]);
            let (sx, sy) = (
                x.final_stats().map_or(f64::INFINITY, |s| s.median_us),
                y.final_stats().map_or(f64::INFINITY, |s| s.median_us),
            );
            sx.total_cmp(&sy)
                .then(x.complexity.cmp(&y.complexity))
                .then(x.index.cmp(&y.index))
        });
        let mut confirmed: Vec<usize> = Vec::new();
        if opts.reconfirm_top > 0 && !st.poisoned && !leaders.is_empty() {
            let best_first = st.records[leaders[0]].final_stats().cloned();
            let picks: Vec<usize> = leaders
                .iter()
                .copied()
                .enumerate()
                .filter(|&(rank, r)| {
                    rank < opts.reconfirm_top
                        || best_first
                            .as_ref()
                            .zip(st.records[r].final_stats())
                            .is_some_and(|(b, s)| is_tie(b, s))
                })
                .map(|(_, r)| r)
                .take(2 * opts.reconfirm_top)
                .collect();
            progress.update(&st.snapshot(TunePhase::Reconfirming));
            for r in picks {
                let res = evaluate_guarded(
                    backend,
                    &task,
                    &st.records[r].config,
                    seeds.next_u64(),
                    protocol,
                );
                match res {
                    Ok(ev) => {
                        let name = format!("{:?}", st.records[r].config);
                        if let CandidateResult::Measured {
                            stats, reconfirmed, ..
                        } = &mut st.records[r].result
                        {
                            let drift = (ev.stats.median_us - stats.median_us).abs()
                                / stats.median_us.max(f64::MIN_POSITIVE);
                            if drift > 0.1 {
                                tracing::warn!(
                                    "re-measuring {name} moved its median {:.1}% ({:.3} -> {:.3} us): unstable timing",
                                    drift * 100.0,
                                    stats.median_us,
                                    ev.stats.median_us
                                );
                            }
                            *reconfirmed = Some(ev.stats);
                        }
                        confirmed.push(r);
                    }
                    Err(e) => {
                        tracing::warn!(
                            "leader {:?} failed re-confirmation: {e}",
                            st.records[r].config
                        );
                        if e.poisons_context() && !backend.isolates_faults() {
                            st.poisoned = true;
                        }
                        st.records[r].result = CandidateResult::Failed(e);
                        if st.poisoned {
                            break;
                        }
                    }
                }
                progress.update(&st.snapshot(TunePhase::Reconfirming));
            }
        }

        // Choose: fastest of the confirmed leaders (else of everything measured), then the
        // simplest config within its noise.
        let pool: Vec<usize> = if confirmed.is_empty() {
            (0..st.records.len())
                .filter(|&r| st.records[r].final_stats().is_some())
                .collect()
        } else {
            confirmed
        };
        let median = |r: usize| {
            st.records[r]
                .final_stats()
                .map_or(f64::INFINITY, |s| s.median_us)
        };
        let fastest = pool.iter().copied().min_by(|&a, &b| {
            median(a)
                .total_cmp(&median(b))
                .then(st.records[a].index.cmp(&st.records[b].index))
        });
        let snapshot_failed = st.count(|r| matches!(r, CandidateResult::Failed(_)));
        let snapshot_pruned = st
            .rec_of
            .iter()
            .filter(|&&i| matches!(st.records[i].result, CandidateResult::Pruned(_)))
            .count();
        let Some(fastest) = fastest else {
            let first_error = st
                .rec_of
                .iter()
                .find_map(|&i| st.records[i].error().cloned());
            return Err(TuneError::NoWinner {
                template: template.name().to_string(),
                failed: snapshot_failed,
                pruned: snapshot_pruned,
                first_error,
                stopped_by_time,
            });
        };
        let fs = st.records[fastest].final_stats().cloned();
        let best = pool
            .iter()
            .copied()
            .filter(|&r| match (&fs, st.records[r].final_stats()) {
                (Some(a), Some(b)) => is_tie(a, b),
                _ => false,
            })
            .min_by(|&a, &b| {
                let (x, y) = (&st.records[a], &st.records[b]);
                x.complexity
                    .cmp(&y.complexity)
                    .then(median(a).total_cmp(&median(b)))
                    .then(x.index.cmp(&y.index))
            })
            .unwrap_or(fastest);
        if best != fastest {
            tracing::info!(
                "{:?} ties with the fastest {:?} within the noise and is simpler; it wins",
                st.records[best].config,
                st.records[fastest].config
            );
        }
        let best_us = median(best);
        progress.update(&st.snapshot(TunePhase::Done));
        let measured = st.count(|r| matches!(r, CandidateResult::Measured { .. }));
        let outcome = TuneOutcome {
            best: st.records[best].clone(),
            measured,
            failed: snapshot_failed,
            pruned: snapshot_pruned,
            space: st.space,
            elapsed: started.elapsed(),
            strategy: strategy.name(),
            stopped_by_time,
            stopped_by_fault: st.poisoned,
            table: st.records,
        };
        tracing::info!(
            template = template.name(),
            "tuned in {:.1?}: best {:?} at {:.3} us ({} measured, {} failed, {} pruned of {})",
            outcome.elapsed,
            outcome.best.config,
            best_us,
            outcome.measured,
            outcome.failed,
            outcome.pruned,
            outcome.space
        );
        Ok(outcome)
    }

    fn record_failure<C>(
        &self,
        st: &mut RunState<C>,
        rec: usize,
        e: CandidateError,
    ) -> Observation {
        tracing::debug!("candidate {} failed: {e}", st.records[rec].index);
        let kind = e.kind().to_string();
        if e.is_static() {
            st.records[rec].result = CandidateResult::Pruned(e);
            Observation::Pruned { kind }
        } else {
            st.records[rec].result = CandidateResult::Failed(e);
            Observation::Failed { kind }
        }
    }
}

/// Evaluates, turning a backend panic into a failure and re-checking the verification.
fn evaluate_guarded<T: Template, B: TuneBackend<T> + ?Sized>(
    backend: &B,
    task: &TuneTask<'_, T>,
    config: &T::Config,
    seed: u64,
    protocol: &MeasureProtocol,
) -> Result<Evaluation, CandidateError> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backend.evaluate(task, config, seed, protocol)
    }));
    match r {
        Ok(Ok(ev)) if !ev.verify.passed() => Err(CandidateError::WrongResult {
            rel_err: ev.verify.rel_err,
            bound: ev.verify.bound,
        }),
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(CandidateError::Fault(format!(
                "the backend panicked: {msg}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuner::strategy::{Budget, Exhaustive, Guided};
    use crate::tuner::testing::{
        quick_protocol, RecordingProgress, Script, ScriptedBackend, ToyConfig, ToyProblem,
        ToyTemplate,
    };

    fn run(
        template: &ToyTemplate,
        n: u32,
        backend: &ScriptedBackend,
        options: TuneOptions,
    ) -> Result<TuneOutcome<ToyConfig>, TuneError> {
        Tuner::new(options).tune(
            template,
            &ToyProblem { n },
            Arch::Sm90a,
            backend,
            &mut Exhaustive::new(),
            &quick_protocol(),
            &mut NoProgress,
        )
    }

    fn kind_of(o: &TuneOutcome<ToyConfig>, id: u32) -> Option<&'static str> {
        o.table
            .iter()
            .find(|r| r.config.id == id)
            .and_then(|r| r.error())
            .map(|e| e.kind())
    }

    #[test]
    fn picks_the_fastest_verified_candidate() {
        let b = ScriptedBackend::new([(3, Script::Time(10.0)), (5, Script::WrongResult)]);
        let o = run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        assert_eq!(o.best.config.id, 3);
        assert_eq!(kind_of(&o, 5), Some("wrong_result"));
        assert_eq!(
            b.evaluations_of(5),
            0,
            "a wrong result is never timed, so it cannot win"
        );
        assert_eq!((o.measured, o.failed, o.pruned, o.space), (7, 1, 0, 8));
        assert!(!o.stopped_by_time && !o.stopped_by_fault);
        assert_eq!(o.ranked()[0].config.id, 3);
    }

    #[test]
    fn static_failures_are_pruned() {
        let t = ToyTemplate {
            rejected: vec![2],
            ..Default::default()
        };
        let b = ScriptedBackend::new([(4, Script::CompileError), (6, Script::Spills)]);
        let o = run(&t, 8, &b, TuneOptions::default()).unwrap();
        assert_eq!(kind_of(&o, 2), Some("rejected"));
        assert_eq!(kind_of(&o, 4), Some("compile"));
        assert_eq!(kind_of(&o, 6), Some("resources"));
        assert_eq!(
            (o.space, o.pruned, o.measured),
            (7, 2, 5),
            "the rejected config is outside the space"
        );
        assert_eq!(b.evaluations_of(6), 0);
        assert_eq!(o.table.len(), 8);
        let keep = run(
            &t,
            8,
            &ScriptedBackend::new([(6, Script::Spills)]),
            TuneOptions {
                prune_spills: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            kind_of(&keep, 6),
            None,
            "spilling kernels are measured when asked"
        );
    }

    #[test]
    fn ties_go_to_the_simpler_config() {
        // id 1 has tile 32, id 4 has tile 16 (simpler); 0.4% apart is inside the noise floor.
        let b = ScriptedBackend::new([
            (0, Script::Time(200.0)),
            (1, Script::Time(50.0)),
            (4, Script::Time(50.2)),
        ]);
        let o = run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        assert_eq!(o.best.config.id, 4);
        let (top, why) = o.passed_over().expect("the fastest did not win");
        assert_eq!((top.config.id, why), (1, PassedOver::TieToSimpler));
        // Control: clearly apart, the faster one wins whatever its complexity.
        let b = ScriptedBackend::new([
            (0, Script::Time(200.0)),
            (1, Script::Time(50.0)),
            (4, Script::Time(60.0)),
        ]);
        let o = run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        assert_eq!(o.best.config.id, 1);
        assert!(o.passed_over().is_none());
    }

    #[test]
    fn a_single_sample_outside_the_leaders_is_passed_over_and_said_so() {
        // Leaders 2 and 3 (first 10 and 12 us) re-measure at 30 and 28; 5, timed once at 15,
        // was not among the two leaders re-confirmed, so 3 wins and 5 ranks first.
        let b = ScriptedBackend::new([
            (2, Script::FirstThen(10.0, 30.0)),
            (3, Script::FirstThen(12.0, 28.0)),
            (5, Script::Time(15.0)),
        ]);
        let o = run(
            &ToyTemplate::default(),
            8,
            &b,
            TuneOptions {
                reconfirm_top: 2,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(o.best.config.id, 3);
        let (top, why) = o.passed_over().expect("5 ranks first");
        assert_eq!((top.config.id, why), (5, PassedOver::NotReconfirmed));
    }

    #[test]
    fn a_lucky_first_measurement_is_reconfirmed() {
        let script =
            || ScriptedBackend::new([(2, Script::FirstThen(5.0, 150.0)), (3, Script::Time(20.0))]);
        let b = script();
        let o = run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        assert_eq!(o.best.config.id, 3);
        assert_eq!(b.evaluations_of(2), 2);
        let r2 = o.table.iter().find(|r| r.config.id == 2).unwrap();
        assert_eq!(r2.final_stats().unwrap().median_us, 150.0);
        let without = run(
            &ToyTemplate::default(),
            8,
            &script(),
            TuneOptions {
                reconfirm_top: 0,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            without.best.config.id, 2,
            "without re-confirmation the lucky sample wins"
        );
    }

    #[test]
    fn a_leader_failing_reconfirmation_is_disqualified() {
        struct FlakyVerify(ScriptedBackend, std::sync::atomic::AtomicUsize);
        impl TuneBackend<ToyTemplate> for FlakyVerify {
            fn compile(
                &self,
                t: &TuneTask<'_, ToyTemplate>,
                c: &ToyConfig,
            ) -> Result<ResourceUsage, CandidateError> {
                self.0.compile(t, c)
            }
            fn verify(
                &self,
                t: &TuneTask<'_, ToyTemplate>,
                c: &ToyConfig,
                s: u64,
            ) -> Result<VerifyReport, CandidateError> {
                // id 1 passes once, then races: wrong on the second look.
                if c.id == 1 && self.1.fetch_add(1, Ordering::Relaxed) > 0 {
                    return Ok(VerifyReport {
                        rel_err: 1.0,
                        bound: 0.02,
                    });
                }
                self.0.verify(t, c, s)
            }
            fn time(
                &self,
                t: &TuneTask<'_, ToyTemplate>,
                c: &ToyConfig,
                p: &MeasureProtocol,
            ) -> Result<TimingStats, CandidateError> {
                self.0.time(t, c, p)
            }
        }
        let b = FlakyVerify(
            ScriptedBackend::new([(1, Script::Time(5.0))]),
            Default::default(),
        );
        let o = Tuner::default()
            .tune(
                &ToyTemplate::default(),
                &ToyProblem { n: 6 },
                Arch::Sm90a,
                &b,
                &mut Exhaustive::new(),
                &quick_protocol(),
                &mut NoProgress,
            )
            .unwrap();
        assert_eq!(o.best.config.id, 0);
        assert_eq!(kind_of(&o, 1), Some("wrong_result"));
    }

    #[test]
    fn a_sticky_fault_stops_an_in_process_run() {
        let b = ScriptedBackend::new([(3, Script::Fault)]);
        let o = run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        assert!(o.stopped_by_fault);
        assert_eq!(kind_of(&o, 3), Some("fault"));
        assert_eq!(o.best.config.id, 0);
        let later = o
            .table
            .iter()
            .filter(|r| r.config.id > 3)
            .all(|r| r.result == CandidateResult::NotMeasured);
        assert!(later, "nothing runs on a lost context");
        assert_eq!(
            b.evaluations_of(0),
            1,
            "no re-confirmation on a lost context"
        );
    }

    #[test]
    fn a_panicking_backend_is_a_fault() {
        let b = ScriptedBackend::new([(2, Script::Panic)]);
        let o = run(&ToyTemplate::default(), 5, &b, TuneOptions::default()).unwrap();
        assert_eq!(kind_of(&o, 2), Some("fault"));
        assert!(o.stopped_by_fault);
    }

    #[test]
    fn the_time_budget_is_respected() {
        let b = ScriptedBackend::default();
        let e = run(
            &ToyTemplate::default(),
            8,
            &b,
            TuneOptions {
                time_budget: Duration::ZERO,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                TuneError::NoWinner {
                    stopped_by_time: true,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(b.evaluations.lock().unwrap().len(), 0);
    }

    #[test]
    fn every_verification_gets_a_fresh_seed() {
        let b = ScriptedBackend::default();
        run(&ToyTemplate::default(), 8, &b, TuneOptions::default()).unwrap();
        let mut seeds = b.seeds.lock().unwrap().clone();
        assert_eq!(seeds.len(), 8 + 3, "8 candidates + 3 re-confirmations");
        seeds.sort();
        seeds.dedup();
        assert_eq!(seeds.len(), 11);
    }

    #[test]
    fn empty_and_hopeless_spaces_are_errors() {
        let t = ToyTemplate {
            rejected: (0..4).collect(),
            ..Default::default()
        };
        let e = run(&t, 4, &ScriptedBackend::default(), TuneOptions::default()).unwrap_err();
        assert_eq!(
            e,
            TuneError::EmptySpace {
                template: "toy".into(),
                problem: "ToyProblem { n: 4 }".into(),
                rejected: 4
            }
        );
        let all_bad = ScriptedBackend::new((0..4).map(|i| (i, Script::WrongResult)));
        let e = run(&ToyTemplate::default(), 4, &all_bad, TuneOptions::default()).unwrap_err();
        match e {
            TuneError::NoWinner {
                failed: 4,
                first_error: Some(CandidateError::WrongResult { .. }),
                ..
            } => {}
            other => panic!("expected NoWinner, got {other:?}"),
        }
    }

    #[test]
    fn progress_is_reported() {
        let b = ScriptedBackend::new([(1, Script::CompileError)]);
        let mut p = RecordingProgress::default();
        let o = Tuner::default()
            .tune(
                &ToyTemplate::default(),
                &ToyProblem { n: 6 },
                Arch::Sm90a,
                &b,
                &mut Exhaustive::new(),
                &quick_protocol(),
                &mut p,
            )
            .unwrap();
        let last = p.0.last().unwrap();
        assert_eq!(last.phase, TunePhase::Done);
        assert_eq!(
            (last.measured, last.pruned, last.compiled, last.space),
            (o.measured, 1, 6, 6)
        );
        assert!(p.0.iter().any(|s| s.phase == TunePhase::Reconfirming));
        assert_eq!(last.best_us, Some(100.0));
    }

    #[test]
    fn guided_search_spends_only_its_budget() {
        let b = ScriptedBackend::default();
        let o = Tuner::default()
            .tune(
                &ToyTemplate::default(),
                &ToyProblem { n: 40 },
                Arch::Sm90a,
                &b,
                &mut Guided::new(1, Budget::Count(8)),
                &quick_protocol(),
                &mut NoProgress,
            )
            .unwrap();
        assert_eq!(o.measured, 8);
        assert_eq!(
            o.table
                .iter()
                .filter(|r| r.result == CandidateResult::NotMeasured)
                .count(),
            32
        );
        assert!(o.strategy.starts_with("guided"));
    }

    #[test]
    fn serial_compile_mode_gives_the_same_answer() {
        let b = ScriptedBackend::new([(5, Script::Time(7.0)), (6, Script::CompileError)]);
        let o = run(
            &ToyTemplate::default(),
            9,
            &b,
            TuneOptions {
                overlap_compile: false,
                compile_batch: 2,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(o.best.config.id, 5);
        assert_eq!(b.compiles.load(Ordering::Relaxed), 9);
    }
}
