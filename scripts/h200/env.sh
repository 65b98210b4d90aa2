B=${B:-$PWD/.gpu-bundle}
# Run from the repository root on the GPU machine, with the bundle of `cargo xtask gpu-bundle` at ./.gpu-bundle.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} RTX_CUDA_INCLUDE=/usr/local/cuda/include RTX_CACHE_DIR=$B/cache RTX_REQUIRE_NVRTC=1 RTX_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt
# Issue 4's GEMM shapes (the bars: 512^3-8192^3 and its odd shapes).
ISSUE4_SHAPES=512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000
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
