//! Compiles wgmma GEMM configs for sm_90a with NVRTC and checks the ptxas resource report:
//! no spills, registers within the launch / `setmaxnreg` budgets, wgmma and TMA present.

use rtx_synthesis::aot::{self, Toolchain};
use rtx_synthesis::templates::gemm::wgmma::{WgmmaConfig, WgmmaGemm, DEFAULT_LADDER};
use rtx_synthesis::templates::gemm::{Activation, GemmProblem, Layout};
use rtx_synthesis::templates::Template;
use rtx_synthesis::{Arch, DType};

use rtx_synthesis::aot::nvrtc_or_skip;

/// The number after `key` on the ptxas line that names `entry` (e.g. "Used 168 registers").
fn ptxas_number(log: &str, entry: &str, before: &str) -> Option<u64> {
    let mut in_entry = false;
    for line in log.lines() {
        if line.contains("Compiling entry function") || line.contains("Function properties for") {
            in_entry = line.contains(entry);
        }
        if in_entry {
            if let Some(pos) = line.find(before) {
                let head = &line[..pos];
                let num: String = head
                    .trim_end()
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii_digit())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if let Ok(n) = num.parse() {
                    return Some(n);
                }
            }
        }
    }
    None
}

/// The PTX NVRTC makes of `code` for compute_90a.
fn ptx_of(code: &str) -> String {
    let tc = Toolchain::get().unwrap();
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("compute_90a"),
        include_paths: vec![tc.include_dir.display().to_string()],
        options: vec!["--std=c++17".into(), "-default-device".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(code, opts)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .to_src()
}

fn compile_and_check(t: &WgmmaGemm, p: &GemmProblem, c: &WgmmaConfig) {
    let src = t.emit(p, c, Arch::Sm90a).unwrap_or_else(|e| panic!("{e}"));
    let k = if p.dtype == DType::Tf32 { 8 } else { 16 };
    assert!(src.code.contains(&format!(
        "wgmma.mma_async.sync.aligned.m64n{}k{k}.f32",
        c.wgmma_n
    )));
    assert!(src
        .code
        .contains("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"));
    let out = match aot::compile(&src, Arch::Sm90a) {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    let (kind, _) = rtx_runtime::prepare_image(&out.cubin).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kind, rtx_runtime::ImageKind::Cubin);
    let log = &out.log;
    if std::env::var_os("RTX_SHOW_PTXAS").is_some() {
        eprintln!("{}\n{log}", src.entry);
    }
    let regs = ptxas_number(log, &src.entry, "registers")
        .unwrap_or_else(|| panic!("no register line for {}:\n{log}", src.entry));
    let spill_st = ptxas_number(log, &src.entry, "bytes spill stores")
        .unwrap_or_else(|| panic!("no spill line:\n{log}"));
    let spill_ld = ptxas_number(log, &src.entry, "bytes spill loads")
        .unwrap_or_else(|| panic!("no spill line:\n{log}"));
    let stack = ptxas_number(log, &src.entry, "bytes stack frame").unwrap_or(0);
    assert_eq!((spill_st, spill_ld), (0, 0), "{} spills:\n{log}", src.entry);
    assert_eq!(stack, 0, "{} uses a stack frame:\n{log}", src.entry);
    // The launch allocation must cover what setmaxnreg hands out, and fit one block per SM.
    let threads = c.threads() as u64;
    let budget = 128 * (40 + c.consumers as u64 * c.consumer_regs() as u64);
    assert!(
        regs * threads >= budget,
        "{}: {regs} regs x {threads} threads < setmaxnreg budget {budget}",
        src.entry
    );
    assert!(
        regs * threads <= 65536,
        "{}: {regs} regs x {threads} threads exceed the SM",
        src.entry
    );
    assert!(
        !log.contains("wgmma.mma_async instructions are serialized"),
        "{} serializes wgmma:\n{log}",
        src.entry
    );
    eprintln!(
        "{}: {regs} regs, smem {} B, log:\n{log}",
        src.entry,
        c.smem_bytes()
    );
}

fn cfg(bm: u32, bn: u32, consumers: u32, wgmma_n: u32, stages: u32, cluster_m: u32) -> WgmmaConfig {
    WgmmaConfig {
        cluster_m,
        raster_group: 8,
        ..WgmmaConfig::basic(bm, bn, 64, consumers, wgmma_n, stages)
    }
}

/// The same config with the tf32 stage depth (32 four-byte elements = 128 bytes).
fn tf(c: WgmmaConfig) -> WgmmaConfig {
    WgmmaConfig { bk: 32, ..c }
}

/// `p` with the epilogue that reads everything: beta * C, bias, activation `act`, residual.
fn fuse_all(p: &mut GemmProblem, act: Activation) {
    p.epilogue.beta = 0.5;
    p.epilogue.bias = true;
    p.epilogue.activation = act;
    p.epilogue.residual = true;
}

const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::Row, Layout::Row),
    (Layout::Row, Layout::Col),
    (Layout::Col, Layout::Row),
    (Layout::Col, Layout::Col),
];

#[test]
fn tf32_default_configs_compile_for_every_layout() {
    if !nvrtc_or_skip("tf32_default_configs_compile_for_every_layout") {
        return;
    }
    let t = WgmmaGemm::default();
    for (la, lb) in LAYOUTS {
        let p = GemmProblem::new(4096, 4096, 4096, DType::Tf32, la, lb);
        let c = t.default_config(&p, Arch::Sm90a);
        assert_eq!(
            (c.bm, c.bn, c.bk, c.consumers, c.stages),
            (128, 256, 32, 2, 4)
        );
        compile_and_check(&t, &p, &c);
    }
}

#[test]
fn tf32_tile_shapes_layouts_and_clusters_compile() {
    if !nvrtc_or_skip("tf32_tile_shapes_layouts_and_clusters_compile") {
        return;
    }
    let t = WgmmaGemm::default();
    let sk = |c: WgmmaConfig, split_k: u32| WgmmaConfig { split_k, ..c };
    let pp = |c: WgmmaConfig| WgmmaConfig {
        pingpong: true,
        ..c
    };
    let cases = [
        tf(cfg(128, 256, 2, 256, 4, 1)),
        tf(cfg(128, 128, 1, 128, 6, 1)),
        tf(cfg(128, 128, 2, 64, 5, 2)),
        tf(cfg(64, 256, 1, 128, 4, 1)),
        tf(cfg(256, 128, 2, 128, 4, 2)),
        tf(cfg(64, 64, 1, 64, 6, 1)),
        tf(cfg(128, 192, 2, 192, 4, 1)),
        tf(cfg(128, 256, 2, 128, 4, 2)),
        sk(tf(cfg(64, 128, 1, 128, 6, 1)), 2),
        sk(tf(cfg(128, 128, 2, 128, 5, 2)), 2),
        pp(tf(cfg(64, 256, 2, 256, 4, 1))),
        pp(tf(cfg(128, 128, 2, 128, 6, 1))),
        sk(pp(tf(cfg(64, 128, 2, 128, 6, 1))), 3),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let (la, lb) = LAYOUTS[i % 4];
        // Odd sizes; A/B pitches padded to 4 floats only where TMA reads the operand in place.
        let mut p = GemmProblem::new(1000, 1000, 1000, DType::Tf32, la, lb);
        p.lda = p.lda.next_multiple_of(4);
        p.ldb = p.ldb.next_multiple_of(4);
        if i % 3 == 1 {
            fuse_all(&mut p, Activation::GeluErf);
        }
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        let staged = la == Layout::Col || lb == Layout::Row;
        assert_eq!(src.code.contains("int prepass)"), staged, "{}", src.entry);
        compile_and_check(&t, &p, &c);
    }
}

#[test]
fn tf32_sampled_space_compiles() {
    if !nvrtc_or_skip("tf32_sampled_space_compiles") {
        return;
    }
    let t = WgmmaGemm::default();
    let nn = GemmProblem::nn(4096, 4096, 4096, DType::Tf32);
    let valid: Vec<WgmmaConfig> = t
        .valid_space(&nn, Arch::Sm90a)
        .into_iter()
        .filter(|c| c.persistent && c.raster_group == 8)
        .collect();
    assert!(valid.iter().all(|c| c.bk == 32));
    let step = (valid.len() / 16).max(1);
    for (i, c) in valid.iter().step_by(step).enumerate() {
        let (la, lb) = LAYOUTS[i % 4];
        compile_and_check(
            &t,
            &GemmProblem::new(4096, 4096, 4096, DType::Tf32, la, lb),
            c,
        );
    }
}

#[test]
fn tf32_ptx_has_k8_tf32_wgmma_and_the_prepass() {
    if !nvrtc_or_skip("tf32_ptx_has_k8_tf32_wgmma_and_the_prepass") {
        return;
    }
    let t = WgmmaGemm::default();
    for (lb, c) in [
        (Layout::Col, tf(cfg(128, 256, 2, 256, 4, 1))),
        (Layout::Row, tf(cfg(128, 256, 2, 128, 4, 2))),
    ] {
        let p = GemmProblem::new(4096, 4096, 4096, DType::Tf32, Layout::Row, lb);
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        let ptx = ptx_of(&src.code);
        let count = |s: &str| ptx.matches(s).count();
        // 4 k8 slices (32 bytes of K each) per 128-byte stage.
        let per_kblock = 4 * c.m_iters() * c.n_iters();
        assert_eq!(
            count(&format!(
                "wgmma.mma_async.sync.aligned.m64n{}k8.f32.tf32.tf32",
                c.wgmma_n
            )) as u32,
            per_kblock
        );
        assert_eq!(count("k16"), 0, "no 16-bit wgmma in a tf32 kernel");
        assert!(
            count("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes")
                >= 1
        );
        // The staging pre-pass exists exactly when B is row-major (NN).
        assert_eq!(ptx.contains("ld.global.nc.f32"), lb == Layout::Row);
        if lb == Layout::Row {
            assert!(count("st.global.cg.f32") >= 1, "pre-pass stores");
        }
    }
}

#[test]
fn default_config_compiles_without_spills() {
    if !nvrtc_or_skip("default_config_compiles_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    let p = GemmProblem::new(4096, 4096, 4096, DType::Bf16, Layout::Row, Layout::Col);
    compile_and_check(&t, &p, &t.default_config(&p, Arch::Sm90a));
}

#[test]
fn every_default_ladder_rung_compiles_without_spills() {
    if !nvrtc_or_skip("every_default_ladder_rung_compiles_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    // Each rung in each layout, with the plain epilogue and with everything fused (f32 output).
    for rung in DEFAULT_LADDER {
        for (i, (la, lb)) in [
            (Layout::Row, Layout::Row),
            (Layout::Row, Layout::Col),
            (Layout::Col, Layout::Row),
            (Layout::Col, Layout::Col),
        ]
        .into_iter()
        .enumerate()
        {
            let mut p = GemmProblem::new(
                1024,
                1024,
                1024,
                if i % 2 == 0 { DType::Bf16 } else { DType::F16 },
                la,
                lb,
            );
            if i >= 2 {
                fuse_all(&mut p, Activation::GeluTanh);
                p.epilogue.out_dtype = DType::F32;
            }
            let c = t.rung_config(&p, &rung);
            assert_eq!(c.tma_store, rung.persistent, "{rung:?}");
            compile_and_check(&t, &p, &c);
        }
    }
}

#[test]
fn tile_shapes_layouts_and_clusters_compile() {
    if !nvrtc_or_skip("tile_shapes_layouts_and_clusters_compile") {
        return;
    }
    let t = WgmmaGemm::default();
    let cases = [
        (
            DType::Bf16,
            Layout::Row,
            Layout::Row,
            cfg(128, 256, 2, 256, 4, 1),
        ),
        (
            DType::F16,
            Layout::Row,
            Layout::Col,
            cfg(128, 128, 1, 128, 6, 1),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Row,
            cfg(128, 128, 2, 64, 5, 2),
        ),
        (
            DType::Bf16,
            Layout::Col,
            Layout::Col,
            cfg(64, 256, 1, 128, 4, 1),
        ),
        (
            DType::F16,
            Layout::Col,
            Layout::Row,
            cfg(256, 128, 2, 128, 4, 2),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Col,
            cfg(64, 64, 1, 64, 6, 1),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Col,
            cfg(128, 192, 2, 192, 4, 1),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Col,
            cfg(128, 256, 2, 128, 4, 2),
        ),
    ];
    for (dtype, la, lb, c) in cases {
        let p = GemmProblem::new(1000, 1000, 1000, dtype, la, lb);
        let p = GemmProblem {
            lda: p.lda.next_multiple_of(8),
            ldb: p.ldb.next_multiple_of(8),
            ..p
        };
        compile_and_check(&t, &p, &c);
    }
}

#[test]
fn fused_epilogues_compile() {
    if !nvrtc_or_skip("fused_epilogues_compile") {
        return;
    }
    let t = WgmmaGemm::default();
    let acts = [
        Activation::Relu,
        Activation::GeluTanh,
        Activation::GeluErf,
        Activation::Silu,
    ];
    for (i, act) in acts.into_iter().enumerate() {
        let mut p = GemmProblem::nn(
            512,
            512,
            512,
            if i % 2 == 0 { DType::Bf16 } else { DType::F16 },
        );
        p.epilogue.beta = 0.5;
        p.epilogue.bias = true;
        p.epilogue.activation = act;
        p.epilogue.residual = i % 2 == 0;
        p.epilogue.out_dtype = if i == 3 { DType::F32 } else { p.dtype };
        compile_and_check(&t, &p, &t.default_config(&p, Arch::Sm90a));
    }
}

#[test]
fn dump_source_when_asked() {
    // RTX_DUMP_WGMMA=1 prints one generated kernel (for review); always checks it is non-empty.
    let t = WgmmaGemm::default();
    let p = GemmProblem::nn(1000, 1000, 1000, DType::Bf16);
    let p = GemmProblem { ldb: 1000, ..p };
    let c = cfg(128, 256, 2, 128, 4, 2);
    let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
    assert!(src.code.contains(&src.entry));
    if std::env::var_os("RTX_DUMP_WGMMA").is_some() {
        eprintln!("{}", src.code);
    }
}

#[test]
fn ptx_contains_the_hopper_instructions() {
    if !nvrtc_or_skip("ptx_contains_the_hopper_instructions") {
        return;
    }
    let t = WgmmaGemm::default();
    let ts = WgmmaConfig {
        tma_store: true,
        ..cfg(128, 256, 2, 256, 4, 1)
    };
    for (lb, c) in [
        (Layout::Col, cfg(128, 256, 2, 256, 4, 1)),
        (Layout::Row, cfg(128, 256, 2, 128, 4, 2)),
        (Layout::Row, ts),
    ] {
        let p = GemmProblem::new(4096, 4096, 4096, DType::Bf16, Layout::Row, lb);
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        let ptx = ptx_of(&src.code);
        let count = |s: &str| ptx.matches(s).count();
        // With the deferred TMA-store epilogue a unit's first k-block is peeled off the loop.
        let per_kblock = 4 * c.m_iters() * c.n_iters() * if c.tma_store { 2 } else { 1 };
        assert_eq!(
            count(&format!(
                "wgmma.mma_async.sync.aligned.m64n{}k16.f32.bf16.bf16",
                c.wgmma_n
            )) as u32,
            per_kblock,
            "unrolled k16 x m x n"
        );
        assert!(
            count("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes")
                >= 1
        );
        assert!(
            count("setmaxnreg.dec.sync.aligned.u32 40") == 1
                && count("setmaxnreg.inc.sync.aligned.u32") == 1
        );
        assert!(
            count("wgmma.fence.sync.aligned") >= 1 && count("wgmma.commit_group.sync.aligned") >= 1
        );
        assert!(
            count("wgmma.wait_group.sync.aligned 1") >= 1
                && count("wgmma.wait_group.sync.aligned 0") >= 1
        );
        assert!(count("mbarrier.try_wait.parity") >= 2);
        assert!(
            ptx.contains(".maxntid 384, 1, 1"),
            "launch bounds reach the PTX"
        );
        if c.tma_store {
            // 16-bit outputs leave through stmatrix.x4: one per 16 columns x 16 rows of a warp,
            // i.e. bn / 16 per m64 block per consumer; then one bulk tensor store per 64 x 64 box.
            // The stores are deferred: they appear twice, in a unit's first k-block (the previous
            // unit's outputs) and after the unit loop (the last unit's).
            assert!(
                src.code
                    .contains("deferred: a unit's packed outputs wait in pk_*"),
                "deferred epilogue"
            );
            assert_eq!(
                count("stmatrix.sync.aligned.m8n8.x4.shared.b16") as u32,
                2 * c.m_iters() * c.bn / 16,
                "stmatrix per m64 x 16 columns"
            );
            assert_eq!(
                count("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group") as u32,
                2 * c.m_iters() * c.bn / 64,
                "one store per box"
            );
        }
        if c.cluster_m == 2 {
            assert!(count(".multicast::cluster") >= 1);
            assert!(
                ptx.contains(".reqnctapercluster 2, 1, 1"),
                "cluster dims reach the PTX"
            );
        }
    }
}

#[test]
fn sampled_space_compiles() {
    if !nvrtc_or_skip("sampled_space_compiles") {
        return;
    }
    // A deterministic spread over the valid space (persistence and raster order do not change
    // the code shape much, the tile/stage/cluster fields do), alternating NN and NT.
    let t = WgmmaGemm::default();
    let nn = GemmProblem::nn(4096, 4096, 4096, DType::Bf16);
    let valid: Vec<WgmmaConfig> = t
        .valid_space(&nn, Arch::Sm90a)
        .into_iter()
        .filter(|c| c.persistent && c.raster_group == 8)
        .collect();
    let step = (valid.len() / 24).max(1);
    for (i, c) in valid.iter().step_by(step).enumerate() {
        let lb = if i % 2 == 0 { Layout::Row } else { Layout::Col };
        let p = GemmProblem::new(
            4096,
            4096,
            4096,
            if i % 3 == 0 { DType::F16 } else { DType::Bf16 },
            Layout::Row,
            lb,
        );
        compile_and_check(&t, &p, c);
    }
}

#[test]
fn split_k_and_pingpong_compile_without_spills() {
    if !nvrtc_or_skip("split_k_and_pingpong_compile_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    let sk = |c: WgmmaConfig, split_k: u32| WgmmaConfig { split_k, ..c };
    let pp = |c: WgmmaConfig| WgmmaConfig {
        pingpong: true,
        ..c
    };
    let cases = [
        (Layout::Col, sk(cfg(64, 128, 1, 128, 6, 1), 2)),
        (Layout::Row, sk(cfg(128, 128, 2, 128, 6, 1), 2)),
        (Layout::Col, sk(cfg(64, 256, 1, 256, 4, 1), 4)),
        (Layout::Col, pp(cfg(64, 256, 2, 256, 4, 1))),
        (Layout::Row, pp(cfg(128, 128, 2, 128, 6, 1))),
        (Layout::Col, pp(cfg(128, 128, 2, 64, 5, 2))),
        (Layout::Row, sk(pp(cfg(64, 128, 2, 128, 6, 1)), 3)),
        (Layout::Col, sk(cfg(128, 128, 2, 128, 5, 2), 2)),
    ];
    for (i, (lb, c)) in cases.into_iter().enumerate() {
        let mut p = GemmProblem::new(1000, 1000, 1024, DType::Bf16, Layout::Row, lb);
        if i % 2 == 1 {
            // The split-K fix-up runs the full fused epilogue too.
            fuse_all(&mut p, Activation::GeluTanh);
        }
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert_eq!(
            src.code.contains("atomicAdd(cnt, 1u)"),
            c.split_k > 1,
            "{}",
            src.entry
        );
        assert_eq!(
            src.code.contains("if ((it & 1) != cw)"),
            c.pingpong,
            "{}",
            src.entry
        );
        compile_and_check(&t, &p, &c);
    }
}

#[test]
fn split_n_compiles_without_spills() {
    if !nvrtc_or_skip("split_n_compiles_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    let sn = |c: WgmmaConfig| WgmmaConfig { split_n: true, ..c };
    let ts = |c: WgmmaConfig| WgmmaConfig {
        tma_store: true,
        ..c
    };
    let cases = [
        (
            Layout::Row,
            Layout::Row,
            sn(WgmmaConfig {
                persistent: false,
                ..cfg(64, 128, 2, 64, 8, 1)
            }),
        ),
        (
            Layout::Col,
            Layout::Col,
            ts(sn(cfg(128, 256, 2, 128, 4, 2))),
        ),
        (
            Layout::Row,
            Layout::Col,
            WgmmaConfig {
                split_k: 2,
                ..sn(cfg(64, 256, 2, 128, 5, 1))
            },
        ),
        (Layout::Col, Layout::Row, ts(sn(cfg(128, 128, 2, 64, 6, 1)))),
    ];
    for (i, (la, lb, c)) in cases.into_iter().enumerate() {
        let mut p = GemmProblem::new(1000, 1000, 1024, DType::Bf16, la, lb);
        if i % 2 == 1 {
            fuse_all(&mut p, Activation::GeluTanh);
        }
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(src.entry.contains("_sn"), "{}", src.entry);
        assert!(
            src.code
                .contains(&format!("B_CONSUMER_OFFSET = {}", c.bn / 2 * 128)),
            "{}",
            src.entry
        );
        compile_and_check(&t, &p, &c);
    }
}

#[test]
fn cluster_split_k_compiles_without_spills() {
    if !nvrtc_or_skip("cluster_split_k_compiles_without_spills") {
        return;
    }
    let t = WgmmaGemm::default();
    let ck = |c: WgmmaConfig| WgmmaConfig { cluster_k: 2, ..c };
    let ts = |c: WgmmaConfig| WgmmaConfig {
        tma_store: true,
        ..c
    };
    let sn = |c: WgmmaConfig| WgmmaConfig { split_n: true, ..c };
    let once = |c: WgmmaConfig| WgmmaConfig {
        persistent: false,
        ..c
    };
    let cases = [
        (
            DType::Bf16,
            Layout::Row,
            Layout::Row,
            ts(ck(cfg(128, 128, 2, 128, 4, 1))),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Row,
            once(ck(cfg(128, 128, 2, 128, 6, 1))),
        ),
        (
            DType::F16,
            Layout::Row,
            Layout::Col,
            ts(sn(ck(cfg(128, 128, 2, 64, 5, 1)))),
        ),
        (
            DType::Bf16,
            Layout::Col,
            Layout::Row,
            ck(cfg(128, 64, 2, 64, 8, 1)),
        ),
        (
            DType::Bf16,
            Layout::Row,
            Layout::Row,
            ck(cfg(128, 256, 2, 256, 3, 1)),
        ),
        (
            DType::Bf16,
            Layout::Col,
            Layout::Col,
            ck(cfg(256, 128, 2, 128, 3, 1)),
        ),
        (
            DType::Tf32,
            Layout::Row,
            Layout::Col,
            tf(ck(cfg(128, 128, 2, 128, 4, 1))),
        ),
    ];
    for (i, (dtype, la, lb, c)) in cases.into_iter().enumerate() {
        let mut p = GemmProblem::new(1000, 1000, 1024, dtype, la, lb);
        if i % 2 == 1 {
            fuse_all(&mut p, Activation::GeluTanh);
        }
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(src.entry.contains("_ck2"), "{}", src.entry);
        assert!(
            src.code.contains("__cluster_dims__(2, 1, 1)"),
            "{}",
            src.entry
        );
        // One push per float4 of a consumer's accumulators, one load per float4 on the owner.
        assert_eq!(
            src.code.matches("st_async_f4(rdst").count() as u32,
            c.acc_regs() / 4,
            "{}",
            src.entry
        );
        assert_eq!(
            src.code.matches("ld_shared_f4(rsrc").count() as u32,
            c.acc_regs() / 4,
            "{}",
            src.entry
        );
        assert!(
            !src.code.contains("atomicAdd"),
            "{}: no global workspace",
            src.entry
        );
        let d = t.launch(&p, &c);
        assert_eq!(d.grid[0] % 2, 0, "{}: whole clusters", src.entry);
        compile_and_check(&t, &p, &c);
    }
    // A deterministic spread over the experimental space at 1024^3 (all 188 of its bf16 NN and
    // f16 NT configs at raster group 1 compiled without spills on 2026-12-04).
    let x = WgmmaGemm {
        experimental: true,
        ..t
    };
    let p = GemmProblem::nn(1024, 1024, 1024, DType::Bf16);
    let valid: Vec<WgmmaConfig> = x
        .valid_space(&p, Arch::Sm90a)
        .into_iter()
        .filter(|c| c.cluster_k == 2 && c.raster_group == 1)
        .collect();
    assert!(
        valid.len() >= 50,
        "only {} cluster split-K configs at 1024^3",
        valid.len()
    );
    // An odd step, so the samples alternate between the epilogues (the space lists them in pairs).
    for c in valid.iter().step_by((valid.len() / 10) | 1) {
        compile_and_check(&x, &p, c);
    }
    // The PTX carries the cluster shape and the st.async pushes.
    let src = t
        .emit(&p, &ts(ck(cfg(128, 128, 2, 128, 4, 1))), Arch::Sm90a)
        .unwrap();
    let ptx = ptx_of(&src.code);
    assert!(ptx.contains(".reqnctapercluster 2, 1, 1"));
    assert!(ptx.contains("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32"));
    assert!(ptx.contains("mapa.shared::cluster.u32"));
}

#[test]
fn tile_192x160_compiles_without_spills_and_refuses_a_column_split_of_an_mn_major_b() {
    if !nvrtc_or_skip(
        "tile_192x160_compiles_without_spills_and_refuses_a_column_split_of_an_mn_major_b",
    ) {
        return;
    }
    let t = WgmmaGemm::default();
    let three = cfg(192, 160, 3, 160, 4, 1);
    // Three consumers of 64 x 160 (one m64n160 wgmma each): any B. An MN-major B (NN/TN of
    // f16/bf16) loads three 64-column boxes per stage; with the TMA-store epilogue the boxes
    // of C are 32 columns (64 bytes) with the 64-byte swizzle.
    for (dtype, la, lb, ts) in [
        (DType::Bf16, Layout::Row, Layout::Col, false),
        (DType::Tf32, Layout::Row, Layout::Row, false),
        (DType::Bf16, Layout::Row, Layout::Row, false),
        (DType::Bf16, Layout::Row, Layout::Row, true),
        (DType::F16, Layout::Row, Layout::Col, true),
        (DType::F16, Layout::Col, Layout::Row, true),
    ] {
        let mut p = GemmProblem::new(4000, 4000, 4096, dtype, la, lb);
        let c3 = WgmmaConfig {
            tma_store: ts,
            ..if dtype == DType::Tf32 {
                tf(three.clone())
            } else {
                three.clone()
            }
        };
        assert_eq!(c3.threads(), 512);
        if la == Layout::Col {
            fuse_all(&mut p, Activation::GeluTanh);
        }
        let src = t.emit(&p, &c3, Arch::Sm90a).unwrap();
        assert!(
            src.code.contains("m64n160k"),
            "an m64n160 wgmma: {}",
            src.entry
        );
        if ts {
            assert!(
                src.code.contains("EPI_BOX_BYTES = 4096"),
                "64 rows x 64 bytes: {}",
                src.entry
            );
            assert!(
                src.code.contains("boxes of 64 rows x 64 bytes"),
                "{}",
                src.entry
            );
        }
        if dtype != DType::Tf32 && lb == Layout::Row {
            // Three 64-column boxes of B per stage, the last one half used.
            assert!(src.code.contains("n0 + 128, k0 + 0"), "{}", src.entry);
        }
        compile_and_check(&t, &p, &c3);
        assert!(
            t.space(&p, Arch::Sm90a).iter().any(|s| s
                == &WgmmaConfig {
                    stages: 4,
                    raster_group: 1,
                    ..c3.clone()
                }),
            "in the space"
        );
    }
    let c = WgmmaConfig {
        split_n: true,
        ..cfg(192, 160, 2, 80, 4, 1)
    };
    // Two consumers of 192 x 80: K-major B only (NT and TT for f16/bf16, every layout for tf32).
    for (dtype, la, lb) in [
        (DType::Bf16, Layout::Row, Layout::Col),
        (DType::F16, Layout::Col, Layout::Col),
        (DType::Tf32, Layout::Row, Layout::Row),
    ] {
        let mut p = GemmProblem::new(4000, 4000, 4096, dtype, la, lb);
        let c = if dtype == DType::Tf32 {
            tf(c.clone())
        } else {
            c.clone()
        };
        if la == Layout::Col {
            fuse_all(&mut p, Activation::Silu);
        }
        let src = t.emit(&p, &c, Arch::Sm90a).unwrap();
        assert!(
            src.code.contains("B_CONSUMER_OFFSET = 10240"),
            "{}",
            src.entry
        );
        assert!(
            src.code.contains("m64n80k"),
            "an m64n80 wgmma: {}",
            src.entry
        );
        compile_and_check(&t, &p, &c);
        assert!(
            t.space(&p, Arch::Sm90a).iter().any(|s| s
                == &WgmmaConfig {
                    stages: 4,
                    raster_group: 1,
                    ..c.clone()
                }),
            "in the space"
        );
    }
    // An MN-major B cannot start consumer 2's wgmma at column 80 (inside a 64-column box).
    let nn = GemmProblem::new(4000, 4000, 4096, DType::Bf16, Layout::Row, Layout::Row);
    let e = t.check(&nn, &c, Arch::Sm90a).unwrap_err();
    assert!(
        e.reason.contains("MN-major B") && e.reason.contains("bn=160"),
        "{}",
        e.reason
    );
    assert!(!t
        .space(&nn, Arch::Sm90a)
        .iter()
        .any(|s| s.bn == 160 && s.split_n));
    // The TMA-store epilogue needs whole boxes per consumer: 80 columns are not whole 64-byte boxes of bf16.
    let nt = GemmProblem::new(4000, 4000, 4096, DType::Bf16, Layout::Row, Layout::Col);
    let e = t
        .check(
            &nt,
            &WgmmaConfig {
                tma_store: true,
                ..c.clone()
            },
            Arch::Sm90a,
        )
        .unwrap_err();
    assert!(e.reason.contains("tma_store"), "{}", e.reason);
}

/// The experimental transposed product at 160 x 8192^2 (`swap_ab`: the kernel's B is the user's
/// A, K-major): 64 x 160 (one consumer) and 128 x 160 (two) tiles, alone and as a 2-CTA cluster
/// multicasting that B tile in 80-row halves, compile without spills within the register
/// budgets; 128 x 160 with one consumer is refused (160 accumulators).
#[test]
fn transposed_small_m_tiles_compile() {
    if !nvrtc_or_skip("transposed_small_m_tiles_compile") {
        return;
    }
    let mut t = WgmmaGemm::new(132);
    t.experimental = true;
    let p = GemmProblem::nn(160, 8192, 8192, DType::Bf16);
    let all: Vec<WgmmaConfig> = t
        .space(&p, Arch::Sm90a)
        .into_iter()
        .filter(|c| {
            c.swap_ab
                && c.bn == 160
                && c.stages == 4
                && c.cluster_n == 1
                && !c.split_n
                && !c.tight_b
        })
        .collect();
    assert_eq!(all.len(), 6);
    let cs: Vec<&WgmmaConfig> = all
        .iter()
        .filter(|c| t.check(&p, c, Arch::Sm90a).is_ok())
        .collect();
    assert_eq!(cs.len(), 4);
    for c in &cs {
        compile_and_check(&t, &p, c);
    }
    // Not transposed, the pair would split an MN-major B (the user's row-major B) at column 80.
    let pair = WgmmaConfig {
        swap_ab: false,
        ..(*cs.iter().find(|c| c.cluster_m == 2).unwrap()).clone()
    };
    let nn = GemmProblem::nn(8192, 160, 8192, DType::Bf16);
    assert!(
        t.check(&nn, &pair, Arch::Sm90a).is_err(),
        "an MN-major B cannot split 160 columns between a pair"
    );
}

/// cuBLAS's small-M arrangement in the experimental space, 8 stages as cuBLAS runs it: tiles of
/// 128 of N by 80 (at M = 160, a tight 80-row slot for the K-major A^T: 26 KiB a stage) or 64
/// (at M = 128) of M in a pair along the small M (`cluster_n` 2), each CTA loading one of the
/// two 64-row boxes of the shared B^T tile and multicasting it; and two consumers splitting the
/// columns of a 64-row tile covering M. Every one compiles without spills for the MN-major (NN)
/// and the K-major (NT) user B, the pair's kernels multicast A and not B; the 8-stage 128 x 80
/// and 64 x 160 tiles fit only with the tight slot.
#[test]
fn cublas_small_m_arrangements_compile() {
    if !nvrtc_or_skip("cublas_small_m_arrangements_compile") {
        return;
    }
    let mut t = WgmmaGemm::new(132);
    t.experimental = true;
    let mut n = 0;
    for (m, bn) in [(160u32, 80u32), (128, 64)] {
        for lb in [Layout::Row, Layout::Col] {
            let p = GemmProblem::new(m, 8192, 8192, DType::Bf16, Layout::Row, lb);
            let cs: Vec<WgmmaConfig> = t
                .space(&p, Arch::Sm90a)
                .into_iter()
                .filter(|c| {
                    c.swap_ab
                        && c.stages == 8
                        && ((c.cluster_n == 2 && c.bn == bn) || (c.split_n && c.bn == m))
                        && t.check(&p, c, Arch::Sm90a).is_ok()
                })
                .collect();
            assert_eq!(cs.len(), 3, "{m} {lb:?}: {cs:?}");
            assert!(cs.iter().all(|c| c.tight_b == (m == 160)), "{cs:?}");
            for c in &cs {
                compile_and_check(&t, &p, c);
                let code = t.emit(&p, c, Arch::Sm90a).unwrap().code;
                assert_eq!(
                    code.contains("tma_load_3d_multicast(sa"),
                    c.cluster_n == 2,
                    "{c:?}"
                );
                assert!(!code.contains("tma_load_3d_multicast(sb"), "{c:?}");
                n += 1;
            }
        }
    }
    assert_eq!(n, 12);
}

/// The transposed product of tf32 problems: the user's row-major B is the kernel's M-major A,
/// read from shared memory into registers (register-A wgmma, `lds_u32` fragments, no staging
/// pre-pass); a column-major B is its K-major A, read by descriptor. Every sampled arrangement
/// (one or two consumers, 64-256 columns of M, alone, in a `cluster_m` pair, in cuBLAS's
/// `cluster_n` pairs, or splitting columns) compiles without spills or serialized wgmmas.
#[test]
fn tf32_transposed_product_compiles_with_register_a() {
    if !nvrtc_or_skip("tf32_transposed_product_compiles_with_register_a") {
        return;
    }
    let mut t = WgmmaGemm::new(132);
    t.experimental = true;
    let mut n = 0;
    for (m, lb) in [
        (128u32, Layout::Row),
        (256, Layout::Row),
        (160, Layout::Col),
    ] {
        let p = GemmProblem::new(m, 8192, 8192, DType::Tf32, Layout::Row, lb);
        let cs: Vec<WgmmaConfig> = t
            .space(&p, Arch::Sm90a)
            .into_iter()
            .filter(|c| c.swap_ab && c.stages == 4 && t.check(&p, c, Arch::Sm90a).is_ok())
            .collect();
        assert!(cs.len() >= 8, "{m} {lb:?}: {}", cs.len());
        for c in cs.iter().step_by(3) {
            compile_and_check(&t, &p, c);
            let code = t.emit(&p, c, Arch::Sm90a).unwrap().code;
            assert_eq!(
                code.contains("lds_u32(sa + ra0"),
                lb == Layout::Row,
                "{c:?}"
            );
            assert!(!code.contains("int prepass"), "{c:?}");
            n += 1;
        }
    }
    assert!(n >= 8, "{n}");
    // A column-major A would be the transposed product's M/N-major B: refused, naming it.
    let tn = GemmProblem::new(128, 8192, 8192, DType::Tf32, Layout::Col, Layout::Row);
    let c = t
        .space(&tn, Arch::Sm90a)
        .into_iter()
        .find(|c| c.swap_ab)
        .unwrap();
    let e = t.check(&tn, &c, Arch::Sm90a).unwrap_err().reason;
    assert!(e.contains("row-major A"), "{e}");
}

/// The transposed product with split-K (thin grids: a small M and N): each tile's K slices are
/// summed by the fix-up before the transposed stores. Sampled arrangements (tf32 with the user's
/// B read into registers, bf16 from shared memory; one or two consumers, 64-256 columns of M,
/// 2-4 slices) compile without spills.
#[test]
fn transposed_product_with_split_k_compiles() {
    if !nvrtc_or_skip("transposed_product_with_split_k_compiles") {
        return;
    }
    let mut t = WgmmaGemm::new(132);
    t.experimental = true;
    let mut n = 0;
    for dtype in [DType::Tf32, DType::Bf16] {
        let p = GemmProblem::nn(240, 1536, 8192, dtype);
        let cs: Vec<WgmmaConfig> = t
            .space(&p, Arch::Sm90a)
            .into_iter()
            .filter(|c| c.swap_ab && c.split_k > 1 && t.check(&p, c, Arch::Sm90a).is_ok())
            .collect();
        assert!(cs.len() >= 12, "{dtype}: {}", cs.len());
        for c in cs.iter().step_by(5) {
            compile_and_check(&t, &p, c);
            let code = t.emit(&p, c, Arch::Sm90a).unwrap().code;
            assert!(code.contains("Split-K fix-up") && code.contains("epi_store_t"));
            n += 1;
        }
    }
    assert!(n >= 6, "{n}");
    // The defaults that split at thin grids (tf32 and f16 / bf16 NN at M <= 256).
    let mut seen = std::collections::HashSet::new();
    for dtype in [DType::Tf32, DType::Bf16, DType::F16] {
        for (m, n, k) in [
            (128, 2048, 8192),
            (64, 1024, 8192),
            (128, 1024, 4096),
            (256, 1024, 8192),
            (96, 1024, 8192),
        ] {
            let p = GemmProblem::nn(m, n, k, dtype);
            let c = t.default_config(&p, Arch::Sm90a);
            assert!(c.swap_ab && c.split_k > 1, "{dtype} {m}x{n}x{k}: {c:?}");
            if seen.insert(t.emit(&p, &c, Arch::Sm90a).unwrap().entry) {
                compile_and_check(&t, &p, &c);
            }
        }
    }
}
