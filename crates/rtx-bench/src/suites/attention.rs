//! Attention suite: fused attention against PyTorch SDPA (anchors). No attention template exists
//! in rtx-synthesis yet, so every case is `not available yet`.

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::attn_key;
use crate::report::Case;
use crate::suite_id::SuiteId;
use rtx_synthesis::DType;

/// Why no case can be measured yet.
pub const NOT_AVAILABLE: &str = "no attention template in rtx-synthesis yet";

/// `(batch, heads, seq, head_dim)` shapes, matching the anchors script.
pub const SHAPES: [(u32, u32, u32, u32); 3] =
    [(8, 12, 512, 64), (4, 16, 2048, 128), (2, 16, 8192, 128)];

/// FLOPs of attention (`4 * B * H * S^2 * D`, halved when causal), as the anchors count them.
pub fn attention_flops(b: u32, h: u32, s: u32, d: u32, causal: bool) -> f64 {
    let f = 4.0 * b as f64 * h as f64 * (s as f64).powi(2) * d as f64;
    if causal {
        f / 2.0
    } else {
        f
    }
}

/// The attention suite.
pub struct AttentionSuite;

impl Suite for AttentionSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Attention
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, _ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let mut out = Vec::new();
        for dtype in [DType::F16, DType::Bf16] {
            for (b, h, s, d) in SHAPES {
                for causal in [false, true] {
                    let shape =
                        format!("B{b} H{h} S{s} D{d}{}", if causal { " causal" } else { "" });
                    let mut c = Case::not_available(
                        SuiteId::Attention,
                        format!("rtx {dtype} {shape}"),
                        shape,
                        NOT_AVAILABLE,
                    )
                    .with_dtype(dtype.name());
                    c.flops = Some(attention_flops(b, h, s, d, causal));
                    c.anchor = attn_key(dtype, b, h, s, d, causal);
                    out.push(c);
                }
            }
        }
        Ok(out)
    }
}
