//! [`GemmBuffers`]: the device operands of one GEMM launch, and the size checks every launch
//! path runs before any kernel sees them ([`check_buffer_sizes`]).

use crate::templates::gemm::problem::InvalidGemm;
use crate::templates::gemm::GemmProblem;
use rtx_runtime::{DeviceBuffer, RuntimeError};

/// Device buffers of one GEMM launch (the common ABI of `GEMM_ABI.md`).
pub struct GemmBuffers<'a> {
    /// A (input dtype), at least `problem.buffer_elems().0` elements.
    pub a: &'a DeviceBuffer,
    /// B (input dtype), at least `problem.buffer_elems().1` elements.
    pub b: &'a DeviceBuffer,
    /// C (output dtype), at least `problem.buffer_elems().2` elements; read too when beta != 0.
    pub c: &'a mut DeviceBuffer,
    /// Bias (N elements of the output dtype) when the epilogue has one.
    pub bias: Option<&'a DeviceBuffer>,
    /// Residual (laid out like C) when the epilogue has one.
    pub residual: Option<&'a DeviceBuffer>,
}

/// Why a GEMM launch was refused or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GemmLaunchError {
    /// The problem/config breaks a template constraint.
    #[error("constraint: {0}")]
    Constraint(String),
    /// A buffer is smaller than the problem needs.
    #[error("buffer `{buffer}` holds {have} bytes, the problem needs {need}")]
    BufferTooSmall {
        /// Which operand (`A`, `B`, `C`, `bias`, `residual`).
        buffer: &'static str,
        /// Bytes needed.
        need: u64,
        /// Bytes held.
        have: u64,
    },
    /// The epilogue reads an operand that was not supplied.
    #[error("the epilogue uses `{buffer}` but no buffer was given")]
    MissingBuffer {
        /// Which operand.
        buffer: &'static str,
    },
    /// An operand is not aligned as the kernel needs.
    #[error("buffer `{buffer}` at {addr:#x} is not {align}-byte aligned")]
    Misaligned {
        /// Which operand.
        buffer: &'static str,
        /// Its device address.
        addr: u64,
        /// The alignment needed.
        align: u64,
    },
    /// The runtime refused or failed the launch (a sticky one means the context is lost).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Another family-specific failure (tensor-map encoding, ...).
    #[error("{0}")]
    Other(String),
}

impl GemmLaunchError {
    /// True when the failure left the CUDA context unusable.
    pub fn is_sticky(&self) -> bool {
        matches!(self, GemmLaunchError::Runtime(e) if e.is_sticky())
    }
}

impl From<crate::templates::gemm::wgmma::WgmmaLaunchError> for GemmLaunchError {
    fn from(e: crate::templates::gemm::wgmma::WgmmaLaunchError) -> Self {
        use crate::templates::gemm::wgmma::WgmmaLaunchError as W;
        match e {
            W::Constraint(v) => GemmLaunchError::Constraint(v.reason),
            W::BufferTooSmall { what, need, have } => GemmLaunchError::BufferTooSmall {
                buffer: what,
                need,
                have,
            },
            W::Misaligned { what, addr } => GemmLaunchError::Misaligned {
                buffer: what,
                addr,
                align: 16,
            },
            W::MissingBuffer { what } => GemmLaunchError::MissingBuffer { buffer: what },
            W::TensorMap { operand, reason } => {
                GemmLaunchError::Other(format!("tensor map of {operand}: {reason}"))
            }
            W::Runtime(r) => GemmLaunchError::Runtime(r),
        }
    }
}

/// Byte sizes of the buffers a launch was given (`None`: not supplied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizes {
    /// Bytes of A.
    pub a: u64,
    /// Bytes of B.
    pub b: u64,
    /// Bytes of C.
    pub c: u64,
    /// Bytes of the bias, when given.
    pub bias: Option<u64>,
    /// Bytes of the residual, when given.
    pub residual: Option<u64>,
}

impl BufferSizes {
    /// The sizes of `bufs`.
    pub fn of(bufs: &GemmBuffers<'_>) -> Self {
        BufferSizes {
            a: bufs.a.len() as u64,
            b: bufs.b.len() as u64,
            c: bufs.c.len() as u64,
            bias: bufs.bias.map(|b| b.len() as u64),
            residual: bufs.residual.map(|r| r.len() as u64),
        }
    }
}

/// Bytes each operand of `p` needs: (A, B, C, bias, residual); bias/residual are 0 when the
/// epilogue does not use them ([`GemmProblem::epilogue_operand_bytes`]).
///
/// Errors with [`GemmLaunchError::Constraint`] (naming the operand) when an extent does not fit
/// in `i64` bytes ([`GemmProblem::buffer_bytes`]), instead of wrapping to a small size.
pub fn required_bytes(p: &GemmProblem) -> Result<(u64, u64, u64, u64, u64), GemmLaunchError> {
    let constraint = |e: InvalidGemm| GemmLaunchError::Constraint(e.to_string());
    let (a, b, c) = p.buffer_bytes().map_err(constraint)?;
    let (bias, res) = p.epilogue_operand_bytes().map_err(constraint)?;
    Ok((a, b, c, bias, res))
}

/// Checks that every operand `p` reads or writes is supplied and large enough, naming the first
/// one that is not (or the operand whose extent overflows, see [`required_bytes`]).
pub fn check_buffer_sizes(p: &GemmProblem, have: &BufferSizes) -> Result<(), GemmLaunchError> {
    let (a, b, c, bias, res) = required_bytes(p)?;
    for (buffer, need, got) in [("A", a, have.a), ("B", b, have.b), ("C", c, have.c)] {
        if got < need {
            return Err(GemmLaunchError::BufferTooSmall {
                buffer,
                need,
                have: got,
            });
        }
    }
    for (buffer, used, need, got) in [
        ("bias", p.epilogue.bias, bias, have.bias),
        ("residual", p.epilogue.residual, res, have.residual),
    ] {
        if !used {
            continue;
        }
        match got {
            None => return Err(GemmLaunchError::MissingBuffer { buffer }),
            Some(got) if got < need => {
                return Err(GemmLaunchError::BufferTooSmall {
                    buffer,
                    need,
                    have: got,
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn exact(p: &GemmProblem) -> BufferSizes {
        let (a, b, c, bias, res) = required_bytes(p).unwrap();
        BufferSizes {
            a,
            b,
            c,
            bias: p.epilogue.bias.then_some(bias),
            residual: p.epilogue.residual.then_some(res),
        }
    }

    #[test]
    fn exact_sizes_pass_and_short_buffers_are_named() {
        let mut p = GemmProblem::nn(64, 32, 16, DType::Bf16);
        p.epilogue.bias = true;
        p.epilogue.residual = true;
        let ok = exact(&p);
        assert_eq!(ok.a, 64 * 16 * 2);
        assert_eq!(ok.bias, Some(32 * 2));
        check_buffer_sizes(&p, &ok).unwrap();
        for (name, s) in [
            ("A", BufferSizes { a: ok.a - 1, ..ok }),
            ("B", BufferSizes { b: 0, ..ok }),
            ("C", BufferSizes { c: ok.c - 2, ..ok }),
            (
                "bias",
                BufferSizes {
                    bias: Some(2),
                    ..ok
                },
            ),
            (
                "residual",
                BufferSizes {
                    residual: Some(ok.c - 1),
                    ..ok
                },
            ),
        ] {
            let e = check_buffer_sizes(&p, &s).unwrap_err();
            assert!(
                matches!(e, GemmLaunchError::BufferTooSmall { buffer, .. } if buffer == name),
                "{e:?}"
            );
            assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
        }
        let e = check_buffer_sizes(&p, &BufferSizes { bias: None, ..ok }).unwrap_err();
        assert_eq!(e, GemmLaunchError::MissingBuffer { buffer: "bias" });
    }

    #[test]
    fn unused_epilogue_operands_are_not_required() {
        let p = GemmProblem::nn(8, 8, 8, DType::F16);
        check_buffer_sizes(
            &p,
            &BufferSizes {
                bias: None,
                residual: None,
                ..exact(&p)
            },
        )
        .unwrap();
    }

    /// A batch stride whose byte extent overflows used to panic here (debug) or wrap to one
    /// entry's size (release), so a one-entry A passed; now the operand is refused.
    #[test]
    fn overflowing_extents_are_refused_not_wrapped() {
        let mut p = GemmProblem::nn(64, 64, 64, DType::F32).batched(2);
        p.stride_a = 1 << 62;
        let one = 64 * 64 * 4;
        let sizes = BufferSizes {
            a: one,
            b: 2 * one,
            c: 2 * one,
            bias: None,
            residual: None,
        };
        let e = check_buffer_sizes(&p, &sizes).unwrap_err();
        assert!(
            matches!(&e, GemmLaunchError::Constraint(r) if r.contains("A extent")),
            "{e:?}"
        );
        assert!(required_bytes(&p).is_err());
    }

    #[test]
    fn only_runtime_sticky_errors_are_sticky() {
        let sticky = GemmLaunchError::Runtime(RuntimeError::Driver {
            op: "cuLaunchKernel",
            code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        });
        assert!(sticky.is_sticky());
        assert!(!GemmLaunchError::Other("x".into()).is_sticky());
        assert!(!GemmLaunchError::MissingBuffer { buffer: "bias" }.is_sticky());
    }
}
