//! Attention suite: rtx's fused attention template (FlashAttention-2-style forward on
//! `mma.sync`) at its default config, against PyTorch SDPA (anchors).
//!
//! Each case draws fresh random Q, K, V (uniform in [-1, 1)), poisons O, runs the kernel once
//! and checks sampled rows of sampled heads against the template crate's f64 reference
//! (`|got - want| <= 2e-2 * max(|want|, rms(row))`); a wrong case is a failed row and is never
//! timed. Then it is timed like the memory suite (events, L2 flushed before every sample,
//! median + spread). FLOPs are counted as the anchors count them (`4 * B * H * S^2 * D`, halved
//! when causal). On a GPU whose architecture has no template (before sm_80), every case is
//! `not available`.

use super::memory::CaseError;
use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::attn_key;
use crate::gpu::Gpu;
use crate::report::{Case, Clock, Verified};
use crate::suite_id::SuiteId;
use crate::suites::gemm::host_matrix::HostMatrix;
use crate::timing::{Timer, TimingConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtx_runtime::RuntimeError;
use rtx_synthesis::templates::attention::{
    attention_row_f64, AttentionBuffers, AttentionInputs, AttentionKernel, AttentionLaunchError,
    AttentionProblem, AttentionTemplate,
};
use rtx_synthesis::templates::elementwise::{DeviceSlice, DeviceSliceMut, LaunchError};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

/// Why no case can be measured on this GPU.
pub const NOT_AVAILABLE: &str = "no attention template for this GPU (needs sm_80+ mma.sync)";

/// `(batch, heads, seq, head_dim)` shapes, matching the anchors script.
pub const SHAPES: [(u32, u32, u32, u32); 3] =
    [(8, 12, 512, 64), (4, 16, 2048, 128), (2, 16, 8192, 128)];

/// Heads checked per case (the first, the last and random ones).
pub const SAMPLE_HEADS: usize = 4;
/// Query rows checked per sampled head (the first, the last and random ones).
pub const SAMPLE_ROWS: usize = 24;

/// FLOPs of attention (`4 * B * H * S^2 * D`, halved when causal), as the anchors count them.
pub fn attention_flops(b: u32, h: u32, s: u32, d: u32, causal: bool) -> f64 {
    let f = 4.0 * b as f64 * h as f64 * (s as f64).powi(2) * d as f64;
    if causal {
        f / 2.0
    } else {
        f
    }
}

/// One planned case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttnCase {
    /// Storage dtype.
    pub dtype: DType,
    /// Batch.
    pub batch: u32,
    /// Heads.
    pub heads: u32,
    /// Sequence length (queries and keys).
    pub seq: u32,
    /// Head dimension.
    pub head_dim: u32,
    /// Causal mask.
    pub causal: bool,
}

impl AttnCase {
    /// Shape in words, e.g. `B4 H16 S2048 D128 causal`.
    pub fn shape(&self) -> String {
        format!(
            "B{} H{} S{} D{}{}",
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            if self.causal { " causal" } else { "" }
        )
    }

    /// Case name: `rtx <dtype> <shape>`.
    pub fn name(&self) -> String {
        format!("rtx {} {}", self.dtype, self.shape())
    }

    /// The template problem (scale `1 / sqrt(head_dim)`, as SDPA's default).
    pub fn problem(&self) -> AttentionProblem {
        AttentionProblem::new(
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            self.causal,
            self.dtype,
        )
    }

    /// A row carrying the case's work and anchor key (status set by the caller).
    fn decorate(&self, mut c: Case) -> Case {
        c = c.with_dtype(self.dtype.name());
        c.anchor = attn_key(
            self.dtype,
            self.batch,
            self.heads,
            self.seq,
            self.head_dim,
            self.causal,
        );
        c
    }
}

/// Every case: f16 and bf16, the anchor shapes, causal and not.
pub fn plan() -> Vec<AttnCase> {
    let mut v = Vec::new();
    for dtype in [DType::F16, DType::Bf16] {
        for (batch, heads, seq, head_dim) in SHAPES {
            for causal in [false, true] {
                v.push(AttnCase {
                    dtype,
                    batch,
                    heads,
                    seq,
                    head_dim,
                    causal,
                });
            }
        }
    }
    v
}

impl From<AttentionLaunchError> for CaseError {
    fn from(e: AttentionLaunchError) -> Self {
        CaseError {
            sticky: e.is_sticky(),
            message: e.to_string(),
        }
    }
}

fn runtime(e: AttentionLaunchError) -> RuntimeError {
    match e {
        AttentionLaunchError::Launch(LaunchError::Runtime(r)) => r,
        other => RuntimeError::InvalidLaunch {
            reason: other.to_string(),
        },
    }
}

/// `max |got - want| / max(|want|, rms(want))` over one row (`inf` for a non-finite result).
pub fn row_error(got: &[f64], want: &[f64]) -> f64 {
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len().max(1) as f64)
        .sqrt()
        .max(1e-6);
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g.is_finite() {
                (g - w).abs() / w.abs().max(rms)
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

/// Checks sampled rows of sampled heads of `o` against the f64 reference; returns the record
/// and, when not ok, the first bad row in words.
pub fn verify(
    p: &AttentionProblem,
    q: &HostMatrix,
    k: &HostMatrix,
    v: &HostMatrix,
    o: &HostMatrix,
    rng: &mut SmallRng,
) -> (Verified, Option<String>) {
    let tol = p.dtype.rel_tolerance();
    let d = p.head_dim as usize;
    let (sq, sk) = (p.seq_q as usize, p.seq_k as usize);
    let heads = (p.batch * p.heads) as usize;
    let mut hs = vec![0, heads - 1];
    while hs.len() < SAMPLE_HEADS.min(heads) {
        hs.push(rng.random_range(0..heads));
    }
    let one = AttentionProblem {
        batch: 1,
        heads: 1,
        ..*p
    };
    let mut worst = 0.0f64;
    for hh in hs {
        let take = |m: &HostMatrix, rows: usize| -> Vec<f64> {
            (hh * rows * d..(hh + 1) * rows * d)
                .map(|i| m.get(i))
                .collect()
        };
        let (qh, kh, vh) = (take(q, sq), take(k, sk), take(v, sk));
        let inp = AttentionInputs {
            q: &qh,
            k: &kh,
            v: &vh,
        };
        let mut rows = vec![0, sq - 1];
        while rows.len() < SAMPLE_ROWS.min(sq) {
            rows.push(rng.random_range(0..sq));
        }
        for i in rows {
            let want = match attention_row_f64(&one, &inp, 0, 0, i as u32) {
                Ok(w) => w,
                Err(e) => return (Verified::new(f64::INFINITY, tol), Some(e.to_string())),
            };
            let base = (hh * sq + i) * d;
            let got: Vec<f64> = (base..base + d).map(|x| o.get(x)).collect();
            let e = row_error(&got, &want);
            worst = worst.max(e);
            if e.is_nan() || e > tol {
                let (b, h) = (hh / p.heads as usize, hh % p.heads as usize);
                return (
                    Verified::new(e, tol),
                    Some(format!(
                        "row (b {b}, h {h}, i {i}): error {e:.3e}; got {:?}.. want {:?}..",
                        &got[..3],
                        &want[..3]
                    )),
                );
            }
        }
    }
    (Verified::new(worst, tol), None)
}

/// Builds, verifies and times one case (one row in the report).
pub fn run(
    gpu: &Gpu,
    timer: &mut Timer<'_>,
    timing: &TimingConfig,
    ac: &AttnCase,
) -> Result<Case, CaseError> {
    let (name, shape) = (ac.name(), ac.shape());
    let p = ac.problem();
    let t = AttentionTemplate;
    let config = t.default_config(&p, gpu.arch);
    t.check(&p, &config, gpu.arch)
        .map_err(|e| CaseError::msg(format!("default config: {e}")))?;
    let kernel = AttentionKernel::build(&gpu.device, &p, &config)?;
    let nq = p.q_elems().unwrap_or(0) as usize;
    let nk = p.kv_elems().unwrap_or(0) as usize;
    let mut rng = SmallRng::seed_from_u64(
        crate::env_info::now_unix() ^ (nq as u64).rotate_left(17) ^ ac.causal as u64,
    );
    let (hq, hk, hv) = (
        HostMatrix::random(p.dtype, nq, &mut rng),
        HostMatrix::random(p.dtype, nk, &mut rng),
        HostMatrix::random(p.dtype, nk, &mut rng),
    );
    let upload = |h: &HostMatrix| -> Result<rtx_runtime::DeviceBuffer, RuntimeError> {
        let mut b = gpu.device.alloc(h.bytes(), &gpu.stream)?;
        h.upload(&mut b, &gpu.stream)?;
        Ok(b)
    };
    let (qb, kb, vb) = (upload(&hq)?, upload(&hk)?, upload(&hv)?);
    let mut ob = gpu.device.alloc(hq.bytes(), &gpu.stream)?;
    ob.fill_u8(0xFF, &gpu.stream)?;
    let launch = |st: &rtx_runtime::Stream, ob: &mut rtx_runtime::DeviceBuffer| {
        let bufs = AttentionBuffers {
            q: DeviceSlice::whole(&qb),
            k: DeviceSlice::whole(&kb),
            v: DeviceSlice::whole(&vb),
            o: DeviceSliceMut::whole(ob),
        };
        kernel.launch(st, bufs)
    };
    launch(&gpu.stream, &mut ob)?;
    gpu.stream.synchronize()?;
    let ho = HostMatrix::download(p.dtype, &ob, &gpu.stream)?;
    let (verified, bad) = verify(&p, &hq, &hk, &hv, &ho, &mut rng);
    if let Some(bad) = bad {
        let mut c = ac.decorate(Case::failed(
            SuiteId::Attention,
            name,
            shape,
            Clock::Gpu,
            format!("wrong result at {bad}; bound {:.1e}", verified.bound),
        ));
        c.verified = Some(verified);
        return Ok(c);
    }
    let s = timer.time(timing, |st, _| launch(st, &mut ob).map_err(runtime))?;
    let flops = attention_flops(ac.batch, ac.heads, ac.seq, ac.head_dim, ac.causal);
    let mut c = ac
        .decorate(Case::measured(
            SuiteId::Attention,
            name,
            shape,
            Clock::Gpu,
            &s,
        ))
        .with_work(Some(flops), Some(p.bytes_moved() as f64))
        .with_note(format!(
            "{} v{} default config {:?} on {}; checked {} rows x {} heads vs f64",
            t.name(),
            t.version(),
            config,
            gpu.arch,
            SAMPLE_ROWS,
            SAMPLE_HEADS
        ));
    c.verified = Some(verified);
    Ok(c)
}

fn not_available(ac: &AttnCase, reason: &str) -> Case {
    let mut c = ac.decorate(Case::not_available(
        SuiteId::Attention,
        ac.name(),
        ac.shape(),
        reason,
    ));
    c.flops = Some(attention_flops(
        ac.batch,
        ac.heads,
        ac.seq,
        ac.head_dim,
        ac.causal,
    ));
    c
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
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let cases = plan();
        let gpu = match ctx.gpu {
            Some(g) if has_template(g.arch) => g,
            _ => {
                return Ok(cases
                    .iter()
                    .map(|ac| not_available(ac, NOT_AVAILABLE))
                    .collect())
            }
        };
        let mut out = Vec::new();
        let fail = |reason: String, partial: Vec<Case>| SuiteError {
            suite: SuiteId::Attention,
            reason,
            partial,
        };
        let mut timer = Timer::new(gpu).map_err(|e| fail(format!("timer: {e}"), Vec::new()))?;
        let bar = ctx.progress("attention", cases.len() as u64);
        for ac in &cases {
            let what = ac.name();
            bar.running(&what);
            let r = run(gpu, &mut timer, &ctx.timing, ac);
            bar.done(&what);
            match r {
                Ok(c) => out.push(c),
                Err(e) if e.sticky => {
                    bar.finish();
                    return Err(fail(format!("{what}: {}", e.message), out));
                }
                Err(e) => out.push(ac.decorate(Case::failed(
                    SuiteId::Attention,
                    what,
                    ac.shape(),
                    Clock::Gpu,
                    e.message,
                ))),
            }
            ctx.save_partial(&out);
        }
        bar.finish();
        Ok(out)
    }
}

/// Whether rtx has an attention kernel for `arch`.
pub fn has_template(arch: Arch) -> bool {
    arch.has_mma_sync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_the_anchor_keys() {
        let p = plan();
        assert_eq!(p.len(), 12);
        let keys: Vec<String> = p
            .iter()
            .filter_map(|c| {
                c.decorate(Case::not_available(SuiteId::Attention, "x", "-", "r"))
                    .anchor
            })
            .collect();
        assert_eq!(keys.len(), 12);
        assert!(keys.contains(&"attn sdpa bfloat16 B4 H16 S2048 D128 causal".to_string()));
        assert!(p.iter().all(|c| c.problem().validate().is_ok()));
        assert!(
            !has_template(Arch::Sm75) && has_template(Arch::Sm90a) && has_template(Arch::Sm120)
        );
        let na = not_available(&p[0], NOT_AVAILABLE);
        assert_eq!(na.flops, Some(attention_flops(8, 12, 512, 64, false)));
    }

    #[test]
    fn verify_accepts_the_reference_and_rejects_a_wrong_row() {
        let mut rng = SmallRng::seed_from_u64(5);
        let p = AttentionProblem::new(1, 2, 30, 64, true, DType::F32);
        let p = AttentionProblem {
            dtype: DType::Bf16,
            ..p
        };
        let n = p.q_elems().unwrap() as usize;
        let (q, k, v) = (
            HostMatrix::random(DType::F32, n, &mut rng),
            HostMatrix::random(DType::F32, n, &mut rng),
            HostMatrix::random(DType::F32, n, &mut rng),
        );
        let all = |m: &HostMatrix| (0..n).map(|i| m.get(i)).collect::<Vec<f64>>();
        let (qa, ka, va) = (all(&q), all(&k), all(&v));
        let want = rtx_synthesis::templates::attention::attention_f64(
            &p,
            &AttentionInputs {
                q: &qa,
                k: &ka,
                v: &va,
            },
        )
        .unwrap();
        let mut o: Vec<f32> = want.iter().map(|&x| x as f32).collect();
        let (ver, bad) = verify(&p, &q, &k, &v, &HostMatrix::F32(o.clone()), &mut rng);
        assert!(ver.ok && bad.is_none(), "{ver:?} {bad:?}");
        // Row 0 of head 0 (always sampled) is V[0]; break it.
        o[3] += 0.5;
        let (ver, bad) = verify(&p, &q, &k, &v, &HostMatrix::F32(o), &mut rng);
        assert!(!ver.ok && bad.unwrap().contains("i 0"));
    }
}
