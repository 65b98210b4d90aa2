#!/usr/bin/env bash
# Call DB, part 1 (any Hopper card; the whole call on a card other than the H200): the GPU cases
# of session 29's cluster_n / split_n / tight_b transposed kernels (`swcn_*`, `swsn_*`, `swtb_*`,
# and session 27's `sw_*` again; call DA passed all but `swtb_*` on an H100) against the f64 reference, then rtx-tune slices of cuBLAS's small-M arrangement
# at 160 and 128 x 8192^2 (bf16 NN, cuBLAS in the same process, every candidate checked against
# it): '{"swap_ab":true,"cluster_n":2}' (128 of N by 64 / 80 / 128 / 160 of M, pairs along M
# sharing the B^T tile; 8 stages of 128 x 80 with tight_b, new since call DA) and '{"swap_ab":true,"split_n":true}' (two consumers splitting the
# columns of a 64-row tile covering all of M); at 160 also '{"swap_ab":true,"tight_b":true}' (every
# transposed tile with a tight 80- or 160-row B slot, alone, in pairs or column-split).
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` at main.
# Run alone: BASE=$PWD/.devrun bash scripts/h200/callDB_tests.sh (carry .devrun; about 2 minutes).
set -u; B=$BASE; export BASE; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDB.tgz . ; }
if [ -z "${DA_INNER:-}" ]; then
  echo "base $(cat $BASE/BUILD)" >> $R/build.txt
  date -u +"start %T" >> $R/smi.txt
fi
if [ -z "${NO_CASES:-}" ]; then
  B=$BASE wgmma_f64_test 120 $SWAP_CASES test_sw.log
  pack
fi
for shape in 160x8192x8192 128x8192x8192; do
  tb=; [ $shape = 160x8192x8192 ] && tb='tb|{"swap_ab":true,"tight_b":true}|30'
  for w in 'cn|{"swap_ab":true,"cluster_n":2}|30' 'sn|{"swap_ab":true,"split_n":true}|15' $tb; do
    IFS='|' read -r tag filter T <<< "$w"
    timeout $((T + 30)) $BASE/rtx-tune gemm $shape --dtype bf16 --layout nn --strategy exhaustive --time-budget-s $T --where "$filter" --experimental > $R/slice_${tag}_$shape.log 2>&1
    echo "slice $tag $shape rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS" $R/slice_${tag}_$shape.log | sed 's/"bk":64,//; s/"cluster_k":1,//; s/"persistent":true,//; s/"pingpong":false,//; s/"split_k":1,//; s/"tma_store":false,//' | cut -c1-220
    pack
  done
done
[ -z "${DA_INNER:-}" ] && finish
