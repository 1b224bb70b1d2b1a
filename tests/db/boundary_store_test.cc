// boundary_search sweeps in both stores: lines searched to their end by
// simulated workers, follow-ups exactly once (two PostgresStores on one
// database finishing one line's trials from threads, re-sent finishes, a
// transaction cut short), cancellation, max_concurrent_trials, and the
// lr_boundary view.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "db/boundary_store.h"
#include "db/memory_store.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/schema/boundary_search.h"
#include "tests/common/expand_sweep.h"
#include "tests/common/fresh_database.h"
#include "tests/common/specs.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"

namespace normsweep::db {
namespace {

using schema::BoundarySettings;
using schema::BoundarySettingsOf;
using schema::ClassifyProbe;
using schema::DecideLine;
using schema::InitialLrs;
using schema::LineDecision;
using schema::LineState;
using schema::Probe;
using schema::ProbeOutcome;

using testing::kT0;
const absl::Duration kLease = absl::Seconds(30);
constexpr double kL0 = 5.8;

using testing::BoundarySpec;

// A synthetic trainer: trains (3.0 nats, l0 5.8) up to the line's boundary,
// diverges above it. Post-LN's boundary is lower than Pre-LN's.
double BoundaryOf(const v1::Trial& t) {
  const double b = t.config().placement() == "pre" ? 2.2e-2 : 1.7e-3;
  return b * (1 + 0.1 * t.config().seed());
}
v1::FinishTrialRequest Outcome(const v1::Trial& t, int64_t worker) {
  v1::FinishTrialRequest f;
  f.set_worker_id(worker);
  f.set_trial_id(t.id());
  f.set_attempt(t.attempts());
  f.mutable_result()->set_init_val_loss(kL0);
  if (t.config().lr() <= BoundaryOf(t)) {
    f.set_outcome(v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(3.0);
  } else {
    f.set_outcome(v1::TRIAL_DIVERGED);
    f.mutable_result()->set_diverged_step(10);
  }
  return f;
}

class BoundaryStoreTest : public testing::BothStoresTest {
 protected:
  v1::Sweep Create(const v1::SweepSpec& raw, Store* store = nullptr) {
    auto trials = testing::Expand(raw);
    EXPECT_TRUE(trials.ok()) << trials.status();
    if (!trials.ok()) return v1::Sweep();
    auto r = (store ? store : store_.get())->CreateSweep("", testing::StoredSpec(raw), *trials, kT0);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep : v1::Sweep();
  }

  int64_t Worker(const std::string& name, Store* store = nullptr) {
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    req.set_hostname("h");
    auto id = (store ? store : store_.get())->RegisterWorker(req, kT0);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  // A Pre-LN line of two initial probes, both leased by one worker and the
  // first finished.
  struct TwoProbes {
    v1::Sweep sweep;
    int64_t worker = 0;
    v1::Trial second;
  };
  void LeaseTwoProbesFinishTheFirst(const std::string& name, TwoProbes* p) {
    v1::SweepSpec spec = BoundarySpec(name);
    spec.clear_placements();
    spec.add_placements("pre");
    spec.mutable_boundary_search()->set_initial_points(2);
    p->sweep = Create(spec);
    p->worker = Worker("w");
    auto a = store_->LeaseTrial(p->worker, kT0, kLease);
    auto b = store_->LeaseTrial(p->worker, kT0, kLease);
    ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
    ASSERT_TRUE(store_->FinishTrial(Outcome(**a, p->worker), kT0, nullptr).ok());
    p->second = **b;
  }

  std::vector<v1::Trial> Trials(int64_t sweep_id) {
    auto t = store_->ListTrials(sweep_id, v1::TRIAL_STATE_UNSPECIFIED, -1, 100000);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : std::vector<v1::Trial>();
  }

  // Leases and finishes every trial until none is pending; returns the
  // number of trials finished.
  int RunToEnd(int64_t worker) {
    int finished = 0;
    for (;;) {
      auto leased = store_->LeaseTrial(worker, kT0, kLease);
      EXPECT_TRUE(leased.ok()) << leased.status();
      if (!leased.ok() || !leased->has_value()) return finished;
      bool now = false;
      auto done = store_->FinishTrial(Outcome(**leased, worker), kT0, &now);
      EXPECT_TRUE(done.ok()) << done.status();
      EXPECT_TRUE(now);
      ++finished;
    }
  }

};

TEST_P(BoundaryStoreTest, LinesAreSearchedToTheirBoundary) {
  const v1::Sweep sweep = Create(BoundarySpec("search", 2));
  EXPECT_EQ(sweep.trial_count(), 4 * 4);  // 4 lines x 4 coarse lrs
  for (const v1::Trial& t : Trials(sweep.id())) EXPECT_TRUE(t.has_boundary_line()) << t.index();
  const int64_t w = Worker("w");
  const int finished = RunToEnd(w);
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED);
  const std::vector<v1::Trial> trials = Trials(sweep.id());
  EXPECT_EQ(static_cast<int>(trials.size()), finished);
  EXPECT_EQ(s->trial_count(), finished);
  EXPECT_EQ(finished, 4 * 8);  // three decades to 1.25: 4 coarse + 4 bisections per line
  std::map<int32_t, std::vector<v1::Trial>> lines;
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(trials[i].index(), static_cast<int>(i));  // the sweep's next index, no gaps
    ASSERT_TRUE(trials[i].has_boundary_line());
    lines[trials[i].boundary_line()].push_back(trials[i]);
  }
  ASSERT_EQ(lines.size(), 4u);
  const BoundarySettings settings = BoundarySettingsOf(s->spec().boundary_search());
  for (const auto& [line, ts] : lines) {
    std::vector<Probe> probes;
    for (const v1::Trial& t : ts) {
      EXPECT_EQ(t.config().placement(), ts[0].config().placement());
      EXPECT_EQ(t.config().seed(), ts[0].config().seed());
      EXPECT_EQ(t.variant(), ts[0].variant());
      probes.push_back({t.config().lr(),
                        ClassifyProbe(t.state(), t.result().has_final_val_loss()
                                                     ? std::optional(t.result().final_val_loss()) : std::nullopt,
                                      kL0, std::nullopt, std::nullopt, settings)});
    }
    const LineDecision d = DecideLine(settings, probes);
    EXPECT_EQ(d.state, LineState::kFound) << "line " << line;
    EXPECT_LE(*d.max_trainable_lr, BoundaryOf(ts[0]));
    EXPECT_GT(*d.min_untrainable_lr, BoundaryOf(ts[0]));
  }
}

TEST_P(BoundaryStoreTest, ResentFinishCreatesNothing) {
  v1::SweepSpec spec = BoundarySpec("resent");
  spec.clear_placements();
  spec.add_placements("pre");
  spec.mutable_boundary_search()->set_initial_points(2);  // 1e-4 trains, 1e-1 diverges
  const v1::Sweep sweep = Create(spec);
  const int64_t w = Worker("w");
  std::vector<v1::FinishTrialRequest> finishes;
  for (int i = 0; i < 2; ++i) {
    auto leased = store_->LeaseTrial(w, kT0, kLease);
    ASSERT_TRUE(leased.ok() && leased->has_value());
    finishes.push_back(Outcome(**leased, w));
  }
  bool now = false;
  ASSERT_TRUE(store_->FinishTrial(finishes[0], kT0, &now).ok());
  EXPECT_TRUE(now);
  EXPECT_EQ(Trials(sweep.id()).size(), 2u);  // the other coarse probe is open: nothing yet
  ASSERT_TRUE(store_->FinishTrial(finishes[1], kT0, &now).ok());
  EXPECT_TRUE(now);
  ASSERT_EQ(Trials(sweep.id()).size(), 3u);
  for (int again = 0; again < 3; ++again) {
    for (const auto& f : finishes) {
      auto r = store_->FinishTrial(f, kT0, &now);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_FALSE(now);  // a re-sent finish
      EXPECT_EQ(r->state(), f.outcome());
    }
  }
  const std::vector<v1::Trial> trials = Trials(sweep.id());
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[2].state(), v1::TRIAL_PENDING);
  EXPECT_NEAR(trials[2].config().lr(), std::sqrt(1e-4 * 1e-1), 1e-15);
  EXPECT_EQ(trials[2].index(), 2);
  auto s = store_->GetSweep(sweep.id());
  EXPECT_EQ(s->state(), v1::SWEEP_RUNNING);  // the follow-up keeps it running
  EXPECT_EQ(s->trial_count(), 3);
  EXPECT_EQ(s->counts().pending(), 1);
  // Neither the lease-expiry pass (which completes sweeps with no open
  // trials) nor time changes that.
  ASSERT_TRUE(store_->ExpireLeases(kT0 + absl::Hours(1)).ok());
  EXPECT_EQ(store_->GetSweep(sweep.id())->state(), v1::SWEEP_RUNNING);
}

TEST_P(BoundaryStoreTest, CancelledSweepGetsNoFollowUp) {
  TwoProbes p;
  ASSERT_NO_FATAL_FAILURE(LeaseTwoProbesFinishTheFirst("cancel", &p));
  const v1::Sweep& sweep = p.sweep;
  ASSERT_TRUE(store_->CancelSweep(sweep.id(), kT0).ok());
  bool now = false;
  ASSERT_TRUE(store_->FinishTrial(Outcome(p.second, p.worker), kT0, &now).ok());
  EXPECT_TRUE(now);
  EXPECT_EQ(Trials(sweep.id()).size(), 2u);
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(s->trial_count(), 2);
}

TEST_P(BoundaryStoreTest, MaxConcurrentTrialsHoldsForFollowUps) {
  v1::SweepSpec spec = BoundarySpec("limited");
  spec.set_max_concurrent_trials(1);
  const v1::Sweep sweep = Create(spec);
  const int64_t w = Worker("w");
  int finished = 0;
  for (;;) {
    auto first = store_->LeaseTrial(w, kT0, kLease);
    ASSERT_TRUE(first.ok()) << first.status();
    if (!first->has_value()) break;
    auto second = store_->LeaseTrial(w, kT0, kLease);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_FALSE(second->has_value()) << "two RUNNING trials in a sweep limited to one";
    ASSERT_TRUE(store_->FinishTrial(Outcome(**first, w), kT0, nullptr).ok());
    ++finished;
  }
  EXPECT_EQ(finished, 2 * 8);
  EXPECT_EQ(store_->GetSweep(sweep.id())->state(), v1::SWEEP_COMPLETED);
}

TEST_P(BoundaryStoreTest, FailedProbeStopsItsLine) {
  v1::SweepSpec spec = BoundarySpec("failed");
  spec.clear_placements();
  spec.add_placements("pre");
  spec.set_max_attempts(1);
  const v1::Sweep sweep = Create(spec);
  const int64_t w = Worker("w");
  for (int i = 0; i < 4; ++i) {
    auto leased = store_->LeaseTrial(w, kT0, kLease);
    ASSERT_TRUE(leased.ok() && leased->has_value());
    v1::FinishTrialRequest f = Outcome(**leased, w);
    if (i == 1) {
      f.set_outcome(v1::TRIAL_FAILED);
      f.mutable_result()->set_error("trainer: bad config");
    }
    ASSERT_TRUE(store_->FinishTrial(f, kT0, nullptr).ok());
  }
  EXPECT_EQ(Trials(sweep.id()).size(), 4u);
  EXPECT_EQ(store_->GetSweep(sweep.id())->state(), v1::SWEEP_COMPLETED);
}

INSTANTIATE_TEST_SUITE_P(Stores, BoundaryStoreTest, testing::BothStores(), testing::StoreKindName);

// PostgreSQL only: replicas, a transaction cut short, the view.
class BoundaryPostgresTest : public BoundaryStoreTest {};

TEST_P(BoundaryPostgresTest, TwoReplicasFinishingOneLineMakeOneFollowUpPerBracket) {
  std::unique_ptr<Store> replica = OpenAnother();
  ASSERT_NE(replica, nullptr);
  Store* stores[2] = {store_.get(), replica.get()};
  constexpr int kRounds = 12;
  constexpr int kPoints = 6;  // coarse probes of the one line, finished at once
  for (int round = 0; round < kRounds; ++round) {
    v1::SweepSpec spec = BoundarySpec(absl::StrCat("replicas-", round), 1, kPoints);
    spec.clear_placements();
    spec.add_placements(round % 2 == 0 ? "post" : "pre");
    const v1::Sweep sweep = Create(spec);
    const int64_t w = Worker(absl::StrCat("w", round));
    for (;;) {
      // Lease every open trial of the line, then finish them all at once
      // from threads, half through each replica, each finish sent twice
      // (the second time through the other replica).
      std::vector<v1::Trial> leased;
      for (;;) {
        auto t = stores[leased.size() % 2]->LeaseTrial(w, kT0, kLease);
        ASSERT_TRUE(t.ok()) << t.status();
        if (!t->has_value()) break;
        leased.push_back(**t);
      }
      if (leased.empty()) break;
      std::atomic<int> written{0};
      std::vector<std::thread> threads;
      for (size_t i = 0; i < leased.size(); ++i) {
        threads.emplace_back([&, i] {
          const v1::FinishTrialRequest f = Outcome(leased[i], w);
          for (int send = 0; send < 2; ++send) {
            bool now = false;
            auto r = stores[(i + send) % 2]->FinishTrial(f, kT0, &now);
            EXPECT_TRUE(r.ok()) << r.status();
            if (now) ++written;
          }
        });
      }
      for (std::thread& t : threads) t.join();
      EXPECT_EQ(written.load(), static_cast<int>(leased.size()));  // each finish written once
      // Exactly one follow-up (or none when the line is done), never two.
      int pending = 0;
      for (const v1::Trial& t : Trials(sweep.id())) pending += t.state() == v1::TRIAL_PENDING;
      EXPECT_LE(pending, 1) << "round " << round;
    }
    auto s = store_->GetSweep(sweep.id());
    EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED) << "round " << round;
    const std::vector<v1::Trial> trials = Trials(sweep.id());
    EXPECT_EQ(s->trial_count(), static_cast<int>(trials.size()));
    std::set<double> lrs;
    for (const v1::Trial& t : trials) lrs.insert(t.config().lr());
    EXPECT_EQ(lrs.size(), trials.size()) << "two trials at one lr (two follow-ups for one bracket)";
    // The same line searched sequentially by the rule takes as many trials.
    const BoundarySettings settings = BoundarySettingsOf(s->spec().boundary_search());
    std::vector<Probe> probes;
    for (double lr : InitialLrs(settings)) probes.push_back({lr, lr <= BoundaryOf(trials[0]) ? ProbeOutcome::kTrainable : ProbeOutcome::kUntrainable});
    for (LineDecision d = DecideLine(settings, probes); d.next_lr; d = DecideLine(settings, probes)) {
      probes.push_back({*d.next_lr, *d.next_lr <= BoundaryOf(trials[0]) ? ProbeOutcome::kTrainable : ProbeOutcome::kUntrainable});
    }
    EXPECT_EQ(trials.size(), probes.size()) << "round " << round;
  }
}

TEST_P(BoundaryPostgresTest, TransactionCutShortCreatesNothingAndTheResentFinishDoesIt) {
  TwoProbes p;
  ASSERT_NO_FATAL_FAILURE(LeaseTwoProbesFinishTheFirst("cut", &p));
  const v1::Sweep& sweep = p.sweep;
  const v1::FinishTrialRequest last = Outcome(p.second, p.worker);
  {
    // A scheduler that dies before COMMIT: everything it did is rolled back.
    auto conn = testing::Connect(conninfo_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE((*conn)->Exec("BEGIN").ok());
    auto written = FinishBoundaryTrialIn(**conn, last, kT0);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_TRUE(*written);
    auto inside = (*conn)->Exec("SELECT count(*) FROM trials WHERE sweep_id = $1", PgParams().Add(sweep.id()));
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(inside->GetInt64(0, 0), 3);  // the follow-up, inside the transaction
  }  // the connection closes without COMMIT
  std::vector<v1::Trial> trials = Trials(sweep.id());
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].state(), v1::TRIAL_RUNNING);
  bool now = false;
  ASSERT_TRUE(store_->FinishTrial(last, kT0, &now).ok());
  EXPECT_TRUE(now);
  trials = Trials(sweep.id());
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[2].state(), v1::TRIAL_PENDING);
  EXPECT_EQ(store_->GetSweep(sweep.id())->trial_count(), 3);
}

TEST_P(BoundaryPostgresTest, LrBoundaryView) {
  v1::SweepSpec spec = BoundarySpec("view", 1);
  const v1::Sweep sweep = Create(spec);
  auto conn = testing::Connect(conninfo_);
  ASSERT_TRUE(conn.ok()) << conn.status();
  auto rows = [&] {
    auto r = (*conn)->Exec("SELECT line, placement, warmup_steps, seed, state, max_trainable_lr, min_untrainable_lr,"
                           " trials, finished FROM lr_boundary WHERE sweep_id = $1 ORDER BY line",
                           PgParams().Add(sweep.id()));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : PgResult(nullptr);
  };
  {
    PgResult r = rows();
    ASSERT_EQ(r.rows(), 2);
    EXPECT_EQ(r.GetString(0, 1), "post");
    EXPECT_EQ(r.GetString(1, 1), "pre");
    EXPECT_EQ(r.GetString(0, 4), "SEARCHING");
    EXPECT_TRUE(r.IsNull(0, 5));
    EXPECT_EQ(r.GetInt64(0, 7), 4);
    EXPECT_EQ(r.GetInt64(0, 8), 0);
  }
  RunToEnd(Worker("w"));
  PgResult r = rows();
  ASSERT_EQ(r.rows(), 2);
  for (int i = 0; i < 2; ++i) {
    const double boundary = i == 0 ? 1.7e-3 : 2.2e-2;
    EXPECT_EQ(r.GetString(i, 4), "FOUND");
    EXPECT_LE(r.GetDouble(i, 5), boundary);
    EXPECT_GT(r.GetDouble(i, 6), boundary);
    EXPECT_LE(r.GetDouble(i, 6) / r.GetDouble(i, 5), 1.25 * (1 + 1e-12));
    EXPECT_EQ(r.GetInt64(i, 7), 8);
    EXPECT_EQ(r.GetInt64(i, 8), 8);
  }
  // The Grafana panel's query (deploy/grafana/dashboards), on these lines:
  // per placement the median over seeds of each end of the bracket.
  {
    const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
    ASSERT_NE(src, nullptr);
    std::ifstream in(std::string(src) + "/deploy/grafana/dashboards/layernorm-sensitivity.json");
    std::stringstream json;
    json << in.rdbuf();
    google::protobuf::Struct dashboard;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &dashboard).ok());
    std::string panel_sql;
    for (const auto& panel : dashboard.fields().at("panels").list_value().values()) {
      const auto& f = panel.struct_value().fields();
      if (!f.contains("targets")) continue;
      for (const auto& t : f.at("targets").list_value().values()) {
        const auto& tf = t.struct_value().fields();
        if (!tf.contains("rawSql")) continue;  // a Prometheus target
        const std::string sql = tf.at("rawSql").string_value();
        if (sql.find("FROM lr_boundary") != std::string::npos) panel_sql = sql;
      }
    }
    ASSERT_FALSE(panel_sql.empty()) << "no panel reads lr_boundary";
    panel_sql = absl::StrReplaceAll(panel_sql, {{"$sweep", absl::StrCat(sweep.id())}, {"$placement", "'post', 'pre'"}});
    auto panel = (*conn)->Exec(panel_sql);
    ASSERT_TRUE(panel.ok()) << panel.status() << "\n" << panel_sql;
    ASSERT_EQ(panel->rows(), 4);
    EXPECT_EQ(panel->GetString(0, 1), "Post-LN: max trainable lr");
    EXPECT_EQ(panel->GetDouble(0, 2), r.GetDouble(0, 5));
    EXPECT_EQ(panel->GetString(1, 1), "Post-LN: min untrainable lr");
    EXPECT_EQ(panel->GetDouble(1, 2), r.GetDouble(0, 6));
    EXPECT_EQ(panel->GetString(3, 1), "Pre-LN: min untrainable lr");
    EXPECT_EQ(panel->GetDouble(3, 2), r.GetDouble(1, 6));
  }
  // A line whose probe FAILED after its last lease (no FinishTrial): the view
  // says FAILED; a cancelled sweep's open lines say CANCELLED.
  const v1::Sweep grid_like = Create(BoundarySpec("other", 1));
  ASSERT_TRUE((*conn)->Exec("UPDATE trials SET state = 'FAILED' WHERE sweep_id = $1 AND boundary_line = 0 "
                            "AND trial_index = 0", PgParams().Add(grid_like.id())).ok());
  ASSERT_TRUE(store_->CancelSweep(grid_like.id(), kT0).ok());
  auto other = (*conn)->Exec("SELECT line, state FROM lr_boundary WHERE sweep_id = $1 ORDER BY line",
                             PgParams().Add(grid_like.id()));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->rows(), 2);
  EXPECT_EQ(other->GetString(0, 1), "FAILED");
  EXPECT_EQ(other->GetString(1, 1), "CANCELLED");
}

INSTANTIATE_TEST_SUITE_P(Postgres, BoundaryPostgresTest, ::testing::Values(testing::StoreKind::kPostgres));

}  // namespace
}  // namespace normsweep::db
