#include "trainer/cpu/ops.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "trainer/cpu/blas.h"
#include "trainer/rng.h"

namespace normsweep::trainer::cpu {
namespace {

// Below this many floats of work an op runs on the calling thread: waking the
// pool costs more than it saves, and spinning threads hurt a busy machine.
constexpr size_t kMinParallelWork = 1 << 14;
inline bool Parallel(size_t work) { return work >= kMinParallelWork; }

// exp for the softmax loops, written so that the compiler vectorises it
// (libm's expf is a scalar call and dominated attention's time). Cephes'
// expf: range reduction by ln 2 in two parts, a degree-6 polynomial, and
// the power of two put straight into the exponent bits. Relative error
// about 2e-7 on [-87, 88]; NaN stays NaN.
inline float ExpApprox(float x) {
  x = std::min(std::max(x, -87.3f), 88.7f);
  const float fx = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t n = static_cast<int32_t>(fx);
  return p * std::bit_cast<float>((n + 127) << 23);
}

// out[0, n) = softmax(in[0, n)) given max_in = max(in); returns the sum of
// exp(in - max_in), whose log is the log-partition less max_in.
inline float SoftmaxRow(float* out, const float* in, int n, float max_in) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    out[j] = ExpApprox(in[j] - max_in);
    sum += out[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j < n; ++j) out[j] *= inv;
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

// Both attention passes work on one (batch, head) pair at a time. The dot
// products over hd become register-blocked loops over 16 key positions (K
// and V transposed into (hd, Tp) scratch, Tp = T rounded up to 16), and the
// weighted sums over keys accumulate 16 channels in registers: plain loops
// that load and store their accumulator every iteration are latency-bound.
namespace {

constexpr int kLanes = 16;

int RoundUp(int x, int m) { return (x + m - 1) / m * m; }

// dst (hd, Tp) = the hd channels of T rows at base (row stride `row`), transposed.
void GatherTransposed(float* dst, const float* base, size_t row, int T, int Tp, int hd) {
  for (int s = 0; s < T; ++s) {
    const float* src = base + s * row;
    for (int i = 0; i < hd; ++i) dst[static_cast<size_t>(i) * Tp + s] = src[i];
  }
}

// Sixteen floats as one value (GCC/Clang vector extension): a zmm register
// with AVX-512, two ymm with AVX2; keeps the accumulators out of memory.
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

inline Lanes LoadLanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// out[s] = scale * sum_i x[i] * mt[i][s] for s < n (writes up to RoundUp(n, 16)
// entries of out); mt is (k, Tp) with Tp >= RoundUp(n, 16).
void DotWithColumns(float* out, const float* x, const float* mt, int k, int n, int Tp, float scale) {
  for (int s0 = 0; s0 < n; s0 += kLanes) {
    Lanes acc = {};
    for (int i = 0; i < k; ++i) acc += (x[i] * scale) * LoadLanes(mt + static_cast<size_t>(i) * Tp + s0);
    std::memcpy(out + s0, &acc, sizeof(acc));
  }
}

// out[i] = sum_{s < n} w[s] * rows[s * stride + i] for i < hd.
void WeightedRowSum(float* out, const float* w, const float* rows, size_t stride, int n, int hd) {
  int i0 = 0;
  for (; i0 + kLanes <= hd; i0 += kLanes) {
    Lanes acc = {};
    for (int s = 0; s < n; ++s) acc += w[s] * LoadLanes(rows + s * stride + i0);
    std::memcpy(out + i0, &acc, sizeof(acc));
  }
  for (int i = i0; i < hd; ++i) {
    float acc = 0.0f;
    for (int s = 0; s < n; ++s) acc += w[s] * rows[s * stride + i];
    out[i] = acc;
  }
}

}  // namespace

void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int H) {
  const int hd = C / H;
  const int Tp = RoundUp(T, kLanes);
  const size_t row = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel if (Parallel(static_cast<size_t>(B) * T * T * C / 2))
  {
    std::vector<float> kt(static_cast<size_t>(hd) * Tp, 0.0f), scores(static_cast<size_t>(Tp));
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* base = qkv + static_cast<size_t>(b) * T * row;
      GatherTransposed(kt.data(), base + C + h * hd, row, T, Tp, hd);
      for (int t = 0; t < T; ++t) {
        const int n = t + 1;  // causal: keys 0..t
        float* a = att + (static_cast<size_t>(bh) * T + t) * T;
        DotWithColumns(scores.data(), base + t * row + h * hd, kt.data(), hd, n, Tp, scale);
        float maxv = scores[0];
        for (int s = 1; s < n; ++s) maxv = std::max(maxv, scores[s]);
        SoftmaxRow(a, scores.data(), n, maxv);
        for (int s = n; s < T; ++s) a[s] = 0.0f;
        WeightedRowSum(out + (static_cast<size_t>(b) * T + t) * C + h * hd, a, base + 2 * C + h * hd, row, n, hd);
      }
    }
  }
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                       int C, int H) {
  const int hd = C / H;
  const int Tp = RoundUp(T, kLanes);
  const size_t row = 3 * static_cast<size_t>(C);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel if (Parallel(static_cast<size_t>(B) * T * T * C / 2))
  {
    // dpre (T, T): the gradient of the pre-softmax scores; columns gathered into col.
    std::vector<float> vt(static_cast<size_t>(hd) * Tp, 0.0f), datt(static_cast<size_t>(Tp)),
        dpre(static_cast<size_t>(T) * T), col_p(static_cast<size_t>(T)), col_d(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      const float* base = qkv + static_cast<size_t>(b) * T * row;
      const float* dy0 = dout + static_cast<size_t>(b) * T * C + h * hd;
      float* dbase = dqkv + static_cast<size_t>(b) * T * row;
      const float* a0 = att + static_cast<size_t>(bh) * T * T;
      GatherTransposed(vt.data(), base + 2 * C + h * hd, row, T, Tp, hd);
      // Rows t: datt[s] = dy_t . v_s; dpre = p (datt - sum_s p datt) / sqrt(hd); dq_t = sum_s dpre[s] k_s.
      for (int t = 0; t < T; ++t) {
        const int n = t + 1;
        const float* a = a0 + static_cast<size_t>(t) * T;
        DotWithColumns(datt.data(), dy0 + static_cast<size_t>(t) * C, vt.data(), hd, n, Tp, 1.0f);
        float weighted = 0.0f;
        for (int s = 0; s < n; ++s) weighted += a[s] * datt[s];
        float* dp = dpre.data() + static_cast<size_t>(t) * T;
        for (int s = 0; s < n; ++s) dp[s] = a[s] * (datt[s] - weighted) * scale;
        WeightedRowSum(dbase + t * row + h * hd, dp, base + C + h * hd, row, n, hd);
      }
      // Columns s: dk_s = sum_{t>=s} dpre[t][s] q_t and dv_s = sum_{t>=s} p[t][s] dy_t,
      // accumulated in registers rather than row by row.
      for (int s = 0; s < T; ++s) {
        const int n = T - s;
        for (int j = 0; j < n; ++j) {
          col_p[static_cast<size_t>(j)] = a0[static_cast<size_t>(s + j) * T + s];
          col_d[static_cast<size_t>(j)] = dpre[static_cast<size_t>(s + j) * T + s];
        }
        WeightedRowSum(dbase + s * row + C + h * hd, col_d.data(), base + s * row + h * hd, row, n, hd);
        WeightedRowSum(dbase + s * row + 2 * C + h * hd, col_p.data(), dy0 + static_cast<size_t>(s) * C, C, n, hd);
      }
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

double SquaredNorm(const float* x, size_t n) {
  // Per-thread partials summed in thread order (an OpenMP reduction's order is unspecified).
  std::vector<double> partial(static_cast<size_t>(omp_get_max_threads()), 0.0);
  int used = 1;
#pragma omp parallel if (Parallel(n))
  {
#pragma omp single
    used = omp_get_num_threads();
    size_t i0, i1;
    ThreadRange(n, &i0, &i1);
    double acc = 0.0;
    for (size_t i = i0; i < i1; ++i) acc += static_cast<double>(x[i]) * x[i];
    partial[static_cast<size_t>(omp_get_thread_num())] = acc;
  }
  double total = 0.0;
  for (int i = 0; i < used; ++i) total += partial[static_cast<size_t>(i)];
  return total;
}

}  // namespace normsweep::trainer::cpu
