//! [`GemmFamily`]: what the synthesizer needs from a GEMM template beyond [`Template`] (a
//! constructor for the device at hand and a launch), implemented for the wgmma, mma.sync and
//! SIMT templates; and [`CappedSpace`], a template wrapper that caps the search space
//! deterministically.

use super::buffers::{GemmBuffers, GemmLaunchError};
use crate::templates::gemm::launch::{
    launch_gemm, ExtraArg, GemmBuffers as AbiBuffers, GemmLaunchError as AbiLaunchError,
};
use crate::templates::gemm::wgmma::{WgmmaBuffers, WgmmaGemm};
use crate::templates::gemm::{GemmProblem, MmaGemm, SimtGemm};
use crate::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use crate::Arch;
use rtx_runtime::{DeviceInfo, Function, Stream};

/// A GEMM template the synthesizer can select, tune and launch.
pub trait GemmFamily: Template<Problem = GemmProblem> + Clone + 'static {
    /// Short family name for messages (`wgmma`, `mma`, `simt`).
    const FAMILY: &'static str;

    /// The template configured for `info`'s device (SM count, ...).
    fn for_device(info: &DeviceInfo) -> Self;

    /// Launches `f` (compiled from [`Template::emit`] for `p`/`c`) on `stream` without
    /// synchronizing; checks `p`, `c` and the buffers first.
    fn enqueue_gemm(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &Self::Config,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError>;
}

impl GemmFamily for WgmmaGemm {
    const FAMILY: &'static str = "wgmma";

    fn for_device(info: &DeviceInfo) -> Self {
        WgmmaGemm::for_env(info.sm_count)
    }

    fn enqueue_gemm(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &Self::Config,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError> {
        let need = c.workspace_bytes(p.m, p.n, p.batch);
        let stage = WgmmaGemm::staging_bytes(p, c);
        // Split-K workspace and tf32 staging buffer come from separate per-stream pools, so the
        // staged operands (rewritten by every launch) never land on split-K counters.
        let mut launch =
            |workspace: Option<&mut rtx_runtime::DeviceBuffer>,
             staging: Option<&mut rtx_runtime::DeviceBuffer>| {
                let mut wb = WgmmaBuffers {
                    a: bufs.a,
                    b: bufs.b,
                    c: &mut *bufs.c,
                    bias: bufs.bias,
                    residual: bufs.residual,
                    workspace,
                    staging,
                };
                WgmmaGemm::enqueue(self, f, p, c, &mut wb, stream).map_err(GemmLaunchError::from)
            };
        let split = need > 0 && c.split_k > 1;
        let counters = c.workspace_partial_bytes(p.m, p.n, p.batch)..need;
        match (split, stage > 0) {
            (false, false) => launch(None, None),
            (true, false) => {
                with_stream_workspace(stream, need, counters, |ws| launch(Some(ws), None))
            }
            (false, true) => with_stream_staging(stream, stage, |st| launch(None, Some(st))),
            (true, true) => with_stream_workspace(stream, need, counters, |ws| {
                with_stream_staging(stream, stage, |st| launch(Some(ws), Some(st)))
            }),
        }
    }
}

impl GemmFamily for MmaGemm {
    const FAMILY: &'static str = "mma";

    fn for_device(info: &DeviceInfo) -> Self {
        MmaGemm::new(info.sm_count)
    }

    fn enqueue_gemm(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &Self::Config,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError> {
        check_for_stream(self, p, c, stream)?;
        let dims = self.launch(p, c);
        let need = MmaGemm::workspace_bytes(p, c);
        if need == 0 {
            return launch_abi(f, dims, p, bufs, &[], stream);
        }
        with_stream_workspace(stream, need, 0..MmaGemm::counter_bytes(p, c), |ws| {
            launch_abi(f, dims, p, bufs, &[ExtraArg::Buffer(&*ws)], stream)
        })
    }
}

impl GemmFamily for SimtGemm {
    const FAMILY: &'static str = "simt";

    fn for_device(_info: &DeviceInfo) -> Self {
        SimtGemm
    }

    fn enqueue_gemm(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &Self::Config,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError> {
        check_for_stream(self, p, c, stream)?;
        launch_abi(f, self.launch(p, c), p, bufs, &[], stream)
    }
}

/// Checks `c` for `p` on the architecture of `stream`'s device (a config that does not fit the
/// device is refused before any launch).
fn check_for_stream<T: Template<Problem = GemmProblem>>(
    t: &T,
    p: &GemmProblem,
    c: &T::Config,
    stream: &Stream,
) -> Result<(), GemmLaunchError> {
    let (major, minor) = stream.device().info().compute_capability;
    let arch = Arch::for_compute_capability(major, minor)
        .map_err(|e| GemmLaunchError::Other(e.to_string()))?;
    t.check(p, c, arch)
        .map_err(|v| GemmLaunchError::Constraint(v.reason))
}

/// Launches a kernel of the shared ABI (`GEMM_ABI.md`) through [`launch_gemm`].
fn launch_abi(
    f: &Function,
    dims: LaunchDims,
    p: &GemmProblem,
    bufs: &mut GemmBuffers<'_>,
    extra: &[ExtraArg<'_>],
    stream: &Stream,
) -> Result<(), GemmLaunchError> {
    let mut ab = AbiBuffers {
        a: bufs.a,
        b: bufs.b,
        c: &mut *bufs.c,
        bias: bufs.bias,
        residual: bufs.residual,
    };
    launch_gemm(f, dims, p, &mut ab, extra, stream).map_err(abi_error)
}

/// The ABI launcher's error in the synthesizer's terms (runtime errors kept, so sticky stays sticky).
fn abi_error(e: AbiLaunchError) -> GemmLaunchError {
    match e {
        AbiLaunchError::Problem(p) => GemmLaunchError::Constraint(p.to_string()),
        AbiLaunchError::BufferTooSmall {
            operand,
            needed,
            got,
        } => GemmLaunchError::BufferTooSmall {
            buffer: operand,
            need: needed,
            have: got,
        },
        AbiLaunchError::Misaligned { operand, ptr } => GemmLaunchError::Misaligned {
            buffer: operand,
            addr: ptr,
            align: 16,
        },
        AbiLaunchError::MissingOperand { operand } => {
            GemmLaunchError::MissingBuffer { buffer: operand }
        }
        AbiLaunchError::TooLarge { what, value } => GemmLaunchError::Constraint(format!(
            "{what}={value} does not fit an int kernel argument"
        )),
        AbiLaunchError::Runtime(r) => GemmLaunchError::Runtime(r),
    }
}

/// Runs `f` with this stream's split-K workspace of at least `need` bytes, whose bytes
/// `counters` (the launch's arrival counters) are zero when `f` runs.
///
/// Workspaces are kept per stream (keyed by [`Stream::id`]) and shared by every split-K launch
/// on it. A completed launch leaves its own counters zero, but the counters of one config or
/// problem can lie where another wrote its f32 partials (the wgmma family puts the counters
/// after the partials, the mma family before them, both at config-dependent offsets), so the
/// counter range is zeroed on the stream (a memset ordered before the launch) whenever it differs
/// from the previous launch's on this workspace.
fn with_stream_workspace<R>(
    stream: &Stream,
    need: u64,
    counters: std::ops::Range<u64>,
    f: impl FnOnce(&mut rtx_runtime::DeviceBuffer) -> Result<R, GemmLaunchError>,
) -> Result<R, GemmLaunchError> {
    static POOL: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<u64, StreamWorkspace>>,
    > = std::sync::OnceLock::new();
    let mut pool = POOL
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let key = stream.id();
    if pool
        .get(&key)
        .is_none_or(|w| (w.buffer.len() as u64) < need)
    {
        pool.remove(&key);
        let mut buffer = stream.device().alloc(need as usize, stream)?;
        buffer.fill_u8(0, stream)?;
        pool.insert(
            key,
            StreamWorkspace {
                buffer,
                last_counters: None,
            },
        );
    }
    let ws = pool
        .get_mut(&key)
        .ok_or_else(|| GemmLaunchError::Other("split-K workspace vanished".into()))?;
    if ws.last_counters.as_ref() != Some(&counters) {
        let len = counters.end.saturating_sub(counters.start);
        ws.buffer
            .fill_range_u8(counters.start as usize, len as usize, 0, stream)?;
        ws.last_counters = Some(counters);
    }
    f(&mut ws.buffer)
}

/// One stream's split-K workspace and the counter range its last launch used (left zero).
struct StreamWorkspace {
    buffer: rtx_runtime::DeviceBuffer,
    last_counters: Option<std::ops::Range<u64>>,
}

/// Runs `f` with this stream's tf32 staging buffer (wgmma pre-pass) of at least `need` bytes;
/// kept per stream like the split-K workspaces, never zeroed (every pre-pass rewrites the part
/// its GEMM reads).
fn with_stream_staging<R>(
    stream: &Stream,
    need: u64,
    f: impl FnOnce(&mut rtx_runtime::DeviceBuffer) -> Result<R, GemmLaunchError>,
) -> Result<R, GemmLaunchError> {
    static POOL: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<u64, rtx_runtime::DeviceBuffer>>,
    > = std::sync::OnceLock::new();
    let mut pool = POOL
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let key = stream.id();
    if pool.get(&key).is_none_or(|w| (w.len() as u64) < need) {
        pool.remove(&key);
        pool.insert(key, stream.device().alloc(need as usize, stream)?);
    }
    let st = pool
        .get_mut(&key)
        .ok_or_else(|| GemmLaunchError::Other("tf32 staging buffer vanished".into()))?;
    f(st)
}

/// A template whose space is restricted to the configs matching `filter` (when set) and then
/// capped at `limit` of them, picked deterministically: evenly spaced over the inner
/// [`Template::valid_space`] order (index `floor(i * len / limit)` for `i in 0..limit`), so a
/// capped exhaustive run still spans the whole space. Everything else (name, version, check,
/// emit, launch) is the inner template's, so results land under the same tuning-database key.
#[derive(Debug, Clone, PartialEq)]
pub struct CappedSpace<F> {
    /// The wrapped template.
    pub inner: F,
    /// Most configs the space holds (`None`: no cap).
    pub limit: Option<usize>,
    /// Only configs with these field values (`None`: all).
    pub filter: Option<ConfigFilter>,
}

impl<F: Template> CappedSpace<F> {
    /// Wraps `inner`, keeping at most `limit` configs.
    pub fn new(inner: F, limit: Option<usize>) -> Self {
        CappedSpace {
            inner,
            limit,
            filter: None,
        }
    }

    /// Keeps only the configs `filter` matches (applied before the cap).
    pub fn with_filter(mut self, filter: Option<ConfigFilter>) -> Self {
        self.filter = filter;
        self
    }
}

/// A partial config, e.g. `{"bm": 64, "cluster_m": 2}`: a config matches when each named field
/// serializes to the given value. `rtx-tune --where` builds one to search a slice of a space.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFilter(serde_json::Map<String, serde_json::Value>);

impl ConfigFilter {
    /// Parses a JSON object of field values; anything else is an error naming the input.
    pub fn parse(json: &str) -> Result<Self, String> {
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::Object(m)) if !m.is_empty() => Ok(ConfigFilter(m)),
            Ok(_) => Err(format!(
                "config filter `{json}`: expected a non-empty JSON object of field values"
            )),
            Err(e) => Err(format!("config filter `{json}`: {e}")),
        }
    }

    /// Field names of the filter that `config` does not have (a typo would match nothing).
    pub fn unknown_fields<C: serde::Serialize>(&self, config: &C) -> Vec<String> {
        let v = serde_json::to_value(config).unwrap_or_default();
        self.0
            .keys()
            .filter(|k| v.get(k.as_str()).is_none())
            .cloned()
            .collect()
    }

    /// Whether every field of the filter has the given value in `config`.
    pub fn matches<C: serde::Serialize>(&self, config: &C) -> bool {
        let v = serde_json::to_value(config).unwrap_or_default();
        self.0
            .iter()
            .all(|(k, want)| v.get(k.as_str()) == Some(want))
    }
}

/// The evenly spaced subset of `all` described on [`CappedSpace`].
pub fn cap_evenly<C: Clone>(all: &[C], limit: usize) -> Vec<C> {
    if limit >= all.len() {
        return all.to_vec();
    }
    (0..limit)
        .map(|i| all[i * all.len() / limit].clone())
        .collect()
}

impl<F: Template> Template for CappedSpace<F> {
    type Problem = F::Problem;
    type Config = F::Config;

    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn version(&self) -> u32 {
        self.inner.version()
    }
    fn space(&self, problem: &F::Problem, arch: Arch) -> Vec<F::Config> {
        let filtered = |all: Vec<F::Config>| match &self.filter {
            None => all,
            Some(f) => all.into_iter().filter(|c| f.matches(c)).collect(),
        };
        match self.limit {
            None => filtered(self.inner.space(problem, arch)),
            Some(limit) => cap_evenly(&filtered(self.inner.valid_space(problem, arch)), limit),
        }
    }
    fn check(
        &self,
        problem: &F::Problem,
        config: &F::Config,
        arch: Arch,
    ) -> Result<(), ConstraintViolation> {
        self.inner.check(problem, config, arch)
    }
    fn default_config(&self, problem: &F::Problem, arch: Arch) -> F::Config {
        self.inner.default_config(problem, arch)
    }
    fn emit(
        &self,
        problem: &F::Problem,
        config: &F::Config,
        arch: Arch,
    ) -> Result<KernelSource, ConstraintViolation> {
        self.inner.emit(problem, config, arch)
    }
    fn launch(&self, problem: &F::Problem, config: &F::Config) -> LaunchDims {
        self.inner.launch(problem, config)
    }
    fn complexity(&self, config: &F::Config) -> u64 {
        self.inner.complexity(config)
    }
    fn estimate_us(
        &self,
        problem: &F::Problem,
        config: &F::Config,
        device: &crate::tuner::DeviceFacts,
    ) -> Option<f64> {
        self.inner.estimate_us(problem, config, device)
    }
}

impl<F: GemmFamily> GemmFamily for CappedSpace<F> {
    const FAMILY: &'static str = F::FAMILY;

    fn for_device(info: &DeviceInfo) -> Self {
        CappedSpace::new(F::for_device(info), None)
    }

    fn enqueue_gemm(
        &self,
        f: &Function,
        p: &GemmProblem,
        c: &Self::Config,
        bufs: &mut GemmBuffers<'_>,
        stream: &Stream,
    ) -> Result<(), GemmLaunchError> {
        self.inner.enqueue_gemm(f, p, c, bufs, stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn capping_is_even_deterministic_and_bounded() {
        let all: Vec<u32> = (0..10).collect();
        assert_eq!(cap_evenly(&all, 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(cap_evenly(&all, 3), vec![0, 3, 6]);
        assert_eq!(cap_evenly(&all, 20), all);
        assert!(cap_evenly(&all, 0).is_empty());
    }

    #[test]
    fn capped_wgmma_space_is_valid_and_keyed_like_the_inner_template() {
        let t = WgmmaGemm::default();
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        let full = t.valid_space(&p, Arch::Sm90a);
        let capped = CappedSpace::new(t, Some(24));
        let space = capped.space(&p, Arch::Sm90a);
        assert_eq!(space.len(), 24.min(full.len()));
        assert_eq!(space, capped.space(&p, Arch::Sm90a), "deterministic");
        for c in &space {
            capped.check(&p, c, Arch::Sm90a).unwrap();
        }
        assert_eq!((capped.name(), capped.version()), (t.name(), t.version()));
        assert_eq!(
            CappedSpace::new(t, None).space(&p, Arch::Sm90a),
            t.space(&p, Arch::Sm90a)
        );
    }

    #[test]
    fn a_filter_keeps_exactly_the_matching_configs_and_names_unknown_fields() {
        let t = WgmmaGemm::default();
        let p = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
        let f = ConfigFilter::parse(r#"{"bm": 64, "cluster_m": 2}"#).unwrap();
        let all = t.space(&p, Arch::Sm90a);
        let kept = CappedSpace::new(t, None)
            .with_filter(Some(f.clone()))
            .space(&p, Arch::Sm90a);
        assert!(!kept.is_empty());
        assert_eq!(
            kept.len(),
            all.iter()
                .filter(|c| c.bm == 64 && c.cluster_m == 2)
                .count()
        );
        assert!(kept.iter().all(|c| c.bm == 64 && c.cluster_m == 2));
        let capped = CappedSpace::new(t, Some(5))
            .with_filter(Some(f.clone()))
            .space(&p, Arch::Sm90a);
        assert!(capped.len() <= 5 && capped.iter().all(|c| c.bm == 64 && c.cluster_m == 2));
        assert!(f.unknown_fields(&all[0]).is_empty());
        let typo = ConfigFilter::parse(r#"{"bmm": 64}"#).unwrap();
        assert_eq!(typo.unknown_fields(&all[0]), vec!["bmm".to_string()]);
        for bad in ["[1]", "{}", "{bm: 64}", "64"] {
            assert!(ConfigFilter::parse(bad).unwrap_err().contains(bad), "{bad}");
        }
    }
}
