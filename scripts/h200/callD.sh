#!/usr/bin/env bash
# Device call D: NVRTC log probe, copy+memory anchors, the full memory suite (bins in .devrun/).
set -u; B=$PWD/.devrun
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} RTX_CUDA_INCLUDE=/usr/local/cuda/include RTX_CACHE_DIR=$B/cache RTX_REQUIRE_NVRTC=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt
ls -la /usr/local/cuda/lib64/ | grep -i nvrtc > $R/nvrtc_files.txt; /usr/local/cuda/bin/nvcc --version >> $R/nvrtc_files.txt 2>&1
python3 scripts/h200/nvrtc_log_probe.py > $R/probe.txt 2>&1; cut -c1-260 $R/probe.txt
python3 $B/torch_anchors.py --only copy,mem --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
timeout ${BENCH_S:-300} $B/rtx-bench --out $R --anchors $R/anchors.json --no-progress --suite ${SUITES:-memory} ${BENCH_ARGS:-} > $R/bench.log 2>&1; echo "bench rc=$?"
tar -C $R -czf $OUT/callD.tgz . ; grep -E "^\| (rtx|copy|torch)" $R/bench.log | grep -v "not available" | head -80
