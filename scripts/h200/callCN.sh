#!/usr/bin/env bash
# Device call CN (session 23): one landing does what the card allows. On an H200: call BY
# (issue 4's whole picture for the current build) into $OUT/by, then call CM (the tf32 small-M
# mma.sync patch against main) into $OUT/cm. On any other card: call CM alone, and exit 3 after it
# so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (main; BY's bundle and CM's base)
#        cargo xtask gpu-bundle --out .devrun_mma --tests none --patch scripts/h200/patches/tf32_small_m_mma.patch
# Run: bash scripts/h200/callCN.sh (carry .devrun and .devrun_mma; about 8 minutes on an H200,
# 4 elsewhere; timeout_s 590).
set -u
d=$(cd "$(dirname "$0")" && pwd); root=$OUT
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
run_cm() { mkdir -p $root/cm; OUT=$root/cm B=$PWD/.devrun_mma BASE=$PWD/.devrun bash $d/callCM.sh; }
case $name in
  *H200*) mkdir -p $root/by; OUT=$root/by B=$PWD/.devrun bash $d/callBY.sh; run_cm ;;
  *) run_cm; exit 3 ;;
esac
