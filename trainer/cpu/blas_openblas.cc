#include <cblas.h>

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"

namespace normsweep::trainer::cpu {
namespace {

// Set (to the core OpenBLAS had picked) by UseOpenBlasCoreOfTheKernelVariant
// before its exec.
constexpr char kCoreSetEnv[] = "NORMSWEEP_OPENBLAS_CORE_WAS";

// The core OpenBLAS picked (its own CPU check, or OPENBLAS_CORETYPE).
const std::string& OpenBlasCore() {
  static const std::string core = openblas_get_corename();
  return core;
}

// The vector width of OpenBLAS's kernels for that core: 512, 256 (AVX2), or
// 128 for the older cores. Debian's 0.3.21 takes CPUs it does not know for
// older ones (an AVX-512 Intel Xeon for a Prescott, SSE3: 128); a user's
// OPENBLAS_CORETYPE can also name a narrower core than the CPU's (this
// project's sandbox sets Haswell on its AVX-512 AMD EPYC).
int OpenBlasVectorBits() {
  static const int bits = [] {
    std::string core = OpenBlasCore();
    for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (core == "skylakex" || core == "cooperlake" || core == "sapphirerapids") return 512;
    if (core == "haswell" || core == "zen" || core == "excavator") return 256;
    return 128;
  }();
  return bits;
}

// Our packed kernel where the active variant is wider than OpenBLAS's
// kernels; null (OpenBLAS) everywhere else.
SgemmFunction PackedInstead() {
  const SgemmFunction packed = ActivePackedSgemm();
  if (packed == nullptr) return nullptr;
  const int ours = ActiveKernelVariant() == KernelVariant::kAvx512 ? 512 : 256;
  return OpenBlasVectorBits() < ours ? packed : nullptr;
}

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  if (const SgemmFunction packed = PackedInstead(); packed != nullptr) {
    packed(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              1.0f, A, lda, B, ldb, beta, C, ldc);
}

std::string GemmDescription() {
  if (PackedInstead() != nullptr) {
    return std::string("packed ") + KernelVariantName(ActiveKernelVariant()) + " (OpenBLAS core " + OpenBlasCore() +
           " has " + std::to_string(OpenBlasVectorBits()) + "-bit kernels)";
  }
  const char* was = std::getenv(kCoreSetEnv);
  return "openblas (core " + OpenBlasCore() +
         (was != nullptr && *was != '\0' ? std::string(", set by normsweep-train: OpenBLAS took this CPU for a ") + was
                                          : std::string()) +
         ")";
}

void UseOpenBlasCoreOfTheKernelVariant(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's, or ours after the exec
  const KernelVariant variant = ActiveKernelVariant();
  const int bits = variant == KernelVariant::kAvx512 ? 512 : variant == KernelVariant::kAvx2 ? 256 : 0;
  if (OpenBlasVectorBits() >= bits) return;
  setenv("OPENBLAS_CORETYPE", bits == 512 ? "SkylakeX" : "Haswell", 1);
  setenv(kCoreSetEnv, OpenBlasCore().c_str(), 1);  // what OpenBLAS had picked, for the start line
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: go on with the packed kernels
  unsetenv(kCoreSetEnv);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace normsweep::trainer::cpu
