#include <cblas.h>

#include <cctype>
#include <string>

#include "trainer/cpu/blas.h"
#if defined(__AVX512F__)
#include "trainer/cpu/packed_sgemm.h"
#endif

namespace normsweep::trainer::cpu {
#if defined(__AVX512F__)
namespace {

// Our packed kernel where this build has AVX-512 but OpenBLAS picked a core
// without 512-bit kernels (it takes unknown CPUs, such as this project's AMD
// EPYC, for a Haswell); OpenBLAS everywhere else.
bool UsePackedSgemm() {
  static const bool use = [] {
    std::string core = openblas_get_corename();
    for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return core != "skylakex" && core != "cooperlake" && core != "sapphirerapids";
  }();
  return use;
}

}  // namespace
#endif

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
#if defined(__AVX512F__)
  if (UsePackedSgemm()) {
    packed::Sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              1.0f, A, lda, B, ldb, beta, C, ldc);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace normsweep::trainer::cpu
