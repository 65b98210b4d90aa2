"""Which cuBLAS kernels torch.matmul picks on this GPU, and how long each takes (torch.profiler).

Usage: python3 cublas_kernels.py [--shapes MxNxK,...] [--dtypes bf16,f16]
Prints one line per (dtype, shape): the kernel names launched by one matmul and their device time.
"""
import argparse
import torch
from torch.profiler import profile, ProfilerActivity

p = argparse.ArgumentParser()
p.add_argument("--shapes", default="512x512x512,1024x1024x1024,4096x4096x4096,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000")
p.add_argument("--dtypes", default="bf16,f16")
args = p.parse_args()
dts = {"bf16": torch.bfloat16, "f16": torch.float16}
for dn in args.dtypes.split(","):
    for s in args.shapes.split(","):
        m, n, k = map(int, s.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=dts[dn]); b = torch.randn(k, n, device="cuda", dtype=dts[dn])
        for _ in range(5):
            a @ b
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()
        ks = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                ks.setdefault(e.name, []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
        for name, ts in ks.items():
            ts.sort()
            print(f"{dn} {s}: {len(ts)}x med {ts[len(ts)//2]:.2f} us  {name}", flush=True)
