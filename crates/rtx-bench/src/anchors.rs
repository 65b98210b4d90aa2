//! PyTorch anchors (`--anchors FILE`): figures `torch_anchors.py` measured on the same GPU, and
//! the naming convention that maps our cases onto them.
//!
//! The file is a JSON list of `{kind, name, us, GBps? | TFLOPs?, ...}` (other numeric fields such
//! as `compile_s` are kept in [`Anchor::extra`]). An anchor's key is `"{kind} {name}"`, and each
//! suite sets [`crate::report::Case::anchor`] with one of the key builders below:
//!
//! | case | key | example |
//! | --- | --- | --- |
//! | GEMM `M x N x K` | [`gemm_key`] | `gemm bf16 4096x4096x4096` (`fp32`, `tf32`, `fp16`, `bf16`) |
//! | attention | [`attn_key`] | `attn sdpa bfloat16 B4 H16 S2048 D128 causal` |
//! | row-wise / elementwise | [`mem_key`] | `mem softmax bf16 16384x3072` |
//! | device copy | [`copy_key`] | `copy d2d 2GiB` |
//! | encoder layer | [`layer_key`] | `layer encoder B8 S512 d768 h12 ffn3072 bf16 eager` |
//!
//! The ratio shown is `anchor_us / our_us` (> 1: ours is faster). Only exact key matches count;
//! a shape PyTorch was not measured at has no anchor (it is never interpolated).

use crate::report::{AnchorBaseline, Report};
use rtx_synthesis::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One anchor figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// `copy`, `gemm`, `attn`, `mem`, `layer`.
    pub kind: String,
    /// Case name within the kind, e.g. `bf16 4096x4096x4096`.
    pub name: String,
    /// Median time, microseconds.
    pub us: f64,
    /// Achieved bandwidth, GB/s (memory kinds).
    #[serde(rename = "GBps", default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Achieved compute, TFLOP/s (compute kinds).
    #[serde(rename = "TFLOPs", default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// Any other field the script wrote (e.g. `compile_s`).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Anchor {
    /// `"{kind} {name}"`.
    pub fn key(&self) -> String {
        format!("{} {}", self.kind, self.name)
    }
}

/// Why the anchors file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// Reading failed.
    #[error("anchors file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// Not a JSON list of anchors.
    #[error("anchors file is not a JSON list of {{kind, name, us, GBps|TFLOPs}}: {0}")]
    Json(#[from] serde_json::Error),
    /// A time that cannot be a measurement.
    #[error("anchor `{key}` has a non-positive or non-finite time {us}")]
    BadTime {
        /// The anchor's key.
        key: String,
        /// Its time.
        us: f64,
    },
}

/// All anchors of one file, looked up by key.
#[derive(Debug, Clone, Default)]
pub struct Anchors {
    list: Vec<Anchor>,
    by_key: BTreeMap<String, usize>,
}

impl Anchors {
    /// Parses the JSON written by `torch_anchors.py --json`. A repeated key keeps the last figure.
    pub fn parse(text: &str) -> Result<Anchors, AnchorError> {
        let list: Vec<Anchor> = serde_json::from_str(text)?;
        let mut by_key = BTreeMap::new();
        for (i, a) in list.iter().enumerate() {
            if !(a.us.is_finite() && a.us > 0.0) {
                return Err(AnchorError::BadTime {
                    key: a.key(),
                    us: a.us,
                });
            }
            by_key.insert(a.key(), i);
        }
        Ok(Anchors { list, by_key })
    }

    /// Reads and parses a file.
    pub fn read_file(path: &Path) -> Result<Anchors, AnchorError> {
        let text = std::fs::read_to_string(path).map_err(|source| AnchorError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Anchors::parse(&text)
    }

    /// The anchor with this key.
    pub fn get(&self, key: &str) -> Option<&Anchor> {
        self.by_key.get(key).map(|&i| &self.list[i])
    }

    /// Every anchor, in file order.
    pub fn all(&self) -> &[Anchor] {
        &self.list
    }

    /// Number of anchors.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Sets `baselines.torch` on every measured case whose `anchor` key is present; returns how
    /// many cases matched.
    pub fn apply(&self, report: &mut Report) -> usize {
        let mut matched = 0;
        for c in &mut report.cases {
            let (Some(key), Some(ours)) = (c.anchor.as_deref(), c.median_us.filter(|t| *t > 0.0))
            else {
                continue;
            };
            if !c.is_measured() {
                continue;
            }
            if let Some(a) = self.get(key) {
                c.baselines.torch = Some(AnchorBaseline {
                    us: a.us,
                    ratio: a.us / ours,
                });
                matched += 1;
            }
        }
        matched
    }
}

/// The dtype spelling `torch_anchors.py` uses in GEMM names.
pub fn torch_gemm_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "fp32",
        DType::Tf32 => "tf32",
        DType::F16 => "fp16",
        DType::Bf16 => "bf16",
    }
}

/// `gemm {fp32|tf32|fp16|bf16} {m}x{n}x{k}`.
pub fn gemm_key(dtype: DType, m: u32, n: u32, k: u32) -> String {
    format!("gemm {} {m}x{n}x{k}", torch_gemm_dtype(dtype))
}

/// `attn sdpa {float16|bfloat16} B{b} H{h} S{s} D{d}[ causal]`; `None` for dtypes SDPA was not
/// measured in.
pub fn attn_key(dtype: DType, b: u32, h: u32, s: u32, d: u32, causal: bool) -> Option<String> {
    let t = match dtype {
        DType::F16 => "float16",
        DType::Bf16 => "bfloat16",
        _ => return None,
    };
    Some(format!(
        "attn sdpa {t} B{b} H{h} S{s} D{d}{}",
        if causal { " causal" } else { "" }
    ))
}

/// Row-wise and elementwise operations the anchors script measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOp {
    /// `F.layer_norm` over the last dim.
    LayerNorm,
    /// `F.rms_norm` over the last dim.
    RmsNorm,
    /// `torch.softmax(x, -1)`.
    Softmax,
    /// `F.gelu(x * 1.5 + 0.5)` run eagerly (PyTorch makes two kernels).
    GeluAffine,
    /// rtx's 8-op chain run eagerly (scripts/h200/torch_chain8.py appends it to the anchors).
    Chain8,
}

impl MemOp {
    /// The name in the anchors file.
    pub fn anchor_name(self) -> &'static str {
        match self {
            MemOp::LayerNorm => "layernorm",
            MemOp::RmsNorm => "rmsnorm",
            MemOp::Softmax => "softmax",
            MemOp::GeluAffine => "gelu(x*1.5+0.5) eager",
            MemOp::Chain8 => "chain8 eager",
        }
    }
}

/// `mem {op} {dtype} {rows}x{cols}`.
pub fn mem_key(op: MemOp, dtype: DType, rows: u64, cols: u64) -> String {
    format!("mem {} {} {rows}x{cols}", op.anchor_name(), dtype.name())
}

/// `copy d2d {n}GiB` for a whole number of GiB (bytes read; the script copies a 2 GiB f32 tensor).
pub fn copy_key(bytes: u64) -> Option<String> {
    (bytes > 0 && bytes & ((1 << 30) - 1) == 0).then(|| format!("copy d2d {}GiB", bytes >> 30))
}

/// `layer encoder B{b} S{s} d{d} h{h} ffn{f} bf16 eager` (the eager PyTorch layer).
pub fn layer_key(b: u32, s: u32, d: u32, h: u32, ffn: u32) -> String {
    format!("layer encoder B{b} S{s} d{d} h{h} ffn{ffn} bf16 eager")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Case, Clock};
    use crate::stats::Summary;
    use crate::suite_id::SuiteId;

    const EXCERPT: &str = include_str!("../tests/fixtures/anchors_h200_excerpt.json");

    #[test]
    fn parses_the_real_file_format() {
        let a = Anchors::parse(EXCERPT).unwrap();
        assert_eq!(a.len(), 9);
        let g = a.get("gemm bf16 4096x4096x4096").unwrap();
        assert!(g.tflops.is_some() && g.gbps.is_none());
        let m = a.get("mem softmax bf16 16384x3072").unwrap();
        assert!(m.gbps.is_some() && m.tflops.is_none());
        let l = a.get("layer same, torch.compile max-autotune").unwrap();
        assert!(l.extra.contains_key("compile_s"), "{l:?}");
        assert!(a
            .get("layer encoder B8 S512 d768 h12 ffn3072 bf16 eager")
            .unwrap()
            .tflops
            .is_none());
    }

    #[test]
    fn key_builders_match_the_script_names() {
        let a = Anchors::parse(EXCERPT).unwrap();
        for key in [
            gemm_key(DType::Bf16, 4096, 4096, 4096),
            gemm_key(DType::F32, 4096, 4096, 4096),
            gemm_key(DType::Tf32, 512, 512, 512),
            attn_key(DType::Bf16, 4, 16, 2048, 128, true).unwrap(),
            mem_key(MemOp::Softmax, DType::Bf16, 16384, 3072),
            mem_key(MemOp::GeluAffine, DType::Bf16, 65536, 768),
            copy_key(2 << 30).unwrap(),
            layer_key(8, 512, 768, 12, 3072),
        ] {
            assert!(a.get(&key).is_some(), "no anchor for `{key}`");
        }
        assert_eq!(attn_key(DType::F32, 1, 1, 1, 1, false), None);
        assert_eq!(copy_key(1000), None);
        // The name scripts/h200/torch_chain8.py writes (`chain8 eager bf16 {rows}x{cols}`).
        assert_eq!(
            mem_key(MemOp::Chain8, DType::Bf16, 32768, 4096),
            "mem chain8 eager bf16 32768x4096"
        );
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(Anchors::parse("{}"), Err(AnchorError::Json(_))));
        assert!(matches!(
            Anchors::parse(r#"[{"kind":"gemm","name":"x","us":-1}]"#),
            Err(AnchorError::BadTime { .. })
        ));
        assert!(matches!(
            Anchors::read_file(Path::new("/nonexistent/anchors.json")),
            Err(AnchorError::Io { .. })
        ));
    }

    #[test]
    fn apply_sets_ratio_anchor_over_ours() {
        let a = Anchors::parse(r#"[{"kind":"gemm","name":"bf16 8x8x8","us":30.0,"TFLOPs":1.0}]"#)
            .unwrap();
        let mut r = crate::report::tests::sample_report();
        let s = Summary {
            median_us: 20.0,
            p20_us: 20.0,
            p80_us: 20.0,
            rel_spread: 0.0,
            samples: 3,
        };
        let mut c = Case::measured(SuiteId::Gemm, "ours bf16 8x8x8", "8x8x8", Clock::Gpu, &s);
        c.anchor = Some(gemm_key(DType::Bf16, 8, 8, 8));
        r.cases = vec![
            c,
            Case::not_available(SuiteId::Gemm, "missing", "8x8x8", "why"),
        ];
        r.cases[1].anchor = Some(gemm_key(DType::Bf16, 8, 8, 8));
        assert_eq!(a.apply(&mut r), 1);
        let t = r.cases[0].baselines.torch.unwrap();
        assert_eq!(t.us, 30.0);
        assert!((t.ratio - 1.5).abs() < 1e-12);
        assert!(
            r.cases[1].baselines.torch.is_none(),
            "no ratio without our figure"
        );
    }
}
