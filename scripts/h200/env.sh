B=${B:-$PWD/.gpu-bundle}
# Run from the repository root on the GPU machine, with the bundle of `cargo xtask gpu-bundle` at ./.gpu-bundle.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} RTX_CUDA_INCLUDE=/usr/local/cuda/include RTX_CACHE_DIR=$B/cache RTX_REQUIRE_NVRTC=1 RTX_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt
