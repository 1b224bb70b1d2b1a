#include "trainer/cuda/kernels.cuh"

#include <cfloat>
#include <cmath>

#include "trainer/rng.h"

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

// ---- embedding ----

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

// ---- RMSNorm (as trainer/cpu/ops_kernels.inc: no centring, no bias) ----

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

// ---- column reductions (bias and LayerNorm parameter gradients) ----
// Stage 1: blocks of (32 columns) x (kRowsPerChunk rows), 8 row-threads
// each, reduced in shared memory in a fixed order, one float2 per (chunk,
// column). Stage 2: per column, the chunks in order.

constexpr int kColumnTile = 32;
constexpr int kRowThreads = 8;
constexpr int kRowsPerChunk = 256;

int Chunks(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

struct ColumnOp {
  const float* dout;
  int C;
  __device__ float2 operator()(int r, int c) const { return make_float2(dout[static_cast<size_t>(r) * C + c], 0.0f); }
};
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

template <class Op>
__global__ void ColumnReducePartialKernel(float2* partial, Op op, int N, int C) {
  const int c = blockIdx.y * kColumnTile + threadIdx.x;
  const int chunk = blockIdx.x;  // x: up to 2^31-1 chunks; y (column tiles) up to 65535
  const int r0 = chunk * kRowsPerChunk;
  const int r1 = min(N, r0 + kRowsPerChunk);
  float2 acc = make_float2(0.0f, 0.0f);
  if (c < C) {
    for (int r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const float2 v = op(r, c);
      acc.x += v.x;
      acc.y += v.y;
    }
  }
  __shared__ float2 shared[kRowThreads][kColumnTile];
  shared[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float2 t = shared[0][threadIdx.x];
    for (int i = 1; i < kRowThreads; ++i) {
      t.x += shared[i][threadIdx.x].x;
      t.y += shared[i][threadIdx.x].y;
    }
    partial[static_cast<size_t>(chunk) * C + c] = t;
  }
}

__global__ void ColumnReduceFinalKernel(float* out_x, float* out_y, const float2* partial, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float x = 0.0f, y = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    const float2 v = partial[static_cast<size_t>(k) * C + c];
    x += v.x;
    y += v.y;
  }
  out_x[c] = x;
  if (out_y != nullptr) out_y[c] = y;
}

template <class Op>
void ColumnReduce(float* out_x, float* out_y, float* partial, Op op, int N, int C, cudaStream_t s) {
  float2* p = reinterpret_cast<float2*>(partial);
  const dim3 grid(Chunks(N), (C + kColumnTile - 1) / kColumnTile);
  ColumnReducePartialKernel<<<grid, dim3(kColumnTile, kRowThreads), 0, s>>>(p, op, N, C);
  ColumnReduceFinalKernel<<<Blocks(C), kThreads, 0, s>>>(out_x, out_y, p, Chunks(N), C);
}

__global__ void AddBiasKernel(float* out, const float* bias, int N, int O) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < static_cast<size_t>(N) * O) out[i] += bias[i % O];
}

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

// ---- elementwise ----

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

// ---- gradient norms ----

__global__ void SegmentSquaredNormsKernel(double* out, const float* x, const size_t* begin, const size_t* len) {
  const size_t b = begin[blockIdx.x], n = len[blockIdx.x];
  double s = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = x[b + i];
    s += v * v;
  }
  __shared__ double shared[kThreads];
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = shared[0];
}

// ---- diagnostics: an optimizer step's update, the attention logits' maxima ----

__global__ void SegmentUpdateSquaredNormsKernel(double* update, double* weight, const float* after,
                                                const float* before, const size_t* begin, const size_t* len) {
  const size_t b = begin[blockIdx.x], n = len[blockIdx.x];
  double su = 0.0, sw = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double w = before[b + i];
    const double u = static_cast<double>(after[b + i] - before[b + i]);  // the float update, as the CPU takes it
    su += u * u;
    sw += w * w;
  }
  __shared__ double shared_u[kThreads], shared_w[kThreads];
  shared_u[threadIdx.x] = su;
  shared_w[threadIdx.x] = sw;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      shared_u[threadIdx.x] += shared_u[threadIdx.x + stride];
      shared_w[threadIdx.x] += shared_w[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    update[blockIdx.x] = shared_u[0];
    weight[blockIdx.x] = shared_w[0];
  }
}

__global__ void SegmentMaxKernel(float* out, const float* x, int len) {
  const float* seg = x + static_cast<size_t>(blockIdx.x) * len;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < len; i += blockDim.x) m = fmaxf(m, seg[i]);
  __shared__ float shared[kThreads];
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + stride]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = shared[0];
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
void LaunchColumnSums(float* db, float* partial, const float* dout, int N, int O, cudaStream_t s) {
  ColumnReduce(db, nullptr, partial, ColumnOp{dout, O}, N, O, s);
}
size_t ColumnReducePartialFloats(int N, int C) { return 2 * static_cast<size_t>(Chunks(N)) * C; }

void LaunchAddBias(float* out, const float* bias, int N, int O, cudaStream_t s) {
  AddBiasKernel<<<Blocks(static_cast<size_t>(N) * O), kThreads, 0, s>>>(out, bias, N, O);
}

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

void LaunchAdam(float* p, const float* g, float* m, float* v, size_t n, AdamCoefficients a, cudaStream_t s) {
  AdamKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, v, n, a);
}
void LaunchRAdam(float* p, const float* g, float* m, float* v, size_t n, RAdamCoefficients a, cudaStream_t s) {
  RAdamKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, v, n, a);
}
void LaunchSgd(float* p, const float* g, float* m, size_t n, SgdCoefficients a, cudaStream_t s) {
  SgdKernel<<<Blocks(n), kThreads, 0, s>>>(p, g, m, n, a);
}

void LaunchSegmentSquaredNorms(double* out, const float* x, const size_t* begin, const size_t* len,
                               int segments, cudaStream_t s) {
  if (segments > 0) SegmentSquaredNormsKernel<<<segments, kThreads, 0, s>>>(out, x, begin, len);
}

void LaunchSegmentUpdateSquaredNorms(double* update, double* weight, const float* after, const float* before,
                                     const size_t* begin, const size_t* len, int segments, cudaStream_t s) {
  if (segments > 0) {
    SegmentUpdateSquaredNormsKernel<<<segments, kThreads, 0, s>>>(update, weight, after, before, begin, len);
  }
}

void LaunchSegmentMax(float* out, const float* x, int segments, int len, cudaStream_t s) {
  if (segments > 0) SegmentMaxKernel<<<segments, kThreads, 0, s>>>(out, x, len);
}

}  // namespace normsweep::trainer::cuda
