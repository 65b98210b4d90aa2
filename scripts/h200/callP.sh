#!/usr/bin/env bash
# Device call P (session 5): where the time goes. Nsight Compute with per-instruction warp-stall
# sampling (SourceCounters) on rtx's default kernel (built with -lineinfo via RTX_NVRTC_LINEINFO=1)
# and on cuBLAS's kernel, at 1024^3 and 4096x4096x1000 bf16; the top SASS lines of each.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callP.tgz . ; }
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
export RTX_NVRTC_LINEINFO=1
for s in 1024x1024x1024 4096x4096x1000; do
  for k in rtx_wgmma nvjet; do
    timeout 90 $NCU --clock-control none -k "regex:^$k" --launch-skip 3 --launch-count 1 --section WarpStateStats \
      --section SourceCounters --print-details all --export $R/prof_${k}_$s -f \
      $B/rtx-bench --out $R/b_${k}_$s --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_${k}_$s.log 2>&1
    echo "ncu $k $s rc=$?"
    $NCU -i $R/prof_${k}_$s.ncu-rep --page source --csv --print-source sass > $R/src_${k}_$s.csv 2> $R/src_${k}_$s.err
    python3 $B/ncu_top.py $R/src_${k}_$s.csv 14 2>&1 | cut -c1-190
    grep -E "Stall|stall" $R/ncu_${k}_$s.log | grep -vE "^\s+(OPT|INF|WRN)" | cut -c1-120 | head -14
    pack
  done
done
