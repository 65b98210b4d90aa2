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
# Session 11: (2) ran as callAW.sh (call AW) and the slices of (1) moved to callAY.sh; $B/exp was
# removed from .devrun, so rebuild it from callAO_E1.patch before running (4).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAO.tgz . ; }
T=$B/rtx-tune
# (1) The two-consumer arrangements and the control are callAY.sh's slices since session 11;
# the 128x128 split-K slice stays here.
for s in 1024x1024x4096 1024x1024x1024; do
  for w in '{"bm":128,"bn":128,"split_k":2}'; do
    echo "== $s $w" >> $R/slices.log
    timeout 120 $T gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
  done
done
grep -E "^==|searched|#[1-4] |cuBLAS:|took" $R/slices.log | cut -c1-230
pack
# (2) is callAW.sh (it ran on its own in session 11; its pack goes to $OUT/callAW.tgz).
B=$B bash "$(dirname "$0")/callAW.sh"
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
