// The base of the store suites (store_*_test.cc): every test runs against
// MemoryStore and against PostgresStore on a throwaway PostgreSQL (a fresh
// database per test, tests/common/store_kinds.h), at kT0, with a sweep, a
// worker, a lease or an outcome made in one call each.
#ifndef NORMSWEEP_TESTS_DB_STORE_FIXTURE_H_
#define NORMSWEEP_TESTS_DB_STORE_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/store.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"

namespace normsweep::db {

using testing::kT0;
inline const absl::Duration kLease = absl::Seconds(30);

class StoreTest : public testing::BothStoresTest {
 protected:
  // A spec named `name` with seeds 0 .. trials-1.
  static v1::SweepSpec Spec(const std::string& name, int trials, int priority = 0, int max_attempts = 3,
                            int max_concurrent = 0);
  // n trials: post and pre alternately, lr 1e-3 * (i + 1), warm-up 100 * i,
  // seed i, d_model 64; every third one of variant "layers=12".
  static std::vector<NewTrial> Trials(int n);

  // A sweep of Spec and Trials created at kT0. max_interruptions 0: the
  // default (the stores fill it in, as the expander does).
  v1::Sweep Create(const std::string& name, int trials, int priority = 0, int max_attempts = 3,
                   int max_concurrent = 0, int max_interruptions = 0);
  // A worker on "host" with one device, "cpu", registered at kT0.
  int64_t Worker(const std::string& name = "w");
  // The next trial leased to worker for kLease; expects there is one.
  v1::Trial Lease(int64_t worker, absl::Time now = kT0);
  // Finishes worker's attempt at t with `outcome`, final loss 2.5.
  absl::StatusOr<v1::Trial> Finish(int64_t worker, const v1::Trial& t, v1::TrialState outcome,
                                   absl::Time now = kT0);
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_TESTS_DB_STORE_FIXTURE_H_
