//! Softmax / LayerNorm / RMSNorm rows of the memory suite: the row-reduction template at its
//! default config, verified on sampled rows against the template crate's f64 row references,
//! then timed (L2 flushed between runs). The ops match the anchors script: no affine weight
//! or bias (`F.layer_norm(a, (cols,))`, `F.rms_norm(a, (cols,))`, `torch.softmax(a, -1)`).

use super::tuned::{describe, nothing_tuned, tuned_name, MemoryTuning};
use super::{with_bytes, CaseError};
use crate::anchors::{mem_key, MemOp};
use crate::gpu::Gpu;
use crate::report::{Case, Clock, TuningInfo, Verified};
use crate::suite_id::SuiteId;
use crate::suites::gemm::host_matrix::HostMatrix;
use crate::timing::{Timer, TimingConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::RuntimeError;
use rtx_synthesis::templates::elementwise::expr::round_to;
use rtx_synthesis::templates::elementwise::{DeviceSlice, DeviceSliceMut, LaunchError};
use rtx_synthesis::templates::reduce::reference::{layernorm_row, rmsnorm_row, softmax_row};
use rtx_synthesis::templates::reduce::{
    RowBuffers, RowConfig, RowProblem, RowReduceKernel, RowReduceTemplate,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::DType;

/// Rows checked per case (every row when there are fewer).
pub const SAMPLE_ROWS: usize = 64;

/// LayerNorm epsilon (PyTorch's default).
pub const LN_EPS: f32 = 1e-5;
/// RMSNorm epsilon.
pub const RMS_EPS: f32 = 1e-6;

/// One row-op case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCase {
    /// Softmax, LayerNorm or RMSNorm.
    pub op: MemOp,
    /// Storage dtype.
    pub dtype: DType,
    /// Rows.
    pub rows: u32,
    /// Columns (the reduced dimension).
    pub cols: u32,
}

impl RowCase {
    /// Case name: `rtx <op> <dtype> <rows>x<cols>`.
    pub fn name(&self) -> String {
        format!(
            "rtx {} {} {}x{}",
            self.op.anchor_name(),
            self.dtype,
            self.rows,
            self.cols
        )
    }

    /// The template problem, or why the op is not a row op.
    pub fn problem(&self) -> Result<RowProblem, CaseError> {
        let (r, c, d) = (self.rows, self.cols, self.dtype);
        match self.op {
            MemOp::Softmax => Ok(RowProblem::softmax(r, c, d)),
            MemOp::LayerNorm => Ok(RowProblem::layernorm(r, c, d, false, false, LN_EPS)),
            MemOp::RmsNorm => Ok(RowProblem::rmsnorm(r, c, d, false, RMS_EPS)),
            MemOp::GeluAffine | MemOp::Chain8 => {
                Err(CaseError::msg("an elementwise chain is not a row op"))
            }
        }
    }
}

/// A launch error as a runtime error (sticky runtime errors stay themselves).
pub fn runtime(e: LaunchError) -> RuntimeError {
    match e {
        LaunchError::Runtime(r) => r,
        other => RuntimeError::InvalidLaunch {
            reason: other.to_string(),
        },
    }
}

/// The scaled error the reduce tests use: `|got - want| / max(|want|, floor)`, with `want`
/// rounded to the storage dtype; a non-finite mismatch counts as 1e30.
pub fn scaled_error(got: f64, want: f64, dtype: DType, floor: f64) -> f64 {
    let w = round_to(dtype, want);
    if !w.is_finite() || !got.is_finite() {
        let same = (w.is_nan() && got.is_nan()) || w == got;
        return if same { 0.0 } else { 1e30 };
    }
    (got - w).abs() / w.abs().max(floor)
}

/// The error floor of an op (as the template's GPU tests): softmax outputs are probabilities,
/// norm outputs are O(1).
pub fn floor(op: MemOp, dtype: DType) -> f64 {
    match (op, dtype) {
        (MemOp::Softmax, DType::F16) => 6.1e-5,
        (MemOp::Softmax, _) => 1e-30,
        _ => 0.1,
    }
}

/// Rows to check: all when there are at most [`SAMPLE_ROWS`], else the first, the last and
/// random ones.
pub fn sample_rows(rows: u32, rng: &mut SmallRng) -> Vec<u32> {
    if rows as usize <= SAMPLE_ROWS {
        return (0..rows).collect();
    }
    let mut v = vec![0, rows - 1];
    while v.len() < SAMPLE_ROWS {
        v.push(rng.random_range(0..rows));
    }
    v
}

/// The f64 reference of one row.
pub fn reference_row(op: MemOp, x: &[f64]) -> Vec<f64> {
    match op {
        MemOp::Softmax => softmax_row(x),
        MemOp::LayerNorm => layernorm_row(x, None, None, LN_EPS as f64),
        MemOp::RmsNorm => rmsnorm_row(x, None, RMS_EPS as f64),
        MemOp::GeluAffine | MemOp::Chain8 => vec![f64::NAN; x.len()],
    }
}

/// Checks `y` against the reference on sampled rows; returns the record (ok or not) and, when
/// not ok, the first bad element in words.
pub fn verify(
    rc: &RowCase,
    x: &HostMatrix,
    y: &HostMatrix,
    rng: &mut SmallRng,
) -> (Verified, Option<String>) {
    let tol = rc.dtype.rel_tolerance();
    let fl = floor(rc.op, rc.dtype);
    let cols = rc.cols as usize;
    let mut worst = 0.0f64;
    let mut first_bad = None;
    for r in sample_rows(rc.rows, rng) {
        let base = r as usize * cols;
        let xr: Vec<f64> = (0..cols).map(|c| x.get(base + c)).collect();
        let want = reference_row(rc.op, &xr);
        for (c, w) in want.iter().enumerate() {
            let g = y.get(base + c);
            let e = scaled_error(g, *w, rc.dtype, fl);
            if e > tol && first_bad.is_none() {
                first_bad = Some(format!(
                    "({r}, {c}): got {g} want {w} (scaled error {e:.3e})"
                ));
            }
            worst = worst.max(e);
        }
    }
    (Verified::new(worst, tol), first_bad)
}

/// `rtx-tune` command that tunes this case.
pub fn tune_command(rc: &RowCase) -> String {
    format!(
        "rtx-tune {} {}x{} --dtype {}",
        rc.op.anchor_name(),
        rc.rows,
        rc.cols,
        rc.dtype
    )
}

/// Builds, verifies and times one row case at the template's default config and, with a
/// tuning database, at the config it serves (`rtx-tuned` row: untuned baseline = the default
/// row, ratio = default time / tuned time).
pub fn run(
    gpu: &Gpu,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    rc: &RowCase,
    copy_gbps: Option<f64>,
    tuning: Option<&MemoryTuning>,
) -> Result<Vec<Case>, CaseError> {
    let p = rc.problem()?;
    let default = RowReduceTemplate.default_config(&p, gpu.arch);
    let base = run_config(gpu, timer, timing, rc, &default, rc.name(), None, copy_gbps)?;
    let default_us = base.median_us.filter(|_| base.is_measured());
    let mut rows = vec![base];
    if let Some(tn) = tuning {
        let name = tuned_name(&rc.name());
        let shape = format!("{}x{}", rc.rows, rc.cols);
        let row = match tn.row(gpu, &p) {
            Ok(Some(t)) => {
                let mut c = run_config(
                    gpu,
                    timer,
                    timing,
                    rc,
                    &t.config,
                    name,
                    Some(&t.info),
                    copy_gbps,
                )?;
                if let Some(d) = default_us {
                    c.baselines.untuned = c.measured_baseline(d);
                }
                c.tuning = Some(t.info);
                c
            }
            Ok(None) => Case::not_available(
                SuiteId::Memory,
                name,
                shape,
                nothing_tuned(&tune_command(rc)),
            )
            .with_dtype(rc.dtype.name()),
            Err(e) => Case::failed(SuiteId::Memory, name, shape, Clock::Gpu, e)
                .with_dtype(rc.dtype.name()),
        };
        rows.push(row);
    }
    Ok(rows)
}

/// Builds, verifies and times one row case at `config` (one row in the report).
#[allow(clippy::too_many_arguments)]
pub fn run_config(
    gpu: &Gpu,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    rc: &RowCase,
    config: &RowConfig,
    name: String,
    tuned: Option<&TuningInfo>,
    copy_gbps: Option<f64>,
) -> Result<Case, CaseError> {
    let shape = format!("{}x{}", rc.rows, rc.cols);
    let p = rc.problem()?;
    let t = RowReduceTemplate;
    t.check(&p, config, gpu.arch)
        .map_err(|e| CaseError::msg(format!("config {config:?}: {e}")))?;
    let kernel = RowReduceKernel::build(&gpu.device, &p, config)?;
    let n = rc.rows as usize * rc.cols as usize;
    let mut rng = SmallRng::seed_from_u64(crate::env_info::now_unix() ^ n as u64);
    let hx = HostMatrix::random(rc.dtype, n, &mut rng);
    let mut xb = gpu.device.alloc(hx.bytes(), &gpu.stream)?;
    hx.upload(&mut xb, &gpu.stream)?;
    let mut yb = gpu.device.alloc(hx.bytes(), &gpu.stream)?;
    yb.fill_u8(0xFF, &gpu.stream)?;
    let launch = |st: &rtx_runtime::Stream, yb: &mut rtx_runtime::DeviceBuffer| {
        kernel
            .launch(
                st,
                RowBuffers {
                    x: DeviceSlice::whole(&xb),
                    residual: None,
                    weight: None,
                    bias: None,
                    y: DeviceSliceMut::whole(yb),
                    residual_out: None,
                },
            )
            .map_err(runtime)
    };
    launch(&gpu.stream, &mut yb)?;
    gpu.stream.synchronize()?;
    let hy = HostMatrix::download(rc.dtype, &yb, &gpu.stream)?;
    let (verified, bad) = verify(rc, &hx, &hy, &mut rng);
    let anchor = Some(mem_key(rc.op, rc.dtype, rc.rows as u64, rc.cols as u64));
    if let Some(bad) = bad {
        let mut c = Case::failed(
            SuiteId::Memory,
            name,
            shape,
            Clock::Gpu,
            format!("wrong result at {bad}; bound {:.1e}", verified.bound),
        )
        .with_dtype(rc.dtype.name());
        c.verified = Some(verified);
        return Ok(c);
    }
    let s = timer.time(timing, |st, _| launch(st, &mut yb))?;
    let what = match tuned {
        Some(info) => describe(info),
        None => format!("default config {config:?}"),
    };
    let mut c = Case::measured(SuiteId::Memory, name, shape, Clock::Gpu, &s)
        .with_dtype(rc.dtype.name())
        .with_note(format!(
            "{} {what}; bytes = x read + y written; checked {} sampled rows vs f64",
            t.name(),
            SAMPLE_ROWS.min(rc.rows as usize)
        ));
    c = with_bytes(c, p.bytes_moved(), copy_gbps);
    c.verified = Some(verified);
    c.anchor = anchor;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_problems() {
        let rc = RowCase {
            op: MemOp::LayerNorm,
            dtype: DType::Bf16,
            rows: 16384,
            cols: 3072,
        };
        assert_eq!(rc.name(), "rtx layernorm bf16 16384x3072");
        let p = rc.problem().unwrap();
        assert_eq!(p.bytes_moved(), 2 * 16384 * 3072 * 2);
        let g = RowCase {
            op: MemOp::GeluAffine,
            ..rc
        };
        assert!(g.problem().is_err());
    }

    #[test]
    fn verify_accepts_the_reference_and_rejects_a_wrong_row() {
        let mut rng = SmallRng::seed_from_u64(3);
        for op in [MemOp::Softmax, MemOp::LayerNorm, MemOp::RmsNorm] {
            let rc = RowCase {
                op,
                dtype: DType::F32,
                rows: 8,
                cols: 100,
            };
            let x = HostMatrix::random(DType::F32, 800, &mut rng);
            let mut y = Vec::new();
            for r in 0..8 {
                let xr: Vec<f64> = (0..100).map(|c| x.get(r * 100 + c)).collect();
                y.extend(reference_row(op, &xr).into_iter().map(|v| v as f32));
            }
            let good = HostMatrix::F32(y.clone());
            let (v, bad) = verify(&rc, &x, &good, &mut rng);
            assert!(v.ok && bad.is_none(), "{op:?}: {v:?} {bad:?}");
            y[5 * 100 + 7] += 0.5;
            let (v, bad) = verify(&rc, &x, &HostMatrix::F32(y), &mut rng);
            assert!(!v.ok && bad.unwrap().starts_with("(5, 7)"), "{op:?}");
        }
    }

    #[test]
    fn sampled_rows_include_the_ends() {
        let mut rng = SmallRng::seed_from_u64(1);
        let r = sample_rows(10_000, &mut rng);
        assert_eq!(r.len(), SAMPLE_ROWS);
        assert!(r.contains(&0) && r.contains(&9_999));
        assert_eq!(sample_rows(5, &mut rng), vec![0, 1, 2, 3, 4]);
    }
}
