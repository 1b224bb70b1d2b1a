// One l0 rule for the boundary search and the sensitivity views: l0 is the
// result's init_val_loss when finite, else the trial's step-0 val_loss point
// (db::TrialL0; in SQL the view trial_l0). A client that reports l0 only as
// that point (the API allows it) gets its boundary lines decided in both
// stores, and on PostgreSQL the same trials count in lr_sensitivity.
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "tests/common/expand_sweep.h"
#include "tests/common/store_kinds.h"
#include "tests/common/specs.h"
#include "tests/common/test_time.h"

namespace normsweep::db {
namespace {

using testing::kT0;
const absl::Duration kLease = absl::Seconds(30);
constexpr double kL0 = 5.8;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(TrialL0Test, InitValLossWhenFiniteElseTheStep0Point) {
  EXPECT_EQ(TrialL0(5.8, 6.0), 5.8);
  EXPECT_EQ(TrialL0(std::nullopt, 6.0), 6.0);
  EXPECT_EQ(TrialL0(kNaN, 6.0), 6.0);
  EXPECT_EQ(TrialL0(kInf, 6.0), 6.0);
  EXPECT_EQ(TrialL0(std::nullopt, std::nullopt), std::nullopt);
  EXPECT_EQ(TrialL0(kNaN, -kInf), std::nullopt);
}

// How the client reports l0.
enum class L0 {
  kStep0Point,  // a step-0 val_loss point only (half the finishes also carry init_val_loss NaN)
  kNone,        // not at all
};

class BoundaryL0Test : public testing::BothStoresTest {
 protected:
  // A boundary sweep of two lines (Post-LN, Pre-LN; one seed, warm-up 0,
  // 4 coarse lrs over 1e-4..1e-1) run to its end by a client that trains up
  // to the line's boundary (3.0 nats) and diverges above it. Returns the
  // sweep's id.
  int64_t RunSweep(L0 l0) {
    const v1::SweepSpec spec = testing::BoundarySpec("l0", /*seeds=*/1);
    auto trials = testing::Expand(spec);
    EXPECT_TRUE(trials.ok()) << trials.status();
    if (!trials.ok()) return 0;
    auto sweep = store_->CreateSweep("", testing::StoredSpec(spec), *trials, kT0);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    if (!sweep.ok()) return 0;
    v1::RegisterWorkerRequest reg;
    reg.set_name("w");
    reg.set_hostname("h");
    auto worker = store_->RegisterWorker(reg, kT0);
    EXPECT_TRUE(worker.ok()) << worker.status();
    if (!worker.ok()) return 0;
    for (int n = 0;; ++n) {
      auto leased = store_->LeaseTrial(*worker, kT0, kLease);
      EXPECT_TRUE(leased.ok()) << leased.status();
      if (!leased.ok() || !leased->has_value()) break;
      const v1::Trial& t = **leased;
      if (l0 == L0::kStep0Point) {
        v1::ReportProgressRequest progress;
        progress.set_worker_id(*worker);
        progress.set_trial_id(t.id());
        progress.set_attempt(t.attempts());
        v1::MetricPoint& step0 = *progress.add_points();
        step0.set_step(0);
        step0.set_val_loss(kL0);
        EXPECT_TRUE(store_->ReportProgress(progress, kT0).ok());
      }
      v1::FinishTrialRequest f;
      f.set_worker_id(*worker);
      f.set_trial_id(t.id());
      f.set_attempt(t.attempts());
      if (l0 == L0::kStep0Point && n % 2 == 1) f.mutable_result()->set_init_val_loss(kNaN);  // no l0 either
      const double boundary = t.config().placement() == "pre" ? 2.2e-2 : 1.7e-3;
      if (t.config().lr() <= boundary) {
        f.set_outcome(v1::TRIAL_SUCCEEDED);
        f.mutable_result()->set_final_val_loss(3.0);
      } else {
        f.set_outcome(v1::TRIAL_DIVERGED);
        f.mutable_result()->set_diverged_step(10);
      }
      EXPECT_TRUE(store_->FinishTrial(f, kT0, nullptr).ok());
    }
    auto s = store_->GetSweep(sweep->sweep.id());
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED);
    return sweep->sweep.id();
  }

  // Trials per line (its placement).
  std::map<std::string, int> TrialsPerLine(int64_t sweep_id) {
    std::map<std::string, int> out;
    auto trials = store_->ListTrials(sweep_id, v1::TRIAL_STATE_UNSPECIFIED, -1, 1000);
    EXPECT_TRUE(trials.ok()) << trials.status();
    if (trials.ok()) {
      for (const v1::Trial& t : *trials) ++out[t.config().placement()];
    }
    return out;
  }

};

TEST_P(BoundaryL0Test, L0AsAStep0PointDecidesTheLinesAndCountsInLrSensitivity) {
  const int64_t sweep = RunSweep(L0::kStep0Point);
  // Searched to the end: 4 coarse probes and 4 bisections to a bracket
  // within 1.25 (a FAILED line stops after the coarse probes).
  EXPECT_EQ(TrialsPerLine(sweep), (std::map<std::string, int>{{"post", 8}, {"pre", 8}}));
  if (GetParam() == testing::StoreKind::kMemory) return;  // the views are PostgreSQL's
  auto analysis = store_->GetSweepAnalysis(sweep, 0.05);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  ASSERT_EQ(analysis->boundary_size(), 2);
  for (const v1::BoundaryLine& line : analysis->boundary()) {
    EXPECT_EQ(line.state(), "FOUND") << line.placement();
    EXPECT_EQ(line.trials(), 8);
  }
  ASSERT_EQ(analysis->lr_sensitivity_size(), 2);
  for (const v1::LrSensitivity& line : analysis->lr_sensitivity()) {
    EXPECT_EQ(line.lrs(), 8) << line.placement();  // every probe counted, with l0 from its step-0 point
    EXPECT_EQ(line.lrs_pending(), 0) << line.placement();
    EXPECT_DOUBLE_EQ(line.init_val_loss(), kL0);
    EXPECT_DOUBLE_EQ(line.best_val_loss(), 3.0);
  }
}

TEST_P(BoundaryL0Test, NoL0AtAllFailsTheLines) {
  const int64_t sweep = RunSweep(L0::kNone);
  EXPECT_EQ(TrialsPerLine(sweep), (std::map<std::string, int>{{"post", 4}, {"pre", 4}}));
  if (GetParam() == testing::StoreKind::kMemory) return;
  auto analysis = store_->GetSweepAnalysis(sweep, 0.05);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  ASSERT_EQ(analysis->boundary_size(), 2);
  for (const v1::BoundaryLine& line : analysis->boundary()) EXPECT_EQ(line.state(), "FAILED") << line.placement();
  for (const v1::LrSensitivity& line : analysis->lr_sensitivity()) {
    EXPECT_EQ(line.lrs(), 0) << line.placement();  // the succeeded probes have no l0: pending
    EXPECT_GT(line.lrs_pending(), 0) << line.placement();
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, BoundaryL0Test, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
