#!/usr/bin/env bash
# Device call CK (session 22): tf32's default below two waves of 128 x 256 (0ccd7a5: the
# ladder less 192 x 160) against main before it (128 x 256 everywhere there). Call CJ's guided
# tuning found 64 x 64 at 512^3 and 64 x 128 at 1024^3 1.7x faster than 128 x 256.
# (1) 3 rounds, alternating processes, order rotated: the GEMM suite, tf32 only, cuBLAS
#     alternating, at the changed shapes and two controls (4096^2 x 1000, 4096^3: unchanged);
# (2) new bundle: the 64 x 128 and 64 x 64 rungs with and without the TMA-store epilogue
#     (`rtx-tune --strategy exhaustive --where`, every field but tma_store fixed), since the
#     ladder keeps tf32 on direct stores and call CJ's winners stored through TMA.
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` at 1848295 (or any main
# before 0ccd7a5); new = `cargo xtask gpu-bundle --out .devrun_tf --tests none` at 0ccd7a5.
# Run: B=$PWD/.devrun_tf BASE=$PWD/.devrun bash scripts/h200/callCK.sh (about 4 minutes; timeout_s 400).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCK.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=512x512x512,1024x1024x1024,2048x2048x2048,64x8192x8192,128x8192x8192,192x8192x8192,256x8192x8192,4096x4096x1000,4096x4096x4096
# (Ran with this arm inline; it moved to env.sh as suite_arm after the run: same command and
# timeouts, printing mrow() where it printed row().)
arm() { suite_arm $1 tf32 $S; }
rotated_rounds 3 base new
for w in '1024x1024x1024 {"bm":64,"bn":128,"consumers":1,"wgmma_n":128,"stages":8,"cluster_m":1,"split_k":1,"pingpong":false,"split_n":false,"persistent":true,"raster_group":1}' \
         '512x512x512 {"bm":64,"bn":64,"consumers":1,"wgmma_n":64,"stages":10,"cluster_m":1,"split_k":1,"pingpong":false,"split_n":false,"persistent":true,"raster_group":1}'; do
  s=${w%% *}; W=${w#* }
  timeout 40 $B/rtx-tune gemm $s --dtype tf32 --layout nn --strategy exhaustive --where "$W" > $R/ex_$s.log 2>&1
  echo "ex $s rc=$?"; grep -E "^  #[12] |^cuBLAS" $R/ex_$s.log | sed -E 's/\{.*"tma_store":(true|false).*/tma_store=\1/'
done
finish
