// The optimizer updates of trainer/optimizer.h (Adam, RAdam, SGD), one
// thread per parameter.
// Gradients: none written; g is read, the parameters p and the moments m, v
// are updated in place.
#include "trainer/cuda/kernels.cuh"

#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

// ---- optimizers (trainer/optimizer.cc, element by element) ----

__global__ void AdamKernel(float* p, const float* g, float* m, float* v, size_t n, AdamCoefficients a) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] * a.grad_scale + a.l2 * p[i];
  const float mi = a.b1 * m[i] + (1.0f - a.b1) * grad;
  const float vi = a.b2 * v[i] + (1.0f - a.b2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  const float denom = sqrtf(vi) * a.inv_sqrt_bc2 + a.eps;
  p[i] = p[i] * a.decay - a.step_size * mi / denom;
}

// a.rectified is the same for every thread: no divergence.
__global__ void RAdamKernel(float* p, const float* g, float* m, float* v, size_t n, RAdamCoefficients a) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float grad = g[i] * a.grad_scale + a.l2 * p[i];
  const float mi = a.b1 * m[i] + (1.0f - a.b1) * grad;
  const float vi = a.b2 * v[i] + (1.0f - a.b2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  if (a.rectified) {
    p[i] -= a.step_size * mi / (sqrtf(vi) + a.eps);
  } else {
    p[i] -= a.step_size * mi;
  }
}

__global__ void SgdKernel(float* p, const float* g, float* m, size_t n, SgdCoefficients a) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float grad = g[i] * a.grad_scale + a.wd * p[i];
  if (a.momentum > 0.0f) {
    m[i] = a.momentum * m[i] + grad;
    grad = m[i];
  }
  p[i] -= a.lr * grad;
}

}  // namespace

void LaunchAdam(float* p, const float* g, float* m, float* v, size_t n, AdamCoefficients a, cudaStream_t s) {
  AdamKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, v, n, a);
}
void LaunchRAdam(float* p, const float* g, float* m, float* v, size_t n, RAdamCoefficients a, cudaStream_t s) {
  RAdamKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, v, n, a);
}
void LaunchSgd(float* p, const float* g, float* m, size_t n, SgdCoefficients a, cudaStream_t s) {
  SgdKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, n, a);
}

}  // namespace normsweep::trainer::cuda
