//! Memory suite: device copy bandwidth (measured now, through the runtime), and the row-wise /
//! elementwise kernels against the PyTorch anchors (not available until the elementwise and
//! reduce templates land).

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::{copy_key, mem_key, MemOp};
use crate::gpu::Gpu;
use crate::report::{Case, Clock};
use crate::suite_id::SuiteId;
use crate::timing::{Timer, TimingConfig};
use rtx_synthesis::DType;

/// Bytes copied by the copy case (2 GiB, as the anchors script copies).
pub const COPY_BYTES: usize = 2 << 30;

/// `(rows, cols)` of the row-wise cases, matching the anchors script.
pub const ROW_SHAPES: [(u64, u64); 3] = [(65536, 768), (16384, 3072), (4096, 16384)];

/// Why the row-wise cases are not measured yet.
pub const NOT_AVAILABLE: &str = "no elementwise/reduce template in rtx-synthesis yet";

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
        if let Some(gpu) = ctx.gpu {
            let p = ctx.progress("memory", 1);
            p.running(&copy_case_name());
            out.push(copy_case(gpu, &ctx.timing));
            p.done(&copy_case_name());
            p.finish();
        }
        for (rows, cols) in ROW_SHAPES {
            for op in [
                MemOp::LayerNorm,
                MemOp::RmsNorm,
                MemOp::Softmax,
                MemOp::GeluAffine,
            ] {
                let shape = format!("{rows}x{cols}");
                let mut c = Case::not_available(
                    SuiteId::Memory,
                    format!("rtx {} bf16 {shape}", op.anchor_name()),
                    shape,
                    NOT_AVAILABLE,
                )
                .with_dtype("bf16");
                // Minimum traffic: read x once, write y once (bf16).
                c.bytes = Some((rows * cols * 2 * DType::Bf16.size_bytes() as u64) as f64);
                c.anchor = Some(mem_key(op, DType::Bf16, rows, cols));
                out.push(c);
            }
        }
        Ok(out)
    }
}
