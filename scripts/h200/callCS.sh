#!/usr/bin/env bash
# Device call CS (session 25): guided tuning at bf16/f16 128 and 160 x 8192^2 against cuBLAS (see
# callCS_sweep.sh). On an H200 it runs call BY first into $OUT/by; on any other card it exits 3
# after CS, so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: bash scripts/h200/callCS.sh (carry .devrun; about 4 minutes, 8 with BY; timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" cs "$(dirname "$0")/callCS_sweep.sh" B=$PWD/.devrun
