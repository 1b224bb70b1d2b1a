// The set-up of the PostgreSQL-only tests (postgres_*_test.cc): a database of
// their own on the shared throwaway server, the real store and a plain
// connection over it, and a sweep leased to a worker. Each helper fails the
// test and returns an empty value ("", null, fewer trials) when it cannot do
// its part; every caller checks the result fatally.
#ifndef NORMSWEEP_TESTS_DB_POSTGRES_FIXTURE_H_
#define NORMSWEEP_TESTS_DB_POSTGRES_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/pg_connection.h"
#include "db/store.h"

namespace normsweep::db {

// A new database named after prefix (testing::FreshDatabase).
std::string NewDatabase(const std::string& prefix);
std::unique_ptr<PgConnection> Connect(const std::string& conninfo);
// A PostgresStore on conninfo (the migrations applied).
std::unique_ptr<Store> OpenStore(const std::string& conninfo);

// A sweep of n Pre-LN trials (lr 1e-3), created at kT0. max_interruptions
// 0: the default (20).
absl::StatusOr<CreateSweepResult> CreateSweepOf(Store& store, const std::string& name, int n, int max_attempts,
                                                int max_interruptions = 0);
// Registers worker "w" at kT0.
int64_t RegisterWorker(Store& store);
// n trials leased by worker w at kT0 for `term`.
std::vector<v1::Trial> LeaseTrials(Store& store, int64_t w, int n, absl::Duration term);

// A store on a new database holding a sweep of n trials (CreateSweepOf),
// all leased by worker "w" for `term`. Fails fatally: call it through
// ASSERT_NO_FATAL_FAILURE.
struct LeasedStore {
  std::string conninfo;
  std::unique_ptr<Store> store;
  int64_t worker = 0;
  std::vector<v1::Trial> trials;
};
void OpenLeasedStore(const std::string& name, int n, absl::Duration term, LeasedStore* s);

}  // namespace normsweep::db

#endif  // NORMSWEEP_TESTS_DB_POSTGRES_FIXTURE_H_
