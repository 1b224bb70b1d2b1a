#include <cblas.h>

#include "trainer/cpu/blas.h"

namespace normsweep::trainer::cpu {

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              1.0f, A, lda, B, ldb, beta, C, ldc);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace normsweep::trainer::cpu
