//! The compile registry: every kernel instance the CPU-side suite generates and compiles.
//!
//! A template family is one function `fn(Arch, &RegistryOptions) -> Result<Vec<CompileCase>,
//! FamilyError>` plus one line in [`families`]. Families built on the `Template` trait use
//! [`from_template`], which emits the default config first and then the rest of the valid space
//! (capped by [`RegistryOptions::max_per_template`]). A family that has nothing for an arch
//! returns an empty list (e.g. wgmma on sm_120).
//!
//! ```ignore
//! fn gemm_simt(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
//!     from_template("gemm_simt", &SimtGemm, &GemmProblem::nn(4096, 4096, 4096, DType::F32), arch, o)
//! }
//! // and in families(): Family { name: "gemm_simt", build: gemm_simt },
//! ```

use crate::graphs;
use crate::samples::SampleKernel;
use rtx_synthesis::templates::elementwise::{ElementwiseProblem, ElementwiseTemplate};
use rtx_synthesis::templates::gemm::wgmma::WgmmaGemm;
use rtx_synthesis::templates::gemm::{GemmProblem, Layout, MmaGemm, SimtGemm};
use rtx_synthesis::templates::reduce::{RowProblem, RowReduceTemplate};
use rtx_synthesis::templates::{ConstraintViolation, KernelSource, Template};
use rtx_synthesis::{Arch, DType};

/// One kernel instance to compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileCase {
    /// Unique name (the entry point, which encodes the config).
    pub name: String,
    /// Registry family it came from.
    pub family: &'static str,
    /// The generated source.
    pub source: KernelSource,
}

/// Knobs of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// At most this many configs per (template, problem): the default config, then the rest of
    /// the valid space at evenly spaced positions. `None`: the whole valid space.
    pub max_per_template: Option<usize>,
    /// Only these families (`--families`); `None`: all of them.
    pub families: Option<Vec<String>>,
}

/// Configs per (template, problem) of a normal run (`--all-configs` lifts the cap).
pub const DEFAULT_MAX_PER_TEMPLATE: usize = 12;

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            max_per_template: Some(DEFAULT_MAX_PER_TEMPLATE),
            families: None,
        }
    }
}

impl RegistryOptions {
    /// `--quick`: the default config plus two more per template.
    pub fn quick() -> Self {
        RegistryOptions {
            max_per_template: Some(3),
            families: None,
        }
    }

    /// `--all-configs`: every valid config.
    pub fn all() -> Self {
        RegistryOptions {
            max_per_template: None,
            families: None,
        }
    }
}

/// The first element plus `max - 1` of the rest at evenly spaced positions (all of `v` when it
/// has at most `max`).
pub fn spread<T: Clone>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    if max == 0 {
        return Vec::new();
    }
    let rest = &v[1..];
    let picks = max - 1;
    let mut out = vec![v[0].clone()];
    out.extend((0..picks).map(|i| rest[i * rest.len() / picks].clone()));
    out
}

/// A family could not produce its cases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("family `{family}` on {arch}: {reason}")]
pub struct FamilyError {
    /// The family.
    pub family: &'static str,
    /// The target.
    pub arch: Arch,
    /// Why (e.g. a config that passed `check` and then failed to emit).
    pub reason: String,
}

/// Builds a family's cases for one target.
pub type FamilyFn = fn(Arch, &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError>;

/// A named family.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Name shown in reports.
    pub name: &'static str,
    /// Builder.
    pub build: FamilyFn,
}

/// Every family, in report order. Add a template family here (one line) and write its function.
pub fn families() -> Vec<Family> {
    vec![
        Family {
            name: "samples",
            build: samples,
        },
        Family {
            name: "gemm_wgmma",
            build: gemm_wgmma,
        },
        Family {
            name: "gemm_simt",
            build: gemm_simt,
        },
        Family {
            name: "gemm_mma",
            build: gemm_mma,
        },
        Family {
            name: "elementwise",
            build: elementwise,
        },
        Family {
            name: "reduce",
            build: reduce,
        },
    ]
}

/// The rtx-bench sample kernels (every arch).
pub fn samples(_arch: Arch, _o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    Ok(SampleKernel::all()
        .into_iter()
        .map(|k| {
            let source = k.emit();
            CompileCase {
                name: source.entry.clone(),
                family: "samples",
                source,
            }
        })
        .collect())
}

/// Problems the wgmma family is compiled for: bf16 and f16 NN, bf16 NT, tf32 NN (B staged by
/// the transpose pre-pass: the kernel of the GPU suite's `rtx-wgmma-* tf32 4096x4096x4096` and
/// `8192x8192x8192` rows) and tf32 NT (read in place). Layouts and dtypes are compile-time;
/// shapes are run-time, so the shape only has to be valid.
pub fn gemm_wgmma_problems() -> Vec<GemmProblem> {
    vec![
        GemmProblem::nn(4096, 4096, 4096, DType::Bf16),
        GemmProblem::nn(4096, 4096, 4096, DType::F16),
        GemmProblem::new(4096, 4096, 4096, DType::Bf16, Layout::Row, Layout::Col),
        GemmProblem::nn(4096, 4096, 4096, DType::Tf32),
        GemmProblem::new(4096, 4096, 4096, DType::Tf32, Layout::Row, Layout::Col),
    ]
}

/// The Hopper wgmma GEMM template (sm_90a only; nothing for other targets).
pub fn gemm_wgmma(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    let t = WgmmaGemm::default();
    let mut v = Vec::new();
    for p in gemm_wgmma_problems() {
        v.extend(from_template("gemm_wgmma", &t, &p, arch, o)?);
    }
    Ok(v)
}

/// `o` with its per-template cap lowered to `max` (families with many problems use this so a
/// normal run stays a few minutes); `--all-configs` (no cap) stays uncapped.
pub fn capped(o: &RegistryOptions, max: usize) -> RegistryOptions {
    RegistryOptions {
        max_per_template: o.max_per_template.map(|m| m.min(max)),
        families: o.families.clone(),
    }
}

/// Configs per problem of the families with many problems (mma, elementwise, reduce).
pub const SMALL_FAMILY_CAP: usize = 4;
/// The same under `--quick` (any cap of at most 3): the default config plus one more.
pub const SMALL_FAMILY_QUICK_CAP: usize = 2;

/// The cap of the families with many problems: [`SMALL_FAMILY_CAP`], or
/// [`SMALL_FAMILY_QUICK_CAP`] when `o` is a quick run; none with `--all-configs`.
pub fn small_family(o: &RegistryOptions) -> RegistryOptions {
    let quick = o.max_per_template.is_some_and(|m| m <= 3);
    capped(
        o,
        if quick {
            SMALL_FAMILY_QUICK_CAP
        } else {
            SMALL_FAMILY_CAP
        },
    )
}

/// Problems of the SIMT family: f32 NN and TN.
pub fn gemm_simt_problems() -> Vec<GemmProblem> {
    vec![
        GemmProblem::nn(4096, 4096, 4096, DType::F32),
        GemmProblem::new(4096, 4096, 4096, DType::F32, Layout::Col, Layout::Row),
    ]
}

/// The fp32 CUDA-core GEMM template (every arch).
pub fn gemm_simt(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    let mut v = Vec::new();
    for p in gemm_simt_problems() {
        v.extend(from_template("gemm_simt", &SimtGemm, &p, arch, o)?);
    }
    Ok(v)
}

/// Problems of the mma.sync family: f16 / bf16 / tf32 NN, and bf16 NT.
pub fn gemm_mma_problems() -> Vec<GemmProblem> {
    vec![
        GemmProblem::nn(4096, 4096, 4096, DType::F16),
        GemmProblem::nn(4096, 4096, 4096, DType::Bf16),
        GemmProblem::nn(4096, 4096, 4096, DType::Tf32),
        GemmProblem::new(4096, 4096, 4096, DType::Bf16, Layout::Row, Layout::Col),
    ]
}

/// The mma.sync tensor-core GEMM template (sm_90a and sm_120).
pub fn gemm_mma(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    let o = small_family(o);
    let mut v = Vec::new();
    for p in gemm_mma_problems() {
        v.extend(from_template(
            "gemm_mma",
            &MmaGemm::default(),
            &p,
            arch,
            &o,
        )?);
    }
    Ok(v)
}

/// Problems of the elementwise family: the anchors' `gelu(x*1.5+0.5)` (bf16), the 8-op chain
/// (bf16, f16, f32) and three seeded random 6-op graphs (bf16).
pub fn elementwise_problems() -> Result<Vec<ElementwiseProblem>, String> {
    let mut graphs_ = vec![
        graphs::gelu_affine(DType::Bf16).map_err(|e| e.to_string())?,
        graphs::chain8(DType::Bf16).map_err(|e| e.to_string())?,
        graphs::chain8(DType::F16).map_err(|e| e.to_string())?,
        graphs::chain8(DType::F32).map_err(|e| e.to_string())?,
    ];
    for seed in 1..=3 {
        graphs_.push(graphs::random_graph(seed, 6, DType::Bf16).map_err(|e| e.to_string())?);
    }
    Ok(graphs_
        .into_iter()
        .map(|g| ElementwiseProblem::new(g, 16384, 3072))
        .collect())
}

/// The fused elementwise template (every arch).
pub fn elementwise(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    let o = small_family(o);
    let problems = elementwise_problems().map_err(|reason| FamilyError {
        family: "elementwise",
        arch,
        reason,
    })?;
    let mut v = Vec::new();
    for p in problems {
        for c in from_template("elementwise", &ElementwiseTemplate, &p, arch, &o)? {
            // Two graphs may share a config and (by fingerprint) an entry name only if they
            // are the same graph; keep the first.
            if !v.iter().any(|x: &CompileCase| x.name == c.name) {
                v.push(c);
            }
        }
    }
    Ok(v)
}

/// Problems of the row-reduction family: softmax, LayerNorm (affine) and RMSNorm (weight) at
/// 16384 x 3072 for f32, f16 and bf16.
pub fn reduce_problems() -> Vec<RowProblem> {
    let mut v = Vec::new();
    for d in [DType::F32, DType::F16, DType::Bf16] {
        v.push(RowProblem::softmax(16384, 3072, d));
        v.push(RowProblem::layernorm(16384, 3072, d, true, true, 1e-5));
        v.push(RowProblem::rmsnorm(16384, 3072, d, true, 1e-6));
    }
    v
}

/// The softmax / LayerNorm / RMSNorm template (every arch).
pub fn reduce(arch: Arch, o: &RegistryOptions) -> Result<Vec<CompileCase>, FamilyError> {
    let o = small_family(o);
    let mut v = Vec::new();
    for p in reduce_problems() {
        for c in from_template("reduce", &RowReduceTemplate, &p, arch, &o)? {
            if !v.iter().any(|x: &CompileCase| x.name == c.name) {
                v.push(c);
            }
        }
    }
    Ok(v)
}

/// Cases for one `Template` and problem: the default config first, then the valid space in its
/// order, de-duplicated and capped by `o.max_per_template`.
pub fn from_template<T: Template>(
    family: &'static str,
    t: &T,
    problem: &T::Problem,
    arch: Arch,
    o: &RegistryOptions,
) -> Result<Vec<CompileCase>, FamilyError> {
    let fail = |e: ConstraintViolation| FamilyError {
        family,
        arch,
        reason: e.to_string(),
    };
    let mut configs = Vec::new();
    let default = t.default_config(problem, arch);
    if t.check(problem, &default, arch).is_ok() {
        configs.push(default);
    }
    for c in t.valid_space(problem, arch) {
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    if let Some(max) = o.max_per_template {
        configs = spread(&configs, max);
    }
    configs
        .iter()
        .map(|c| {
            let source = t.emit(problem, c, arch).map_err(fail)?;
            Ok(CompileCase {
                name: source.entry.clone(),
                family,
                source,
            })
        })
        .collect()
}

/// Every case of every family for each target, plus the families that failed.
pub fn all_cases(
    archs: &[Arch],
    o: &RegistryOptions,
) -> (Vec<(Arch, CompileCase)>, Vec<FamilyError>) {
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for &arch in archs {
        for f in families() {
            if o.families
                .as_ref()
                .is_some_and(|only| !only.iter().any(|n| n == f.name))
            {
                continue;
            }
            match (f.build)(arch, o) {
                Ok(v) => cases.extend(v.into_iter().map(|c| (arch, c))),
                Err(e) => errors.push(e),
            }
        }
    }
    (cases, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_synthesis::templates::LaunchDims;

    #[test]
    fn names_are_unique_per_arch() {
        let (cases, errs) = all_cases(&[Arch::Sm90a, Arch::Sm120], &RegistryOptions::default());
        assert!(errs.is_empty(), "{errs:?}");
        assert!(!cases.is_empty());
        let mut keys: Vec<_> = cases
            .iter()
            .map(|(a, c)| format!("{a}/{}", c.name))
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "duplicate case names");
        assert!(cases.iter().all(|(_, c)| c.name == c.source.entry));
        for f in families() {
            assert!(
                cases.iter().any(|(_, c)| c.family == f.name),
                "family {} has no case",
                f.name
            );
        }
    }

    /// A toy template: configs 1..=6, odd ones invalid, default 4.
    struct Toy;
    impl Template for Toy {
        type Problem = ();
        type Config = u32;
        fn name(&self) -> &'static str {
            "toy"
        }
        fn version(&self) -> u32 {
            1
        }
        fn space(&self, _: &(), _: Arch) -> Vec<u32> {
            (1..=6).collect()
        }
        fn check(&self, _: &(), c: &u32, _: Arch) -> Result<(), ConstraintViolation> {
            if c % 2 == 1 {
                Err(ConstraintViolation {
                    template: "toy".into(),
                    config: c.to_string(),
                    reason: "odd".into(),
                })
            } else {
                Ok(())
            }
        }
        fn default_config(&self, _: &(), _: Arch) -> u32 {
            4
        }
        fn emit(&self, p: &(), c: &u32, a: Arch) -> Result<KernelSource, ConstraintViolation> {
            self.check(p, c, a)?;
            Ok(KernelSource {
                entry: format!("toy_{c}"),
                code: String::new(),
                template: "toy".into(),
                template_version: 1,
                options: vec![],
            })
        }
        fn launch(&self, _: &(), _: &u32) -> LaunchDims {
            LaunchDims {
                grid: [1; 3],
                block: [1; 3],
                dynamic_smem: 0,
            }
        }
    }

    #[test]
    fn family_filter_selects_families() {
        let o = RegistryOptions {
            families: Some(vec!["samples".into()]),
            ..RegistryOptions::quick()
        };
        let (cases, _) = all_cases(&[Arch::Sm90a], &o);
        assert!(!cases.is_empty());
        assert!(cases.iter().all(|(_, c)| c.family == "samples"));
    }

    #[test]
    fn spread_keeps_the_first_and_spaces_the_rest() {
        let v: Vec<u32> = (0..10).collect();
        assert_eq!(spread(&v, 4), vec![0, 1, 4, 7]);
        assert_eq!(spread(&v, 20), v);
        assert_eq!(spread(&v, 1), vec![0]);
        assert!(spread(&v, 0).is_empty());
    }

    #[test]
    fn new_families_cover_both_targets() {
        let o = RegistryOptions::quick();
        for arch in [Arch::Sm90a, Arch::Sm120] {
            let simt = gemm_simt(arch, &o).unwrap();
            assert!(simt.len() >= gemm_simt_problems().len(), "{arch}");
            let mma = gemm_mma(arch, &o).unwrap();
            for d in ["f16", "bf16", "tf32"] {
                assert!(
                    mma.iter().any(|c| c.name.contains(d)),
                    "{arch}: no mma {d} case"
                );
            }
            assert!(elementwise(arch, &o).unwrap().len() >= 7, "{arch}");
            assert!(reduce(arch, &o).unwrap().len() >= 9, "{arch}");
            assert!(mma.len() <= SMALL_FAMILY_QUICK_CAP * gemm_mma_problems().len());
        }
    }

    #[test]
    fn capped_lowers_but_keeps_unlimited() {
        assert_eq!(
            capped(&RegistryOptions::default(), 4).max_per_template,
            Some(4)
        );
        assert_eq!(
            capped(&RegistryOptions::quick(), 4).max_per_template,
            Some(3)
        );
        assert_eq!(capped(&RegistryOptions::all(), 4).max_per_template, None);
        assert_eq!(
            small_family(&RegistryOptions::quick()).max_per_template,
            Some(2)
        );
        assert_eq!(
            small_family(&RegistryOptions::default()).max_per_template,
            Some(4)
        );
    }

    #[test]
    fn wgmma_family_is_hopper_only() {
        let o = RegistryOptions::quick();
        let hopper = gemm_wgmma(Arch::Sm90a, &o).unwrap();
        assert_eq!(hopper.len(), 3 * gemm_wgmma_problems().len());
        assert!(hopper
            .iter()
            .all(|c| c.source.entry.starts_with("rtx_wgmma_")));
        assert!(gemm_wgmma(Arch::Sm120, &o).unwrap().is_empty());
        for (layouts, prepass) in [("_rr_", true), ("_rc_", false)] {
            let tf32: Vec<_> = hopper
                .iter()
                .filter(|c| c.name.starts_with("rtx_wgmma_tf32") && c.name.contains(layouts))
                .collect();
            assert_eq!(tf32.len(), 3, "{layouts}");
            assert!(tf32.iter().all(|c| c.source.code.contains(".f32.tf32.tf32")
                && c.source.code.contains("int prepass") == prepass));
        }
    }

    #[test]
    fn from_template_puts_the_default_first_and_caps() {
        let all =
            from_template("toy", &Toy, &(), Arch::Sm90a, &RegistryOptions::default()).unwrap();
        let names: Vec<_> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["toy_4", "toy_2", "toy_6"]);
        let capped = from_template(
            "toy",
            &Toy,
            &(),
            Arch::Sm90a,
            &RegistryOptions {
                max_per_template: Some(2),
                families: None,
            },
        )
        .unwrap();
        assert_eq!(capped.len(), 2);
        assert_eq!(capped[0].name, "toy_4");
    }
}
