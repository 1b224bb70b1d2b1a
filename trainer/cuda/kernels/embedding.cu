// Embedding: out (N,C) = tok_emb[tokens] * scale + pos[t], one thread per
// element, and the two kernels of its backward.
// Gradients:
//   LaunchPositionGrad  dpos (T,C) =  (the sum over b of dout)
//   LaunchOneHot        onehot (N,V) =  ; the backend's GEMM onehot^T @ dout
//                       (beta 0) then writes dtok_emb (V,C) =
#include "trainer/cuda/kernels.cuh"

#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

__global__ void EncoderForwardKernel(float* out, const int32_t* tokens, const float* tok_emb, const float* pos,
                                     int N, int T, int C, float scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * C) return;
  const int n = static_cast<int>(i / C), c = static_cast<int>(i % C);
  const int t = n % T;
  out[i] = tok_emb[static_cast<size_t>(tokens[n]) * C + c] * scale + pos[static_cast<size_t>(t) * C + c];
}

__global__ void OneHotKernel(float* onehot, const int32_t* tokens, int N, int V, float scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * V) return;
  const int n = static_cast<int>(i / V), v = static_cast<int>(i % V);
  onehot[i] = tokens[n] == v ? scale : 0.0f;
}

__global__ void PositionGradKernel(float* dpos, const float* dout, int B, int T, int C) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(T) * C) return;
  const size_t stride = static_cast<size_t>(T) * C;
  float s = 0.0f;
  for (int b = 0; b < B; ++b) s += dout[b * stride + i];
  dpos[i] = s;
}

}  // namespace

void LaunchEncoderForward(float* out, const int32_t* tokens, const float* tok_emb, const float* pos, int N,
                          int T, int C, float scale, cudaStream_t s) {
  EncoderForwardKernel<<<Blocks(static_cast<size_t>(N) * C), kThreads, 0, s>>>(out, tokens, tok_emb, pos, N, T,
                                                                                C, scale);
}
void LaunchOneHot(float* onehot, const int32_t* tokens, int N, int V, float scale, cudaStream_t s) {
  OneHotKernel<<<Blocks(static_cast<size_t>(N) * V), kThreads, 0, s>>>(onehot, tokens, N, V, scale);
}
void LaunchPositionGrad(float* dpos, const float* dout, int B, int T, int C, cudaStream_t s) {
  PositionGradKernel<<<Blocks(static_cast<size_t>(T) * C), kThreads, 0, s>>>(dpos, dout, B, T, C);
}

}  // namespace normsweep::trainer::cuda
