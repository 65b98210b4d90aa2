//! The GEMM shapes benchmarked: powers of two 512..8192 (as the anchors) plus odd shapes
//! (non-multiple-of-tile M/N, skinny M, short K).

use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::DType;

/// Square sizes of a full run.
pub const SQUARES: [u32; 5] = [512, 1024, 2048, 4096, 8192];
/// Square sizes of `--quick`.
pub const QUICK_SQUARES: [u32; 2] = [1024, 4096];
/// Odd `(m, n, k)` shapes of a full run: issue 4's (M = 64..256 with N = K = 8192 sampled at
/// 64, 128, 160, 192 and 256: 160 and 192 leave a partial row of tiles for most tile heights).
pub const ODD: [(u32, u32, u32); 7] = [
    (4000, 4000, 4096),
    (64, 8192, 8192),
    (128, 8192, 8192),
    (160, 8192, 8192),
    (192, 8192, 8192),
    (256, 8192, 8192),
    (4096, 4096, 1000),
];
/// Odd shapes of `--quick`.
pub const QUICK_ODD: [(u32, u32, u32); 3] =
    [(4000, 4000, 4096), (128, 8192, 8192), (4096, 4096, 1000)];
/// Input dtypes, in report order.
pub const DTYPES: [DType; 4] = [DType::F32, DType::Tf32, DType::F16, DType::Bf16];

/// `MxNxK`.
pub fn shape_name(p: &GemmProblem) -> String {
    format!("{}x{}x{}", p.m, p.n, p.k)
}

/// Every problem of a run (row-major NN, packed, plain epilogue), dtype-major.
pub fn problems(quick: bool) -> Vec<GemmProblem> {
    let (sq, odd): (&[u32], &[(u32, u32, u32)]) = if quick {
        (&QUICK_SQUARES, &QUICK_ODD)
    } else {
        (&SQUARES, &ODD)
    };
    let mut v = Vec::new();
    for d in DTYPES {
        v.extend(sq.iter().map(|&s| GemmProblem::nn(s, s, s, d)));
        v.extend(odd.iter().map(|&(m, n, k)| GemmProblem::nn(m, n, k, d)));
    }
    v
}

/// A selection of the suite's problems (`rtx-bench --gemm-dtypes / --gemm-shapes`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GemmFilter {
    /// Keep only these input dtypes (`None`: all of [`DTYPES`]).
    pub dtypes: Option<Vec<DType>>,
    /// Keep only these `(m, n, k)` shapes, adding those the run's list lacks (`None`: the list).
    pub shapes: Option<Vec<(u32, u32, u32)>>,
}

impl GemmFilter {
    /// The problems of `all` this filter keeps, in their order, then the extra shapes it names
    /// (NN, packed, plain epilogue, dtype-major).
    pub fn apply(&self, all: Vec<GemmProblem>) -> Vec<GemmProblem> {
        let dtype_ok = |d: DType| self.dtypes.as_ref().is_none_or(|v| v.contains(&d));
        let Some(shapes) = &self.shapes else {
            return all.into_iter().filter(|p| dtype_ok(p.dtype)).collect();
        };
        let mut v = Vec::new();
        for d in DTYPES.into_iter().filter(|&d| dtype_ok(d)) {
            for &(m, n, k) in shapes {
                let listed = all
                    .iter()
                    .find(|p| p.dtype == d && (p.m, p.n, p.k) == (m, n, k));
                v.push(
                    listed
                        .cloned()
                        .unwrap_or_else(|| GemmProblem::nn(m, n, k, d)),
                );
            }
        }
        v
    }
}

/// Minimum bytes one run moves: A and B read once, C written once.
pub fn min_bytes(p: &GemmProblem) -> f64 {
    let (a, b, c) = p.buffer_elems();
    (a + b) as f64 * p.dtype.size_bytes() as f64
        + c as f64 * p.epilogue.out_dtype.size_bytes() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_keeps_dtypes_and_shapes() {
        let all = problems(false);
        assert_eq!(GemmFilter::default().apply(all.clone()), all);
        let f = GemmFilter {
            dtypes: Some(vec![DType::Bf16]),
            shapes: None,
        };
        let kept = f.apply(all.clone());
        assert_eq!(kept.len(), SQUARES.len() + ODD.len());
        assert!(kept.iter().all(|p| p.dtype == DType::Bf16));
        let f = GemmFilter {
            dtypes: Some(vec![DType::F16, DType::Bf16]),
            shapes: Some(vec![(512, 512, 512), (96, 4096, 4096)]),
        };
        let kept = f.apply(all);
        let got: Vec<_> = kept.iter().map(|p| (p.dtype, p.m, p.n, p.k)).collect();
        assert_eq!(
            got,
            vec![
                (DType::F16, 512, 512, 512),
                (DType::F16, 96, 4096, 4096),
                (DType::Bf16, 512, 512, 512),
                (DType::Bf16, 96, 4096, 4096)
            ]
        );
    }

    #[test]
    fn full_and_quick_sets() {
        let full = problems(false);
        assert_eq!(full.len(), 4 * (5 + 7));
        assert!(full.iter().all(|p| p.validate().is_ok()));
        for m in [64, 128, 160, 192, 256] {
            assert!(
                full.iter().any(|p| (p.m, p.n, p.k) == (m, 8192, 8192)),
                "{m}"
            );
        }
        assert!(full.iter().any(|p| p.k == 1000));
        assert_eq!(problems(true).len(), 4 * (2 + 3));
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        assert_eq!(shape_name(&p), "4096x4096x4096");
        assert_eq!(min_bytes(&p), 3.0 * 4096.0 * 4096.0 * 2.0);
        let t = GemmProblem::nn(8, 8, 8, DType::Tf32);
        assert_eq!(min_bytes(&t), 3.0 * 64.0 * 4.0);
    }
}
