// LayerNorm and RMSNorm over rows of C (N rows), one warp per row; the
// weight (and bias) gradients are column reductions (column_reduce.cuh).
// Gradients:
//   LaunchLayerNormInputGrad  dinp (N,C) +=
//   LaunchLayerNormParamGrad  dw (C) = , db (C) =
//   LaunchRmsNormInputGrad    dinp (N,C) +=
//   LaunchRmsNormParamGrad    dw (C) =
#include "trainer/cuda/kernels.cuh"

#include "trainer/cuda/kernels/column_reduce.cuh"
#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

// ---- LayerNorm ----

__global__ void LayerNormForwardKernel(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                       const float* b, int N, int C, float eps) {
  const int n = WarpRow();
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float* x = inp + static_cast<size_t>(n) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += kWarp) s += x[c];
  const float m = WarpSum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = x[c] - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(WarpSum(v) / C + eps);
  float* o = out + static_cast<size_t>(n) * C;
  for (int c = lane; c < C; c += kWarp) o[c] = (x[c] - m) * r * w[c] + b[c];
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

__global__ void LayerNormInputGradKernel(float* dinp, const float* dout, const float* inp, const float* w,
                                         const float* mean, const float* rstd, int N, int C) {
  const int n = WarpRow();
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const size_t row = static_cast<size_t>(n) * C;
  const float m = mean[n], r = rstd[n];
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float dn = dout[row + c] * w[c];
    s1 += dn;
    s2 += dn * (inp[row + c] - m) * r;
  }
  s1 = WarpSum(s1) / C;
  s2 = WarpSum(s2) / C;
  for (int c = lane; c < C; c += kWarp) {
    const float dn = dout[row + c] * w[c];
    const float xhat = (inp[row + c] - m) * r;
    dinp[row + c] += r * (dn - s1 - xhat * s2);
  }
}

// ---- RMSNorm (as trainer/cpu/kernels/norms.inc: no centring, no bias) ----

__global__ void RmsNormForwardKernel(float* out, float* rstd, const float* inp, const float* w, int N, int C,
                                     float eps) {
  const int n = WarpRow();
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float* x = inp + static_cast<size_t>(n) * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += kWarp) ss += x[c] * x[c];
  const float r = 1.0f / sqrtf(WarpSum(ss) / C + eps);
  float* o = out + static_cast<size_t>(n) * C;
  for (int c = lane; c < C; c += kWarp) o[c] = x[c] * r * w[c];
  if (lane == 0) rstd[n] = r;
}

// dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), xhat = x * rstd, dxhat = dout * w.
__global__ void RmsNormInputGradKernel(float* dinp, const float* dout, const float* inp, const float* w,
                                       const float* rstd, int N, int C) {
  const int n = WarpRow();
  if (n >= N) return;
  const int lane = threadIdx.x % kWarp;
  const size_t row = static_cast<size_t>(n) * C;
  const float r = rstd[n];
  float s = 0.0f;
  for (int c = lane; c < C; c += kWarp) s += dout[row + c] * w[c] * (inp[row + c] * r);
  s = WarpSum(s) / C;
  for (int c = lane; c < C; c += kWarp) dinp[row + c] += r * (dout[row + c] * w[c] - inp[row + c] * r * s);
}

// ---- parameter gradients: the Ops of ColumnReduce (column_reduce.cuh) ----

struct LayerNormParamOp {
  const float *dout, *inp, *mean, *rstd;
  int C;
  __device__ float2 operator()(int r, int c) const {
    const size_t i = static_cast<size_t>(r) * C + c;
    const float xhat = (inp[i] - mean[r]) * rstd[r];
    return make_float2(dout[i] * xhat, dout[i]);
  }
};

struct RmsNormParamOp {
  const float *dout, *inp, *rstd;
  int C;
  __device__ float2 operator()(int r, int c) const {
    const size_t i = static_cast<size_t>(r) * C + c;
    return make_float2(dout[i] * (inp[i] * rstd[r]), 0.0f);
  }
};

}  // namespace

void LaunchLayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                            const float* b, int N, int C, float eps, cudaStream_t s) {
  LayerNormForwardKernel<<<Blocks(N, kWarpsPerBlock), kThreads, 0, s>>>(out, mean, rstd, inp, w, b, N, C, eps);
}
void LaunchLayerNormInputGrad(float* dinp, const float* dout, const float* inp, const float* w,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s) {
  LayerNormInputGradKernel<<<Blocks(N, kWarpsPerBlock), kThreads, 0, s>>>(dinp, dout, inp, w, mean, rstd, N, C);
}
void LaunchLayerNormParamGrad(float* dw, float* db, float* partial, const float* dout, const float* inp,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s) {
  ColumnReduce(dw, db, partial, LayerNormParamOp{dout, inp, mean, rstd, C}, N, C, s);
}
void LaunchRmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps,
                          cudaStream_t s) {
  RmsNormForwardKernel<<<Blocks(N, kWarpsPerBlock), kThreads, 0, s>>>(out, rstd, inp, w, N, C, eps);
}
void LaunchRmsNormInputGrad(float* dinp, const float* dout, const float* inp, const float* w, const float* rstd,
                            int N, int C, cudaStream_t s) {
  RmsNormInputGradKernel<<<Blocks(N, kWarpsPerBlock), kThreads, 0, s>>>(dinp, dout, inp, w, rstd, N, C);
}
void LaunchRmsNormParamGrad(float* dw, float* partial, const float* dout, const float* inp, const float* rstd, int N,
                            int C, cudaStream_t s) {
  ColumnReduce(dw, nullptr, partial, RmsNormParamOp{dout, inp, rstd, C}, N, C, s);
}

}  // namespace normsweep::trainer::cuda
