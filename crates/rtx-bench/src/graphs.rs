//! Elementwise graphs the benchmarks use: the anchors' `gelu(x*1.5+0.5)` chain, the 8-op
//! chain, a few seeded random graphs, and the one-kernel-per-op (unfused, eager-style)
//! decomposition of any graph.

use rtx_synthesis::templates::elementwise::expr::{round_to, ExprGraph, GraphError};
use rtx_synthesis::templates::elementwise::presets;
use rtx_synthesis::templates::elementwise::{
    BinaryOp, Broadcast, GraphBuilder, InputSpec, Node, OutputSpec, UnaryOp, ValueRef,
};
use rtx_synthesis::DType;

/// `y = gelu_erf(x * 1.5 + 0.5)`: three ops, one full input (the anchors' `gelu` row, which is
/// `torch.nn.functional.gelu(x * 1.5 + 0.5)` in eager PyTorch).
pub fn gelu_affine(dtype: DType) -> Result<ExprGraph, GraphError> {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, Broadcast::Full);
    let k = b.constant(1.5, dtype);
    let c = b.constant(0.5, dtype);
    let t = b.mul(x, k);
    let t = b.add(t, c);
    let y = b.unary(UnaryOp::GeluErf, t);
    b.output(y, dtype);
    b.build()
}

/// The template crate's 8-op chain (`mul, add, mul, add, tanh, sub, max, gelu_tanh`; inputs
/// `[a, b, bias(row)]`, one output).
pub fn chain8(dtype: DType) -> Result<ExprGraph, GraphError> {
    presets::chain8(dtype)
}

/// A tiny deterministic generator (splitmix64), so random graphs are the same on every run.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A seeded random graph of `ops` ops (1..=12) over 1..=3 inputs (one may be a row vector),
/// every input used, using only ops that are finite for any finite input (no log / sqrt / div), one output.
pub fn random_graph(seed: u64, ops: usize, dtype: DType) -> Result<ExprGraph, GraphError> {
    let mut r = SplitMix(seed);
    let mut b = GraphBuilder::new();
    let ops = ops.clamp(1, 12);
    let n_in = (1 + r.below(3)).min(ops + 1);
    let mut vals: Vec<ValueRef> = (0..n_in)
        .map(|i| {
            let bc = if i == 2 {
                Broadcast::Row
            } else {
                Broadcast::Full
            };
            b.input(dtype, bc)
        })
        .collect();
    const UN: [UnaryOp; 6] = [
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Relu,
        UnaryOp::Neg,
    ];
    const BIN: [BinaryOp; 5] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Max,
        BinaryOp::Min,
    ];
    let mut last = vals[0];
    for step in 0..ops {
        let a = vals[r.below(vals.len())];
        // The first ops consume the remaining inputs (every input must be used).
        let v = if step + 1 < n_in {
            b.binary(BIN[r.below(BIN.len())], last, vals[step + 1])
        } else if r.below(2) == 0 {
            b.unary(UN[r.below(UN.len())], last)
        } else if r.below(3) == 0 {
            let k = b.constant(0.25 + r.below(8) as f32 * 0.25, dtype);
            b.mul(last, k)
        } else {
            b.binary(BIN[r.below(BIN.len())], last, a)
        };
        vals.push(v);
        last = v;
    }
    b.output(last, dtype);
    b.build()
}

/// One op of an unfused graph: a single-op graph plus where its operands come from.
#[derive(Debug, Clone, PartialEq)]
pub struct UnfusedStep {
    /// The one-op graph (constants inlined, as eager PyTorch passes scalars by value).
    pub graph: ExprGraph,
    /// Its inputs, in the step graph's input order: the original graph's input or an earlier
    /// step's output (by step index).
    pub operands: Vec<StepOperand>,
}

/// Where an unfused step reads an operand from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOperand {
    /// Input `i` of the original graph.
    Input(usize),
    /// The output tensor of step `i`.
    Step(usize),
}

/// Splits a single-output graph into one kernel per op, each reading its operands from memory
/// and writing its result in the op's dtype (the way eager PyTorch runs the same chain). The
/// last step writes the graph's output.
pub fn unfuse(graph: &ExprGraph) -> Result<Vec<UnfusedStep>, GraphError> {
    let dtypes = graph.validate()?;
    // node index -> step index (ops only)
    let mut step_of: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    let mut steps = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if !node.is_op() {
            continue;
        }
        let mut inputs: Vec<InputSpec> = Vec::new();
        let mut operands: Vec<StepOperand> = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut map = |r: ValueRef, nodes: &mut Vec<Node>| -> ValueRef {
            match r {
                ValueRef::Input(k) => {
                    let src = StepOperand::Input(k as usize);
                    if let Some(p) = operands.iter().position(|o| *o == src) {
                        return ValueRef::Input(p as u32);
                    }
                    operands.push(src);
                    inputs.push(graph.inputs[k as usize]);
                    ValueRef::Input(inputs.len() as u32 - 1)
                }
                ValueRef::Node(k) => match (graph.nodes[k as usize], step_of[k as usize]) {
                    (Node::Const { bits, dtype }, _) => {
                        nodes.push(Node::Const { bits, dtype });
                        ValueRef::Node(nodes.len() as u32 - 1)
                    }
                    (_, Some(s)) => {
                        let src = StepOperand::Step(s);
                        if let Some(p) = operands.iter().position(|o| *o == src) {
                            return ValueRef::Input(p as u32);
                        }
                        operands.push(src);
                        inputs.push(InputSpec {
                            dtype: dtypes[k as usize],
                            broadcast: step_broadcast(graph, k as usize),
                        });
                        ValueRef::Input(inputs.len() as u32 - 1)
                    }
                    (_, None) => ValueRef::Node(u32::MAX),
                },
            }
        };
        let op = match *node {
            Node::Unary { op, arg } => {
                let a = map(arg, &mut nodes);
                Node::Unary { op, arg: a }
            }
            Node::Binary { op, lhs, rhs } => {
                let l = map(lhs, &mut nodes);
                let r = map(rhs, &mut nodes);
                Node::Binary { op, lhs: l, rhs: r }
            }
            Node::Const { .. } => continue,
        };
        nodes.push(op);
        let out = ValueRef::Node(nodes.len() as u32 - 1);
        let g = ExprGraph {
            inputs,
            nodes,
            outputs: vec![OutputSpec {
                value: out,
                dtype: dtypes[i],
            }],
        };
        g.validate()?;
        step_of[i] = Some(steps.len());
        steps.push(UnfusedStep { graph: g, operands });
    }
    Ok(steps)
}

/// Step outputs are always written as full tensors (the elementwise template's outputs are
/// full `rows x cols`), so a later step reads them as `Full`.
fn step_broadcast(_graph: &ExprGraph, _node: usize) -> Broadcast {
    Broadcast::Full
}

/// The f64 value of the unfused chain at one point: each step evaluated in f64 and its result
/// rounded to the step's output dtype (what a materialised intermediate holds). `x` holds the
/// original graph's inputs at that point.
pub fn eval_unfused_point(steps: &[UnfusedStep], x: &[f64]) -> f64 {
    let mut outs: Vec<f64> = Vec::with_capacity(steps.len());
    for s in steps {
        let args: Vec<f64> = s
            .operands
            .iter()
            .map(|o| match *o {
                StepOperand::Input(i) => x.get(i).copied().unwrap_or(f64::NAN),
                StepOperand::Step(i) => outs.get(i).copied().unwrap_or(f64::NAN),
            })
            .collect();
        let v = rtx_synthesis::templates::elementwise::reference::eval_point(&s.graph, &args)
            .first()
            .copied()
            .unwrap_or(f64::NAN);
        outs.push(round_to(s.graph.outputs[0].dtype, v));
    }
    outs.last().copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_synthesis::templates::elementwise::reference::eval_point;

    #[test]
    fn named_graphs_have_their_op_counts() {
        assert_eq!(gelu_affine(DType::Bf16).unwrap().op_count(), 3);
        assert_eq!(chain8(DType::Bf16).unwrap().op_count(), 8);
    }

    #[test]
    fn random_graphs_are_deterministic_and_valid() {
        for seed in 0..20 {
            let a = random_graph(seed, 6, DType::F16).unwrap();
            let b = random_graph(seed, 6, DType::F16).unwrap();
            assert_eq!(a, b);
            assert_eq!(a.op_count(), 6);
        }
        assert_ne!(
            random_graph(1, 6, DType::F32).unwrap(),
            random_graph(2, 6, DType::F32).unwrap()
        );
    }

    #[test]
    fn unfused_chain_has_one_step_per_op_and_matches_in_f32() {
        for g in [
            chain8(DType::F32).unwrap(),
            gelu_affine(DType::F32).unwrap(),
        ] {
            let steps = unfuse(&g).unwrap();
            assert_eq!(steps.len(), g.op_count());
            assert!(steps.iter().all(|s| s.graph.op_count() == 1));
            let x: Vec<f64> = vec![0.3, -0.7, 0.11][..g.inputs.len()].to_vec();
            let fused = eval_point(&g, &x)[0];
            let unf = eval_unfused_point(&steps, &x);
            assert!(
                (fused - unf).abs() <= 1e-5 * fused.abs().max(1.0),
                "{fused} {unf}"
            );
        }
    }

    #[test]
    fn unfused_random_graphs_validate() {
        for seed in 0..30 {
            let g = random_graph(seed, 8, DType::Bf16).unwrap();
            let steps = unfuse(&g).unwrap();
            assert_eq!(steps.len(), 8);
        }
    }
}
