//! One elementwise problem: an expression graph over a `rows x cols` iteration space.

use super::expr::{Broadcast, ExprGraph, GraphError};
use crate::DType;
use serde::{Deserialize, Serialize};

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

    /// Checks the graph and the shape; returns the node dtypes.
    pub fn validate(&self) -> Result<Vec<DType>, ElementwiseProblemError> {
        if self.rows == 0 || self.cols == 0 {
            return Err(ElementwiseProblemError::EmptyShape {
                rows: self.rows,
                cols: self.cols,
            });
        }
        Ok(self.graph.validate()?)
    }

    /// Elements input `i`'s buffer must hold.
    pub fn input_elems(&self, i: usize) -> u64 {
        self.graph
            .inputs
            .get(i)
            .map_or(0, |s| s.broadcast.elems(self.rows as u64, self.cols as u64))
    }

    /// Bytes moved by one launch if every input and output is touched exactly once
    /// (broadcast vectors counted once).
    pub fn bytes_moved(&self) -> u64 {
        let ins: u64 = (0..self.graph.inputs.len())
            .map(|i| self.input_elems(i) * self.graph.inputs[i].dtype.size_bytes() as u64)
            .sum();
        let outs: u64 = self
            .graph
            .outputs
            .iter()
            .map(|o| self.elems() * o.dtype.size_bytes() as u64)
            .sum();
        ins + outs
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
