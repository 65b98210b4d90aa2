//! Transformer suite: one encoder layer (B8 S512 d768 h12 ffn3072, bf16) against the eager
//! PyTorch layer. Needs the GEMM, attention and normalization templates; not available yet.

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::layer_key;
use crate::report::Case;
use crate::suite_id::SuiteId;

/// The transformer suite.
pub struct TransformerSuite;

impl Suite for TransformerSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Transformer
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, _ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let shape = "B8 S512 d768 h12 ffn3072";
        let mut c = Case::not_available(
            SuiteId::Transformer,
            format!("rtx encoder {shape} bf16"),
            shape,
            "needs the GEMM, attention and LayerNorm templates, none merged in rtx-synthesis yet",
        )
        .with_dtype("bf16");
        c.anchor = Some(layer_key(8, 512, 768, 12, 3072));
        Ok(vec![c])
    }
}
