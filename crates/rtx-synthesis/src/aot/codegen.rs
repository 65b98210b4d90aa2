//! Ahead-of-time code generation for deployment: which kernels a program needs, from an ops
//! manifest ([`OpsManifest`]) and/or the tuning database, compiled for several architectures
//! into one [`Bundle`] so the deployment loads cubins and never runs NVRTC
//! (`cargo xtask codegen`).
//!
//! # The ops manifest (JSON, versioned)
//!
//! ```json
//! {
//!   "format": "rtx-ops",
//!   "version": 1,
//!   "ops": [
//!     { "op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "layout": "nt" },
//!     { "op": "gemm", "m": 512, "n": 512, "k": 512, "dtype": "f32", "batch": 8 },
//!     { "op": "elementwise", "preset": "bias_gelu_tanh", "dtype": "bf16", "rows": 8192, "cols": 4096 },
//!     { "op": "reduce", "kind": "rmsnorm", "dtype": "bf16", "rows": 8192, "cols": 4096 }
//!   ]
//! }
//! ```
//!
//! - `gemm`: `m`, `n`, `k`, `dtype` (`f32`, `tf32`, `f16`, `bf16`); optional `batch` (1) and
//!   `layout` (`nn`, `nt`, `tn`, `tt`; default `nn`). The family is chosen per architecture as
//!   [`crate::Synth`] chooses it (wgmma on sm_90a for f16/bf16, mma.sync, SIMT for f32).
//! - `elementwise`: `preset` (`bias_gelu_erf`, `bias_gelu_tanh`, `silu_gate`, `chain8`),
//!   `dtype`, `rows`, `cols`.
//! - `reduce`: `kind` (`softmax`, `layernorm`, `rmsnorm`), `dtype`, `rows`, `cols`; optional
//!   `eps` (1e-5), `weight` (true), `bias` (true, LayerNorm only), `residual` (false).
//!
//! Every op gets its template's default config; a GEMM also gets what the tuning database would
//! serve for it on every device it holds entries from for that architecture (winner, runners-up:
//! [`crate::tuner::TuningDb::lookup`]). Without a manifest, every GEMM entry of the database
//! for a requested architecture is rebuilt from its key, and each stored config is emitted and
//! kept only when its source fingerprint matches the stored one (otherwise it is listed as
//! skipped with the reason, never shipped stale).

use super::bundle::{Bundle, BundleError, BundleManifest};
use super::nvrtc::{compile, CompileError, Compiled};
use super::parallel::map_bounded;
use crate::profiler::hwdb::reference_sm_count;
use crate::synth::gemm::{family_accepts, family_candidates, GemmFamilyKind};
use crate::templates::elementwise::presets::{self, GeluForm};
use crate::templates::elementwise::{ElementwiseProblem, ElementwiseTemplate};
use crate::templates::gemm::wgmma::WgmmaGemm;
use crate::templates::gemm::{
    Activation, GemmProblem, Layout, MmaGemm, SimtGemm, DEFAULT_SM_COUNT,
};
use crate::templates::reduce::{RowProblem, RowReduceTemplate};
use crate::templates::{KernelSource, Template};
use crate::tuner::{DbEntry, DeviceKey, LookupPolicy, LookupSource, ProblemSignature, TuningDb};
use crate::{Arch, DType};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The `format` string of an ops manifest.
pub const OPS_FORMAT: &str = "rtx-ops";
/// The ops-manifest version this build reads.
pub const OPS_FORMAT_VERSION: u32 = 1;
/// The op kinds a manifest may name.
pub const KNOWN_OPS: [&str; 3] = ["gemm", "elementwise", "reduce"];
/// The elementwise presets a manifest may name.
pub const ELEMENTWISE_PRESETS: [&str; 4] =
    ["bias_gelu_erf", "bias_gelu_tanh", "silu_gate", "chain8"];
/// The row reductions a manifest may name.
pub const REDUCE_KINDS: [&str; 3] = ["softmax", "layernorm", "rmsnorm"];

/// Why codegen could not plan, compile or write a bundle.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    /// An architecture string that is not a known target.
    #[error("bad --arch `{0}` (known: sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_120)")]
    BadArch(String),
    /// No architecture was given.
    #[error("no target architecture given (e.g. --arch sm_90a,sm_120)")]
    NoArch,
    /// The manifest file could not be read.
    #[error("cannot read the ops manifest {path}: {source}")]
    ManifestIo {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not JSON, or not an `rtx-ops` manifest of this version.
    #[error("ops manifest {path}: {reason}")]
    ManifestFormat {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An op kind this build does not know.
    #[error("ops manifest {path}: op #{index} is `{op}`, not a known op (known: {known})")]
    UnknownOp {
        /// The file.
        path: PathBuf,
        /// Position in `ops` (0-based).
        index: usize,
        /// The op name found.
        op: String,
        /// The known names.
        known: String,
    },
    /// A known op with bad or missing fields, or a problem no template can serve.
    #[error("ops manifest {path}: op #{index} ({op}): {reason}")]
    BadOp {
        /// The file.
        path: PathBuf,
        /// Position in `ops` (0-based).
        index: usize,
        /// The op name.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// The tuning database could not be read.
    #[error(transparent)]
    Db(#[from] crate::tuner::DbError),
    /// Nothing to compile: no manifest and no usable database entry for the architectures.
    #[error("nothing to compile for {archs}: {why}")]
    NothingToBuild {
        /// The requested architectures.
        archs: String,
        /// Why.
        why: String,
    },
    /// Two different sources with one entry name on one architecture (a bundle serves by name).
    #[error("two different kernels are both named `{entry}` for {arch} ({a} and {b})")]
    EntryClash {
        /// The entry name.
        entry: String,
        /// The architecture.
        arch: Arch,
        /// One op label.
        a: String,
        /// The other.
        b: String,
    },
    /// Kernels failed to compile (each with its label, architecture and NVRTC error).
    #[error("{} kernel(s) failed to compile; first: {} ({}): {}", .0.len(), .0[0].0, .0[0].1, .0[0].2)]
    Compile(Vec<(String, Arch, Box<CompileError>)>),
    /// The bundle could not be written or opened.
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// An ops manifest: the problems a deployment runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpsManifest {
    /// Always [`OPS_FORMAT`].
    pub format: String,
    /// [`OPS_FORMAT_VERSION`].
    pub version: u32,
    /// The ops.
    pub ops: Vec<OpSpec>,
}

fn one() -> u32 {
    1
}
fn nn() -> String {
    "nn".into()
}
fn yes() -> bool {
    true
}
fn default_eps() -> f32 {
    1e-5
}

/// One op of a manifest (see the module docs for the fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum OpSpec {
    /// A GEMM.
    Gemm {
        /// Rows of A and C.
        m: u32,
        /// Columns of B and C.
        n: u32,
        /// Inner dimension.
        k: u32,
        /// Element type name.
        dtype: String,
        /// `nn`, `nt`, `tn` or `tt`.
        #[serde(default = "nn")]
        layout: String,
        /// Strided batch count.
        #[serde(default = "one")]
        batch: u32,
    },
    /// A fused elementwise preset.
    Elementwise {
        /// One of [`ELEMENTWISE_PRESETS`].
        preset: String,
        /// Element type name.
        dtype: String,
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
    },
    /// A row reduction.
    Reduce {
        /// One of [`REDUCE_KINDS`].
        kind: String,
        /// Element type name.
        dtype: String,
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
        /// Norm epsilon.
        #[serde(default = "default_eps")]
        eps: f32,
        /// Scale by a weight vector (norms).
        #[serde(default = "yes")]
        weight: bool,
        /// Add a bias vector (LayerNorm).
        #[serde(default = "yes")]
        bias: bool,
        /// Add a residual input first.
        #[serde(default)]
        residual: bool,
    },
}

impl OpSpec {
    /// A short label for progress and error messages.
    pub fn label(&self) -> String {
        match self {
            OpSpec::Gemm {
                m,
                n,
                k,
                dtype,
                layout,
                batch,
            } => {
                let b = if *batch > 1 {
                    format!(" x{batch}")
                } else {
                    String::new()
                };
                format!("gemm {m}x{n}x{k} {dtype} {layout}{b}")
            }
            OpSpec::Elementwise {
                preset,
                dtype,
                rows,
                cols,
            } => {
                format!("elementwise {preset} {dtype} {rows}x{cols}")
            }
            OpSpec::Reduce {
                kind,
                dtype,
                rows,
                cols,
                ..
            } => format!("reduce {kind} {dtype} {rows}x{cols}"),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            OpSpec::Gemm { .. } => "gemm",
            OpSpec::Elementwise { .. } => "elementwise",
            OpSpec::Reduce { .. } => "reduce",
        }
    }
}

impl OpsManifest {
    /// Reads and validates the manifest at `path` (format, version, every op's kind and fields).
    pub fn read(path: &Path) -> Result<OpsManifest, CodegenError> {
        let bytes = std::fs::read(path).map_err(|source| CodegenError::ManifestIo {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&bytes, path)
    }

    /// Parses manifest bytes; `path` is only used in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<OpsManifest, CodegenError> {
        let format_err = |reason: String| CodegenError::ManifestFormat {
            path: path.to_path_buf(),
            reason,
        };
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format_err(format!("not JSON: {e}")))?;
        let format = v.get("format").and_then(|f| f.as_str());
        if format != Some(OPS_FORMAT) {
            return Err(format_err(format!(
                "`format` is {format:?}, expected \"{OPS_FORMAT}\""
            )));
        }
        let version = v.get("version").and_then(|x| x.as_u64());
        if version != Some(OPS_FORMAT_VERSION as u64) {
            return Err(format_err(format!(
                "`version` is {version:?}; this build reads version {OPS_FORMAT_VERSION}"
            )));
        }
        let ops = v
            .get("ops")
            .and_then(|o| o.as_array())
            .ok_or_else(|| format_err("`ops` must be a list".into()))?;
        let mut out = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let name = op.get("op").and_then(|o| o.as_str()).unwrap_or("");
            if !KNOWN_OPS.contains(&name) {
                return Err(CodegenError::UnknownOp {
                    path: path.to_path_buf(),
                    index,
                    op: if name.is_empty() {
                        format!("{:?}", op.get("op"))
                    } else {
                        name.into()
                    },
                    known: KNOWN_OPS.join(", "),
                });
            }
            let spec: OpSpec =
                serde_json::from_value(op.clone()).map_err(|e| CodegenError::BadOp {
                    path: path.to_path_buf(),
                    index,
                    op: name.into(),
                    reason: e.to_string(),
                })?;
            out.push(spec);
        }
        Ok(OpsManifest {
            format: OPS_FORMAT.into(),
            version: OPS_FORMAT_VERSION,
            ops: out,
        })
    }
}

/// Parses `sm_90a,sm_120` into architectures (deduplicated, in order).
pub fn parse_archs(s: &str) -> Result<Vec<Arch>, CodegenError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let a: Arch = part
            .parse()
            .map_err(|_| CodegenError::BadArch(part.to_string()))?;
        if !out.contains(&a) {
            out.push(a);
        }
    }
    if out.is_empty() {
        return Err(CodegenError::NoArch);
    }
    Ok(out)
}

/// Why a kernel is in the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Origin {
    /// The template's default config.
    Default,
    /// What the tuning database serves on `device` (`rank` 0 = winner, then runners-up).
    Tuned {
        /// The device the entry was measured on.
        device: String,
        /// 0 for the winner.
        rank: usize,
    },
}

/// One kernel to compile.
#[derive(Debug, Clone)]
pub struct PlannedKernel {
    /// The op it serves (for messages).
    pub label: String,
    /// The source.
    pub source: KernelSource,
    /// The target.
    pub arch: Arch,
    /// Why it is needed.
    pub origin: Origin,
}

/// A database config that was not planned, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// The entry or op.
    pub what: String,
    /// Why.
    pub reason: String,
}

/// What codegen will compile.
#[derive(Debug, Clone, Default)]
pub struct CodegenPlan {
    /// Distinct `(source, arch)` pairs, in plan order.
    pub kernels: Vec<PlannedKernel>,
    /// What was left out, with reasons.
    pub skipped: Vec<Skipped>,
}

impl CodegenPlan {
    fn push(
        &mut self,
        k: PlannedKernel,
        seen: &mut HashMap<(String, Arch), (String, String)>,
    ) -> Result<(), CodegenError> {
        let fp = k.source.fingerprint().to_hex().to_string();
        match seen.get(&(k.source.entry.clone(), k.arch)) {
            Some((other_fp, _)) if *other_fp == fp => Ok(()), // the same kernel, needed twice
            Some((_, other_label)) => Err(CodegenError::EntryClash {
                entry: k.source.entry.clone(),
                arch: k.arch,
                a: other_label.clone(),
                b: k.label.clone(),
            }),
            None => {
                seen.insert((k.source.entry.clone(), k.arch), (fp, k.label.clone()));
                self.kernels.push(k);
                Ok(())
            }
        }
    }
}

fn dtype_of(s: &str) -> Result<DType, String> {
    s.parse::<DType>().map_err(|e| e.to_string())
}

fn layouts_of(s: &str) -> Result<(Layout, Layout), String> {
    crate::synth::gemm::parse_layouts(s)
}

/// The SM count an ahead-of-time build plans `arch` for: its reference card's
/// ([`reference_sm_count`]). Default configs depend on it (mma.sync's small-M split-K, wgmma's
/// rung choice by waves), so the bundled default kernel is the one that card asks for at run
/// time.
fn sm_count_for(arch: Arch) -> u32 {
    reference_sm_count(arch).unwrap_or(DEFAULT_SM_COUNT)
}

/// The GEMM family [`crate::Synth`] would pick for `p` on `arch`.
fn gemm_family(p: &GemmProblem, arch: Arch) -> Result<GemmFamilyKind, String> {
    let mut reasons = Vec::new();
    for kind in family_candidates(p, arch) {
        let verdict = match kind {
            GemmFamilyKind::Wgmma => family_accepts(&WgmmaGemm::new(sm_count_for(arch)), p, arch),
            GemmFamilyKind::Mma => family_accepts(&MmaGemm::new(sm_count_for(arch)), p, arch),
            GemmFamilyKind::Simt => family_accepts(&SimtGemm, p, arch),
        };
        match verdict {
            Ok(()) => return Ok(kind),
            Err(r) => reasons.push(format!("{}: {r}", kind.name())),
        }
    }
    Err(format!(
        "no GEMM template for {arch}: {}",
        reasons.join("; ")
    ))
}

/// Devices the database holds entries from for `arch`.
fn db_devices(db: &TuningDb, arch: Arch) -> Vec<DeviceKey> {
    let set: BTreeSet<DeviceKey> = db
        .entries()
        .iter()
        .filter(|e| e.key.arch == arch)
        .map(|e| e.key.device.clone())
        .collect();
    set.into_iter().collect()
}

/// Default config + what the database serves on each of its devices, for one template.
fn template_kernels<T>(
    t: &T,
    p: &T::Problem,
    arch: Arch,
    label: &str,
    db: Option<&TuningDb>,
) -> Result<Vec<PlannedKernel>, String>
where
    T: Template,
    T::Problem: ProblemSignature,
{
    let mut out = vec![PlannedKernel {
        label: label.to_string(),
        source: t
            .emit(p, &t.default_config(p, arch), arch)
            .map_err(|v| v.to_string())?,
        arch,
        origin: Origin::Default,
    }];
    if let Some(db) = db {
        for device in db_devices(db, arch) {
            let found = db
                .lookup(t, p, arch, &device, &LookupPolicy::default())
                .map_err(|e| e.to_string())?;
            if found.source == LookupSource::Default {
                continue;
            }
            for (rank, c) in std::iter::once(found.config)
                .chain(found.fallbacks)
                .enumerate()
            {
                out.push(PlannedKernel {
                    label: label.to_string(),
                    source: t.emit(p, &c, arch).map_err(|v| v.to_string())?,
                    arch,
                    origin: Origin::Tuned {
                        device: device.name.clone(),
                        rank,
                    },
                });
            }
        }
    }
    Ok(out)
}

/// The kernels one manifest op needs on `arch`.
pub fn op_kernels(
    op: &OpSpec,
    arch: Arch,
    db: Option<&TuningDb>,
) -> Result<Vec<PlannedKernel>, String> {
    let label = op.label();
    match op {
        OpSpec::Gemm {
            m,
            n,
            k,
            dtype,
            layout,
            batch,
        } => {
            let (la, lb) = layouts_of(layout)?;
            let p = GemmProblem::new(*m, *n, *k, dtype_of(dtype)?, la, lb).batched((*batch).max(1));
            p.validate().map_err(|e| e.to_string())?;
            match gemm_family(&p, arch)? {
                GemmFamilyKind::Wgmma => {
                    template_kernels(&WgmmaGemm::new(sm_count_for(arch)), &p, arch, &label, db)
                }
                GemmFamilyKind::Mma => {
                    template_kernels(&MmaGemm::new(sm_count_for(arch)), &p, arch, &label, db)
                }
                GemmFamilyKind::Simt => template_kernels(&SimtGemm, &p, arch, &label, db),
            }
        }
        OpSpec::Elementwise {
            preset,
            dtype,
            rows,
            cols,
        } => {
            let dt = dtype_of(dtype)?;
            let graph = match preset.as_str() {
                "bias_gelu_erf" => presets::bias_gelu(dt, GeluForm::Erf),
                "bias_gelu_tanh" => presets::bias_gelu(dt, GeluForm::Tanh),
                "silu_gate" => presets::silu_gate(dt),
                "chain8" => presets::chain8(dt),
                other => {
                    return Err(format!(
                        "unknown preset `{other}` (known: {})",
                        ELEMENTWISE_PRESETS.join(", ")
                    ))
                }
            }
            .map_err(|e| e.to_string())?;
            let p = ElementwiseProblem::new(graph, *rows, *cols);
            p.validate().map_err(|e| e.to_string())?;
            let t = ElementwiseTemplate;
            let src = t
                .emit(&p, &t.default_config(&p, arch), arch)
                .map_err(|v| v.to_string())?;
            Ok(vec![PlannedKernel {
                label,
                source: src,
                arch,
                origin: Origin::Default,
            }])
        }
        OpSpec::Reduce {
            kind,
            dtype,
            rows,
            cols,
            eps,
            weight,
            bias,
            residual,
        } => {
            let dt = dtype_of(dtype)?;
            let mut p = match kind.as_str() {
                "softmax" => RowProblem::softmax(*rows, *cols, dt),
                "layernorm" => RowProblem::layernorm(*rows, *cols, dt, *weight, *bias, *eps),
                "rmsnorm" => RowProblem::rmsnorm(*rows, *cols, dt, *weight, *eps),
                other => {
                    return Err(format!(
                        "unknown kind `{other}` (known: {})",
                        REDUCE_KINDS.join(", ")
                    ))
                }
            };
            if *residual {
                p = p.with_residual();
            }
            p.validate().map_err(|e| e.to_string())?;
            let t = RowReduceTemplate;
            let src = t
                .emit(&p, &t.default_config(&p, arch), arch)
                .map_err(|v| v.to_string())?;
            Ok(vec![PlannedKernel {
                label,
                source: src,
                arch,
                origin: Origin::Default,
            }])
        }
    }
}

/// Rebuilds the GEMM problem a database key describes: packed leading dimensions, the key's
/// layouts, dtypes, batch broadcast and epilogue flags (alpha = 1 / beta = 0 only: other scalars
/// are not in the key). `None` when the key is not a GEMM or cannot be rebuilt.
pub fn gemm_problem_from_key(e: &DbEntry) -> Option<GemmProblem> {
    let s = &e.key.op;
    if s.op != "gemm" || s.shape.len() != 4 || s.dtypes.len() != 3 || s.layouts.len() < 2 {
        return None;
    }
    let attr = |k: &str| {
        s.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    if attr("alpha_one") == Some("false") || attr("beta_zero") == Some("false") {
        return None;
    }
    let lay = |l: &str| match l {
        "row" => Some(Layout::Row),
        "col" => Some(Layout::Col),
        _ => None,
    };
    let dim = |i: usize| u32::try_from(s.shape[i]).ok();
    let mut p = GemmProblem::new(
        dim(0)?,
        dim(1)?,
        dim(2)?,
        s.dtypes[0],
        lay(&s.layouts[0])?,
        lay(&s.layouts[1])?,
    )
    .batched(dim(3)?.max(1));
    p.epilogue.out_dtype = s.dtypes[2];
    p.epilogue.bias = attr("bias") == Some("true");
    p.epilogue.residual = attr("residual") == Some("true");
    p.epilogue.activation = match attr("activation").unwrap_or("None") {
        "None" => Activation::None,
        "Relu" => Activation::Relu,
        "GeluTanh" => Activation::GeluTanh,
        "GeluErf" => Activation::GeluErf,
        "Silu" => Activation::Silu,
        _ => return None,
    };
    if attr("broadcast_a") == Some("true") {
        p.stride_a = 0;
    }
    if attr("broadcast_b") == Some("true") {
        p.stride_b = 0;
    }
    p.validate().ok()?;
    (p.signature() == *s).then_some(p)
}

/// The stored configs of `e` (winner first) emitted for `p`, each kept only when its
/// fingerprint matches the stored one; plus the template's default.
fn entry_kernels<T: Template<Problem = GemmProblem>>(
    t: &T,
    p: &GemmProblem,
    e: &DbEntry,
    plan: &mut CodegenPlan,
) -> Vec<PlannedKernel> {
    let label = format!("db {}", e.key);
    let arch = e.key.arch;
    let mut out = Vec::new();
    for (rank, s) in std::iter::once(&e.winner).chain(&e.runners_up).enumerate() {
        let what = format!("{label} config #{rank}");
        let Ok(c) = serde_json::from_value::<T::Config>(s.config.clone()) else {
            plan.skipped.push(Skipped {
                what,
                reason: "stored config does not parse for this template version".into(),
            });
            continue;
        };
        match t.emit(p, &c, arch) {
            Ok(src) if src.fingerprint().to_hex().as_str() == s.fingerprint => out.push(PlannedKernel {
                label: label.clone(),
                source: src,
                arch,
                origin: Origin::Tuned { device: e.key.device.name.clone(), rank },
            }),
            Ok(_) => plan.skipped.push(Skipped {
                what,
                reason: "emitted source differs from the stored fingerprint (template changed since tuning)".into(),
            }),
            Err(v) => plan.skipped.push(Skipped { what, reason: v.to_string() }),
        }
    }
    if let Ok(src) = t.emit(p, &t.default_config(p, arch), arch) {
        out.push(PlannedKernel {
            label,
            source: src,
            arch,
            origin: Origin::Default,
        });
    }
    out
}

/// Plans the kernels for `archs`: every op of `ops` (when given), plus, without a manifest,
/// every GEMM entry of `db` for those architectures. `db` also supplies tuned configs to
/// manifest GEMMs.
pub fn plan(
    archs: &[Arch],
    ops: Option<(&OpsManifest, &Path)>,
    db: Option<&TuningDb>,
) -> Result<CodegenPlan, CodegenError> {
    if archs.is_empty() {
        return Err(CodegenError::NoArch);
    }
    let mut plan = CodegenPlan::default();
    let mut seen = HashMap::new();
    if let Some((m, path)) = ops {
        for (index, op) in m.ops.iter().enumerate() {
            for &arch in archs {
                let ks = op_kernels(op, arch, db).map_err(|reason| CodegenError::BadOp {
                    path: path.to_path_buf(),
                    index,
                    op: op.name().into(),
                    reason: format!("{} on {arch}: {reason}", op.label()),
                })?;
                for k in ks {
                    plan.push(k, &mut seen)?;
                }
            }
        }
    } else if let Some(db) = db {
        for e in db.entries().iter().filter(|e| archs.contains(&e.key.arch)) {
            let Some(p) = gemm_problem_from_key(e) else {
                plan.skipped.push(Skipped {
                    what: format!("db {}", e.key),
                    reason: "not a GEMM key this build can rebuild a problem from".into(),
                });
                continue;
            };
            let ks = match e.key.template.as_str() {
                crate::templates::gemm::wgmma::NAME => {
                    entry_kernels(&WgmmaGemm::new(sm_count_for(e.key.arch)), &p, e, &mut plan)
                }
                crate::templates::gemm::mma::MMA_NAME => {
                    entry_kernels(&MmaGemm::new(sm_count_for(e.key.arch)), &p, e, &mut plan)
                }
                crate::templates::gemm::simt::SIMT_NAME => {
                    entry_kernels(&SimtGemm, &p, e, &mut plan)
                }
                other => {
                    plan.skipped.push(Skipped {
                        what: format!("db {}", e.key),
                        reason: format!("template `{other}` is not a GEMM family of this build"),
                    });
                    continue;
                }
            };
            for k in ks {
                plan.push(k, &mut seen)?;
            }
        }
    }
    if plan.kernels.is_empty() {
        let archs_s = archs
            .iter()
            .map(|a| a.sm_name())
            .collect::<Vec<_>>()
            .join(",");
        let why = match (ops, db) {
            (Some(_), _) => "the manifest has no ops".to_string(),
            (None, Some(db)) => format!(
                "the tuning database {} has no usable entry for these architectures ({} entries, {} skipped); pass --ops FILE",
                db.path().display(),
                db.len(),
                plan.skipped.len()
            ),
            (None, None) => "no manifest and no tuning database".into(),
        };
        return Err(CodegenError::NothingToBuild {
            archs: archs_s,
            why,
        });
    }
    Ok(plan)
}

/// One finished compile, reported while [`build`] runs (from the compile threads).
#[derive(Debug, Clone)]
pub struct CompileProgress<'a> {
    /// How many kernels are done so far, this one included.
    pub done: usize,
    /// How many the plan has.
    pub total: usize,
    /// The kernel.
    pub kernel: &'a PlannedKernel,
    /// The NVRTC wall time (`None` when it failed).
    pub compile_time: Option<Duration>,
}

/// What [`build`] wrote.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// The written, verified manifest.
    pub manifest: BundleManifest,
    /// The bundle folder.
    pub dir: PathBuf,
    /// Sum of the NVRTC wall times.
    pub compile_time: Duration,
}

/// Compiles every planned kernel (at most `jobs` NVRTC instances at once, `None`: the default
/// bound), reporting each one to `progress`, and writes them as a [`Bundle`] into `dir`. Any
/// compile failure fails the build (all failures are returned) and writes nothing.
pub fn build(
    plan: &CodegenPlan,
    dir: &Path,
    jobs: Option<usize>,
    progress: &(dyn Fn(CompileProgress<'_>) + Sync),
) -> Result<BuildReport, CodegenError> {
    let total = plan.kernels.len();
    let done = AtomicUsize::new(0);
    let results: Vec<Result<Compiled, CompileError>> = map_bounded(
        &plan.kernels,
        jobs.unwrap_or_else(super::parallel::default_jobs),
        |k| {
            let r = compile(&k.source, k.arch);
            progress(CompileProgress {
                done: done.fetch_add(1, Ordering::SeqCst) + 1,
                total,
                kernel: k,
                compile_time: r.as_ref().ok().map(|c| c.compile_time),
            });
            r
        },
    );
    let mut failures = Vec::new();
    let mut ok = Vec::with_capacity(total);
    for (k, r) in plan.kernels.iter().zip(results) {
        match r {
            Ok(c) => ok.push((&k.source, c)),
            Err(e) => failures.push((k.label.clone(), k.arch, Box::new(e))),
        }
    }
    if !failures.is_empty() {
        return Err(CodegenError::Compile(failures));
    }
    let compile_time = ok.iter().map(|(_, c)| c.compile_time).sum();
    let manifest = Bundle::write(dir, ok.iter().map(|(s, c)| (*s, c)))?;
    Ok(BuildReport {
        manifest,
        dir: dir.to_path_buf(),
        compile_time,
    })
}

/// What `--check` found: planned kernels the bundle in a folder lacks (or holds for a different
/// source), and entries it holds that the plan does not need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    /// `(label, entry, arch)` of planned kernels with no matching cubin.
    pub missing: Vec<(String, String, Arch)>,
    /// `(entry, arch)` of bundle entries no planned kernel needs.
    pub extra: Vec<(String, Arch)>,
}

impl CheckReport {
    /// Whether the bundle serves exactly the plan.
    pub fn is_current(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }
}

/// Compares the bundle in `dir` with `plan` without compiling anything (opening it verifies
/// every checksum).
pub fn check(plan: &CodegenPlan, dir: &Path) -> Result<CheckReport, CodegenError> {
    let b = Bundle::open(dir)?;
    let mut report = CheckReport::default();
    let mut needed = HashSet::new();
    for k in &plan.kernels {
        let fp = k.source.fingerprint().to_hex().to_string();
        if b.get_source(&k.source, k.arch).is_none() {
            report
                .missing
                .push((k.label.clone(), k.source.entry.clone(), k.arch));
        }
        needed.insert((fp, k.arch));
    }
    for e in &b.manifest().entries {
        if !needed.contains(&(e.fingerprint.clone(), e.arch)) {
            report.extra.push((e.entry.clone(), e.arch));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<OpsManifest, CodegenError> {
        OpsManifest::parse(s.as_bytes(), Path::new("m.json"))
    }

    #[test]
    fn archs_parse_and_bad_ones_are_named() {
        assert_eq!(
            parse_archs("sm_90a, sm_120,sm_90a").unwrap(),
            vec![Arch::Sm90a, Arch::Sm120]
        );
        match parse_archs("sm_90a,sm_99") {
            Err(CodegenError::BadArch(a)) => assert_eq!(a, "sm_99"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_archs(" , "), Err(CodegenError::NoArch)));
    }

    #[test]
    fn manifests_are_validated_with_the_bad_input_named() {
        let ok = r#"{"format":"rtx-ops","version":1,"ops":[
            {"op":"gemm","m":256,"n":256,"k":256,"dtype":"bf16","layout":"nt"},
            {"op":"elementwise","preset":"silu_gate","dtype":"f16","rows":64,"cols":1024},
            {"op":"reduce","kind":"softmax","dtype":"f32","rows":64,"cols":1024}]}"#;
        let m = parse(ok).unwrap();
        assert_eq!(m.ops.len(), 3);
        assert!(matches!(&m.ops[0], OpSpec::Gemm { batch: 1, layout, .. } if layout == "nt"));
        match parse(&ok.replace("\"elementwise\"", "\"conv2d\"")) {
            Err(CodegenError::UnknownOp { index: 1, op, .. }) => assert_eq!(op, "conv2d"),
            other => panic!("{other:?}"),
        }
        match parse(&ok.replace("\"m\":256,", "")) {
            Err(e @ CodegenError::BadOp { index: 0, .. }) => {
                assert!(e.to_string().contains("`m`"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&ok.replace("\"k\":256", "\"k\":256,\"tile\":4")),
            Err(CodegenError::BadOp { .. })
        ));
        assert!(matches!(
            parse(&ok.replace("\"version\":1", "\"version\":2")),
            Err(CodegenError::ManifestFormat { .. })
        ));
        assert!(matches!(
            parse(&ok.replace("rtx-ops", "other")),
            Err(CodegenError::ManifestFormat { .. })
        ));
        assert!(matches!(
            parse("{not json"),
            Err(CodegenError::ManifestFormat { .. })
        ));
        assert!(matches!(
            OpsManifest::read(Path::new("/nonexistent/ops.json")),
            Err(CodegenError::ManifestIo { .. })
        ));
    }

    /// The plan for sm_90a and sm_120 of a manifest holding `ops` (JSON objects, comma-separated).
    fn plan_both(ops: &str) -> CodegenPlan {
        let m = parse(&format!(
            r#"{{"format":"rtx-ops","version":1,"ops":[{ops}]}}"#
        ))
        .unwrap();
        plan(
            &[Arch::Sm90a, Arch::Sm120],
            Some((&m, Path::new("m.json"))),
            None,
        )
        .unwrap()
    }

    #[test]
    fn plans_per_arch_families_and_rejects_bad_problems() {
        let p = plan_both(
            r#"{"op":"gemm","m":256,"n":256,"k":256,"dtype":"bf16"},
            {"op":"gemm","m":256,"n":256,"k":256,"dtype":"bf16"},
            {"op":"reduce","kind":"rmsnorm","dtype":"bf16","rows":64,"cols":4096}"#,
        );
        assert_eq!(
            p.kernels.len(),
            4,
            "the repeated GEMM is planned once per arch"
        );
        let gemm90 = &p.kernels[0];
        assert_eq!(
            (gemm90.arch, gemm90.source.template.as_str()),
            (Arch::Sm90a, "gemm_wgmma")
        );
        assert_eq!(
            p.kernels[1].source.template, "gemm_mma",
            "no wgmma on sm_120"
        );
        let bad = parse(
            r#"{"format":"rtx-ops","version":1,"ops":[
            {"op":"elementwise","preset":"nope","dtype":"bf16","rows":1,"cols":1}]}"#,
        )
        .unwrap();
        match plan(&[Arch::Sm90a], Some((&bad, Path::new("m.json"))), None) {
            Err(e @ CodegenError::BadOp { index: 0, .. }) => {
                assert!(e.to_string().contains("unknown preset `nope`"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let empty = parse(r#"{"format":"rtx-ops","version":1,"ops":[]}"#).unwrap();
        assert!(matches!(
            plan(&[Arch::Sm90a], Some((&empty, Path::new("m.json"))), None),
            Err(CodegenError::NothingToBuild { .. })
        ));
    }

    #[test]
    fn mma_defaults_follow_each_arch_reference_card() {
        // 200 x 5000^2 tf32 has 158 blocks at its band's tiles: one wave on 132 SMs (no further
        // split), under one on the RTX 5090's 170 (split 2). The bundle must hold the kernel
        // each card's run-time default asks for: mma.sync split 2 on the RTX 5090; on Hopper
        // this NN problem takes wgmma's register-A transposed product instead.
        let p = plan_both(r#"{"op":"gemm","m":200,"n":5000,"k":5000,"dtype":"tf32"}"#);
        let problem = GemmProblem::nn(200, 5000, 5000, DType::Tf32);
        for (arch, sms, split) in [(Arch::Sm90a, 132, 1), (Arch::Sm120, 170, 2)] {
            let c = MmaGemm::new(sms).default_config(&problem, arch);
            assert_eq!(c.split_k, split, "{arch}");
        }
        let k = p.kernels.iter().find(|k| k.arch == Arch::Sm120).unwrap();
        let c = MmaGemm::new(170).default_config(&problem, Arch::Sm120);
        assert_eq!(k.source.template, "gemm_mma");
        assert_eq!(k.source.entry, MmaGemm::entry_name(&problem, &c));
        let k = p.kernels.iter().find(|k| k.arch == Arch::Sm90a).unwrap();
        assert_eq!(k.source.template, "gemm_wgmma");
        assert!(
            k.source.code.contains("wgmma_m64n128k8_rs("),
            "the register-A kernel"
        );
    }

    #[test]
    fn gemm_keys_round_trip_to_problems() {
        use crate::tuner::db::EntryMeta;
        use crate::tuner::{StoredConfig, TimingStats, TuneKey};
        let mut p = GemmProblem::new(512, 256, 128, DType::Bf16, Layout::Row, Layout::Col);
        p.epilogue.bias = true;
        p.epilogue.activation = Activation::GeluTanh;
        let t = MmaGemm::default();
        let key = TuneKey::new(
            &t,
            &p,
            Arch::Sm120,
            &DeviceKey::new("dev", (12, 0), (13, 0)),
        )
        .unwrap();
        let c = t.default_config(&p, Arch::Sm120);
        let stored = StoredConfig {
            config: serde_json::to_value(c).unwrap(),
            fingerprint: t
                .emit(&p, &c, Arch::Sm120)
                .unwrap()
                .fingerprint()
                .to_hex()
                .to_string(),
            stats: TimingStats {
                median_us: 1.0,
                p20_us: 1.0,
                p80_us: 1.0,
                min_us: 1.0,
                rel_spread: 0.0,
                samples: vec![1.0],
            },
        };
        let e = DbEntry {
            key,
            winner: stored.clone(),
            runners_up: vec![StoredConfig {
                fingerprint: "0".repeat(64),
                ..stored
            }],
            meta: EntryMeta {
                created_unix_s: 0,
                strategy: "t".into(),
                measured: 1,
                failed: 0,
                space: 1,
                tuner_version: "t".into(),
            },
        };
        assert_eq!(gemm_problem_from_key(&e), Some(p));
        let mut plan = CodegenPlan::default();
        let ks = entry_kernels(&t, &p, &e, &mut plan);
        assert_eq!(
            ks.len(),
            2,
            "winner + default (the same source, deduplicated later)"
        );
        assert_eq!(
            plan.skipped.len(),
            1,
            "the runner-up with a stale fingerprint is skipped"
        );
        assert!(plan.skipped[0].reason.contains("fingerprint"));
    }
}
