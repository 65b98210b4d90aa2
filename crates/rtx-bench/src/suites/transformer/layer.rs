//! One post-norm encoder layer on the GPU, built from rtx's own kernels, in two plans:
//!
//! - **fused** (what rtx serves): 4 GEMMs with their epilogues fused (in-projection + bias,
//!   out-projection + bias + residual, FFN up + bias + ReLU, FFN down + bias + residual), the
//!   attention kernel, and 2 LayerNorms: 7 launches.
//! - **unfused** (the baseline for "step-time reduction"): the same GEMMs without epilogues, each
//!   bias, activation and residual add as its own elementwise kernel, the same attention and
//!   LayerNorms: 14 launches. Its GEMMs come from a synthesizer over an empty tuning database,
//!   so they run at the templates' default configs.
//!
//! Activations are `[tokens, d]` row-major bf16; linear weights are PyTorch's `[out, in]`, so
//! every projection is an NT GEMM (`x [t, in]` times `W^T`).

use super::reference::{EncoderShape, HostWeights, LN_EPS};
use rtx_runtime::{DeviceBuffer, Stream};
use rtx_synthesis::synth::inputs::HostMatrix;
use rtx_synthesis::synth::{GemmBuffers, GemmKernel, GemmSpec, Synth};
use rtx_synthesis::templates::elementwise::expr::{Broadcast, GraphBuilder, UnaryOp};
use rtx_synthesis::templates::elementwise::{
    DeviceSlice, DeviceSliceMut, ElementwiseKernel, ElementwiseProblem, ElementwiseTemplate,
};
use rtx_synthesis::templates::gemm::{Activation, Epilogue, Layout};
use rtx_synthesis::templates::reduce::{
    RowBuffers, RowProblem, RowReduceKernel, RowReduceTemplate,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::DType;

const DT: DType = DType::Bf16;

/// The attention step of a layer: reads the packed `qkv` (`[tokens, 3d]`: q, k, v side by
/// side, heads `[h, head_dim]` inside each) and writes `o` (`[tokens, d]`, heads side by side).
pub trait AttentionStep {
    /// What runs, in words (template and config).
    fn describe(&self) -> String;
    /// Enqueues one attention on `stream`.
    fn launch(
        &self,
        stream: &Stream,
        qkv: &DeviceBuffer,
        o: &mut DeviceBuffer,
    ) -> Result<(), String>;
}

/// The layer's parameters and activations on the device.
pub struct LayerState {
    /// The shape.
    pub shape: EncoderShape,
    /// Host copy of the parameters (for the reference).
    pub host: HostWeights,
    /// Host copy of the input (for the reference).
    pub host_x: Vec<f32>,
    w: Vec<DeviceBuffer>,
    x: DeviceBuffer,
    qkv: DeviceBuffer,
    o: DeviceBuffer,
    a: DeviceBuffer,
    h1: DeviceBuffer,
    f: DeviceBuffer,
    h2: DeviceBuffer,
    /// The layer's output `[tokens, d]`.
    pub y: DeviceBuffer,
    t1: DeviceBuffer,
    t2: DeviceBuffer,
}

// Indices of `LayerState::w`.
const W_QKV: usize = 0;
const B_QKV: usize = 1;
const W_O: usize = 2;
const B_O: usize = 3;
const LN1_W: usize = 4;
const LN1_B: usize = 5;
const W_1: usize = 6;
const B_1: usize = 7;
const W_2: usize = 8;
const B_2: usize = 9;
const LN2_W: usize = 10;
const LN2_B: usize = 11;

fn upload(synth: &Synth, stream: &Stream, m: &HostMatrix) -> Result<DeviceBuffer, String> {
    let mut b = synth
        .device()
        .alloc(m.bytes().len(), stream)
        .map_err(|e| e.to_string())?;
    b.upload(m.bytes(), stream).map_err(|e| e.to_string())?;
    Ok(b)
}

fn zeros(synth: &Synth, stream: &Stream, elems: usize) -> Result<DeviceBuffer, String> {
    let mut b = synth
        .device()
        .alloc(elems * 2, stream)
        .map_err(|e| e.to_string())?;
    b.fill_u8(0xff, stream).map_err(|e| e.to_string())?; // NaN in bf16: unwritten shows
    Ok(b)
}

impl LayerState {
    /// Random parameters (uniform, scaled by `1/sqrt(fan_in)` like PyTorch's init) and input
    /// from `seed`, uploaded; activations allocated and poisoned.
    pub fn new(
        synth: &Synth,
        stream: &Stream,
        shape: EncoderShape,
        seed: u64,
    ) -> Result<LayerState, String> {
        shape.validate()?;
        let (t, d, f) = (
            shape.tokens() as usize,
            shape.d_model as usize,
            shape.ffn as usize,
        );
        let lin = |k: u64, n: usize, fan_in: usize| {
            HostMatrix::seeded(seed ^ (k << 56), n, DT, 1.0 / (fan_in as f32).sqrt())
        };
        let ln_w = |k: u64| HostMatrix::seeded(seed ^ (k << 56), d, DT, 0.2); // 1 + this below
        let mats = vec![
            lin(1, 3 * d * d, d),
            lin(2, 3 * d, d),
            lin(3, d * d, d),
            lin(4, d, d),
            shift_one(&ln_w(5)),
            lin(6, d, 4 * d),
            lin(7, f * d, d),
            lin(8, f, d),
            lin(9, d * f, f),
            lin(10, d, f),
            shift_one(&ln_w(11)),
            lin(12, d, 4 * d),
        ];
        let x = HostMatrix::seeded(seed ^ (13 << 56), t * d, DT, 1.0);
        let w = mats
            .iter()
            .map(|m| upload(synth, stream, m))
            .collect::<Result<Vec<_>, _>>()?;
        let v = |i: usize| mats[i].to_f32();
        let host = HostWeights {
            w_qkv: v(W_QKV),
            b_qkv: v(B_QKV),
            w_o: v(W_O),
            b_o: v(B_O),
            ln1: (v(LN1_W), v(LN1_B)),
            w_1: v(W_1),
            b_1: v(B_1),
            w_2: v(W_2),
            b_2: v(B_2),
            ln2: (v(LN2_W), v(LN2_B)),
        };
        Ok(LayerState {
            shape,
            host,
            host_x: x.to_f32(),
            w,
            x: upload(synth, stream, &x)?,
            qkv: zeros(synth, stream, t * 3 * d)?,
            o: zeros(synth, stream, t * d)?,
            a: zeros(synth, stream, t * d)?,
            h1: zeros(synth, stream, t * d)?,
            f: zeros(synth, stream, t * f)?,
            h2: zeros(synth, stream, t * d)?,
            y: zeros(synth, stream, t * d)?,
            t1: zeros(synth, stream, t * f.max(3 * d))?,
            t2: zeros(synth, stream, t * f.max(3 * d))?,
        })
    }

    /// Poisons every activation (NaN), so a step that writes nothing fails the check.
    pub fn poison(&mut self, stream: &Stream) -> Result<(), String> {
        for b in [
            &mut self.qkv,
            &mut self.o,
            &mut self.a,
            &mut self.h1,
            &mut self.f,
            &mut self.h2,
            &mut self.y,
        ] {
            b.fill_u8(0xff, stream).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// `1 + m` (LayerNorm weights around one), rounded to bf16.
fn shift_one(m: &HostMatrix) -> HostMatrix {
    let bits = m
        .to_f32()
        .iter()
        .map(|v| half::bf16::from_f32(1.0 + v).to_bits())
        .collect();
    HostMatrix::Half { dtype: DT, bits }
}

/// A projection `[t, in] x W^T ([out, in]) -> [t, out]` with the given epilogue.
fn projection(
    synth: &Synth,
    t: u32,
    out: u32,
    inp: u32,
    ep: Epilogue,
) -> Result<GemmKernel, String> {
    let mut spec = GemmSpec::new(t, out, inp, DT).with_layouts(Layout::Row, Layout::Col);
    spec.epilogue = ep;
    synth
        .gemm(&spec)
        .map_err(|e| format!("gemm {t}x{out}x{inp}: {e}"))
}

fn epilogue(bias: bool, activation: Activation, residual: bool) -> Epilogue {
    Epilogue {
        bias,
        activation,
        residual,
        ..Epilogue::plain(DT)
    }
}

fn layer_norm(synth: &Synth, shape: &EncoderShape) -> Result<RowReduceKernel, String> {
    let p = RowProblem::layernorm(shape.tokens(), shape.d_model, DT, true, true, LN_EPS as f32);
    let c = RowReduceTemplate.default_config(&p, synth.arch());
    RowReduceKernel::build(synth.device(), &p, &c).map_err(|e| format!("layernorm: {e}"))
}

fn ln_launch(
    k: &RowReduceKernel,
    s: &Stream,
    x: &DeviceBuffer,
    w: &DeviceBuffer,
    b: &DeviceBuffer,
    y: &mut DeviceBuffer,
) -> Result<(), String> {
    let bufs = RowBuffers {
        x: DeviceSlice::whole(x),
        residual: None,
        weight: Some(DeviceSlice::whole(w)),
        bias: Some(DeviceSlice::whole(b)),
        y: DeviceSliceMut::whole(y),
        residual_out: None,
    };
    k.launch(s, bufs).map_err(|e| format!("layernorm: {e}"))
}

fn gemm_launch(
    k: &GemmKernel,
    s: &Stream,
    a: &DeviceBuffer,
    w: &DeviceBuffer,
    c: &mut DeviceBuffer,
    bias: Option<&DeviceBuffer>,
    residual: Option<&DeviceBuffer>,
) -> Result<(), String> {
    let p = k.problem();
    let mut bufs = GemmBuffers {
        a,
        b: w,
        c,
        bias,
        residual,
    };
    k.launch_with(s, &mut bufs)
        .map_err(|e| format!("gemm {}x{}x{}: {e}", p.m, p.n, p.k))
}

/// The fused plan's kernels.
pub struct FusedLayer {
    qkv: GemmKernel,
    out: GemmKernel,
    up: GemmKernel,
    down: GemmKernel,
    ln: RowReduceKernel,
}

impl FusedLayer {
    /// Builds the plan's kernels through `synth` (its tuning database decides the GEMM configs).
    pub fn build(synth: &Synth, shape: &EncoderShape) -> Result<FusedLayer, String> {
        let (t, d, f) = (shape.tokens(), shape.d_model, shape.ffn);
        Ok(FusedLayer {
            qkv: projection(synth, t, 3 * d, d, epilogue(true, Activation::None, false))?,
            out: projection(synth, t, d, d, epilogue(true, Activation::None, true))?,
            up: projection(synth, t, f, d, epilogue(true, Activation::Relu, false))?,
            down: projection(synth, t, d, f, epilogue(true, Activation::None, true))?,
            ln: layer_norm(synth, shape)?,
        })
    }

    /// The GEMM problems of this plan with the lookup source of each config.
    pub fn describe(&self) -> String {
        [&self.qkv, &self.out, &self.up, &self.down]
            .iter()
            .map(|k| {
                let p = k.problem();
                format!(
                    "{}x{}x{} {} {}",
                    p.m,
                    p.n,
                    p.k,
                    k.template(),
                    rtx_synthesis::synth::gemm::source_name(k.source())
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Enqueues one forward pass: `st.y = layer(st.x)`.
    pub fn forward(
        &self,
        st: &mut LayerState,
        attn: &dyn AttentionStep,
        s: &Stream,
    ) -> Result<(), String> {
        let w = &st.w;
        gemm_launch(
            &self.qkv,
            s,
            &st.x,
            &w[W_QKV],
            &mut st.qkv,
            Some(&w[B_QKV]),
            None,
        )?;
        attn.launch(s, &st.qkv, &mut st.o)?;
        gemm_launch(
            &self.out,
            s,
            &st.o,
            &w[W_O],
            &mut st.a,
            Some(&w[B_O]),
            Some(&st.x),
        )?;
        ln_launch(&self.ln, s, &st.a, &w[LN1_W], &w[LN1_B], &mut st.h1)?;
        gemm_launch(&self.up, s, &st.h1, &w[W_1], &mut st.f, Some(&w[B_1]), None)?;
        gemm_launch(
            &self.down,
            s,
            &st.f,
            &w[W_2],
            &mut st.h2,
            Some(&w[B_2]),
            Some(&st.h1),
        )?;
        ln_launch(&self.ln, s, &st.h2, &w[LN2_W], &w[LN2_B], &mut st.y)
    }
}

/// The unfused plan's kernels (plain GEMMs + one elementwise kernel per epilogue op).
pub struct UnfusedLayer {
    gemms: [GemmKernel; 4],
    /// `x + bias[col]` for widths 3d, d, ffn.
    bias: [ElementwiseKernel; 3],
    add: ElementwiseKernel,
    relu: ElementwiseKernel,
    ln: RowReduceKernel,
}

fn elementwise(
    synth: &Synth,
    rows: u32,
    cols: u32,
    build: impl FnOnce(&mut GraphBuilder),
) -> Result<ElementwiseKernel, String> {
    let mut g = GraphBuilder::new();
    build(&mut g);
    let graph = g.build().map_err(|e| e.to_string())?;
    let p = ElementwiseProblem::new(graph, rows, cols);
    let c = ElementwiseTemplate.default_config(&p, synth.arch());
    ElementwiseKernel::build(synth.device(), &p, &c)
        .map_err(|e| format!("elementwise {rows}x{cols}: {e}"))
}

fn bias_add(synth: &Synth, rows: u32, cols: u32) -> Result<ElementwiseKernel, String> {
    elementwise(synth, rows, cols, |g| {
        let x = g.input(DT, Broadcast::Full);
        let b = g.input(DT, Broadcast::Row);
        let y = g.add(x, b);
        g.output(y, DT);
    })
}

fn ew_launch(
    k: &ElementwiseKernel,
    s: &Stream,
    inputs: &[&DeviceBuffer],
    out: &mut DeviceBuffer,
) -> Result<(), String> {
    let ins: Vec<DeviceSlice<'_>> = inputs.iter().map(|b| DeviceSlice::whole(b)).collect();
    k.launch(s, &ins, &mut [DeviceSliceMut::whole(out)])
        .map_err(|e| format!("elementwise: {e}"))
}

impl UnfusedLayer {
    /// Builds the plan through `untuned` (a synthesizer over an empty tuning database).
    pub fn build(untuned: &Synth, shape: &EncoderShape) -> Result<UnfusedLayer, String> {
        let (t, d, f) = (shape.tokens(), shape.d_model, shape.ffn);
        let plain = epilogue(false, Activation::None, false);
        Ok(UnfusedLayer {
            gemms: [
                projection(untuned, t, 3 * d, d, plain)?,
                projection(untuned, t, d, d, plain)?,
                projection(untuned, t, f, d, plain)?,
                projection(untuned, t, d, f, plain)?,
            ],
            bias: [
                bias_add(untuned, t, 3 * d)?,
                bias_add(untuned, t, d)?,
                bias_add(untuned, t, f)?,
            ],
            add: elementwise(untuned, t, d, |g| {
                let x = g.input(DT, Broadcast::Full);
                let r = g.input(DT, Broadcast::Full);
                let y = g.add(x, r);
                g.output(y, DT);
            })?,
            relu: elementwise(untuned, t, f, |g| {
                let x = g.input(DT, Broadcast::Full);
                let y = g.unary(UnaryOp::Relu, x);
                g.output(y, DT);
            })?,
            ln: layer_norm(untuned, shape)?,
        })
    }

    /// Enqueues one forward pass: `st.y = layer(st.x)`, one kernel per op.
    pub fn forward(
        &self,
        st: &mut LayerState,
        attn: &dyn AttentionStep,
        s: &Stream,
    ) -> Result<(), String> {
        let w = &st.w;
        let [g_qkv, g_out, g_up, g_down] = &self.gemms;
        let [b_qkv, b_d, b_f] = &self.bias;
        gemm_launch(g_qkv, s, &st.x, &w[W_QKV], &mut st.t1, None, None)?;
        ew_launch(b_qkv, s, &[&st.t1, &w[B_QKV]], &mut st.qkv)?;
        attn.launch(s, &st.qkv, &mut st.o)?;
        gemm_launch(g_out, s, &st.o, &w[W_O], &mut st.t1, None, None)?;
        ew_launch(b_d, s, &[&st.t1, &w[B_O]], &mut st.t2)?;
        ew_launch(&self.add, s, &[&st.t2, &st.x], &mut st.a)?;
        ln_launch(&self.ln, s, &st.a, &w[LN1_W], &w[LN1_B], &mut st.h1)?;
        gemm_launch(g_up, s, &st.h1, &w[W_1], &mut st.t1, None, None)?;
        ew_launch(b_f, s, &[&st.t1, &w[B_1]], &mut st.t2)?;
        ew_launch(&self.relu, s, &[&st.t2], &mut st.f)?;
        gemm_launch(g_down, s, &st.f, &w[W_2], &mut st.t1, None, None)?;
        ew_launch(b_d, s, &[&st.t1, &w[B_2]], &mut st.t2)?;
        ew_launch(&self.add, s, &[&st.t2, &st.h1], &mut st.h2)?;
        ln_launch(&self.ln, s, &st.h2, &w[LN2_W], &w[LN2_B], &mut st.y)
    }
}

/// Relative error `||y - ref|| / ||ref||` of the sampled output rows (NaN when any sampled
/// element is not finite, so an unwritten output fails).
pub fn sampled_error(
    st: &LayerState,
    stream: &Stream,
    rows: &[(u32, u32)],
    want: &[Vec<f64>],
) -> Result<f64, String> {
    let bits: Vec<u16> = st.y.download(stream).map_err(|e| e.to_string())?;
    let d = st.shape.d_model as usize;
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&(b, s), w) in rows.iter().zip(want) {
        let t = b as usize * st.shape.seq as usize + s as usize;
        for (j, wj) in w.iter().enumerate() {
            let got = half::bf16::from_bits(bits[t * d + j]).to_f64();
            if !got.is_finite() {
                return Ok(f64::NAN);
            }
            num += (got - wj) * (got - wj);
            den += wj * wj;
        }
    }
    Ok((num / den.max(f64::MIN_POSITIVE)).sqrt())
}
