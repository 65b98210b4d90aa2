#!/usr/bin/env bash
# Device call CT (session 25). On an H200: call BY into $OUT/by (issue 4's picture for .devrun),
# then call CS into $OUT/cs (guided tuning at bf16/f16 128 and 160 x 8192^2). On any other card:
# call CT into $OUT/ct (mma.sync's bf16 small-M defaults, base against
# patches/mma_16bit_small_m.patch; see callCT_sweep.sh), then exit 3: BY is still owed.
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`; new =
# `cargo xtask gpu-bundle --out .devrun_ct --tests none --patch scripts/h200/patches/mma_16bit_small_m.patch`.
# Run: bash scripts/h200/callCT.sh (carry .devrun and .devrun_ct; H200 about 7.5 minutes, other
# cards about 3; timeout_s 590).
set -u
d=$(cd "$(dirname "$0")" && pwd); root=$OUT
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case $card in
  *H200*)
    mkdir -p "$root/by" "$root/cs"
    OUT=$root/by B=$PWD/.devrun bash "$d/callBY.sh"
    OUT=$root/cs B=$PWD/.devrun bash "$d/callCS_sweep.sh" ;;
  *)
    mkdir -p "$root/ct"
    OUT=$root/ct B=$PWD/.devrun_ct BASE=$PWD/.devrun bash "$d/callCT_sweep.sh"
    exit 3 ;;
esac
