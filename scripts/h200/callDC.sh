#!/usr/bin/env bash
# Call DC (session 30; call DB with its ending decided on the card): issue 4's two open bars,
# bf16/f16 at 128 and 160 x 8192^2 (H200, session 26: 0.99 and 0.88), against cuBLAS's own
# small-M arrangement. (1) ROUNDS (2) rounds, separate processes, order rotated: the GEMM suite
# (bf16, f16) at 128 and 160 x 8192^2, 96 x 11008 x 4096 and 160 x 8192 x 2048 (the last two
# guard shapes the patches also move) from three bundles: base (main: the
# ladder's 64-row tiles), sw (main plus swap_small_m_default.patch: 64 x 128 / 64 x 160
# transposed tiles, one consumer, 8 stages) and cn (main plus cn_small_m_default.patch: cuBLAS's
# 128 x 64 / 128 x 80 transposed tiles, two consumers, in cluster_n pairs covering M and sharing
# B^T by multicast, 8 stages). (2) pick_arm.py names the arm that beat base in all four cells
# (r/pick.txt). If one did: the PyTorch anchors and the GEMM suite at all of issue 4's shapes,
# f32/tf32/bf16/f16, from that arm's bundle (issue 4's whole picture for the candidate default).
# If none did: callDB_tests.sh's rtx-tune slices of the new kernels (no GPU cases).
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`; sw = `cargo xtask
# gpu-bundle --out .devrun_sw --tests none --patch scripts/h200/patches/swap_small_m_default.patch`;
# cn = the same with `--out .devrun_cn` and `cn_small_m_default.patch`.
# Optional fourth arm cv (session 31, `BCV`): cn with the paired transposed stores of 35e29c6
# (`cargo xtask gpu-bundle --out .devrun_cv --tests wgmma_gpu --patch
# scripts/h200/patches/cn_small_m_default.patch` at main since 35e29c6; session 31's was built at
# 524cc89, the same code). The base / sw / cn bundles of session 31 were built at 1e8a8b1 (single
# transposed stores; main's served kernels are the same at both commits).
# Optional fifth arm sn (session 35, `BSN`): main plus sn_small_m_default.patch, the sw tiles
# (64 x 128 / 64 x 160 transposed, 8 stages) with two column-split consumers (`split_n`, each
# owning half of M: 64 x 64 / 64 x 80), which call DB timed within 2% of cuBLAS on the H100
# (`cargo xtask gpu-bundle --out .devrun_sn --tests none --patch
# scripts/h200/patches/sn_small_m_default.patch`). The f64 reference test of a winning cv or sn
# runs main's `swsn_` / `swcn_` / `swtb_` / `sw_` cases from the base bundle (the patches change
# only which config is the default), so since session 35 the cv bundle needs no tests either
# (`--tests none`; the one built with `--tests wgmma_gpu` carries a test binary nothing runs).
# Session 35's command: `ARMS="cv sn" ROUNDS=2 FULL=0 BASE=$PWD/.devrun_dm BCV=$PWD/.devrun_cv
# BSN=$PWD/.devrun_sn bash scripts/h200/h200_only.sh scripts/h200/callDC.sh` (about 6 minutes). A winning sn is adopted with `git apply
# scripts/h200/patches/adopt_sn_small_m.patch` (session 36), a winning cv with
# `adopt_cn_small_m.patch`.
# Run: BASE=$PWD/.devrun BSW=$PWD/.devrun_sw BCN=$PWD/.devrun_cn [BCV=$PWD/.devrun_cv] bash
#   scripts/h200/h200_only.sh scripts/h200/callDC.sh (carry the bundles, `rtx-tune` removed from all
#   but the base to stay under the 64 MiB carry limit; about 7 minutes on an
#   H200 with three arms, 8 with four; timeout_s 590). ARMS="cn cv" FULL=0 NO_SLICES=1 for a short budget.
set -u; B=$BASE; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDC.tgz . ; }
bundle() { case $1 in base) echo $BASE ;; sw) echo $BSW ;; cn) echo $BCN ;; cv) echo $BCV ;; sn) echo $BSN ;; esac; }
# ARMS (default "sw cn", "sw cn cv" with BCV) picks the arms run against base.
DEF="sw cn"; [ -n "${BCV:-}" ] && DEF="sw cn cv"; ARMS=${ARMS:-$DEF}
{ echo "base $(cat $BASE/BUILD)"; for a in $ARMS; do echo "$a $(cat $(bundle $a)/BUILD)"; done; } >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  B=$(bundle $1)
  suite_arm $1 bf16,f16 128x8192x8192,160x8192x8192,96x11008x4096,160x8192x2048
}
rotated_rounds ${ROUNDS:-2} base $ARMS
date -u +"abc end %T" >> $R/smi.txt
win=$(python3 "$(dirname "$0")/pick_arm.py" $R base $ARMS)
echo "picked: ${win:-none}"; cat $R/pick.txt
if [ "$win" = cv ] || [ "$win" = sn ]; then
  B=$BASE wgmma_f64_test 60 $SWAP_CASES test_sw_$win.log
  pack
fi
# FULL=0 skips the whole-suite run after a win, NO_SLICES=1 the slices after none (short budgets).
if [ -n "$win" ] && [ "${FULL:-1}" = 0 ]; then
  echo "full suite skipped (FULL=0)"
elif [ -n "$win" ]; then
  B=$(bundle $win)
  timeout 120 python3 $BASE/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
  timeout 200 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
    --gemm-shapes $ISSUE4_SHAPES > $R/bench_$win.log 2>&1; echo "bench $win rc=$?"
  grep -E "^\| rtx-(wgmma|simt)-default " $R/bench_$win.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
  pack
elif [ -z "${NO_SLICES:-}" ]; then
  DA_INNER=1 NO_CASES=1 bash "$(dirname "$0")/callDB_tests.sh"
fi
finish
