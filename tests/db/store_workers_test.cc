// Workers in both stores (store_fixture.h): a restarted worker's
// registrations and leases, heartbeats that renew leases and report lost
// ones, liveness, the workers list, and their finished trials' speeds.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/requests.h"
#include "tests/db/store_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using StoreWorkersTest = StoreTest;

TEST_P(StoreWorkersTest, ARestartedWorkerSupersedesItsEarlierRegistrations) {
  v1::RegisterWorkerRequest req;
  req.set_name("box");
  req.set_hostname("h1");
  auto first = store_->RegisterWorker(req, kT0);
  auto second = store_->RegisterWorker(req, kT0 + absl::Seconds(1));
  req.set_hostname("h2");  // the same name elsewhere is another worker
  auto other = store_->RegisterWorker(req, kT0 + absl::Seconds(2));
  req.set_hostname("h1");
  auto third = store_->RegisterWorker(req, kT0 + absl::Seconds(3));
  ASSERT_TRUE(first.ok() && second.ok() && other.ok() && third.ok());
  auto all = store_->ListWorkers(kT0, /*live_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].superseded_by(), *second);
  EXPECT_EQ((*all)[1].superseded_by(), *third);
  EXPECT_EQ((*all)[2].superseded_by(), 0);
  EXPECT_EQ((*all)[3].superseded_by(), 0);
  // Heard from recently, but restarted since: not live, not counted.
  EXPECT_FALSE((*all)[1].live());
  EXPECT_TRUE((*all)[3].live());
  auto live = store_->ListWorkers(kT0, /*live_only=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].id(), *other);
  EXPECT_EQ((*live)[1].id(), *third);
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 2);
}

TEST_P(StoreWorkersTest, ARestartedWorkersLeasesEndWhenItRegistersAgain) {
  Create("s", 2);
  v1::RegisterWorkerRequest req;
  req.set_name("box");
  req.set_hostname("h1");
  auto first = store_->RegisterWorker(req, kT0);
  ASSERT_TRUE(first.ok());
  const v1::Trial held = Lease(*first);
  const int64_t other = Worker("other");
  const v1::Trial others = Lease(other);
  const absl::Time restart = kT0 + absl::Seconds(3);  // long before the lease would expire
  auto second = store_->RegisterWorker(req, restart);
  ASSERT_TRUE(second.ok());
  auto expired = store_->ExpireLeases(restart);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->requeued, 1);
  auto t = store_->GetTrial(held.id());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::TRIAL_PENDING);
  auto o = store_->GetTrial(others.id());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->state(), v1::TRIAL_RUNNING);  // another worker's lease is left alone
  // The new registration leases it again.
  const v1::Trial again = Lease(*second, restart);
  EXPECT_EQ(again.id(), held.id());
  EXPECT_EQ(again.attempts(), 2);
}

TEST_P(StoreWorkersTest, HeartbeatRenewsLeasesAndReportsLostOnes) {
  Create("s", 2);
  int64_t w = Worker();
  v1::Trial t = Lease(w, kT0);
  v1::TrialLease good, wrong_attempt;
  good.set_trial_id(t.id());
  good.set_attempt(t.attempts());
  wrong_attempt.set_trial_id(t.id() + 1);  // pending, not leased to w
  wrong_attempt.set_attempt(1);
  auto hb = store_->Heartbeat(w, {good, wrong_attempt}, kT0 + absl::Seconds(20), kLease);
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->lost_trial_ids, ElementsAre(t.id() + 1));
  EXPECT_THAT(hb->cancelled_trial_ids, IsEmpty());
  auto e = store_->ExpireLeases(kT0 + absl::Seconds(40));  // past the first lease, within the renewed one
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->requeued, 0);
  auto got = store_->GetTrial(t.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(got->lease_expires_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(50)));
  auto stats = store_->Stats(kT0 + absl::Seconds(10));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 1);
  stats = store_->Stats(kT0 + absl::Seconds(21));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 0);
}

// A worker is live by its RegisterWorker and Heartbeat calls; leasing does
// not write its row (0008_trials_worker_fk.sql), so a worker that leases but
// stopped heartbeating for longer than the timeout counts as gone.
TEST_P(StoreWorkersTest, LivenessComesFromHeartbeatsNotLeases) {
  Create("a", 2);
  const int64_t w = Worker();  // registered at kT0
  Lease(w, kT0 + absl::Seconds(100));
  auto stats = store_->Stats(kT0 + absl::Seconds(50));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->live_workers, 0);
  ASSERT_TRUE(store_->Heartbeat(w, {}, kT0 + absl::Seconds(100), kLease).ok());
  stats = store_->Stats(kT0 + absl::Seconds(50));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->live_workers, 1);
}

TEST_P(StoreWorkersTest, ListsWorkersWithLivenessAndRunningTrials) {
  v1::RegisterWorkerRequest gpus;
  gpus.set_name("gpu-box");
  gpus.set_hostname("h1");
  gpus.add_devices("cuda:0");
  gpus.add_devices("odd \"name\", 1");  // survives the array round trip
  auto a = store_->RegisterWorker(gpus, kT0);
  ASSERT_TRUE(a.ok()) << a.status();
  v1::RegisterWorkerRequest bare;
  bare.set_name("bare");
  auto b = store_->RegisterWorker(bare, kT0 + absl::Seconds(1));
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t c = Worker("c");
  Create("s", 3);
  v1::Trial t1 = Lease(*a);
  Lease(*a);
  Lease(c);
  ASSERT_TRUE(Finish(*a, t1, v1::TRIAL_SUCCEEDED).ok());
  // c heartbeats later; a and b fall silent.
  ASSERT_TRUE(store_->Heartbeat(c, {}, kT0 + absl::Seconds(20), kLease).ok());

  auto all = store_->ListWorkers(kT0 + absl::Seconds(10), /*live_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  const v1::Worker& wa = (*all)[0];
  EXPECT_EQ(wa.id(), *a);
  EXPECT_EQ(wa.name(), "gpu-box");
  EXPECT_EQ(wa.hostname(), "h1");
  EXPECT_THAT(wa.devices(), ElementsAre("cuda:0", "odd \"name\", 1"));
  EXPECT_EQ(wa.registered_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_EQ(wa.last_heartbeat_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_FALSE(wa.live());
  EXPECT_EQ(wa.running_trials(), 1);  // the other one finished
  const v1::Worker& wb = (*all)[1];
  EXPECT_EQ(wb.id(), *b);
  EXPECT_EQ(wb.name(), "bare");
  EXPECT_THAT(wb.devices(), IsEmpty());
  EXPECT_EQ(wb.registered_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(1)));
  EXPECT_FALSE(wb.live());
  EXPECT_EQ(wb.running_trials(), 0);
  const v1::Worker& wc = (*all)[2];
  EXPECT_EQ(wc.id(), c);
  EXPECT_THAT(wc.devices(), ElementsAre("cpu"));
  EXPECT_EQ(wc.registered_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_EQ(wc.last_heartbeat_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(20)));
  EXPECT_TRUE(wc.live());
  EXPECT_EQ(wc.running_trials(), 1);

  auto live = store_->ListWorkers(kT0 + absl::Seconds(10), /*live_only=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id(), c);
  EXPECT_EQ((*live)[0].running_trials(), 1);
  // Live is "at or after", as Stats counts it.
  auto at_edge = store_->ListWorkers(kT0 + absl::Seconds(1), /*live_only=*/true);
  ASSERT_TRUE(at_edge.ok()) << at_edge.status();
  ASSERT_EQ(at_edge->size(), 2u);
  EXPECT_EQ((*at_edge)[0].id(), *b);
  auto stats = store_->Stats(kT0 + absl::Seconds(1));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 2);
}

// The cost estimate's throughput (Store::RecentTrialSpeeds): each live
// worker's last SUCCEEDED trials with a throughput, newest first, those of
// its earlier registrations included.
TEST_P(StoreWorkersTest, RecentTrialSpeedsAreEachLiveWorkersLastSucceededTrials) {
  Create("s", 8);
  const int64_t a = Worker("a");
  const int64_t b = Worker("b");
  Worker("idle");  // live, nothing finished: left out
  // Leases one trial to worker and ends it `seconds` after kT0.
  auto run = [&](int64_t worker, v1::TrialState outcome, std::optional<double> tokens_per_s, int seconds) {
    const v1::Trial t = Lease(worker, kT0 + absl::Seconds(seconds - 1));
    v1::FinishTrialRequest req = testing::FinishOf(worker, t, outcome);
    if (tokens_per_s.has_value()) req.mutable_result()->set_tokens_per_s(*tokens_per_s);
    auto finished = store_->FinishTrial(req, kT0 + absl::Seconds(seconds));
    EXPECT_TRUE(finished.ok()) << finished.status();
    return t;
  };
  const v1::Trial oldest = run(a, v1::TRIAL_SUCCEEDED, 100, 1);
  run(a, v1::TRIAL_SUCCEEDED, 200, 2);
  run(a, v1::TRIAL_DIVERGED, 300, 3);        // not a finished run's speed
  run(a, v1::TRIAL_SUCCEEDED, std::nullopt, 4);  // no throughput reported
  run(b, v1::TRIAL_SUCCEEDED, 500, 5);
  // a restarts: its new registration keeps the history of the old one.
  v1::RegisterWorkerRequest again;
  again.set_name("a");
  again.set_hostname("host");
  auto a2 = store_->RegisterWorker(again, kT0 + absl::Seconds(6));
  ASSERT_TRUE(a2.ok()) << a2.status();
  const v1::Trial newest = run(*a2, v1::TRIAL_SUCCEEDED, 600, 7);

  auto speeds = [&](absl::Time live_since, int per_worker) {
    std::vector<std::pair<int64_t, std::vector<double>>> out;  // (worker, tokens_per_s newest first)
    auto got = store_->RecentTrialSpeeds(live_since, per_worker);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return out;
    for (const WorkerSpeeds& w : *got) {
      std::vector<double> tps;
      for (const TrialSpeed& t : w.trials) tps.push_back(t.tokens_per_s);
      out.emplace_back(w.worker_id, tps);
    }
    return out;
  };
  using Speeds = std::vector<std::pair<int64_t, std::vector<double>>>;
  EXPECT_EQ(speeds(kT0, 2), (Speeds{{b, {500}}, {*a2, {600, 200}}}));
  EXPECT_EQ(speeds(kT0, 20), (Speeds{{b, {500}}, {*a2, {600, 200, 100}}}));
  // Live since 1 s after kT0: only the restarted a (b and idle were last heard of at kT0).
  EXPECT_EQ(speeds(kT0 + absl::Seconds(1), 20), (Speeds{{*a2, {600, 200, 100}}}));
  auto got = store_->RecentTrialSpeeds(kT0, 20);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  ASSERT_EQ((*got)[1].trials.size(), 3u);
  EXPECT_EQ((*got)[1].trials.front().config.SerializeAsString(), newest.config().SerializeAsString());
  EXPECT_EQ((*got)[1].trials.back().config.SerializeAsString(), oldest.config().SerializeAsString());
  EXPECT_NE(a, *a2);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreWorkersTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
