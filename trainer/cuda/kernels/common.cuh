// Private to trainer/cuda/kernels/*.cu: the launch shape and the warp
// reductions every op family uses. nvcc compiles each .cu whole (no
// relocatable device code), so a helper used by several files is inline
// here, and in an unnamed namespace, as it was in the single kernels.cu:
// each file keeps its own internal copy.
#ifndef NORMSWEEP_TRAINER_CUDA_KERNELS_COMMON_CUH_
#define NORMSWEEP_TRAINER_CUDA_KERNELS_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstddef>

namespace normsweep::trainer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;

inline unsigned Blocks(size_t n, int per_block = kThreads) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

__device__ inline float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Row index of this warp when each warp owns one row.
__device__ inline int WarpRow() { return blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp; }

}  // namespace
}  // namespace normsweep::trainer::cuda

#endif  // NORMSWEEP_TRAINER_CUDA_KERNELS_COMMON_CUH_
