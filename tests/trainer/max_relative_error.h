// The parity tests' yardstick (CPU vs PyTorch, CUDA vs CPU): the largest
// absolute difference over the largest reference magnitude.
#ifndef NORMSWEEP_TESTS_TRAINER_MAX_RELATIVE_ERROR_H_
#define NORMSWEEP_TESTS_TRAINER_MAX_RELATIVE_ERROR_H_

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace normsweep::testing {

// max |got - want| / max |want| over [0, n) (the plain max difference when
// want is all zeros).
inline double MaxRelativeError(const float* got, const float* want, size_t n) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_TRAINER_MAX_RELATIVE_ERROR_H_
