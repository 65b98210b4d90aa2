#!/usr/bin/env bash
# Device call M (session 5): what cuBLAS runs at issue 4's shapes (torch.profiler kernel names),
# Nsight Compute on cuBLAS vs rtx at 1024^3 and 4096x4096x1000 bf16, the PyTorch anchors, then
# the GEMM suite with the cost-model default ladder (bf16, f16; no tuning database) and the
# transformer suite.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callM.tgz . ; }
python3 $B/cublas_kernels.py > $R/cublas_kernels.log 2>&1; echo "cublas_kernels rc=$?"
cut -c1-170 $R/cublas_kernels.log | head -40
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for s in 1024x1024x1024 4096x4096x1000; do
  timeout 75 $NCU --clock-control none -k 'regex:^(rtx_wgmma|nvjet|sm90)' --launch-skip 2 --launch-count 6 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    $B/rtx-bench --out $R/ncu_bench_$s --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_$s.log 2>&1
  echo "ncu $s rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Dynamic Shared|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput" $R/ncu_$s.log | cut -c1-150 | head -60
done
pack
python3 $B/torch_anchors.py --only gemm,layer --sizes 512,1024,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
pack
timeout ${BENCH_S:-170} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma|cuBLAS)" $R/bench.log | cut -c1-130 | head -40
RTX_LAYER_TUNE_S=10 timeout ${LAYER_S:-110} $B/rtx-bench --out $R/layer --anchors $R/anchors.json --no-progress --suite transformer > $R/layer.log 2>&1; echo "layer rc=$?"
pack; grep -E "^\|" $R/layer.log | cut -c1-150 | head -20
