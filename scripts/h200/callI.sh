#!/usr/bin/env bash
# Device call I (session 4): exhaustive bf16 NN tables of the shapes where issue 4 asks rtx to beat
# cuBLAS (small squares, skinny M, short K), all configs compiled 16 at a time into one kernel
# cache that the later shapes reuse. Each table is kept as a replay fixture.
set -u; . "$(dirname "$0")/env.sh"
nproc > $R/nproc.txt
for sb in 512x512x512:130 1024x1024x1024:80 64x8192x8192:80 4096x4096x1000:80 256x8192x8192:70; do
  s=${sb%%:*}; t=${sb##*:}
  /usr/bin/time -f "wall %e s" timeout $((t + 60)) $B/rtx-tune gemm $s --dtype bf16 --layout nn --strategy exhaustive \
    --time-budget-s $t --record-fixture $R/fixture_wgmma_bf16_nn_${s//x/_}.json > $R/tune_$s.log 2>&1
  echo "tune $s rc=$?"; grep -E "searched|winner|median|#[1-5]|cuBLAS|ratio|throughput|took|wall" $R/tune_$s.log | head -14
done
tar -C $R -czf $OUT/callI.tgz .
