//! The names of the benchmark suites, as the CLI and the report spell them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One benchmark suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuiteId {
    /// GEMM: our templates against cuBLAS, untuned defaults and PyTorch anchors.
    Gemm,
    /// Fused attention.
    Attention,
    /// Memory-bound kernels: copy, elementwise, softmax, LayerNorm, RMSNorm.
    Memory,
    /// A whole transformer encoder layer.
    Transformer,
    /// The autotuner itself: search time and the tuned-vs-default gain.
    Tuning,
    /// Ahead-of-time compilation: NVRTC compile, cache load, module load, resource use.
    Aot,
}

/// A suite name the CLI does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown suite `{0}` (known: gemm, attention, memory, transformer, tuning, aot)")]
pub struct UnknownSuite(pub String);

impl SuiteId {
    /// Every suite, in the order they run.
    pub const ALL: [SuiteId; 6] = [
        SuiteId::Gemm,
        SuiteId::Attention,
        SuiteId::Memory,
        SuiteId::Transformer,
        SuiteId::Tuning,
        SuiteId::Aot,
    ];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SuiteId::Gemm => "gemm",
            SuiteId::Attention => "attention",
            SuiteId::Memory => "memory",
            SuiteId::Transformer => "transformer",
            SuiteId::Tuning => "tuning",
            SuiteId::Aot => "aot",
        }
    }

    /// Parses a comma-separated list (`gemm,aot`); `all` selects every suite. Duplicates collapse.
    pub fn parse_list(s: &str) -> Result<Vec<SuiteId>, UnknownSuite> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part.eq_ignore_ascii_case("all") {
                return Ok(SuiteId::ALL.to_vec());
            }
            let id: SuiteId = part.parse()?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        if out.is_empty() {
            return Err(UnknownSuite(s.to_string()));
        }
        out.sort();
        Ok(out)
    }
}

impl fmt::Display for SuiteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SuiteId {
    type Err = UnknownSuite;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let t = match t.as_str() {
            "attn" => "attention",
            "mem" => "memory",
            "layer" => "transformer",
            other => other,
        };
        SuiteId::ALL
            .into_iter()
            .find(|id| id.name() == t)
            .ok_or_else(|| UnknownSuite(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_aliases() {
        assert_eq!(
            SuiteId::parse_list("aot, gemm,gemm").unwrap(),
            vec![SuiteId::Gemm, SuiteId::Aot]
        );
        assert_eq!(SuiteId::parse_list("all").unwrap(), SuiteId::ALL.to_vec());
        assert_eq!(SuiteId::parse_list("mem").unwrap(), vec![SuiteId::Memory]);
        assert!(SuiteId::parse_list("gemm,warp").is_err());
        assert!(SuiteId::parse_list("").is_err());
        for id in SuiteId::ALL {
            assert_eq!(id.name().parse::<SuiteId>().unwrap(), id);
        }
    }
}
