//! Memory suite: device copy bandwidth first (the reference every other row is compared to),
//! then the row-wise templates (softmax, LayerNorm, RMSNorm; [`row_ops`]) and fused
//! elementwise chains against our own unfused one-kernel-per-op version ([`fused`]), each
//! verified against the templates' f64 references on sampled rows / points before it is timed.
//!
//! With a tuning database every case gets an `rtx-tuned` row too ([`tuned`]): the config the
//! database serves (exact entry or nearest tuned shape; `--tune` tunes it in-process first),
//! verified and timed like the default row, with the default row as its `untuned` baseline.
//!
//! Bytes are counted as every input read once and every output written once (for the unfused
//! chain too: the same logical traffic, so its GB/s is comparable); `throughput.copy_fraction`
//! is the achieved GB/s over the copy bandwidth of the same run.

pub mod fused;
pub mod row_ops;
pub mod tuned;

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::{copy_key, mem_key, MemOp};
use crate::gpu::Gpu;
use crate::report::{Case, Clock};
use crate::suite_id::SuiteId;
use crate::timing::{Timer, TimingConfig, TimingError};
use rtx_runtime::RuntimeError;
use rtx_synthesis::templates::elementwise::LaunchError;
use rtx_synthesis::DType;

/// Bytes copied by the copy case (2 GiB, as the anchors script copies).
pub const COPY_BYTES: usize = 2 << 30;

/// `(rows, cols)` of the row-wise cases, matching the anchors script.
pub const ROW_SHAPES: [(u32, u32); 3] = [(65536, 768), (16384, 3072), (4096, 16384)];

/// The shape the f32 / f16 row cases also run at.
pub const DTYPE_SHAPE: (u32, u32) = (16384, 3072);

/// The 8-op chain's shape: bf16 32768 x 4096 (256 MiB per full tensor).
pub const CHAIN_SHAPE: (u32, u32) = (32768, 4096);

/// A failure of one case; `sticky` ones (a poisoned context) end the suite.
#[derive(Debug)]
pub struct CaseError {
    /// What failed.
    pub message: String,
    /// The CUDA context is unusable afterwards.
    pub sticky: bool,
}

impl CaseError {
    /// A non-sticky failure.
    pub fn msg(message: impl Into<String>) -> CaseError {
        CaseError {
            message: message.into(),
            sticky: false,
        }
    }
}

impl From<RuntimeError> for CaseError {
    fn from(e: RuntimeError) -> Self {
        CaseError {
            sticky: e.is_sticky(),
            message: e.to_string(),
        }
    }
}

impl From<TimingError> for CaseError {
    fn from(e: TimingError) -> Self {
        let sticky = matches!(&e, TimingError::Runtime(r) if r.is_sticky());
        CaseError {
            sticky,
            message: e.to_string(),
        }
    }
}

impl From<LaunchError> for CaseError {
    fn from(e: LaunchError) -> Self {
        let sticky = matches!(&e, LaunchError::Runtime(r) if r.is_sticky());
        CaseError {
            sticky,
            message: e.to_string(),
        }
    }
}

/// Sets the byte count, the GB/s and its fraction of the run's copy bandwidth.
pub fn with_bytes(c: Case, bytes: u64, copy_gbps: Option<f64>) -> Case {
    let mut c = c.with_work(None, Some(bytes as f64));
    if let (Some(g), Some(copy)) = (c.throughput.gbps, copy_gbps.filter(|b| *b > 0.0)) {
        c.throughput.copy_fraction = Some(g / copy);
    }
    c
}

/// Name of the copy case.
pub fn copy_case_name() -> String {
    format!("copy d2d {}GiB", COPY_BYTES >> 30)
}

/// Times `dst.copy_from(src)` for [`COPY_BYTES`]; bytes counted = read + written.
pub fn copy_case(gpu: &Gpu, timing: &TimingConfig) -> Case {
    let name = copy_case_name();
    let shape = format!("{COPY_BYTES} bytes");
    let run = || -> Result<Case, String> {
        let src = gpu
            .device
            .alloc(COPY_BYTES, &gpu.stream)
            .map_err(|e| e.to_string())?;
        let mut dst = gpu
            .device
            .alloc(COPY_BYTES, &gpu.stream)
            .map_err(|e| e.to_string())?;
        let mut timer = Timer::new(gpu).map_err(|e| e.to_string())?;
        // 2 GiB is 40x the L2: flushing would only add time between samples.
        let cfg = TimingConfig {
            flush_l2: false,
            ..*timing
        };
        let s = timer
            .time(&cfg, |st, _| dst.copy_from(&src, st))
            .map_err(|e| e.to_string())?;
        let mut c = Case::measured(SuiteId::Memory, name.clone(), shape.clone(), Clock::Gpu, &s)
            .with_work(None, Some(2.0 * COPY_BYTES as f64))
            .with_note("cuMemcpyDtoDAsync through rtx-runtime; bytes = read + written");
        c.anchor = copy_key(COPY_BYTES as u64);
        Ok(c)
    };
    run().unwrap_or_else(|e| {
        Case::failed(SuiteId::Memory, name.clone(), shape.clone(), Clock::Gpu, e)
    })
}

/// One planned memory case.
#[derive(Debug, Clone)]
pub enum MemCase {
    /// A row op at a dtype and shape.
    Row(row_ops::RowCase),
    /// A fused chain and its unfused version.
    Fused(fused::FusedCase),
}

impl MemCase {
    /// Short description for progress output.
    pub fn what(&self) -> String {
        match self {
            MemCase::Row(r) => r.name(),
            MemCase::Fused(f) => f.fused_name(),
        }
    }
}

/// The cases of a run: row ops in bf16 at the anchor shapes plus f32 / f16 at
/// [`DTYPE_SHAPE`]; the anchors' `gelu(x*1.5+0.5)` fused vs unfused at the anchor shapes; the
/// 8-op chain fused vs unfused at [`CHAIN_SHAPE`]. `quick`: [`DTYPE_SHAPE`] only (and the chain).
pub fn plan(quick: bool) -> Vec<MemCase> {
    let shapes: Vec<(u32, u32)> = if quick {
        vec![DTYPE_SHAPE]
    } else {
        ROW_SHAPES.to_vec()
    };
    let mut v = Vec::new();
    for &(rows, cols) in &shapes {
        for op in [MemOp::Softmax, MemOp::LayerNorm, MemOp::RmsNorm] {
            v.push(MemCase::Row(row_ops::RowCase {
                op,
                dtype: DType::Bf16,
                rows,
                cols,
            }));
        }
    }
    for d in [DType::F32, DType::F16] {
        for op in [MemOp::Softmax, MemOp::LayerNorm, MemOp::RmsNorm] {
            v.push(MemCase::Row(row_ops::RowCase {
                op,
                dtype: d,
                rows: DTYPE_SHAPE.0,
                cols: DTYPE_SHAPE.1,
            }));
        }
    }
    for &(rows, cols) in &shapes {
        v.push(MemCase::Fused(fused::FusedCase {
            graph: fused::ChainKind::GeluAffine,
            dtype: DType::Bf16,
            rows,
            cols,
            suite: SuiteId::Memory,
            anchor: Some(mem_key(
                MemOp::GeluAffine,
                DType::Bf16,
                rows as u64,
                cols as u64,
            )),
        }));
    }
    v.push(MemCase::Fused(fused::FusedCase {
        graph: fused::ChainKind::Chain8,
        dtype: DType::Bf16,
        rows: CHAIN_SHAPE.0,
        cols: CHAIN_SHAPE.1,
        suite: SuiteId::Memory,
        anchor: Some(mem_key(
            MemOp::Chain8,
            DType::Bf16,
            CHAIN_SHAPE.0 as u64,
            CHAIN_SHAPE.1 as u64,
        )),
    }));
    v
}

/// Runs planned cases (fused ones give two rows), returning the rows, or a sticky failure
/// with the rows so far.
pub fn run_cases(
    gpu: &Gpu,
    ctx: &SuiteContext<'_>,
    suite: SuiteId,
    label: &str,
    cases: &[MemCase],
    copy_gbps: Option<f64>,
    out: &mut Vec<Case>,
) -> Result<(), String> {
    let mut timer = match Timer::new(gpu) {
        Ok(t) => t,
        Err(e) => return Err(format!("timer: {e}")),
    };
    let tuning =
        (suite == SuiteId::Memory).then(|| tuned::MemoryTuning::new(gpu, ctx.tune, ctx.quick));
    let bar = ctx.progress(label, cases.len() as u64);
    for c in cases {
        let what = c.what();
        bar.running(&what);
        let r = match c {
            MemCase::Row(r) => {
                row_ops::run(gpu, &mut timer, &ctx.timing, r, copy_gbps, tuning.as_ref())
            }
            MemCase::Fused(f) => {
                fused::run(gpu, &mut timer, &ctx.timing, f, copy_gbps, tuning.as_ref())
            }
        };
        bar.done(&what);
        match r {
            Ok(rows) => out.extend(rows),
            Err(e) if e.sticky => {
                bar.finish();
                return Err(format!("{what}: {}", e.message));
            }
            Err(e) => out.push(Case::failed(suite, what, "-", Clock::Gpu, e.message)),
        }
        ctx.save_partial(out);
    }
    bar.finish();
    Ok(())
}

/// The memory suite.
pub struct MemorySuite;

impl Suite for MemorySuite {
    fn id(&self) -> SuiteId {
        SuiteId::Memory
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let mut out = Vec::new();
        let Some(gpu) = ctx.gpu else {
            return Ok(out);
        };
        let p = ctx.progress("memory copy", 1);
        p.running(&copy_case_name());
        let copy = copy_case(gpu, &ctx.timing);
        p.done(&copy_case_name());
        p.finish();
        let copy_gbps = copy.throughput.gbps;
        out.push(copy);
        let cases = plan(ctx.quick);
        run_cases(
            gpu,
            ctx,
            SuiteId::Memory,
            "memory",
            &cases,
            copy_gbps,
            &mut out,
        )
        .map_err(|reason| SuiteError {
            suite: SuiteId::Memory,
            reason,
            partial: out.clone(),
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_the_anchor_shapes_and_dtypes() {
        let full = plan(false);
        let names: Vec<String> = full.iter().map(|c| c.what()).collect();
        for (r, c) in ROW_SHAPES {
            for op in ["softmax", "layernorm", "rmsnorm"] {
                assert!(
                    names.contains(&format!("rtx {op} bf16 {r}x{c}")),
                    "{op} {r}x{c}: {names:?}"
                );
            }
        }
        assert!(names.contains(&"rtx layernorm f32 16384x3072".to_string()));
        assert!(names.contains(&"rtx softmax f16 16384x3072".to_string()));
        assert!(names.iter().any(|n| n.contains("chain8")));
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate case names");
        assert!(plan(true).len() < full.len());
    }

    #[test]
    fn copy_fraction_is_relative_to_the_copy() {
        let s = crate::stats::Summary {
            median_us: 1000.0,
            p20_us: 1000.0,
            p80_us: 1000.0,
            rel_spread: 0.0,
            samples: 1,
        };
        let c = Case::measured(SuiteId::Memory, "x", "-", Clock::Gpu, &s);
        let c = with_bytes(c, 2_000_000_000, Some(4000.0));
        assert_eq!(c.throughput.gbps, Some(2000.0));
        assert_eq!(c.throughput.copy_fraction, Some(0.5));
    }
}
