#!/usr/bin/env bash
# Device call CR (session 24): the adopted split-K and 32 MiB bound (8ae4cbd) on thirteen tf32
# shapes, nine of them new to the rule (see callCR_sweep.sh). On an H200 it runs call BY first
# into $OUT/by; on any other card it exits 3 after CR, so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: bash scripts/h200/callCR.sh (carry .devrun; about 1 minute, 5 with BY; timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" cr "$(dirname "$0")/callCR_sweep.sh" B=$PWD/.devrun
