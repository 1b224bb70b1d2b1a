// Softmax cross-entropy over logits (N,V): the forward one warp per row,
// the backward one thread per element, the loss scale read from device
// memory (a captured graph replays with the batch's own).
// Gradients:
//   LaunchCrossEntropyBackward       dlogits (N,V) =  (0 for ignored rows)
//   LaunchCrossEntropyZLossBackward  dlogits (N,V) =  (0 for ignored rows)
#include "trainer/cuda/kernels.cuh"

#include <cfloat>

#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

// ---- softmax cross-entropy (one warp per row) ----

__global__ void CrossEntropyForwardKernel(float* probs, float* row_loss, float* row_log_z, int32_t* row_correct,
                                          const float* logits, const int32_t* targets, int N, int V) {
  const int n = WarpRow();
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float* z = logits + static_cast<size_t>(n) * V;
  float* p = probs + static_cast<size_t>(n) * V;
  // Max and its first index.
  float m = -FLT_MAX;
  int arg = V;
  for (int j = lane; j < V; j += kWarp) {
    if (z[j] > m) {
      m = z[j];
      arg = j;
    }
  }
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (om > m || (om == m && oa < arg)) {
      m = om;
      arg = oa;
    }
  }
  float sum = 0.0f;
  for (int j = lane; j < V; j += kWarp) {
    const float e = expf(z[j] - m);
    p[j] = e;
    sum += e;
  }
  sum = WarpSum(sum);
  const float inv = 1.0f / sum;
  for (int j = lane; j < V; j += kWarp) p[j] *= inv;
  if (lane == 0) {
    const int32_t target = targets[n];
    const float log_z = logf(sum) + m;
    row_log_z[n] = target >= 0 ? log_z : 0.0f;
    row_loss[n] = target >= 0 ? log_z - z[target] : 0.0f;
    row_correct[n] = target >= 0 && arg == target;
  }
}

__global__ void CrossEntropyBackwardKernel(float* dlogits, const float* probs, const int32_t* targets, int N,
                                           int V, const float* scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * V) return;
  const int n = static_cast<int>(i / V), j = static_cast<int>(i % V);
  const int32_t target = targets[n];
  dlogits[i] = target < 0 ? 0.0f : (probs[i] - (j == target ? 1.0f : 0.0f)) * *scale;
}

// d/dlogit_j of CE + z_loss * (log Z)^2 = p_j - onehot_j + 2 z_loss log Z p_j.
__global__ void CrossEntropyZLossBackwardKernel(float* dlogits, const float* probs, const float* row_log_z,
                                                const int32_t* targets, int N, int V, const float* scale,
                                                float z_loss) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * V) return;
  const int n = static_cast<int>(i / V), j = static_cast<int>(i % V);
  const int32_t target = targets[n];
  if (target < 0) {
    dlogits[i] = 0.0f;
    return;
  }
  const float sc = *scale;
  const float g = (1.0f + 2.0f * z_loss * row_log_z[n]) * sc;
  dlogits[i] = probs[i] * g - (j == target ? sc : 0.0f);
}

}  // namespace

void LaunchCrossEntropyForward(float* probs, float* row_loss, float* row_log_z, int32_t* row_correct,
                               const float* logits, const int32_t* targets, int N, int V, cudaStream_t s) {
  CrossEntropyForwardKernel<<<Blocks(N, kWarpsPerBlock), kThreads, 0, s>>>(probs, row_loss, row_log_z, row_correct,
                                                                           logits, targets, N, V);
}
void LaunchCrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                                const float* scale, cudaStream_t s) {
  CrossEntropyBackwardKernel<<<Blocks(static_cast<size_t>(N) * V), kThreads, 0, s>>>(dlogits, probs, targets, N,
                                                                                     V, scale);
}

void LaunchCrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z,
                                     const int32_t* targets, int N, int V, const float* scale, float z_loss,
                                     cudaStream_t s) {
  CrossEntropyZLossBackwardKernel<<<Blocks(static_cast<size_t>(N) * V), kThreads, 0, s>>>(
      dlogits, probs, row_log_z, targets, N, V, scale, z_loss);
}

}  // namespace normsweep::trainer::cuda
