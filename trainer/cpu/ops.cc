#include "trainer/cpu/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "trainer/cpu/blas.h"
#include "trainer/rng.h"

namespace normsweep::trainer::cpu {
namespace {

// Below this many floats of work an op runs on the calling thread: waking the
// pool costs more than it saves, and spinning threads hurt a busy machine.
constexpr size_t kMinParallelWork = 1 << 14;
inline bool Parallel(size_t work) { return work >= kMinParallelWork; }

constexpr int kLanes = 16;

// Sixteen floats as one value (GCC/Clang vector extension): a zmm register
// with AVX-512, two ymm with AVX2; keeps accumulators out of memory and makes
// the vector code explicit where the compiler would not vectorise a loop.
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t IntLanes __attribute__((vector_size(kLanes * sizeof(int32_t))));

inline Lanes LoadLanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StoreLanes(float* p, Lanes v) { std::memcpy(p, &v, sizeof(v)); }
inline Lanes Broadcast(float x) { return Lanes{} + x; }

// Lanes summed (or maxed) in lane order, so results do not depend on the compiler.
inline float SumLanes(Lanes v) {
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// exp of 16 floats for the softmax loops (libm's expf is a scalar call and
// dominated attention's time, and a scalar polynomial did not vectorise).
// Cephes' expf: range reduction by ln 2 in two parts, a degree-6 polynomial,
// and the power of two put straight into the exponent bits. Relative error
// about 2e-7 on [-87, 88]; NaN stays NaN.
inline Lanes ExpLanes(Lanes x) {
  x = x < Broadcast(-87.3f) ? Broadcast(-87.3f) : x;
  x = x > Broadcast(88.7f) ? Broadcast(88.7f) : x;
  // floor(x / ln 2 + 0.5): truncate, then step down where that rounded up.
  const Lanes t = x * 1.44269504088896341f + 0.5f;
  const Lanes truncated = __builtin_convertvector(__builtin_convertvector(t, IntLanes), Lanes);
  const Lanes fx = truncated > t ? truncated - 1.0f : truncated;
  const Lanes r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  Lanes p = Broadcast(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const IntLanes n = __builtin_convertvector(fx, IntLanes);
  Lanes scale;
  const IntLanes bits = (n + 127) << 23;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// max of x[0, n), n >= 1.
inline float RowMax(const float* x, int n) {
  float m = x[0];
  int j = 0;
  if (n >= kLanes) {
    Lanes v = LoadLanes(x);
    for (j = kLanes; j + kLanes <= n; j += kLanes) {
      const Lanes y = LoadLanes(x + j);
      v = y > v ? y : v;
    }
    for (int l = 0; l < kLanes; ++l) m = std::max(m, v[l]);
  }
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// sum of a[j] * b[j] over j < n.
inline float RowDot(const float* a, const float* b, int n) {
  Lanes acc = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) acc += LoadLanes(a + j) * LoadLanes(b + j);
  float s = SumLanes(acc);
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// out[0, n) = softmax(in[0, n)) given max_in = max(in); returns the sum of
// exp(in - max_in), whose log is the log-partition less max_in.
inline float SoftmaxRow(float* out, const float* in, int n, float max_in) {
  Lanes acc = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Lanes e = ExpLanes(LoadLanes(in + j) - max_in);
    StoreLanes(out + j, e);
    acc += e;
  }
  if (j < n) {  // the tail as one vector, its unused lanes zeroed
    const int rest = n - j;
    float tail[kLanes] = {};
    for (int l = 0; l < rest; ++l) tail[l] = in[j + l];  // short copies: loops, not libc calls
    const IntLanes lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    Lanes e = ExpLanes(LoadLanes(tail) - max_in);
    e = lane < rest ? e : Lanes{};
    StoreLanes(tail, e);
    for (int l = 0; l < rest; ++l) out[j + l] = tail[l];
    acc += e;
  }
  const float sum = SumLanes(acc);
  const float inv = 1.0f / sum;
  for (j = 0; j < n; ++j) out[j] *= inv;
  return sum;
}

// Splits [0, n) into the calling thread's static chunk.
inline void ThreadRange(size_t n, size_t* begin, size_t* end) {
  const size_t threads = static_cast<size_t>(omp_get_num_threads());
  const size_t id = static_cast<size_t>(omp_get_thread_num());
  const size_t chunk = (n + threads - 1) / threads;
  *begin = std::min(n, id * chunk);
  *end = std::min(n, *begin + chunk);
}

// Column sums of a (N, C) matrix into out (C), parallel over column blocks so
// every column is summed in row order whatever the thread count.
void ColumnSums(float* out, const float* x, int N, int C) {
#pragma omp parallel if (Parallel(static_cast<size_t>(N) * C))
  {
    size_t c0, c1;
    ThreadRange(static_cast<size_t>(C), &c0, &c1);
    if (c1 > c0) {
      std::vector<double> acc(c1 - c0, 0.0);
      for (int n = 0; n < N; ++n) {
        const float* row = x + static_cast<size_t>(n) * C;
        for (size_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (size_t c = c0; c < c1; ++c) out[c] = static_cast<float>(acc[c - c0]);
    }
  }
}

}  // namespace

void SetThreads(int threads) {
  omp_set_num_threads(threads);
  // No nested teams: a kernel's own parallel loop inside the backend's
  // per-part region runs on one thread (OpenMP's usual default, made sure).
  omp_set_max_active_levels(1);
  SetBlasThreads(threads);
}

void EncoderForward(float* out, const int32_t* tokens, const float* tok_emb, const float* pos, int B,
                    int T, int C, float emb_scale) {
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(B) * T * C))
  for (int n = 0; n < B * T; ++n) {
    const int t = n % T;
    const float* e = tok_emb + static_cast<size_t>(tokens[n]) * C;
    const float* p = pos + static_cast<size_t>(t) * C;
    float* o = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] * emb_scale + p[c];
  }
}

void EncoderBackward(float* dtok_emb, float* dpos, const float* dout, const int32_t* tokens, int B, int T,
                     int C, int V, float emb_scale) {
  std::memset(dtok_emb, 0, sizeof(float) * static_cast<size_t>(V) * C);
  // Parallel over channels: each thread scatters its columns for all rows.
#pragma omp parallel if (Parallel(static_cast<size_t>(B) * T * C))
  {
    size_t c0, c1;
    ThreadRange(static_cast<size_t>(C), &c0, &c1);
    for (int n = 0; n < B * T; ++n) {
      const float* d = dout + static_cast<size_t>(n) * C;
      float* e = dtok_emb + static_cast<size_t>(tokens[n]) * C;
      for (size_t c = c0; c < c1; ++c) e[c] += d[c] * emb_scale;
      if (dpos != nullptr) {
        float* p = dpos + static_cast<size_t>(n % T) * C;
        for (size_t c = c0; c < c1; ++c) p[c] += d[c];
      }
    }
  }
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(N) * C))
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; ++c) s += x[c];
    const float m = s / C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; ++c) {
      const float d = x[c] - m;
      v += d * d;
    }
    const float r = 1.0f / std::sqrt(v / C + eps);
    float* o = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * r * w[c] + b[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, int N, int C) {
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w.
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(N) * C))
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    const float* dy = dout + static_cast<size_t>(n) * C;
    const float m = mean[n], r = rstd[n];
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - m) * r;
      const float dxhat = dy[c] * w[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    const float mean_dxhat = sum_dxhat / C, mean_dxhat_xhat = sum_dxhat_xhat / C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - m) * r;
      dx[c] += r * (dy[c] * w[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
#pragma omp parallel if (Parallel(static_cast<size_t>(N) * C))
  {
    size_t c0, c1;
    ThreadRange(static_cast<size_t>(C), &c0, &c1);
    if (c1 > c0) {
      std::vector<double> acc_w(c1 - c0, 0.0), acc_b(c1 - c0, 0.0);
      for (int n = 0; n < N; ++n) {
        const float* x = inp + static_cast<size_t>(n) * C;
        const float* dy = dout + static_cast<size_t>(n) * C;
        const float m = mean[n], r = rstd[n];
        for (size_t c = c0; c < c1; ++c) {
          acc_w[c - c0] += dy[c] * ((x[c] - m) * r);
          acc_b[c - c0] += dy[c];
        }
      }
      for (size_t c = c0; c < c1; ++c) {
        dw[c] = static_cast<float>(acc_w[c - c0]);
        db[c] = static_cast<float>(acc_b[c - c0]);
      }
    }
  }
}

void MatmulForward(float* out, const float* inp, const float* w, const float* b, int N, int I, int O) {
  float beta = 0.0f;
  if (b != nullptr) {
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(N) * O))
    for (int n = 0; n < N; ++n) std::memcpy(out + static_cast<size_t>(n) * O, b, sizeof(float) * O);
    beta = 1.0f;
  }
  Sgemm(false, true, N, O, I, inp, I, w, I, beta, out, O);
}

void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                    int N, int I, int O, bool accumulate) {
  if (dinp != nullptr) {
    Sgemm(false, false, N, I, O, dout, O, w, I, accumulate ? 1.0f : 0.0f, dinp, I);
  }
  Sgemm(true, false, O, I, N, dout, O, inp, I, 0.0f, dw, I);
  if (db != nullptr) ColumnSums(db, dout, N, O);
}

// Both attention passes work on one (batch, head) pair at a time, as small
// matrix products over that head's (T, hd) slices: scores = q k^T, out = p v,
// and in backward dp = dy v^T, dq = ds k, dk = ds^T q, dv = p^T dy. Each
// product runs in register tiles of kTileRows rows (4 x 32 scores, or 4 rows
// x 32 channels of a weighted sum), so that eight FMA chains are in flight:
// one row at a time is latency-bound. The head's slices are first copied into
// contiguous scratch (k and v transposed for the dot products, channels
// padded to 16), and the causal structure bounds every loop: probabilities
// and score gradients above the diagonal are stored as zeros, so a tile may
// run over them.
namespace {

constexpr int kTileRows = 4;

int RoundUp(int x, int m) { return (x + m - 1) / m * m; }

// dst (hd, Tp) = the hd channels of T rows at base (row stride `row`), transposed.
void GatherTransposed(float* dst, const float* base, size_t row, int T, int Tp, int hd) {
  for (int s = 0; s < T; ++s) {
    const float* src = base + s * row;
    for (int i = 0; i < hd; ++i) dst[static_cast<size_t>(i) * Tp + s] = src[i];
  }
}

// dst (T, hdp) = the hd channels of T rows at base; channels hd..hdp stay as they are (zero).
void GatherRows(float* dst, const float* base, size_t row, int T, int hdp, int hd) {
  for (int s = 0; s < T; ++s) {
    for (int i = 0; i < hd; ++i) dst[static_cast<size_t>(s) * hdp + i] = base[s * row + i];
  }
}

// The hd channels of T rows of src (T, hdp) into base (row stride `row`).
void ScatterRows(float* base, size_t row, const float* src, int T, int hdp, int hd) {
  for (int s = 0; s < T; ++s) {
    for (int i = 0; i < hd; ++i) base[s * row + i] = src[static_cast<size_t>(s) * hdp + i];
  }
}

// out[r][s0 + j] = scale * sum_{i < k} x[r * ldx + i] * mt[i * ldm + s0 + j], for
// R rows and 32 columns j: dot products of R rows with 32 columns of mt (k, ldm).
template <int R>
void DotTile(float* out, size_t ldo, const float* x, size_t ldx, const float* mt, size_t ldm, int k, int s0,
             float scale) {
  Lanes acc[R][2] = {};
  for (int i = 0; i < k; ++i) {
    const Lanes m0 = LoadLanes(mt + static_cast<size_t>(i) * ldm + s0);
    const Lanes m1 = LoadLanes(mt + static_cast<size_t>(i) * ldm + s0 + kLanes);
    for (int r = 0; r < R; ++r) {
      const float xr = x[r * ldx + i];
      acc[r][0] += xr * m0;
      acc[r][1] += xr * m1;
    }
  }
  for (int r = 0; r < R; ++r) {
    StoreLanes(out + r * ldo + s0, scale * acc[r][0]);
    StoreLanes(out + r * ldo + s0 + kLanes, scale * acc[r][1]);
  }
}

// A (T, T) weight matrix read as is (w_r_j at w[r * T + j]) or transposed
// (at w[j * T + r]): the transposed products dk = ds^T q and dv = p^T dy then
// need no transposed copies.
struct Weights {
  const float* w;
  size_t row_stride, col_stride;
  const float* Row(int r) const { return w + r * row_stride; }
};

// out[r][c0 + c] = sum_{lo <= j < hi} w_r_j * z[j * ldz + c0 + c], for R rows of
// w and L * 16 channels c: weighted sums of the rows of z (*, ldz).
template <int R, int L>
void WeightedTile(float* out, size_t ldo, Weights w, const float* z, size_t ldz, int c0, int lo, int hi) {
  Lanes acc[R][L] = {};
  for (int j = lo; j < hi; ++j) {
    Lanes zj[L];
    for (int l = 0; l < L; ++l) zj[l] = LoadLanes(z + static_cast<size_t>(j) * ldz + c0 + l * kLanes);
    const float* wj = w.w + j * w.col_stride;
    for (int r = 0; r < R; ++r) {
      const float wr = wj[r * w.row_stride];
      for (int l = 0; l < L; ++l) acc[r][l] += wr * zj[l];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int l = 0; l < L; ++l) StoreLanes(out + r * ldo + c0 + l * kLanes, acc[r][l]);
  }
}

// out (R, hdp) = w (R rows, columns lo..hi) @ z (hi rows, hdp channels).
template <int R>
void WeightedRows(float* out, size_t ldo, Weights w, const float* z, int hdp, int lo, int hi) {
  int c0 = 0;
  for (; c0 + 2 * kLanes <= hdp; c0 += 2 * kLanes) WeightedTile<R, 2>(out, ldo, w, z, hdp, c0, lo, hi);
  if (c0 < hdp) WeightedTile<R, 1>(out, ldo, w, z, hdp, c0, lo, hi);
}

// Calls tile(t0, rows) for row blocks of kTileRows, then single rows: f is a
// generic lambda taking std::integral_constant<int, R>.
template <typename F>
void ForRowTiles(int T, F&& tile) {
  int t0 = 0;
  for (; t0 + kTileRows <= T; t0 += kTileRows) tile(t0, std::integral_constant<int, kTileRows>{});
  for (; t0 < T; ++t0) tile(t0, std::integral_constant<int, 1>{});
}

}  // namespace

void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
  const int hd = C / H;
  const int Tp = RoundUp(T, 2 * kLanes);
  const int hdp = RoundUp(hd, kLanes);
  const size_t row = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel if (Parallel(static_cast<size_t>(B) * T * T * C / 2))
  {
    // kt (hd, Tp): keys transposed; v, o (T, hdp); scores (kTileRows, Tp).
    std::vector<float> kt(static_cast<size_t>(hd) * Tp, 0.0f), v(static_cast<size_t>(T) * hdp, 0.0f),
        o(static_cast<size_t>(T) * hdp, 0.0f), scores(static_cast<size_t>(kTileRows) * Tp);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* base = qkv + static_cast<size_t>(b) * T * row;
      float* a0 = att + static_cast<size_t>(bh) * T * T;
      GatherTransposed(kt.data(), base + C + h * hd, row, T, Tp, hd);
      GatherRows(v.data(), base + 2 * C + h * hd, row, T, hdp, hd);
      ForRowTiles(T, [&](int t0, auto rows) {
        constexpr int R = decltype(rows)::value;
        const int keys = std::min(t0 + R, T);  // causal: row t sees keys 0..t
        for (int s0 = 0; s0 < keys; s0 += 2 * kLanes) {
          DotTile<R>(scores.data(), Tp, base + t0 * row + h * hd, row, kt.data(), Tp, hd, s0, scale);
        }
        for (int r = 0; r < R; ++r) {
          const int n = t0 + r + 1;
          const float* sr = scores.data() + static_cast<size_t>(r) * Tp;
          float* a = a0 + static_cast<size_t>(t0 + r) * T;
          SoftmaxRow(a, sr, n, RowMax(sr, n));
          for (int s = n; s < T; ++s) a[s] = 0.0f;
        }
        const Weights p{a0 + static_cast<size_t>(t0) * T, static_cast<size_t>(T), 1};
        WeightedRows<R>(o.data() + static_cast<size_t>(t0) * hdp, hdp, p, v.data(), hdp, 0, keys);
      });
      ScatterRows(out + static_cast<size_t>(b) * T * C + h * hd, C, o.data(), T, hdp, hd);
    }
  }
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                       int C, int H) {
  const int hd = C / H;
  const int Tp = RoundUp(T, 2 * kLanes);
  const int hdp = RoundUp(hd, kLanes);
  const size_t row = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel if (Parallel(static_cast<size_t>(B) * T * T * C / 2))
  {
    // vt (hd, Tp): values transposed; q, k, dy and the result d (T, hdp);
    // datt (kTileRows, Tp); ds = the gradient of the pre-softmax scores (T, T).
    const size_t head = static_cast<size_t>(T) * hdp;
    std::vector<float> vt(static_cast<size_t>(hd) * Tp, 0.0f), q(head, 0.0f), k(head, 0.0f), dy(head, 0.0f),
        d(head, 0.0f), datt(static_cast<size_t>(kTileRows) * Tp), ds(static_cast<size_t>(T) * T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* base = qkv + static_cast<size_t>(b) * T * row;
      const float* dy0 = dout + static_cast<size_t>(b) * T * C + h * hd;
      float* dbase = dqkv + static_cast<size_t>(b) * T * row;
      const float* a0 = att + static_cast<size_t>(bh) * T * T;
      GatherTransposed(vt.data(), base + 2 * C + h * hd, row, T, Tp, hd);
      GatherRows(q.data(), base + h * hd, row, T, hdp, hd);
      GatherRows(k.data(), base + C + h * hd, row, T, hdp, hd);
      GatherRows(dy.data(), dy0, C, T, hdp, hd);
      // Rows t: datt[s] = dy_t . v_s; ds = p (datt - sum_s p datt) / sqrt(hd); dq_t = sum_s ds[t][s] k_s.
      ForRowTiles(T, [&](int t0, auto rows) {
        constexpr int R = decltype(rows)::value;
        const int keys = std::min(t0 + R, T);
        for (int s0 = 0; s0 < keys; s0 += 2 * kLanes) {
          DotTile<R>(datt.data(), Tp, dy0 + static_cast<size_t>(t0) * C, C, vt.data(), Tp, hd, s0, 1.0f);
        }
        for (int r = 0; r < R; ++r) {
          const int n = t0 + r + 1;
          const float* a = a0 + static_cast<size_t>(t0 + r) * T;
          const float* dr = datt.data() + static_cast<size_t>(r) * Tp;
          const float weighted = RowDot(a, dr, n);
          float* dp = ds.data() + static_cast<size_t>(t0 + r) * T;
          for (int s = 0; s < n; ++s) dp[s] = a[s] * (dr[s] - weighted) * scale;
          for (int s = n; s < T; ++s) dp[s] = 0.0f;
        }
        const Weights w{ds.data() + static_cast<size_t>(t0) * T, static_cast<size_t>(T), 1};
        WeightedRows<R>(d.data() + static_cast<size_t>(t0) * hdp, hdp, w, k.data(), hdp, 0, keys);
      });
      ScatterRows(dbase + h * hd, row, d.data(), T, hdp, hd);
      // Rows s of the transposes: dk_s = sum_{t>=s} ds[t][s] q_t, dv_s = sum_{t>=s} p[t][s] dy_t.
      ForRowTiles(T, [&](int s0, auto rows) {
        constexpr int R = decltype(rows)::value;
        const Weights w{ds.data() + s0, 1, static_cast<size_t>(T)};
        WeightedRows<R>(d.data() + static_cast<size_t>(s0) * hdp, hdp, w, q.data(), hdp, s0, T);
      });
      ScatterRows(dbase + C + h * hd, row, d.data(), T, hdp, hd);
      ForRowTiles(T, [&](int s0, auto rows) {
        constexpr int R = decltype(rows)::value;
        const Weights p{a0 + s0, 1, static_cast<size_t>(T)};
        WeightedRows<R>(d.data() + static_cast<size_t>(s0) * hdp, hdp, p, dy.data(), hdp, s0, T);
      });
      ScatterRows(dbase + 2 * C + h * hd, row, d.data(), T, hdp, hd);
    }
  }
}

void ReluForward(float* x, size_t n) {
#pragma omp parallel for schedule(static) if (Parallel(n))
  for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ReluBackward(float* dx, const float* dy, const float* act, size_t n) {
#pragma omp parallel for schedule(static) if (Parallel(n))
  for (size_t i = 0; i < n; ++i) dx[i] = act[i] > 0.0f ? dy[i] : 0.0f;
}

void Add(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (Parallel(n))
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Multiply(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (Parallel(n))
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void MakeDropoutMask(float* mask, size_t n, float p, uint64_t seed) {
  // Counter-based: element i depends only on (seed, i), not on the threads.
  const size_t block = kDropoutMaskBlock;
  const size_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (Parallel(n))
  for (size_t bi = 0; bi < blocks; ++bi) {
    const size_t begin = bi * block;
    MakeDropoutMaskSlice(mask + begin, begin, std::min(n, begin + block) - begin, p, seed);
  }
}

void MakeDropoutMaskSlice(float* mask, size_t first, size_t n, float p, uint64_t seed) {
  const float keep_scale = 1.0f / (1.0f - p);
  const size_t block = kDropoutMaskBlock;
  const size_t end = first + n;
  size_t i = first;
  while (i < end) {
    // Block bi draws its elements in order from its own stream; skip the
    // draws of elements before the slice.
    const size_t bi = i / block;
    Rng rng(MixSeed(seed, kDropoutMaskStream, bi));
    for (size_t skip = bi * block; skip < i; ++skip) rng.NextU64();
    const size_t block_end = std::min(end, (bi + 1) * block);
    for (; i < block_end; ++i) mask[i - first] = rng.Uniform() < p ? 0.0f : keep_scale;
  }
}

CrossEntropyStats CrossEntropyForward(float* probs, float* row_loss, const float* logits,
                                      const int32_t* targets, int N, int V) {
  std::vector<uint8_t> row_correct(static_cast<size_t>(N));
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(N) * V))
  for (int n = 0; n < N; ++n) {
    const float* z = logits + static_cast<size_t>(n) * V;
    float* p = probs + static_cast<size_t>(n) * V;
    float maxv = z[0];
    int argmax = 0;
    for (int j = 1; j < V; ++j) {
      if (z[j] > maxv) {
        maxv = z[j];
        argmax = j;
      }
    }
    const float sum = SoftmaxRow(p, z, V, maxv);
    const int32_t target = targets[n];
    if (target >= 0) {
      row_loss[n] = std::log(sum) + maxv - z[target];
      row_correct[n] = argmax == target;
    } else {
      row_loss[n] = 0.0f;
      row_correct[n] = 0;
    }
  }
  CrossEntropyStats stats;
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    stats.loss_sum += row_loss[n];
    stats.count += 1;
    stats.correct += row_correct[n];
  }
  return stats;
}

void CrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                          float scale) {
#pragma omp parallel for schedule(static) if (Parallel(static_cast<size_t>(N) * V))
  for (int n = 0; n < N; ++n) {
    float* d = dlogits + static_cast<size_t>(n) * V;
    const int32_t target = targets[n];
    if (target < 0) {
      std::memset(d, 0, sizeof(float) * V);
      continue;
    }
    const float* p = probs + static_cast<size_t>(n) * V;
    for (int j = 0; j < V; ++j) d[j] = p[j] * scale;
    d[target] -= scale;
  }
}

void SinusoidalPositions(float* out, int T, int C) {
  for (int p = 0; p < T; ++p) {
    for (int i = 0; 2 * i < C; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / C);
      out[static_cast<size_t>(p) * C + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < C) out[static_cast<size_t>(p) * C + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  }
}

}  // namespace normsweep::trainer::cpu
