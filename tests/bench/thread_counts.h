// The --threads argument of the peak benchmarks (sgemm_peak, fma_peak): a
// comma list of positive thread counts. Header-only.
#ifndef NORMSWEEP_TESTS_BENCH_THREAD_COUNTS_H_
#define NORMSWEEP_TESTS_BENCH_THREAD_COUNTS_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace normsweep::bench {

// "1,2" -> {1, 2}; anything else exits 2 with a message naming program.
inline std::vector<int> ParseThreadCounts(const char* program, const char* arg) {
  std::vector<int> out;
  const std::string s = arg;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const int n = std::atoi(s.substr(pos, comma - pos).c_str());
    if (n <= 0) {
      std::fprintf(stderr, "%s: --threads: expected a comma list of positive counts, got %s\n", program, arg);
      std::exit(2);
    }
    out.push_back(n);
    pos = comma + 1;
  }
  return out;
}

}  // namespace normsweep::bench

#endif  // NORMSWEEP_TESTS_BENCH_THREAD_COUNTS_H_
