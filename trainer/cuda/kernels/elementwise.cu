// Elementwise ops, one thread per element: ReLU, sums, products and
// scalings, the bias broadcast, and the dropout mask (one thread per block
// of kDropoutMaskBlock elements, as on the CPU).
// Gradients:
//   LaunchReluBackward  dx = dx where act > 0, else 0, in place (the backend
//                       copies dy into dx first)
// The others overwrite out (or x in place), except LaunchAddBias: out +=.
#include "trainer/cuda/kernels.cuh"

#include "trainer/cuda/kernels/common.cuh"
#include "trainer/rng.h"

namespace normsweep::trainer::cuda {
namespace {

// out (N,O) += bias (O), broadcast over rows.
__global__ void AddBiasKernel(float* out, const float* bias, int N, int O) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < static_cast<size_t>(N) * O) out[i] += bias[i % O];
}

__global__ void ReluKernel(float* x, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaxf(x[i], 0.0f);
}
__global__ void ReluBackwardKernel(float* dx, const float* act, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && !(act[i] > 0.0f)) dx[i] = 0.0f;
}
__global__ void AddKernel(float* out, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
__global__ void MultiplyKernel(float* out, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i];
}

__global__ void ScaledAddKernel(float* out, float alpha, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * a[i] + b[i];
}
__global__ void ScaledSumKernel(float* out, float alpha, const float* a, float beta, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * a[i] + beta * b[i];
}
__global__ void ScaleKernel(float* x, float alpha, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= alpha;
}

__global__ void DropoutMaskKernel(float* mask, size_t n, float p, const uint64_t* base_seed, uint64_t stream) {
  const size_t bi = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t begin = bi * kDropoutMaskBlock;
  if (begin >= n) return;
  const float keep_scale = 1.0f / (1.0f - p);
  const uint64_t seed = MixSeed(*base_seed, stream);
  Rng rng(MixSeed(seed, kDropoutMaskStream, bi));
  const size_t end = min(n, begin + kDropoutMaskBlock);
  for (size_t i = begin; i < end; ++i) mask[i] = rng.Uniform() < p ? 0.0f : keep_scale;
}

}  // namespace

void LaunchAddBias(float* out, const float* bias, int N, int O, cudaStream_t s) {
  AddBiasKernel<<<Blocks(static_cast<size_t>(N) * O), kThreads, 0, s>>>(out, bias, N, O);
}

void LaunchRelu(float* x, size_t n, cudaStream_t s) { ReluKernel<<<Blocks(n), kThreads, 0, s>>>(x, n); }
void LaunchReluBackward(float* dx, const float* act, size_t n, cudaStream_t s) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(dx, act, n);
}
void LaunchAdd(float* out, const float* a, const float* b, size_t n, cudaStream_t s) {
  AddKernel<<<Blocks(n), kThreads, 0, s>>>(out, a, b, n);
}
void LaunchMultiply(float* out, const float* a, const float* b, size_t n, cudaStream_t s) {
  MultiplyKernel<<<Blocks(n), kThreads, 0, s>>>(out, a, b, n);
}
void LaunchScaledAdd(float* out, float alpha, const float* a, const float* b, size_t n, cudaStream_t s) {
  ScaledAddKernel<<<Blocks(n), kThreads, 0, s>>>(out, alpha, a, b, n);
}
void LaunchScaledSum(float* out, float alpha, const float* a, float beta, const float* b, size_t n,
                     cudaStream_t s) {
  ScaledSumKernel<<<Blocks(n), kThreads, 0, s>>>(out, alpha, a, beta, b, n);
}
void LaunchScale(float* x, float alpha, size_t n, cudaStream_t s) {
  ScaleKernel<<<Blocks(n), kThreads, 0, s>>>(x, alpha, n);
}
void LaunchDropoutMask(float* mask, size_t n, float p, const uint64_t* base_seed, uint64_t stream,
                       cudaStream_t s) {
  const size_t blocks = (n + kDropoutMaskBlock - 1) / kDropoutMaskBlock;
  DropoutMaskKernel<<<Blocks(blocks, 64), 64, 0, s>>>(mask, n, p, base_seed, stream);
}

}  // namespace normsweep::trainer::cuda
