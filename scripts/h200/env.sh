B=${B:-$PWD/.gpu-bundle}
# Run from the repository root on the GPU machine, with the bundle of `cargo xtask gpu-bundle` at ./.gpu-bundle.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} RTX_CUDA_INCLUDE=/usr/local/cuda/include RTX_CACHE_DIR=$B/cache RTX_REQUIRE_NVRTC=1 RTX_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt
# Issue 4's GEMM shapes (the bars: 512^3-8192^3 and its odd shapes; M = 128 and 192 since session 20, 160 since 21).
ISSUE4_SHAPES=512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,128x8192x8192,160x8192x8192,192x8192x8192,256x8192x8192,4096x4096x1000
# One line per rtx-bench log: each cuBLAS and rtx default row's case, median and ratio.
row() { grep -E '^\| (rtx-wgmma-default|cublas) ' $1 | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/rtx-wgmma-default //g; s/  */ /g'; }
# N rounds of the GEMM suite at 512^3 and 1024^3, bf16 and f16 (issue 4's unmet bar), cuBLAS
# alternating in the same process: logs $R/s_<i>.log, prints row() and calls the script's pack()
# after each round.
small_rounds() {
  for i in $(seq 1 $1); do
    timeout 30 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_$i.log 2>&1
    echo "small_$i rc=$? $(row $R/s_$i.log)"
    pack
  done
  rm -rf $R/b
}
# arm_bench ARM BUNDLE SHAPES COLS [VAR=VALUE...]: one A/B process for round $i: the bundle's
# rtx-bench GEMM suite (bf16, f16) at SHAPES with the given codegen switches in its environment,
# logged to $R/s_<ARM>_<i>.log; prints the round's row() cut to COLS characters. Calls BS-BX.
arm_bench() {
  local name=$1 d=$2 shapes=$3 cols=$4; shift 4
  env "$@" timeout 40 $d/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $shapes > $R/s_${name}_$i.log 2>&1
  echo "${name}_$i rc=$? $(row $R/s_${name}_$i.log | cut -c1-$cols)"
}
# One line per rtx-bench log: each rtx mma / wgmma default row's case, median and ratio.
mrow() { grep -E '^\| rtx-(mma|wgmma)-default ' $1 | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/-default//g; s/  */ /g'; }
# suite_arm ARM DTYPES SHAPES: one A/B process for round $i: the GEMM suite for DTYPES at SHAPES
# from $BASE's bundle (arm "base") or $B's (any other arm), 150 s in round 1 (compiles) and 60 s
# after, logged to $R/s_<ARM>_<i>.log; prints the round's mrow(). Calls CK, CM.
suite_arm() {
  local d=$B; [ $1 = base ] && d=$BASE
  local t=60; [ $i = 1 ] && t=150
  timeout $t $d/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes $2 --gemm-shapes $3 > $R/s_$1_$i.log 2>&1
  echo "$1_$i rc=$? $(mrow $R/s_$1_$i.log | cut -c1-400)"
}
# suite_rounds N DTYPES SHAPES: N rounds of the GEMM suite for DTYPES at SHAPES from $B's bundle,
# one process each (180 s in round 1 for its compiles, 60 s after), logged to $R/s_<i>.log; prints
# each round's mrow() and calls the script's pack(). Calls CP and CR.
suite_rounds() {
  for i in $(seq 1 $1); do
    local t=60; [ $i = 1 ] && t=180
    timeout $t $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes $2 --gemm-shapes $3 > $R/s_$i.log 2>&1
    echo "round $i rc=$? $(mrow $R/s_$i.log | cut -c1-900)"
    pack
  done
  rm -rf $R/b
}
# rotated_rounds N ARM...: N rounds of A/B arms in separate processes. Each round calls the
# script's arm() once per ARM (with the round in $i), the order rotated by one every round, then
# pack(). Used by calls BS-BV.
rotated_rounds() {
  local n=$1; shift
  local arms=("$@") k=$#
  for i in $(seq 1 $n); do
    for j in $(seq 0 $((k - 1))); do arm ${arms[$(( (i + j) % k ))]}; done
    pack
  done
  rm -rf $R/b
}
# finish: the end time and the card's state after the work into smi.txt, then pack().
finish() {
  date -u +"end %T" >> $R/smi.txt
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv >> $R/smi.txt
  pack
}
# wgmma_f64_test SECONDS [CASES [LOG]]: $B's wgmma_gemm_matches_the_f64_reference (the wgmma
# cases whose names contain one of the comma-separated CASES, default every case, against the f64
# reference) into $R/LOG (default test_wgmma_gpu.log), with its summary and failing cases.
wgmma_f64_test() {
  local t=$(ls $B/tests/*wgmma_gpu* | head -1) log=$R/${3:-test_wgmma_gpu.log}
  RTX_WGMMA_CASE=${2:-} timeout $1 $t --test-threads 1 --nocapture wgmma_gemm_matches_the_f64_reference > $log 2>&1
  echo "wgmma_gpu ${2:-all} rc=$?"; grep -E "test result|FAILED|^FAIL|panicked|compiled" $log | cut -c1-160 | head -8
}
# Every swap_ab case (the transposed product) of wgmma_gpu: wgmma_f64_test's CASES.
SWAP_CASES=swtb_,swcn_,swsn_,sw_
