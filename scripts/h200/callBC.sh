#!/usr/bin/env bash
# Device call BC (session 13): does multicasting A (a pair along N) keep the L2 request
# coalescing that our B multicast loses? Call AY (H200, 1024x1024x4096 bf16 NN, 64x128 tile,
# 8 stages): cluster 1 3.15 M L2 slice reads, our B-multicast cluster 2 4.01 M (20.10 us),
# cuBLAS's nvjet 2.63 M (14.85 us). With B multicast the slice reads (128 MB) equal what the TMA
# issues (134 MB): no coalescing. Experiment build: docs/runs/2026-12-05/callBC/exp.patch,
# switch RTX_EXP_CLN=1 (a cluster_m = 2 config with a K-major A runs its pair along N and
# multicasts A; rank r loads rows [r BM/2, (r+1) BM/2) of A).
# (1) correctness: the wgmma GPU cases with the switch on (every cluster case becomes A multicast);
# (2) Nsight Compute at 1024x1024x4096: base cl1, base cl2 (B multicast), exp cl2 + CLN;
# (2b) nvjet's SASS through Nsight's source page (TMA and barrier lines only);
# (3) in-process slices (rtx-tune exhaustive, cuBLAS in the same process) at 1024x1024x4096 and
#     1024^3 of the three.
# Build:  cargo xtask gpu-bundle --out .devrun --tests none
#         cargo xtask gpu-bundle --out .devrun/exp --tests wgmma_gpu --patch docs/runs/2026-12-05/callBC/exp.patch --at 2e2ccef
# Run: B=$PWD/.devrun bash scripts/h200/callBC.sh (about 5 minutes; timeout_s 420).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBC.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
T=$(ls $B/exp/tests/*wgmma_gpu* | head -1)
RTX_EXP_CLN=1 timeout 240 $T wgmma_gemm_matches_the_f64_reference --test-threads 1 --nocapture > $R/gpu_cln.log 2>&1
echo "gpu cases with CLN rc=$?"; grep -E "test result|FAILED|panicked|failed" $R/gpu_cln.log | head -8
pack
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
K=gpu__time_duration.sum,lrc__lts2lrc_sectors_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lrc__xbar2gpc_sectors_op_read.sum,sm__cycles_active.avg
w() { echo "{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"raster_group\":$2,\"cluster_m\":$1}"; }
for v in base_cl1 base_cl2 cln_cl2; do
  case $v in base_cl1) X=$B/rtx-tune; E=; C=1 ;; base_cl2) X=$B/rtx-tune; E=; C=2 ;; cln_cl2) X=$B/exp/rtx-tune; E=RTX_EXP_CLN=1; C=2 ;; esac
  env $E timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma.*_cl${C}_" --launch-skip 4 --launch-count 3 --metrics $K \
    $X gemm 1024x1024x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$(w $C 1)" --no-store > $R/ncu_$v.log 2>&1
  echo "ncu $v rc=$?"; grep -E "gpu__time|lts2lrc|requests" $R/ncu_$v.log | sed 's/  */ /g' | head -9
  pack
done
# nvjet's SASS (Nsight's source page): does it multicast (UTMALDG ... MULTICAST), and how many
# TMA loads per k-block? Only the TMA / barrier lines are kept.
timeout 90 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 4 --launch-count 1 --section SourceCounters \
  --page source --print-source sass $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 \
  --gemm-shapes 1024x1024x4096 > $R/nvjet_sass_full.log 2>&1
echo "nvjet sass rc=$?"; grep -E "UTMA|UBLKCP|SYNCS|MULTICAST|UCGABAR|ELECT" $R/nvjet_sass_full.log | sed 's/  */ /g' | cut -c1-160 > $R/nvjet_sass_tma.log
wc -l < $R/nvjet_sass_tma.log; grep -c MULTICAST $R/nvjet_sass_tma.log; head -n 30 $R/nvjet_sass_tma.log
rm -rf $R/b_nv; pack
for s in 1024x1024x4096 1024x1024x1024; do
  for v in base_cl1 base_cl2 cln_cl2 base_cl1; do
    case $v in base_cl1) X=$B/rtx-tune; E=; C=1 ;; base_cl2) X=$B/rtx-tune; E=; C=2 ;; cln_cl2) X=$B/exp/rtx-tune; E=RTX_EXP_CLN=1; C=2 ;; esac
    w8="{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"cluster_m\":$C}"
    echo "== $s $v" >> $R/slices.log
    env $E timeout 60 $X gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w8" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
    pack
  done
done
grep -E "^==|#1 |cuBLAS:|rc=" $R/slices.log | cut -c1-200
date -u +"end %T" >> $R/smi.txt
pack
