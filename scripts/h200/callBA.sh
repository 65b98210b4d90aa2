#!/usr/bin/env bash
# Device call BA (session 12), after call AZ. A/B/C in one lease, alternating processes, with the
# adopted build ($B/rtx-bench, "base") and the experiment build ($B/exp/rtx-bench, patch in
# docs/runs/2026-12-05/callBA/exp.patch; the switches exist only there):
#  - p128: RTX_EXP_L2P=128, 128-byte L2 promotion of the TMA maps (256 B adopted). Call AZ: 9%
#    fewer L2 slice reads at 1024x1024x4096, time within the tuner's noise.
#  - pf: RTX_EXP_PF=1, the producer also issues an L2 prefetch (cp.async.bulk.prefetch.tensor)
#    of the k-block STAGES ahead of each one it loads, so the second ring's worth of a cold
#    1024^3 (16 k-blocks, 8 stages) is already in L2 when its stages free up.
#  - both: the two together (small shapes only).
# (1) eight rounds at 512^3 / 1024^3 bf16+f16; (2) two rounds over issue 4's other bf16/f16
# shapes and one at its tf32 ones; (3) Nsight Compute kernel durations at 1024^3, ours and cuBLAS's.
# Build here first if .devrun is gone (the base must hold the adopted kernels, 858a3b6 or later
# without kernel changes):
#   cargo xtask gpu-bundle --out .devrun --tests none
#   cargo xtask gpu-bundle --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBA/exp.patch --at 40d8bdc
# Run: B=$PWD/.devrun bash scripts/h200/callBA.sh (about 6 minutes; timeout_s 480).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBA.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
bench() { # name-prefix variant dtypes shapes timeout
  local n=$1 v=$2 d=$3 s=$4 t=$5
  case $v in
    base) timeout $t $B/rtx-bench --out $R/$n --no-progress --suite gemm --gemm-dtypes $d --gemm-shapes $s > $R/$n.log 2>&1 ;;
    p128) RTX_EXP_L2P=128 timeout $t $B/exp/rtx-bench --out $R/$n --no-progress --suite gemm --gemm-dtypes $d --gemm-shapes $s > $R/$n.log 2>&1 ;;
    pf) RTX_EXP_PF=1 timeout $t $B/exp/rtx-bench --out $R/$n --no-progress --suite gemm --gemm-dtypes $d --gemm-shapes $s > $R/$n.log 2>&1 ;;
    both) RTX_EXP_PF=1 RTX_EXP_L2P=128 timeout $t $B/exp/rtx-bench --out $R/$n --no-progress --suite gemm --gemm-dtypes $d --gemm-shapes $s > $R/$n.log 2>&1 ;;
  esac
  echo "$n rc=$? $(row $R/$n.log)"
}
for i in 1 2 3 4 5 6 7 8; do
  for v in base p128 pf both; do bench s_${v}_$i $v bf16,f16 512x512x512,1024x1024x1024 60; done
done
pack
S=4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000
for i in 1 2; do
  for v in base p128 pf; do bench l_${v}_$i $v bf16,f16 $S 150; pack; done
done
for v in base p128 pf; do bench t_$v $v tf32 4096x4096x4096,8192x8192x8192 120; pack; done
# (3) kernel-only durations at 1024^3 (Nsight Compute flushes the caches before each), five
# launches each: ours (base and pf) and cuBLAS's, to split the 1024^3 time into kernel and protocol.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
K=gpu__time_duration.sum,sm__cycles_active.avg,lrc__lts2lrc_sectors_op_read.sum,dram__bytes_read.sum
w='{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"wgmma_n":128,"raster_group":1,"cluster_m":1}'
timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 4 --launch-count 5 --metrics $K \
  $B/rtx-tune gemm 1024x1024x1024 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_base_1024.log 2>&1
echo "ncu base rc=$?"; grep -E "gpu__time_duration" $R/ncu_base_1024.log | sed 's/  */ /g'
RTX_EXP_PF=1 timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 4 --launch-count 5 --metrics $K \
  $B/exp/rtx-tune gemm 1024x1024x1024 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_pf_1024.log 2>&1
echo "ncu pf rc=$?"; grep -E "gpu__time_duration" $R/ncu_pf_1024.log | sed 's/  */ /g'
timeout 60 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 4 --launch-count 5 --metrics $K \
  $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes 1024x1024x1024 > $R/ncu_nvjet_1024.log 2>&1
echo "ncu nvjet rc=$?"; grep -E "gpu__time_duration" $R/ncu_nvjet_1024.log | sed 's/  */ /g'
rm -rf $R/*/; pack
