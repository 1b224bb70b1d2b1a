// The one BLAS routine the CPU backend uses, behind our own signature so
// that the BLAS is a build choice: OpenBLAS (blas_openblas.cc, the normal
// build) or a small built-in OpenMP kernel (blas_builtin.cc, for machines
// without OpenBLAS, e.g. a bare GPU box building with
// NORMSWEEP_TRAINER_ONLY; correct but slower).
#ifndef NORMSWEEP_TRAINER_CPU_BLAS_H_
#define NORMSWEEP_TRAINER_CPU_BLAS_H_

#include <string>

namespace normsweep::trainer::cpu {

// Row-major C (M,N) = op(A) @ op(B) + beta * C, op(X) = X^T when trans_x.
void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc);

// Threads the BLAS may use.
void SetBlasThreads(int threads);

// Which matrix product Sgemm runs now, for the trainer's start line and its
// final event: "openblas (core Haswell)", "openblas (core SkylakeX, set by
// normsweep-train: OpenBLAS took this CPU for a Haswell)", "packed avx512
// (OpenBLAS core Haswell has 256-bit kernels)", "builtin".
std::string GemmDescription();

// Call first thing in main. OpenBLAS picks its kernels once, as it loads,
// from its own CPU check, which takes CPUs newer than the library for older
// cores (an AVX-512 Xeon for a Prescott: a 4x slower sgemm). When the core it
// picked has narrower kernels than the active kernel variant and
// OPENBLAS_CORETYPE is unset, this sets it to the core of the variant's width
// (avx512: SkylakeX, avx2: Haswell) and executes this program again, which
// costs a few milliseconds; it returns when there is nothing to do or the
// exec failed (then the packed kernels stand in: see PackedInstead in
// blas_openblas.cc). A core the user set is left as it is.
void UseOpenBlasCoreOfTheKernelVariant(char** argv);

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_BLAS_H_
