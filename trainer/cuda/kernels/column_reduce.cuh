// Private to trainer/cuda/kernels/: the two-stage column reduction of an
// (N, C) matrix that the norms' parameter gradients (norms.cu) and the bias
// gradient (reductions.cu) share; each supplies the per-element Op. Only
// those two files include it: its final-stage kernel is not a template, so
// every file that includes it compiles a copy (internal, unnamed namespace).
#ifndef NORMSWEEP_TRAINER_CUDA_KERNELS_COLUMN_REDUCE_CUH_
#define NORMSWEEP_TRAINER_CUDA_KERNELS_COLUMN_REDUCE_CUH_

#include <cuda_runtime.h>

#include "trainer/cuda/kernels/common.cuh"

namespace normsweep::trainer::cuda {
namespace {

// Stage 1: blocks of (32 columns) x (kRowsPerChunk rows), 8 row-threads
// each, reduced in shared memory in a fixed order, one float2 per (chunk,
// column). Stage 2: per column, the chunks in order.

constexpr int kColumnTile = 32;
constexpr int kRowThreads = 8;
constexpr int kRowsPerChunk = 256;

inline int Chunks(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

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

}  // namespace
}  // namespace normsweep::trainer::cuda

#endif  // NORMSWEEP_TRAINER_CUDA_KERNELS_COLUMN_REDUCE_CUH_
