#!/usr/bin/env bash
# Device call CI (session 22): call CH (the K-major B box patch against main) with the bundles of
# this session's layout, for `h200_only.sh`'s OTHER slot: a request that wanted an H200 for call
# BY and found another card measures the patch there instead of exiting.
# Build: main = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`; patched =
# `cargo xtask gpu-bundle --out .devrun_kb --tests none --patch scripts/h200/patches/kmajor_b_boxes.patch`.
# Run: B=$PWD/.devrun bash scripts/h200/h200_only.sh scripts/h200/callBY.sh scripts/h200/callCI.sh
# (carry .devrun and .devrun_kb; timeout_s 560).
B=$PWD/.devrun_kb BASE=$PWD/.devrun exec bash "$(dirname "$0")/callCH.sh"
