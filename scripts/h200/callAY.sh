#!/usr/bin/env bash
# Device call AY (session 11), after call AW: where the two-CTA cluster's extra L2 traffic and
# time come from on the 64x128 one-consumer 8-stage tile at 1024x1024x4096 bf16 NN, with the
# build in $B/BUILD (kernels as 858a3b6). (1) Nsight Compute with the memory tables and raw L2 / SM counters for cluster 1,
# cluster 2 and cuBLAS's nvjet (1x2 cluster); (2) exhaustive slices at 1024x1024x4096 and
# 1024^3 of the arrangements cuBLAS uses there (two consumers of 64x64, as 64x128 split_n or
# 128x64) beside the 64x128 one-consumer 8-stage control, as long as time is left.
# Run: B=$PWD/.devrun bash scripts/h200/callAY.sh (about 4 minutes; timeout_s 280).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAY.tgz . ; }
T=$B/rtx-tune
cat $B/BUILD > $R/build.txt 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
M=lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum,dram__bytes_read.sum,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__ctas_launched.sum
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis_Chart"
for cl in 1 2; do
  w="{\"bm\":64,\"bn\":128,\"consumers\":1,\"stages\":8,\"tma_store\":true,\"wgmma_n\":128,\"raster_group\":1,\"cluster_m\":$cl}"
  timeout 60 $NCU --clock-control none -k "regex:^rtx_wgmma.*_cl${cl}_" --launch-skip 4 --launch-count 1 $S --metrics $M --print-details all \
    $T gemm 1024x1024x4096 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/mem_cl$cl.log 2>&1
  echo "ncu cl$cl rc=$?"; grep -E "^ +(lts__|dram__|sm__|smsp__|l1tex__)|Duration" $R/mem_cl$cl.log | sed 's/  */ /g' | head -16
  pack
done
timeout 60 $NCU --clock-control none -k "regex:^nvjet" --launch-skip 4 --launch-count 1 $S --metrics $M --print-details all \
  $B/rtx-bench --out $R/b_nv --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes 1024x1024x4096 > $R/mem_nvjet.log 2>&1
echo "ncu nvjet rc=$?"; grep -E "^ +(lts__|dram__|sm__|smsp__|l1tex__)|Duration" $R/mem_nvjet.log | sed 's/  */ /g' | head -16
rm -rf $R/b_nv; pack
for s in 1024x1024x4096 1024x1024x1024; do
  for w in '{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true}' \
           '{"bm":64,"bn":128,"consumers":2,"split_n":true,"tma_store":true}' '{"bm":128,"bn":64,"tma_store":true}'; do
    echo "== $s $w" >> $R/slices.log
    timeout 60 $T gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
    pack
  done
done
grep -E "^==|searched|#[1-4] |cuBLAS:|rc=" $R/slices.log | cut -c1-230
