// A sweep written into a store as a scheduler and a worker would leave it
// mid-run: the sweep created, a worker registered and every trial leased to
// it, for tests that then write progress and outcomes (requests.h) through
// the store before a real scheduler serves them.
#ifndef NORMSWEEP_TESTS_COMMON_LEASED_SWEEP_H_
#define NORMSWEEP_TESTS_COMMON_LEASED_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/store.h"

namespace normsweep::testing {

struct LeasedSweep {
  int64_t sweep_id = 0;
  int64_t worker = 0;
  std::vector<v1::Trial> trials;  // in the order the store leased them
};

// spec's sweep of `trials` created at `now`, worker `worker_name`
// registered, and every trial leased to it at `now` for ten minutes.
absl::StatusOr<LeasedSweep> CreateLeasedSweep(db::Store& store, const v1::SweepSpec& spec,
                                              const std::vector<db::NewTrial>& trials, const std::string& worker_name,
                                              absl::Time now);

// Two trials, Post-LN then Pre-LN (indexes 0 and 1), lr 1e-3, 100 steps: the
// small sweep the CLI tests lease and then report into.
std::vector<db::NewTrial> PostPreTrials();

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_LEASED_SWEEP_H_
