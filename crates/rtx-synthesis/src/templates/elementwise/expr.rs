//! The typed elementwise expression IR: inputs (with broadcasting), op nodes, outputs.
//!
//! A graph describes `outputs[o][r, c] = f_o(inputs[..][r, c])` over a `rows x cols`
//! iteration space. Every value carries a *logical* dtype: inputs take their storage dtype,
//! unary ops keep their operand's dtype, binary ops require both operands to share one
//! (otherwise [`GraphError::DTypeMismatch`]) and [`UnaryOp::Cast`] changes it. Math is always
//! done in f32 registers; a value's dtype only matters where it is *rounded*: at a `Cast`
//! (which rounds to the target precision), at a constant (stored rounded to its dtype) and at
//! an output store. Intermediate results are never rounded implicitly.
//!
//! Nodes may only refer to inputs and to *earlier* nodes, so a graph cannot contain a cycle;
//! [`GraphBuilder`] hands out references only to values it already holds, and
//! [`ExprGraph::validate`] rejects any hand-made or deserialized graph that refers forward.

use crate::DType;
use serde::{Deserialize, Serialize};

/// Most compute nodes (unary + binary ops; constants are not counted) in one graph.
pub const MAX_OPS: usize = 16;
/// Most inputs of one graph.
pub const MAX_INPUTS: usize = 4;
/// Most outputs of one graph.
pub const MAX_OUTPUTS: usize = 4;
/// Most scalar constants of one graph.
pub const MAX_CONSTS: usize = 16;

/// How an input tensor maps onto the `rows x cols` iteration space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Broadcast {
    /// A full `rows x cols` row-major contiguous tensor.
    Full,
    /// A row vector of length `cols`, the same for every row (e.g. a bias).
    Row,
    /// A column vector of length `rows`, the same for every column (e.g. a per-row scale).
    Col,
    /// A single element, the same everywhere.
    Scalar,
}

impl Broadcast {
    /// Elements the input buffer must hold for a `rows x cols` space (saturating at
    /// `u64::MAX`, which no `u32 x u32` space reaches).
    pub fn elems(self, rows: u64, cols: u64) -> u64 {
        match self {
            Broadcast::Full => rows.saturating_mul(cols),
            Broadcast::Row => cols,
            Broadcast::Col => rows,
            Broadcast::Scalar => 1,
        }
    }

    /// Index into the input's buffer of element `(r, c)` of a space `cols` wide.
    pub fn index(self, cols: usize, r: usize, c: usize) -> usize {
        match self {
            Broadcast::Full => r * cols + c,
            Broadcast::Row => c,
            Broadcast::Col => r,
            Broadcast::Scalar => 0,
        }
    }
}

/// One input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InputSpec {
    /// Storage dtype (f32, f16 or bf16).
    pub dtype: DType,
    /// Shape relative to the iteration space.
    pub broadcast: Broadcast,
}

/// A reference to a value: an input or an earlier node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ValueRef {
    /// Input number `i` (its element at the current position, broadcast as declared).
    Input(u32),
    /// The result of node number `i`.
    Node(u32),
}

/// Ops of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `e^x`.
    Exp,
    /// Natural logarithm (`log 0 = -inf`, negative -> NaN).
    Log,
    /// Square root (negative -> NaN).
    Sqrt,
    /// `1 / sqrt(x)` (`rsqrt 0 = +inf`).
    Rsqrt,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `0.5 x (1 + erf(x / sqrt 2))` (note: `-inf -> NaN`, as the formula gives).
    GeluErf,
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (note: `-inf -> NaN`).
    GeluTanh,
    /// `x / (1 + e^-x)` (note: `-inf -> NaN`, as the formula gives).
    Silu,
    /// `max(x, 0)`, NaN-propagating (`relu NaN = NaN`).
    Relu,
    /// Round to the precision of the dtype (f32: identity) and retype the value.
    Cast(DType),
}

/// Ops of two operands of the same dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (IEEE division).
    Div,
    /// Minimum, NaN-propagating: NaN if either operand is NaN (like `torch.minimum`).
    Min,
    /// Maximum, NaN-propagating: NaN if either operand is NaN (like `torch.maximum`).
    Max,
}

/// One node of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Node {
    /// A scalar constant: the f32 with these bits, rounded to `dtype` when emitted and evaluated.
    Const {
        /// `f32::to_bits` of the value.
        bits: u32,
        /// Logical dtype of the constant.
        dtype: DType,
    },
    /// A unary op.
    Unary {
        /// Which op.
        op: UnaryOp,
        /// Its operand.
        arg: ValueRef,
    },
    /// A binary op.
    Binary {
        /// Which op.
        op: BinaryOp,
        /// Left operand.
        lhs: ValueRef,
        /// Right operand.
        rhs: ValueRef,
    },
}

impl Node {
    /// The values this node reads.
    pub fn operands(&self) -> Vec<ValueRef> {
        match *self {
            Node::Const { .. } => vec![],
            Node::Unary { arg, .. } => vec![arg],
            Node::Binary { lhs, rhs, .. } => vec![lhs, rhs],
        }
    }

    /// Whether this node counts toward [`MAX_OPS`].
    pub fn is_op(&self) -> bool {
        !matches!(self, Node::Const { .. })
    }
}

/// One output tensor: always a full `rows x cols` row-major tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutputSpec {
    /// The value written.
    pub value: ValueRef,
    /// Storage dtype; must equal the value's logical dtype.
    pub dtype: DType,
}

/// A validated-on-demand elementwise expression graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ExprGraph {
    /// Inputs, in kernel-argument order.
    pub inputs: Vec<InputSpec>,
    /// Nodes in evaluation order; node `i` may only refer to nodes `< i`.
    pub nodes: Vec<Node>,
    /// Outputs, in kernel-argument order (after the inputs).
    pub outputs: Vec<OutputSpec>,
}

/// Why a graph is not acceptable. Each variant names the offending input, node or output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// More inputs than [`MAX_INPUTS`].
    #[error("graph has {count} inputs; at most {max} are supported")]
    TooManyInputs {
        /// Inputs in the graph.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More compute nodes than [`MAX_OPS`].
    #[error("graph has {count} ops; at most {max} are supported (node {node} is the first over the limit)")]
    TooManyOps {
        /// Ops in the graph.
        count: usize,
        /// The limit.
        max: usize,
        /// Index of the first op beyond the limit.
        node: usize,
    },
    /// More constants than [`MAX_CONSTS`].
    #[error("graph has {count} constants; at most {max} are supported")]
    TooManyConsts {
        /// Constants in the graph.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More outputs than [`MAX_OUTPUTS`].
    #[error("graph has {count} outputs; at most {max} are supported")]
    TooManyOutputs {
        /// Outputs in the graph.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A graph must write something.
    #[error("graph has no outputs")]
    NoOutputs,
    /// A node refers to an input that does not exist or to a node that is not before it.
    #[error("node {node} refers to {reference:?}, which is not defined before it")]
    DanglingRef {
        /// The referring node.
        node: usize,
        /// The bad reference.
        reference: ValueRef,
    },
    /// An output refers to a value that does not exist.
    #[error("output {output} refers to {reference:?}, which does not exist")]
    DanglingOutput {
        /// The output.
        output: usize,
        /// The bad reference.
        reference: ValueRef,
    },
    /// A binary node's operands have different logical dtypes.
    #[error("node {node} ({op:?}): operand dtypes differ ({lhs} vs {rhs}); insert a Cast")]
    DTypeMismatch {
        /// The node.
        node: usize,
        /// Its op.
        op: BinaryOp,
        /// Left operand dtype.
        lhs: DType,
        /// Right operand dtype.
        rhs: DType,
    },
    /// An output's declared storage dtype differs from its value's logical dtype.
    #[error("output {output} is declared {declared} but its value is {actual}; insert a Cast")]
    OutputDTypeMismatch {
        /// The output.
        output: usize,
        /// Declared dtype.
        declared: DType,
        /// The value's dtype.
        actual: DType,
    },
    /// A dtype elementwise kernels cannot store (tf32).
    #[error("{what} uses dtype {dtype}; elementwise kernels support f32, f16 and bf16")]
    UnsupportedDType {
        /// Which input / node / output.
        what: String,
        /// The dtype.
        dtype: DType,
    },
    /// An input no node or output reads (it would be loaded for nothing).
    #[error("input {input} is never used")]
    UnusedInput {
        /// The input.
        input: usize,
    },
}

fn storable(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::Bf16)
}

/// Rounds `x` to the precision of `dtype` (round to nearest even), back in f64.
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 | DType::Tf32 => x as f32 as f64,
        DType::F16 => half::f16::from_f64(x).to_f64(),
        DType::Bf16 => half::bf16::from_f64(x).to_f64(),
    }
}

/// The f32 value a constant node stands for (its bits rounded to its dtype).
pub fn const_value(bits: u32, dtype: DType) -> f32 {
    let v = f32::from_bits(bits);
    match dtype {
        DType::F32 | DType::Tf32 => v,
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::Bf16 => half::bf16::from_f32(v).to_f32(),
    }
}

impl ExprGraph {
    /// Number of compute nodes (constants excluded).
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_op()).count()
    }

    /// Whether any input is a row or column vector (the kernel then needs row/column indices).
    pub fn has_row_or_col_inputs(&self) -> bool {
        self.inputs
            .iter()
            .any(|i| matches!(i.broadcast, Broadcast::Row | Broadcast::Col))
    }

    /// Checks every rule and returns the logical dtype of every node.
    pub fn validate(&self) -> Result<Vec<DType>, GraphError> {
        if self.inputs.len() > MAX_INPUTS {
            return Err(GraphError::TooManyInputs {
                count: self.inputs.len(),
                max: MAX_INPUTS,
            });
        }
        let ops = self.op_count();
        if ops > MAX_OPS {
            let node = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.is_op())
                .nth(MAX_OPS)
                .map_or(0, |(i, _)| i);
            return Err(GraphError::TooManyOps {
                count: ops,
                max: MAX_OPS,
                node,
            });
        }
        let consts = self.nodes.len() - ops;
        if consts > MAX_CONSTS {
            return Err(GraphError::TooManyConsts {
                count: consts,
                max: MAX_CONSTS,
            });
        }
        if self.outputs.is_empty() {
            return Err(GraphError::NoOutputs);
        }
        if self.outputs.len() > MAX_OUTPUTS {
            return Err(GraphError::TooManyOutputs {
                count: self.outputs.len(),
                max: MAX_OUTPUTS,
            });
        }
        for (i, inp) in self.inputs.iter().enumerate() {
            if !storable(inp.dtype) {
                return Err(GraphError::UnsupportedDType {
                    what: format!("input {i}"),
                    dtype: inp.dtype,
                });
            }
        }
        let mut used = vec![false; self.inputs.len()];
        let mut types: Vec<DType> = Vec::with_capacity(self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let mut operand_types = Vec::new();
            for r in node.operands() {
                let t = match r {
                    ValueRef::Input(k) if (k as usize) < self.inputs.len() => {
                        used[k as usize] = true;
                        self.inputs[k as usize].dtype
                    }
                    ValueRef::Node(k) if (k as usize) < i => types[k as usize],
                    _ => {
                        return Err(GraphError::DanglingRef {
                            node: i,
                            reference: r,
                        })
                    }
                };
                operand_types.push(t);
            }
            let t = match *node {
                Node::Const { dtype, .. } => {
                    if !storable(dtype) {
                        return Err(GraphError::UnsupportedDType {
                            what: format!("node {i} (constant)"),
                            dtype,
                        });
                    }
                    dtype
                }
                Node::Unary {
                    op: UnaryOp::Cast(to),
                    ..
                } => {
                    if !storable(to) {
                        return Err(GraphError::UnsupportedDType {
                            what: format!("node {i} (cast)"),
                            dtype: to,
                        });
                    }
                    to
                }
                Node::Unary { .. } => operand_types[0],
                Node::Binary { op, .. } => {
                    let (lhs, rhs) = (operand_types[0], operand_types[1]);
                    if lhs != rhs {
                        return Err(GraphError::DTypeMismatch {
                            node: i,
                            op,
                            lhs,
                            rhs,
                        });
                    }
                    lhs
                }
            };
            types.push(t);
        }
        for (o, out) in self.outputs.iter().enumerate() {
            let actual = match out.value {
                ValueRef::Input(k) if (k as usize) < self.inputs.len() => {
                    used[k as usize] = true;
                    self.inputs[k as usize].dtype
                }
                ValueRef::Node(k) if (k as usize) < self.nodes.len() => types[k as usize],
                r => {
                    return Err(GraphError::DanglingOutput {
                        output: o,
                        reference: r,
                    })
                }
            };
            if !storable(out.dtype) {
                return Err(GraphError::UnsupportedDType {
                    what: format!("output {o}"),
                    dtype: out.dtype,
                });
            }
            if actual != out.dtype {
                return Err(GraphError::OutputDTypeMismatch {
                    output: o,
                    declared: out.dtype,
                    actual,
                });
            }
        }
        if let Some(input) = used.iter().position(|u| !u) {
            return Err(GraphError::UnusedInput { input });
        }
        Ok(types)
    }

    /// A short stable content hash (hex), used in kernel names.
    pub fn fingerprint(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let h = blake3::hash(&json);
        h.to_hex().as_str()[..16].to_string()
    }
}

/// Builds an [`ExprGraph`] one value at a time; values can only refer to values that exist.
#[derive(Debug, Clone, Default)]
pub struct GraphBuilder {
    graph: ExprGraph,
}

impl GraphBuilder {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input and returns a reference to its element.
    pub fn input(&mut self, dtype: DType, broadcast: Broadcast) -> ValueRef {
        self.graph.inputs.push(InputSpec { dtype, broadcast });
        ValueRef::Input(self.graph.inputs.len() as u32 - 1)
    }

    fn push(&mut self, node: Node) -> ValueRef {
        self.graph.nodes.push(node);
        ValueRef::Node(self.graph.nodes.len() as u32 - 1)
    }

    /// A scalar constant of logical dtype `dtype` (its value is rounded to that dtype).
    pub fn constant(&mut self, value: f32, dtype: DType) -> ValueRef {
        self.push(Node::Const {
            bits: value.to_bits(),
            dtype,
        })
    }

    /// A unary op node.
    pub fn unary(&mut self, op: UnaryOp, arg: ValueRef) -> ValueRef {
        self.push(Node::Unary { op, arg })
    }

    /// A binary op node.
    pub fn binary(&mut self, op: BinaryOp, lhs: ValueRef, rhs: ValueRef) -> ValueRef {
        self.push(Node::Binary { op, lhs, rhs })
    }

    /// `a + b`.
    pub fn add(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a - b`.
    pub fn sub(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a * b`.
    pub fn mul(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b`.
    pub fn div(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Div, a, b)
    }

    /// NaN-propagating `max(a, b)`.
    pub fn max(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Max, a, b)
    }

    /// NaN-propagating `min(a, b)`.
    pub fn min(&mut self, a: ValueRef, b: ValueRef) -> ValueRef {
        self.binary(BinaryOp::Min, a, b)
    }

    /// Round to `dtype` and retype.
    pub fn cast(&mut self, a: ValueRef, dtype: DType) -> ValueRef {
        self.unary(UnaryOp::Cast(dtype), a)
    }

    /// Declares an output written with storage dtype `dtype`.
    pub fn output(&mut self, value: ValueRef, dtype: DType) -> &mut Self {
        self.graph.outputs.push(OutputSpec { value, dtype });
        self
    }

    /// Validates and returns the graph.
    pub fn build(self) -> Result<ExprGraph, GraphError> {
        self.graph.validate()?;
        Ok(self.graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bias_relu(dtype: DType) -> GraphBuilder {
        let mut b = GraphBuilder::new();
        let x = b.input(dtype, Broadcast::Full);
        let bias = b.input(dtype, Broadcast::Row);
        let s = b.add(x, bias);
        let r = b.unary(UnaryOp::Relu, s);
        b.output(r, dtype);
        b
    }

    #[test]
    fn a_simple_graph_validates_with_types() {
        let g = bias_relu(DType::Bf16).build().unwrap();
        assert_eq!(g.validate().unwrap(), vec![DType::Bf16, DType::Bf16]);
        assert_eq!(g.op_count(), 2);
        assert!(g.has_row_or_col_inputs());
    }

    #[test]
    fn dtype_mismatch_names_the_node() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F16, Broadcast::Full);
        let y = b.input(DType::F32, Broadcast::Full);
        let e = b.unary(UnaryOp::Exp, x);
        let s = b.add(e, y);
        b.output(s, DType::F32);
        assert_eq!(
            b.build(),
            Err(GraphError::DTypeMismatch {
                node: 1,
                op: BinaryOp::Add,
                lhs: DType::F16,
                rhs: DType::F32
            })
        );
        // A cast fixes it.
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F16, Broadcast::Full);
        let y = b.input(DType::F32, Broadcast::Full);
        let c = b.cast(x, DType::F32);
        let s = b.add(c, y);
        let o = b.cast(s, DType::Bf16);
        b.output(o, DType::Bf16).output(s, DType::F32);
        assert!(b.build().is_ok());
    }

    #[test]
    fn forward_and_missing_references_are_dangling() {
        let mut g = bias_relu(DType::F32).build().unwrap();
        g.nodes[0] = Node::Unary {
            op: UnaryOp::Neg,
            arg: ValueRef::Node(0),
        };
        assert_eq!(
            g.validate(),
            Err(GraphError::DanglingRef {
                node: 0,
                reference: ValueRef::Node(0)
            })
        );
        let mut g = bias_relu(DType::F32).build().unwrap();
        g.nodes[1] = Node::Unary {
            op: UnaryOp::Neg,
            arg: ValueRef::Input(7),
        };
        assert_eq!(
            g.validate(),
            Err(GraphError::DanglingRef {
                node: 1,
                reference: ValueRef::Input(7)
            })
        );
        let mut g = bias_relu(DType::F32).build().unwrap();
        g.outputs[0].value = ValueRef::Node(2);
        assert_eq!(
            g.validate(),
            Err(GraphError::DanglingOutput {
                output: 0,
                reference: ValueRef::Node(2)
            })
        );
    }

    #[test]
    fn limits_are_enforced() {
        let mut b = GraphBuilder::new();
        let mut v = b.input(DType::F32, Broadcast::Full);
        for _ in 0..=MAX_OPS {
            v = b.unary(UnaryOp::Neg, v);
        }
        b.output(v, DType::F32);
        assert_eq!(
            b.build(),
            Err(GraphError::TooManyOps {
                count: MAX_OPS + 1,
                max: MAX_OPS,
                node: MAX_OPS
            })
        );

        let mut b = GraphBuilder::new();
        let ins: Vec<_> = (0..=MAX_INPUTS)
            .map(|_| b.input(DType::F32, Broadcast::Full))
            .collect();
        let mut v = ins[0];
        for &i in &ins[1..] {
            v = b.add(v, i);
        }
        b.output(v, DType::F32);
        assert_eq!(
            b.build(),
            Err(GraphError::TooManyInputs {
                count: MAX_INPUTS + 1,
                max: MAX_INPUTS
            })
        );

        assert_eq!(GraphBuilder::new().build(), Err(GraphError::NoOutputs));
    }

    #[test]
    fn unused_inputs_tf32_and_output_types_are_rejected() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, Broadcast::Full);
        b.input(DType::F32, Broadcast::Scalar);
        b.output(x, DType::F32);
        assert_eq!(b.build(), Err(GraphError::UnusedInput { input: 1 }));

        let mut b = GraphBuilder::new();
        let x = b.input(DType::Tf32, Broadcast::Full);
        b.output(x, DType::Tf32);
        assert!(matches!(
            b.build(),
            Err(GraphError::UnsupportedDType { .. })
        ));

        let mut b = GraphBuilder::new();
        let x = b.input(DType::F16, Broadcast::Full);
        b.output(x, DType::Bf16);
        assert_eq!(
            b.build(),
            Err(GraphError::OutputDTypeMismatch {
                output: 0,
                declared: DType::Bf16,
                actual: DType::F16
            })
        );
    }

    #[test]
    fn constants_round_to_their_dtype_and_fingerprints_differ() {
        assert_eq!(const_value(0.1f32.to_bits(), DType::F32), 0.1f32);
        assert_eq!(
            const_value(0.1f32.to_bits(), DType::Bf16),
            half::bf16::from_f32(0.1).to_f32()
        );
        assert_ne!(const_value(0.1f32.to_bits(), DType::Bf16), 0.1f32);
        assert_eq!(round_to(DType::F16, 1.0 + 1e-4), 1.0);
        let a = bias_relu(DType::F32).build().unwrap();
        let b = bias_relu(DType::F16).build().unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
    }
}
