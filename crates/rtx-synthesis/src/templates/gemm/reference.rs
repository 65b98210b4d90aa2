//! f64 CPU reference for GEMM, and the relative-error metric every check uses.

use super::problem::{Activation, GemmProblem, Layout};

/// Applies an epilogue activation in f64.
pub fn activate(act: Activation, x: f64) -> f64 {
    match act {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::GeluTanh => {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
        Activation::GeluErf => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        Activation::Silu => x / (1.0 + (-x).exp()),
    }
}

/// erf to ~1e-15 (series for small |x|, continued fraction complement for large |x|).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let ax = x.abs();
    let r = if ax < 2.5 {
        // Maclaurin series: erf x = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = ax;
        let mut sum = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(x) = exp(-x^2)/sqrt(pi) / (x + 1/2/(x + 1/(x + 3/2/(x + ...))))
        let mut cf = 0.0;
        for i in (1..80).rev() {
            cf = (i as f64 * 0.5) / (ax + cf);
        }
        1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + cf)
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// Inputs of a reference GEMM, already widened to f64 (as the GPU saw them after rounding).
pub struct GemmRefInputs<'a> {
    /// A buffer.
    pub a: &'a [f64],
    /// B buffer.
    pub b: &'a [f64],
    /// Existing C (read when beta != 0).
    pub c: Option<&'a [f64]>,
    /// Bias, length N (when the epilogue has one).
    pub bias: Option<&'a [f64]>,
    /// Residual, laid out like C (when the epilogue has one).
    pub residual: Option<&'a [f64]>,
}

/// Computes the problem in f64; returns C laid out exactly like the GPU output buffer.
pub fn gemm_f64(p: &GemmProblem, x: &GemmRefInputs<'_>) -> Vec<f64> {
    let (_, _, c_elems) = p.buffer_elems();
    let mut out = vec![0.0f64; c_elems as usize];
    let e = &p.epilogue;
    for bt in 0..p.batch as usize {
        let a0 = bt * p.stride_a as usize;
        let b0 = bt * p.stride_b as usize;
        let c0 = bt * p.stride_c as usize;
        for i in 0..p.m as usize {
            for j in 0..p.n as usize {
                let mut acc = 0.0;
                for l in 0..p.k as usize {
                    let av = match p.layout_a {
                        Layout::Row => x.a[a0 + i * p.lda as usize + l],
                        Layout::Col => x.a[a0 + l * p.lda as usize + i],
                    };
                    let bv = match p.layout_b {
                        Layout::Row => x.b[b0 + l * p.ldb as usize + j],
                        Layout::Col => x.b[b0 + j * p.ldb as usize + l],
                    };
                    acc += av * bv;
                }
                let ci = c0 + i * p.ldc as usize + j;
                let mut v = e.alpha as f64 * acc;
                if e.beta != 0.0 {
                    v += e.beta as f64 * x.c.map_or(0.0, |c| c[ci]);
                }
                if e.bias {
                    v += x.bias.map_or(0.0, |b| b[j]);
                }
                v = activate(e.activation, v);
                if e.residual {
                    v += x.residual.map_or(0.0, |r| r[ci]);
                }
                out[ci] = v;
            }
        }
    }
    out
}

/// `||got - want|| / ||want||` over the given elements (Frobenius); NaN anywhere in `got` gives infinity.
pub fn rel_error(got: &[f64], want: &[f64]) -> f64 {
    let mut num = 0.0;
    let mut den = 0.0;
    for (g, w) in got.iter().zip(want) {
        if g.is_nan() != w.is_nan() {
            return f64::INFINITY;
        }
        if g.is_nan() {
            continue;
        }
        num += (g - w) * (g - w);
        den += w * w;
    }
    if den == 0.0 {
        if num == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (num / den).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::gemm::problem::Epilogue;
    use crate::DType;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (3.0, 0.999_977_909_503_001_4),
            (-2.0, -0.995_322_265_018_952_7),
        ] {
            assert!(
                (erf(x) - want).abs() < 1e-13,
                "erf({x}) = {} want {want}",
                erf(x)
            );
        }
    }

    #[test]
    fn small_gemm_with_epilogue_and_layouts() {
        // A = [[1,2],[3,4]] (row), B = [[5,6],[7,8]] given column-major.
        let mut p = GemmProblem::new(2, 2, 2, DType::F32, Layout::Row, Layout::Col);
        p.epilogue = Epilogue {
            alpha: 2.0,
            beta: 0.0,
            bias: true,
            activation: Activation::Relu,
            residual: true,
            out_dtype: DType::F32,
        };
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 7.0, 6.0, 8.0];
        let bias = [-100.0, 1.0];
        let res = [1.0, 1.0, 1.0, 1.0];
        let c = gemm_f64(
            &p,
            &GemmRefInputs {
                a: &a,
                b: &b,
                c: None,
                bias: Some(&bias),
                residual: Some(&res),
            },
        );
        // A*B = [[19,22],[43,50]] -> *2 = [[38,44],[86,100]] + bias -> [[-62,45],[-14,101]] relu -> [[0,45],[0,101]] +1
        assert_eq!(c, vec![1.0, 46.0, 1.0, 102.0]);
    }

    #[test]
    fn rel_error_flags_nan() {
        assert_eq!(rel_error(&[1.0, f64::NAN], &[1.0, 2.0]), f64::INFINITY);
        assert!(rel_error(&[1.0, 2.0], &[1.0, 2.0]) == 0.0);
    }
}
