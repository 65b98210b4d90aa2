#!/usr/bin/env bash
# Device call B: anchors, tuning (with timing-table fixtures) and the bench, one process each.
set -u; . "$(dirname "$0")/env.sh"
python3 $B/torch_anchors.py --only copy,gemm,mem --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
tail -3 $R/anchors.log
T=$B/rtx-tune; DB=$R/tuning.db
for s in "4096x4096x4096 nn" "1024x1024x1024 nt" "256x8192x8192 nn"; do set -- $s
  n=$(echo $1 | tr x _)
  timeout 150 $T gemm $1 --dtype bf16 --layout $2 --strategy exhaustive --space-limit ${LIMIT:-60} --time-budget-s 120 --no-store --record-fixture $R/fixture_wgmma_bf16_${2}_$n.json --db $DB > $R/fix_$n.log 2>&1; echo "fixture $1 $2 rc=$?"; tail -4 $R/fix_$n.log
done
for s in "4096x4096x4096 nn" "8192x8192x8192 nt" "512x512x512 nt" "1024x1024x1024 nt" "4000x4000x4096 nt" "64x8192x8192 nt" "256x8192x8192 nn" "4096x4096x1000 nt"; do set -- $s
  n=$(echo $1 | tr x _)
  /usr/bin/time -f "wall %e s" timeout 100 $T gemm $1 --dtype bf16 --layout $2 --time-budget-s 60 --db $DB > $R/tune_$n.log 2>&1; echo "tune $1 $2 rc=$?"; tail -5 $R/tune_$n.log
done
timeout ${BENCH_S:-240} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress ${BENCH_ARGS:---quick} > $R/bench.log 2>&1; echo "bench rc=$?"
tar -C $R -czf $OUT/callB.tgz . ; tail -60 $R/bench.log
