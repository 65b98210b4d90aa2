#!/usr/bin/env python3
"""SIMT fp32 GEMM sweep: assembles the `gemm_simt` kernel source from the template's own C++
text (crates/rtx-synthesis/src/templates/gemm/{prelude,simt}.rs), compiles configs with NVRTC
(ptxas -v: registers, spills), and on a GPU times them against torch's fp32 matmul (TF32 off)
in the same process, checking each result against an fp64 matmul.

    simt_sweep.py ptxas [--arch sm_90a]           # resources only (no GPU needed)
    simt_sweep.py bench --sizes 2048,4096,8192    # on the GPU machine (torch + cupy)

The geometry below mirrors `SimtGeometry::new` (space.rs); keep the two in step.
"""
import argparse, ctypes, os, re, sys, time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TPL = os.path.join(ROOT, "crates/rtx-synthesis/src/templates/gemm")
SIMT_RS = [os.path.join(TPL, "simt.rs")]


def raw(path, name):
    src = open(path).read()
    m = re.search(r"const %s: &str = r#\"(.*?)\"#;" % name, src, re.S)
    return m.group(1)


def lines(text):
    return "\n".join(l.rstrip() for l in text.splitlines())


def geometry(c, layout):
    bm, bn, bk, tm, tn, stages, vec = c["bm"], c["bn"], c["bk"], c["tm"], c["tn"], c["stages"], c["vec"]
    tms, tns = bm // tm, bn // tn
    wtn = c.get("warp_tn", min(tns, 8))
    wtm = 32 // wtn
    a_k = layout[0] == "n"
    b_k = layout[1] == "t"
    buffers = stages if stages >= 3 else 2
    a_ld = bm + (4 if a_k else 0)
    b_ld = bn + (4 if b_k else 0)
    g = dict(threads=tms * tns, wtm=wtm, wtn=wtn, a_k=a_k, b_k=b_k, buffers=buffers, a_ld=a_ld, b_ld=b_ld,
             a_stage=bk * a_ld, b_stage=bk * b_ld)
    g["smem"] = buffers * (g["a_stage"] + g["b_stage"]) * 4
    return g


def name_of(c, layout):
    return "simt_%s_bm%d_bn%d_bk%d_tm%d_tn%d_s%d_v%d_g%d_mb%d_w%d" % (
        layout, c["bm"], c["bn"], c["bk"], c["tm"], c["tn"], c["stages"], c["vec"], c["group_m"], c["min_blocks"],
        c.get("warp_tn", 0))


def source(c, layout):
    g = geometry(c, layout)
    prelude = os.path.join(TPL, "prelude.rs")
    simt = SIMT_RS[0]
    b = lambda v: "true" if v else "false"
    out = ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>", lines(raw(prelude, "COMMON")),
           "using TOut = float;", "constexpr bool EPI_BIAS = false;", "constexpr int EPI_ACT = 0;",
           "constexpr bool EPI_RES = false;", lines(raw(prelude, "EPILOGUE"))]
    consts = [("int", "BM", c["bm"]), ("int", "BN", c["bn"]), ("int", "BK", c["bk"]), ("int", "TM", c["tm"]),
              ("int", "TN", c["tn"]), ("int", "STAGES", c["stages"]), ("int", "VEC", c["vec"]),
              ("int", "GROUP_M", c["group_m"]), ("int", "WTM", g["wtm"]), ("int", "WTN", g["wtn"]),
              ("bool", "A_K", b(g["a_k"])), ("bool", "B_K", b(g["b_k"])), ("int", "SBUF", g["buffers"]),
              ("int", "A_LD_S", g["a_ld"]), ("int", "B_LD_S", g["b_ld"]), ("int", "A_STAGE", g["a_stage"]),
              ("int", "B_STAGE", g["b_stage"])]
    out += ["constexpr %s %s = %s;" % x for x in consts]
    out.append(lines(raw(simt, "SIMT_BODY")))
    out.append('extern "C" __global__ void __launch_bounds__(%d, %d) %s(' % (g["threads"], c["min_blocks"], name_of(c, layout)))
    out.append(lines(raw(simt, "SIGNATURE_ARGS")))
    out.append(") {")
    out.append(lines(raw(simt, "SIMT_MAIN")))
    out.append("}")
    return "\n".join(out) + "\n", g


def nvrtc_compile(code, name, arch, include):
    lib = ctypes.CDLL(os.environ.get("NVRTC_LIB", "libnvrtc.so.13"))
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), (name + ".cu").encode(), 0, None, None) == 0
    opts = ["--gpu-architecture=" + arch, "--std=c++17", "--ptxas-options=-v", "-default-device", "-DNDEBUG"]
    if include:
        opts.append("--include-path=" + include)
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    cubin = None
    if rc == 0:
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, buf)
        cubin = buf.raw
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, log.value.decode(errors="replace"), cubin


def resources(log):
    regs = re.search(r"Used (\d+) registers", log)
    spill_st = re.search(r"(\d+) bytes spill stores", log)
    spill_ld = re.search(r"(\d+) bytes spill loads", log)
    return (int(regs.group(1)) if regs else -1, (int(spill_st.group(1)) if spill_st else 0) + (int(spill_ld.group(1)) if spill_ld else 0))


def configs(which):
    base = dict(bm=128, bn=128, bk=8, tm=8, tn=8, stages=2, vec=4, group_m=8, min_blocks=1)
    out = []
    for bm, bn, tm, tn in [(128, 128, 8, 8), (128, 64, 8, 8), (64, 128, 8, 8), (256, 128, 16, 8), (128, 256, 8, 16), (128, 128, 16, 8)]:
        for bk in [8, 16, 32]:
            for stages in [2, 3, 4]:
                for mb in [1, 2]:
                    c = dict(base, bm=bm, bn=bn, tm=tm, tn=tn, bk=bk, stages=stages, min_blocks=mb)
                    if (bm // tm) * (bn // tn) * mb > 2048 or (bm // tm) * (bn // tn) < 64:
                        continue
                    g = geometry(c, "nn")
                    if g["smem"] > 227 * 1024 or g["smem"] * mb > 228 * 1024:
                        continue
                    out.append(c)
    if which == "round2":
        out = []
        for bm, bn, tm, tn in [(128, 256, 8, 16), (256, 128, 16, 8), (128, 256, 8, 8), (256, 128, 8, 8), (128, 128, 16, 8), (128, 128, 8, 16)]:
            tns = bn // tn
            for bk in [8, 16]:
                for wtn in [4, 8, 16]:
                    if wtn > tns or (bm // tm) % (32 // wtn):
                        continue
                    for gm in [8, 16] if (bm, bn, tm, tn) == (128, 256, 8, 16) and bk == 8 else [8]:
                        out.append(dict(base, bm=bm, bn=bn, tm=tm, tn=tn, bk=bk, warp_tn=wtn, group_m=gm))
        return out
    if which != "all":
        keep = [int(x) for x in which.split(",")]
        out = [out[i] for i in keep]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["ptxas", "bench", "list"])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--layouts", default="nn")
    ap.add_argument("--sizes", default="4096")
    ap.add_argument("--configs", default="all")
    ap.add_argument("--include", default=os.environ.get("RTX_CUDA_INCLUDE", ""))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--top", type=int, default=0, help="bench only the N best at the first size, then all sizes")
    ap.add_argument("--simt", default=None, help="another simt.rs to take the kernel text from")
    args = ap.parse_args()
    if args.simt:
        SIMT_RS[0] = args.simt
    cs = configs(args.configs)
    if args.mode == "list":
        for i, c in enumerate(cs):
            print(i, name_of(c, "nn"))
        return
    jobs = [(c, l) for c in cs for l in args.layouts.split(",")]

    def build(job):
        c, l = job
        code, g = source(c, l)
        rc, log, cubin = nvrtc_compile(code, name_of(c, l), args.arch, args.include)
        return c, l, g, rc, log, cubin

    with ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        built = list(ex.map(build, jobs))
    ok = []
    for c, l, g, rc, log, cubin in built:
        regs, spill = resources(log)
        if rc != 0:
            print("COMPILE FAIL", name_of(c, l), log[:2000])
            continue
        print("%-60s regs %3d spill %4d smem %6d" % (name_of(c, l), regs, spill, g["smem"]), flush=True)
        ok.append((c, l, g, cubin, regs, spill))
    if args.mode == "ptxas":
        return
    bench(ok, args)


def bench(ok, args):
    import cupy as cp
    import numpy as np
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}

    def run_size(n, cands):
        torch.manual_seed(0)
        a = torch.rand(n, n, device="cuda") * 2 - 1
        b = torch.rand(n, n, device="cuda") * 2 - 1
        c = torch.empty(n, n, device="cuda")
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flops = 2.0 * n ** 3

        def timeit(fn):
            fn(); torch.cuda.synchronize()
            ts = []
            for _ in range(args.reps):
                ev0.record(); fn(); ev1.record(); torch.cuda.synchronize()
                ts.append(ev0.elapsed_time(ev1))
            ts.sort()
            return ts[len(ts) // 2]

        ref64 = None
        if n <= 4096:
            ref64 = (a.double() @ b.double())
        t_cublas = timeit(lambda: torch.mm(a, b, out=c))
        if ref64 is not None:
            e = ((c.double() - ref64).norm() / ref64.norm()).item()
        else:
            e = float("nan")
        print("n=%d torch fp32 (cuBLAS): %.3f ms  %.1f TFLOP/s  rel_err_vs_f64 %.2e" % (n, t_cublas, flops / t_cublas / 1e9, e), flush=True)
        rows = []
        bt = {"n": b, "t": b.t().contiguous()}
        at = {"n": a, "t": a.t().contiguous()}
        for (cfg, l, g, cubin, regs, spill) in cands:
            try:
                path = "/tmp/%s.cubin" % name_of(cfg, l)
                open(path, "wb").write(cubin)
                mod = cp.RawModule(path=path)
                k = mod.get_function(name_of(cfg, l))
                if g["smem"] > 48 * 1024:
                    k.max_dynamic_shared_size_bytes = g["smem"]
                tiles = ((n + cfg["bm"] - 1) // cfg["bm"]) * ((n + cfg["bn"] - 1) // cfg["bn"])
                argv = (np.uint64(at[l[0]].data_ptr()), np.uint64(bt[l[1]].data_ptr()), np.uint64(c.data_ptr()), np.uint64(0), np.uint64(0),
                        np.int32(n), np.int32(n), np.int32(n), np.int32(n), np.int32(n), np.int32(n),
                        np.int64(0), np.int64(0), np.int64(0), np.float32(1.0), np.float32(0.0))

                def launch():
                    k((tiles, 1, 1), (g["threads"], 1, 1), argv, shared_mem=g["smem"])
                c.fill_(float("nan"))
                t = timeit(launch)
                if ref64 is not None:
                    e = ((c.double() - ref64).norm() / ref64.norm()).item()
                else:
                    e = float(torch.isnan(c).any().item()) * float("inf")
                rows.append((t, cfg, l, regs, spill, e))
                print("  %-58s %.3f ms %5.1f TFLOP/s  %.3fx  err %.1e regs %d spill %d" % (
                    name_of(cfg, l), t, flops / t / 1e9, t_cublas / t, e, regs, spill), flush=True)
            except Exception as ex:  # noqa
                print("  %-58s FAILED %s" % (name_of(cfg, l), ex), flush=True)
        rows.sort(key=lambda r: r[0])
        print("best at n=%d:" % n)
        for r in rows[:8]:
            print("  %-58s %.3fx cuBLAS %.1f TFLOP/s" % (name_of(r[1], r[2]), t_cublas / r[0], flops / r[0] / 1e9))
        return rows

    first = run_size(sizes[0], ok)
    if len(sizes) > 1:
        best = first[: args.top] if args.top else first
        keep = [x for x in ok if any(x[0] == r[1] and x[1] == r[2] for r in best)]
        for n in sizes[1:]:
            run_size(n, keep)


if __name__ == "__main__":
    main()
