//! One elementwise problem: an expression graph over a `rows x cols` iteration space.

use super::expr::{Broadcast, ExprGraph, GraphError};
use crate::DType;
use serde::{Deserialize, Serialize};

/// Most bytes one tensor of an elementwise problem may span (2^62): every byte count the host
/// computes (one tensor, or the sum over a graph's tensors with saturation) stays far from
/// `u64` overflow, and no real allocation comes near it.
pub const MAX_TENSOR_BYTES: u64 = 1 << 62;

/// A graph applied to every position of a `rows x cols` space (all full tensors row-major,
/// contiguous, `cols` elements per row).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ElementwiseProblem {
    /// The expression.
    pub graph: ExprGraph,
    /// Rows of the iteration space (>= 1).
    pub rows: u32,
    /// Columns of the iteration space (>= 1).
    pub cols: u32,
}

/// Why an elementwise problem cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElementwiseProblemError {
    /// The graph breaks a rule.
    #[error("invalid elementwise graph: {0}")]
    Graph(#[from] GraphError),
    /// A zero dimension.
    #[error("invalid elementwise shape {rows} x {cols}: both must be >= 1")]
    EmptyShape {
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
    },
    /// A tensor of the shape would span more than [`MAX_TENSOR_BYTES`].
    #[error("elementwise shape {rows} x {cols}: {what} would span more than 2^62 bytes")]
    TooLarge {
        /// The tensor (`input i` or `output o`).
        what: String,
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
    },
}

impl ElementwiseProblem {
    /// A problem over `rows x cols`.
    pub fn new(graph: ExprGraph, rows: u32, cols: u32) -> Self {
        ElementwiseProblem { graph, rows, cols }
    }

    /// Elements of the iteration space.
    pub fn elems(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }

    /// Checks the graph and the shape (both dimensions non-zero, every tensor within
    /// [`MAX_TENSOR_BYTES`]); returns the node dtypes.
    pub fn validate(&self) -> Result<Vec<DType>, ElementwiseProblemError> {
        if self.rows == 0 || self.cols == 0 {
            return Err(ElementwiseProblemError::EmptyShape {
                rows: self.rows,
                cols: self.cols,
            });
        }
        let dtypes = self.graph.validate()?;
        for i in 0..self.graph.inputs.len() {
            self.input_bytes(i)?;
        }
        for o in 0..self.graph.outputs.len() {
            self.output_bytes(o)?;
        }
        Ok(dtypes)
    }

    /// Elements input `i`'s buffer must hold (0 for an input the graph does not have).
    pub fn input_elems(&self, i: usize) -> u64 {
        self.graph
            .inputs
            .get(i)
            .map_or(0, |s| s.broadcast.elems(self.rows as u64, self.cols as u64))
    }

    /// Bytes input `i`'s buffer must hold (0 for an input the graph does not have);
    /// [`ElementwiseProblemError::TooLarge`] beyond [`MAX_TENSOR_BYTES`].
    pub fn input_bytes(&self, i: usize) -> Result<u64, ElementwiseProblemError> {
        let Some(spec) = self.graph.inputs.get(i) else {
            return Ok(0);
        };
        self.tensor_bytes(|| format!("input {i}"), self.input_elems(i), spec.dtype)
    }

    /// Bytes output `o`'s buffer must hold (a full `rows x cols` tensor; 0 for an output the
    /// graph does not have); [`ElementwiseProblemError::TooLarge`] beyond [`MAX_TENSOR_BYTES`].
    pub fn output_bytes(&self, o: usize) -> Result<u64, ElementwiseProblemError> {
        let Some(spec) = self.graph.outputs.get(o) else {
            return Ok(0);
        };
        self.tensor_bytes(|| format!("output {o}"), self.elems(), spec.dtype)
    }

    fn tensor_bytes(
        &self,
        what: impl FnOnce() -> String,
        elems: u64,
        dtype: DType,
    ) -> Result<u64, ElementwiseProblemError> {
        elems
            .checked_mul(dtype.size_bytes() as u64)
            .filter(|&b| b <= MAX_TENSOR_BYTES)
            .ok_or_else(|| ElementwiseProblemError::TooLarge {
                what: what(),
                rows: self.rows,
                cols: self.cols,
            })
    }

    /// Bytes moved by one launch if every input and output is touched exactly once
    /// (broadcast vectors counted once); saturates at `u64::MAX` for a problem that fails
    /// [`ElementwiseProblem::validate`].
    pub fn bytes_moved(&self) -> u64 {
        let ins = (0..self.graph.inputs.len()).map(|i| self.input_bytes(i));
        let outs = (0..self.graph.outputs.len()).map(|o| self.output_bytes(o));
        ins.chain(outs)
            .map(|b| b.unwrap_or(u64::MAX))
            .fold(0u64, u64::saturating_add)
    }

    /// Whether the kernel needs 64-bit element indices (the space has `>= 2^31` elements).
    pub fn needs_64bit_index(&self) -> bool {
        self.elems() >= (1u64 << 31)
    }

    /// Element sizes (bytes) of the tensors the vector path accesses `vec` at a time:
    /// full and row-vector inputs, and every output.
    pub fn vector_tensor_sizes(&self) -> Vec<usize> {
        self.graph
            .inputs
            .iter()
            .filter(|i| matches!(i.broadcast, Broadcast::Full | Broadcast::Row))
            .map(|i| i.dtype.size_bytes())
            .chain(self.graph.outputs.iter().map(|o| o.dtype.size_bytes()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::expr::GraphBuilder;
    use super::*;

    /// `y = x + x` over `rows x cols`, all tensors `dtype`.
    fn add(dtype: DType, rows: u32, cols: u32) -> ElementwiseProblem {
        let mut b = GraphBuilder::new();
        let x = b.input(dtype, Broadcast::Full);
        let y = b.add(x, x);
        b.output(y, dtype);
        ElementwiseProblem::new(b.build().unwrap(), rows, cols)
    }

    #[test]
    fn a_shape_whose_byte_size_wraps_u64_is_rejected() {
        // f16: (2^32 - 1) x (2^31 + 1) elements are ~2^64 bytes, which used to wrap to ~4 GiB.
        let p = add(DType::F16, u32::MAX, (1 << 31) + 1);
        assert!(matches!(
            p.validate(),
            Err(ElementwiseProblemError::TooLarge { ref what, .. }) if what == "input 0"
        ));
        assert!(p.input_bytes(0).is_err());
        assert!(p.output_bytes(0).is_err());
        assert_eq!(p.bytes_moved(), u64::MAX);
    }

    #[test]
    fn tensor_bytes_are_capped_at_2_pow_62() {
        // 2^31 x 2^29 f32 elements are exactly 2^62 bytes; one more column is over.
        let p = add(DType::F32, 1 << 31, 1 << 29);
        assert!(p.validate().is_ok());
        assert_eq!(p.output_bytes(0), Ok(MAX_TENSOR_BYTES));
        assert_eq!(p.bytes_moved(), 2 * MAX_TENSOR_BYTES);
        let over = add(DType::F32, 1 << 31, (1 << 29) + 1);
        assert!(matches!(
            over.validate(),
            Err(ElementwiseProblemError::TooLarge { .. })
        ));
        assert_eq!(add(DType::Bf16, 3, 5).input_bytes(0), Ok(30));
        assert_eq!(add(DType::Bf16, 3, 5).input_bytes(7), Ok(0));
    }
}
