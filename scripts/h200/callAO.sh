#!/usr/bin/env bash
# Device call AO (session 9): the 1024^3 lead. (1) Exhaustive slices at 1024x1024x{4096,1024} bf16
# of the arrangements cuBLAS uses there (two consumers each 64x64: 64x128 split_n, 128x64) next to
# the 64x128 one-consumer tile, every cluster/stage/raster point; (2) Nsight Compute on the
# 64x128 one-consumer 8-stage kernel with cluster_m 1 and 2 at 1024x1024x4096 (why is the cluster
# slower?): speed of light, memory workload, warp states, per-instruction stall samples; and
# cuBLAS's kernel there (memory workload: its L2 traffic against ours). (3) 128x128 split-K 2 at
# 1024^3: 128 units that each stream 8 k-blocks of 32 KB (256 KB per SM against 384 KB for
# 64x128), paying an f32 fix-up. (The GPU lock's device check is callAP.sh.) (4) Experiment E1 (callAO_E1.patch, built as
# $B/exp/rtx-tune): cluster kernels poll their mbarriers with test_wait instead of the suspending
# try_wait, in case a wait completed by the peer CTA (remote arrive, multicast bytes) wakes late;
# the cluster-1 rows of the same slice are the control.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAO.tgz . ; }
T=$B/rtx-tune
for s in 1024x1024x4096 1024x1024x1024; do
  for w in '{"bm":64,"bn":128,"consumers":2,"split_n":true,"tma_store":true}' '{"bm":128,"bn":64,"tma_store":true}' \
           '{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true}' '{"bm":128,"bn":128,"split_k":2}'; do
    echo "== $s $w" >> $R/slices.log
    timeout 120 $T gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
  done
done
grep -E "^==|searched|#[1-4] |cuBLAS:|took" $R/slices.log | cut -c1-230
pack
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
ls /usr/local/cuda/bin | grep -E "nsys|ncu" > $R/tools.txt
# (4) E1: the same 64x128 one-consumer 8-stage slice (cluster 1 = control, cluster 2 = polled waits).
for s in 1024x1024x4096 1024x1024x1024; do
  echo "== E1 $s" >> $R/e1.log
  timeout 120 $B/exp/rtx-tune gemm $s --dtype bf16 --layout nn --strategy exhaustive \
    --where '{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true}' --no-store >> $R/e1.log 2>&1; echo "rc=$?" >> $R/e1.log
done
grep -E "^==|#[1-8] |cuBLAS:" $R/e1.log | cut -c1-200
pack
