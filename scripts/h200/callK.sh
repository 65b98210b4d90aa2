#!/usr/bin/env bash
# Device call K (session 4): the TMA-store epilogue. Its GPU cases against the f64 reference,
# then with vs without it on fixed tiles (exhaustive over --where slices), the PyTorch anchors,
# guided tuning (40 s budget) of the bf16 shapes of issue 4 and f16 4096^3, and the GEMM suite
# over the resulting tuning database (bf16 and f16, the shapes below), anchors of the same call.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callK.tgz . ; }
RTX_WGMMA_CASE=ts_ timeout 150 $B/tests/rtx_synthesis__test__wgmma_gpu wgmma_gemm_matches_the_f64_reference --test-threads=1 --nocapture > $R/test_wgmma_ts.log 2>&1
echo "test wgmma ts rc=$?"; grep -E "^test result|FAIL|panicked|ts_" $R/test_wgmma_ts.log | head -14
ex() { # shape tag where-json
  timeout 90 $B/rtx-tune gemm $1 --dtype bf16 --layout nn --strategy exhaustive --time-budget-s 40 --no-store --where "$3" \
    --record-fixture $R/slice_$2.json > $R/slice_$2.log 2>&1
  echo "slice $2 rc=$?"; grep -E "#[1-6]|cuBLAS:" $R/slice_$2.log | sed 's/"bk":64,//; s/"raster_group":8,//' | head -7
}
ex 4096x4096x4096 4096_ts '{"bm":128,"bn":256,"consumers":2,"raster_group":8,"persistent":true,"wgmma_n":256,"split_k":1,"cluster_m":1}'
ex 4096x4096x1000 4096k1000_ts '{"bm":128,"bn":256,"consumers":2,"raster_group":8,"persistent":true,"wgmma_n":256,"split_k":1,"cluster_m":1}'
ex 1024x1024x1024 1024_ts '{"bm":64,"bn":128,"consumers":1,"raster_group":8,"persistent":true,"wgmma_n":128,"split_k":1,"cluster_m":1}'
pack
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,4096 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
for sd in 4096x4096x4096:bf16 4096x4096x4096:f16 4096x4096x1000:bf16 1024x1024x1024:bf16 512x512x512:bf16 64x8192x8192:bf16; do
  s=${sd%%:*}; d=${sd##*:}
  timeout 80 $B/rtx-tune gemm $s --dtype $d --layout nn --time-budget-s 40 > $R/tune_${s}_$d.log 2>&1
  echo "tune $s $d rc=$?"; grep -E "searched|winner|cuBLAS:|throughput|took" $R/tune_${s}_$d.log | head -6
done
cp $B/cache/tuning.db $R/ 2>/dev/null; pack
timeout ${BENCH_S:-150} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx|cuBLAS)" $R/bench.log | cut -c1-160 | head -60
