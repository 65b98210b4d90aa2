#!/usr/bin/env bash
# Device call BA (session 12), after call AZ: does 128-byte L2 promotion of the TMA maps (9% fewer
# L2 slice reads and 31% less L2-fabric traffic than the adopted 256-byte promotion at
# 1024x1024x4096 in call AZ) move the suite's ratios? A/B in one lease, alternating processes:
# base = $B/rtx-bench (adopted), p128 = $B/exp/rtx-bench with RTX_EXP_L2P=128 (experiment build,
# docs/runs/2026-12-05/callAZ/exp.patch). (1) eight alternating pairs at 512^3 / 1024^3 bf16+f16;
# (2) two alternating pairs over issue 4's other bf16/f16 shapes, one at its tf32 shapes; (3) Nsight Compute kernel
# durations at 1024^3, ours and cuBLAS's.
# Run: B=$PWD/.devrun bash scripts/h200/callBA.sh (about 3 minutes; timeout_s 400).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBA.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
row() { grep -E '^\| (rtx-wgmma-default|cublas) ' $1 | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/rtx-wgmma-default //g; s/  */ /g'; }
for i in 1 2 3 4 5 6 7 8; do
  timeout 60 $B/rtx-bench --out $R/s_base$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_base$i.log 2>&1
  echo "small base $i rc=$? $(row $R/s_base$i.log)"
  RTX_EXP_L2P=128 timeout 60 $B/exp/rtx-bench --out $R/s_p128_$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_p128_$i.log 2>&1
  echo "small p128 $i rc=$? $(row $R/s_p128_$i.log)"
done
pack
S=2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000
for i in 1 2; do
  timeout 150 $B/rtx-bench --out $R/l_base$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/l_base$i.log 2>&1
  echo "large base $i rc=$? $(row $R/l_base$i.log)"; pack
  RTX_EXP_L2P=128 timeout 150 $B/exp/rtx-bench --out $R/l_p128_$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/l_p128_$i.log 2>&1
  echo "large p128 $i rc=$? $(row $R/l_p128_$i.log)"; pack
done
# tf32 runs on the same wgmma/TMA kernels: one pair at issue 4's tf32 shapes.
timeout 120 $B/rtx-bench --out $R/t_base --no-progress --suite gemm --gemm-dtypes tf32 --gemm-shapes 4096x4096x4096,8192x8192x8192 > $R/t_base.log 2>&1
echo "tf32 base rc=$? $(row $R/t_base.log)"
RTX_EXP_L2P=128 timeout 120 $B/exp/rtx-bench --out $R/t_p128 --no-progress --suite gemm --gemm-dtypes tf32 --gemm-shapes 4096x4096x4096,8192x8192x8192 > $R/t_p128.log 2>&1
echo "tf32 p128 rc=$? $(row $R/t_p128.log)"; pack
# (3) kernel-only durations at 1024^3 (Nsight Compute flushes the caches before each): five
# launches each of our default kernel and of cuBLAS's, to split the 1024^3 time into kernel and protocol.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
K=gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,lrc__lts2lrc_sectors_op_read.sum,dram__bytes_read.sum
w='{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"wgmma_n":128,"raster_group":1,"cluster_m":1}'
timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 4 --launch-count 5 --metrics $K \
  $B/rtx-tune gemm 1024x1024x1024 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_rtx_1024.log 2>&1
echo "ncu rtx rc=$?"; grep -E "gpu__time_duration" $R/ncu_rtx_1024.log | sed 's/  */ /g'
timeout 60 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 4 --launch-count 5 --metrics $K \
  $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes 1024x1024x1024 > $R/ncu_nvjet_1024.log 2>&1
echo "ncu nvjet rc=$?"; grep -E "gpu__time_duration|nvjet.*Context" $R/ncu_nvjet_1024.log | sed 's/  */ /g' | head -12
rm -rf $R/*/; pack
