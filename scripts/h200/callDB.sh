#!/usr/bin/env bash
# Call DB (session 29; call DA, its first form, ran only its first part, on an H100 at 5d6d5b1):
# issue 4's two open bars, bf16/f16 at 128 and 160 x 8192^2 (H200, session 26: 0.99 and 0.88), against cuBLAS's own small-M arrangement. (1) 2 rounds (ROUNDS),
# separate processes, order rotated: the GEMM suite (bf16, f16) at 128 and 160 x 8192^2 and
# 96 x 11008 x 4096 from three bundles: base (main: the ladder's 64-row tiles), sw (main plus
# swap_small_m_default.patch: 64 x 128 / 64 x 160 transposed tiles, one consumer, 8 stages) and cn (main
# plus cn_small_m_default.patch: cuBLAS's 128 x 64 / 128 x 80 transposed tiles, two consumers,
# in cluster_n pairs covering M and sharing B^T by multicast, 8 stages). (2) callDB_tests.sh's
# rtx-tune slices of the new kernels (its GPU cases skipped: they passed on an H100).
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`; sw = `cargo xtask
# gpu-bundle --out .devrun_sw --tests none --patch scripts/h200/patches/swap_small_m_default.patch`;
# cn = the same with `--out .devrun_cn` and `cn_small_m_default.patch`.
# Run: BASE=$PWD/.devrun BSW=$PWD/.devrun_sw BCN=$PWD/.devrun_cn bash scripts/h200/h200_only.sh
#   scripts/h200/callDB.sh scripts/h200/callDB_tests.sh (carry the three; about 7 minutes on an
#   H200, 2 on another card; timeout_s 560).
set -u; B=$BASE; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDB.tgz . ; }
{ echo "base $(cat $BASE/BUILD)"; echo "sw $(cat $BSW/BUILD)"; echo "cn $(cat $BCN/BUILD)"; } >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  case $1 in base) ;; sw) B=$BSW ;; cn) B=$BCN ;; esac
  suite_arm $1 bf16,f16 128x8192x8192,160x8192x8192,96x11008x4096
}
# The A/B/C first (it decides a default; each round is packed as it ends, so a call cut short
# keeps what finished), then the slices without the GPU cases (they passed on the H100).
rotated_rounds ${ROUNDS:-2} base sw cn
DA_INNER=1 NO_CASES=1 bash "$(dirname "$0")/callDB_tests.sh"
finish
