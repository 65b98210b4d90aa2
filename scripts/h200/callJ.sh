#!/usr/bin/env bash
# Device call J (session 4): cluster_m=2 with plain (.cta) mbarrier arrive/wait semantics, and
# rings deeper than 6 stages. The wgmma GPU test first (every cluster case verified against the
# f64 reference), then cluster 1 vs 2 on the same tile (exhaustive over a --where slice), then
# guided 60 s tuning of the 1024^3 and 4096^3 bf16 shapes into the tuning database.
set -u; . "$(dirname "$0")/env.sh"
for t in $B/tests/*; do n=$(basename $t)
  timeout ${TEST_S:-170} $t --test-threads=1 --nocapture > $R/$n.log 2>&1; echo "test $n rc=$?"; grep -E "^test result|FAIL|panicked" $R/$n.log | head -5
done
ex() { # shape tag where-json
  timeout 120 $B/rtx-tune gemm $1 --dtype bf16 --layout nn --strategy exhaustive --time-budget-s 60 --no-store --where "$3" \
    --record-fixture $R/slice_$2.json > $R/slice_$2.log 2>&1
  echo "slice $2 rc=$?"; grep -E "searched|#[1-5]|cuBLAS:|throughput|took" $R/slice_$2.log | head -9
}
ex 1024x1024x1024 1024_64x128 '{"bm":64,"bn":128,"consumers":1,"raster_group":8,"split_k":1,"wgmma_n":128}'
ex 4096x4096x4096 4096_128x256 '{"bm":128,"bn":256,"consumers":2,"raster_group":8,"persistent":true,"wgmma_n":256}'
ex 512x512x512 512_64x64 '{"bm":64,"bn":64,"consumers":1,"raster_group":1,"split_k":1,"pingpong":false}'
for s in 1024x1024x1024 4096x4096x4096; do
  /usr/bin/time -f "wall %e s" timeout 100 $B/rtx-tune gemm $s --dtype bf16 --layout nn --time-budget-s 55 > $R/tune_$s.log 2>&1
  echo "tune $s rc=$?"; grep -E "searched|winner|#[1-3]|cuBLAS:|throughput|took|wall" $R/tune_$s.log | head -9
done
cp $B/cache/tuning.db $R/ 2>/dev/null
tar -C $R -czf $OUT/callJ.tgz .
