// LeaseTrialRequest.max_trials (fused trials) through the Scheduler, over
// both stores (a fresh PostgreSQL database for the second): only trials of
// the first trial's fusion key, in index order; never a trial leased twice
// by concurrent leasers; each fused lease a lease of its own afterwards
// (heartbeat, progress, finish, expiry); max_concurrent_trials; the
// request's bound.
#include <prometheus/registry.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/common/metric_value.h"
#include "tests/common/requests.h"
#include "tests/common/specs.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kLease = absl::Seconds(60);

using testing::MetricValue;

// Post-LN and Pre-LN (placement is part of the fusion key), lrs and seeds
// (which are not): the grid's trials of one placement fuse.
v1::SweepSpec MixedSpec(const std::string& name, int lrs, int seeds) {
  v1::SweepSpec spec = testing::SmallSpec(name);
  for (int i = 0; i < lrs; ++i) spec.add_peak_lrs(1e-3 * (i + 1));
  for (int s = 0; s < seeds; ++s) spec.add_seeds(s);
  return spec;
}

// Every trial a lease handed out: the first, then the fused ones.
std::vector<v1::Trial> AllOf(const v1::LeaseTrialResponse& r) {
  std::vector<v1::Trial> all;
  if (!r.leased()) return all;
  all.push_back(r.trial());
  all.insert(all.end(), r.fused_trials().begin(), r.fused_trials().end());
  return all;
}

class FusedLeaseTest : public testing::BothStoresTest {
 protected:
  void SetUp() override {
    BothStoresTest::SetUp();
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, metrics_, Options());
  }

  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_duration = kLease;
    return o;
  }

  int64_t Submit(const v1::SweepSpec& spec) {
    v1::SubmitSweepRequest r;
    *r.mutable_spec() = spec;
    auto response = scheduler_->SubmitSweep(r);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->sweep().id() : 0;
  }

  int64_t Worker(const std::string& name, Scheduler* scheduler = nullptr) {
    v1::RegisterWorkerRequest r;
    r.set_name(name);
    r.set_hostname("h");
    auto response = (scheduler ? scheduler : scheduler_.get())->RegisterWorker(r);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->worker_id() : 0;
  }

  v1::LeaseTrialResponse Lease(int64_t worker, int max_trials, Scheduler* scheduler = nullptr) {
    v1::LeaseTrialRequest r;
    r.set_worker_id(worker);
    r.set_max_trials(max_trials);
    auto response = (scheduler ? scheduler : scheduler_.get())->LeaseTrial(r);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::LeaseTrialResponse();
  }

  std::vector<v1::Trial> Trials(int64_t sweep, v1::TrialState state = v1::TRIAL_STATE_UNSPECIFIED) {
    auto trials = store_->ListTrials(sweep, state, -1, 10000);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? *trials : std::vector<v1::Trial>();
  }

  FakeClock clock_{testing::kT0};
  prometheus::Registry registry_;
  SchedulerMetrics metrics_{registry_};
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_P(FusedLeaseTest, LeasesOnlyTrialsOfTheFirstTrialsFusionKeyInIndexOrder) {
  const int64_t sweep = Submit(MixedSpec("mixed", 3, 2));  // 2 placements x 3 lrs x 2 seeds
  const int64_t other = Submit(MixedSpec("other", 3, 2));  // same keys, another sweep
  const int64_t w = Worker("w");
  const v1::LeaseTrialResponse r = Lease(w, 4);
  ASSERT_TRUE(r.leased());
  ASSERT_EQ(r.fused_trials_size(), 3);
  const std::vector<v1::Trial> all = AllOf(r);
  // The first four trials of the first trial's placement, by index.
  std::vector<int32_t> expected;
  for (const v1::Trial& t : Trials(sweep)) {
    if (t.config().placement() == r.trial().config().placement() && expected.size() < 4) {
      expected.push_back(t.index());
    }
  }
  std::vector<int32_t> got;
  for (const v1::Trial& t : all) {
    got.push_back(t.index());
    EXPECT_EQ(t.sweep_id(), sweep);
    EXPECT_EQ(t.config().placement(), r.trial().config().placement());
    EXPECT_EQ(t.state(), v1::TRIAL_RUNNING);
    EXPECT_EQ(t.worker_id(), w);
    EXPECT_EQ(t.attempts(), 1);
    EXPECT_EQ(t.lease_expires_at().seconds(), r.lease_expires_at().seconds()) << t.id();
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(Trials(sweep, v1::TRIAL_PENDING).size(), 8u);
  EXPECT_EQ(Trials(other, v1::TRIAL_PENDING).size(), 12u);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_leased_fused_total"), 3);

  // max_trials 1 and 0: one trial, nothing fused.
  for (int max_trials : {1, 0}) {
    const v1::LeaseTrialResponse one = Lease(w, max_trials);
    ASSERT_TRUE(one.leased()) << max_trials;
    EXPECT_THAT(one.fused_trials(), IsEmpty()) << max_trials;
  }
  EXPECT_EQ(Trials(sweep, v1::TRIAL_PENDING).size(), 6u);

  // More than are left of a key: all of them, and no other key's.
  std::map<std::string, size_t> pending;
  for (const v1::Trial& t : Trials(sweep, v1::TRIAL_PENDING)) ++pending[t.config().placement()];
  const v1::LeaseTrialResponse rest = Lease(w, 64);
  ASSERT_TRUE(rest.leased());
  const std::string placement = rest.trial().config().placement();
  for (const v1::Trial& t : AllOf(rest)) EXPECT_EQ(t.config().placement(), placement);
  EXPECT_EQ(AllOf(rest).size(), pending[placement]);
  for (const v1::Trial& t : Trials(sweep, v1::TRIAL_PENDING)) EXPECT_NE(t.config().placement(), placement);
  EXPECT_EQ(Trials(other, v1::TRIAL_PENDING).size(), 12u);
}

TEST_P(FusedLeaseTest, ConcurrentFusedLeasersNeverGetTheSameTrial) {
  // Two schedulers (PostgreSQL: two replicas, each on a store of its own),
  // two workers each, leasing up to 3 at a time until the queue is empty.
  std::unique_ptr<db::Store> other_store =
      GetParam() == testing::StoreKind::kPostgres ? OpenAnother() : nullptr;
  prometheus::Registry other_registry;
  SchedulerMetrics other_metrics(other_registry);
  Scheduler other(other_store ? *other_store : *store_, clock_, other_metrics, Options());
  Scheduler* schedulers[2] = {scheduler_.get(), &other};
  const int64_t sweep = Submit(MixedSpec("race", 8, 4));  // 64 trials
  constexpr int kWorkers = 4;
  std::vector<int64_t> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(Worker(absl::StrCat("w", i), schedulers[i % 2]));
  std::vector<std::vector<v1::Trial>> got(kWorkers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      for (;;) {
        const v1::LeaseTrialResponse r = Lease(workers[i], 3, schedulers[i % 2]);
        if (!r.leased()) return;
        std::set<std::string> placements;
        for (const v1::Trial& t : AllOf(r)) {
          placements.insert(t.config().placement());
          got[i].push_back(t);
        }
        EXPECT_EQ(placements.size(), 1u);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<int64_t, int> times;
  for (int i = 0; i < kWorkers; ++i) {
    for (const v1::Trial& t : got[i]) {
      ++times[t.id()];
      EXPECT_EQ(t.worker_id(), workers[i]);
    }
  }
  EXPECT_EQ(times.size(), 64u);
  for (const auto& [id, n] : times) EXPECT_EQ(n, 1) << "trial_id " << id;
  for (const v1::Trial& t : Trials(sweep)) {
    EXPECT_EQ(t.state(), v1::TRIAL_RUNNING) << t.id();
    EXPECT_EQ(t.attempts(), 1) << t.id();
  }
}

TEST_P(FusedLeaseTest, LeasingTheSameIdsAtOnceLeasesEachTrialOnce) {
  // The store's race head on: leasers ask for overlapping windows of trials
  // by id (half of them on a second store: another replica), while single
  // leases take the queue's head too.
  std::unique_ptr<db::Store> other_store =
      GetParam() == testing::StoreKind::kPostgres ? OpenAnother() : nullptr;
  db::Store* stores[2] = {store_.get(), other_store ? other_store.get() : store_.get()};
  const int64_t sweep = Submit(MixedSpec("ids", 8, 4));  // 64 trials
  std::vector<int64_t> ids;
  for (const v1::Trial& t : Trials(sweep)) ids.push_back(t.id());
  constexpr int kLeasers = 6;
  std::vector<int64_t> workers;
  for (int i = 0; i < kLeasers; ++i) workers.push_back(Worker(absl::StrCat("w", i)));
  std::vector<std::vector<int64_t>> got(kLeasers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kLeasers; ++i) {
    threads.emplace_back([&, i] {
      db::Store& store = *stores[i % 2];
      for (int round = 0; round < 8; ++round) {
        if (i % 3 == 2) {
          auto one = store.LeaseTrial(workers[i], testing::kT0, kLease);
          ASSERT_TRUE(one.ok()) << one.status();
          if (one->has_value()) got[i].push_back((*one)->id());
        } else {
          // Overlapping windows of 16, so that leasers keep meeting.
          std::vector<int64_t> window;
          for (int k = 0; k < 16; ++k) window.push_back(ids[(i * 11 + round * 7 + k) % ids.size()]);
          auto many = store.LeaseTrialsById(workers[i], sweep, window, testing::kT0, kLease);
          ASSERT_TRUE(many.ok()) << many.status();
          for (const v1::Trial& t : *many) got[i].push_back(t.id());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<int64_t, int> times;
  for (const auto& g : got) {
    for (int64_t id : g) ++times[id];
  }
  for (const auto& [id, n] : times) EXPECT_EQ(n, 1) << "trial_id " << id;
  // Every RUNNING trial is one some leaser was told of, on its first attempt.
  size_t running = 0;
  for (const v1::Trial& t : Trials(sweep)) {
    if (t.state() != v1::TRIAL_RUNNING) continue;
    ++running;
    EXPECT_EQ(t.attempts(), 1) << t.id();
    EXPECT_TRUE(times.contains(t.id())) << t.id();
  }
  EXPECT_EQ(running, times.size());
  EXPECT_GT(running, 16u);
}

TEST_P(FusedLeaseTest, EachFusedLeaseIsALeaseOfItsOwnAndExpiresOnce) {
  const int64_t sweep = Submit(MixedSpec("expiry", 2, 2));  // 4 trials per placement
  const int64_t w = Worker("w");
  const v1::LeaseTrialResponse r = Lease(w, 4);
  ASSERT_EQ(r.fused_trials_size(), 3);
  const std::vector<v1::Trial> leased = AllOf(r);

  // Heartbeats renew all of them; progress and a finish go to one of them.
  clock_.Advance(kLease / 2);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(w);
  for (const v1::Trial& t : leased) {
    v1::TrialLease* l = hb.add_leases();
    l->set_trial_id(t.id());
    l->set_attempt(t.attempts());
  }
  auto beat = scheduler_->Heartbeat(hb);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_THAT(beat->lost_trial_ids(), IsEmpty());
  v1::ReportProgressRequest progress = testing::ProgressOf(w, leased[2]);
  v1::MetricPoint* p = progress.add_points();
  p->set_step(10);
  p->set_train_loss(4.0);
  ASSERT_TRUE(scheduler_->ReportProgress(progress).ok());
  v1::FinishTrialRequest finish = testing::FinishOf(w, leased[1], v1::TRIAL_SUCCEEDED);
  finish.mutable_result()->set_final_val_loss(3.0);
  ASSERT_TRUE(scheduler_->FinishTrial(finish).ok());

  // The worker goes silent: the other three go back to the queue once each
  // (the heartbeat renewed them until a lease from its time).
  clock_.Advance(kLease + absl::Seconds(1));
  ASSERT_TRUE(scheduler_->RunMaintenance().ok());
  ASSERT_TRUE(scheduler_->RunMaintenance().ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_attempts_requeued_total", {{"reason", "lease_expired"}}), 3);
  for (const v1::Trial& t : leased) {
    v1::GetTrialRequest get;
    get.set_trial_id(t.id());
    auto stored = scheduler_->GetTrial(get);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->trial().attempts(), 1) << t.id();
    EXPECT_EQ(stored->attempts_size(), 1) << t.id();
    if (t.id() == leased[1].id()) {
      EXPECT_EQ(stored->trial().state(), v1::TRIAL_SUCCEEDED);
    } else {
      EXPECT_EQ(stored->trial().state(), v1::TRIAL_PENDING) << t.id();
      EXPECT_EQ(stored->trial().interruptions(), 1) << t.id();
    }
  }

  // Leased again fused: each a second attempt, the first's progress gone.
  const int64_t w2 = Worker("w2");
  const v1::LeaseTrialResponse again = Lease(w2, 4);
  std::vector<int64_t> ids;
  for (const v1::Trial& t : AllOf(again)) {
    ids.push_back(t.id());
    EXPECT_EQ(t.attempts(), 2) << t.id();
    EXPECT_EQ(t.last_step(), 0) << t.id();
  }
  EXPECT_EQ(ids, (std::vector<int64_t>{leased[0].id(), leased[2].id(), leased[3].id()}));
  v1::GetTrialRequest get;
  get.set_trial_id(leased[2].id());
  auto history = scheduler_->GetTrial(get);
  ASSERT_TRUE(history.ok());
  EXPECT_THAT(history->metrics(), IsEmpty());
  EXPECT_EQ(Trials(sweep, v1::TRIAL_PENDING).size(), 4u);  // the other placement
}

TEST_P(FusedLeaseTest, NeverExceedsMaxConcurrentTrials) {
  v1::SweepSpec spec = MixedSpec("limited", 4, 2);
  spec.set_max_concurrent_trials(3);
  const int64_t sweep = Submit(spec);
  const int64_t w = Worker("w"), w2 = Worker("w2");
  const v1::LeaseTrialResponse r = Lease(w, 8);
  ASSERT_TRUE(r.leased());
  EXPECT_EQ(r.fused_trials_size(), 2);
  EXPECT_FALSE(Lease(w2, 8).leased());
  ASSERT_TRUE(scheduler_->FinishTrial(testing::FinishOf(w, r.fused_trials(0), v1::TRIAL_SUCCEEDED)).ok());
  const v1::LeaseTrialResponse one = Lease(w2, 8);
  ASSERT_TRUE(one.leased());
  EXPECT_THAT(one.fused_trials(), IsEmpty());
  EXPECT_EQ(Trials(sweep, v1::TRIAL_RUNNING).size(), 3u);
}

TEST_P(FusedLeaseTest, MaxTrialsOutOfRangeIsInvalidNamingTheField) {
  Submit(MixedSpec("bounds", 1, 1));
  const int64_t w = Worker("w");
  for (int bad : {-1, 65}) {
    v1::LeaseTrialRequest r;
    r.set_worker_id(w);
    r.set_max_trials(bad);
    auto response = scheduler_->LeaseTrial(r);
    ASSERT_FALSE(response.ok()) << bad;
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(response.status().message(), HasSubstr("max_trials"));
    EXPECT_THAT(response.status().message(), HasSubstr(absl::StrCat(bad)));
    EXPECT_THAT(response.status().message(), HasSubstr("64"));
  }
  EXPECT_TRUE(Lease(w, 64).leased());
}

INSTANTIATE_TEST_SUITE_P(Stores, FusedLeaseTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::scheduler
