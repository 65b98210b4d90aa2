//! [`MeasureReport`]: every figure the profiler measured, how, and against which datasheet value.

use super::detect::Capabilities;
use super::hwdb::HwEntry;
use super::profile::Ceilings;
use super::timing::Timing;
use crate::DType;
use serde::{Deserialize, Serialize};

/// What a figure is a measurement of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Quantity {
    /// Device-to-device copy bandwidth, GB/s (bytes read + bytes written, 10^9).
    CopyGbps,
    /// fp32 SIMT FMA throughput, TFLOP/s.
    Fp32Tflops,
    /// Tensor-core throughput for inputs of this dtype with f32 accumulate, TFLOP/s.
    TensorTflops(DType),
    /// Host time to submit one empty kernel launch, microseconds.
    LaunchHostUs,
    /// Stream time per launch of back-to-back empty kernels (events), microseconds.
    LaunchDeviceUs,
}

impl Quantity {
    /// Short label, e.g. `copy`, `bf16`.
    pub fn label(self) -> &'static str {
        match self {
            Quantity::CopyGbps => "copy",
            Quantity::Fp32Tflops => "fp32",
            Quantity::TensorTflops(d) => d.name(),
            Quantity::LaunchHostUs => "launch-host",
            Quantity::LaunchDeviceUs => "launch-device",
        }
    }

    /// Unit of the value.
    pub fn unit(self) -> &'static str {
        match self {
            Quantity::CopyGbps => "GB/s",
            Quantity::Fp32Tflops | Quantity::TensorTflops(_) => "TFLOP/s",
            Quantity::LaunchHostUs | Quantity::LaunchDeviceUs => "us",
        }
    }

    /// The datasheet's figure for this quantity, where a datasheet has one.
    pub fn datasheet(self, hw: &HwEntry) -> Option<f64> {
        match self {
            Quantity::CopyGbps => Some(hw.mem_bandwidth_gbps),
            Quantity::Fp32Tflops => Some(hw.fp32_tflops),
            Quantity::TensorTflops(DType::Tf32) => Some(hw.tf32_tflops),
            Quantity::TensorTflops(DType::F16) => Some(hw.f16_tflops),
            Quantity::TensorTflops(DType::Bf16) => Some(hw.bf16_tflops),
            Quantity::TensorTflops(DType::F32) => None,
            Quantity::LaunchHostUs | Quantity::LaunchDeviceUs => None,
        }
        .filter(|v| *v > 0.0)
    }

    /// This quantity's field of [`Ceilings`].
    pub fn of(self, c: &Ceilings) -> Option<f64> {
        match self {
            Quantity::CopyGbps => c.copy_gbps,
            Quantity::Fp32Tflops => c.fp32_tflops,
            Quantity::TensorTflops(DType::Tf32) => c.tf32_tflops,
            Quantity::TensorTflops(DType::F16) => c.f16_tflops,
            Quantity::TensorTflops(DType::Bf16) => c.bf16_tflops,
            Quantity::TensorTflops(DType::F32) => None,
            Quantity::LaunchHostUs => c.launch_overhead_us,
            Quantity::LaunchDeviceUs => None,
        }
    }

    /// The quantities a [`Ceilings`] holds, in its field order.
    pub const CEILINGS: [Quantity; 6] = [
        Quantity::CopyGbps,
        Quantity::Fp32Tflops,
        Quantity::TensorTflops(DType::Tf32),
        Quantity::TensorTflops(DType::F16),
        Quantity::TensorTflops(DType::Bf16),
        Quantity::LaunchHostUs,
    ];
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What it measures.
    pub quantity: Quantity,
    /// How: kernel / instruction and launch shape, in words.
    pub method: String,
    /// The value, in [`Quantity::unit`], from the median run.
    pub value: f64,
    /// The timed runs behind it.
    pub timing: Timing,
}

/// A measurement that was attempted and failed without failing the whole profile (e.g. the
/// wgmma kernels, whose ceiling then falls back to `mma.sync`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// What was being measured.
    pub method: String,
    /// Why it failed.
    pub error: String,
}

/// Everything one profiling run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureReport {
    /// The device's capabilities.
    pub capabilities: Capabilities,
    /// Every figure, in measurement order.
    pub figures: Vec<Figure>,
    /// Measurements that failed and were left out of the ceilings.
    pub failures: Vec<Failure>,
    /// The ceilings: the best figure of each quantity.
    pub ceilings: Ceilings,
}

fn versus(value: f64, peak: Option<f64>, unit: &str) -> String {
    match peak {
        Some(p) => format!("datasheet {p:>8.1} {unit:<7}  ratio {:.3}", value / p),
        None => "datasheet        -".to_string(),
    }
}

impl MeasureReport {
    /// The figures of one quantity.
    pub fn figures_of(&self, q: Quantity) -> impl Iterator<Item = &Figure> {
        self.figures.iter().filter(move |f| f.quantity == q)
    }

    /// One line per figure, one per ceiling and one per failure, each value next to its
    /// datasheet figure and the ratio (when `datasheet` has that figure).
    pub fn lines(&self, datasheet: Option<&HwEntry>) -> Vec<String> {
        let peak = |q: Quantity| datasheet.and_then(|d| q.datasheet(d));
        let mut out = vec![format!(
            "device {} ({}, {} SMs, tensor cores {:?}), datasheet entry: {}",
            self.capabilities.name,
            self.capabilities.arch,
            self.capabilities.sm_count,
            self.capabilities.tensor_cores,
            datasheet.map(|d| d.name.as_ref()).unwrap_or("none")
        )];
        for f in &self.figures {
            let q = f.quantity;
            out.push(format!(
                "figure  {:<13} {:>9.2} {:<7}  {}  median {:.4} ms of {} ({:.4}..{:.4})  [{}]",
                q.label(),
                f.value,
                q.unit(),
                versus(f.value, peak(q), q.unit()),
                f.timing.median_ms,
                f.timing.runs,
                f.timing.min_ms,
                f.timing.max_ms,
                f.method
            ));
        }
        for q in Quantity::CEILINGS {
            match q.of(&self.ceilings) {
                Some(v) => out.push(format!(
                    "ceiling {:<13} {:>9.2} {:<7}  {}",
                    q.label(),
                    v,
                    q.unit(),
                    versus(v, peak(q), q.unit())
                )),
                None => out.push(format!("ceiling {:<13} not measured", q.label())),
            }
        }
        for f in &self.failures {
            out.push(format!("FAILED  {}: {}", f.method, f.error));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::detect::detect;
    use crate::profiler::hwdb::lookup;

    #[test]
    fn lines_show_value_datasheet_and_ratio() {
        let info = rtx_runtime::DeviceInfo {
            name: "NVIDIA H200".into(),
            ..rtx_runtime::DeviceInfo::example_sm90()
        };
        let timing = Timing::from_samples(&[0.5, 0.5]).unwrap();
        let r = MeasureReport {
            capabilities: detect(&info).unwrap(),
            figures: vec![Figure {
                quantity: Quantity::CopyGbps,
                method: "memcpy".into(),
                value: 4320.0,
                timing,
            }],
            failures: vec![Failure {
                method: "wgmma bf16".into(),
                error: "boom".into(),
            }],
            ceilings: Ceilings {
                copy_gbps: Some(4320.0),
                ..Ceilings::default()
            },
        };
        let lines = r.lines(lookup("NVIDIA H200", (9, 0)));
        assert!(lines[0].contains("NVIDIA H200 SXM"), "{}", lines[0]);
        assert!(
            lines[1].contains("4320.00 GB/s")
                && lines[1].contains("4800.0")
                && lines[1].contains("ratio 0.900"),
            "{}",
            lines[1]
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("ceiling copy") && l.contains("ratio 0.900")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("ceiling fp32") && l.contains("not measured")));
        assert!(lines.iter().any(|l| l.contains("FAILED  wgmma bf16: boom")));
        let no_db = r.lines(None);
        assert!(no_db[1].contains("datasheet        -"), "{}", no_db[1]);
        // Every ceiling field is reachable through its quantity.
        let c = Ceilings {
            copy_gbps: Some(1.0),
            fp32_tflops: Some(2.0),
            tf32_tflops: Some(3.0),
            f16_tflops: Some(4.0),
            bf16_tflops: Some(5.0),
            launch_overhead_us: Some(6.0),
        };
        let got: Vec<f64> = Quantity::CEILINGS
            .iter()
            .map(|q| q.of(&c).unwrap())
            .collect();
        assert_eq!(got, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}
