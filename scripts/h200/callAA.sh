#!/usr/bin/env bash
# Device call AA (session 6): why is the 192x160 tile slower than 128x256 for 16-bit inputs at
# 4000x4000x4096 NT (calls U/V: 180.4 vs 173.7 us bf16)? Nsight Compute on one timed launch of
# each (three consumers of 64x160, and the default 128x256), same sections as calls M/N.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAA.tgz . ; }
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for tag in 192x160x64_c3 128x256x64_c2; do
  timeout 120 $NCU --target-processes all --clock-control none -k "regex:^rtx_wgmma_bf16_rc_${tag}" --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $B/rtx-tune gemm 4000x4000x4096 --dtype bf16 --layout nt --strategy exhaustive --where '{"bm":192,"consumers":3,"stages":4,"raster_group":8}' --no-store > $R/ncu_$tag.log 2>&1
  echo "ncu $tag rc=$?"; grep -E "^  rtx|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Stall" $R/ncu_$tag.log | cut -c1-150 | head -24
  pack
done
