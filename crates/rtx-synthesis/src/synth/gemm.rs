//! The GEMM user API: [`GemmSpec`] (what to compute), family selection ([`select_family`]) and
//! [`GemmKernel`] (a compiled, loaded kernel that checks its buffers at every launch).

use super::buffers::{check_buffer_sizes, BufferSizes, GemmBuffers, GemmLaunchError};
use super::error::{FamilyRejection, SynthError};
use super::family::GemmFamily;
use crate::templates::gemm::wgmma::WgmmaGemm;
use crate::templates::gemm::{Epilogue, GemmProblem, Layout, MmaGemm, SimtGemm};
use crate::tuner::LookupSource;
use crate::{Arch, DType};
use rtx_runtime::{DeviceBuffer, DeviceInfo, Function, Stream};
use serde::{Deserialize, Serialize};

/// What to compute: `C (m x n, row-major) = epilogue(op(A) (m x k) * op(B) (k x n))`, packed
/// operands, `batch` strided entries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmSpec {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Inner dimension.
    pub k: u32,
    /// Strided batch entries (1 for a plain GEMM).
    pub batch: u32,
    /// Input dtype of A and B.
    pub dtype: DType,
    /// Layout of A (`Row` = "N").
    pub layout_a: Layout,
    /// Layout of B (`Row` = "N").
    pub layout_b: Layout,
    /// The fused epilogue (its `out_dtype` must be f32 for f32/tf32 inputs).
    pub epilogue: Epilogue,
}

impl Default for GemmSpec {
    /// A 1x1x1 bf16 NN GEMM with a plain bf16 epilogue (override the fields you need).
    fn default() -> Self {
        GemmSpec::new(1, 1, 1, DType::Bf16)
    }
}

impl GemmSpec {
    /// A plain, unbatched NN GEMM writing the input dtype (f32 for tf32).
    pub fn new(m: u32, n: u32, k: u32, dtype: DType) -> Self {
        let p = GemmProblem::nn(m, n, k, dtype);
        GemmSpec {
            m,
            n,
            k,
            batch: 1,
            dtype,
            layout_a: Layout::Row,
            layout_b: Layout::Row,
            epilogue: p.epilogue,
        }
    }

    /// The same GEMM with these operand layouts.
    pub fn with_layouts(mut self, layout_a: Layout, layout_b: Layout) -> Self {
        self.layout_a = layout_a;
        self.layout_b = layout_b;
        self
    }

    /// The packed problem, validated (zero dims, dtype/out-dtype mismatches, non-finite scales
    /// are refused, naming the field).
    pub fn problem(&self) -> Result<GemmProblem, SynthError> {
        let mut p = GemmProblem::new(
            self.m,
            self.n,
            self.k,
            self.dtype,
            self.layout_a,
            self.layout_b,
        )
        .batched(self.batch);
        p.epilogue = self.epilogue;
        p.validate()?;
        Ok(p)
    }
}

/// Parses `MxNxK` (e.g. `4096x4096x4096`).
pub fn parse_mnk(s: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = s.split(['x', 'X']).collect();
    if parts.len() != 3 {
        return Err(format!("`{s}`: expected MxNxK, e.g. 4096x4096x4096"));
    }
    let mut v = [0u32; 3];
    for (slot, (part, name)) in v.iter_mut().zip(parts.iter().zip(["M", "N", "K"])) {
        *slot = part
            .trim()
            .parse()
            .map_err(|e| format!("`{s}`: {name} = `{part}`: {e}"))?;
        if *slot == 0 {
            return Err(format!("`{s}`: {name} must be >= 1"));
        }
    }
    Ok((v[0], v[1], v[2]))
}

/// Parses a BLAS-style layout pair: `nn`, `nt`, `tn`, `tt` (`n` = row-major, `t` = column-major).
pub fn parse_layouts(s: &str) -> Result<(Layout, Layout), String> {
    let one = |c: char| match c {
        'n' | 'N' => Ok(Layout::Row),
        't' | 'T' => Ok(Layout::Col),
        _ => Err(format!("`{s}`: layouts are two of n/t (nn, nt, tn, tt)")),
    };
    let cs: Vec<char> = s.chars().collect();
    if cs.len() != 2 {
        return Err(format!("`{s}`: layouts are two of n/t (nn, nt, tn, tt)"));
    }
    Ok((one(cs[0])?, one(cs[1])?))
}

/// The template families the synthesizer can serve a GEMM with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmFamilyKind {
    /// Hopper wgmma + TMA ([`WgmmaGemm`]).
    Wgmma,
    /// Tensor cores through `mma.sync` ([`MmaGemm`], sm_80+).
    Mma,
    /// fp32 on the CUDA cores ([`SimtGemm`], any arch).
    Simt,
}

impl GemmFamilyKind {
    /// The family's short name (`wgmma`, `mma`, `simt`).
    pub fn name(self) -> &'static str {
        match self {
            GemmFamilyKind::Wgmma => WgmmaGemm::FAMILY,
            GemmFamilyKind::Mma => MmaGemm::FAMILY,
            GemmFamilyKind::Simt => SimtGemm::FAMILY,
        }
    }

    /// Parses a short family name.
    pub fn parse(s: &str) -> Option<GemmFamilyKind> {
        [
            GemmFamilyKind::Wgmma,
            GemmFamilyKind::Mma,
            GemmFamilyKind::Simt,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// Whether `family` accepts `p` on `arch` (its default config passes `check()`).
pub fn family_accepts<F: GemmFamily>(
    family: &F,
    p: &GemmProblem,
    arch: Arch,
) -> Result<(), String> {
    family
        .check(p, &family.default_config(p, arch), arch)
        .map_err(|v| v.reason)
}

/// [`family_accepts`] for the family `kind` names, configured for the device `info`.
fn kind_accepts(
    kind: GemmFamilyKind,
    p: &GemmProblem,
    arch: Arch,
    info: &DeviceInfo,
) -> Result<(), String> {
    match kind {
        GemmFamilyKind::Wgmma => family_accepts(&WgmmaGemm::for_device(info), p, arch),
        GemmFamilyKind::Mma => family_accepts(&MmaGemm::for_device(info), p, arch),
        GemmFamilyKind::Simt => family_accepts(&SimtGemm::for_device(info), p, arch),
    }
}

/// The families tried for `p` on `arch`, in order of preference: f32 on the CUDA cores
/// (any arch); f16/bf16/tf32 with wgmma on sm_90a (tf32 M/N-major operands through its
/// transpose pre-pass, or for tf32 NN at small M its register-A transposed product) except tf32
/// where the pre-pass bounds it ([`tf32_staging_bound`] and not [`tf32_register_a_serves`]:
/// mma.sync first), else mma.sync. A problem wgmma refuses (e.g. a K-major operand whose
/// row pitch is not a multiple of 16 bytes) falls back to mma.sync.
pub fn family_candidates(p: &GemmProblem, arch: Arch) -> Vec<GemmFamilyKind> {
    match p.dtype {
        DType::F32 => vec![GemmFamilyKind::Simt],
        DType::Tf32
            if arch == Arch::Sm90a && tf32_staging_bound(p) && !tf32_register_a_serves(p) =>
        {
            vec![GemmFamilyKind::Mma, GemmFamilyKind::Wgmma]
        }
        DType::F16 | DType::Bf16 | DType::Tf32 if arch == Arch::Sm90a => {
            vec![GemmFamilyKind::Wgmma, GemmFamilyKind::Mma]
        }
        DType::F16 | DType::Bf16 | DType::Tf32 => vec![GemmFamilyKind::Mma],
    }
}

/// Whether wgmma serves `p` without staging through its register-A default
/// ([`WgmmaGemm::tf32_register_a_config`]: tf32 NN, M <= 256, a B that TMA reads in place).
/// Where it does, wgmma comes before mma.sync even inside [`tf32_staging_bound`]: H100, call
/// DG (session 32), 1.2-2.9x faster than what was served at the nine shapes timed against it
/// (e.g. 160 x 8192^2 104.3 us against mma's 305.6, 1.51x cuBLAS).
pub fn tf32_register_a_serves(p: &GemmProblem) -> bool {
    WgmmaGemm::default().tf32_register_a_config(p).is_some()
}

/// B operand size (one batch entry) from which tf32 with 64 < M <= 256 goes to mma.sync
/// ([`tf32_staging_bound`]): 32 MiB (64 MiB until call CQ).
pub const TF32_MMA_MIN_B_BYTES: u64 = 32 << 20;

/// Whether wgmma's tf32 staging pre-pass would bound `p`, so mma.sync serves it better: a
/// row-major (N-major) B, which wgmma first transposes through global memory, and either
/// M <= 64, or M <= 256 with a B of at least [`TF32_MMA_MIN_B_BYTES`].
///
/// H100, mma.sync at its defaults against wgmma, each with cuBLAS timed alternately:
/// - call CM, 3 rounds: 64 / 128 / 192 / 256 x 8192^2 110.1 / 162.3 / 306.6 / 269.7 us
///   (1.01 / 0.69 / 0.70 / 0.46x cuBLAS) against 340.8 / 342.1 / 347.8 / 351.4 (0.33 / 0.33 /
///   0.62 / 0.35x); 96 x 4096^2 67.3 against 104.3 us.
/// - call CP, 2 rounds: mma won at every M <= 64 (32 x 8192^2 108.8 against 341.8 us,
///   64 x 11008 x 4096 110.2 / 250.7, 64 x 2048^2 25.0 / 32.9, 64 x 1024^2 16.8 / 18.1) and at
///   256 x 11008 x 4096 (202.5 / 236.4). Above M = 64 with a smaller B, wgmma won or tied: its
///   pre-pass is cheap there and mma's grid is thin. 256 x 1024 x 8192 (B 32 MiB) 76.5 against
///   199.1 us, 256 x 2048^2 34.8 / 54.4, 256 x 1024^2 18.4 / 30.4, 128 x 4096 x 1024 29.3 /
///   31.7; ties at 256 x 4096^2 (64 MiB, 103.0 / 103.7) and 200 x 3000^2 (80.0 / 80.0).
/// - At 1024^3 wgmma stays ahead (22.1 against 24.8 us tuned, calls CK and CL).
/// - call CQ, 2 rounds, 18 shapes, with mma splitting K where its grid is under one wave
///   (`mma::tf32_small_m_config`): mma won at every thin grid, B 32 MiB included
///   (256 x 1024 x 8192 71.7 against 76.5 us, 128 x 1024 x 8192 61.4 / 76.1, 256 x 2048 x 8192
///   97.2 / 117.9, 192 x 1024 x 16384 103.2 / 142.4, 256 x 4096^2 90.3 / 101.2), so the bound
///   fell from 64 to 32 MiB. Misses: 224 x 6144^2 (mma 232.0 against 221.3 us) and
///   200 x 5000^2 (193.2 / 174.8); a tie at 256 x 16384 x 2048 (170.6 / 168.3).
/// - call CR, 4 rounds, nine shapes new to the 32 MiB rule: it served the faster family at five
///   (112 x 2048 x 8192 72.3 against 109.0 us; 200 x 3000^2 74.0 / 78.4), two tie, two miss
///   (144 x 3072^2 70.8 against 65.2; 240 x 1536 x 8192 102.0 / 94.6). No feature looked at
///   (grid, M modulo 64, B size) separates the four misses from the wins.
///
/// The bound was drawn from calls CM, CP and CQ (31 shapes).
pub fn tf32_staging_bound(p: &GemmProblem) -> bool {
    let b_bytes = p.k as u64 * p.n as u64 * p.dtype.size_bytes() as u64;
    p.dtype == DType::Tf32
        && p.layout_b == Layout::Row
        && (p.m <= 64 || (p.m <= 256 && b_bytes >= TF32_MMA_MIN_B_BYTES))
}

/// Picks the family for `p` on `arch` (`info` configures each candidate): the first of
/// [`family_candidates`] whose default config accepts the problem; otherwise
/// [`SynthError::NoTemplate`] with every candidate's reason.
pub fn select_family(
    p: &GemmProblem,
    arch: Arch,
    info: &DeviceInfo,
) -> Result<GemmFamilyKind, SynthError> {
    let mut reasons = Vec::new();
    for kind in family_candidates(p, arch) {
        match kind_accepts(kind, p, arch, info) {
            Ok(()) => return Ok(kind),
            Err(reason) => reasons.push(FamilyRejection {
                family: kind.name(),
                reason,
            }),
        }
    }
    Err(SynthError::NoTemplate {
        problem: Box::new(*p),
        arch,
        reasons,
    })
}

/// Checks that family `kind` can serve `p` on `arch`: it is one of [`family_candidates`] and its
/// default config accepts the problem; otherwise [`SynthError::BadRequest`] naming the family
/// and the reason.
pub fn check_family(
    p: &GemmProblem,
    arch: Arch,
    info: &DeviceInfo,
    kind: GemmFamilyKind,
) -> Result<(), SynthError> {
    let bad = |why: String| {
        SynthError::BadRequest(format!(
            "family {} cannot serve {}x{}x{} {} on {arch}: {why}",
            kind.name(),
            p.m,
            p.n,
            p.k,
            p.dtype
        ))
    };
    let offered = family_candidates(p, arch);
    if !offered.contains(&kind) {
        let names: Vec<&str> = offered.into_iter().map(GemmFamilyKind::name).collect();
        return Err(bad(format!(
            "not offered for this dtype and arch (offered: {})",
            names.join(", ")
        )));
    }
    kind_accepts(kind, p, arch, info).map_err(bad)
}

/// A family and config bound together, launchable without knowing the family's type.
pub(crate) trait ErasedGemm: Send + Sync {
    fn enqueue(
        &self,
        f: &Function,
        p: &GemmProblem,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError>;
}

/// [`ErasedGemm`] for one family.
pub(crate) struct Bound<F: GemmFamily> {
    pub(crate) family: F,
    pub(crate) config: F::Config,
}

impl<F: GemmFamily> ErasedGemm for Bound<F> {
    fn enqueue(
        &self,
        f: &Function,
        p: &GemmProblem,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError> {
        self.family.enqueue_gemm(f, p, &self.config, bufs, stream)
    }
}

/// A synthesized GEMM: compiled, loaded, and bound to one problem.
pub struct GemmKernel {
    pub(crate) problem: GemmProblem,
    pub(crate) template: &'static str,
    pub(crate) source: LookupSource,
    pub(crate) config: serde_json::Value,
    pub(crate) function: Function,
    pub(crate) launcher: Box<dyn ErasedGemm>,
}

impl std::fmt::Debug for GemmKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmKernel")
            .field("entry", &self.function.name())
            .field("template", &self.template)
            .field("source", &self.source)
            .field("config", &self.config)
            .finish()
    }
}

impl GemmKernel {
    /// `c = epilogue(a * b)`; for epilogues without bias/residual (else use
    /// [`GemmKernel::launch_with`]). Checks every buffer's size first; does not synchronize.
    pub fn launch(
        &self,
        stream: &Stream,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &mut DeviceBuffer,
    ) -> Result<(), SynthError> {
        self.launch_with(
            stream,
            &mut GemmBuffers {
                a,
                b,
                c,
                bias: None,
                residual: None,
            },
        )
    }

    /// Launches with every operand given explicitly (bias/residual when the epilogue uses them).
    /// A missing or short buffer is refused with [`GemmLaunchError::MissingBuffer`] /
    /// [`GemmLaunchError::BufferTooSmall`] naming it; does not synchronize.
    pub fn launch_with(
        &self,
        stream: &Stream,
        bufs: &mut GemmBuffers<'_>,
    ) -> Result<(), SynthError> {
        check_buffer_sizes(&self.problem, &BufferSizes::of(bufs))?;
        self.launcher
            .enqueue(&self.function, &self.problem, bufs, stream)?;
        Ok(())
    }

    /// The problem it computes.
    pub fn problem(&self) -> &GemmProblem {
        &self.problem
    }

    /// The template that generated it.
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// Where its config came from (tuned exactly, borrowed from a nearby shape, or the default).
    pub fn source(&self) -> &LookupSource {
        &self.source
    }

    /// Its config in JSON form.
    pub fn config(&self) -> &serde_json::Value {
        &self.config
    }

    /// The kernel entry point name.
    pub fn entry(&self) -> &str {
        self.function.name()
    }
}

/// A short name of a lookup source for logs (`exact`, `nearest_bucket`, `default`).
pub fn source_name(s: &LookupSource) -> &'static str {
    match s {
        LookupSource::Exact => "exact",
        LookupSource::NearestBucket { .. } => "nearest_bucket",
        LookupSource::Default => "default",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_layouts_parse_and_bad_ones_are_named() {
        assert_eq!(parse_mnk("4096x2048x512").unwrap(), (4096, 2048, 512));
        assert!(parse_mnk("4096x2048").unwrap_err().contains("MxNxK"));
        assert!(parse_mnk("4096xAx5").unwrap_err().contains("N = `A`"));
        assert!(parse_mnk("0x1x1").unwrap_err().contains("M must be >= 1"));
        assert_eq!(parse_layouts("nt").unwrap(), (Layout::Row, Layout::Col));
        assert_eq!(parse_layouts("TN").unwrap(), (Layout::Col, Layout::Row));
        assert!(parse_layouts("nx").is_err() && parse_layouts("n").is_err());
    }

    #[test]
    fn spec_validation_names_the_field() {
        assert!(GemmSpec::new(128, 128, 128, DType::Bf16).problem().is_ok());
        let e = GemmSpec {
            m: 0,
            ..GemmSpec::new(1, 1, 1, DType::F16)
        }
        .problem()
        .unwrap_err();
        assert!(e.to_string().contains("m=0"), "{e}");
        // Default epilogue writes bf16; an f32 GEMM must write f32.
        let e = GemmSpec {
            m: 8,
            n: 8,
            k: 8,
            dtype: DType::F32,
            ..Default::default()
        }
        .problem()
        .unwrap_err();
        assert!(e.to_string().contains("out_dtype"), "{e}");
        assert!(GemmSpec::new(8, 8, 8, DType::F32).problem().is_ok());
        let p = GemmSpec {
            batch: 3,
            ..GemmSpec::new(64, 32, 16, DType::F16).with_layouts(Layout::Col, Layout::Row)
        }
        .problem()
        .unwrap();
        assert_eq!((p.batch, p.layout_a, p.lda), (3, Layout::Col, 64));
    }

    #[test]
    fn wgmma_is_selected_on_hopper_for_16_bit_inputs() {
        let info = DeviceInfo::example_sm90();
        let p = GemmSpec::new(512, 512, 512, DType::Bf16).problem().unwrap();
        assert_eq!(
            select_family(&p, Arch::Sm90a, &info).unwrap(),
            GemmFamilyKind::Wgmma
        );
    }

    /// Problems every family used to accept: batch strides whose extent overflows (a panic in
    /// debug, wrapped buffer sizes in release) and batch entries of C that overlap.
    #[test]
    fn overflowing_strides_and_overlapping_c_find_no_family() {
        let info = DeviceInfo::example_sm90();
        let mut f = GemmProblem::nn(64, 64, 64, DType::F32).batched(2);
        f.stride_a = 1 << 62;
        let mut b = GemmProblem::nn(128, 128, 128, DType::Bf16).batched(2);
        b.stride_a = 1 << 63;
        let reasons = |p: &GemmProblem, arch: Arch| match select_family(p, arch, &info) {
            Err(SynthError::NoTemplate { reasons, .. }) => reasons,
            other => panic!("{arch}: {other:?}"),
        };
        for (p, arch) in [(f, Arch::Sm90a), (b, Arch::Sm90a), (b, Arch::Sm80)] {
            for r in reasons(&p, arch) {
                assert!(r.reason.contains("stride_a"), "{arch}: {r:?}");
            }
        }
        for (dt, arch) in [
            (DType::F32, Arch::Sm90a),
            (DType::Bf16, Arch::Sm90a),
            (DType::Bf16, Arch::Sm80),
        ] {
            let mut p = GemmSpec {
                batch: 4,
                ..GemmSpec::new(128, 128, 128, dt)
            }
            .problem()
            .unwrap();
            select_family(&p, arch, &info).unwrap();
            for stride_c in [0, 64] {
                p.stride_c = stride_c;
                for r in reasons(&p, arch) {
                    assert!(r.reason.contains("overlap"), "{dt} {arch}: {r:?}");
                }
            }
        }
    }

    /// A tf32 problem whose operands exceed 2^63 bytes: the staging pre-pass's size
    /// (m * k * 4 per batch entry) used to overflow inside `select_family`.
    #[test]
    fn tf32_operands_beyond_i64_bytes_find_no_family_without_overflowing() {
        let info = DeviceInfo::example_sm90();
        let spec = GemmSpec {
            batch: 2,
            ..GemmSpec::new(i32::MAX as u32, 64, i32::MAX as u32, DType::Tf32)
                .with_layouts(Layout::Col, Layout::Col)
        };
        let outcome = spec
            .problem()
            .map(|p| select_family(&p, Arch::Sm90a, &info));
        match outcome {
            Err(e) => assert!(e.to_string().contains("extent"), "{e}"),
            Ok(Err(SynthError::NoTemplate { reasons, .. })) => {
                for r in reasons {
                    assert!(r.reason.contains("extent"), "{r:?}");
                }
            }
            Ok(other) => panic!("expected no family, got {other:?}"),
        }
    }

    #[test]
    fn every_dtype_has_its_family() {
        let info = DeviceInfo::example_sm90();
        let f32p = GemmSpec::new(512, 512, 512, DType::F32).problem().unwrap();
        for arch in [Arch::Sm70, Arch::Sm80, Arch::Sm90a, Arch::Sm120] {
            assert_eq!(
                select_family(&f32p, arch, &info).unwrap(),
                GemmFamilyKind::Simt,
                "{arch}"
            );
        }
        let bf = GemmSpec::new(512, 512, 512, DType::Bf16).problem().unwrap();
        assert_eq!(
            select_family(&bf, Arch::Sm80, &info).unwrap(),
            GemmFamilyKind::Mma
        );
        assert_eq!(
            select_family(&bf, Arch::Sm120, &info).unwrap(),
            GemmFamilyKind::Mma
        );
        // tf32: wgmma on Hopper for every layout (NN stages B through the pre-pass), mma.sync
        // elsewhere.
        for (la, lb) in [
            (Layout::Row, Layout::Row),
            (Layout::Row, Layout::Col),
            (Layout::Col, Layout::Row),
            (Layout::Col, Layout::Col),
        ] {
            let tf = GemmSpec::new(512, 512, 512, DType::Tf32)
                .with_layouts(la, lb)
                .problem()
                .unwrap();
            assert_eq!(
                select_family(&tf, Arch::Sm90a, &info).unwrap(),
                GemmFamilyKind::Wgmma,
                "{la:?}{lb:?}"
            );
            assert_eq!(
                select_family(&tf, Arch::Sm120, &info).unwrap(),
                GemmFamilyKind::Mma
            );
        }
        // A staged operand may have any pitch (NN, ldb = N = 1001): only wgmma takes it.
        let tf_odd = GemmSpec::new(512, 1001, 512, DType::Tf32)
            .problem()
            .unwrap();
        assert_eq!(
            select_family(&tf_odd, Arch::Sm90a, &info).unwrap(),
            GemmFamilyKind::Wgmma
        );
        // Odd leading dimensions: the SIMT path serves them with scalar accesses.
        let odd32 = GemmSpec::new(1001, 1001, 1001, DType::F32)
            .problem()
            .unwrap();
        assert_eq!(
            select_family(&odd32, Arch::Sm90a, &info).unwrap(),
            GemmFamilyKind::Simt
        );
        for k in [
            GemmFamilyKind::Wgmma,
            GemmFamilyKind::Mma,
            GemmFamilyKind::Simt,
        ] {
            assert_eq!(GemmFamilyKind::parse(k.name()), Some(k));
        }
        assert_eq!(GemmFamilyKind::parse("cublas"), None);
    }

    #[test]
    fn unserved_problems_get_a_typed_error_with_each_reason() {
        let info = DeviceInfo::example_sm90();
        // Before sm_80 there is no tensor-core family for 16-bit inputs.
        let bf = GemmSpec::new(512, 512, 512, DType::Bf16).problem().unwrap();
        match select_family(&bf, Arch::Sm75, &info) {
            Err(SynthError::NoTemplate { reasons, arch, .. }) => {
                assert_eq!(arch, Arch::Sm75);
                assert_eq!(reasons.len(), 1);
                assert_eq!(reasons[0].family, "mma");
                assert!(reasons[0].reason.contains("sm_80"), "{}", reasons[0].reason);
            }
            other => panic!("expected NoTemplate, got {other:?}"),
        }
        // Misaligned leading dimension (odd K, row-major A): TMA needs 16-byte rows, mma 8-half chunks.
        let odd = GemmSpec::new(512, 512, 1001, DType::Bf16)
            .problem()
            .unwrap();
        match select_family(&odd, Arch::Sm90a, &info) {
            Err(SynthError::NoTemplate { reasons, .. }) => {
                let fams: Vec<&str> = reasons.iter().map(|r| r.family).collect();
                assert_eq!(fams, ["wgmma", "mma"]);
                assert!(
                    reasons.iter().all(|r| r.reason.contains("lda=1001")),
                    "{reasons:?}"
                );
            }
            other => panic!("expected NoTemplate, got {other:?}"),
        }
    }

    #[test]
    fn a_forced_family_must_be_offered_and_accept_the_problem() {
        let info = DeviceInfo::example_sm90();
        let tf = GemmSpec::new(64, 8192, 8192, DType::Tf32)
            .problem()
            .unwrap();
        // tf32 on Hopper: wgmma is served, mma.sync may be tuned for comparison.
        check_family(&tf, Arch::Sm90a, &info, GemmFamilyKind::Wgmma).unwrap();
        check_family(&tf, Arch::Sm90a, &info, GemmFamilyKind::Mma).unwrap();
        let err = check_family(&tf, Arch::Sm90a, &info, GemmFamilyKind::Simt)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("family simt cannot serve 64x8192x8192 tf32")
                && err.contains("offered: wgmma, mma"),
            "{err}"
        );
        let bf = GemmSpec::new(512, 512, 512, DType::Bf16).problem().unwrap();
        let err = check_family(&bf, Arch::Sm80, &info, GemmFamilyKind::Wgmma)
            .unwrap_err()
            .to_string();
        assert!(err.contains("offered: mma"), "{err}");
        // Offered, but its constraints refuse the problem: the template's reason.
        let odd = GemmSpec::new(512, 1001, 512, DType::Tf32)
            .problem()
            .unwrap();
        let err = check_family(&odd, Arch::Sm90a, &info, GemmFamilyKind::Mma)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("family mma cannot serve") && err.contains("1001"),
            "{err}"
        );
    }

    #[test]
    fn tf32_with_a_staged_b_at_small_m_goes_to_mma() {
        let info = DeviceInfo::example_sm90();
        // A column-major A: the transposed product cannot take it, so a row-major B is staged
        // and the staging bound decides.
        let pick = |m, n, k, lb| {
            let p = GemmSpec::new(m, n, k, DType::Tf32)
                .with_layouts(Layout::Col, lb)
                .problem()
                .unwrap();
            select_family(&p, Arch::Sm90a, &info).unwrap()
        };
        let nn = |m, n, k| {
            let p = GemmSpec::new(m, n, k, DType::Tf32).problem().unwrap();
            select_family(&p, Arch::Sm90a, &info).unwrap()
        };
        for m in [1, 64, 128, 200, 256] {
            if m > 1 {
                // (M = 1: a column-major A of pitch 1 is refused by mma.sync.)
                assert_eq!(pick(m, 8192, 8192, Layout::Row), GemmFamilyKind::Mma, "{m}");
            }
            // NN: the register-A transposed product stages nothing (call DG, session 32).
            assert_eq!(nn(m, 8192, 8192), GemmFamilyKind::Wgmma, "{m}");
        }
        for (m, n, k) in [(96, 4096, 4096), (144, 3072, 3072), (240, 1536, 8192)] {
            assert_eq!(nn(m, n, k), GemmFamilyKind::Wgmma, "{m}x{n}x{k}");
        }
        // Call CP's shapes, each to the family that ran it faster (or tied).
        for (m, n, k, want) in [
            (32, 8192, 8192, GemmFamilyKind::Mma),
            (64, 2048, 2048, GemmFamilyKind::Mma),
            (64, 1024, 1024, GemmFamilyKind::Mma),
            (64, 11008, 4096, GemmFamilyKind::Mma),
            (96, 4096, 4096, GemmFamilyKind::Mma),
            (256, 11008, 4096, GemmFamilyKind::Mma),
            (256, 4096, 4096, GemmFamilyKind::Mma),
            (256, 2048, 2048, GemmFamilyKind::Wgmma),
            (256, 1024, 1024, GemmFamilyKind::Wgmma),
            (128, 4096, 1024, GemmFamilyKind::Wgmma),
            // Call CQ's, with mma's grid split to a wave (the two misses are left out:
            // 224 x 6144^2 and 200 x 5000^2 go to mma, wgmma ran them 5% and 10% faster).
            (256, 1024, 8192, GemmFamilyKind::Mma),
            (128, 1024, 8192, GemmFamilyKind::Mma),
            (256, 2048, 8192, GemmFamilyKind::Mma),
            (128, 2048, 8192, GemmFamilyKind::Mma),
            (192, 1024, 16384, GemmFamilyKind::Mma),
            (64, 512, 16384, GemmFamilyKind::Mma),
            (64, 4096, 8192, GemmFamilyKind::Mma),
            (48, 3072, 3072, GemmFamilyKind::Mma),
            (96, 8192, 2048, GemmFamilyKind::Mma),
            (160, 8192, 4096, GemmFamilyKind::Mma),
            (240, 8192, 8192, GemmFamilyKind::Mma),
            (32, 16384, 16384, GemmFamilyKind::Mma),
            (128, 12288, 3072, GemmFamilyKind::Mma),
        ] {
            assert_eq!(pick(m, n, k, Layout::Row), want, "{m}x{n}x{k}");
        }
        // Larger M, or a K-major B read in place: wgmma.
        assert_eq!(pick(257, 8192, 8192, Layout::Row), GemmFamilyKind::Wgmma);
        assert_eq!(pick(1024, 1024, 1024, Layout::Row), GemmFamilyKind::Wgmma);
        assert_eq!(pick(64, 8192, 8192, Layout::Col), GemmFamilyKind::Wgmma);
        // mma.sync refuses a pitch that is not a multiple of 16 bytes; wgmma stages it.
        assert_eq!(pick(64, 1001, 512, Layout::Row), GemmFamilyKind::Wgmma);
        // Off Hopper nothing changes: mma.sync serves tf32.
        let p = GemmSpec::new(64, 8192, 8192, DType::Tf32)
            .problem()
            .unwrap();
        assert_eq!(
            select_family(&p, Arch::Sm120, &info).unwrap(),
            GemmFamilyKind::Mma
        );
    }

    #[test]
    fn source_names_are_stable() {
        assert_eq!(source_name(&LookupSource::Exact), "exact");
        assert_eq!(
            source_name(&LookupSource::NearestBucket {
                from: vec![1],
                distance: 0.5
            }),
            "nearest_bucket"
        );
        assert_eq!(source_name(&LookupSource::Default), "default");
    }
}
