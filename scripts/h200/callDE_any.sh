#!/usr/bin/env bash
# Call DE (any Hopper card; session 31): the paired transposed store of swap_ab kernels (35e29c6,
# built as branch `vs` at 524cc89: lanes of rows r and r ^ 1 trade one value, each lane stores two consecutive elements of a
# row of C) in the cv bundle (it plus cn_small_m_default.patch). (1) Every swap_ab GPU case
# (`sw_*`, `swcn_*`, `swtb_*`, `swsn_*`) against the f64 reference. (2) The A/B cn (main plus the
# cn patch: single transposed stores) against cv, 2 rounds, order rotated, separate processes: the
# GEMM suite (bf16, f16) at 128 / 160 x 8192 x 2048 (B = 32 MiB, the least the cn default takes;
# the store is a larger share of the time) and 128 / 160 x 8192^2 (issue 4's bars; on an H100 all
# arrangements tie there, bound by DRAM).
# Build: cn = `cargo xtask gpu-bundle --out .devrun_cn --tests none --at 1e8a8b1 --patch
# scripts/h200/patches/cn_small_m_default.patch` (before the paired store); cv = `cargo xtask gpu-bundle --out .devrun_cv
# --tests wgmma_gpu --at 35e29c6 --patch scripts/h200/patches/cn_small_m_default.patch`.
# Run: BCN=$PWD/.devrun_cn BCV=$PWD/.devrun_cv bash scripts/h200/callDE_any.sh (71 s on an H100).
set -u; B=$BCV; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDE.tgz . ; }
{ echo "cn $(cat $BCN/BUILD)"; echo "cv $(cat $BCV/BUILD)"; } >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
wgmma_f64_test 150 $SWAP_CASES test_sw.log
pack
arm() {
  case $1 in cn) B=$BCN ;; cv) B=$BCV ;; esac
  suite_arm $1 bf16,f16 128x8192x2048,160x8192x2048,128x8192x8192,160x8192x8192
}
rotated_rounds 2 cn cv
finish
