#!/usr/bin/env bash
# Device call C: anchors + rtx-bench (gemm with tuned rows from call B's tuning db, memory, transformer).
set -u; . "$(dirname "$0")/env.sh"
mkdir -p $B/cache && cp "${TUNING_DB:-$(dirname "$0")/tuning.db}" $B/cache/tuning.db
python3 $B/torch_anchors.py --only copy,gemm,mem --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout ${BENCH_S:-330} $B/rtx-bench --out $R --anchors $R/anchors.json --no-progress --suite ${SUITES:-memory,transformer,gemm} ${BENCH_ARGS:---quick} > $R/bench.log 2>&1; echo "bench rc=$?"
tar -C $R -czf $OUT/callC.tgz . ; grep -E "^\| (rtx|cuBLAS|copy)" $R/bench.log | grep -v "not available" | head -70
