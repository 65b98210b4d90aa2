#!/usr/bin/env bash
# Call DH (any Hopper card; session 32): the tf32 NN default at M <= 256 after 3a3fdb8 (wgmma's
# register-A transposed product, WgmmaGemm::tf32_register_a_config, in place of mma.sync split-K
# or the staging pre-pass): the GEMM suite, tf32, at the eleven shapes of call DG plus
# 96 x 11008 x 4096 (what rtx serves there, cuBLAS alternating in the same process, every row
# checked against cuBLAS), then the `swtf_` cases against the f64 reference.
# Build: `cargo xtask gpu-bundle --out .devrun_rs2 --tests wgmma_gpu` at 27812b3.
# Run: BRS=$PWD/.devrun_rs2 bash scripts/h200/callDH_any.sh (carry .devrun_rs2; about 2 minutes).
set -u; B=$BRS; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDH.tgz . ; }
echo "rs2 $(cat $BRS/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=64x8192x8192,128x8192x8192,160x8192x8192,192x8192x8192,256x8192x8192,96x11008x4096,96x4096x4096,144x3072x3072,128x2048x8192,240x1536x8192,128x1024x1024,256x4096x4096
i=1 suite_arm served tf32 $S
grep -E '^\| (rtx-(mma|wgmma)-default|cublas) ' $R/s_served_1.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}'
pack
wgmma_f64_test 60 swtf_ test_swtf.log
finish
