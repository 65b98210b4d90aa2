#!/usr/bin/env bash
# Device call BD (session 14), after call BC. Call BC (an H100) found that cuBLAS's nvjet kernel at
# 1024x1024x4096 issues, per CTA and k-block, two UTMALDG.3D.MULTICAST and one plain UTMALDG.3D:
# it multicasts the shared operand in two copies per rank, where ours issues one (rank r takes the
# 64-column box r, all 64 k-rows). Multicasting A instead (RTX_EXP_CLN) was slower still (Nsight
# 24.8 us against 21.8-22.6 for B multicast and 16.9-17.2 for cluster 1).
# This call tests the split nvjet's instruction count suggests: every rank loads both 64-column
# boxes of B, k-rows [r 32, r 32 + 32) (experiment build docs/runs/2026-12-05/callBD/exp.patch,
# switch RTX_EXP_BKS=1; MN-major B, i.e. the NN benchmark layout).
# (1) Nsight Compute at 1024x1024x4096 bf16: base cl1, base cl2, bks cl2 (3 launches each);
# (2) in-process slices (rtx-tune exhaustive, cuBLAS in the same process), two alternating rounds,
#     at 1024x1024x4096 and 1024^3 (64x128, 8 stages) and 4096^3 (128x256, two consumers, 4 stages);
# (3) the wgmma GPU cases with the switch on (every MN-major B cluster case takes the new split).
# Build:  cargo xtask gpu-bundle --out .devrun --tests none
#         cargo xtask gpu-bundle --out .devrun/exp --tests wgmma_gpu --patch docs/runs/2026-12-05/callBD/exp.patch --at 9423671
# Run: B=$PWD/.devrun bash scripts/h200/callBD.sh (about 5 minutes; timeout_s 480).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBD.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
K=gpu__time_duration.sum,lrc__lts2lrc_sectors_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_active.avg
w() { echo "{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"raster_group\":1,\"cluster_m\":$1}"; }
pick() { case $1 in cl1) X=$B/rtx-tune; E=RTX_EXP_NONE=1; C=1 ;; cl2) X=$B/rtx-tune; E=RTX_EXP_NONE=1; C=2 ;; bks) X=$B/exp/rtx-tune; E=RTX_EXP_BKS=1; C=2 ;; esac; }
for v in cl1 cl2 bks; do
  pick $v
  env $E timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma.*_cl${C}_" --launch-skip 4 --launch-count 3 --metrics $K \
    $X gemm 1024x1024x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$(w $C)" --no-store > $R/ncu_$v.log 2>&1
  echo "ncu $v rc=$?"; grep -E "gpu__time|lts2lrc" $R/ncu_$v.log | sed 's/  */ /g' | head -6
  pack
done
for i in 1 2; do
  for v in cl2 bks; do
    pick $v
    for s in 1024x1024x4096 1024x1024x1024; do
      w8="{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"cluster_m\":2}"
      echo "== $s $v $i" >> $R/slices.log
      env $E timeout 60 $X gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w8" --no-store >> $R/slices.log 2>&1
      echo "rc=$?" >> $R/slices.log
    done
    w4="{\"bm\":128,\"bn\":256,\"consumers\":2,\"stages\":4,\"tma_store\":true,\"wgmma_n\":256,\"cluster_m\":2}"
    echo "== 4096x4096x4096 $v $i" >> $R/slices.log
    env $E timeout 90 $X gemm 4096x4096x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$w4" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
    pack
  done
done
grep -E "^==|  #[0-9] |cuBLAS:|rc=" $R/slices.log | sed 's/"cluster_k":1,//; s/"persistent":true,"pingpong":false,//; s/"split_k":1,"split_n":false,//; s/"tma_store":true,//' | cut -c1-170
T=$(ls $B/exp/tests/*wgmma_gpu* | head -1)
RTX_EXP_BKS=1 timeout 200 $T wgmma_gemm_matches_the_f64_reference --test-threads 1 --nocapture > $R/gpu_bks.log 2>&1
echo "gpu cases with BKS rc=$?"; grep -E "test result|FAILED|panicked|failed" $R/gpu_bks.log | head -8
date -u +"end %T" >> $R/smi.txt
pack
