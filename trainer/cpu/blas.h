// The one BLAS routine the CPU backend uses, behind our own signature so
// that the BLAS is a build choice: OpenBLAS (blas_openblas.cc, the normal
// build) or a small built-in OpenMP kernel (blas_builtin.cc, for machines
// without OpenBLAS, e.g. a bare GPU box building with
// NORMSWEEP_TRAINER_ONLY; correct but slower).
#ifndef NORMSWEEP_TRAINER_CPU_BLAS_H_
#define NORMSWEEP_TRAINER_CPU_BLAS_H_

namespace normsweep::trainer::cpu {

// Row-major C (M,N) = op(A) @ op(B) + beta * C, op(X) = X^T when trans_x.
void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc);

// Threads the BLAS may use.
void SetBlasThreads(int threads);

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_BLAS_H_
