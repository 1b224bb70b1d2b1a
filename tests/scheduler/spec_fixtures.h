// The sweep specs of the spec parser's and the expander's tests, and how
// they read a refusal. Header-only.
#ifndef NORMSWEEP_TESTS_SCHEDULER_SPEC_FIXTURES_H_
#define NORMSWEEP_TESTS_SCHEDULER_SPEC_FIXTURES_H_

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep.pb.h"
#include "tests/common/specs.h"

namespace normsweep::testing {

// Post-LN and Pre-LN x warm-up {0, 4000} x lr {1e-4, 5e-4, 1e-3} x seeds {1, 2}.
inline v1::SweepSpec Grid() {
  v1::SweepSpec spec = SmallSpec("grid");
  spec.add_warmup_steps(4000);
  spec.add_peak_lrs(1e-4);
  spec.add_peak_lrs(5e-4);
  spec.add_peak_lrs(1e-3);
  spec.add_seeds(1);
  spec.add_seeds(2);
  return spec;
}

// Grid's model, placements and seeds with `samples` random (warm-up, lr)
// points: lr log-uniform in [lr_min, 1e-2], warm-up in [0, warmup_max].
inline v1::SweepSpec Random(int samples = 20, double lr_min = 1e-4, int warmup_max = 100, int seed = 3) {
  v1::SweepSpec spec = Grid();
  spec.clear_warmup_steps();
  spec.clear_peak_lrs();
  v1::RandomSearch* rs = spec.mutable_random_search();
  rs->set_samples(samples);
  rs->set_lr_min(lr_min);
  rs->set_lr_max(1e-2);
  rs->set_warmup_min(0);
  rs->set_warmup_max(warmup_max);
  rs->set_seed(seed);
  return spec;
}

// Issue 24: the five placements, sandwich stored as peri, and the norm
// switches as extra axes.
inline v1::SweepSpec AllPlacements() {
  v1::SweepSpec spec = Grid();
  spec.clear_placements();
  for (const char* p : {"post", "pre", "sandwich", "deepnorm", "mix"}) spec.add_placements(p);
  return spec;
}

// The message of an INVALID_ARGUMENT status (a failure for any other code).
inline std::string Message(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_SCHEDULER_SPEC_FIXTURES_H_
