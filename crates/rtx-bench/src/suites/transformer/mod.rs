//! Transformer suite: one post-norm encoder layer (B8 S512 d768 h12 ffn3072, bf16, ReLU, as
//! PyTorch's `TransformerEncoderLayer`) built from rtx's kernels, against the eager PyTorch layer
//! (anchor) and against our own unfused, untuned plan measured in the same run (the honest
//! "step-time reduction").
//!
//! Both plans are verified on sampled output rows of the first and last sequence against the
//! f64 reference ([`mod@reference`]) before they are timed; a plan that fails is a failed row.
//!
//! Before timing, the fused plan's four GEMMs are tuned in-process when the tuning database has
//! no exact entry for them and the run is not `--quick`: `RTX_LAYER_TUNE_S` seconds each
//! (default 20; `0` turns it off). The row's note says which configs were served.

pub mod layer;
pub mod reference;

use super::{Suite, SuiteContext, SuiteError};
use crate::anchors::layer_key;
use crate::gpu::Gpu;
use crate::report::{Case, Clock, Verified};
use crate::suite_id::SuiteId;
use crate::timing::Timer;
use layer::{AttentionStep, FusedLayer, LayerState, UnfusedLayer};
use reference::{reference_rows, EncoderShape};
use rtx_runtime::RuntimeError;
use rtx_synthesis::aot::KernelCache;
use rtx_synthesis::synth::{GemmSpec, Synth, TuneRequest};
use rtx_synthesis::templates::attention::{
    AttentionBuffers, AttentionKernel, AttentionLayout, AttentionProblem, AttentionTemplate,
};
use rtx_synthesis::templates::gemm::{Activation, Epilogue, Layout};
use rtx_synthesis::templates::Template;
use rtx_synthesis::tuner::{LookupSource, TuningDb};
use rtx_synthesis::DType;
use std::time::Duration;

/// Relative-error bound of a bf16 layer (bf16 storage between the stages).
pub const LAYER_BOUND: f64 = 2e-2;

/// Sequences' positions whose output rows are checked: the first and last sequence.
fn sampled_rows(shape: &EncoderShape) -> Vec<(u32, u32)> {
    let last = shape.batch - 1;
    let s = shape.seq;
    [0, 1, s / 3, s / 2, s - 1]
        .iter()
        .flat_map(|&p| [(0, p), (last, p)])
        .collect()
}

/// The layer's attention: the attention template at its default config, reading Q, K and V in
/// place from the packed `[tokens, 3d]` projection and writing `[tokens, d]`.
struct PackedAttention {
    kernel: AttentionKernel,
    problem: AttentionProblem,
}

impl AttentionStep for PackedAttention {
    fn describe(&self) -> String {
        let c = self.kernel.config();
        format!(
            "attention bm{} bn{} w{} s{}, qkv read in place",
            c.block_m, c.block_n, c.warps, c.stages
        )
    }

    fn launch(
        &self,
        stream: &rtx_runtime::Stream,
        qkv: &rtx_runtime::DeviceBuffer,
        o: &mut rtx_runtime::DeviceBuffer,
    ) -> Result<(), String> {
        let p = &self.problem;
        let bufs = AttentionBuffers::packed_qkv(p, qkv, o);
        self.kernel
            .launch_strided(stream, bufs, p, &AttentionLayout::packed_qkv(p))
            .map_err(|e| format!("attention: {e}"))
    }
}

/// The attention kernel the layer uses on this GPU, or why there is none.
fn attention_step(gpu: &Gpu, shape: &EncoderShape) -> Result<Box<dyn AttentionStep>, String> {
    let problem = AttentionProblem::new(
        shape.batch,
        shape.heads,
        shape.seq,
        shape.head_dim(),
        false,
        DType::Bf16,
    );
    let t = AttentionTemplate;
    let config = t.default_config(&problem, gpu.arch);
    t.check(&problem, &config, gpu.arch)
        .map_err(|e| format!("no attention kernel for this GPU: {e}"))?;
    let kernel = AttentionKernel::build(&gpu.device, &problem, &config)
        .map_err(|e| format!("attention: {e}"))?;
    Ok(Box::new(PackedAttention { kernel, problem }))
}

/// The fused plan's GEMM specs (for tuning).
fn fused_specs(shape: &EncoderShape) -> Vec<GemmSpec> {
    let (t, d, f) = (shape.tokens(), shape.d_model, shape.ffn);
    let ep = |bias, activation, residual| Epilogue {
        bias,
        activation,
        residual,
        ..Epilogue::plain(DType::Bf16)
    };
    [
        (3 * d, d, ep(true, Activation::None, false)),
        (d, d, ep(true, Activation::None, true)),
        (f, d, ep(true, Activation::Relu, false)),
        (d, f, ep(true, Activation::None, true)),
    ]
    .into_iter()
    .map(|(n, k, e)| {
        let mut s = GemmSpec::new(t, n, k, DType::Bf16).with_layouts(Layout::Row, Layout::Col);
        s.epilogue = e;
        s
    })
    .collect()
}

/// Seconds of tuning per GEMM (`RTX_LAYER_TUNE_S`, default 20).
fn tune_seconds() -> u64 {
    std::env::var("RTX_LAYER_TUNE_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Tunes every fused-plan GEMM that has no exact database entry; returns what was done.
fn tune_missing(synth: &Synth, shape: &EncoderShape, secs: u64) -> Vec<String> {
    let mut done = Vec::new();
    for spec in fused_specs(shape) {
        let exact = synth
            .gemm(&spec)
            .map(|k| matches!(k.source(), LookupSource::Exact))
            .unwrap_or(false);
        if exact {
            continue;
        }
        let req = TuneRequest {
            time_budget: Duration::from_secs(secs),
            ..Default::default()
        };
        match synth.tune_gemm(&spec, &req) {
            Ok(_) => done.push(format!("tuned {}x{}x{}", spec.m, spec.n, spec.k)),
            Err(e) => {
                tracing::warn!(target: "rtx_bench", "layer gemm {}x{}x{}: tuning failed: {e}", spec.m, spec.n, spec.k);
                done.push(format!(
                    "tuning {}x{}x{} failed: {e}",
                    spec.m, spec.n, spec.k
                ));
            }
        }
    }
    done
}

/// A synthesizer over an empty tuning database: every GEMM at its template's default config.
fn untuned_synth(gpu: &Gpu) -> Result<(Synth, std::path::PathBuf), String> {
    let path = std::env::temp_dir().join(format!("rtx-bench-untuned-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cache = KernelCache::open_default().map_err(|e| e.to_string())?;
    let db = TuningDb::open(&path).map_err(|e| e.to_string())?;
    Ok((
        Synth::with_stores(&gpu.device, cache, db).map_err(|e| e.to_string())?,
        path,
    ))
}

/// The transformer suite.
pub struct TransformerSuite;

struct Measured {
    median_us: f64,
    case: Case,
}

fn run_plan(
    name: &str,
    ctx: &SuiteContext<'_>,
    gpu: &Gpu,
    st: &mut LayerState,
    want: &[Vec<f64>],
    rows: &[(u32, u32)],
    forward: &dyn Fn(&mut LayerState, &rtx_runtime::Stream) -> Result<(), String>,
) -> Result<Measured, Case> {
    let shape = st.shape;
    let fail = |e: String| {
        Case::failed(SuiteId::Transformer, name, shape.describe(), Clock::Gpu, e).with_dtype("bf16")
    };
    let s = &gpu.stream;
    st.poison(s).map_err(fail)?;
    forward(st, s).map_err(fail)?;
    let err = layer::sampled_error(st, s, rows, want).map_err(fail)?;
    let verified = Verified::new(err, LAYER_BOUND);
    if !verified.ok {
        let mut c = fail(format!(
            "wrong result: relative error {err:e} over {} sampled rows exceeds {LAYER_BOUND:e}",
            rows.len()
        ));
        c.verified = Some(verified);
        return Err(c);
    }
    let mut timer = Timer::new(gpu).map_err(|e| fail(e.to_string()))?;
    let mut failure = None;
    let summary = timer.time(&ctx.timing, |stream, _| {
        forward(st, stream).map_err(|e| {
            failure = Some(e.clone());
            RuntimeError::InvalidLaunch { reason: e }
        })
    });
    let summary = match (summary, failure) {
        (Ok(s), None) => s,
        (_, Some(e)) => return Err(fail(e)),
        (Err(e), None) => return Err(fail(e.to_string())),
    };
    let mut case = Case::measured(
        SuiteId::Transformer,
        name,
        shape.describe(),
        Clock::Gpu,
        &summary,
    )
    .with_dtype("bf16")
    .with_work(Some(shape.flops()), None);
    case.verified = Some(verified);
    Ok(Measured {
        median_us: summary.median_us,
        case,
    })
}

impl TransformerSuite {
    fn layer_cases(&self, ctx: &SuiteContext<'_>, gpu: &Gpu, shape: EncoderShape) -> Vec<Case> {
        let key = layer_key(
            shape.batch,
            shape.seq,
            shape.d_model,
            shape.heads,
            shape.ffn,
        );
        let fused_name = format!("rtx encoder {} bf16 fused", shape.describe());
        let unfused_name = format!("rtx encoder {} bf16 unfused untuned", shape.describe());
        let na = |name: &str, why: String| {
            let mut c = Case::not_available(SuiteId::Transformer, name, shape.describe(), why)
                .with_dtype("bf16");
            c.anchor = Some(key.clone());
            c
        };
        let attn = match attention_step(gpu, &shape) {
            Ok(a) => a,
            Err(why) => return vec![na(&fused_name, why.clone()), na(&unfused_name, why)],
        };
        let prepared = (|| -> Result<_, String> {
            let synth = Synth::new(&gpu.device).map_err(|e| e.to_string())?;
            let secs = tune_seconds();
            let tuned = if !ctx.quick && secs > 0 {
                tune_missing(&synth, &shape, secs)
            } else {
                Vec::new()
            };
            let fused = FusedLayer::build(&synth, &shape)?;
            let (untuned, db_path) = untuned_synth(gpu)?;
            let unfused = UnfusedLayer::build(&untuned, &shape);
            let _ = std::fs::remove_file(db_path);
            let st = LayerState::new(&synth, &gpu.stream, shape, 0x1a7e5)?;
            Ok((fused, unfused?, st, tuned))
        })();
        let (fused, unfused, mut st, tuned) = match prepared {
            Ok(p) => p,
            Err(e) => {
                let f = |n: &str| {
                    Case::failed(
                        SuiteId::Transformer,
                        n,
                        shape.describe(),
                        Clock::Gpu,
                        e.clone(),
                    )
                    .with_dtype("bf16")
                };
                return vec![f(&fused_name), f(&unfused_name)];
            }
        };
        let rows = sampled_rows(&shape);
        let want = reference_rows(&shape, &st.host, &st.host_x, &rows);
        let un = run_plan(&unfused_name, ctx, gpu, &mut st, &want, &rows, &|st, s| {
            unfused.forward(st, attn.as_ref(), s)
        });
        let un_median = un.as_ref().ok().map(|m| m.median_us);
        let un_case = match un {
            Ok(m) => {
                let mut c = m.case;
                c.anchor = Some(key.clone());
                c.note = Some(format!(
                    "14 launches: plain GEMMs at default configs, bias / ReLU / residual as separate elementwise kernels, attention [{}], 2 LayerNorms",
                    attn.describe()
                ));
                c
            }
            Err(c) => c,
        };
        // A fault in the fused plan that takes the process down keeps the unfused figure.
        ctx.save_partial(std::slice::from_ref(&un_case));
        let fu = run_plan(&fused_name, ctx, gpu, &mut st, &want, &rows, &|st, s| {
            fused.forward(st, attn.as_ref(), s)
        });
        let fu_case = match fu {
            Ok(m) => {
                let mut c = m.case;
                c.anchor = Some(key);
                if let Some(u) = un_median {
                    c.baselines.untuned = c.measured_baseline(u);
                }
                let reduction = un_median.map(|u| {
                    format!(
                        "; step-time reduction vs our unfused untuned plan {:.1}%",
                        100.0 * (1.0 - m.median_us / u)
                    )
                });
                c.note = Some(format!(
                    "7 launches: GEMMs [{}], attention [{}], 2 LayerNorms{}{}",
                    fused.describe(),
                    attn.describe(),
                    reduction.unwrap_or_default(),
                    if tuned.is_empty() {
                        String::new()
                    } else {
                        format!("; this run {}", tuned.join(", "))
                    }
                ));
                c
            }
            Err(c) => c,
        };
        vec![fu_case, un_case]
    }
}

impl Suite for TransformerSuite {
    fn id(&self) -> SuiteId {
        SuiteId::Transformer
    }
    fn needs_gpu(&self) -> bool {
        true
    }
    fn run(&self, ctx: &SuiteContext<'_>) -> Result<Vec<Case>, SuiteError> {
        let Some(gpu) = ctx.gpu else {
            return Ok(Vec::new());
        };
        Ok(self.layer_cases(ctx, gpu, EncoderShape::ANCHOR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_rows_cover_both_ends() {
        let rows = sampled_rows(&EncoderShape::ANCHOR);
        assert!(rows.contains(&(0, 0)) && rows.contains(&(7, 511)));
        assert!(rows.iter().all(|&(b, s)| b < 8 && s < 512));
    }

    #[test]
    fn fused_specs_are_nt_projections_with_their_epilogues() {
        let specs = fused_specs(&EncoderShape::ANCHOR);
        let dims: Vec<(u32, u32, u32)> = specs.iter().map(|s| (s.m, s.n, s.k)).collect();
        assert_eq!(
            dims,
            vec![
                (4096, 2304, 768),
                (4096, 768, 768),
                (4096, 3072, 768),
                (4096, 768, 3072)
            ]
        );
        assert!(specs
            .iter()
            .all(|s| s.layout_b == Layout::Col && s.epilogue.bias));
        assert_eq!(specs[2].epilogue.activation, Activation::Relu);
        assert!(
            specs[1].epilogue.residual && specs[3].epilogue.residual && !specs[0].epilogue.residual
        );
    }
}
