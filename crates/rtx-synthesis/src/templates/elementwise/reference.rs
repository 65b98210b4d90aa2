//! f64 CPU reference for elementwise graphs, and the element-by-element comparison every
//! memory-bound GPU check uses.
//!
//! Semantics (the kernels implement exactly these formulas in f32, so NaN and Inf travel
//! through both the same way):
//! - `min` / `max` / `relu` propagate NaN (a NaN operand gives NaN), unlike IEEE `fmin`/`fmax`.
//! - `sigmoid(x) = 1 / (1 + e^-x)`, `silu(x) = x / (1 + e^-x)`, `gelu` as in [`UnaryOp`]:
//!   the formulas are applied literally, so e.g. `silu(-inf) = -inf / inf = NaN` and
//!   `gelu(-inf) = NaN` (as in PyTorch's CUDA kernels).
//! - `rsqrt(x) = 1 / sqrt(x)`, `log 0 = -inf`, `log`/`sqrt` of a negative number is NaN.
//! - `Cast(t)` rounds to the precision of `t` (round to nearest even); constants are rounded to
//!   their dtype. Nothing else is rounded until the output store.
//!
//! Known divergence: the kernels compute in f32, so a finite intermediate beyond the f32 range
//! (e.g. `exp(100)`) is `inf` on the GPU but finite here; inputs in tests stay clear of that.

use super::expr::{
    const_value, round_to, BinaryOp, ExprGraph, GraphError, Node, UnaryOp, ValueRef,
};
use crate::templates::gemm::reference::erf;
use crate::DType;

/// NaN-propagating maximum.
pub fn max_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// NaN-propagating minimum.
pub fn min_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// One unary op in f64.
pub fn unary_f64(op: UnaryOp, x: f64) -> f64 {
    use std::f64::consts::{FRAC_1_SQRT_2, PI};
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Relu => max_nan(x, 0.0),
        UnaryOp::GeluErf => 0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2)),
        UnaryOp::GeluTanh => {
            0.5 * x * (1.0 + ((2.0 / PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::Cast(t) => round_to(t, x),
    }
}

/// One binary op in f64.
pub fn binary_f64(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Min => min_nan(a, b),
        BinaryOp::Max => max_nan(a, b),
    }
}

/// Evaluates every output of a *validated* graph at one point, given each input's value there.
pub fn eval_point(graph: &ExprGraph, x: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::with_capacity(graph.nodes.len());
    let get = |v: &Vec<f64>, r: ValueRef| match r {
        ValueRef::Input(k) => x.get(k as usize).copied().unwrap_or(f64::NAN),
        ValueRef::Node(k) => v.get(k as usize).copied().unwrap_or(f64::NAN),
    };
    for node in &graph.nodes {
        let r = match *node {
            Node::Const { bits, dtype } => const_value(bits, dtype) as f64,
            Node::Unary { op, arg } => unary_f64(op, get(&v, arg)),
            Node::Binary { op, lhs, rhs } => binary_f64(op, get(&v, lhs), get(&v, rhs)),
        };
        v.push(r);
    }
    graph.outputs.iter().map(|o| get(&v, o.value)).collect()
}

/// Evaluates the graph over `rows x cols`. `inputs[i]` holds input `i`'s stored values (widened
/// to f64) laid out as its [`super::expr::Broadcast`] says. Returns one row-major `rows * cols`
/// vector per output, unrounded.
pub fn elementwise_f64(
    graph: &ExprGraph,
    rows: usize,
    cols: usize,
    inputs: &[Vec<f64>],
) -> Result<Vec<Vec<f64>>, GraphError> {
    graph.validate()?;
    let mut outs = vec![Vec::with_capacity(rows * cols); graph.outputs.len()];
    let mut x = vec![0.0; graph.inputs.len()];
    for r in 0..rows {
        for c in 0..cols {
            for (i, spec) in graph.inputs.iter().enumerate() {
                let idx = spec.broadcast.index(cols, r, c);
                x[i] = inputs
                    .get(i)
                    .and_then(|v| v.get(idx))
                    .copied()
                    .unwrap_or(f64::NAN);
            }
            for (o, val) in eval_point(graph, &x).into_iter().enumerate() {
                outs[o].push(val);
            }
        }
    }
    Ok(outs)
}

/// The first element where a GPU result disagrees with the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Element index.
    pub index: usize,
    /// What the GPU wrote (widened to f64).
    pub got: f64,
    /// The reference, rounded to the storage dtype.
    pub want: f64,
    /// Why it fails.
    pub reason: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "element {}: got {} want {} ({})",
            self.index, self.got, self.want, self.reason
        )
    }
}

/// Compares `got` with `want` element by element.
///
/// `want` is first rounded to `dtype`. A non-finite reference must be matched exactly (NaN by
/// NaN, +inf by +inf, -inf by -inf); a finite reference needs a finite result with
/// `|got - want| <= tol * max(|want|, floor)`. Returns the largest such scaled error.
pub fn compare(
    got: &[f64],
    want: &[f64],
    dtype: DType,
    tol: f64,
    floor: f64,
) -> Result<f64, Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch {
            index: got.len().min(want.len()),
            got: f64::NAN,
            want: f64::NAN,
            reason: format!("lengths differ: {} vs {}", got.len(), want.len()),
        });
    }
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let w = round_to(dtype, w);
        let bad = |reason: &str| Mismatch {
            index: i,
            got: g,
            want: w,
            reason: reason.to_string(),
        };
        if w.is_nan() {
            if !g.is_nan() {
                return Err(bad("reference is NaN"));
            }
            continue;
        }
        if w.is_infinite() {
            if g != w {
                return Err(bad("reference is infinite"));
            }
            continue;
        }
        if !g.is_finite() {
            return Err(bad("result is not finite"));
        }
        let e = (g - w).abs() / w.abs().max(floor);
        if e > tol {
            return Err(bad(&format!("scaled error {e:.3e} > {tol:.1e}")));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::super::expr::{Broadcast, GraphBuilder};
    use super::*;

    #[test]
    fn ops_have_the_documented_nan_inf_semantics() {
        assert!(binary_f64(BinaryOp::Max, f64::NAN, 1.0).is_nan());
        assert!(binary_f64(BinaryOp::Min, 1.0, f64::NAN).is_nan());
        assert_eq!(binary_f64(BinaryOp::Max, f64::NEG_INFINITY, 1.0), 1.0);
        assert!(unary_f64(UnaryOp::Relu, f64::NAN).is_nan());
        assert_eq!(unary_f64(UnaryOp::Relu, -3.0), 0.0);
        assert_eq!(unary_f64(UnaryOp::Sigmoid, f64::INFINITY), 1.0);
        assert_eq!(unary_f64(UnaryOp::Sigmoid, f64::NEG_INFINITY), 0.0);
        assert!(unary_f64(UnaryOp::Silu, f64::NEG_INFINITY).is_nan());
        assert_eq!(unary_f64(UnaryOp::Silu, f64::INFINITY), f64::INFINITY);
        assert!(unary_f64(UnaryOp::GeluErf, f64::NEG_INFINITY).is_nan());
        assert_eq!(unary_f64(UnaryOp::GeluTanh, f64::INFINITY), f64::INFINITY);
        assert_eq!(unary_f64(UnaryOp::Rsqrt, 0.0), f64::INFINITY);
        assert_eq!(unary_f64(UnaryOp::Log, 0.0), f64::NEG_INFINITY);
        assert!(unary_f64(UnaryOp::Sqrt, -1.0).is_nan());
    }

    #[test]
    fn gelu_forms_agree_with_known_values() {
        // gelu(1) = 0.5 * (1 + erf(1/sqrt2)) = 0.8413447460685429
        assert!((unary_f64(UnaryOp::GeluErf, 1.0) - 0.841_344_746_068_542_9).abs() < 1e-12);
        assert!((unary_f64(UnaryOp::GeluTanh, 1.0) - 0.841_191_990_607_477_6).abs() < 1e-9);
        assert!((unary_f64(UnaryOp::Silu, 1.0) - 0.731_058_578_630_004_9).abs() < 1e-12);
    }

    #[test]
    fn evaluates_broadcasts_and_multiple_outputs() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, Broadcast::Full);
        let row = b.input(DType::F32, Broadcast::Row);
        let col = b.input(DType::F32, Broadcast::Col);
        let s = b.input(DType::F32, Broadcast::Scalar);
        let t = b.add(x, row);
        let t = b.mul(t, col);
        let u = b.sub(t, s);
        b.output(u, DType::F32).output(t, DType::F32);
        let g = b.build().unwrap();
        let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
        let out = elementwise_f64(
            &g,
            2,
            3,
            &[x, vec![10.0, 20.0, 30.0], vec![1.0, -1.0], vec![0.5]],
        )
        .unwrap();
        assert_eq!(out[1], vec![11.0, 22.0, 33.0, -14.0, -25.0, -36.0]);
        assert_eq!(out[0], vec![10.5, 21.5, 32.5, -14.5, -25.5, -36.5]);
    }

    #[test]
    fn casts_and_constants_round() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, Broadcast::Full);
        let c = b.cast(x, DType::Bf16);
        let k = b.constant(1.0 / 3.0, DType::Bf16);
        let y = b.mul(c, k);
        let y = b.cast(y, DType::F32);
        b.output(y, DType::F32);
        let g = b.build().unwrap();
        let out = elementwise_f64(&g, 1, 1, &[vec![1.0 + 1.0 / 512.0]]).unwrap();
        let want = round_to(DType::Bf16, 1.0 + 1.0 / 512.0) * round_to(DType::Bf16, 1.0 / 3.0);
        assert_eq!(out[0][0], want);
    }

    #[test]
    fn compare_requires_exact_nonfinite_classes() {
        let w = [1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
        assert!(compare(
            &[1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY],
            &w,
            DType::F32,
            1e-6,
            0.0
        )
        .is_ok());
        assert_eq!(
            compare(
                &[1.0, 2.0, f64::INFINITY, f64::NEG_INFINITY],
                &w,
                DType::F32,
                1e-6,
                0.0
            )
            .unwrap_err()
            .index,
            1
        );
        assert_eq!(
            compare(
                &[1.0, f64::NAN, f64::NEG_INFINITY, f64::NEG_INFINITY],
                &w,
                DType::F32,
                1e-6,
                0.0
            )
            .unwrap_err()
            .index,
            2
        );
        assert_eq!(
            compare(&[f64::NAN], &[1.0], DType::F32, 1e-6, 0.0)
                .unwrap_err()
                .index,
            0
        );
        assert!(compare(&[1.01], &[1.0], DType::Bf16, 2e-2, 0.0).is_ok());
        assert!(compare(&[1.1], &[1.0], DType::Bf16, 2e-2, 0.0).is_err());
        // The floor bounds the error of tiny references.
        assert!(compare(&[1e-9], &[0.0], DType::F32, 1e-6, 1e-3).is_ok());
        assert!(compare(&[1.0], &[1.0, 2.0], DType::F32, 1e-6, 0.0).is_err());
    }
}
