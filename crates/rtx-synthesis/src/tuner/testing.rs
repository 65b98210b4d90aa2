//! Test doubles for the tuner's unit tests: a toy template and a scripted in-process backend.
//! The backend's "times" are fixed test inputs that steer the tuner's control flow; they are
//! not measurements of anything.

use super::backend::{CandidateError, ResourceUsage, TuneBackend, TuneTask, VerifyReport};
use super::measure::{run_protocol, MeasureProtocol, TimingStats};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::Arch;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A toy config: an id and a tile size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToyConfig {
    pub id: u32,
    pub tile: u32,
}

/// A toy problem.
#[derive(Debug, Clone, PartialEq)]
pub struct ToyProblem {
    pub n: u32,
}

/// A toy template: configs `0..n`, tile `16 << (id % 4)`; `check()` rejects ids in `rejected`.
pub struct ToyTemplate {
    pub rejected: Vec<u32>,
    pub version: u32,
    /// Changes the emitted code without a version bump (for stale-fingerprint tests).
    pub code_salt: String,
}

impl Default for ToyTemplate {
    fn default() -> Self {
        ToyTemplate {
            rejected: Vec::new(),
            version: 1,
            code_salt: String::new(),
        }
    }
}

impl ToyTemplate {
    pub fn config(id: u32) -> ToyConfig {
        ToyConfig {
            id,
            tile: 16 << (id % 4),
        }
    }
}

impl Template for ToyTemplate {
    type Problem = ToyProblem;
    type Config = ToyConfig;

    fn name(&self) -> &'static str {
        "toy"
    }
    fn version(&self) -> u32 {
        self.version
    }
    fn space(&self, p: &ToyProblem, _arch: Arch) -> Vec<ToyConfig> {
        (0..p.n).map(Self::config).collect()
    }
    fn check(&self, p: &ToyProblem, c: &ToyConfig, _arch: Arch) -> Result<(), ConstraintViolation> {
        if self.rejected.contains(&c.id) || c.id >= p.n.max(1) {
            return Err(ConstraintViolation {
                template: "toy".into(),
                config: format!("{c:?}"),
                reason: format!("id {} is not allowed for n={}", c.id, p.n),
            });
        }
        Ok(())
    }
    fn default_config(&self, _p: &ToyProblem, _arch: Arch) -> ToyConfig {
        Self::config(0)
    }
    fn emit(
        &self,
        p: &ToyProblem,
        c: &ToyConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(p, c, arch)?;
        Ok(KernelSource {
            entry: format!("toy_{}_{}", c.id, c.tile),
            code: format!(
                "// toy kernel id={} tile={}{}\n",
                c.id, c.tile, self.code_salt
            ),
            template: "toy".into(),
            template_version: self.version,
            options: vec![],
        })
    }
    fn launch(&self, _p: &ToyProblem, c: &ToyConfig) -> LaunchDims {
        LaunchDims {
            grid: [1, 1, 1],
            block: [c.tile, 1, 1],
            dynamic_smem: 0,
        }
    }
    fn complexity(&self, c: &ToyConfig) -> u64 {
        c.tile as u64
    }
}

/// What the scripted backend does with one id.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    /// Verifies and times at this fixed test value (microseconds).
    Time(f64),
    /// Times differently on the first and later evaluations (a lucky first measurement).
    FirstThen(f64, f64),
    WrongResult,
    CompileError,
    Spills,
    Fault,
    Panic,
}

/// An in-process backend that follows a script per config id (default: `Time(100 + id)`).
#[derive(Default)]
pub struct ScriptedBackend {
    pub script: HashMap<u32, Script>,
    pub compiles: AtomicUsize,
    pub evaluations: Mutex<Vec<u32>>,
    pub seeds: Mutex<Vec<u64>>,
}

impl ScriptedBackend {
    pub fn new(script: impl IntoIterator<Item = (u32, Script)>) -> Self {
        ScriptedBackend {
            script: script.into_iter().collect(),
            ..Default::default()
        }
    }
    fn script(&self, id: u32) -> Script {
        self.script
            .get(&id)
            .cloned()
            .unwrap_or(Script::Time(100.0 + id as f64))
    }
    pub fn evaluations_of(&self, id: u32) -> usize {
        self.evaluations
            .lock()
            .unwrap()
            .iter()
            .filter(|&&x| x == id)
            .count()
    }
}

impl TuneBackend<ToyTemplate> for ScriptedBackend {
    fn compile(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
    ) -> Result<ResourceUsage, CandidateError> {
        self.compiles.fetch_add(1, Ordering::Relaxed);
        match self.script(c.id) {
            Script::CompileError => Err(CandidateError::Compile(format!(
                "error: toy {} does not compile",
                c.id
            ))),
            Script::Spills => Ok(ResourceUsage {
                registers: Some(255),
                spill_store_bytes: 64,
                ..Default::default()
            }),
            _ => Ok(ResourceUsage {
                registers: Some(64),
                ..Default::default()
            }),
        }
    }

    fn verify(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
        seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        self.seeds.lock().unwrap().push(seed);
        match self.script(c.id) {
            Script::WrongResult => Ok(VerifyReport {
                rel_err: 0.5,
                bound: 0.02,
            }),
            Script::Fault => Err(CandidateError::Fault("CUDA_ERROR_ILLEGAL_ADDRESS".into())),
            Script::Panic => panic!("toy backend panics on {}", c.id),
            _ => Ok(VerifyReport {
                rel_err: 1e-4,
                bound: 0.02,
            }),
        }
    }

    fn time(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
        p: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let n = {
            let mut e = self.evaluations.lock().unwrap();
            e.push(c.id);
            e.iter().filter(|&&x| x == c.id).count()
        };
        let value = match self.script(c.id) {
            Script::Time(t) => t,
            Script::FirstThen(a, b) => {
                if n == 1 {
                    a
                } else {
                    b
                }
            }
            _ => 1.0,
        };
        run_protocol(p, |_| Ok(value))
    }
}

/// A fast protocol for tests.
pub fn quick_protocol() -> MeasureProtocol {
    MeasureProtocol {
        warmup: super::measure::Warmup::Iters(1),
        min_reps: 3,
        max_reps: 5,
        flush_l2: false,
        ..Default::default()
    }
}

impl super::key::ProblemSignature for ToyProblem {
    fn signature(&self) -> super::key::OpSignature {
        super::key::OpSignature {
            op: "toy".into(),
            dtypes: vec![crate::DType::F32],
            layouts: vec![],
            shape: vec![self.n as u64],
            attrs: vec![],
        }
    }
}

/// Records every progress snapshot.
#[derive(Default)]
pub struct RecordingProgress(pub Vec<super::tuner::ProgressSnapshot>);

impl super::tuner::TuneProgress for RecordingProgress {
    fn update(&mut self, s: &super::tuner::ProgressSnapshot) {
        self.0.push(s.clone());
    }
}
