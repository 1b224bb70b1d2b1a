// A plain OpenMP matrix product for builds without OpenBLAS. Rows of C are
// split statically over threads; every element is summed in k order, so the
// result does not depend on the thread count.
#include <cstddef>
#include <vector>

#include "trainer/cpu/blas.h"

namespace normsweep::trainer::cpu {

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  using std::size_t;
#pragma omp parallel
  {
    std::vector<float> a(static_cast<size_t>(K)), row(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int i = 0; i < M; ++i) {
      // Row i of op(A), contiguous.
      for (int k = 0; k < K; ++k) {
        a[static_cast<size_t>(k)] = trans_a ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k];
      }
      if (trans_b) {  // C(i,j) = a . B(j,:)
        for (int j = 0; j < N; ++j) {
          const float* b = B + static_cast<size_t>(j) * ldb;
          float s = 0.0f;
          for (int k = 0; k < K; ++k) s += a[static_cast<size_t>(k)] * b[k];
          row[static_cast<size_t>(j)] = s;
        }
      } else {  // C(i,:) = sum_k a_k B(k,:)
        for (int j = 0; j < N; ++j) row[static_cast<size_t>(j)] = 0.0f;
        for (int k = 0; k < K; ++k) {
          const float ak = a[static_cast<size_t>(k)];
          const float* b = B + static_cast<size_t>(k) * ldb;
          for (int j = 0; j < N; ++j) row[static_cast<size_t>(j)] += ak * b[j];
        }
      }
      float* c = C + static_cast<size_t>(i) * ldc;
      for (int j = 0; j < N; ++j) c[j] = (beta == 0.0f ? 0.0f : beta * c[j]) + row[static_cast<size_t>(j)];
    }
  }
}

void SetBlasThreads(int) {}  // the kernel uses OpenMP's thread count

std::string GemmDescription() { return "builtin"; }

void UseOpenBlasCoreOfTheKernelVariant(char**) {}  // no OpenBLAS

}  // namespace normsweep::trainer::cpu
