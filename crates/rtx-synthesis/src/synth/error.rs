//! [`SynthError`]: everything the synthesizer's user API can fail with, naming the bad input.

use super::buffers::GemmLaunchError;
use crate::aot::CacheError;
use crate::target::UnknownArch;
use crate::templates::gemm::problem::InvalidGemm;
use crate::templates::gemm::GemmProblem;
use crate::templates::ConstraintViolation;
use crate::tuner::{CandidateError, DbError, TuneError};
use crate::Arch;
use rtx_runtime::RuntimeError;

/// Why one template family cannot serve a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyRejection {
    /// The family (`wgmma`, ...).
    pub family: &'static str,
    /// Its `check()` reason.
    pub reason: String,
}

fn list_rejections(reasons: &[FamilyRejection]) -> String {
    if reasons.is_empty() {
        return "no template family is built for this target".to_string();
    }
    reasons
        .iter()
        .map(|r| format!("{}: {}", r.family, r.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a synthesizer call failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The CUDA runtime failed (no device, module load, launch, ...).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The device's compute capability has no rtx target.
    #[error(transparent)]
    UnknownArch(#[from] UnknownArch),
    /// The kernel cache failed (NVRTC missing, I/O) or the kernel did not compile.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The tuning database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The GEMM spec describes no valid problem.
    #[error("invalid GEMM spec: {0}")]
    InvalidSpec(#[from] InvalidGemm),
    /// No template family accepts the problem on this target.
    #[error("no GEMM template serves {problem:?} on {arch}: {}", list_rejections(.reasons))]
    NoTemplate {
        /// The problem.
        problem: Box<GemmProblem>,
        /// The target.
        arch: Arch,
        /// Each family's rejection reason.
        reasons: Vec<FamilyRejection>,
    },
    /// A selected config was refused by its template.
    #[error(transparent)]
    Rejected(#[from] ConstraintViolation),
    /// A launch was refused (a buffer named) or failed.
    #[error(transparent)]
    Launch(#[from] GemmLaunchError),
    /// Tuning produced no winner.
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// A memory-bound problem (elementwise graph, row op) is invalid.
    #[error("invalid memory-bound problem: {0}")]
    InvalidProblem(String),
    /// A tuning request is inconsistent (e.g. a config filter naming no field of the template).
    #[error("bad tuning request: {0}")]
    BadRequest(String),
    /// Another process measures on the GPU and `RTX_GPU_LOCK=fail`, or the lock policy is bad.
    #[error(transparent)]
    GpuLock(#[from] crate::tuner::GpuLockError),
    /// A measurement (e.g. the cuBLAS baseline) failed.
    #[error("measurement failed: {0}")]
    Measure(#[from] CandidateError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn no_template_lists_every_family_reason() {
        let e = SynthError::NoTemplate {
            problem: Box::new(GemmProblem::nn(8, 8, 8, DType::F32)),
            arch: Arch::Sm90a,
            reasons: vec![
                FamilyRejection {
                    family: "wgmma",
                    reason: "dtype f32: needs f16/bf16".into(),
                },
                FamilyRejection {
                    family: "simt",
                    reason: "not built".into(),
                },
            ],
        };
        let s = e.to_string();
        assert!(
            s.contains("sm_90a") && s.contains("wgmma: dtype f32") && s.contains("simt: not built"),
            "{s}"
        );
        assert!(s.contains("m: 8"), "{s}");
    }
}
