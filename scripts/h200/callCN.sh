#!/usr/bin/env bash
# Device call CN (session 23): one landing does what the card allows. On an H200: call BY
# (issue 4's whole picture for the current build) into $OUT/by, then call CM (the tf32 small-M
# mma.sync patch against main) into $OUT/cm. On any other card: call CM alone, and exit 3 after it
# so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (main; BY's bundle and CM's base)
#        cargo xtask gpu-bundle --out .devrun_mma --tests none --patch scripts/h200/patches/tf32_small_m_mma.patch
# Run: bash scripts/h200/callCN.sh (carry .devrun and .devrun_mma; about 8 minutes on an H200,
# 4 elsewhere; timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" cm "$(dirname "$0")/callCM.sh" B=$PWD/.devrun_mma BASE=$PWD/.devrun
