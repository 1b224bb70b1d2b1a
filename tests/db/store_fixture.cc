#include "tests/db/store_fixture.h"

#include "gtest/gtest.h"
#include "tests/common/requests.h"

namespace normsweep::db {

v1::SweepSpec StoreTest::Spec(const std::string& name, int trials, int priority, int max_attempts,
                              int max_concurrent) {
  v1::SweepSpec spec;
  spec.set_name(name);
  spec.set_priority(priority);
  spec.set_max_attempts(max_attempts);
  spec.set_max_concurrent_trials(max_concurrent);
  for (int i = 0; i < trials; ++i) spec.add_seeds(i);
  return spec;
}

std::vector<NewTrial> StoreTest::Trials(int n) {
  std::vector<NewTrial> out;
  for (int i = 0; i < n; ++i) {
    NewTrial t;
    t.index = i;
    t.config.set_placement(i % 2 == 0 ? "post" : "pre");
    t.config.set_lr(1e-3 * (i + 1));
    t.config.set_warmup_steps(100 * i);
    t.config.set_seed(i);
    t.config.set_d_model(64);
    t.variant = i % 3 == 0 ? "layers=12" : "";
    out.push_back(t);
  }
  return out;
}

v1::Sweep StoreTest::Create(const std::string& name, int trials, int priority, int max_attempts, int max_concurrent,
                            int max_interruptions) {
  v1::SweepSpec spec = Spec(name, trials, priority, max_attempts, max_concurrent);
  spec.set_max_interruptions(max_interruptions);
  auto r = store_->CreateSweep("", spec, Trials(trials), kT0);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->sweep : v1::Sweep();
}

int64_t StoreTest::Worker(const std::string& name) {
  v1::RegisterWorkerRequest req;
  req.set_name(name);
  req.set_hostname("host");
  req.add_devices("cpu");
  auto id = store_->RegisterWorker(req, kT0);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : 0;
}

v1::Trial StoreTest::Lease(int64_t worker, absl::Time now) {
  auto t = store_->LeaseTrial(worker, now, kLease);
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t.ok() && t->has_value());
  return t.ok() ? t->value_or(v1::Trial()) : v1::Trial();
}

absl::StatusOr<v1::Trial> StoreTest::Finish(int64_t worker, const v1::Trial& t, v1::TrialState outcome,
                                            absl::Time now) {
  v1::FinishTrialRequest req = testing::FinishOf(worker, t, outcome);
  req.mutable_result()->set_final_val_loss(2.5);
  req.mutable_result()->set_tokens_per_s(1000);
  return store_->FinishTrial(req, now);
}

}  // namespace normsweep::db
