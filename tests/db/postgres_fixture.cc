#include "tests/db/postgres_fixture.h"

#include "gtest/gtest.h"
#include "tests/common/fresh_database.h"
#include "tests/common/test_time.h"

namespace normsweep::db {

using testing::kT0;

std::string NewDatabase(const std::string& prefix) {
  auto conninfo = testing::FreshDatabase(prefix);
  EXPECT_TRUE(conninfo.ok()) << conninfo.status();
  return conninfo.ok() ? *conninfo : "";
}

std::unique_ptr<PgConnection> Connect(const std::string& conninfo) {
  auto conn = testing::Connect(conninfo);
  EXPECT_TRUE(conn.ok()) << conn.status();
  return conn.ok() ? *std::move(conn) : nullptr;
}

std::unique_ptr<Store> OpenStore(const std::string& conninfo) {
  auto store = testing::OpenStore(conninfo);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

absl::StatusOr<CreateSweepResult> CreateSweepOf(Store& store, const std::string& name, int n, int max_attempts,
                                                int max_interruptions) {
  v1::SweepSpec spec;
  spec.set_name(name);
  spec.set_max_attempts(max_attempts);
  spec.set_max_interruptions(max_interruptions);
  std::vector<NewTrial> trials(n);
  for (int i = 0; i < n; ++i) {
    trials[i].index = i;
    trials[i].config.set_placement("pre");
    trials[i].config.set_lr(1e-3);
  }
  return store.CreateSweep("", spec, trials, kT0);
}

int64_t RegisterWorker(Store& store) {
  v1::RegisterWorkerRequest reg;
  reg.set_name("w");
  auto w = store.RegisterWorker(reg, kT0);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : 0;
}

std::vector<v1::Trial> LeaseTrials(Store& store, int64_t w, int n, absl::Duration term) {
  std::vector<v1::Trial> leased;
  for (int i = 0; i < n; ++i) {
    auto t = store.LeaseTrial(w, kT0, term);
    EXPECT_TRUE(t.ok() && t->has_value()) << t.status();
    if (!t.ok() || !t->has_value()) break;
    leased.push_back(**t);
  }
  return leased;
}

void OpenLeasedStore(const std::string& name, int n, absl::Duration term, LeasedStore* s) {
  s->conninfo = NewDatabase(name);
  s->store = OpenStore(s->conninfo);
  ASSERT_NE(s->store, nullptr);
  ASSERT_TRUE(CreateSweepOf(*s->store, name, n, 1).ok());
  s->worker = RegisterWorker(*s->store);
  s->trials = LeaseTrials(*s->store, s->worker, n, term);
  ASSERT_EQ(s->trials.size(), static_cast<size_t>(n));
}

}  // namespace normsweep::db
