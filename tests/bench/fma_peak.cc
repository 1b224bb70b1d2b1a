// fma_peak: the machine's single-precision FMA limit, the ceiling that the
// trainer's share is measured against (issue 26: "at least 60% of the FMA
// limit for each variant the machine runs"). Each thread runs independent
// FMA chains (enough of them to cover the FMA latency on two ports: 12 per
// thread) on registers only, with 256-bit (AVX2 + FMA) and, where the CPU has
// it, 512-bit (AVX-512F) vectors; nothing touches memory, so this is the
// arithmetic peak, above any GEMM. A benchmark, not a test: it prints figures
// and exits 0.
//
// Usage: fma_peak [--threads 1,2] [--seconds S]   (S per measurement, default 0.5)
// Output: one line per (width, threads), then a last line of JSON:
//   {"type":"fma_peak","gflops":{"256":{"1":..,"2":..},"512":{"1":..,"2":..}}}
// A width the CPU lacks is left out (and said so on its line).
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/thread_counts.h"

namespace {

constexpr int kChains = 12;
constexpr long kInner = 1 << 16;  // iterations between clock reads

// kInner iterations of kChains FMAs on 8-float vectors; returns a value that
// depends on every chain, so that nothing is optimised away.
__attribute__((target("avx2,fma"), noinline)) float Run256(long rounds, float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long r = 0; r < rounds; ++r) {
    for (long k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0] + out[7];
}

__attribute__((target("avx512f"), noinline)) float Run512(long rounds, float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long r = 0; r < rounds; ++r) {
    for (long k = 0; k < kInner; ++k) {
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    }
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0] + out[15];
}

// GFLOP/s of `threads` threads each running fn for about `seconds`.
double Measure(float (*fn)(long, float), int lanes, int threads, double seconds) {
  // Calibrate the rounds on one thread, so that each measurement runs ~seconds.
  long rounds = 1;
  while (true) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float sink = fn(rounds, 1.0f);
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > seconds / 4 || rounds > (1L << 30)) {
      rounds = std::max(1L, static_cast<long>(rounds * seconds / std::max(s, 1e-9)));
      break;
    }
    rounds *= 2;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  std::vector<float> sinks(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      sinks[t] = fn(rounds, static_cast<float>(t));
    });
  }
  while (ready.load() < threads) {
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = 2.0 * lanes * kChains * static_cast<double>(kInner) * rounds * threads;
  return flops / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = normsweep::bench::ParseThreadCounts("fma_peak", argv[++i]);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: fma_peak [--threads 1,2] [--seconds S]\n");
      return 2;
    }
  }
  __builtin_cpu_init();
  struct Width {
    int bits, lanes;
    bool supported;
    float (*fn)(long, float);
  };
  const Width widths[] = {
      {256, 8, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), Run256},
      {512, 16, __builtin_cpu_supports("avx512f") != 0, Run512},
  };
  std::map<int, std::map<int, double>> gflops;
  for (const Width& w : widths) {
    if (!w.supported) {
      std::printf("%d-bit  not measured: this CPU has no %s\n", w.bits, w.bits == 512 ? "AVX-512F" : "AVX2 + FMA");
      continue;
    }
    for (int t : threads) {
      gflops[w.bits][t] = Measure(w.fn, w.lanes, t, seconds);
      std::printf("%d-bit  threads %d  %7.1f GFLOP/s  (%d independent FMA chains per thread)\n", w.bits, t,
                  gflops[w.bits][t], kChains);
    }
  }
  std::string json = "{\"type\":\"fma_peak\",\"gflops\":{";
  bool first_width = true;
  for (const auto& [bits, by_threads] : gflops) {
    json += (first_width ? "\"" : ",\"") + std::to_string(bits) + "\":{";
    first_width = false;
    bool first = true;
    for (const auto& [t, g] : by_threads) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s\"%d\":%.1f", first ? "" : ",", t, g);
      json += buf;
      first = false;
    }
    json += "}";
  }
  json += "}}";
  std::printf("%s\n", json.c_str());
  return 0;
}
