//! Kernel templates: typed parameter spaces emitted as CUDA C++.
//!
//! A [`Template`] owns a parameter space for one operation. Each config is checked against the
//! template's declared constraints (architecture, dtype, alignment, shared-memory and register
//! budgets) before any code is generated, so an invalid config never reaches NVRTC.

pub mod attention;
pub mod codegen;
pub mod elementwise;
pub mod gemm;
pub mod reduce;
#[cfg(test)]
pub(crate) mod test_checks;
#[cfg(test)]
pub(crate) mod test_strategies;

use crate::Arch;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use std::hash::Hash;

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchDims {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: u32,
}

/// Generated CUDA C++ for one kernel instance, ready for NVRTC.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelSource {
    /// The `extern "C"` entry point.
    pub entry: String,
    /// Full translation unit.
    pub code: String,
    /// Name of the template that produced it.
    pub template: String,
    /// Version of that template; bumping it invalidates caches and tuning results.
    pub template_version: u32,
    /// NVRTC options beyond the architecture and include paths (e.g. `-DNDEBUG`).
    pub options: Vec<String>,
}

impl KernelSource {
    /// Content hash of everything that determines the compiled binary except the target.
    pub fn fingerprint(&self) -> blake3::Hash {
        let mut h = blake3::Hasher::new();
        for part in [
            self.entry.as_bytes(),
            self.code.as_bytes(),
            self.template.as_bytes(),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&self.template_version.to_le_bytes());
        for o in &self.options {
            h.update(&(o.len() as u64).to_le_bytes());
            h.update(o.as_bytes());
        }
        h.finalize()
    }
}

/// A config that breaks one of its template's declared constraints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("template `{template}` rejects config {config}: {reason}")]
pub struct ConstraintViolation {
    /// Template name.
    pub template: String,
    /// The config, debug-printed.
    pub config: String,
    /// Which constraint failed, in words.
    pub reason: String,
}

/// A parameterized kernel for one operation.
pub trait Template: Send + Sync {
    /// The operation instance (shapes, dtypes, layouts).
    type Problem: Clone + Debug + Send + Sync;
    /// One point of the parameter space.
    type Config: Clone + Debug + PartialEq + Eq + Hash + Serialize + DeserializeOwned + Send + Sync;

    /// Stable template name (used in symbols, caches and the tuning database).
    fn name(&self) -> &'static str;
    /// Template version; bump on any change to the generated code.
    fn version(&self) -> u32;
    /// Every config of the raw parameter space for this problem (may include invalid ones).
    fn space(&self, problem: &Self::Problem, arch: Arch) -> Vec<Self::Config>;
    /// Checks the declared constraints; `Ok` means [`Template::emit`] will succeed.
    fn check(
        &self,
        problem: &Self::Problem,
        config: &Self::Config,
        arch: Arch,
    ) -> Result<(), ConstraintViolation>;
    /// A config that is valid for any problem this template accepts on `arch`.
    fn default_config(&self, problem: &Self::Problem, arch: Arch) -> Self::Config;
    /// Generates the kernel; checks the constraints first.
    fn emit(
        &self,
        problem: &Self::Problem,
        config: &Self::Config,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation>;
    /// Launch shape for this problem and config.
    fn launch(&self, problem: &Self::Problem, config: &Self::Config) -> LaunchDims;
    /// A rough "simplicity" score (lower is simpler); ties in measured time go to the simpler config.
    fn complexity(&self, _config: &Self::Config) -> u64 {
        0
    }

    /// Predicted run time of `config` for `problem` on `device`, microseconds, from the
    /// template's analytic cost model (used to order and seed the search, never as a result);
    /// `None` when the template has no model.
    fn estimate_us(
        &self,
        _problem: &Self::Problem,
        _config: &Self::Config,
        _device: &crate::tuner::cost::DeviceFacts,
    ) -> Option<f64> {
        None
    }

    /// The configs of [`Template::space`] that pass [`Template::check`].
    fn valid_space(&self, problem: &Self::Problem, arch: Arch) -> Vec<Self::Config> {
        self.space(problem, arch)
            .into_iter()
            .filter(|c| self.check(problem, c, arch).is_ok())
            .collect()
    }
}
