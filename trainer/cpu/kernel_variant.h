// Which instruction set the CPU kernels (trainer/cpu/ops.h) run with. The
// binaries are built for plain x86-64 (SSE2), so that they start on any
// x86-64 host; ops.cc compiles the kernels once more for AVX2 + FMA and once
// for AVX-512, and every call goes to the fastest variant this CPU runs,
// unless NORMSWEEP_CPU_KERNELS=baseline|avx2|avx512 names another one (an
// unknown or unsupported value is reported on stderr and ignored).
//
// Results are deterministic for a given variant and thread count; variants
// differ in rounding only (fused multiply-adds, vector widths of reductions),
// within the tolerance tests/trainer/kernel_variants_test.cc documents.
#ifndef NORMSWEEP_TRAINER_CPU_KERNEL_VARIANT_H_
#define NORMSWEEP_TRAINER_CPU_KERNEL_VARIANT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace normsweep::trainer::cpu {

enum class KernelVariant {
  kBaseline,  // x86-64 (SSE2): every x86-64 CPU
  kAvx2,      // AVX2 + FMA
  kAvx512,    // AVX-512 F/VL/BW/DQ, and our packed sgemm
};

inline constexpr char kKernelVariantEnv[] = "NORMSWEEP_CPU_KERNELS";

// "baseline", "avx2", "avx512".
const char* KernelVariantName(KernelVariant variant);
std::optional<KernelVariant> ParseKernelVariant(std::string_view name);

// Whether this build has the variant and this CPU and OS run it.
bool KernelVariantSupported(KernelVariant variant);
// The supported variants, slowest (baseline) first.
std::vector<KernelVariant> SupportedKernelVariants();

// The variant for an env_value of NORMSWEEP_CPU_KERNELS (null when unset):
// the one it names when supported, else the fastest supported. *warning
// (when not null) says why a set value was not followed, else is cleared.
KernelVariant ChooseKernelVariant(const char* env_value, std::string* warning);

// The variant kernel calls use now: ChooseKernelVariant(getenv(...)) on first
// use.
KernelVariant ActiveKernelVariant();
// Makes `variant` the one later kernel calls use (tests, benchmarks);
// returns false, changing nothing, when it is not supported. Call it between
// kernel calls, not while another thread runs one.
bool SetKernelVariant(KernelVariant variant);

// Row-major C (M,N) = op(A) @ op(B) + beta * C, as Sgemm in blas.h.
using SgemmFunction = void (*)(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                               const float* B, int ldb, float beta, float* C, int ldc);
// Our packed matrix product (trainer/cpu/packed_sgemm.inc) at the active
// variant's width, 512-bit for avx512 and 256-bit for avx2, else null;
// blas_openblas.cc runs it instead of OpenBLAS where OpenBLAS picked a core
// whose kernels are narrower.
SgemmFunction ActivePackedSgemm();

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_KERNEL_VARIANT_H_
