//! Named graphs for common fused elementwise patterns.

use super::expr::{Broadcast, ExprGraph, GraphBuilder, GraphError, UnaryOp};
use crate::DType;

/// Which GELU formula a preset uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum GeluForm {
    /// `0.5 x (1 + erf(x / sqrt 2))`.
    Erf,
    /// The tanh approximation.
    Tanh,
}

/// `y = gelu(x + bias)` with `x` a full `rows x cols` tensor and `bias` a row vector (length
/// `cols`); inputs `[x, bias]`, output `[y]`, all in `dtype`
/// (an error only for a dtype elementwise kernels cannot store).
pub fn bias_gelu(dtype: DType, form: GeluForm) -> Result<ExprGraph, GraphError> {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, Broadcast::Full);
    let bias = b.input(dtype, Broadcast::Row);
    let s = b.add(x, bias);
    let op = match form {
        GeluForm::Erf => UnaryOp::GeluErf,
        GeluForm::Tanh => UnaryOp::GeluTanh,
    };
    let y = b.unary(op, s);
    b.output(y, dtype);
    b.build()
}

/// `y = x * sigmoid(g)` (a gated linear unit half: SwiGLU uses `silu(g) * x`); inputs `[x, g]`.
pub fn silu_gate(dtype: DType) -> Result<ExprGraph, GraphError> {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, Broadcast::Full);
    let g = b.input(dtype, Broadcast::Full);
    let s = b.unary(UnaryOp::Silu, g);
    let y = b.mul(s, x);
    b.output(y, dtype);
    b.build()
}

/// An 8-op chain over two full inputs and a row-vector bias, one output (the bandwidth
/// benchmark shape): `y = relu(tanh((a * 0.5 + b) * 1.25 + bias) - a) ...`, exactly
/// `mul, add, mul, add, tanh, sub, max, gelu_tanh`.
pub fn chain8(dtype: DType) -> Result<ExprGraph, GraphError> {
    let mut g = GraphBuilder::new();
    let a = g.input(dtype, Broadcast::Full);
    let b = g.input(dtype, Broadcast::Full);
    let bias = g.input(dtype, Broadcast::Row);
    let half = g.constant(0.5, dtype);
    let k = g.constant(1.25, dtype);
    let t = g.mul(a, half);
    let t = g.add(t, b);
    let t = g.mul(t, k);
    let t = g.add(t, bias);
    let t = g.unary(UnaryOp::Tanh, t);
    let t = g.sub(t, a);
    let t = g.max(t, b);
    let y = g.unary(UnaryOp::GeluTanh, t);
    g.output(y, dtype);
    g.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_with_expected_sizes() {
        for d in [DType::F32, DType::F16, DType::Bf16] {
            assert_eq!(bias_gelu(d, GeluForm::Erf).unwrap().op_count(), 2);
            assert_eq!(silu_gate(d).unwrap().inputs.len(), 2);
            let c = chain8(d).unwrap();
            assert_eq!(c.op_count(), 8);
            assert_eq!(c.inputs.len(), 3);
        }
        assert!(matches!(
            bias_gelu(DType::Tf32, GeluForm::Tanh),
            Err(GraphError::UnsupportedDType { .. })
        ));
    }
}
