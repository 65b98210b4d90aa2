//! The `rtx-tuned` rows of the memory suite: which config the tuning database serves for a row
//! op or a fused graph (exact entry or nearest tuned shape; nothing when only the default is
//! available), after tuning it in-process first when the run asked for it (`--tune`: the
//! bounded [`MemorySpace`](rtx_synthesis::synth::MemorySpace), exhaustive, a wall-clock budget
//! per op; the winner is stored so later runs serve it).

use crate::gpu::Gpu;
use crate::report::TuningInfo;
use rtx_synthesis::synth::{MemoryTuneReport, StrategyKind, Synth, SynthError, TuneRequest};
use rtx_synthesis::templates::elementwise::{
    ElementwiseConfig, ElementwiseProblem, ElementwiseTemplate,
};
use rtx_synthesis::templates::reduce::{RowConfig, RowProblem, RowReduceTemplate};
use rtx_synthesis::templates::Template;
use rtx_synthesis::tuner::{Lookup, LookupSource, MeasureProtocol};
use std::time::{Duration, Instant};

/// A served tuned config and its provenance.
#[derive(Debug, Clone)]
pub struct Tuned<C> {
    /// The config.
    pub config: C,
    /// Provenance for the report.
    pub info: TuningInfo,
}

/// Name of the tuned row of a default row named `rtx <rest>`: `rtx-tuned <rest>`.
pub fn tuned_name(default_name: &str) -> String {
    match default_name.strip_prefix("rtx ") {
        Some(rest) => format!("rtx-tuned {rest}"),
        None => format!("rtx-tuned {default_name}"),
    }
}

/// The tuning database (through [`Synth`]) and the run's tuning policy.
pub struct MemoryTuning {
    synth: Result<Synth, String>,
    budget: Option<Duration>,
    quick: bool,
}

fn lookup_source(s: &LookupSource) -> Option<&'static str> {
    match s {
        LookupSource::Exact => Some("exact"),
        LookupSource::NearestBucket { .. } => Some("nearest-bucket"),
        LookupSource::Default => None,
    }
}

impl MemoryTuning {
    /// Opens the default kernel cache and tuning database for `gpu`; `budget`: tune each op
    /// in-process first with this wall-clock budget.
    pub fn new(gpu: &Gpu, budget: Option<Duration>, quick: bool) -> MemoryTuning {
        let synth = Synth::new(&gpu.device)
            .map_err(|e| format!("tuning database / kernel cache not usable: {e}"));
        MemoryTuning {
            synth,
            budget,
            quick,
        }
    }

    /// Whether this run tunes before serving.
    pub fn tunes(&self) -> bool {
        self.budget.is_some()
    }

    fn request(&self, budget: Duration) -> TuneRequest<'static> {
        let protocol = if self.quick {
            MeasureProtocol {
                min_reps: 5,
                max_reps: 50,
                max_time_ms: 200.0,
                ..MeasureProtocol::default()
            }
        } else {
            MeasureProtocol::default()
        };
        TuneRequest {
            strategy: StrategyKind::Exhaustive,
            time_budget: budget,
            protocol,
            store: true,
            ..TuneRequest::default()
        }
    }

    fn serve<C: serde::Serialize + Clone>(
        found: Lookup<C>,
        default: &C,
        tuned: Option<(MemoryTuneReport, f64)>,
    ) -> Option<Tuned<C>> {
        let src = lookup_source(&found.source)?;
        let json = |c: &C| serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
        let (source, tune_s, measured) = match (&tuned, &found.source) {
            (Some((r, s)), LookupSource::Exact) => ("tuned", Some(*s), Some(r.outcome.measured)),
            _ => (src, None, None),
        };
        Some(Tuned {
            info: TuningInfo {
                source: source.to_string(),
                config: json(&found.config),
                default_config: json(default),
                tune_s,
                measured,
            },
            config: found.config,
        })
    }

    /// The tuned config of a row op (tuning it first under `--tune`); `Ok(None)` when the
    /// database has nothing for it (the reason is in the caller's not-available row).
    pub fn row(&self, gpu: &Gpu, p: &RowProblem) -> Result<Option<Tuned<RowConfig>>, String> {
        let synth = self.synth.as_ref().map_err(Clone::clone)?;
        let tuned = match self.budget {
            Some(b) => Some(
                timed(|| synth.tune_rows(p, &self.request(b)))
                    .map_err(|e| format!("tuning: {e}"))?,
            ),
            None => None,
        };
        let found = synth.row_config(p).map_err(|e| e.to_string())?;
        let default = RowReduceTemplate.default_config(p, gpu.arch);
        Ok(Self::serve(found, &default, tuned))
    }

    /// The tuned config of a fused elementwise graph (see [`MemoryTuning::row`]).
    pub fn elementwise(
        &self,
        gpu: &Gpu,
        p: &ElementwiseProblem,
    ) -> Result<Option<Tuned<ElementwiseConfig>>, String> {
        let synth = self.synth.as_ref().map_err(Clone::clone)?;
        let tuned = match self.budget {
            Some(b) => Some(
                timed(|| synth.tune_elementwise(p, &self.request(b)))
                    .map_err(|e| format!("tuning: {e}"))?,
            ),
            None => None,
        };
        let found = synth.elementwise_config(p).map_err(|e| e.to_string())?;
        let default = ElementwiseTemplate.default_config(p, gpu.arch);
        Ok(Self::serve(found, &default, tuned))
    }
}

fn timed(
    f: impl FnOnce() -> Result<MemoryTuneReport, SynthError>,
) -> Result<(MemoryTuneReport, f64), SynthError> {
    let t0 = Instant::now();
    let r = f()?;
    Ok((r, t0.elapsed().as_secs_f64()))
}

/// The reason of a tuned row that has nothing to serve, with the command that tunes it.
pub fn nothing_tuned(tune_cmd: &str) -> String {
    format!("no tuning-database entry for this op on this device (run `rtx-bench --tune` or `{tune_cmd}`)")
}

/// A note fragment describing the tuned config.
pub fn describe(info: &TuningInfo) -> String {
    let mut s = format!("tuned config ({}) {}", info.source, info.config);
    if let Some(t) = info.tune_s {
        s.push_str(&format!(", tuned in this run in {t:.1} s"));
        if let Some(m) = info.measured {
            s.push_str(&format!(" ({m} configs measured)"));
        }
    }
    s.push_str(&format!(
        "; untuned = default config {}",
        info.default_config
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuned_rows_are_named_after_the_default_rows() {
        assert_eq!(
            tuned_name("rtx softmax bf16 16384x3072"),
            "rtx-tuned softmax bf16 16384x3072"
        );
        assert_eq!(
            tuned_name("rtx chain8 fused bf16 32768x4096"),
            "rtx-tuned chain8 fused bf16 32768x4096"
        );
        assert_eq!(tuned_name("x"), "rtx-tuned x");
    }

    #[test]
    fn only_database_configs_are_served() {
        let default = 1u32;
        let l = |source| Lookup {
            config: 7u32,
            source,
            fallbacks: vec![],
            stats: None,
        };
        assert!(MemoryTuning::serve(l(LookupSource::Default), &default, None).is_none());
        let t = MemoryTuning::serve(l(LookupSource::Exact), &default, None).unwrap();
        assert_eq!((t.config, t.info.source.as_str()), (7, "exact"));
        assert_eq!(t.info.default_config, serde_json::json!(1));
        let n = MemoryTuning::serve(
            l(LookupSource::NearestBucket {
                from: vec![1, 2],
                distance: 1.0,
            }),
            &default,
            None,
        )
        .unwrap();
        assert_eq!(n.info.source, "nearest-bucket");
        assert!(describe(&n.info).contains("nearest-bucket"));
    }
}
