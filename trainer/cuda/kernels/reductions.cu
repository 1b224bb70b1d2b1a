// Reductions in a fixed order, no atomics: the column sums of dout (N,O)
// (column_reduce.cuh), and per segment, one block each, sums of squares in
// double (gradient norms, an optimizer step's update) and maxima (the
// attention logits').
// Gradients:
//   LaunchColumnSums  db (O) =
// The segment reductions overwrite their outputs too.
#include "trainer/cuda/kernels.cuh"

#include <cmath>

#include "trainer/cuda/kernels/column_reduce.cuh"
#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

struct ColumnOp {
  const float* dout;
  int C;
  __device__ float2 operator()(int r, int c) const { return make_float2(dout[static_cast<size_t>(r) * C + c], 0.0f); }
};

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

void LaunchColumnSums(float* db, float* partial, const float* dout, int N, int O, cudaStream_t s) {
  ColumnReduce(db, nullptr, partial, ColumnOp{dout, O}, N, O, s);
}
size_t ColumnReducePartialFloats(int N, int C) { return 2 * static_cast<size_t>(Chunks(N)) * C; }

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
