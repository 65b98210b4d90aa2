//! Element types of kernel operands.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Element type of a kernel's inputs (and, unless stated, outputs). Accumulation is always f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    /// IEEE single precision, computed in full f32.
    F32,
    /// f32 storage, tensor-core math in TF32 (10-bit mantissa).
    Tf32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
}

/// Error for a dtype name rtx does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (known: f32, tf32, f16, bf16)")]
pub struct UnknownDType(pub String);

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 4] = [DType::F32, DType::Tf32, DType::F16, DType::Bf16];

    /// Bytes per stored element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::Tf32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// The CUDA C++ storage type name.
    pub fn cuda_type(self) -> &'static str {
        match self {
            DType::F32 | DType::Tf32 => "float",
            DType::F16 => "__half",
            DType::Bf16 => "__nv_bfloat16",
        }
    }

    /// Short lowercase name, used in kernel symbols and keys.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::Tf32 => "tf32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    /// Relative-error bound a result in this precision must meet against an f64 reference.
    pub fn rel_tolerance(self) -> f64 {
        match self {
            DType::F32 => 1e-5,
            DType::Tf32 => 5e-3,
            DType::F16 | DType::Bf16 => 2e-2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(DType::F32),
            "tf32" => Ok(DType::Tf32),
            "f16" | "fp16" | "half" | "float16" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::Bf16),
            _ => Err(UnknownDType(s.to_string())),
        }
    }
}
