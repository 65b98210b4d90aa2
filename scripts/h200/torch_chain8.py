"""PyTorch eager running rtx's 8-op chain (presets::chain8), appended to an anchors JSON file.

y = gelu_tanh(max(tanh((a * 0.5 + b) * 1.25 + bias) - a, b)), a and b bf16 [32768, 4096], bias a
row vector [4096] (8 ops: mul, add, mul, add, tanh, sub, max, gelu_tanh). Same timing as
../shared/anchors/torch_anchors.py (triton do_bench, median). Bytes: a, b, bias read, y written.
Usage: python3 torch_chain8.py --json anchors.json   (appends; creates the file if missing)
"""
import argparse, json, os
import torch
import torch.nn.functional as F
from triton.testing import do_bench

p = argparse.ArgumentParser(); p.add_argument("--json", required=True)
p.add_argument("--shape", default="32768x4096")
args = p.parse_args()
rows, cols = map(int, args.shape.split("x"))
a = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a); bias = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
f = lambda: F.gelu(torch.maximum(torch.tanh((a * 0.5 + b) * 1.25 + bias) - a, b), approximate="tanh")
us = do_bench(f, warmup=25, rep=100, return_mode="median") * 1e3
nbytes = (3 * a.numel() + bias.numel()) * 2
row = dict(kind="mem", name=f"chain8 eager bf16 {rows}x{cols}", us=us, GBps=nbytes / us / 1e3)
print(f"mem {row['name']}: {us:.1f} us GBps={row['GBps']:.1f}", flush=True)
rows_ = json.load(open(args.json)) if os.path.exists(args.json) else []
json.dump(rows_ + [row], open(args.json, "w"), indent=1)
