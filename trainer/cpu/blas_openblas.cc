#include <cblas.h>

#include <cctype>
#include <string>

#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"

namespace normsweep::trainer::cpu {
namespace {

// Whether OpenBLAS runs 512-bit kernels here. It takes unknown CPUs, such as
// this project's AMD EPYC, for a Haswell and runs 256-bit ones.
bool OpenBlasHas512BitKernels() {
  static const bool has = [] {
    std::string core = openblas_get_corename();
    for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
  }();
  return has;
}

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  // Our packed kernel where the avx512 kernels run but OpenBLAS picked a core
  // without 512-bit kernels; OpenBLAS everywhere else.
  if (const SgemmFunction packed = ActivePackedSgemm(); packed != nullptr && !OpenBlasHas512BitKernels()) {
    packed(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              1.0f, A, lda, B, ldb, beta, C, ldc);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace normsweep::trainer::cpu
