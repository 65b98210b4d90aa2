#!/usr/bin/env bash
# Device call N (session 5): the stmatrix TMA-store epilogue and column-split consumers (split_n).
# Their GPU cases against the f64 reference; A/B of the GEMM suite, base build (.devrun/base, HEAD before the change) against the
# new one, alternating, same process cuBLAS in each; Nsight Compute on the new default kernels
# (1024^3, 4096x4096x1000); exhaustive slices never measured before (ping-pong + TMA store,
# cuBLAS's 256x128 tile).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callN.tgz . ; }
for c in ts_ sn_; do RTX_WGMMA_CASE=$c timeout 100 $B/tests/rtx_synthesis__test__wgmma_gpu wgmma_gemm_matches_the_f64_reference --test-threads=1 --nocapture > $R/test_wgmma_$c.log 2>&1
echo "test wgmma $c rc=$?"; grep -E "^test result|FAIL|panicked|PASS" $R/test_wgmma_$c.log | cut -c1-100 | head -12; done
SH=1024x1024x1024,4096x4096x4096,4000x4000x4096,4096x4096x1000
for v in base new base new; do
  bin=$B/rtx-bench; [ $v = base ] && bin=$B/base/rtx-bench
  timeout 100 $bin --out $R/ab_$v --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $SH > $R/ab_$v.log 2>&1; echo "ab $v rc=$?"
  grep -E "^\| (rtx-wgmma-default|cublas) " $R/ab_$v.log | cut -c1-100
done
pack
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for s in 1024x1024x1024 4096x4096x1000; do
  timeout 70 $NCU --clock-control none -k 'regex:^rtx_wgmma' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $B/rtx-bench --out $R/ncu_bench_$s --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $s > $R/ncu_$s.log 2>&1
  echo "ncu $s rc=$?"; grep -E "^  rtx|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible" $R/ncu_$s.log | cut -c1-150 | head -12
done
pack
ex() { # shape tag where-json
  timeout 60 $B/rtx-tune gemm $1 --dtype bf16 --layout nn --strategy exhaustive --time-budget-s 35 --no-store --where "$3" \
    --record-fixture $R/slice_$2.json > $R/slice_$2.log 2>&1
  echo "slice $2 rc=$?"; grep -E "#[1-4]|cuBLAS:" $R/slice_$2.log | sed 's/"bk":64,//' | cut -c1-220 | head -5
}
ex 4096x4096x1000 k1000_ppts '{"pingpong":true,"tma_store":true,"cluster_m":1,"raster_group":8}'
ex 4096x4096x1000 k1000_sn '{"split_n":true,"tma_store":true,"bm":128,"bn":256,"raster_group":8}'
ex 1024x1024x1024 1024_sn '{"split_n":true,"bm":64,"bn":128,"raster_group":8}'
pack
ex 4096x4096x4096 4096_sn '{"split_n":true,"tma_store":true,"bm":128,"bn":256,"raster_group":8}'
pack
