#!/usr/bin/env bash
# Call DK (any Hopper card; session 33): the tf32 NN default at M <= 256 with split-K for thin
# grids (WgmmaGemm::tf32_register_a_config: where the unsplit pick fills at most three quarters
# of a wave). The GEMM suite, tf32, main's default against cuBLAS alternating in the same process,
# every row checked against the f64 reference, at call DI's twelve shapes (eight of which the
# rule leaves unsplit) and four more thin ones timed in call DJ's slices; 144 x 3072^2 and
# 128 x 1024^2 are splits no slice timed. Two rounds, separate processes.
# Build: `cargo xtask gpu-bundle --out .devrun_dk --tests wgmma_gpu` at the commit of the rule.
# Run: BDK=$PWD/.devrun_dk bash scripts/h200/callDK_any.sh (carry .devrun_dk; about 3 minutes).
set -u; B=$BDK; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDK.tgz . ; }
echo "dk $(cat $BDK/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=64x8192x8192,128x8192x8192,160x8192x8192,192x8192x8192,256x8192x8192,96x11008x4096,96x4096x4096,144x3072x3072,128x2048x8192,240x1536x8192,128x1024x1024,256x4096x4096,64x1024x8192,256x1024x8192,160x2048x4096,128x1024x4096
for i in 1 2; do
  suite_arm dk tf32 $S > /dev/null
  grep -E '^\| (rtx-wgmma-default|cublas) ' $R/s_dk_$i.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}' | paste - - | awk '{print $3, $4, $9, $10, $11}'
  pack
done
finish
