#!/usr/bin/env bash
# Device call CM (prepared in session 22, not run yet): tf32 NN at M <= 256 served by mma.sync
# with small-M defaults (scripts/h200/patches/tf32_small_m_mma.patch) against main, where wgmma
# serves it through the staging pre-pass. Call CL's guided tuning of the mma family found 107.0
# / 161.3 / 265.9 us at 64 / 128 / 256 x 8192^2 against wgmma's 335.6 / 337.6 / 346.0 (call CK).
# (1) 3 rounds, alternating processes, order rotated: the GEMM suite, tf32 only, cuBLAS
#     alternating, at the shapes the rule moves (M <= 256 with a row-major B) and controls it
#     leaves (512^3, 1024^3, 2048^3 and 4096^2 x 1000 keep wgmma). The patch changes the
#     rtx-mma-default rows at M <= 256 (new defaults) and which family `gemm` serves there; the
#     rtx-wgmma-default rows are the same code in both arms. Adopt if new's mma row beats base's
#     wgmma row at every moved shape.
# (2) new bundle: `rtx-tune gemm 96x4096x4096 --dtype tf32` (the served family, guided, 25 s) at
#     a shape no tuning saw, cuBLAS in the same process.
# Build: base = `cargo xtask gpu-bundle --out .devrun_base --tests none`; new =
# `cargo xtask gpu-bundle --out .devrun --tests none --patch scripts/h200/patches/tf32_small_m_mma.patch`.
# Run: B=$PWD/.devrun BASE=$PWD/.devrun_base bash scripts/h200/callCM.sh (about 4 minutes; timeout_s 400).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCM.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=64x8192x8192,128x8192x8192,192x8192x8192,256x8192x8192,96x4096x4096,512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x1000
arm() { suite_arm $1 tf32 $S; }
rotated_rounds 3 base new
timeout 40 $B/rtx-tune gemm 96x4096x4096 --dtype tf32 --layout nn --time-budget-s 25 --no-store > $R/tune_96x4096x4096.log 2>&1
echo "tune rc=$?"; grep -E "family|^  #1 |^cuBLAS|rtx / cuBLAS" $R/tune_96x4096x4096.log | cut -c1-170
finish
