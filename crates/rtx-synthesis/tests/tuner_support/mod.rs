//! Shared test doubles for the tuner's integration tests: a toy template and a dummy backend
//! whose candidates are slow, wrong, broken, hanging, crashing or faulting (after cubecl's
//! `crates/cubecl-runtime/tests/dummy/`). The dummy's "times" are fixed test inputs that steer
//! the tuner's control flow, not measurements of anything.

#![allow(dead_code)]

use rtx_synthesis::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use rtx_synthesis::tuner::{
    run_protocol, CandidateError, MeasureProtocol, ResourceUsage, TimingStats, TuneBackend,
    TuneTask, VerifyReport, Warmup,
};
use rtx_synthesis::Arch;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A toy config.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToyConfig {
    pub id: u32,
    pub tile: u32,
}

/// A toy problem: configs `0..n`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToyProblem {
    pub n: u32,
}

/// The id `check()` rejects.
pub const REJECTED: u32 = 12;

/// A toy template; its complexity is the tile size.
pub struct ToyTemplate;

pub fn config(id: u32) -> ToyConfig {
    ToyConfig {
        id,
        tile: 16 << (id % 4),
    }
}

impl Template for ToyTemplate {
    type Problem = ToyProblem;
    type Config = ToyConfig;
    fn name(&self) -> &'static str {
        "toy"
    }
    fn version(&self) -> u32 {
        1
    }
    fn space(&self, p: &ToyProblem, _arch: Arch) -> Vec<ToyConfig> {
        (0..p.n).map(config).collect()
    }
    fn check(&self, p: &ToyProblem, c: &ToyConfig, _arch: Arch) -> Result<(), ConstraintViolation> {
        if c.id == REJECTED || c.id >= p.n {
            return Err(ConstraintViolation {
                template: "toy".into(),
                config: format!("{c:?}"),
                reason: format!("id {} not allowed", c.id),
            });
        }
        Ok(())
    }
    fn default_config(&self, _p: &ToyProblem, _arch: Arch) -> ToyConfig {
        config(0)
    }
    fn emit(
        &self,
        p: &ToyProblem,
        c: &ToyConfig,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.check(p, c, arch)?;
        Ok(KernelSource {
            entry: format!("toy_{}", c.id),
            code: format!("// toy id={} tile={}\n", c.id, c.tile),
            template: "toy".into(),
            template_version: 1,
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

/// What the dummy does with each id of a 14-config space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Behaviour {
    /// Correct, at this fixed test value (us).
    Time(f64),
    /// Correct but really slow to run (sleeps per repetition), at this test value.
    Slow(f64),
    /// Wrong output, at a test value that would otherwise win.
    WrongResult,
    /// Does not compile.
    BrokenCompile,
    /// Spills registers.
    Spills,
    /// Sleeps forever when run.
    HangRun,
    /// Aborts the process when run.
    CrashRun,
    /// Reports a sticky device fault when run.
    Fault,
    /// Sleeps forever when compiled.
    HangCompile,
    /// Aborts the process when compiled.
    CrashCompile,
}

/// The id that must win: the fastest correct candidate.
pub const WINNER: u32 = 2;
/// Size of the dummy's space.
pub const SPACE: u32 = 14;

pub fn behaviour(id: u32) -> Behaviour {
    match id {
        0 => Behaviour::Time(50.0),
        1 => Behaviour::Slow(400.0),
        2 => Behaviour::Time(10.0),
        3 => Behaviour::WrongResult,
        4 => Behaviour::BrokenCompile,
        5 => Behaviour::HangRun,
        6 => Behaviour::CrashRun,
        7 => Behaviour::Fault,
        8 => Behaviour::HangCompile,
        9 => Behaviour::CrashCompile,
        11 => Behaviour::Spills,
        13 => Behaviour::Time(30.0),
        _ => Behaviour::Time(12.0),
    }
}

/// The failure kind each failing id must be recorded with.
pub fn expected_kind(id: u32) -> Option<&'static str> {
    Some(match behaviour(id) {
        Behaviour::WrongResult => "wrong_result",
        Behaviour::BrokenCompile => "compile",
        Behaviour::Spills => "resources",
        Behaviour::HangRun | Behaviour::HangCompile => "timeout",
        Behaviour::CrashRun | Behaviour::CrashCompile => "worker_crashed",
        Behaviour::Fault => "fault",
        _ if id == REJECTED => "rejected",
        _ => return None,
    })
}

fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The dummy backend (meant to run inside a worker process: it hangs and aborts for real).
pub struct DummyBackend;

impl TuneBackend<ToyTemplate> for DummyBackend {
    fn compile(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
    ) -> Result<ResourceUsage, CandidateError> {
        match behaviour(c.id) {
            Behaviour::BrokenCompile => Err(CandidateError::Compile(format!(
                "toy_{}.cu(1): error: broken on purpose",
                c.id
            ))),
            Behaviour::Spills => Ok(ResourceUsage {
                registers: Some(255),
                spill_store_bytes: 128,
                spill_load_bytes: 128,
                ..Default::default()
            }),
            Behaviour::HangCompile => hang(),
            Behaviour::CrashCompile => std::process::abort(),
            _ => Ok(ResourceUsage {
                registers: Some(96),
                ..Default::default()
            }),
        }
    }

    fn verify(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
        _seed: u64,
    ) -> Result<VerifyReport, CandidateError> {
        match behaviour(c.id) {
            Behaviour::WrongResult => Ok(VerifyReport {
                rel_err: 0.7,
                bound: 2e-2,
            }),
            Behaviour::HangRun => hang(),
            Behaviour::CrashRun => std::process::abort(),
            Behaviour::Fault => Err(CandidateError::Fault(
                "CUDA_ERROR_ILLEGAL_ADDRESS (dummy)".into(),
            )),
            _ => Ok(VerifyReport {
                rel_err: 1e-4,
                bound: 2e-2,
            }),
        }
    }

    fn time(
        &self,
        _t: &TuneTask<'_, ToyTemplate>,
        c: &ToyConfig,
        p: &MeasureProtocol,
    ) -> Result<TimingStats, CandidateError> {
        let (value, sleep) = match behaviour(c.id) {
            Behaviour::Time(t) => (t, Duration::ZERO),
            Behaviour::Slow(t) => (t, Duration::from_millis(20)),
            Behaviour::WrongResult => (1.0, Duration::ZERO),
            _ => (1.0, Duration::ZERO),
        };
        run_protocol(p, |_| {
            std::thread::sleep(sleep);
            Ok(value)
        })
    }
}

/// A short protocol for tests.
pub fn quick_protocol() -> MeasureProtocol {
    MeasureProtocol {
        warmup: Warmup::Iters(1),
        min_reps: 3,
        max_reps: 5,
        flush_l2: false,
        ..Default::default()
    }
}
