// SchedulerMetrics: every name is normsweep_scheduler_*, and
// trials_completed_total counts cancelled trials as the trials{state} gauge
// does: the pending trials a CancelSweep cancels, a running trial that ends
// cancelled, a lease of a cancelled sweep that expires. The Scheduler over
// the in-memory store with an injected clock: no sockets, no sleeping.
#include "scheduler/scheduler_metrics.h"

#include <prometheus/registry.h>

#include <map>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "db/memory_store.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/common/metric_value.h"
#include "tests/common/requests.h"

namespace normsweep::scheduler {
namespace {

using testing::MetricValue;

TEST(SchedulerMetricsNames, EveryFamilyIsTheSchedulers) {
  prometheus::Registry registry;
  SchedulerMetrics metrics(registry);
  int families = 0;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    ++families;
    EXPECT_TRUE(absl::StartsWith(family.name, "normsweep_scheduler_")) << family.name;
  }
  EXPECT_GE(families, 10);
}

TEST(SchedulerMetricsNames, TrialsCancelledAreCompletedAsCancelled) {
  prometheus::Registry registry;
  SchedulerMetrics metrics(registry);
  const std::map<std::string, std::string> cancelled = {{"outcome", "CANCELLED"}};
  EXPECT_EQ(MetricValue(registry, "normsweep_scheduler_trials_completed_total", cancelled), 0);
  metrics.TrialsCancelled(3);
  metrics.TrialsCancelled(0);
  metrics.TrialsCompleted(v1::TRIAL_CANCELLED);
  EXPECT_EQ(MetricValue(registry, "normsweep_scheduler_trials_completed_total", cancelled), 4);
  EXPECT_EQ(MetricValue(registry, "normsweep_scheduler_trials_completed_total", {{"outcome", "SUCCEEDED"}}), 0);
}

class CancelledCountTest : public ::testing::Test {
 protected:
  CancelledCountTest() : metrics_(registry_), scheduler_(store_, clock_, metrics_, Options()) {}

  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_duration = absl::Seconds(60);
    o.worker_timeout = absl::Seconds(90);
    return o;
  }

  // One placement, warm-up and lr; a trial per seed.
  int64_t Submit(int seeds) {
    v1::SubmitSweepRequest r;
    v1::SweepSpec* s = r.mutable_spec();
    s->set_name("cancelled");
    s->mutable_base()->set_d_model(32);
    s->mutable_base()->set_heads(2);
    s->add_placements("pre");
    s->add_warmup_steps(0);
    s->add_peak_lrs(1e-3);
    for (int i = 0; i < seeds; ++i) s->add_seeds(i);
    auto resp = scheduler_.SubmitSweep(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->sweep().id() : 0;
  }

  v1::Trial Lease(int64_t worker) {
    v1::LeaseTrialRequest r;
    r.set_worker_id(worker);
    auto resp = scheduler_.LeaseTrial(r);
    EXPECT_TRUE(resp.ok() && resp->leased()) << (resp.ok() ? resp->ShortDebugString() : resp.status().ToString());
    return resp.ok() ? resp->trial() : v1::Trial();
  }

  double Completed(const char* outcome) {
    return MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", outcome}}).value_or(-1);
  }
  double Trials(const char* state) {
    return MetricValue(registry_, "normsweep_scheduler_trials", {{"state", state}}).value_or(-1);
  }

  db::MemoryStore store_;
  FakeClock clock_;
  prometheus::Registry registry_;
  SchedulerMetrics metrics_;
  Scheduler scheduler_;
};

TEST_F(CancelledCountTest, CompletedCountsEveryTrialTheStateGaugeCountsAsCancelled) {
  const int64_t sweep = Submit(/*seeds=*/5);
  v1::RegisterWorkerRequest reg;
  reg.set_name("w");
  auto worker = scheduler_.RegisterWorker(reg);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const v1::Trial finished = Lease(worker->worker_id());
  const v1::Trial expiring = Lease(worker->worker_id());

  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  ASSERT_TRUE(scheduler_.CancelSweep(cancel).ok());
  EXPECT_EQ(Completed("CANCELLED"), 3) << "the 3 pending trials the cancel took to CANCELLED";
  ASSERT_TRUE(scheduler_.CancelSweep(cancel).ok());
  EXPECT_EQ(Completed("CANCELLED"), 3) << "cancelling again cancels nothing more";

  // A running trial of the cancelled sweep ends cancelled; another's lease
  // expires.
  ASSERT_TRUE(scheduler_.FinishTrial(testing::FinishOf(worker->worker_id(), finished, v1::TRIAL_CANCELLED)).ok());
  EXPECT_EQ(Completed("CANCELLED"), 4);
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(Completed("CANCELLED"), 5) << "trial " << expiring.id() << "'s lease expired";

  // The database-wide gauge, from the same store, agrees.
  EXPECT_EQ(Trials("CANCELLED"), 5);
  EXPECT_EQ(Trials("PENDING"), 0);
  EXPECT_EQ(Trials("RUNNING"), 0);
  for (const char* outcome : {"SUCCEEDED", "DIVERGED", "FAILED"}) EXPECT_EQ(Completed(outcome), 0) << outcome;
}

}  // namespace
}  // namespace normsweep::scheduler
