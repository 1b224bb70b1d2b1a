// A packed matrix product with 512-bit FMAs, for machines where the BLAS
// runs narrower kernels. OpenBLAS 0.3.21 (Debian 12) does not know this
// project's AMD EPYC CPU, takes it for a Haswell and runs 256-bit kernels at
// about half the core's FMA throughput; this kernel reaches 130-180 GFLOP/s on
// one core on the trainer's shapes against OpenBLAS's 90-100
// (tests/bench/sgemm_peak, OPENBLAS_CORETYPE=SKYLAKEX shows what the core can do).
//
// GotoBLAS structure, kept minimal: for each block of kKC steps of k, op(B)
// is packed into column panels of kNR (k-major, zero-padded) and a
// micro-kernel keeps a kMR x kNR tile of C in 24 vector registers while it
// streams a B panel and kMR rows of op(A), read in place (packing A cost more
// than it saved on these shapes; only a last, partial panel is packed). Every
// element of C is summed in k order whatever the threads, so results do not
// depend on the thread count. Header-only so that blas_openblas.cc can use it
// without a build change.
#ifndef NORMSWEEP_TRAINER_CPU_PACKED_SGEMM_H_
#define NORMSWEEP_TRAINER_CPU_PACKED_SGEMM_H_

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace normsweep::trainer::cpu::packed {

inline constexpr int kMR = 12;   // rows of the register tile
inline constexpr int kNR = 32;   // columns: two 16-float vectors
inline constexpr int kKC = 256;  // k block: an A panel (12 KB) stays in L1, B's block in L2

typedef float Vec16 __attribute__((vector_size(64)));

inline Vec16 LoadVec(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StoreVec(float* p, Vec16 v) { std::memcpy(p, &v, sizeof(v)); }

// Stores a kMR x kNR register tile into C (m x n of it), plus beta * C when add_c.
inline void StoreTile(const Vec16 (&acc)[kMR][2], float* c, size_t ldc, bool add_c, float beta, int m, int n) {
  if (m == kMR && n == kNR) {
    for (int r = 0; r < kMR; ++r) {
      float* row = c + static_cast<size_t>(r) * ldc;
      if (add_c) {
        StoreVec(row, acc[r][0] + beta * LoadVec(row));
        StoreVec(row + 16, acc[r][1] + beta * LoadVec(row + 16));
      } else {
        StoreVec(row, acc[r][0]);
        StoreVec(row + 16, acc[r][1]);
      }
    }
    return;
  }
  float tile[kMR][kNR];
  for (int r = 0; r < kMR; ++r) {
    StoreVec(tile[r], acc[r][0]);
    StoreVec(tile[r] + 16, acc[r][1]);
  }
  for (int r = 0; r < m; ++r) {
    float* row = c + static_cast<size_t>(r) * ldc;
    for (int j = 0; j < n; ++j) row[j] = add_c ? tile[r][j] + beta * row[j] : tile[r][j];
  }
}

// C tile (m x n) = sum over kc of a (kMR rows) x bp (kc, kNR), plus beta * C
// when add_c. A is read in place, so only a panel that runs past M is packed:
// with kRowsA, row r of the panel is a + r * a_stride (k contiguous: op(A) = A);
// otherwise step k is a + k * a_stride (rows contiguous: op(A) = A^T, or packed).
template <bool kRowsA>
inline void MicroKernel(const float* __restrict a, size_t a_stride, const float* __restrict bp, int kc, float* c,
                        size_t ldc, bool add_c, float beta, int m, int n) {
  Vec16 acc[kMR][2] = {};
  if constexpr (kRowsA) {
    // Three row pointers four rows apart keep the addressing in registers.
    const float* a0 = a;
    const float* a4 = a + 4 * a_stride;
    const float* a8 = a + 8 * a_stride;
    for (int k = 0; k < kc; ++k) {
      const Vec16 b0 = LoadVec(bp + static_cast<size_t>(k) * kNR);
      const Vec16 b1 = LoadVec(bp + static_cast<size_t>(k) * kNR + 16);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const float x0 = a0[r * a_stride + k], x4 = a4[r * a_stride + k], x8 = a8[r * a_stride + k];
        acc[r][0] += x0 * b0;
        acc[r][1] += x0 * b1;
        acc[r + 4][0] += x4 * b0;
        acc[r + 4][1] += x4 * b1;
        acc[r + 8][0] += x8 * b0;
        acc[r + 8][1] += x8 * b1;
      }
    }
  } else {
    for (int k = 0; k < kc; ++k) {
      const Vec16 b0 = LoadVec(bp + static_cast<size_t>(k) * kNR);
      const Vec16 b1 = LoadVec(bp + static_cast<size_t>(k) * kNR + 16);
      const float* ak = a + static_cast<size_t>(k) * a_stride;
#pragma GCC unroll 12
      for (int r = 0; r < kMR; ++r) {
        acc[r][0] += ak[r] * b0;
        acc[r][1] += ak[r] * b1;
      }
    }
  }
  StoreTile(acc, c, ldc, add_c, beta, m, n);
}

// One packed panel, dst (kc, W): dst[k * W + x] = X(k0 + k, x0 + x) for
// x < count - x0, zero past it, where X(k, x) = X[k * ld + x] when
// rows_by_k (each k-row contiguous in x), else X[x * ld + k]. op(B) packs
// with W = kNR and rows_by_k = !trans_b; op(A), transposed, with W = kMR and
// rows_by_k = trans_a.
template <int W>
inline void PackPanel(float* dst, bool rows_by_k, const float* X, int ld, int k0, int kc, int x0, int count) {
  const int w = std::min(W, count - x0);
  if (w < W) std::fill(dst, dst + static_cast<size_t>(kc) * W, 0.0f);
  if (rows_by_k) {
    for (int k = 0; k < kc; ++k) {  // short rows: a loop, not a memcpy call
      const float* src = X + static_cast<size_t>(k0 + k) * ld + x0;
      float* out = dst + static_cast<size_t>(k) * W;
      for (int x = 0; x < w; ++x) out[x] = src[x];
    }
  } else {
    for (int x = 0; x < w; ++x) {
      const float* src = X + static_cast<size_t>(x0 + x) * ld + k0;
      for (int k = 0; k < kc; ++k) dst[static_cast<size_t>(k) * W + x] = src[k];
    }
  }
}

// Row-major C (M,N) = op(A) @ op(B) + beta * C, op(X) = X^T when trans_x.
// Runs on the calling thread's team when called outside a parallel region
// (row panels split statically), else on the calling thread alone.
inline void Sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                  float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int i = 0; i < M; ++i) {
      float* row = C + static_cast<size_t>(i) * ldc;
      for (int j = 0; j < N; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  const int col_panels = (N + kNR - 1) / kNR;
  const int row_panels = (M + kMR - 1) / kMR;
  // Packed op(B) for one k block, shared by the team; reused across calls.
  static thread_local std::vector<float> b_pack;
  b_pack.resize(static_cast<size_t>(col_panels) * kNR * kKC);
  float* bp = b_pack.data();
  const bool parallel = !omp_in_parallel() && static_cast<double>(M) * N * K >= 1 << 21;
#pragma omp parallel if (parallel)
  {
    static thread_local std::vector<float> a_pack;
    a_pack.resize(static_cast<size_t>(kMR) * kKC);
    for (int k0 = 0; k0 < K; k0 += kKC) {
      const int kc = std::min(kKC, K - k0);
      // The first k block applies beta; the later ones add to C.
      const bool add_c = k0 > 0 || beta != 0.0f;
      const float scale_c = k0 > 0 ? 1.0f : beta;
#pragma omp for schedule(static)
      for (int jp = 0; jp < col_panels; ++jp) {
        PackPanel<kNR>(bp + static_cast<size_t>(jp) * kNR * kc, !trans_b, B, ldb, k0, kc, jp * kNR, N);
      }
#pragma omp for schedule(static)
      for (int ip = 0; ip < row_panels; ++ip) {
        const int i0 = ip * kMR;
        const int m = std::min(kMR, M - i0);
        float* c = C + static_cast<size_t>(i0) * ldc;
        // Full panels read A in place; the last, partial one is packed.
        const float* a = trans_a ? A + static_cast<size_t>(k0) * lda + i0 : A + static_cast<size_t>(i0) * lda + k0;
        size_t a_stride = static_cast<size_t>(lda);
        if (m < kMR) {
          PackPanel<kMR>(a_pack.data(), trans_a, A, lda, k0, kc, i0, M);
          a = a_pack.data();
          a_stride = kMR;
        }
        for (int jp = 0; jp < col_panels; ++jp) {
          const int j0 = jp * kNR;
          const float* b = bp + static_cast<size_t>(jp) * kNR * kc;
          const int n = std::min(kNR, N - j0);
          if (m == kMR && !trans_a) {
            MicroKernel<true>(a, a_stride, b, kc, c + j0, ldc, add_c, scale_c, m, n);
          } else {
            MicroKernel<false>(a, a_stride, b, kc, c + j0, ldc, add_c, scale_c, m, n);
          }
        }
      }
    }
  }
}

}  // namespace normsweep::trainer::cpu::packed

#endif  // NORMSWEEP_TRAINER_CPU_PACKED_SGEMM_H_
