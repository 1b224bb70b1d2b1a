// A plain OpenMP matrix product for builds without OpenBLAS. Rows of C are
// split statically over threads; every element is summed in k order, so the
// result does not depend on the thread count.
#include <vector>

#include "trainer/cpu/blas.h"

namespace normsweep::trainer::cpu {

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) row[static_cast<size_t>(j)] = 0.0f;
      for (int k = 0; k < K; ++k) {
        const float a = trans_a ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k];
        if (trans_b) {
          for (int j = 0; j < N; ++j) row[static_cast<size_t>(j)] += a * B[static_cast<size_t>(j) * ldb + k];
        } else {
          const float* b = B + static_cast<size_t>(k) * ldb;
          for (int j = 0; j < N; ++j) row[static_cast<size_t>(j)] += a * b[j];
        }
      }
      float* c = C + static_cast<size_t>(i) * ldc;
      for (int j = 0; j < N; ++j) c[j] = (beta == 0.0f ? 0.0f : beta * c[j]) + row[static_cast<size_t>(j)];
    }
  }
}

void SetBlasThreads(int) {}  // the kernel uses OpenMP's thread count

}  // namespace normsweep::trainer::cpu
