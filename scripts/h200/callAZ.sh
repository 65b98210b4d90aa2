#!/usr/bin/env bash
# Device call AZ (session 12), after call AY found the 64x128 kernel bound by L2 slice reads
# (lrc__lts2lrc sectors: cluster 1 3.15M, cluster 2 4.01M, nvjet 2.63M at 1024x1024x4096 bf16).
# Two hypotheses, with an experiment build in $B/exp (kernels as 858a3b6 plus env switches that
# exist only in that build, patch in docs/runs/2026-12-05/callAZ/exp.patch):
#  - RTX_EXP_NOMC=1: cluster_m=2 (and 4, added to the space) without B multicast (each CTA loads its whole B tile; the
#    cluster only places the two CTAs that read the same B side by side, for the L2 request
#    coalescer to merge their reads);
#  - RTX_EXP_L2P=128|none: the TMA maps' L2 promotion (256 B in the adopted build).
# (1) Nsight Compute L2/LRC sector counts per variant at 1024x1024x4096; (2) the 64x128
# one-consumer 8-stage slice (cluster 1/2, raster 1/8) at 1024x1024x4096 and 1024^3 per variant,
# two alternating rounds. Every candidate is still checked against cuBLAS by the tuner.
# Run: B=$PWD/.devrun bash scripts/h200/callAZ.sh (about 3 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAZ.tgz . ; }
T=$B/rtx-tune; X=$B/exp/rtx-tune
cat $B/BUILD $B/exp/BUILD > $R/build.txt 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,lrc__lts2lrc_sectors_op_read.sum,lrc__xbar2gpc_sectors_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum
prof() { # name binary cluster env...
  local name=$1 bin=$2 cl=$3; shift 3
  local w="{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"raster_group\":1,\"cluster_m\":$cl}"
  env "$@" timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma.*_cl${cl}_" --launch-skip 4 --launch-count 1 --metrics $M \
    $bin gemm 1024x1024x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ncu_$name.log 2>&1
  echo "ncu $name rc=$?"; grep -E "^ +(gpu__|lrc__|lts__|dram__)" $R/ncu_$name.log | sed 's/  */ /g'
  pack
}
prof base_cl1 $T 1
prof nomc_cl2 $X 2 RTX_EXP_NOMC=1
prof nomc_cl4 $X 4 RTX_EXP_NOMC=1
prof l2p128_cl1 $X 1 RTX_EXP_L2P=128
prof l2pnone_cl1 $X 1 RTX_EXP_L2P=none
w='{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"wgmma_n":128}'
for s in 1024x1024x4096 1024x1024x1024; do
  for round in 1 2; do
    for v in "base $T" "nomc $X RTX_EXP_NOMC=1" "l2p128 $X RTX_EXP_L2P=128" "l2pnone $X RTX_EXP_L2P=none"; do
      set -- $v; name=$1; bin=$2; shift 2
      echo "== $s round $round $name" >> $R/slices.log
      env "$@" timeout 60 $bin gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store >> $R/slices.log 2>&1
      echo "rc=$?" >> $R/slices.log
    done
    pack
  done
done
grep -E "^==|#[1-5] |cuBLAS:|rc=[^0]|failed" $R/slices.log | sed -E 's/\{"bk":64,"bm":64,"bn":128,"cluster_k":1,//; s/"consumers":1,"persistent":true,"pingpong":false,//; s/,"split_k":1,"split_n":false,"stages":8,"tma_store":true,"wgmma_n":128\}//' | cut -c1-150
