#!/usr/bin/env bash
# Device call AI (session 8): where the time between tiles goes at 4096x4096x1000 bf16. (1) A
# K sweep at M = N = 4096 (rtx default vs cuBLAS interleaved): time = k-blocks x per-k-block
# cost + per-tile overhead, fitted for both; (2) Nsight Compute on rtx's default kernel at K =
# 1000: speed of light, warp states and per-instruction stall samples (kernels built with
# -lineinfo); cuBLAS's kernel: speed of light.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAI.tgz . ; }
timeout 200 $B/rtx-bench --out $R/ksweep --no-progress --suite gemm --gemm-dtypes bf16 \
  --gemm-shapes 4096x4096x256,4096x4096x512,4096x4096x1000,4096x4096x1024,4096x4096x2048,4096x4096x4096 > $R/ksweep.log 2>&1; echo "ksweep rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/ksweep.log | cut -c1-110
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
export RTX_NVRTC_LINEINFO=1
s=4096x4096x1000
timeout 120 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section SourceCounters --section ComputeWorkloadAnalysis --print-details all --export $R/prof_rtx -f \
  $B/rtx-bench --out $R/b_rtx --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_rtx.log 2>&1
echo "ncu rtx rc=$?"
$NCU -i $R/prof_rtx.ncu-rep --page source --csv --print-source sass > $R/src_rtx.csv 2> $R/src_rtx.err
python3 $B/ncu_top.py $R/src_rtx.csv 40 > $R/top_rtx.txt 2>&1; cut -c1-200 $R/top_rtx.txt | head -30
grep -E "Duration|Throughput|Tensor|Issue Slots|Stall|Warp Cycles" $R/ncu_rtx.log | grep -vE "^\s+(OPT|INF|WRN)" | cut -c1-120 | head -30
pack
timeout 90 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --print-details all $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_nvjet.log 2>&1
echo "ncu nvjet rc=$?"
grep -E "Duration|Throughput|Tensor|Issue Slots|Stall|Warp Cycles" $R/ncu_nvjet.log | grep -vE "^\s+(OPT|INF|WRN)" | cut -c1-120 | head -30
pack
