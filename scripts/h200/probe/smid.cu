// Where the blocks of a one-block-per-SM grid land (call BS). Prints, per launch, the %smid of
// every block: "plain G r: s0 s1 ..." for a plain grid of G blocks, and "clC r: ..." for clusters
// of C (a cluster's CTAs share one GPC, so the union of those sets gives the GPCs).
#include <cstdio>
#include <cuda_runtime.h>
__global__ void who(int* out) {
  extern __shared__ char sm[];
  if (threadIdx.x == 0) {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    out[blockIdx.x] = (int)s;
    sm[0] = 1;
  }
}
static void dump(const char* tag, int r, int* d, int n) {
  int h[256];
  cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
  printf("%s %d:", tag, r);
  for (int i = 0; i < n; ++i) printf(" %d", h[i]);
  printf("\n");
}
int main() {
  int* d;
  cudaMalloc(&d, 256 * sizeof(int));
  const int smem = 200 * 1024;
  cudaFuncSetAttribute(who, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int g : {128, 132}) {
    for (int r = 0; r < 4; ++r) {
      who<<<g, 384, smem>>>(d);
      cudaDeviceSynchronize();
      char tag[32];
      snprintf(tag, sizeof tag, "plain%d", g);
      dump(tag, r, d, g);
    }
  }
  cudaFuncSetAttribute(who, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  struct { int cl, grid, reps; } runs[] = {{16, 128, 3}, {8, 128, 3}, {2, 132, 3}, {4, 128, 3}};
  for (auto run : runs) {
    for (int r = 0; r < run.reps; ++r) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(run.grid);
      cfg.blockDim = dim3(384);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = run.cl;
      at[0].val.clusterDim.y = 1;
      at[0].val.clusterDim.z = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      cudaError_t e = cudaLaunchKernelEx(&cfg, who, d);
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      char tag[32];
      snprintf(tag, sizeof tag, "cl%d", run.cl);
      if (e != cudaSuccess) { printf("%s launch: %s\n", tag, cudaGetErrorString(e)); cudaGetLastError(); break; }
      dump(tag, r, d, run.grid);
    }
  }
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
