"""Does this machine's NVRTC put ptxas -v resource lines in the program log?

Compiles one small kernel with --ptxas-options=-v through every libnvrtc.so.13 it can find and
prints the log, so a missing resource report can be traced to a library, not guessed. NVRTC
>= 12.9 caches compiles and a cache hit skips ptxas; the same program is compiled several times
(and through several file names of one library), and the `--no-cache` set (what rtx passes) twice,
so the output shows whether the cache is what empties the log.
Usage: python3 nvrtc_log_probe.py
"""
import ctypes, glob, os, sys

SRC = b'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
cands = sorted(set(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*") +
                   glob.glob("/usr/local/cuda/targets/*/lib/libnvrtc.so*") +
                   glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so*") +
                   glob.glob("/usr/local/lib/python3*/*-packages/nvidia/*/lib/libnvrtc.so*")))
print("candidates:", cands)
for path in cands:
    if "builtins" in path or "alt" in path:
        continue
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        print(path, "load failed", e); continue
    maj, mnr = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(maj), ctypes.byref(mnr))
    for opts in ([b"--gpu-architecture=sm_90a", b"--ptxas-options=-v"],
                 [b"--gpu-architecture=sm_90a", b"-Xptxas", b"-v"],
                 [b"--gpu-architecture=sm_90a", b"--ptxas-options=--verbose"],
                 [b"--gpu-architecture=sm_90a", b"--ptxas-options=-v", b"--no-cache"],
                 [b"--gpu-architecture=sm_90a", b"--ptxas-options=-v", b"--no-cache"]):
        prog = ctypes.c_void_p()
        lib.nvrtcCreateProgram(ctypes.byref(prog), SRC, b"k.cu", 0, None, None)
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, buf)
        print(f"{path} v{maj.value}.{mnr.value} opts={[o.decode() for o in opts]} rc={rc} log={buf.value.decode(errors='replace')!r}")
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
print("env LD_LIBRARY_PATH =", os.environ.get("LD_LIBRARY_PATH"))
print("env CUDA_CACHE_DISABLE/PATH =", os.environ.get("CUDA_CACHE_DISABLE"), os.environ.get("CUDA_CACHE_PATH"))
