//! Sampled f64 verification of a GEMM output: a random subset of output elements (about
//! [`SAMPLE_POINTS`]) is recomputed on the CPU in f64 from the inputs as the GPU saw them, and
//! compared with `rel_error` against the dtype's bound (`DType::rel_tolerance`).

use super::host_matrix::HostMatrix;
use crate::report::Verified;
use rand::rngs::SmallRng;
use rand::Rng;
use rtx_synthesis::templates::gemm::reference::rel_error;
use rtx_synthesis::templates::gemm::{GemmProblem, Layout};

/// Output elements checked per case (all of them when C is smaller).
pub const SAMPLE_POINTS: usize = 1024;

/// `(batch, row, col)` output positions to check: every one when there are at most `count`,
/// else `count` random ones plus the four corners of the first and last batch entries.
pub fn sample_points(p: &GemmProblem, count: usize, rng: &mut SmallRng) -> Vec<(u32, u32, u32)> {
    let total = p.batch as u64 * p.m as u64 * p.n as u64;
    if total <= count as u64 {
        let mut v = Vec::with_capacity(total as usize);
        for b in 0..p.batch {
            for i in 0..p.m {
                for j in 0..p.n {
                    v.push((b, i, j));
                }
            }
        }
        return v;
    }
    let mut v = Vec::with_capacity(count + 8);
    for b in [0, p.batch - 1] {
        for (i, j) in [(0, 0), (0, p.n - 1), (p.m - 1, 0), (p.m - 1, p.n - 1)] {
            v.push((b, i, j));
        }
    }
    while v.len() < count + 8 {
        v.push((
            rng.random_range(0..p.batch),
            rng.random_range(0..p.m),
            rng.random_range(0..p.n),
        ));
    }
    v
}

/// The f64 reference of output `(b, i, j)` for a plain epilogue (`alpha * A B`, beta = 0).
pub fn reference_at(
    p: &GemmProblem,
    a: &HostMatrix,
    b: &HostMatrix,
    bt: u32,
    i: u32,
    j: u32,
) -> f64 {
    let (a0, b0) = (
        bt as usize * p.stride_a as usize,
        bt as usize * p.stride_b as usize,
    );
    let (i, j) = (i as usize, j as usize);
    let mut acc = 0.0;
    for l in 0..p.k as usize {
        let av = match p.layout_a {
            Layout::Row => a.get(a0 + i * p.lda as usize + l),
            Layout::Col => a.get(a0 + l * p.lda as usize + i),
        };
        let bv = match p.layout_b {
            Layout::Row => b.get(b0 + l * p.ldb as usize + j),
            Layout::Col => b.get(b0 + j * p.ldb as usize + l),
        };
        acc += av * bv;
    }
    p.epilogue.alpha as f64 * acc
}

/// Checks `c` (as downloaded) at `points` against the reference.
pub fn check(
    p: &GemmProblem,
    a: &HostMatrix,
    b: &HostMatrix,
    c: &HostMatrix,
    points: &[(u32, u32, u32)],
) -> Verified {
    let mut got = Vec::with_capacity(points.len());
    let mut want = Vec::with_capacity(points.len());
    for &(bt, i, j) in points {
        let ci = bt as usize * p.stride_c as usize + i as usize * p.ldc as usize + j as usize;
        got.push(if ci < c.len() { c.get(ci) } else { f64::NAN });
        want.push(reference_at(p, a, b, bt, i, j));
    }
    Verified::new(rel_error(&got, &want), p.dtype.rel_tolerance())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rtx_synthesis::templates::gemm::reference::{gemm_f64, GemmRefInputs};
    use rtx_synthesis::DType;

    fn widen(m: &HostMatrix) -> Vec<f64> {
        (0..m.len()).map(|i| m.get(i)).collect()
    }

    #[test]
    fn sampled_reference_matches_the_full_reference() {
        let mut rng = SmallRng::seed_from_u64(1);
        for (la, lb) in [
            (Layout::Row, Layout::Row),
            (Layout::Row, Layout::Col),
            (Layout::Col, Layout::Row),
        ] {
            let p = GemmProblem::new(37, 29, 41, DType::Bf16, la, lb).batched(2);
            let (ae, be, _) = p.buffer_elems();
            let a = HostMatrix::random(DType::Bf16, ae as usize, &mut rng);
            let b = HostMatrix::random(DType::Bf16, be as usize, &mut rng);
            let full = gemm_f64(
                &p,
                &GemmRefInputs {
                    a: &widen(&a),
                    b: &widen(&b),
                    c: None,
                    bias: None,
                    residual: None,
                },
            );
            for (bt, i, j) in sample_points(&p, 50, &mut rng) {
                let ci = (bt as u64 * p.stride_c + i as u64 * p.ldc as u64 + j as u64) as usize;
                assert!((reference_at(&p, &a, &b, bt, i, j) - full[ci]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn check_accepts_rounded_output_and_rejects_garbage() {
        let mut rng = SmallRng::seed_from_u64(2);
        let p = GemmProblem::nn(64, 48, 128, DType::Bf16);
        let (ae, be, _) = p.buffer_elems();
        let a = HostMatrix::random(DType::Bf16, ae as usize, &mut rng);
        let b = HostMatrix::random(DType::Bf16, be as usize, &mut rng);
        let full = gemm_f64(
            &p,
            &GemmRefInputs {
                a: &widen(&a),
                b: &widen(&b),
                c: None,
                bias: None,
                residual: None,
            },
        );
        let rounded = HostMatrix::Bf16(full.iter().map(|&x| half::bf16::from_f64(x)).collect());
        let pts = sample_points(&p, 4096, &mut rng);
        assert_eq!(pts.len(), 64 * 48, "small outputs are checked in full");
        let v = check(&p, &a, &b, &rounded, &pts);
        assert!(v.ok && v.rel_err < 1e-2, "{v:?}");
        let mut wrong = full.clone();
        wrong[100] += 50.0;
        let v = check(
            &p,
            &a,
            &b,
            &HostMatrix::Bf16(wrong.iter().map(|&x| half::bf16::from_f64(x)).collect()),
            &pts,
        );
        assert!(!v.ok, "{v:?}");
        let nan = HostMatrix::Bf16(vec![half::bf16::NAN; full.len()]);
        assert!(!check(&p, &a, &b, &nan, &pts).ok);
    }

    #[test]
    fn large_outputs_are_sampled() {
        let mut rng = SmallRng::seed_from_u64(3);
        let p = GemmProblem::nn(4096, 4096, 16, DType::F32);
        let pts = sample_points(&p, SAMPLE_POINTS, &mut rng);
        assert_eq!(pts.len(), SAMPLE_POINTS + 8);
        assert!(pts.contains(&(0, 4095, 4095)));
        assert!(pts.iter().all(|&(b, i, j)| b == 0 && i < 4096 && j < 4096));
    }
}
