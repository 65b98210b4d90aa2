#!/usr/bin/env bash
# Device call CP (session 23): where does the tf32 small-M rule (e37b5f2: a row-major B and
# M <= 256 go to mma.sync first) hold beyond N = K = 8192? Call CM chose it at 64..256 x 8192^2
# and 96 x 4096^2; with a smaller B the staging pre-pass costs less and wgmma may win. The suite,
# tf32 only, 2 rounds (one process each), both families' default rows with cuBLAS alternating, at
# M = 32..256 over B from 4 MiB to 256 MiB. On an H200 it runs call BY first into $OUT/by; on
# any other card it exits 3 after CP, so the caller knows BY is still owed.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: bash scripts/h200/callCP.sh (carry .devrun; about 2 minutes, 6 with BY; timeout_s 590).
exec bash "$(dirname "$0")/by_then.sh" cp "$(dirname "$0")/callCP_sweep.sh" B=$PWD/.devrun
