//! Analytic cost models: what the device can do ([`DeviceFacts`]) and the adapter that turns a
//! template's own estimate ([`Template::estimate_us`]) into the tuner's [`CostModel`].
//!
//! The templates own their models (the wgmma GEMM's is in
//! `templates::gemm::wgmma::cost`); the tuner only sees "predicted microseconds" per config in
//! JSON form, which seeds and orders the guided search ([`super::Guided`]). The same model is used
//! by a live tuning run (`Synth::tune_gemm`, `rtx-tune`) and by a replay over a recorded table
//! ([`cost_model_for_table`]).

use super::replay::ReplayTable;
use super::strategy::CostModel;
use crate::profiler::{hwdb, DeviceProfile};
use crate::templates::gemm::wgmma::WgmmaGemm;
use crate::templates::gemm::{GemmProblem, Layout};
use crate::templates::Template;
use crate::{Arch, DType};
use serde_json::Value;
use std::sync::Arc;

/// The device figures an analytic cost model needs: datasheet values from [`hwdb`], replaced by
/// the profiler's measured ceilings where a saved [`DeviceProfile`] has them.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFacts {
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// SM clock the peak figures assume, MHz.
    pub clock_mhz: f64,
    /// Dense tensor-core peak for 2-byte inputs (f16/bf16, fp32 accumulate), TFLOP/s.
    pub tensor_16bit_tflops: f64,
    /// Dense tf32 tensor-core peak, TFLOP/s.
    pub tensor_tf32_tflops: f64,
    /// DRAM bandwidth, GB/s.
    pub dram_gbps: f64,
    /// L2 cache, bytes.
    pub l2_bytes: u64,
    /// Shared memory of one SM, bytes (the per-block opt-in limit plus the 1 KiB the driver
    /// reserves per block).
    pub smem_per_sm: u32,
    /// Host-side cost of one launch, microseconds (a constant in every config's estimate).
    pub launch_us: f64,
}

/// Launch overhead assumed when the profiler has not measured it: a few microseconds is what an
/// event-timed single launch costs on current drivers.
const DEFAULT_LAUNCH_US: f64 = 3.0;

impl DeviceFacts {
    /// Facts from a datasheet entry.
    pub fn from_datasheet(e: &hwdb::HwEntry) -> DeviceFacts {
        DeviceFacts {
            sm_count: e.sm_count.max(1),
            clock_mhz: f64::from(e.boost_clock_mhz.max(1)),
            tensor_16bit_tflops: e.bf16_tflops.max(e.f16_tflops),
            tensor_tf32_tflops: e.tf32_tflops,
            dram_gbps: e.mem_bandwidth_gbps,
            l2_bytes: e.l2_bytes,
            smem_per_sm: e.smem_optin_bytes + 1024,
            launch_us: DEFAULT_LAUNCH_US,
        }
    }

    /// Facts for a driver-reported device name and compute capability, when the datasheet
    /// database knows the model.
    pub fn lookup(device_name: &str, compute_capability: (u32, u32)) -> Option<DeviceFacts> {
        hwdb::lookup(device_name, compute_capability).map(DeviceFacts::from_datasheet)
    }

    /// Facts for an open device: its datasheet (when known) with the driver's SM count, L2 and
    /// shared-memory figures, else `None`.
    pub fn for_device(info: &rtx_runtime::DeviceInfo) -> Option<DeviceFacts> {
        let mut f = DeviceFacts::lookup(&info.name, info.compute_capability)?;
        f.sm_count = info.sm_count.max(1);
        if info.l2_bytes > 0 {
            f.l2_bytes = info.l2_bytes;
        }
        if info.smem_per_sm > 0 {
            f.smem_per_sm = info.smem_per_sm;
        }
        Some(f)
    }

    /// These facts with the measured ceilings of `profile` where it has them (sustained
    /// bandwidth and tensor throughput are what the kernels can really reach).
    pub fn with_profile(mut self, profile: &DeviceProfile) -> DeviceFacts {
        let m = &profile.measured;
        let tensor = match (m.bf16_tflops, m.f16_tflops) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = tensor.filter(|t| t.is_finite() && *t > 0.0) {
            self.tensor_16bit_tflops = t;
        }
        if let Some(t) = m.tf32_tflops.filter(|t| t.is_finite() && *t > 0.0) {
            self.tensor_tf32_tflops = t;
        }
        if let Some(c) = m.copy_gbps.filter(|c| c.is_finite() && *c > 0.0) {
            self.dram_gbps = c;
        }
        if let Some(l) = m.launch_overhead_us.filter(|l| l.is_finite() && *l >= 0.0) {
            self.launch_us = l;
        }
        self
    }

    /// Dense tensor-core peak for `dtype` inputs, TFLOP/s (`None` for types without one).
    pub fn tensor_tflops(&self, dtype: DType) -> Option<f64> {
        match dtype {
            DType::F16 | DType::Bf16 => Some(self.tensor_16bit_tflops),
            DType::F32 | DType::Tf32 => Some(self.tensor_tf32_tflops),
        }
        .filter(|t| t.is_finite() && *t > 0.0)
    }

    /// SM clock, Hz.
    pub fn clock_hz(&self) -> f64 {
        self.clock_mhz * 1e6
    }
}

/// A template's analytic estimate ([`Template::estimate_us`]) for one problem on one device, as
/// a [`CostModel`] over configs in JSON form (a config that does not parse gets no estimate).
pub struct TemplateCostModel<T: Template> {
    template: T,
    problem: T::Problem,
    device: DeviceFacts,
}

impl<T: Template> TemplateCostModel<T> {
    /// The model of `template` for `problem` on `device`.
    pub fn new(template: T, problem: T::Problem, device: DeviceFacts) -> Self {
        TemplateCostModel {
            template,
            problem,
            device,
        }
    }
}

impl<T: Template> CostModel for TemplateCostModel<T> {
    fn estimate(&self, config: &Value) -> Option<f64> {
        let c: T::Config = serde_json::from_value(config.clone()).ok()?;
        self.template
            .estimate_us(&self.problem, &c, &self.device)
            .filter(|t| t.is_finite() && *t >= 0.0)
    }
}

/// The cost model a live run of `table`'s template would use, rebuilt from the table's
/// metadata (template name, problem text, device name): `None` when the template has no model,
/// the problem text does not parse or the device is not in the datasheet database.
pub fn cost_model_for_table(table: &ReplayTable) -> Option<Arc<dyn CostModel>> {
    match table.template.as_str() {
        crate::templates::gemm::wgmma::NAME => {
            let problem = gemm_problem_from_text(&table.problem)?;
            let cc =
                compute_capability_in(&table.device).unwrap_or(Arch::Sm90a.compute_capability());
            let device = DeviceFacts::lookup(&table.device, cc)?;
            let template = WgmmaGemm::new(device.sm_count);
            Some(Arc::new(TemplateCostModel::new(template, problem, device)))
        }
        other => {
            tracing::debug!(template = other, "no cost model for this template");
            None
        }
    }
}

/// `(major, minor)` from a device description such as `"NVIDIA H200 (cc 9.0, driver 13.0)"`.
fn compute_capability_in(device: &str) -> Option<(u32, u32)> {
    let rest = &device[device.find("cc ")? + 3..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (a, b) = rest[..end].split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A GEMM problem from its recorded text: the `Debug` form of [`GemmProblem`] (what
/// `rtx-tune --record-fixture` writes) or the short `"bf16 NT 4096x4096x4096"` form. Only the
/// fields a cost model reads must be present (m, n, k, dtype; batch, layouts and the output
/// type default to 1, row-major and the input type).
pub fn gemm_problem_from_text(text: &str) -> Option<GemmProblem> {
    let dtype_of = |s: &str| -> Option<DType> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "f16" => DType::F16,
            "bf16" => DType::Bf16,
            "f32" => DType::F32,
            _ => return None,
        })
    };
    let layout_of = |c: char| match c.to_ascii_uppercase() {
        'T' => Some(Layout::Col),
        'N' => Some(Layout::Row),
        _ => None,
    };
    if text.trim_start().starts_with("GemmProblem") {
        let field = |name: &str| -> Option<&str> {
            let key = format!(" {name}: ");
            let at = text.find(&key)? + key.len();
            let rest = &text[at..];
            let end = rest.find([',', ' ', '}']).unwrap_or(rest.len());
            Some(&rest[..end])
        };
        let num = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
        let layout = |name: &str| match field(name)? {
            "Row" => Some(Layout::Row),
            "Col" => Some(Layout::Col),
            _ => None,
        };
        let (m, n, k) = (num("m")?, num("n")?, num("k")?);
        let dtype = dtype_of(field("dtype")?)?;
        let mut p = GemmProblem::new(
            m,
            n,
            k,
            dtype,
            layout("layout_a").unwrap_or(Layout::Row),
            layout("layout_b").unwrap_or(Layout::Row),
        );
        p.batch = num("batch").unwrap_or(1).max(1);
        if let Some(o) = field("out_dtype").and_then(dtype_of) {
            p.epilogue.out_dtype = o;
        }
        return Some(p);
    }
    let mut words = text.split_whitespace();
    let dtype = dtype_of(words.next()?)?;
    let layouts: Vec<char> = words.next()?.chars().collect();
    let (la, lb) = match layouts.as_slice() {
        [a, b] => (layout_of(*a)?, layout_of(*b)?),
        _ => return None,
    };
    let dims: Vec<u32> = words
        .next()?
        .split('x')
        .map(|d| d.parse().ok())
        .collect::<Option<_>>()?;
    match dims.as_slice() {
        [m, n, k] => Some(GemmProblem::new(*m, *n, *k, dtype, la, lb)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn problems_parse_from_both_recorded_forms() {
        let p = GemmProblem::new(256, 8192, 4096, DType::Bf16, Layout::Row, Layout::Col);
        let back = gemm_problem_from_text(&format!("{p:?}")).unwrap();
        assert_eq!(
            (back.m, back.n, back.k, back.dtype, back.layout_b),
            (256, 8192, 4096, DType::Bf16, Layout::Col)
        );
        let short = gemm_problem_from_text("bf16 NT 4096x2048x1024").unwrap();
        assert_eq!(
            (short.m, short.n, short.k, short.layout_a, short.layout_b),
            (4096, 2048, 1024, Layout::Row, Layout::Col)
        );
        assert!(gemm_problem_from_text("bf16 NT 4096x2048").is_none());
        assert!(gemm_problem_from_text("GemmProblem { m: 4, n: 4 }").is_none());
        assert!(gemm_problem_from_text("").is_none());
    }

    #[test]
    fn device_descriptions_give_compute_capability() {
        assert_eq!(
            compute_capability_in("NVIDIA H200 (cc 9.0, driver 13.0)"),
            Some((9, 0))
        );
        assert_eq!(compute_capability_in("NVIDIA H200"), None);
    }

    #[test]
    fn measured_ceilings_replace_datasheet_figures() {
        let f = DeviceFacts::lookup("NVIDIA H200", (9, 0)).unwrap();
        assert_eq!(f.sm_count, 132);
        let mut profile = crate::profiler::measure::new_profile(
            &rtx_runtime::DeviceInfo::example_sm90(),
            Default::default(),
        );
        profile.measured.bf16_tflops = Some(700.0);
        profile.measured.copy_gbps = Some(4000.0);
        let g = f.clone().with_profile(&profile);
        assert_eq!(
            (g.tensor_16bit_tflops, g.dram_gbps, g.sm_count),
            (700.0, 4000.0, 132)
        );
        assert_eq!(g.tensor_tflops(DType::F16), Some(700.0));
    }

    #[test]
    fn table_models_cover_the_wgmma_template_only() {
        let mut t = ReplayTable {
            device: "NVIDIA H200".into(),
            template: "gemm_wgmma".into(),
            template_version: 3,
            problem: "bf16 NN 4096x4096x4096".into(),
            default: None,
            configs: Vec::new(),
        };
        let m = cost_model_for_table(&t).unwrap();
        let c = json!({"bm": 128, "bn": 256, "bk": 64, "consumers": 2, "wgmma_n": 256, "stages": 4,
            "cluster_m": 1, "persistent": true, "raster_group": 8, "split_k": 1, "pingpong": false});
        assert!(m.estimate(&c).is_some_and(|t| t > 0.0));
        assert_eq!(m.estimate(&json!({"bm": "x"})), None);
        t.template = "gemm_simt".into();
        assert!(cost_model_for_table(&t).is_none());
    }
}
