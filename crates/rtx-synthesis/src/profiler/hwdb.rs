//! Datasheet figures for the GPUs rtx knows, matched by device name and compute capability.
//!
//! Every number here is a vendor datasheet / whitepaper figure, not a measurement: peak memory
//! bandwidth, boost clock, and *dense* peak TFLOP/s (the datasheets' tensor figures marked
//! "with sparsity" are halved). The tensor f16/bf16 figures are with fp32 accumulate, which is
//! what rtx's GEMMs use; on GeForce parts that is half the fp16-accumulate rate. What the GPU
//! really sustains is measured by the profiler and stored next to these in a
//! [`crate::profiler::DeviceProfile`].

use crate::Arch;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Datasheet figures of one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HwEntry {
    /// Model name, e.g. `"NVIDIA H200 SXM"`.
    pub name: Cow<'static, str>,
    /// Case-insensitive substrings of the driver's device name that identify this model.
    #[serde(skip)]
    pub patterns: &'static [&'static str],
    /// Substrings that rule the model out (e.g. `"NVL"`, `"Laptop"` variants with other figures).
    #[serde(skip)]
    pub excludes: &'static [&'static str],
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache, bytes.
    pub l2_bytes: u64,
    /// Largest shared memory one block may opt in to, bytes.
    pub smem_optin_bytes: u32,
    /// Peak DRAM bandwidth, GB/s (10^9 bytes per second).
    pub mem_bandwidth_gbps: f64,
    /// Peak fp32 (SIMT, FMA = 2 flops), TFLOP/s.
    pub fp32_tflops: f64,
    /// Dense tf32 tensor-core peak, TFLOP/s.
    pub tf32_tflops: f64,
    /// Dense f16 tensor-core peak with fp32 accumulate, TFLOP/s.
    pub f16_tflops: f64,
    /// Dense bf16 tensor-core peak with fp32 accumulate, TFLOP/s.
    pub bf16_tflops: f64,
    /// Boost clock, MHz.
    pub boost_clock_mhz: u32,
}

impl HwEntry {
    /// Whether a driver-reported device name and compute capability is this model.
    pub fn matches(&self, device_name: &str, compute_capability: (u32, u32)) -> bool {
        let n = device_name.to_ascii_lowercase();
        compute_capability == self.compute_capability
            && self
                .patterns
                .iter()
                .any(|p| n.contains(&p.to_ascii_lowercase()))
            && !self
                .excludes
                .iter()
                .any(|x| n.contains(&x.to_ascii_lowercase()))
    }

    /// This entry with the name-matching rules of the database entry of the same name (rules are
    /// not serialized); the figures are kept as they are.
    pub fn with_rules_from_db(mut self) -> HwEntry {
        if let Some(db) = ENTRIES.iter().find(|e| e.name == self.name) {
            self.patterns = db.patterns;
            self.excludes = db.excludes;
        }
        self
    }
}

const MIB: u64 = 1024 * 1024;
/// 227 KiB: Hopper's per-block opt-in limit.
const SMEM_OPTIN_SM90: u32 = 227 * 1024;
/// 163 KiB: A100's per-block opt-in limit.
const SMEM_OPTIN_SM80: u32 = 163 * 1024;
/// 99 KiB: the sm_86 / sm_89 / sm_120 per-block opt-in limit.
const SMEM_OPTIN_99K: u32 = 99 * 1024;

/// Every GPU in the database (datasheet values).
pub static ENTRIES: &[HwEntry] = &[
    // NVIDIA H200 Tensor Core GPU datasheet (SXM): 4.8 TB/s HBM3e, FP32 67 TFLOPS,
    // TF32 989 / BF16 1,979 / FP16 1,979 TFLOPS with sparsity. Same GH100 die and clocks as H100.
    HwEntry {
        name: Cow::Borrowed("NVIDIA H200 SXM"),
        patterns: &["H200"],
        excludes: &["NVL"],
        compute_capability: (9, 0),
        sm_count: 132,
        l2_bytes: 50 * MIB,
        smem_optin_bytes: SMEM_OPTIN_SM90,
        mem_bandwidth_gbps: 4800.0,
        fp32_tflops: 67.0,
        tf32_tflops: 494.5,
        f16_tflops: 989.5,
        bf16_tflops: 989.5,
        boost_clock_mhz: 1980,
    },
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5 80 GB HBM3): 3.35 TB/s, FP32 67 TFLOPS,
    // TF32 989 / BF16 1,979 / FP16 1,979 TFLOPS with sparsity. The driver calls it "H100 80GB HBM3".
    HwEntry {
        name: Cow::Borrowed("NVIDIA H100 SXM"),
        patterns: &["H100 80GB HBM3", "H100 SXM"],
        excludes: &["PCIe", "NVL"],
        compute_capability: (9, 0),
        sm_count: 132,
        l2_bytes: 50 * MIB,
        smem_optin_bytes: SMEM_OPTIN_SM90,
        mem_bandwidth_gbps: 3350.0,
        fp32_tflops: 67.0,
        tf32_tflops: 494.5,
        f16_tflops: 989.5,
        bf16_tflops: 989.5,
        boost_clock_mhz: 1980,
    },
    // NVIDIA A100 datasheet (SXM4 80 GB): 2,039 GB/s HBM2e, FP32 19.5, TF32 156, BF16/FP16 312
    // TFLOPS dense.
    HwEntry {
        name: Cow::Borrowed("NVIDIA A100 SXM4 80GB"),
        patterns: &["A100-SXM4-80GB", "A100 SXM4 80GB", "A100-SXM-80GB"],
        excludes: &[],
        compute_capability: (8, 0),
        sm_count: 108,
        l2_bytes: 40 * MIB,
        smem_optin_bytes: SMEM_OPTIN_SM80,
        mem_bandwidth_gbps: 2039.0,
        fp32_tflops: 19.5,
        tf32_tflops: 156.0,
        f16_tflops: 312.0,
        bf16_tflops: 312.0,
        boost_clock_mhz: 1410,
    },
    // NVIDIA L40S datasheet: 864 GB/s GDDR6, FP32 91.6, TF32 183 / BF16 362.05 / FP16 362.05
    // TFLOPS dense (366 / 733 / 733 with sparsity).
    HwEntry {
        name: Cow::Borrowed("NVIDIA L40S"),
        patterns: &["L40S"],
        excludes: &[],
        compute_capability: (8, 9),
        sm_count: 142,
        l2_bytes: 96 * MIB,
        smem_optin_bytes: SMEM_OPTIN_99K,
        mem_bandwidth_gbps: 864.0,
        fp32_tflops: 91.6,
        tf32_tflops: 183.0,
        f16_tflops: 362.05,
        bf16_tflops: 362.05,
        boost_clock_mhz: 2520,
    },
    // NVIDIA Ada Lovelace whitepaper (GeForce RTX 4090): 1,008 GB/s GDDR6X, FP32 82.6,
    // TF32 82.6, FP16/BF16 with FP32 accumulate 165.2 TFLOPS dense.
    HwEntry {
        name: Cow::Borrowed("NVIDIA GeForce RTX 4090"),
        patterns: &["RTX 4090"],
        excludes: &["4090 D", "Laptop"],
        compute_capability: (8, 9),
        sm_count: 128,
        l2_bytes: 72 * MIB,
        smem_optin_bytes: SMEM_OPTIN_99K,
        mem_bandwidth_gbps: 1008.0,
        fp32_tflops: 82.6,
        tf32_tflops: 82.6,
        f16_tflops: 165.2,
        bf16_tflops: 165.2,
        boost_clock_mhz: 2520,
    },
    // NVIDIA RTX Blackwell whitepaper (GeForce RTX 5090): 1,792 GB/s GDDR7, 170 SMs, FP32 104.8,
    // TF32 104.8, FP16/BF16 with FP32 accumulate 209.5 TFLOPS dense.
    HwEntry {
        name: Cow::Borrowed("NVIDIA GeForce RTX 5090"),
        patterns: &["RTX 5090"],
        excludes: &["5090 D", "Laptop"],
        compute_capability: (12, 0),
        sm_count: 170,
        l2_bytes: 96 * MIB,
        smem_optin_bytes: SMEM_OPTIN_99K,
        mem_bandwidth_gbps: 1792.0,
        fp32_tflops: 104.8,
        tf32_tflops: 104.8,
        f16_tflops: 209.5,
        bf16_tflops: 209.5,
        boost_clock_mhz: 2407,
    },
];

/// The datasheet entry for a driver-reported device name and compute capability, if known.
pub fn lookup(device_name: &str, compute_capability: (u32, u32)) -> Option<&'static HwEntry> {
    ENTRIES
        .iter()
        .find(|e| e.matches(device_name, compute_capability))
}

/// The SM count of the first model here with `arch`'s compute capability (the H200 for sm_90 /
/// sm_90a, the RTX 5090 for sm_120, the A100 for sm_80): what an ahead-of-time build assumes
/// where a template's default config depends on the device (mma.sync's small-M split-K), so a
/// bundle holds the kernel that card asks for. `None` for an architecture with no model here.
pub fn reference_sm_count(arch: Arch) -> Option<u32> {
    let cc = arch.compute_capability();
    ENTRIES
        .iter()
        .find(|e| e.compute_capability == cc)
        .map(|e| e.sm_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_resolve_to_the_right_model() {
        let cases = [
            ("NVIDIA H200", (9, 0), Some("NVIDIA H200 SXM")),
            ("NVIDIA H200 NVL", (9, 0), None),
            ("NVIDIA H100 80GB HBM3", (9, 0), Some("NVIDIA H100 SXM")),
            ("NVIDIA H100 PCIe", (9, 0), None),
            (
                "NVIDIA A100-SXM4-80GB",
                (8, 0),
                Some("NVIDIA A100 SXM4 80GB"),
            ),
            ("NVIDIA A100-SXM4-40GB", (8, 0), None),
            ("NVIDIA L40S", (8, 9), Some("NVIDIA L40S")),
            (
                "NVIDIA GeForce RTX 4090",
                (8, 9),
                Some("NVIDIA GeForce RTX 4090"),
            ),
            ("NVIDIA GeForce RTX 4090 Laptop GPU", (8, 9), None),
            (
                "NVIDIA GeForce RTX 5090",
                (12, 0),
                Some("NVIDIA GeForce RTX 5090"),
            ),
            (
                "nvidia geforce rtx 5090",
                (12, 0),
                Some("NVIDIA GeForce RTX 5090"),
            ),
            // A name match with the wrong compute capability is not trusted.
            ("NVIDIA H200", (8, 0), None),
            ("Tesla V100-SXM2-16GB", (7, 0), None),
        ];
        for (name, cc, want) in cases {
            assert_eq!(
                lookup(name, cc).map(|e| e.name.as_ref()),
                want,
                "{name} {cc:?}"
            );
        }
    }

    #[test]
    fn entries_are_self_consistent() {
        for e in ENTRIES {
            let arch = Arch::for_compute_capability(e.compute_capability.0, e.compute_capability.1)
                .unwrap();
            assert_eq!(
                e.smem_optin_bytes,
                arch.max_smem_per_block_optin(),
                "{}",
                e.name
            );
            assert!(
                e.bf16_tflops >= e.tf32_tflops && e.tf32_tflops > 0.0,
                "{}",
                e.name
            );
            assert!(e.f16_tflops >= e.fp32_tflops, "{}", e.name);
            // fp32 peak = SMs x 128 FMA lanes x 2 flops x boost clock (64 lanes on A100).
            let lanes = if e.compute_capability == (8, 0) {
                64.0
            } else {
                128.0
            };
            let derived = e.sm_count as f64 * lanes * 2.0 * e.boost_clock_mhz as f64 * 1e6 / 1e12;
            assert!(
                (derived - e.fp32_tflops).abs() / e.fp32_tflops < 0.03,
                "{}: {derived} vs {}",
                e.name,
                e.fp32_tflops
            );
            assert_eq!(
                lookup(&e.name, e.compute_capability).map(|x| &x.name),
                Some(&e.name),
                "its own name matches"
            );
        }
    }

    #[test]
    fn serde_keeps_the_figures() {
        let e = lookup("NVIDIA H200", (9, 0)).unwrap();
        let back: HwEntry = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(back.name, e.name);
        assert_eq!(
            (back.mem_bandwidth_gbps, back.bf16_tflops, back.sm_count),
            (4800.0, 989.5, 132)
        );
        assert!(
            back.patterns.is_empty(),
            "patterns are matching rules, not saved data"
        );
        assert_eq!(&back.with_rules_from_db(), e);
    }

    #[test]
    fn reference_sm_counts_are_the_reference_cards() {
        assert_eq!(reference_sm_count(Arch::Sm90a), Some(132));
        assert_eq!(reference_sm_count(Arch::Sm90), Some(132));
        assert_eq!(reference_sm_count(Arch::Sm120), Some(170));
        assert_eq!(reference_sm_count(Arch::Sm80), Some(108));
        assert_eq!(reference_sm_count(Arch::Sm70), None);
    }
}
