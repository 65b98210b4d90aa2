#!/usr/bin/env bash
# Device call L (session 4): the default f16/bf16 wgmma config now stores through the TMA-store
# epilogue. The Synth API and GEMM GPU tests over it, PyTorch anchors, guided tuning of two more
# bf16 shapes into call K's tuning database (carried as .devrun/cache/tuning.db), then the GEMM
# suite for bf16 and f16 at the shapes of issue 4.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callL.tgz . ; }
for t in $B/tests/*; do n=$(basename $t)
  timeout 100 $t --test-threads=1 --nocapture > $R/$n.log 2>&1; echo "test $n rc=$?"; grep -E "^test result|FAIL|panicked" $R/$n.log | head -4
done
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
pack
for sd in 256x8192x8192:bf16 8192x8192x8192:bf16; do
  s=${sd%%:*}; d=${sd##*:}
  timeout 75 $B/rtx-tune gemm $s --dtype $d --layout nn --time-budget-s 40 > $R/tune_${s}_$d.log 2>&1
  echo "tune $s $d rc=$?"; grep -E "searched|winner|cuBLAS:|throughput|took" $R/tune_${s}_$d.log | head -6
done
cp $B/cache/tuning.db $R/ 2>/dev/null; pack
timeout ${BENCH_S:-170} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| rtx-(wgmma|tuned|nearest)" $R/bench.log | cut -c1-120 | head -40
