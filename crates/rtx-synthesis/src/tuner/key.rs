//! Tuning-database keys: what an operation is ([`OpSignature`]), which device measured it
//! ([`DeviceKey`]), and which exact template code was tuned ([`TuneKey::fingerprint`]).
//!
//! Everything that can make a cached winner wrong belongs here: the launch-time predicates a
//! template's `check()` reads (alignment of leading dimensions, epilogue kind) are part of the
//! signature, so a winner tuned for aligned operands is never served to unaligned ones
//! (cubecl#1510), and the key carries the target and the source hash so a changed template or
//! another GPU is re-tuned instead of served stale results (cubecl's name-only checksum,
//! tvm#15549).

use crate::templates::elementwise::{Broadcast, ElementwiseProblem};
use crate::templates::gemm::{GemmProblem, Layout};
use crate::templates::reduce::RowProblem;
use crate::templates::{ConstraintViolation, Template};
use crate::{Arch, DType};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The operation a tuning result is for, independent of how it is implemented.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpSignature {
    /// Operation name, e.g. `gemm`.
    pub op: String,
    /// Element types of the operands (inputs then output).
    pub dtypes: Vec<DType>,
    /// Operand layouts, e.g. `["row", "col"]`.
    pub layouts: Vec<String>,
    /// Shape, e.g. `[m, n, k, batch]`; the only part the nearest-bucket lookup may vary.
    pub shape: Vec<u64>,
    /// Further launch-relevant attributes as sorted `(name, value)` pairs (alignment,
    /// epilogue, ...): they must match exactly.
    pub attrs: Vec<(String, String)>,
}

impl OpSignature {
    /// The signature with its shape cleared: entries of one family differ only in shape.
    pub fn family(&self) -> OpSignature {
        OpSignature {
            shape: Vec::new(),
            ..self.clone()
        }
    }
}

impl fmt::Display for OpSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt: Vec<&str> = self.dtypes.iter().map(|d| d.name()).collect();
        let sh: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        write!(
            f,
            "{}[{}|{}|{}]",
            self.op,
            dt.join(","),
            self.layouts.join(","),
            sh.join("x")
        )?;
        for (k, v) in &self.attrs {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// A problem type that can name itself for the tuning database.
pub trait ProblemSignature {
    /// The problem's signature.
    fn signature(&self) -> OpSignature;

    /// The problem whose default-config source fingerprints the template in a [`TuneKey`]
    /// (`None`: this problem). A template whose default config depends on the shape (a row
    /// kernel sizes its register cache by the row length) returns a canonical shape here, so
    /// entries of one family share a fingerprint and the nearest-bucket lookup can borrow
    /// across shapes; a template change still changes the canonical source.
    fn fingerprint_problem(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

/// Largest power-of-two byte alignment (up to 16) that `elems * elem_bytes` has.
fn byte_alignment(elems: u64, elem_bytes: usize) -> u64 {
    let bytes = elems.saturating_mul(elem_bytes as u64);
    if bytes == 0 {
        16
    } else {
        (1u64 << bytes.trailing_zeros().min(4)).min(16)
    }
}

impl ProblemSignature for GemmProblem {
    fn signature(&self) -> OpSignature {
        let lay = |l: Layout| match l {
            Layout::Row => "row".to_string(),
            Layout::Col => "col".to_string(),
        };
        let ein = self.dtype.size_bytes();
        let eout = self.epilogue.out_dtype.size_bytes();
        let e = &self.epilogue;
        let mut attrs = vec![
            (
                "align_a".to_string(),
                byte_alignment(self.lda as u64, ein)
                    .min(byte_alignment(self.stride_a, ein))
                    .to_string(),
            ),
            (
                "align_b".to_string(),
                byte_alignment(self.ldb as u64, ein)
                    .min(byte_alignment(self.stride_b, ein))
                    .to_string(),
            ),
            (
                "align_c".to_string(),
                byte_alignment(self.ldc as u64, eout)
                    .min(byte_alignment(self.stride_c, eout))
                    .to_string(),
            ),
            ("alpha_one".to_string(), (e.alpha == 1.0).to_string()),
            ("beta_zero".to_string(), (e.beta == 0.0).to_string()),
            ("bias".to_string(), e.bias.to_string()),
            ("activation".to_string(), format!("{:?}", e.activation)),
            ("residual".to_string(), e.residual.to_string()),
            (
                "broadcast_a".to_string(),
                (self.batch > 1 && self.stride_a == 0).to_string(),
            ),
            (
                "broadcast_b".to_string(),
                (self.batch > 1 && self.stride_b == 0).to_string(),
            ),
        ];
        attrs.sort();
        OpSignature {
            op: "gemm".into(),
            dtypes: vec![self.dtype, self.dtype, self.epilogue.out_dtype],
            layouts: vec![lay(self.layout_a), lay(self.layout_b), "row".into()],
            shape: vec![
                self.m as u64,
                self.n as u64,
                self.k as u64,
                self.batch as u64,
            ],
            attrs,
        }
    }
}

impl ProblemSignature for ElementwiseProblem {
    /// `elementwise[<input dtypes>,<output dtypes>|<input broadcasts>|rows x cols]` with the
    /// graph's fingerprint (ops, constants, broadcasting, dtypes), the row length's byte
    /// alignment (the vector path needs `cols % vec == 0` when row/column vectors are read) and
    /// the index width (64-bit from 2^31 elements on) as exact-match attributes.
    fn signature(&self) -> OpSignature {
        let g = &self.graph;
        let narrow = g
            .inputs
            .iter()
            .map(|i| i.dtype.size_bytes())
            .chain(g.outputs.iter().map(|o| o.dtype.size_bytes()))
            .min()
            .unwrap_or(4);
        let bcast = |b: Broadcast| match b {
            Broadcast::Full => "full",
            Broadcast::Row => "row",
            Broadcast::Col => "col",
            Broadcast::Scalar => "scalar",
        };
        let mut attrs = vec![
            ("graph".to_string(), g.fingerprint().to_string()),
            (
                "align_cols".to_string(),
                byte_alignment(self.cols as u64, narrow).to_string(),
            ),
            ("index64".to_string(), self.needs_64bit_index().to_string()),
        ];
        attrs.sort();
        OpSignature {
            op: "elementwise".into(),
            dtypes: g
                .inputs
                .iter()
                .map(|i| i.dtype)
                .chain(g.outputs.iter().map(|o| o.dtype))
                .collect(),
            layouts: g
                .inputs
                .iter()
                .map(|i| bcast(i.broadcast).to_string())
                .collect(),
            shape: vec![self.rows as u64, self.cols as u64],
            attrs,
        }
    }
}

/// Row length at which a row problem fingerprints its template (see
/// [`ProblemSignature::fingerprint_problem`]).
pub const ROW_FINGERPRINT_COLS: u32 = 4096;

impl ProblemSignature for RowProblem {
    /// `row_<op>[dtype|row|rows x cols]` with the affine parts, the fused residual and the row
    /// length's byte alignment (the vector path needs `cols % vec == 0`) as exact-match
    /// attributes; `eps` is a kernel argument and not part of the key.
    fn signature(&self) -> OpSignature {
        let mut attrs = vec![
            ("weight".to_string(), self.op.has_weight().to_string()),
            ("bias".to_string(), self.op.has_bias().to_string()),
            ("residual".to_string(), self.residual.to_string()),
            (
                "align_cols".to_string(),
                byte_alignment(self.cols as u64, self.dtype.size_bytes()).to_string(),
            ),
        ];
        attrs.sort();
        OpSignature {
            op: format!("row_{}", self.op.name()),
            dtypes: vec![self.dtype],
            layouts: vec!["row".into()],
            shape: vec![self.rows as u64, self.cols as u64],
            attrs,
        }
    }

    fn fingerprint_problem(&self) -> Option<RowProblem> {
        Some(RowProblem {
            rows: 1,
            cols: ROW_FINGERPRINT_COLS,
            ..*self
        })
    }
}

/// The device a result was measured on: its name, compute capability and driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceKey {
    /// Device name as the driver reports it (e.g. `NVIDIA H200`).
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Driver version `(major, minor)`.
    pub driver: (i32, i32),
}

impl DeviceKey {
    /// A device key from its parts.
    pub fn new(
        name: impl Into<String>,
        compute_capability: (u32, u32),
        driver: (i32, i32),
    ) -> Self {
        DeviceKey {
            name: name.into(),
            compute_capability,
            driver,
        }
    }

    /// The key of an opened device.
    pub fn from_info(info: &rtx_runtime::DeviceInfo) -> Self {
        DeviceKey::new(
            info.name.clone(),
            info.compute_capability,
            info.driver_version,
        )
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ma, mi) = self.compute_capability;
        write!(
            f,
            "{} (cc {ma}.{mi}, driver {}.{})",
            self.name, self.driver.0, self.driver.1
        )
    }
}

/// The full key of one tuning-database entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TuneKey {
    /// What was tuned.
    pub op: OpSignature,
    /// Where it was measured.
    pub device: DeviceKey,
    /// The compile target.
    pub arch: Arch,
    /// Template name.
    pub template: String,
    /// Template version.
    pub template_version: u32,
    /// Hex [`crate::templates::KernelSource::fingerprint`] of the template's default config for
    /// this problem: changes whenever the template's generated code changes.
    pub fingerprint: String,
}

impl TuneKey {
    /// The key for tuning `template` on `problem` for `arch` on `device` (emits the default
    /// config to fingerprint the template).
    pub fn new<T: Template>(
        template: &T,
        problem: &T::Problem,
        arch: Arch,
        device: &DeviceKey,
    ) -> Result<TuneKey, ConstraintViolation>
    where
        T::Problem: ProblemSignature,
    {
        let canonical = problem.fingerprint_problem();
        let fp_problem = canonical.as_ref().unwrap_or(problem);
        let default = template.default_config(fp_problem, arch);
        let src = template.emit(fp_problem, &default, arch)?;
        Ok(TuneKey {
            op: problem.signature(),
            device: device.clone(),
            arch,
            template: template.name().to_string(),
            template_version: template.version(),
            fingerprint: src.fingerprint().to_hex().to_string(),
        })
    }

    /// The key with its shape cleared (see [`OpSignature::family`]).
    pub fn family(&self) -> TuneKey {
        TuneKey {
            op: self.op.family(),
            ..self.clone()
        }
    }
}

impl fmt::Display for TuneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fp = self.fingerprint.get(..12).unwrap_or(&self.fingerprint);
        write!(
            f,
            "{} on {} {} via {} v{} #{fp}",
            self.op, self.device, self.arch, self.template, self.template_version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_signature_carries_alignment_and_epilogue() {
        let p = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
        let s = p.signature();
        assert_eq!(s.shape, vec![4096, 4096, 4096, 1]);
        assert_eq!(s.layouts, vec!["row", "row", "row"]);
        let get =
            |s: &OpSignature, k: &str| s.attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get(&s, "align_a").as_deref(), Some("16"));
        let mut odd = p;
        odd.lda = 4097;
        assert_eq!(
            get(&odd.signature(), "align_a").as_deref(),
            Some("2"),
            "4097 bf16 = 8194 bytes"
        );
        assert_ne!(odd.signature(), s);
        assert_eq!(odd.signature().family(), {
            let mut f = odd.signature();
            f.shape.clear();
            f
        });
        let mut relu = p;
        relu.epilogue.activation = crate::templates::gemm::Activation::Relu;
        assert_ne!(
            relu.signature().family(),
            s.family(),
            "the epilogue is not a shape"
        );
        let sorted = {
            let mut a = s.attrs.clone();
            a.sort();
            a
        };
        assert_eq!(s.attrs, sorted);
    }

    #[test]
    fn alignment_is_capped_at_16_bytes() {
        assert_eq!(byte_alignment(4096, 2), 16);
        assert_eq!(byte_alignment(3, 4), 4);
        assert_eq!(byte_alignment(0, 2), 16);
        assert_eq!(byte_alignment(5, 2), 2);
    }

    #[test]
    fn device_keys_come_from_device_info() {
        let info = rtx_runtime::DeviceInfo::example_sm90();
        let k = DeviceKey::from_info(&info);
        assert_eq!(
            (k.name.as_str(), k.compute_capability, k.driver),
            (info.name.as_str(), (9, 0), info.driver_version)
        );
    }

    #[test]
    fn keys_display_compactly() {
        let d = DeviceKey::new("NVIDIA H200", (9, 0), (13, 0));
        assert_eq!(d.to_string(), "NVIDIA H200 (cc 9.0, driver 13.0)");
        let s = GemmProblem::nn(64, 32, 16, DType::F16).signature();
        assert!(
            s.to_string()
                .starts_with("gemm[f16,f16,f16|row,row,row|64x32x16x1]"),
            "{s}"
        );
    }
}
