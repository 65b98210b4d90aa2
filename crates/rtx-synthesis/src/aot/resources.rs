//! Typed resource reports: parsed from ptxas' `-v` lines in the NVRTC program log
//! ([`parse_ptxas_log`], [`ResourceUsage`]), or read from the driver after the cubin is loaded
//! ([`ResourceReport::from_driver`]); [`ResourceReport`] is the common form, marked with where
//! it came from ([`ResourceSource`]), and [`resource_report`] prefers ptxas and falls back to
//! the driver when the log has no ptxas lines.
//!
//! The format, as NVRTC 13 prints it (one block per function, kernels first named by a
//! `Compiling entry function` line; device functions only get the two property lines):
//!
//! ```text
//! ptxas info    : 4 bytes gmem, 1024 bytes cmem[3]
//! ptxas info    : Compiling entry function 'with_smem' for 'sm_80'
//! ptxas info    : Function properties for with_smem
//! ptxas         .     256 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//! ptxas info    : Used 17 registers, used 1 barriers, 256 bytes cumulative stack size, 4736 bytes smem, 368 bytes cmem[0]
//! ptxas info    : Compile time = 2.914 ms
//! ```
//!
//! Constant-bank (`cmem[N]`) sizes are printed for sm_80/86/89 but not for sm_90+ by NVRTC 13,
//! hence [`ResourceUsage::const_bytes`] is optional. Pieces of a line the parser does not know are
//! skipped (logged at debug level), so a newer ptxas that adds a field does not break parsing.

use crate::Arch;
use serde::{Deserialize, Serialize};

/// What ptxas reported for one function of a compiled program.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// The function's symbol as ptxas prints it (the `extern "C"` name for rtx kernels).
    pub function: String,
    /// The target it was compiled for.
    pub arch: Arch,
    /// `true` for a `__global__` entry point; device functions have no register/smem line.
    pub is_entry: bool,
    /// Registers per thread (0 for device functions: ptxas reports registers for kernels only).
    pub registers: u32,
    /// Bytes per thread stored to local memory because registers ran out.
    pub spill_store_bytes: u32,
    /// Bytes per thread loaded back from spilled local memory.
    pub spill_load_bytes: u32,
    /// The function's own stack frame per thread (local arrays, spills, call frames).
    pub stack_frame_bytes: u32,
    /// Stack of the kernel including its callees, when ptxas prints it (kernels with a stack).
    pub cumulative_stack_bytes: Option<u32>,
    /// Static shared memory per block (`__shared__` arrays); dynamic smem is not included.
    pub shared_bytes: u32,
    /// Named barriers used (`bar.sync` ids + 1).
    pub barriers: u32,
    /// Sum of this function's constant-bank bytes (`cmem[N]`), when ptxas prints them.
    pub const_bytes: Option<u32>,
}

impl ResourceUsage {
    fn new(function: &str, arch: Arch) -> Self {
        ResourceUsage {
            function: function.to_string(),
            arch,
            is_entry: false,
            registers: 0,
            spill_store_bytes: 0,
            spill_load_bytes: 0,
            stack_frame_bytes: 0,
            cumulative_stack_bytes: None,
            shared_bytes: 0,
            barriers: 0,
            const_bytes: None,
        }
    }

    /// Whether ptxas had to spill registers to local memory.
    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

/// Where a [`ResourceReport`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceSource {
    /// ptxas' `-v` lines in the NVRTC program log (at compile time, no GPU needed). Complete:
    /// spill stores/loads and the stack frame are separate figures.
    PtxasLog,
    /// `cuFuncGetAttribute` on the loaded kernel (needs a GPU). Registers and static shared
    /// memory are exact; spills are not told apart from local arrays: both are in
    /// `LOCAL_SIZE_BYTES` ([`ResourceReport::local_bytes`]).
    DriverAttributes,
}

impl std::fmt::Display for ResourceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResourceSource::PtxasLog => "ptxas -v log",
            ResourceSource::DriverAttributes => "driver function attributes",
        })
    }
}

/// One kernel's resource use from either source, with the figures both sources have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceReport {
    /// The kernel's name.
    pub function: String,
    /// The target it was compiled for.
    pub arch: Arch,
    /// Registers per thread.
    pub registers: u32,
    /// Local memory per thread: ptxas' stack frame, or the driver's `LOCAL_SIZE_BYTES`.
    /// Non-zero means spills or local arrays (or call frames).
    pub local_bytes: u32,
    /// Spill stores / loads in bytes per thread, when known (ptxas only).
    pub spill_bytes: Option<(u32, u32)>,
    /// Static shared memory per block.
    pub shared_bytes: u32,
    /// The largest block the kernel can be launched with (driver only: register-limited).
    pub max_threads_per_block: Option<u32>,
    /// Where the figures come from.
    pub source: ResourceSource,
}

impl ResourceReport {
    /// The report of a ptxas block.
    pub fn from_ptxas(u: &ResourceUsage) -> Self {
        ResourceReport {
            function: u.function.clone(),
            arch: u.arch,
            registers: u.registers,
            local_bytes: u
                .stack_frame_bytes
                .max(u.cumulative_stack_bytes.unwrap_or(0)),
            spill_bytes: Some((u.spill_store_bytes, u.spill_load_bytes)),
            shared_bytes: u.shared_bytes,
            max_threads_per_block: None,
            source: ResourceSource::PtxasLog,
        }
    }

    /// The report of the kernel `function` (compiled for `arch`) from the driver's attributes
    /// of the loaded kernel (`rtx_runtime::Function::attributes`).
    pub fn from_driver(function: &str, arch: Arch, a: &rtx_runtime::FunctionAttributes) -> Self {
        ResourceReport {
            function: function.to_string(),
            arch,
            registers: a.num_regs,
            local_bytes: a.local_bytes,
            spill_bytes: None,
            shared_bytes: a.static_smem_bytes,
            max_threads_per_block: Some(a.max_threads_per_block),
            source: ResourceSource::DriverAttributes,
        }
    }

    /// Whether registers spilled: `Some` from ptxas; from the driver only `Some(false)` when the
    /// kernel uses no local memory at all (local memory could be spills or local arrays).
    pub fn spills(&self) -> Option<bool> {
        match self.spill_bytes {
            Some((st, ld)) => Some(st > 0 || ld > 0),
            None if self.local_bytes == 0 => Some(false),
            None => None,
        }
    }

    /// Whether the kernel uses local memory (spills, local arrays, call frames).
    pub fn uses_local_memory(&self) -> bool {
        self.local_bytes > 0
    }
}

/// Why a compile's log gave no ptxas report for a kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingPtxasReport {
    /// The program log has no `ptxas` lines at all (an NVRTC cache hit on NVRTC >= 12.9 without
    /// `--no-cache`, or an NVRTC that does not forward ptxas' output).
    #[error("the NVRTC program log has no ptxas resource lines ({log_bytes} bytes of log)")]
    NoPtxasLines {
        /// Size of the log that was searched.
        log_bytes: usize,
    },
    /// ptxas reported other functions but not this one.
    #[error("ptxas reported {reported:?} but not `{entry}`")]
    NotReported {
        /// The kernel asked for.
        entry: String,
        /// The functions ptxas did report.
        reported: Vec<String>,
    },
}

/// `entry`'s ptxas block among `resources` (parsed from `log`) as a [`ResourceReport`].
pub fn ptxas_report_in(
    resources: &[ResourceUsage],
    entry: &str,
    log: &str,
) -> Result<ResourceReport, MissingPtxasReport> {
    if resources.is_empty() {
        return Err(MissingPtxasReport::NoPtxasLines {
            log_bytes: log.len(),
        });
    }
    resources
        .iter()
        .find(|r| r.function == entry)
        .map(ResourceReport::from_ptxas)
        .ok_or_else(|| MissingPtxasReport::NotReported {
            entry: entry.to_string(),
            reported: resources.iter().map(|r| r.function.clone()).collect(),
        })
}

/// The best report for `entry`: ptxas' when `ptxas` (the compile's parsed log) has one, else
/// the driver's attributes of the loaded kernel `loaded` when given; `None` when neither source
/// has it. Logged at debug level with the source used.
pub fn resource_report(
    ptxas: &[ResourceUsage],
    entry: &str,
    arch: Arch,
    loaded: Option<&rtx_runtime::Function>,
) -> Option<ResourceReport> {
    if let Some(u) = ptxas.iter().find(|r| r.function == entry) {
        return Some(ResourceReport::from_ptxas(u));
    }
    let f = loaded?;
    match f.attributes() {
        Ok(a) => {
            tracing::debug!(entry, %arch, "no ptxas report: using the driver's function attributes");
            Some(ResourceReport::from_driver(entry, arch, &a))
        }
        Err(e) => {
            tracing::warn!(entry, %arch, error = %e, "no ptxas report and no driver attributes");
            None
        }
    }
}

/// The text after the `ptxas info    :` / `ptxas         .` prefix, if the line is a ptxas line.
fn ptxas_payload(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("ptxas")?;
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("info")
        .map(|r| r.trim_start().strip_prefix(':').unwrap_or(r))
        .or_else(|| rest.strip_prefix('.'))?;
    Some(rest.trim())
}

/// Parses `"<n> <unit words>"`, e.g. `"256 bytes stack frame"` into `(256, "bytes stack frame")`.
fn number_and_rest(piece: &str) -> Option<(u32, &str)> {
    let piece = piece.trim();
    let end = piece
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(piece.len());
    let n = piece[..end].parse().ok()?;
    Some((n, piece[end..].trim()))
}

/// `"Used 17 registers"` -> 17.
fn used_registers(piece: &str) -> Option<u32> {
    let (n, rest) = number_and_rest(piece.trim().strip_prefix("Used")?)?;
    (rest == "registers").then_some(n)
}

fn quoted(s: &str) -> Option<&str> {
    let start = s.find('\'')? + 1;
    let len = s[start..].find('\'')?;
    Some(&s[start..start + len])
}

/// Parses every function's resource block out of an NVRTC program log compiled for `arch`.
///
/// Functions appear in the order ptxas reports them; a log without `-v` lines gives an empty list.
pub fn parse_ptxas_log(log: &str, arch: Arch) -> Vec<ResourceUsage> {
    let mut out: Vec<ResourceUsage> = Vec::new();
    let mut current: Option<usize> = None;
    let index_of = |out: &mut Vec<ResourceUsage>, name: &str| -> usize {
        match out.iter().position(|r| r.function == name) {
            Some(i) => i,
            None => {
                out.push(ResourceUsage::new(name, arch));
                out.len() - 1
            }
        }
    };
    for line in log.lines() {
        let Some(p) = ptxas_payload(line) else {
            continue;
        };
        if let Some(rest) = p.strip_prefix("Compiling entry function") {
            if let Some(name) = quoted(rest) {
                let i = index_of(&mut out, name);
                out[i].is_entry = true;
                current = Some(i);
                if let Some(target) = quoted(rest.split_once(" for ").map_or("", |(_, t)| t)) {
                    if target != arch.sm_name() {
                        tracing::debug!(function = name, target, %arch, "ptxas target differs from the requested arch");
                    }
                }
            }
        } else if let Some(name) = p.strip_prefix("Function properties for") {
            let name = name.trim();
            if !name.is_empty() {
                current = Some(index_of(&mut out, name));
            }
        } else if let Some(i) = current {
            let is_props = p.contains("stack frame");
            let is_used = p.starts_with("Used ");
            if !is_props && !is_used {
                continue;
            }
            let r = &mut out[i];
            if is_used {
                r.is_entry = true;
            }
            for piece in p.split(',') {
                if let Some(n) = used_registers(piece) {
                    r.registers = n;
                    continue;
                }
                let piece = piece.trim();
                let piece = piece.strip_prefix("used").map(str::trim).unwrap_or(piece);
                let Some((n, unit)) = number_and_rest(piece) else {
                    tracing::debug!(piece, "unrecognized ptxas resource piece");
                    continue;
                };
                match unit {
                    "bytes stack frame" => r.stack_frame_bytes = n,
                    "bytes spill stores" => r.spill_store_bytes = n,
                    "bytes spill loads" => r.spill_load_bytes = n,
                    "bytes cumulative stack size" => r.cumulative_stack_bytes = Some(n),
                    "bytes smem" => r.shared_bytes = n,
                    "barriers" | "barrier" => r.barriers = n,
                    u if u.starts_with("bytes cmem[") => {
                        r.const_bytes = Some(r.const_bytes.unwrap_or(0).saturating_add(n))
                    }
                    _ => tracing::debug!(piece, "unrecognized ptxas resource piece"),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim NVRTC 13 output for sm_80 (cmem lines present).
    const SM80_LOG: &str = "\
ptxas info    : 4 bytes gmem, 1024 bytes cmem[3], 16 bytes cmem[4]
ptxas info    : Compiling entry function 'with_call' for 'sm_80'
ptxas info    : Function properties for with_call
ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 8 bytes cumulative stack size, 368 bytes cmem[0]
ptxas info    : Compile time = 3.427 ms
ptxas info    : Function properties for _Z6calleef
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'with_smem' for 'sm_80'
ptxas info    : Function properties for with_smem
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 17 registers, used 1 barriers, 4736 bytes smem, 368 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 2.914 ms
";

    /// Verbatim NVRTC 13 output for sm_90a with `-maxrregcount=16` (spills, no cmem).
    const SM90A_SPILL_LOG: &str = "\
ptxas warning : For profile sm_90a adjusting per thread register count of 16 to lower bound of 24
ptxas info    : Overriding global maxrregcount 24 with entry-specific value 32 computed using thread count
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spiller' for 'sm_90a'
ptxas info    : Function properties for spiller
ptxas         .     1056 bytes stack frame, 2248 bytes spill stores, 2512 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1056 bytes cumulative stack size
ptxas info    : Compile time = 212.257 ms
";

    #[test]
    fn parses_sm80_log_with_cmem_and_device_functions() {
        let r = parse_ptxas_log(SM80_LOG, Arch::Sm80);
        assert_eq!(r.len(), 3);
        let call = &r[0];
        assert_eq!(
            (call.function.as_str(), call.is_entry, call.registers),
            ("with_call", true, 24)
        );
        assert_eq!(
            (call.stack_frame_bytes, call.cumulative_stack_bytes),
            (8, Some(8))
        );
        assert_eq!(call.const_bytes, Some(368));
        let callee = &r[1];
        assert_eq!(
            (callee.function.as_str(), callee.is_entry, callee.registers),
            ("_Z6calleef", false, 0)
        );
        let smem = &r[2];
        assert_eq!(
            (smem.registers, smem.barriers, smem.shared_bytes),
            (17, 1, 4736)
        );
        assert_eq!(smem.const_bytes, Some(376));
        assert_eq!(smem.cumulative_stack_bytes, None);
        assert!(!smem.spills());
    }

    #[test]
    fn parses_spills_on_hopper() {
        let r = parse_ptxas_log(SM90A_SPILL_LOG, Arch::Sm90a);
        assert_eq!(r.len(), 1);
        let s = &r[0];
        assert_eq!(
            (s.registers, s.spill_store_bytes, s.spill_load_bytes),
            (32, 2248, 2512)
        );
        assert_eq!(
            (s.stack_frame_bytes, s.cumulative_stack_bytes, s.const_bytes),
            (1056, Some(1056), None)
        );
        assert!(s.spills() && s.is_entry && s.arch == Arch::Sm90a);
    }

    #[test]
    fn unknown_pieces_and_foreign_lines_are_skipped() {
        let log = "random line\nptxas info    : Compiling entry function 'k' for 'sm_120'\n\
ptxas info    : Function properties for k\n\
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, used 0 barriers, 12 bytes frobnicators, 64 bytes smem\n";
        let r = parse_ptxas_log(log, Arch::Sm120);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].registers, r[0].shared_bytes), (10, 64));
        assert!(parse_ptxas_log("", Arch::Sm120).is_empty());
    }

    #[test]
    fn reports_from_both_sources_agree_on_shape() {
        let u = &parse_ptxas_log(SM90A_SPILL_LOG, Arch::Sm90a)[0];
        let p = ResourceReport::from_ptxas(u);
        assert_eq!(p.source, ResourceSource::PtxasLog);
        assert_eq!(
            (p.registers, p.local_bytes, p.spills()),
            (32, 1056, Some(true))
        );
        let a = rtx_runtime::FunctionAttributes {
            num_regs: 32,
            static_smem_bytes: 0,
            local_bytes: 1056,
            const_bytes: 0,
            max_threads_per_block: 1024,
            max_dynamic_smem_bytes: 0,
            ptx_version: 90,
            binary_version: 90,
        };
        let d = ResourceReport::from_driver("spiller", Arch::Sm90a, &a);
        assert_eq!(d.source, ResourceSource::DriverAttributes);
        assert_eq!((d.registers, d.local_bytes, d.shared_bytes), (32, 1056, 0));
        assert_eq!(
            d.spills(),
            None,
            "local memory from the driver may be a local array"
        );
        assert!(d.uses_local_memory());
        let clean = ResourceReport::from_driver(
            "k",
            Arch::Sm90a,
            &rtx_runtime::FunctionAttributes {
                local_bytes: 0,
                ..a
            },
        );
        assert_eq!(clean.spills(), Some(false));
        assert_eq!(
            resource_report(&[], "spiller", Arch::Sm90a, None),
            None,
            "neither source"
        );
        assert_eq!(
            resource_report(std::slice::from_ref(u), "spiller", Arch::Sm90a, None),
            Some(p)
        );
        assert!(matches!(
            ptxas_report_in(&[], "k", "some log"),
            Err(MissingPtxasReport::NoPtxasLines { log_bytes: 8 })
        ));
        assert!(matches!(
            ptxas_report_in(std::slice::from_ref(u), "other", SM90A_SPILL_LOG),
            Err(MissingPtxasReport::NotReported { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_logs(s in ".{0,400}") {
            let _ = parse_ptxas_log(&s, Arch::Sm90a);
        }

        #[test]
        fn round_trips_generated_lines(regs in 0u32..=255, st in 0u32..100000, ld in 0u32..100000,
                                       frame in 0u32..100000, smem in 0u32..232448, bars in 0u32..16) {
            let log = format!("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n\
    ptxas info    : Function properties for k\n\
    ptxas         .     {frame} bytes stack frame, {st} bytes spill stores, {ld} bytes spill loads\n\
    ptxas info    : Used {regs} registers, used {bars} barriers, {smem} bytes smem\n");
            let r = parse_ptxas_log(&log, Arch::Sm90a);
            proptest::prop_assert_eq!(r.len(), 1);
            let u = &r[0];
            proptest::prop_assert_eq!((u.registers, u.spill_store_bytes, u.spill_load_bytes), (regs, st, ld));
            proptest::prop_assert_eq!((u.stack_frame_bytes, u.shared_bytes, u.barriers), (frame, smem, bars));
        }
    }
}
