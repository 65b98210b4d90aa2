//! Property tests over random elementwise graphs (<= 16 ops, <= 4 inputs): validation, emission
//! never panicking, each input loaded exactly once in the source, and a sample of random graphs
//! compiled with NVRTC for sm_90a and sm_120 without spills.

use proptest::prelude::*;
use rtx_synthesis::aot::{self, nvrtc_or_skip};
use rtx_synthesis::templates::elementwise::device::ptxas_spill_bytes;
use rtx_synthesis::templates::elementwise::expr::{MAX_INPUTS, MAX_OPS};
use rtx_synthesis::templates::elementwise::{
    BinaryOp, Broadcast, ElementwiseConfig, ElementwiseProblem, ElementwiseTemplate, ExprGraph,
    GraphBuilder, GraphError, GridMode, Node, UnaryOp, ValueRef,
};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];
const SHAPES: [Broadcast; 4] = [
    Broadcast::Full,
    Broadcast::Row,
    Broadcast::Col,
    Broadcast::Scalar,
];
const UNARY: [UnaryOp; 15] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::GeluErf,
    UnaryOp::GeluTanh,
    UnaryOp::Silu,
    UnaryOp::Relu,
    UnaryOp::Cast(DType::F32),
    UnaryOp::Cast(DType::F16),
    UnaryOp::Cast(DType::Bf16),
];
const BINARY: [BinaryOp; 6] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Min,
    BinaryOp::Max,
];

/// Builds a valid graph from a stream of random numbers: `n_in` inputs, at most `MAX_OPS` ops,
/// every input used, 1 or 2 outputs.
fn graph_from(recipe: &[u32]) -> ExprGraph {
    let mut it = recipe.iter().copied().cycle();
    let mut next = move || it.next().unwrap_or(0) as usize;
    let mut b = GraphBuilder::new();
    let n_in = 1 + next() % MAX_INPUTS;
    let mut vals: Vec<(ValueRef, DType)> = Vec::new();
    for i in 0..n_in {
        let d = DTYPES[next() % 3];
        // The first input is full so that some graphs are not all-broadcast.
        let s = if i == 0 {
            Broadcast::Full
        } else {
            SHAPES[next() % 4]
        };
        vals.push((b.input(d, s), d));
    }
    let budget = MAX_OPS - 2 * n_in;
    let n_ops = 1 + next() % budget;
    let mut used = vec![false; n_in];
    let mark = |r: ValueRef, used: &mut Vec<bool>| {
        if let ValueRef::Input(k) = r {
            used[k as usize] = true;
        }
    };
    for _ in 0..n_ops {
        let (a, da) = vals[next() % vals.len()];
        match next() % 8 {
            0 => {
                // A constant, combined at once so it counts as used.
                let c = b.constant((next() % 200) as f32 * 0.05 - 5.0, da);
                let v = b.binary(BINARY[next() % 6], a, c);
                mark(a, &mut used);
                vals.push((v, da));
            }
            1..=3 => {
                let op = UNARY[next() % UNARY.len()];
                let v = b.unary(op, a);
                mark(a, &mut used);
                let d = if let UnaryOp::Cast(t) = op { t } else { da };
                vals.push((v, d));
            }
            _ => {
                let same: Vec<(ValueRef, DType)> =
                    vals.iter().copied().filter(|(_, d)| *d == da).collect();
                let (c, _) = same[next() % same.len()];
                let v = b.binary(BINARY[next() % 6], a, c);
                mark(a, &mut used);
                mark(c, &mut used);
                vals.push((v, da));
            }
        }
    }
    let (mut acc, dacc) = *vals.last().unwrap();
    for (k, u) in used.iter().enumerate() {
        if !u {
            let (inp, d) = vals[k];
            let c = if d == dacc { inp } else { b.cast(inp, dacc) };
            acc = b.add(acc, c);
        }
    }
    b.output(acc, dacc);
    if next() % 2 == 0 {
        let (v, d) = vals[next() % vals.len()];
        b.output(v, d);
    }
    b.build().expect("the generator only builds valid graphs")
}

fn config_from(p: &ElementwiseProblem, pick: usize) -> ElementwiseConfig {
    let space = ElementwiseTemplate.valid_space(p, Arch::Sm90a);
    assert!(!space.is_empty(), "no valid config for {p:?}");
    space[pick % space.len()]
}

/// Lines of the kernel source that load from `in{i}`.
fn load_lines(code: &str, i: usize) -> usize {
    let name = format!("in{i}");
    code.lines()
        .filter(|l| l.contains("rtx_ld"))
        .filter(|l| {
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|tok| tok == name)
        })
        .count()
}

fn assert_loads_once(g: &ExprGraph, code: &str) {
    for i in 0..g.inputs.len() {
        assert_eq!(
            load_lines(code, i),
            1,
            "input {i} must be loaded exactly once:\n{code}"
        );
    }
    assert_eq!(load_lines(code, g.inputs.len()), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_graphs_emit_and_load_each_input_once(
        recipe in prop::collection::vec(any::<u32>(), 64),
        rows in 1u32..5000,
        cols in 1u32..5000,
        pick in any::<usize>(),
    ) {
        let g = graph_from(&recipe);
        prop_assert!(g.op_count() <= MAX_OPS && g.inputs.len() <= MAX_INPUTS);
        prop_assert!(g.validate().is_ok());
        let p = ElementwiseProblem::new(g.clone(), rows, cols);
        let c = config_from(&p, pick);
        let src = ElementwiseTemplate.emit(&p, &c, Arch::Sm90a).unwrap();
        assert_loads_once(&g, &src.code);
        for o in 0..g.outputs.len() {
            let store = format!("rtx_st<{}, V>(out{o} + e", g.outputs[o].dtype.cuda_type());
            prop_assert!(src.code.contains(&store), "missing {}", store);
        }
        // The default config is valid too.
        let d = ElementwiseTemplate.default_config(&p, Arch::Sm120);
        prop_assert!(ElementwiseTemplate.check(&p, &d, Arch::Sm120).is_ok(), "{:?}", d);
    }

    #[test]
    fn forward_references_are_dangling_and_named(
        recipe in prop::collection::vec(any::<u32>(), 64),
        which in any::<usize>(),
        ahead in 0u32..3,
    ) {
        let mut g = graph_from(&recipe);
        let ops: Vec<usize> = (0..g.nodes.len()).filter(|&i| g.nodes[i].is_op()).collect();
        let k = ops[which % ops.len()];
        let bad = ValueRef::Node(k as u32 + ahead);
        match &mut g.nodes[k] {
            Node::Unary { arg, .. } => *arg = bad,
            Node::Binary { rhs, .. } => *rhs = bad,
            Node::Const { .. } => unreachable!(),
        }
        prop_assert_eq!(g.validate(), Err(GraphError::DanglingRef { node: k, reference: bad }));
        let p = ElementwiseProblem::new(g, 16, 16);
        let c = ElementwiseConfig { vec: 1, threads: 128, unroll: 1, grid: GridMode::OneShot };
        let e = ElementwiseTemplate.emit(&p, &c, Arch::Sm90a).unwrap_err();
        prop_assert!(e.reason.contains(&format!("node {k}")), "{}", e);
    }

    #[test]
    fn too_many_inputs_or_ops_are_rejected(recipe in prop::collection::vec(any::<u32>(), 64), extra in 1usize..4) {
        let g = graph_from(&recipe);
        let mut more_ops = g.clone();
        let last = ValueRef::Node(more_ops.nodes.len() as u32 - 1);
        let mut prev = last;
        for _ in 0..(MAX_OPS + extra - g.op_count()) {
            more_ops.nodes.push(Node::Unary { op: UnaryOp::Neg, arg: prev });
            prev = ValueRef::Node(more_ops.nodes.len() as u32 - 1);
        }
        let too_many_ops = matches!(more_ops.validate(), Err(GraphError::TooManyOps { count, max: MAX_OPS, .. }) if count == MAX_OPS + extra);
        prop_assert!(too_many_ops, "{:?}", more_ops.validate());
        let mut more_inputs = g.clone();
        while more_inputs.inputs.len() <= MAX_INPUTS {
            let d = more_inputs.inputs[0];
            more_inputs.inputs.push(d);
        }
        let too_many_inputs = matches!(more_inputs.validate(), Err(GraphError::TooManyInputs { .. }));
        prop_assert!(too_many_inputs);
    }

    #[test]
    fn retyping_an_input_is_a_typed_error_not_a_panic(recipe in prop::collection::vec(any::<u32>(), 64), k in any::<usize>(), d in 0usize..3) {
        let mut g = graph_from(&recipe);
        let k = k % g.inputs.len();
        let before = g.inputs[k].dtype;
        g.inputs[k].dtype = DTYPES[d];
        match g.validate() {
            Ok(_) => {}
            Err(GraphError::DTypeMismatch { node, .. }) => {
                let binary = matches!(g.nodes[node], Node::Binary { .. });
                prop_assert!(binary);
            }
            Err(GraphError::OutputDTypeMismatch { output, .. }) => prop_assert!(output < g.outputs.len()),
            Err(e) => prop_assert!(false, "unexpected error {e} after retyping input {k} from {before}"),
        }
        let p = ElementwiseProblem::new(g, 8, 8);
        let c = ElementwiseTemplate.default_config(&p, Arch::Sm90a);
        let _ = ElementwiseTemplate.emit(&p, &c, Arch::Sm90a);
    }

    #[test]
    fn arbitrary_graphs_and_configs_never_panic(
        n_in in 0usize..6,
        nodes in prop::collection::vec((0u8..3, 0usize..32, 0u32..24, 0u32..24, any::<bool>(), any::<bool>()), 0..20),
        outs in prop::collection::vec((0u32..24, any::<bool>(), 0usize..3), 0..5),
        vec in 0u32..20, threads in 0u32..1100, unroll in 0u32..10, blocks in prop::option::of(0u32..100_000),
        rows in 0u32..3000, cols in 0u32..3000,
    ) {
        let mut g = ExprGraph::default();
        for i in 0..n_in {
            g.inputs.push(rtx_synthesis::templates::elementwise::InputSpec { dtype: DTYPES[i % 3], broadcast: SHAPES[i % 4] });
        }
        let r = |v: u32, input: bool| if input { ValueRef::Input(v % 6) } else { ValueRef::Node(v) };
        for (kind, op, a, bb, ia, ib) in nodes {
            g.nodes.push(match kind {
                0 => Node::Const { bits: a.wrapping_mul(0x9e37_79b9), dtype: DTYPES[op % 3] },
                1 => Node::Unary { op: UNARY[op % UNARY.len()], arg: r(a, ia) },
                _ => Node::Binary { op: BINARY[op % 6], lhs: r(a, ia), rhs: r(bb, ib) },
            });
        }
        for (v, input, d) in outs {
            g.outputs.push(rtx_synthesis::templates::elementwise::OutputSpec { value: r(v, input), dtype: DTYPES[d] });
        }
        let grid = blocks.map_or(GridMode::OneShot, |blocks| GridMode::Stride { blocks });
        let c = ElementwiseConfig { vec, threads, unroll, grid };
        let p = ElementwiseProblem::new(g.clone(), rows, cols);
        let t = ElementwiseTemplate;
        let checked = t.check(&p, &c, Arch::Sm90a);
        match t.emit(&p, &c, Arch::Sm90a) {
            Ok(src) => {
                prop_assert!(checked.is_ok());
                assert_loads_once(&g, &src.code);
                let d = t.launch(&p, &c);
                prop_assert!(d.grid[0] >= 1);
            }
            Err(e) => {
                prop_assert!(checked.is_err());
                prop_assert!(!e.reason.is_empty());
            }
        }
    }
}

#[test]
fn sampled_random_graphs_compile_without_spills() {
    if !nvrtc_or_skip("sampled_random_graphs_compile_without_spills") {
        return;
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u32
    };
    for sample in 0..6 {
        let recipe: Vec<u32> = (0..64).map(|_| rnd()).collect();
        let g = graph_from(&recipe);
        let p = ElementwiseProblem::new(g, 2048, 2048 + sample);
        for arch in [Arch::Sm90a, Arch::Sm120] {
            let c = if sample % 2 == 0 {
                ElementwiseTemplate.default_config(&p, arch)
            } else {
                config_from(&p, rnd() as usize)
            };
            let src = ElementwiseTemplate.emit(&p, &c, arch).unwrap();
            let out = aot::compile(&src, arch)
                .unwrap_or_else(|e| panic!("sample {sample} on {arch}: {e}"));
            let spills = ptxas_spill_bytes(&out.log).expect("ptxas -v spill line");
            assert_eq!(
                spills,
                0,
                "sample {sample} ({} ops) {c:?} on {arch}:\n{}",
                p.graph.op_count(),
                out.log
            );
            eprintln!(
                "sample {sample} on {arch}: {} ops, {} inputs, {c:?}: ok",
                p.graph.op_count(),
                p.graph.inputs.len()
            );
        }
    }
}
