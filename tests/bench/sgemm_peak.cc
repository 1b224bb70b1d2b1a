// sgemm_peak: the machine's single-precision GEMM throughput through OpenBLAS,
// with 1 and 2 threads, on square sizes and on the trainer's own shapes. It is
// the ceiling that tests/bench/trainer_vs_pytorch.py reports the trainer's
// GFLOP/s against. A benchmark, not a test: it prints figures and exits 0.
//
// Usage: sgemm_peak [--threads 1,2] [--seconds S]   (S: time per size, default 0.5)
// Output: one line per (threads, size), then a last line of JSON:
//   {"type":"sgemm_peak","best_gflops":{"1":..,"2":..},"best_shape":{"1":"..","2":".."},
//    "trainer_shapes_gflops":{"1":..,"2":..}}
// trainer_shapes_gflops is the best over the trainer-shaped products only: the
// realistic ceiling for the bench config, below the square-matrix peak.

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/bench/thread_counts.h"

namespace {

struct Shape {
  // C [m, n] = op(A) [m, k] * op(B) [k, n], row-major. trans_a: A stored [k, m]
  // (a weight gradient dW = dY^T X); trans_b: B stored [n, k], as an nn.Linear
  // weight is in the forward pass.
  int m, n, k;
  bool trans_a, trans_b;
  const char* what;
};

// Square sizes, then the bench config's matmuls (B*T = 32*64 = 2048 rows,
// d = 128, d_ff = 256, vocab 256).
constexpr Shape kShapes[] = {
    {512, 512, 512, false, false, "square"},
    {1024, 1024, 1024, false, false, "square"},
    {2048, 2048, 2048, false, false, "square"},
    {2048, 384, 128, false, true, "qkv forward"},
    {2048, 256, 128, false, true, "fc1/head forward"},
    {2048, 128, 256, false, true, "fc2 forward"},
    {2048, 128, 384, false, false, "qkv input grad"},
    {384, 128, 2048, true, false, "qkv weight grad"},
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best GFLOP/s over repeated calls for about `seconds` (after one warm-up call).
double Measure(const Shape& s, double seconds) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const int lda = s.trans_a ? s.m : s.k;
  const int ldb = s.trans_b ? s.k : s.n;
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), lda,
                b.data(), ldb, 0.0f, c.data(), s.n);
  };
  run();
  const double flops = 2.0 * s.m * s.n * s.k;
  double best = 0.0;
  const double start = Now();
  int reps = 0;
  while (reps < 3 || Now() - start < seconds) {
    const double t0 = Now();
    run();
    const double t = Now() - t0;
    best = std::max(best, flops / t * 1e-9);
    ++reps;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = normsweep::bench::ParseThreadCounts("sgemm_peak", argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0.0)) {
        std::fprintf(stderr, "sgemm_peak: --seconds: expected a positive number\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: sgemm_peak [--threads 1,2] [--seconds S]\n");
      return 2;
    }
  }
  std::printf("OpenBLAS %s, core %s\n", openblas_get_config(), openblas_get_corename());
  std::string json = "{\"type\":\"sgemm_peak\",\"best_gflops\":{";
  std::string json_shape = "\"best_shape\":{";
  std::string json_trainer = "\"trainer_shapes_gflops\":{";
  for (size_t t = 0; t < threads.size(); ++t) {
    openblas_set_num_threads(threads[t]);
    double best = 0.0, best_trainer = 0.0;
    std::string best_name;
    for (const Shape& s : kShapes) {
      const double g = Measure(s, seconds);
      char name[64];
      std::snprintf(name, sizeof name, "%dx%dx%d%s%s", s.m, s.n, s.k, s.trans_a ? " A^T" : "",
                    s.trans_b ? " B^T" : "");
      std::printf("threads %d  m x n x k %-18s %-24s %8.1f GFLOP/s\n", threads[t], name, s.what, g);
      std::fflush(stdout);
      if (g > best) best = g, best_name = name;
      if (std::strcmp(s.what, "square") != 0) best_trainer = std::max(best_trainer, g);
    }
    std::printf("threads %d  best %.1f GFLOP/s (%s); best on trainer shapes %.1f GFLOP/s\n",
                threads[t], best, best_name.c_str(), best_trainer);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s\"%d\":%.2f", t ? "," : "", threads[t], best);
    json += buf;
    std::snprintf(buf, sizeof buf, "%s\"%d\":\"%s\"", t ? "," : "", threads[t], best_name.c_str());
    json_shape += buf;
    std::snprintf(buf, sizeof buf, "%s\"%d\":%.2f", t ? "," : "", threads[t], best_trainer);
    json_trainer += buf;
  }
  std::printf("%s},%s},%s}}\n", json.c_str(), json_shape.c_str(), json_trainer.c_str());
  return 0;
}
