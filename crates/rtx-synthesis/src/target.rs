//! Compilation targets: the GPU architectures rtx emits code for.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A real GPU architecture that NVRTC compiles a cubin for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Arch {
    /// Volta (V100).
    Sm70,
    /// Turing (T4, RTX 20xx).
    Sm75,
    /// Ampere datacenter (A100).
    Sm80,
    /// Ampere consumer (RTX 30xx, A10).
    Sm86,
    /// Ada (RTX 40xx, L40S).
    Sm89,
    /// Hopper without the arch-specific features.
    Sm90,
    /// Hopper with wgmma / setmaxnreg (H100, H200).
    Sm90a,
    /// Blackwell consumer (RTX 5090).
    Sm120,
}

/// Error for a target name or compute capability rtx does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU architecture `{0}` (known: sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_120)")]
pub struct UnknownArch(pub String);

impl Arch {
    /// Every architecture rtx knows, oldest first.
    pub const ALL: [Arch; 8] = [
        Arch::Sm70,
        Arch::Sm75,
        Arch::Sm80,
        Arch::Sm86,
        Arch::Sm89,
        Arch::Sm90,
        Arch::Sm90a,
        Arch::Sm120,
    ];

    /// The best target for a device of compute capability `major.minor`
    /// (sm_90a on Hopper so wgmma is available).
    pub fn for_compute_capability(major: u32, minor: u32) -> Result<Arch, UnknownArch> {
        Ok(match (major, minor) {
            (7, 0) => Arch::Sm70,
            (7, 5) => Arch::Sm75,
            (8, 0) => Arch::Sm80,
            (8, 6) | (8, 7) => Arch::Sm86,
            (8, 9) => Arch::Sm89,
            (9, 0) => Arch::Sm90a,
            (12, 0) => Arch::Sm120,
            _ => return Err(UnknownArch(format!("compute capability {major}.{minor}"))),
        })
    }

    /// The `sm_XX` name NVRTC's `--gpu-architecture` takes.
    pub fn sm_name(self) -> &'static str {
        match self {
            Arch::Sm70 => "sm_70",
            Arch::Sm75 => "sm_75",
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
            Arch::Sm120 => "sm_120",
        }
    }

    /// Compute capability as `(major, minor)`.
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm70 => (7, 0),
            Arch::Sm75 => (7, 5),
            Arch::Sm80 => (8, 0),
            Arch::Sm86 => (8, 6),
            Arch::Sm89 => (8, 9),
            Arch::Sm90 | Arch::Sm90a => (9, 0),
            Arch::Sm120 => (12, 0),
        }
    }

    /// `mma.sync` tensor cores for f16/bf16/tf32 (sm_80 and newer).
    pub fn has_mma_sync(self) -> bool {
        self >= Arch::Sm80
    }

    /// Hopper warpgroup MMA (`wgmma`), which needs the arch-specific sm_90a target.
    pub fn has_wgmma(self) -> bool {
        self == Arch::Sm90a
    }

    /// Bulk tensor copies (TMA, `cp.async.bulk.tensor`) and mbarrier transaction counts.
    pub fn has_tma(self) -> bool {
        matches!(self, Arch::Sm90 | Arch::Sm90a | Arch::Sm120)
    }

    /// `cp.async` (Ampere-style asynchronous global to shared copies).
    pub fn has_cp_async(self) -> bool {
        self >= Arch::Sm80
    }

    /// Largest dynamic shared memory one block may opt in to, in bytes (datasheet value).
    pub fn max_smem_per_block_optin(self) -> u32 {
        match self {
            Arch::Sm70 => 96 * 1024,
            Arch::Sm75 => 64 * 1024,
            Arch::Sm80 => 163 * 1024,
            Arch::Sm86 | Arch::Sm89 => 99 * 1024,
            Arch::Sm90 | Arch::Sm90a => 227 * 1024,
            Arch::Sm120 => 99 * 1024,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sm_name())
    }
}

impl FromStr for Arch {
    type Err = UnknownArch;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        Arch::ALL
            .into_iter()
            .find(|a| a.sm_name() == t || a.sm_name().replace('_', "") == t)
            .ok_or_else(|| UnknownArch(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in Arch::ALL {
            assert_eq!(a.sm_name().parse::<Arch>().unwrap(), a);
        }
        assert!("sm_99".parse::<Arch>().is_err());
    }

    #[test]
    fn hopper_gets_the_arch_specific_target() {
        assert_eq!(Arch::for_compute_capability(9, 0).unwrap(), Arch::Sm90a);
        assert!(Arch::Sm90a.has_wgmma() && !Arch::Sm120.has_wgmma());
        assert!(Arch::Sm120.has_mma_sync());
        assert!(Arch::for_compute_capability(6, 1).is_err());
    }
}
