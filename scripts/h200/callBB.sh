#!/usr/bin/env bash
# SUPERSEDED (session 14): calls BF and BG measured 128 B against 256 B promotion in alternating
# arms, and 128 B was adopted (fff0ca7). Kept as the record of what session 13 prepared.
# Device call BB (session 13), after call BA. Call BA (on an H100) rejected the L2 prefetch and
# read 128-byte L2 promotion of the TMA maps 0.4-1.5% ahead of the adopted 256 B at 512^3 and
# 1024^3 over eight rounds. This call asks whether that holds: sixteen alternating rounds of the
# adopted build ($B/rtx-bench) and the experiment build with RTX_EXP_L2P=128 ($B/exp/rtx-bench,
# docs/runs/2026-12-05/callBA/exp.patch) at 512^3, 1024^3 and 2048^3 bf16+f16, then Nsight
# Compute kernel durations at 1024^3 for both (five launches each).
# Build: cargo xtask gpu-bundle --out .devrun --tests none
#        cargo xtask gpu-bundle --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBA/exp.patch --at 40d8bdc
# Run: B=$PWD/.devrun bash scripts/h200/callBB.sh (about 4 minutes; timeout_s 360). N=8 runs eight rounds.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBB.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=512x512x512,1024x1024x1024,2048x2048x2048
for i in $(seq 1 ${N:-16}); do
  timeout 60 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/s_base_$i.log 2>&1
  echo "base_$i rc=$? $(row $R/s_base_$i.log)"
  RTX_EXP_L2P=128 timeout 60 $B/exp/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/s_p128_$i.log 2>&1
  echo "p128_$i rc=$? $(row $R/s_p128_$i.log)"
done
pack
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
K=gpu__time_duration.sum,lrc__lts2lrc_sectors_op_read.sum,dram__bytes_read.sum
w='{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"wgmma_n":128,"raster_group":1,"cluster_m":1}'
for v in base p128; do
  if [ $v = base ]; then X=$B/rtx-tune; E=; else X=$B/exp/rtx-tune; E=RTX_EXP_L2P=128; fi
  env $E timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma" --launch-skip 4 --launch-count 5 --metrics $K \
    $X gemm 1024x1024x1024 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_${v}_1024.log 2>&1
  echo "ncu $v rc=$?"; grep -E "gpu__time_duration|lts2lrc" $R/ncu_${v}_1024.log | sed 's/  */ /g'
done
date -u +"end %T" >> $R/smi.txt
rm -rf $R/*/; pack
