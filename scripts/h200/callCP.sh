#!/usr/bin/env bash
# Device call CP (session 23): where does the tf32 small-M rule (e37b5f2: a row-major B and
# M <= 256 go to mma.sync first) hold beyond N = K = 8192? Call CM chose it at 64..256 x 8192^2
# and 96 x 4096^2; with a smaller B the staging pre-pass costs less and wgmma may win. The suite,
# tf32 only, 2 rounds (one process each), both families' default rows with cuBLAS alternating, at
# M = 32..256 over B from 2 MiB to 128 MiB. On an H200 it runs call BY first into $OUT/by; on
# any other card it exits 3 after CP, so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: bash scripts/h200/callCP.sh (carry .devrun; about 2 minutes, 6 with BY; timeout_s 590).
set -u
d=$(cd "$(dirname "$0")" && pwd); root=$OUT
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
run_cp() {
  mkdir -p $root/cp
  OUT=$root/cp B=$PWD/.devrun bash -c '
    set -u; . "$0/env.sh"
    pack() { tar -C $R -czf $OUT/callCP.tgz . ; }
    cat $B/BUILD > $R/build.txt
    date -u +"start %T" >> $R/smi.txt
    S=32x8192x8192,256x4096x4096,64x2048x2048,256x2048x2048,64x1024x1024,256x1024x1024,128x4096x1024,256x1024x8192,64x11008x4096,256x11008x4096,200x3000x3000
    for i in 1 2; do
      t=60; [ $i = 1 ] && t=180
      timeout $t $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes tf32 --gemm-shapes $S > $R/s_$i.log 2>&1
      echo "round $i rc=$? $(mrow $R/s_$i.log | cut -c1-900)"
      pack
    done
    rm -rf $R/b; finish' "$d"
}
case $name in
  *H200*) mkdir -p $root/by; OUT=$root/by B=$PWD/.devrun bash $d/callBY.sh; run_cp ;;
  *) run_cp; exit 3 ;;
esac
