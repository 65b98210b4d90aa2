#!/usr/bin/env bash
# Device call CO (session 23): call CI again with clean bundles. Call CI (session 22) measured the
# K-major B box patch against a base built by `gpu-bundle` after an experiment build in the same
# cargo target folder, which can link the experiment's library into the base (fixed in b1ae34e:
# see `target_dir` in xtask/src/gpu_bundle.rs); its "no gain" may have compared the patch with
# itself. On an H200 it runs call BY first (issue 4's picture for the current build) into
# $OUT/by; on any card, call CH (the patch A/B) into $OUT/ch; on a card other than an H200 it exits
# 3 after CH, so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (main: BY's bundle and CH's base)
#        cargo xtask gpu-bundle --out .devrun_kb --tests none --patch scripts/h200/patches/kmajor_b_boxes.patch
# Run: bash scripts/h200/callCO.sh (carry .devrun and .devrun_kb; about 6 minutes on an H200, 1.5
# elsewhere; timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" ch "$(dirname "$0")/callCH.sh" B=$PWD/.devrun_kb BASE=$PWD/.devrun
