#!/usr/bin/env bash
# Device call AN (session 8): where the time goes at 1024^3 (one 64x128 tile per SM, 128 of 132
# SMs). (1) K sweep at M = N = 1024, bf16 (rtx default vs cuBLAS interleaved); (2) Nsight Compute
# on rtx's default kernel at 1024^3 (speed of light, warp states, per-instruction stall samples,
# -lineinfo) and on cuBLAS's (speed of light, warp states).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAN.tgz . ; }
timeout 60 $B/rtx-bench --out $R/ksweep --no-progress --suite gemm --gemm-dtypes bf16 \
  --gemm-shapes 1024x1024x256,1024x1024x512,1024x1024x1024,1024x1024x2048,1024x1024x4096 > $R/ksweep.log 2>&1; echo "ksweep rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/ksweep.log | awk -F'|' '{print $2,$3,$4,$6}'
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
export RTX_NVRTC_LINEINFO=1
s=1024x1024x1024
timeout 70 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section SourceCounters --section LaunchStats --section Occupancy --export $R/prof_rtx -f \
  $B/rtx-bench --out $R/b_rtx --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_rtx.log 2>&1
echo "ncu rtx rc=$?"
$NCU -i $R/prof_rtx.ncu-rep --page details > $R/details_rtx.txt 2>&1
$NCU -i $R/prof_rtx.ncu-rep --page source --csv --print-source sass > $R/src_rtx.csv 2> $R/src_rtx.err
python3 $B/ncu_top.py $R/src_rtx.csv 40 > $R/top_rtx.txt 2>&1; cut -c1-160 $R/top_rtx.txt | head -16
grep -E "Duration|Pipe Tensor|Compute \(SM\) Thr|Memory Thr|DRAM Thr|Warp Cycles Per Issued" $R/details_rtx.txt | head -8
pack
timeout 60 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section LaunchStats --print-details all $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_nvjet.log 2>&1
echo "ncu nvjet rc=$?"
grep -E "Duration|Pipe Tensor Cycles|Compute \(SM\) Thr|Memory Thr|DRAM Thr|Warp Cycles Per Issued|Grid Size|Block Size|Shared Memory Config" $R/ncu_nvjet.log | head -12
pack
