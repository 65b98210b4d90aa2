#!/usr/bin/env bash
# Device call CQ (session 24): (1) does the tf32 small-M rule (a85e4ba: mma.sync serves M <= 64,
# or M <= 256 with B >= 64 MiB) hold on eleven shapes it was not fitted to? (2) Does splitting K
# further where mma's small-M grid is thin (patches/tf32_thin_grid_split_k.patch: toward 256
# blocks, slices of >= 32 k-blocks) beat main's mma and wgmma rows at seven thin shapes? Both
# families' default rows with cuBLAS alternating, 2 rounds of base/new in alternating processes.
# On an H200 it runs call BY first into $OUT/by; on any other card it exits 3 after CQ, so the
# caller knows BY is still owed.
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`; new =
# `cargo xtask gpu-bundle --out .devrun_sk --tests none --patch scripts/h200/patches/tf32_thin_grid_split_k.patch`.
# Run: bash scripts/h200/callCQ.sh (carry .devrun and .devrun_sk; about 3 minutes, 7 with BY;
# timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" cq "$(dirname "$0")/callCQ_sweep.sh" B=$PWD/.devrun_sk BASE=$PWD/.devrun
