#!/usr/bin/env bash
# Device call AW (session 11): part (2) of callAO.sh alone, with build 858a3b6 (the E2 tail):
# Nsight Compute on the 64x128 one-consumer 8-stage kernel with cluster_m 1 and 2 at
# 1024x1024x4096 bf16 (why is the two-CTA cluster 12-19% slower, call AN?), and cuBLAS's nvjet
# kernel at the same shape: speed of light, memory workload, warp states, per-instruction stalls.
# (The kernel filter names the cluster size: a --where slice also measures the default rung, a cluster-1 kernel, first.)
# Run: B=$PWD/.devrun bash scripts/h200/callAW.sh (about 4 minutes; timeout_s 330).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAW.tgz . ; }
T=$B/rtx-tune
cat $B/BUILD > $R/build.txt 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
export RTX_NVRTC_LINEINFO=1
for cl in 1 2; do
  w="{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"raster_group\":1,\"cluster_m\":$cl}"
  timeout 100 $NCU --clock-control none -k "regex:^rtx_wgmma.*_cl${cl}_" --launch-skip 4 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats --export $R/prof_cl$cl -f \
    $T gemm 1024x1024x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_cl$cl.log 2>&1
  echo "ncu cl$cl rc=$?"
  $NCU -i $R/prof_cl$cl.ncu-rep --page details > $R/details_cl$cl.txt 2>&1
  $NCU -i $R/prof_cl$cl.ncu-rep --page source --csv --print-source sass > $R/src_cl$cl.csv 2> $R/src_cl$cl.err
  python3 $B/ncu_top.py $R/src_cl$cl.csv 40 > $R/top_cl$cl.txt 2>&1; cut -c1-150 $R/top_cl$cl.txt | head -14
  grep -E "Duration|Memory Thr|L2 Cache Thr|DRAM Thr|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Cluster Size|Grid Size" $R/details_cl$cl.txt | head -14
  rm -f $R/src_cl$cl.csv
  pack
done
timeout 90 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 4 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats --print-details all \
  $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes 1024x1024x4096 > $R/ncu_nvjet.log 2>&1
echo "ncu nvjet rc=$?"
grep -E "Duration|Memory Thr|L2 Cache Thr|DRAM Thr|L2 Hit|Mem Busy|Max Bandwidth|Cluster Size|Grid Size" $R/ncu_nvjet.log | head -12
pack
