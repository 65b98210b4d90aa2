#!/usr/bin/env bash
# Device call AF (session 7): K = 1000 is the last shape below 1.00x (bf16 0.99x). Ping-pong
# consumers hide one tile's epilogue behind the other's mainloop; 64x256 ping-pong lost at K=1000
# (session 5: 58.7 vs 56.8 us, twice the B traffic per flop), 128x128 ping-pong (same ingress per
# flop as 128x256 cooperative) was never measured there: its exhaustive slice against the default
# and cuBLAS. Then guided tuning of the encoder's FFN-down GEMM (0.875x by default, call AC) and
# the SIMT/mma.sync GPU test that ran past 60 s in call AE.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAF.tgz . ; }
for d in bf16 f16; do
  timeout 80 $B/rtx-tune gemm 4096x4096x1000 --dtype $d --layout nn --strategy exhaustive --where '{"pingpong":true,"bm":128,"bn":128,"cluster_m":1}' --no-store > $R/pp_$d.log 2>&1
  echo "pp slice $d rc=$?"; grep -E "searched|^  #|cuBLAS:|rtx / cuBLAS" $R/pp_$d.log | sed -E 's/"bk":64,//; s/"persistent":true,//; s/"split_k":1,//; s/"split_n":false,//' | cut -c1-150 | head -9
done
pack
timeout 60 $B/rtx-tune gemm 4096x768x3072 --dtype bf16 --layout nn --time-budget-s 40 --no-store > $R/tune_ffn.log 2>&1
echo "tune ffn rc=$?"; grep -E "searched|winner|rtx / cuBLAS|cuBLAS:|took" $R/tune_ffn.log | cut -c1-240
pack
timeout 240 $B/tests/rtx_synthesis__test__gemm_gpu --test-threads=1 --nocapture > $R/test_gemm_gpu.log 2>&1
echo "gemm_gpu rc=$? pass=$(grep -o 'PASS ' $R/test_gemm_gpu.log | wc -l)"; grep -E "^test result|FAIL|panicked" $R/test_gemm_gpu.log | head -4
pack
