//! The benchmark suites behind one [`Suite`] trait.
//!
//! A suite returns cases; a case it cannot measure yet (the template it needs has not landed) is
//! returned as `not available yet: <reason>` with no figures. A suite that needs a GPU is only
//! run when one is present (the runner records it as skipped otherwise).

pub mod aot;
pub mod attention;
pub mod gemm;
pub mod memory;
pub mod transformer;
pub mod tuning;

use crate::checkpoint::Checkpoint;
use crate::gpu::Gpu;
use crate::progress::Progress;
use crate::registry::RegistryOptions;
use crate::report::Case;
use crate::suite_id::SuiteId;
use crate::timing::TimingConfig;
use rtx_synthesis::Arch;

/// What every suite gets.
pub struct SuiteContext<'a> {
    /// The device, when one was found.
    pub gpu: Option<&'a Gpu>,
    /// `--quick`: fewer shapes, shorter timing.
    pub quick: bool,
    /// Timing policy for GPU cases.
    pub timing: TimingConfig,
    /// Compile registry options.
    pub registry: RegistryOptions,
    /// Targets the compile suite builds for (sm_90a and sm_120, plus the device's).
    pub compile_archs: Vec<Arch>,
    /// Draw progress bars.
    pub show_progress: bool,
    /// Memory suite: tune the memory-bound cases in-process before timing their `rtx-tuned`
    /// rows (`None`: serve the tuning database as it is); the value is the wall-clock budget of
    /// one tuning run.
    pub tune: Option<std::time::Duration>,
    /// GEMM suite: which dtypes and shapes to run (everything by default).
    pub gemm_filter: gemm::shapes::GemmFilter,
    /// Where finished cases are kept while the run goes (`None`: nowhere, e.g. in tests).
    pub checkpoint: Option<&'a Checkpoint>,
}

impl SuiteContext<'_> {
    /// A progress bar for this suite.
    pub fn progress(&self, label: &str, len: u64) -> Progress {
        Progress::new(label, len, self.show_progress)
    }

    /// Saves the running suite's cases so far in the partial report (a suite calls it as it
    /// finishes a long step, so that a killed run keeps them).
    pub fn save_partial(&self, cases: &[Case]) {
        if let Some(c) = self.checkpoint {
            c.save(cases);
        }
    }
}

/// A suite failed as a whole (e.g. a sticky device error); its cases so far are kept.
#[derive(Debug, thiserror::Error)]
#[error("suite {suite} stopped: {reason}")]
pub struct SuiteError {
    /// The suite.
    pub suite: SuiteId,
    /// Why.
    pub reason: String,
    /// Cases finished before the error.
    pub partial: Vec<Case>,
}

/// One benchmark suite.
pub trait Suite {
    /// Which suite.
    fn id(&self) -> SuiteId;
    /// Whether it can do anything without a GPU.
    fn needs_gpu(&self) -> bool;
    /// Runs it. Per-case failures are `Failed` cases; only unrecoverable errors are `Err`.
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError>;
}

/// The suite object for an id.
pub fn suite_for(id: SuiteId) -> Box<dyn Suite> {
    match id {
        SuiteId::Gemm => Box::new(gemm::GemmSuite),
        SuiteId::Attention => Box::new(attention::AttentionSuite),
        SuiteId::Memory => Box::new(memory::MemorySuite),
        SuiteId::Transformer => Box::new(transformer::TransformerSuite),
        SuiteId::Tuning => Box::new(tuning::TuningSuite),
        SuiteId::Aot => Box::new(aot::AotSuite),
    }
}
