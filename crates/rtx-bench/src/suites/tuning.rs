//! Tuning suite: search time of the autotuner and tuned-vs-default gain per template. The tuner
//! (rtx-synthesis `tuner/`) has not landed yet, so the suite reports that.

use super::{Suite, SuiteContext, SuiteError};
use crate::report::Case;
use crate::suite_id::SuiteId;

/// The tuning suite.
pub struct TuningSuite;

impl Suite for TuningSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Tuning
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, _ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        Ok(vec![Case::not_available(
            SuiteId::Tuning,
            "tuner search gemm",
            "-",
            "the autotuner (rtx-synthesis tuner/) and tunable GEMM templates are not merged yet",
        )])
    }
}
