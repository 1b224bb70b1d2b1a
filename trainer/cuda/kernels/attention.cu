// Attention's non-GEMM half (its products q k^T, p v and their gradients
// are cuBLAS batched GEMMs in cuda_forward_backward.cu): the head layouts,
// qkv (B,T,3,H,hd) <-> q, k, v (B,H,T,hd) and y (B,H,T,hd) <-> out
// (B,T,H*hd), one thread per element, and the causal softmax, one warp per
// row of T.
// Gradients:
//   LaunchCausalSoftmaxBackward  datt (BH*T,T) = d(scores), in place
//   LaunchSplitOutputHeads       y = dout in the heads' layout (dy)
//   LaunchMergeQkvHeads          qkv = dq, dk, dv merged (dqkv)
#include "trainer/cuda/kernels.cuh"

#include <cfloat>

#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

// ---- attention layout ----
// One thread per element of (B,T,3,H,hd); `to_heads` picks the direction.

__global__ void QkvHeadsKernel(float* q, float* k, float* v, float* qkv, int B, int T, int H, int hd,
                               bool to_heads) {
  const int C = H * hd;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * T * 3 * C) return;
  const int n = static_cast<int>(i / (3 * C));
  const int rem = static_cast<int>(i % (3 * C));
  const int which = rem / C, h = (rem % C) / hd, d = rem % hd;
  const int b = n / T, t = n % T;
  float* dst = which == 0 ? q : which == 1 ? k : v;
  const size_t j = ((static_cast<size_t>(b) * H + h) * T + t) * hd + d;
  if (to_heads) {
    dst[j] = qkv[i];
  } else {
    qkv[i] = dst[j];
  }
}

__global__ void OutputHeadsKernel(float* out, float* y, int B, int T, int H, int hd, bool merge) {
  const int C = H * hd;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * T * C) return;
  const int n = static_cast<int>(i / C), h = static_cast<int>(i % C) / hd, d = static_cast<int>(i % hd);
  const int b = n / T, t = n % T;
  const size_t j = ((static_cast<size_t>(b) * H + h) * T + t) * hd + d;
  if (merge) {
    out[i] = y[j];
  } else {
    y[j] = out[i];
  }
}

// ---- causal softmax (one warp per row of T) ----

__global__ void CausalSoftmaxKernel(float* att, float* row_max, int rows, int T, float scale) {
  const int r = WarpRow();
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const int i = r % T;  // query position: keys 0..i are visible
  float* a = att + static_cast<size_t>(r) * T;
  float m = -FLT_MAX;
  for (int j = lane; j <= i; j += kWarp) m = fmaxf(m, a[j] * scale);
  m = WarpMax(m);
  if (row_max != nullptr && lane == 0) row_max[r] = m;
  float sum = 0.0f;
  for (int j = lane; j <= i; j += kWarp) {
    const float e = expf(a[j] * scale - m);
    a[j] = e;
    sum += e;
  }
  const float inv = 1.0f / WarpSum(sum);
  for (int j = lane; j < T; j += kWarp) a[j] = j <= i ? a[j] * inv : 0.0f;
}

__global__ void CausalSoftmaxBackwardKernel(float* datt, const float* att, int rows, int T, float scale) {
  const int r = WarpRow();
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const int i = r % T;
  float* d = datt + static_cast<size_t>(r) * T;
  const float* p = att + static_cast<size_t>(r) * T;
  float s = 0.0f;
  for (int j = lane; j <= i; j += kWarp) s += p[j] * d[j];
  s = WarpSum(s);
  for (int j = lane; j < T; j += kWarp) d[j] = j <= i ? scale * p[j] * (d[j] - s) : 0.0f;
}

}  // namespace

void LaunchSplitHeads(float* q, float* k, float* v, const float* qkv, int B, int T, int H, int hd,
                      cudaStream_t s) {
  QkvHeadsKernel<<<Blocks(static_cast<size_t>(B) * T * 3 * H * hd), kThreads, 0, s>>>(
      q, k, v, const_cast<float*>(qkv), B, T, H, hd, true);
}
void LaunchMergeQkvHeads(float* qkv, const float* q, const float* k, const float* v, int B, int T, int H,
                         int hd, cudaStream_t s) {
  QkvHeadsKernel<<<Blocks(static_cast<size_t>(B) * T * 3 * H * hd), kThreads, 0, s>>>(
      const_cast<float*>(q), const_cast<float*>(k), const_cast<float*>(v), qkv, B, T, H, hd, false);
}
void LaunchMergeHeads(float* out, const float* y, int B, int T, int H, int hd, cudaStream_t s) {
  OutputHeadsKernel<<<Blocks(static_cast<size_t>(B) * T * H * hd), kThreads, 0, s>>>(
      out, const_cast<float*>(y), B, T, H, hd, true);
}
void LaunchSplitOutputHeads(float* y, const float* out, int B, int T, int H, int hd, cudaStream_t s) {
  OutputHeadsKernel<<<Blocks(static_cast<size_t>(B) * T * H * hd), kThreads, 0, s>>>(
      const_cast<float*>(out), y, B, T, H, hd, false);
}

void LaunchCausalSoftmax(float* att, float* row_max, int BH, int T, float scale, cudaStream_t s) {
  CausalSoftmaxKernel<<<Blocks(static_cast<size_t>(BH) * T, kWarpsPerBlock), kThreads, 0, s>>>(att, row_max, BH * T,
                                                                                                T, scale);
}
void LaunchCausalSoftmaxBackward(float* datt, const float* att, int BH, int T, float scale, cudaStream_t s) {
  CausalSoftmaxBackwardKernel<<<Blocks(static_cast<size_t>(BH) * T, kWarpsPerBlock), kThreads, 0, s>>>(
      datt, att, BH * T, T, scale);
}

}  // namespace normsweep::trainer::cuda
