// The variant_comparison view (db/views/75_variant_comparison.sql) against a
// real PostgreSQL, read through PostgresStore::GetSweepAnalysis
// (GetSweepAnalysisResponse.variants) as the CLI, the report and Python get
// it: a QK-norm on/off sweep of both placements, a baseline that is not the
// byte-order-first variant (layers 6 then 12), a variant without figures, a
// boundary search; and placement_sensitivity's tolerance column under its
// new and its deprecated name. Every expected figure is worked out by hand
// in the comments from the numbers inserted.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/pg_connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/views_test.h"

namespace normsweep::db {
namespace {

constexpr double kTight = 1e-12;
constexpr double kL0 = 6.0;

class VariantComparisonTest : public testing::ViewsTest {
 protected:
  // A trial with l0 6.0 (the column), the next trial index of the sweep: the
  // tests add trials in the spec's expansion order (seed, variant, warm-up
  // x lr, placement innermost), as the scheduler numbers them.
  int64_t Add(int64_t sweep, const std::string& variant, const std::string& placement, int warmup, double lr,
              int seed, const std::string& state, std::optional<double> loss = std::nullopt) {
    testing::TrialRow row;
    row.variant = variant;
    row.placement = placement;
    row.warmup_steps = warmup;
    row.peak_lr = lr;
    row.seed = seed;
    row.state = state;
    row.final_val_loss = loss;
    row.init_val_loss = kL0;
    const int64_t id = AddTrial(sweep, row);
    EXPECT_NE(id, 0);
    return id;
  }

  // "placement variant": each row of the response, in its order.
  static std::vector<std::string> Order(const v1::GetSweepAnalysisResponse& a) {
    std::vector<std::string> out;
    for (const v1::VariantComparison& v : a.variants()) out.push_back(absl::StrCat(v.placement(), " ", v.variant()));
    return out;
  }
};

// QK-norm off (the baseline: first in the spec) and on, both placements,
// warm-up {0, 100} x lr {1e-3, 1e-2}, one seed, l0 6.0 everywhere. By hand
// (a diverged seed counts as l0; LRS = mean over lrs of min(l, l0) - l*):
//   post, qk_norm=false: w0   1e-3 3.0, 1e-2 DIVERGED (6.0): l* 3.0, LRS (0 + 3) / 2 = 1.5
//                        w100 1e-3 3.2, 1e-2 2.8:           l* 2.8, LRS (0.4 + 0) / 2 = 0.2
//     mean LRS 0.85; best line l* 2.8 at warm-up 100, lr 1e-2; failure 1 / 4 = 0.25
//   post, qk_norm=true:  w0   1e-3 2.9, 1e-2 2.7: l* 2.7, LRS 0.1
//                        w100 1e-3 2.5, 1e-2 2.6: l* 2.5, LRS 0.05
//     mean LRS 0.075; best l* 2.5 at warm-up 100, lr 1e-3; failure 0
//     against the baseline: LRS -0.775, l* -0.3, best lr x0.1, failure -0.25
//   pre, qk_norm=false:  w0   1e-3 2.4, 1e-2 2.2: l* 2.2, LRS 0.1
//                        w100 1e-3 2.3, 1e-2 2.2: l* 2.2, LRS 0.05
//     mean LRS 0.075; best l* 2.2 on both lines: the smaller warm-up, 0, lr 1e-2; failure 0
//   pre, qk_norm=true:   w0   both DIVERGED (6.0, 6.0): l* 6.0 (l0), best lr 1e-3 (the smaller on a tie), LRS 0
//                        w100 1e-3 2.5, 1e-2 DIVERGED:  l* 2.5, LRS (0 + 3.5) / 2 = 1.75
//     mean LRS 0.875; best l* 2.5 at warm-up 100, lr 1e-3; failure 3 / 4 = 0.75
//     against the baseline: LRS +0.8, l* +0.3, best lr x0.1, failure +0.75
class QkNormComparisonTest : public VariantComparisonTest {
 protected:
  void SetUp() override {
    VariantComparisonTest::SetUp();
    if (HasFatalFailure()) return;
    sweep_ = AddSweep("qk-norm");
    const std::string off = "qk_norm=false", on = "qk_norm=true";
    Add(sweep_, off, "post", 0, 1e-3, 0, "SUCCEEDED", 3.0);
    Add(sweep_, off, "pre", 0, 1e-3, 0, "SUCCEEDED", 2.4);
    Add(sweep_, off, "post", 0, 1e-2, 0, "DIVERGED");
    Add(sweep_, off, "pre", 0, 1e-2, 0, "SUCCEEDED", 2.2);
    Add(sweep_, off, "post", 100, 1e-3, 0, "SUCCEEDED", 3.2);
    Add(sweep_, off, "pre", 100, 1e-3, 0, "SUCCEEDED", 2.3);
    Add(sweep_, off, "post", 100, 1e-2, 0, "SUCCEEDED", 2.8);
    Add(sweep_, off, "pre", 100, 1e-2, 0, "SUCCEEDED", 2.2);
    Add(sweep_, on, "post", 0, 1e-3, 0, "SUCCEEDED", 2.9);
    Add(sweep_, on, "pre", 0, 1e-3, 0, "DIVERGED");
    Add(sweep_, on, "post", 0, 1e-2, 0, "SUCCEEDED", 2.7);
    Add(sweep_, on, "pre", 0, 1e-2, 0, "DIVERGED");
    Add(sweep_, on, "post", 100, 1e-3, 0, "SUCCEEDED", 2.5);
    Add(sweep_, on, "pre", 100, 1e-3, 0, "SUCCEEDED", 2.5);
    Add(sweep_, on, "post", 100, 1e-2, 0, "SUCCEEDED", 2.6);
    Add(sweep_, on, "pre", 100, 1e-2, 0, "DIVERGED");
  }

  int64_t sweep_ = 0;
};

TEST_F(QkNormComparisonTest, EachVariantBesideTheBaselineByHand) {
  const v1::GetSweepAnalysisResponse a = Analysis(sweep_);
  ASSERT_EQ(Order(a), (std::vector<std::string>{"post qk_norm=false", "post qk_norm=true", "pre qk_norm=false",
                                                "pre qk_norm=true"}));
  for (const v1::VariantComparison& v : a.variants()) {
    EXPECT_EQ(v.baseline_variant(), "qk_norm=false") << v.placement() << " " << v.variant();
    EXPECT_EQ(v.trials(), 4);
    // Not a boundary search.
    EXPECT_FALSE(v.has_max_trainable_lr());
    EXPECT_EQ(v.boundary_lines(), 0);
    EXPECT_FALSE(v.has_max_trainable_lr_ratio());
  }

  const v1::VariantComparison& post_off = a.variants(0);
  EXPECT_NEAR(post_off.mean_lr_sensitivity(), 0.85, kTight);
  EXPECT_NEAR(post_off.best_val_loss(), 2.8, kTight);
  EXPECT_EQ(post_off.best_lr(), 1e-2);
  EXPECT_EQ(post_off.best_warmup_steps(), 100);
  EXPECT_EQ(post_off.failure_rate(), 0.25);
  // The baseline's own row: deltas 0, ratios 1.
  EXPECT_EQ(post_off.delta_mean_lr_sensitivity(), 0);
  EXPECT_EQ(post_off.delta_best_val_loss(), 0);
  EXPECT_EQ(post_off.best_lr_ratio(), 1);
  EXPECT_EQ(post_off.delta_failure_rate(), 0);

  const v1::VariantComparison& post_on = a.variants(1);
  EXPECT_NEAR(post_on.mean_lr_sensitivity(), 0.075, kTight);
  EXPECT_NEAR(post_on.best_val_loss(), 2.5, kTight);
  EXPECT_EQ(post_on.best_lr(), 1e-3);
  EXPECT_EQ(post_on.best_warmup_steps(), 100);
  EXPECT_EQ(post_on.failure_rate(), 0);
  EXPECT_NEAR(post_on.delta_mean_lr_sensitivity(), -0.775, kTight);
  EXPECT_NEAR(post_on.delta_best_val_loss(), -0.3, kTight);
  EXPECT_NEAR(post_on.best_lr_ratio(), 0.1, kTight);
  EXPECT_EQ(post_on.delta_failure_rate(), -0.25);

  const v1::VariantComparison& pre_off = a.variants(2);
  EXPECT_NEAR(pre_off.mean_lr_sensitivity(), 0.075, kTight);
  EXPECT_NEAR(pre_off.best_val_loss(), 2.2, kTight);
  EXPECT_EQ(pre_off.best_lr(), 1e-2);
  EXPECT_EQ(pre_off.best_warmup_steps(), 0);  // tied with warm-up 100: the smaller
  EXPECT_EQ(pre_off.failure_rate(), 0);

  const v1::VariantComparison& pre_on = a.variants(3);
  EXPECT_NEAR(pre_on.mean_lr_sensitivity(), 0.875, kTight);
  EXPECT_NEAR(pre_on.best_val_loss(), 2.5, kTight);
  EXPECT_EQ(pre_on.best_lr(), 1e-3);
  EXPECT_EQ(pre_on.best_warmup_steps(), 100);
  EXPECT_EQ(pre_on.failure_rate(), 0.75);
  EXPECT_NEAR(pre_on.delta_mean_lr_sensitivity(), 0.8, kTight);
  EXPECT_NEAR(pre_on.delta_best_val_loss(), 0.3, kTight);
  EXPECT_NEAR(pre_on.best_lr_ratio(), 0.1, kTight);
  EXPECT_EQ(pre_on.delta_failure_rate(), 0.75);
}

// The view's columns, in order.
std::vector<std::string> ViewColumns(PgConnection& conn, const std::string& view) {
  std::vector<std::string> out;
  auto r = conn.Exec("SELECT column_name::text FROM information_schema.columns"
                     " WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                     PgParams().Add(view));
  EXPECT_TRUE(r.ok()) << r.status();
  for (int i = 0; r.ok() && i < r->rows(); ++i) out.push_back(r->GetString(i, 0));
  return out;
}

// The view itself: proto VariantComparison's fields in order after
// sweep_id, and only that sweep's rows for WHERE sweep_id (another sweep's
// trials, with other variants, are no baseline here).
TEST_F(QkNormComparisonTest, TheViewHasTheMessagesColumnsAndSweepId) {
  std::vector<std::string> want = {"sweep_id"};
  const google::protobuf::Descriptor& d = *v1::VariantComparison::descriptor();
  for (int f = 0; f < d.field_count(); ++f) want.push_back(d.field(f)->name());
  EXPECT_EQ(ViewColumns(*conn_, "variant_comparison"), want);

  const int64_t other = AddSweep("other");
  Add(other, "qk_norm=true", "post", 0, 1e-3, 0, "SUCCEEDED", 1.0);
  auto r = conn_->Exec("SELECT count(*) FROM variant_comparison WHERE sweep_id = $1", PgParams().Add(sweep_));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->GetInt64(0, 0), 4);
  auto o = conn_->Exec("SELECT baseline_variant, delta_best_val_loss FROM variant_comparison WHERE sweep_id = $1",
                       PgParams().Add(other));
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->rows(), 1);
  EXPECT_EQ(o->GetString(0, 0), "qk_norm=true");
  EXPECT_EQ(o->GetDouble(0, 1), 0);
}

// Layers 6 then 12: the baseline is layers=6, the first in the spec, though
// "layers=12" comes first in byte order; rows follow the spec's order too.
// Two seeds (seed outermost in the expansion), one placement, warm-up 0,
// lr {1e-3, 1e-2}, l0 6.0:
//   layers=6:  1e-3 [3.0, 3.2] (l 3.1), 1e-2 [2.6, 2.8] (l 2.7): l* 2.7 at 1e-2, LRS 0.2
//   layers=12: 1e-3 [2.5, 2.7] (l 2.6), 1e-2 [DIV, 3.0] (l (6 + 3) / 2 = 4.5): l* 2.6 at 1e-3,
//              LRS (0 + 1.9) / 2 = 0.95; failure 1 / 4
//   against layers=6: LRS +0.75, l* -0.1, best lr x0.1, failure +0.25
// layers=24 has only pending trials: counted, no figures, so no deltas.
TEST_F(VariantComparisonTest, TheBaselineIsTheFirstInTheSpecNotInByteOrder) {
  const int64_t s = AddSweep("depth");
  for (int seed : {0, 1}) {
    Add(s, "layers=6", "pre", 0, 1e-3, seed, "SUCCEEDED", seed == 0 ? 3.0 : 3.2);
    Add(s, "layers=6", "pre", 0, 1e-2, seed, "SUCCEEDED", seed == 0 ? 2.6 : 2.8);
    Add(s, "layers=12", "pre", 0, 1e-3, seed, "SUCCEEDED", seed == 0 ? 2.5 : 2.7);
    if (seed == 0) {
      Add(s, "layers=12", "pre", 0, 1e-2, seed, "DIVERGED");
    } else {
      Add(s, "layers=12", "pre", 0, 1e-2, seed, "SUCCEEDED", 3.0);
    }
    Add(s, "layers=24", "pre", 0, 1e-3, seed, "PENDING");
    Add(s, "layers=24", "pre", 0, 1e-2, seed, "PENDING");
  }
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  ASSERT_EQ(Order(a), (std::vector<std::string>{"pre layers=6", "pre layers=12", "pre layers=24"}));
  const v1::VariantComparison& six = a.variants(0);
  const v1::VariantComparison& twelve = a.variants(1);
  const v1::VariantComparison& pending = a.variants(2);
  for (const v1::VariantComparison* v : {&six, &twelve, &pending}) EXPECT_EQ(v->baseline_variant(), "layers=6");

  EXPECT_NEAR(six.mean_lr_sensitivity(), 0.2, kTight);
  EXPECT_NEAR(six.best_val_loss(), 2.7, kTight);
  EXPECT_EQ(six.best_lr(), 1e-2);
  EXPECT_EQ(six.delta_best_val_loss(), 0);
  EXPECT_EQ(six.best_lr_ratio(), 1);

  EXPECT_EQ(twelve.trials(), 4);
  EXPECT_NEAR(twelve.mean_lr_sensitivity(), 0.95, kTight);
  EXPECT_NEAR(twelve.best_val_loss(), 2.6, kTight);
  EXPECT_EQ(twelve.best_lr(), 1e-3);
  EXPECT_EQ(twelve.best_warmup_steps(), 0);
  EXPECT_EQ(twelve.failure_rate(), 0.25);
  EXPECT_NEAR(twelve.delta_mean_lr_sensitivity(), 0.75, kTight);
  EXPECT_NEAR(twelve.delta_best_val_loss(), -0.1, kTight);
  EXPECT_NEAR(twelve.best_lr_ratio(), 0.1, kTight);
  EXPECT_EQ(twelve.delta_failure_rate(), 0.25);

  EXPECT_EQ(pending.trials(), 4);
  EXPECT_FALSE(pending.has_mean_lr_sensitivity());
  EXPECT_FALSE(pending.has_best_val_loss());
  EXPECT_FALSE(pending.has_best_lr());
  EXPECT_FALSE(pending.has_best_warmup_steps());
  EXPECT_FALSE(pending.has_failure_rate());
  EXPECT_FALSE(pending.has_delta_mean_lr_sensitivity());
  EXPECT_FALSE(pending.has_delta_best_val_loss());
  EXPECT_FALSE(pending.has_best_lr_ratio());
  EXPECT_FALSE(pending.has_delta_failure_rate());
}

// A boundary search: the median of max_trainable_lr over the variant's
// lines FOUND or TRAINABLE_EVERYWHERE (lr_boundary), and their count.
//   qk_norm=false: FOUND 1e-3, FOUND 4e-3, TRAINABLE_EVERYWHERE 1e-2 -> median 4e-3 of 3 lines
//                  (NOWHERE_TRAINABLE and SEARCHING lines are not counted)
//   qk_norm=true:  FOUND 2e-3, FOUND 8e-3 -> median 5e-3 of 2 lines (the mean of the middle
//                  two); a FAILED line is not counted.  Ratio 5e-3 / 4e-3 = 1.25.
TEST_F(VariantComparisonTest, BoundarySearchMedianOfTheLargestTrainableLr) {
  const int64_t s = AddSweep(
      "boundary", R"({"placements": ["post"], "warmup_steps": [0], "boundary_search": {"lr_min": 0.0001,)"
                  R"( "lr_max": 0.01}})");
  struct Line {
    std::string variant;
    int seed;
    std::string state;
    std::optional<double> max_trainable_lr;
  };
  const std::vector<Line> lines = {
      {"qk_norm=false", 0, "FOUND", 1e-3},
      {"qk_norm=true", 0, "FOUND", 2e-3},
      {"qk_norm=false", 1, "FOUND", 4e-3},
      {"qk_norm=true", 1, "FOUND", 8e-3},
      {"qk_norm=false", 2, "TRAINABLE_EVERYWHERE", 1e-2},
      {"qk_norm=true", 2, "FAILED", 1e-2},
      {"qk_norm=false", 3, "NOWHERE_TRAINABLE", std::nullopt},
      {"qk_norm=false", 4, "SEARCHING", 5e-2},
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    auto r = conn_->Exec(
        "INSERT INTO boundary_lines (sweep_id, line, variant, placement, warmup_steps, seed, state,"
        " max_trainable_lr) VALUES ($1, $2, $3, 'post', 0, $4, $5, $6)",
        PgParams().Add(s).Add(static_cast<int32_t>(i)).Add(l.variant).Add(static_cast<int32_t>(l.seed))
            .Add(l.state).AddOptional(l.max_trainable_lr));
    ASSERT_TRUE(r.ok()) << r.status();
    const int64_t trial = Add(s, l.variant, "post", 0, 1e-3, l.seed, "SUCCEEDED", 3.0);
    auto t = conn_->Exec("UPDATE trials SET boundary_line = $2 WHERE id = $1",
                         PgParams().Add(trial).Add(static_cast<int32_t>(i)));
    ASSERT_TRUE(t.ok()) << t.status();
  }
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  ASSERT_EQ(Order(a), (std::vector<std::string>{"post qk_norm=false", "post qk_norm=true"}));
  const v1::VariantComparison& off = a.variants(0);
  const v1::VariantComparison& on = a.variants(1);
  EXPECT_EQ(off.trials(), 5);
  EXPECT_EQ(off.boundary_lines(), 3);
  EXPECT_EQ(off.max_trainable_lr(), 4e-3);
  EXPECT_EQ(off.max_trainable_lr_ratio(), 1);
  EXPECT_EQ(on.trials(), 3);
  EXPECT_EQ(on.boundary_lines(), 2);
  EXPECT_NEAR(on.max_trainable_lr(), 5e-3, kTight);
  EXPECT_NEAR(on.max_trainable_lr_ratio(), 1.25, kTight);
  EXPECT_EQ(on.baseline_variant(), "qk_norm=false");
}

// placement_sensitivity_at's tolerance: `tolerance` in the place where
// `tolerance_used` was (a reader by position reads the same value), and
// `tolerance_used`, deprecated, as the last column; GetSweepAnalysis reads
// `tolerance`.
TEST_F(QkNormComparisonTest, PlacementSensitivityHasToleranceAndTheDeprecatedToleranceUsedLast) {
  const std::vector<std::string> columns = ViewColumns(*conn_, "placement_sensitivity");
  ASSERT_EQ(columns.size(), 21u);
  EXPECT_EQ(columns[16], "tolerance");
  EXPECT_EQ(columns.back(), "tolerance_used");
  for (const char* from : {"placement_sensitivity_at(0.1)", "placement_sensitivity"}) {
    auto r = conn_->Exec(absl::StrCat("SELECT * FROM ", from, " WHERE sweep_id = $1"), PgParams().Add(sweep_));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rows(), 4) << from;
    EXPECT_EQ(r->column("tolerance"), 16) << from;
    EXPECT_EQ(r->column("tolerance_used"), 20) << from;
    const double want = std::string(from) == "placement_sensitivity" ? 0.05 : 0.1;
    for (int row = 0; row < r->rows(); ++row) {
      EXPECT_EQ(r->GetDouble(row, 16), want) << from;
      EXPECT_EQ(r->GetDouble(row, 20), want) << from;
    }
  }
  const v1::GetSweepAnalysisResponse a = Analysis(sweep_, 0.1);
  ASSERT_EQ(a.placements_size(), 4);
  for (const v1::PlacementSensitivity& p : a.placements()) EXPECT_EQ(p.tolerance(), 0.1);
}

}  // namespace
}  // namespace normsweep::db
