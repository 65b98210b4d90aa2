//! f64 CPU reference for the row kernels.
//!
//! Formulas (the kernels evaluate the same ones in f32, so NaN and Inf travel alike):
//! - softmax: `m = max(row)` (NaN-propagating), `y = exp(x - m) / sum(exp(x - m))`. Hence a
//!   row containing NaN or `+inf` is all NaN (`inf - inf`), a row of only `-inf` is all NaN,
//!   and `-inf` elements of an otherwise finite row give 0.
//! - LayerNorm: `mean = sum(x) / n`, `var = sum((x - mean)^2) / n` (biased),
//!   `y = (x - mean) / sqrt(var + eps) [* w] [+ b]`. Any non-finite input makes the whole row
//!   NaN.
//! - RMSNorm: `y = x / sqrt(sum(x^2) / n + eps) [* w]`: a NaN input makes the row NaN; a
//!   `±inf` input gives NaN there and `0` at the finite elements (`x / inf`).
//! - fused residual: `h = round_to_dtype(x + residual)` is written out and normalized.
//!
//! Known divergence: f32 accumulation overflows where f64 does not (e.g. squares of
//! `|x| > 1.8e19`); tests keep finite inputs well inside that range.

use super::problem::{RowOp, RowProblem, RowProblemError};
use crate::templates::elementwise::expr::round_to;
use crate::templates::elementwise::reference::max_nan;

/// Softmax of one row.
pub fn softmax_row(x: &[f64]) -> Vec<f64> {
    let m = x.iter().copied().fold(f64::NEG_INFINITY, max_nan);
    let e: Vec<f64> = x.iter().map(|&v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&v| v / s).collect()
}

/// LayerNorm of one row (`w`, `b` of the row's length when present).
pub fn layernorm_row(x: &[f64], w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|&v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let rstd = 1.0 / (var + eps).sqrt();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let mut y = (v - mean) * rstd;
            if let Some(w) = w {
                y *= w[i];
            }
            if let Some(b) = b {
                y += b[i];
            }
            y
        })
        .collect()
}

/// RMSNorm of one row.
pub fn rmsnorm_row(x: &[f64], w: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let n = x.len() as f64;
    let ms = x.iter().map(|&v| v * v).sum::<f64>() / n;
    let rstd = 1.0 / (ms + eps).sqrt();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let y = v * rstd;
            match w {
                Some(w) => y * w[i],
                None => y,
            }
        })
        .collect()
}

/// Inputs of a reference row op, as stored (widened to f64).
#[derive(Debug, Clone, Copy)]
pub struct RowInputs<'a> {
    /// `rows * cols` inputs.
    pub x: &'a [f64],
    /// `rows * cols` residual (with `residual`).
    pub residual: Option<&'a [f64]>,
    /// `cols` weight (when the op has one).
    pub weight: Option<&'a [f64]>,
    /// `cols` bias (when the op has one).
    pub bias: Option<&'a [f64]>,
}

/// Reference outputs, unrounded (except `residual_out`, which is the rounded `h`).
#[derive(Debug, Clone, PartialEq)]
pub struct RowOutputs {
    /// `rows * cols` results.
    pub y: Vec<f64>,
    /// `rows * cols` summed residual stream (with `residual`).
    pub residual_out: Option<Vec<f64>>,
}

/// Computes the problem in f64.
pub fn row_reduce_f64(p: &RowProblem, inp: &RowInputs<'_>) -> Result<RowOutputs, RowProblemError> {
    p.validate()?;
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let missing = |what: &str| RowProblemError {
        what: format!("reference input `{what}` is missing or too short"),
    };
    if inp.x.len() < rows * cols {
        return Err(missing("x"));
    }
    let h: Option<Vec<f64>> = if p.residual {
        let r = inp
            .residual
            .filter(|r| r.len() >= rows * cols)
            .ok_or_else(|| missing("residual"))?;
        Some(
            (0..rows * cols)
                .map(|i| round_to(p.dtype, inp.x[i] + r[i]))
                .collect(),
        )
    } else {
        None
    };
    let w = if p.op.has_weight() {
        Some(
            inp.weight
                .filter(|w| w.len() >= cols)
                .ok_or_else(|| missing("weight"))?,
        )
    } else {
        None
    };
    let b = if p.op.has_bias() {
        Some(
            inp.bias
                .filter(|b| b.len() >= cols)
                .ok_or_else(|| missing("bias"))?,
        )
    } else {
        None
    };
    let src: &[f64] = h.as_deref().unwrap_or(inp.x);
    let mut y = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &src[r * cols..(r + 1) * cols];
        let out = match p.op {
            RowOp::Softmax => softmax_row(row),
            RowOp::LayerNorm { .. } => layernorm_row(
                row,
                w.map(|w| &w[..cols]),
                b.map(|b| &b[..cols]),
                p.eps as f64,
            ),
            RowOp::RmsNorm { .. } => rmsnorm_row(row, w.map(|w| &w[..cols]), p.eps as f64),
        };
        y.extend(out);
    }
    Ok(RowOutputs { y, residual_out: h })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn softmax_rows_sum_to_one_and_are_shift_invariant() {
        let x: Vec<f64> = (0..1000)
            .map(|i| ((i * 37) % 101) as f64 * 0.1 - 5.0)
            .collect();
        let y = softmax_row(&x);
        assert!(close(y.iter().sum(), 1.0, 1e-12));
        assert!(y.iter().all(|&v| v > 0.0));
        let shifted: Vec<f64> = x.iter().map(|v| v + 100.0).collect();
        for (a, b) in softmax_row(&shifted).iter().zip(&y) {
            assert!(close(*a, *b, 1e-9));
        }
        assert_eq!(softmax_row(&[3.0]), vec![1.0]);
    }

    #[test]
    fn softmax_nan_and_inf_semantics() {
        assert!(softmax_row(&[1.0, f64::NAN, 2.0])
            .iter()
            .all(|v| v.is_nan()));
        assert!(softmax_row(&[1.0, f64::INFINITY, 2.0])
            .iter()
            .all(|v| v.is_nan()));
        assert!(softmax_row(&[f64::NEG_INFINITY; 3])
            .iter()
            .all(|v| v.is_nan()));
        let y = softmax_row(&[0.0, f64::NEG_INFINITY, 0.0]);
        assert_eq!(y, vec![0.5, 0.0, 0.5]);
    }

    #[test]
    fn layernorm_has_mean_zero_and_unit_variance() {
        let x: Vec<f64> = (0..4097)
            .map(|i| ((i * 7919) % 1000) as f64 * 0.01 + 3.0)
            .collect();
        let y = layernorm_row(&x, None, None, 0.0);
        let n = y.len() as f64;
        let mean = y.iter().sum::<f64>() / n;
        let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        assert!(mean.abs() < 1e-12, "{mean}");
        assert!(close(var, 1.0, 1e-9), "{var}");
        let w = vec![2.0; x.len()];
        let b = vec![1.0; x.len()];
        let z = layernorm_row(&x, Some(&w), Some(&b), 0.0);
        assert!(close(z[5], 2.0 * y[5] + 1.0, 1e-12));
        // One element: (x - x) * rsqrt(eps) + b = b.
        assert_eq!(layernorm_row(&[5.0], None, Some(&[0.25]), 1e-5), vec![0.25]);
    }

    #[test]
    fn layernorm_non_finite_rows_are_nan() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(
                layernorm_row(&[1.0, bad, 2.0], None, None, 1e-5)
                    .iter()
                    .all(|v| v.is_nan()),
                "{bad}"
            );
        }
    }

    #[test]
    fn rmsnorm_has_unit_rms_and_inf_semantics() {
        let x: Vec<f64> = (0..300).map(|i| (i as f64 - 150.0) * 0.03).collect();
        let y = rmsnorm_row(&x, None, 0.0);
        let ms = y.iter().map(|v| v * v).sum::<f64>() / y.len() as f64;
        assert!(close(ms, 1.0, 1e-12));
        let y = rmsnorm_row(&[1.0, f64::INFINITY], None, 1e-6);
        assert_eq!(y[0], 0.0);
        assert!(y[1].is_nan());
        assert!(rmsnorm_row(&[1.0, f64::NAN], None, 1e-6)
            .iter()
            .all(|v| v.is_nan()));
    }

    #[test]
    fn residual_is_rounded_then_normalized() {
        let p = RowProblem::rmsnorm(2, 2, DType::Bf16, false, 0.0).with_residual();
        let x = [1.0, 2.0, 3.0, 1.0 / 256.0];
        let r = [0.001, 0.0, 0.0, 1.0];
        let out = row_reduce_f64(
            &p,
            &RowInputs {
                x: &x,
                residual: Some(&r),
                weight: None,
                bias: None,
            },
        )
        .unwrap();
        let h = out.residual_out.unwrap();
        assert_eq!(h[0], 1.0, "1.001 rounds to 1 in bf16");
        assert_eq!(h[3], round_to(DType::Bf16, 1.0 + 1.0 / 256.0));
        assert_eq!(out.y[..2], rmsnorm_row(&h[..2], None, 0.0)[..]);
        let missing = row_reduce_f64(
            &p,
            &RowInputs {
                x: &x,
                residual: None,
                weight: None,
                bias: None,
            },
        );
        assert!(missing.unwrap_err().what.contains("residual"));
    }
}
