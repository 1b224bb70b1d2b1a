// The sensitivity views of db/views against a real PostgreSQL:
// lr_sensitivity, lr_sensitivity_summary and grid_importance on
// hand-inserted trials (mixed outcomes, diverged seeds with their own l0, a
// NaN loss, one lr only, a missing l0, pending trials, random-search and
// boundary-search sweeps), read through PostgresStore::GetSweepAnalysis as
// the CLI and the report get them. Every expected figure is worked out by
// hand in the comments from the numbers inserted.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/views_test.h"

namespace normsweep::db {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTight = 1e-12;

// Where a trial's l0 comes from.
enum class L0From { kNone, kColumn, kStep0Late, kStep0Batch };

class LrSensitivityViewsTest : public testing::ViewsTest {
 protected:
  int64_t AddSweep(const std::string& spec = "{}") { return ViewsTest::AddSweep("s", spec); }

  // A trial with its state, final loss and l0 (stored where `from` says).
  void AddTrial(int64_t sweep, const std::string& variant, const std::string& placement, int warmup, double lr,
                int seed, const std::string& state, std::optional<double> final_val_loss, std::optional<double> l0,
                L0From from = L0From::kColumn) {
    const int64_t id = ViewsTest::AddTrial(
        sweep, {.variant = variant, .placement = placement, .warmup_steps = warmup, .peak_lr = lr, .seed = seed,
                .state = state, .final_val_loss = final_val_loss,
                .init_val_loss = from == L0From::kColumn ? l0 : std::nullopt});
    ASSERT_NE(id, 0);
    if (from == L0From::kStep0Late) {
      auto m = conn_->Exec("INSERT INTO trial_metric_late (trial_id, step, val_loss) VALUES ($1, 0, $2)",
                           PgParams().Add(id).AddOptional(l0));
      ASSERT_TRUE(m.ok()) << m.status();
    } else if (from == L0From::kStep0Batch) {
      // A batch of steps 0 and 10 (the step-10 val_loss is not l0).
      auto m = conn_->Exec(
          "INSERT INTO trial_metric_batches (trial_id, first_step, last_step, steps, lr, train_loss, val_loss,"
          " val_accuracy, grad_norm, tokens_per_s) VALUES ($1, 0, 10, '{0,10}', '{0,0}', '{7,6}',"
          " ARRAY[$2::float8, 1.0], '{0,0}', '{1,1}', '{1,1}')",
          PgParams().Add(id).AddOptional(l0));
      ASSERT_TRUE(m.ok()) << m.status();
    }
  }

  static const v1::LrSensitivity* Line(const v1::GetSweepAnalysisResponse& a, const std::string& variant,
                                       const std::string& placement, int warmup) {
    for (const auto& l : a.lr_sensitivity()) {
      if (l.variant() == variant && l.placement() == placement && l.warmup_steps() == warmup) return &l;
    }
    return nullptr;
  }
  static const v1::VarianceShares* Shares(const v1::GetSweepAnalysisResponse& a, const std::string& variant,
                                          const std::string& placement) {
    for (const auto& s : a.importance()) {
      if (s.variant() == variant && s.placement() == placement) return &s;
    }
    return nullptr;
  }

  // The balanced 2 x 2 grid with two seeds (numbers in BalancedGridSharesAreTheSumsOfSquares).
  void AddBalancedGrid(int64_t sweep, const std::string& variant, const std::string& placement) {
    AddTrial(sweep, variant, placement, 0, 1e-3, 0, "SUCCEEDED", 2.0, 7.0);
    AddTrial(sweep, variant, placement, 0, 1e-3, 1, "SUCCEEDED", 4.0, 7.0);
    AddTrial(sweep, variant, placement, 0, 1e-2, 0, "SUCCEEDED", 4.0, 7.0);
    AddTrial(sweep, variant, placement, 0, 1e-2, 1, "SUCCEEDED", 6.0, 7.0);
    AddTrial(sweep, variant, placement, 100, 1e-3, 0, "SUCCEEDED", 6.0, 7.0);
    AddTrial(sweep, variant, placement, 100, 1e-3, 1, "SUCCEEDED", 6.0, 7.0);
    AddTrial(sweep, variant, placement, 100, 1e-2, 0, "SUCCEEDED", 8.0, 7.0);
    AddTrial(sweep, variant, placement, 100, 1e-2, 1, "SUCCEEDED", 12.0, 7.0);
  }

};

// One line, post, warm-up 0, lrs 1e-3, 1e-2, 1e-1, seeds 0 and 1; seed 0's
// l0 is 6.0 (trials.init_val_loss), seed 1's 5.0 (its step-0 metric row,
// late at 1e-3 and 1e-1, in a batch at 1e-2). A FAILED seed 2 at 1e-3 and a
// CANCELLED one at 1e-2 are left out.
//   1e-3: 3.0, 3.5                         l = 3.25
//   1e-2: 2.5, DIVERGED -> its l0 5.0      l = 3.75
//   1e-1: DIVERGED -> 6.0, NaN -> 5.0      l = 5.5
// l0 of the line = mean of the six counted trials' l0 = (3 x 6 + 3 x 5) / 6 = 5.5
// min(l, l0) = 3.25, 3.75, 5.5; l* = 3.25 (at 1e-3)
// LRS = ((3.25 - 3.25) + (3.75 - 3.25) + (5.5 - 3.25)) / 3 = 2.75 / 3
// points at l0: 3 (the two diverged seeds and the NaN).
TEST_F(LrSensitivityViewsTest, MixedOutcomesDivergedSeedsAndNaNCountAsTheirOwnL0) {
  const int64_t s = AddSweep();
  AddTrial(s, "", "post", 0, 1e-3, 0, "SUCCEEDED", 3.0, 6.0);
  AddTrial(s, "", "post", 0, 1e-3, 1, "SUCCEEDED", 3.5, 5.0, L0From::kStep0Late);
  AddTrial(s, "", "post", 0, 1e-3, 2, "FAILED", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "", "post", 0, 1e-2, 0, "SUCCEEDED", 2.5, 6.0);
  AddTrial(s, "", "post", 0, 1e-2, 1, "DIVERGED", std::nullopt, 5.0, L0From::kStep0Batch);
  AddTrial(s, "", "post", 0, 1e-2, 2, "CANCELLED", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "", "post", 0, 1e-1, 0, "DIVERGED", std::nullopt, 6.0);
  AddTrial(s, "", "post", 0, 1e-1, 1, "SUCCEEDED", kNaN, 5.0, L0From::kStep0Late);
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  ASSERT_EQ(a.lr_sensitivity_size(), 1);
  const v1::LrSensitivity& l = a.lr_sensitivity(0);
  EXPECT_EQ(l.placement(), "post");
  EXPECT_EQ(l.warmup_steps(), 0);
  EXPECT_EQ(l.lrs(), 3);
  EXPECT_EQ(l.lrs_pending(), 0);
  EXPECT_EQ(l.points_at_l0(), 3);
  EXPECT_DOUBLE_EQ(l.best_lr(), 1e-3);
  EXPECT_NEAR(l.best_val_loss(), 3.25, kTight);
  EXPECT_NEAR(l.init_val_loss(), 5.5, kTight);
  EXPECT_NEAR(l.lr_sensitivity(), 2.75 / 3, kTight);
}

// Line post/100: lrs 1e-3 (3.0, 3.0), 3e-3 (2.5, 2.5), 1e-2 (2.0 and a
// RUNNING seed), 1e-1 (4.0 and 4.0 whose trial has no l0 at all). The two
// last are pending; over the two counted: l0 = 6.0, l* = 2.5 (best lr 3e-3),
// LRS = ((3.0 - 2.5) + 0) / 2 = 0.25.
// Line pre/0: one lr (2.0, 2.2; l0 6.0): l = 2.1 = l*, LRS 0 by the formula.
// Line pre/100: a DIVERGED seed without l0 (older trainers sent none): not
// counted, pending; no figure.
// Variant "flat": pre/0, l0 5.0, final losses 5.5 (1e-3) and 6.0 (1e-2),
// worse than l0 everywhere: min(l, l0) = 5.0 at both lrs, l* = 5.0, LRS 0
// (the model that stays at l0 has LRS 0, and l* is capped at l0).
TEST_F(LrSensitivityViewsTest, PendingMissingL0OneLrAndAModelThatStaysAtL0) {
  const int64_t s = AddSweep();
  AddTrial(s, "", "post", 100, 1e-3, 0, "SUCCEEDED", 3.0, 6.0);
  AddTrial(s, "", "post", 100, 1e-3, 1, "SUCCEEDED", 3.0, 6.0);
  AddTrial(s, "", "post", 100, 3e-3, 0, "SUCCEEDED", 2.5, 6.0);
  AddTrial(s, "", "post", 100, 3e-3, 1, "SUCCEEDED", 2.5, 6.0);
  AddTrial(s, "", "post", 100, 1e-2, 0, "SUCCEEDED", 2.0, 6.0);
  AddTrial(s, "", "post", 100, 1e-2, 1, "RUNNING", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "", "post", 100, 1e-1, 0, "SUCCEEDED", 4.0, 6.0);
  AddTrial(s, "", "post", 100, 1e-1, 1, "SUCCEEDED", 4.0, std::nullopt, L0From::kNone);
  AddTrial(s, "", "pre", 0, 1e-3, 0, "SUCCEEDED", 2.0, 6.0);
  AddTrial(s, "", "pre", 0, 1e-3, 1, "SUCCEEDED", 2.2, 6.0);
  AddTrial(s, "", "pre", 100, 1e-3, 0, "DIVERGED", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "flat", "pre", 0, 1e-3, 0, "SUCCEEDED", 5.5, 5.0);
  AddTrial(s, "flat", "pre", 0, 1e-2, 0, "SUCCEEDED", 6.0, 5.0, L0From::kStep0Late);
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  // By variant, placement, warm-up.
  ASSERT_EQ(a.lr_sensitivity_size(), 4);
  EXPECT_EQ(a.lr_sensitivity(0).placement(), "post");
  EXPECT_EQ(a.lr_sensitivity(1).placement(), "pre");
  EXPECT_EQ(a.lr_sensitivity(1).warmup_steps(), 0);
  EXPECT_EQ(a.lr_sensitivity(2).warmup_steps(), 100);
  EXPECT_EQ(a.lr_sensitivity(3).variant(), "flat");

  const v1::LrSensitivity* post = Line(a, "", "post", 100);
  ASSERT_NE(post, nullptr);
  EXPECT_EQ(post->lrs(), 2);
  EXPECT_EQ(post->lrs_pending(), 2);
  EXPECT_EQ(post->points_at_l0(), 0);
  EXPECT_DOUBLE_EQ(post->best_lr(), 3e-3);
  EXPECT_NEAR(post->best_val_loss(), 2.5, kTight);
  EXPECT_NEAR(post->init_val_loss(), 6.0, kTight);
  EXPECT_NEAR(post->lr_sensitivity(), 0.25, kTight);

  const v1::LrSensitivity* one = Line(a, "", "pre", 0);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->lrs(), 1);
  EXPECT_NEAR(one->best_val_loss(), 2.1, kTight);
  ASSERT_TRUE(one->has_lr_sensitivity());
  EXPECT_EQ(one->lr_sensitivity(), 0.0);

  const v1::LrSensitivity* none = Line(a, "", "pre", 100);
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->lrs(), 0);
  EXPECT_EQ(none->lrs_pending(), 1);
  EXPECT_FALSE(none->has_lr_sensitivity());
  EXPECT_FALSE(none->has_best_val_loss());
  EXPECT_FALSE(none->has_best_lr());
  EXPECT_FALSE(none->has_init_val_loss());

  const v1::LrSensitivity* flat = Line(a, "flat", "pre", 0);
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->lrs(), 2);
  EXPECT_DOUBLE_EQ(flat->best_lr(), 1e-3);
  EXPECT_NEAR(flat->best_val_loss(), 5.0, kTight);
  EXPECT_NEAR(flat->lr_sensitivity(), 0.0, kTight);

  // Summary, lines with two lrs or more: post has one (100: 0.25, l* 2.5);
  // pre none (its only figure is the one-lr 0); flat/pre one (0, l* 5.0).
  ASSERT_EQ(a.lr_sensitivity_summary_size(), 3);
  const v1::PlacementLrSensitivity& sp = a.lr_sensitivity_summary(0);
  EXPECT_EQ(sp.placement(), "post");
  EXPECT_EQ(sp.warmups(), 1);
  EXPECT_NEAR(sp.mean_lr_sensitivity(), 0.25, kTight);
  EXPECT_EQ(sp.warmup_of_min(), 100);
  EXPECT_NEAR(sp.best_val_loss(), 2.5, kTight);
  const v1::PlacementLrSensitivity& sq = a.lr_sensitivity_summary(1);
  EXPECT_EQ(sq.placement(), "pre");
  EXPECT_EQ(sq.variant(), "");
  EXPECT_EQ(sq.warmups(), 0);
  EXPECT_FALSE(sq.has_mean_lr_sensitivity());
  EXPECT_FALSE(sq.has_warmup_of_min());
  EXPECT_FALSE(sq.has_best_val_loss());
  EXPECT_EQ(a.lr_sensitivity_summary(2).variant(), "flat");
}

// Over warm-ups: pre lines 0 (LRS (2.0 - 1.0 + 0) / 2 = 0.5, l* 1.0),
// 100 (lrs 1e-3 -> 1.5, 1e-2 -> 1.25: LRS 0.125, l* 1.25) and 400
// (1.75, 1.75: LRS 0, l* 1.75); mean (0.5 + 0.125 + 0) / 3 = 0.208333..,
// min 0 at 400, max 0.5, best l* 1.0. All l0 4.0.
TEST_F(LrSensitivityViewsTest, SummaryOverWarmups) {
  const int64_t s = AddSweep();
  AddTrial(s, "", "pre", 0, 1e-3, 0, "SUCCEEDED", 1.0, 4.0);
  AddTrial(s, "", "pre", 0, 1e-2, 0, "SUCCEEDED", 2.0, 4.0);
  AddTrial(s, "", "pre", 100, 1e-3, 0, "SUCCEEDED", 1.5, 4.0);
  AddTrial(s, "", "pre", 100, 1e-2, 0, "SUCCEEDED", 1.25, 4.0);
  AddTrial(s, "", "pre", 400, 1e-3, 0, "SUCCEEDED", 1.75, 4.0);
  AddTrial(s, "", "pre", 400, 1e-2, 0, "SUCCEEDED", 1.75, 4.0);
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  ASSERT_EQ(a.lr_sensitivity_size(), 3);
  EXPECT_NEAR(a.lr_sensitivity(0).lr_sensitivity(), 0.5, kTight);
  EXPECT_NEAR(a.lr_sensitivity(1).lr_sensitivity(), 0.125, kTight);
  EXPECT_DOUBLE_EQ(a.lr_sensitivity(1).best_lr(), 1e-2);
  EXPECT_NEAR(a.lr_sensitivity(2).lr_sensitivity(), 0.0, kTight);
  ASSERT_EQ(a.lr_sensitivity_summary_size(), 1);
  const v1::PlacementLrSensitivity& p = a.lr_sensitivity_summary(0);
  EXPECT_EQ(p.warmups(), 3);
  EXPECT_NEAR(p.mean_lr_sensitivity(), 0.625 / 3, kTight);
  EXPECT_NEAR(p.min_lr_sensitivity(), 0.0, kTight);
  EXPECT_NEAR(p.max_lr_sensitivity(), 0.5, kTight);
  EXPECT_EQ(p.warmup_of_min(), 400);
  EXPECT_NEAR(p.best_val_loss(), 1.0, kTight);
}

// The grid (warm-up 0/100 x lr 1e-3/1e-2, seeds y):
//            1e-3        1e-2
//   0     2, 4 (f 3)  4, 6  (f 5)
//   100   6, 6 (f 6)  8, 12 (f 10)
// mu = 6; row means 4, 8: a = -2, +2, var_warmup = 4; column means 4.5, 7.5:
// b = -1.5, +1.5, var_lr = 2.25; residuals f - mu - a - b = 0.5, -0.5, -0.5,
// 0.5: var_interaction = 0.25; var(f) = (9 + 1 + 0 + 16) / 4 = 6.5 = 4 + 2.25
// + 0.25; seed variances (population) 1, 1, 0, 4: var_seed = 1.5; total 8.
// Shares 0.5, 0.28125, 0.03125, 0.1875.
// The classical two-way ANOVA (n = 2 seeds, N = 8), by hand from the y:
// SS_total = sum (y - 6)^2 = 16 + 4 + 4 + 0 + 0 + 0 + 4 + 36 = 64;
// SS_w = n L sum a^2 = 2 * 2 * 8 = 32 (0.5); SS_l = n W sum b^2 = 4 * 4.5 = 18
// (0.28125); SS_wl = n sum r^2 = 2 * 1 = 2 (0.03125); SS_err = sum (y - f)^2
// = 1 + 1 + 1 + 1 + 0 + 0 + 4 + 4 = 12 (0.1875). 32 + 18 + 2 + 12 = 64.
// Variant "mixed" holds the same values through the l0 rule: the 12 is a
// DIVERGED seed whose l0 is 12, the second 6 a NaN whose l0 is 6, and a
// FAILED third seed in one cell is left out: the same shares.
TEST_F(LrSensitivityViewsTest, BalancedGridSharesAreTheSumsOfSquares) {
  const int64_t s = AddSweep();
  AddBalancedGrid(s, "", "post");
  AddTrial(s, "mixed", "post", 0, 1e-3, 0, "SUCCEEDED", 2.0, 7.0);
  AddTrial(s, "mixed", "post", 0, 1e-3, 1, "SUCCEEDED", 4.0, 7.0);
  AddTrial(s, "mixed", "post", 0, 1e-3, 2, "FAILED", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "mixed", "post", 0, 1e-2, 0, "SUCCEEDED", 4.0, 7.0);
  AddTrial(s, "mixed", "post", 0, 1e-2, 1, "SUCCEEDED", 6.0, 7.0);
  AddTrial(s, "mixed", "post", 100, 1e-3, 0, "SUCCEEDED", 6.0, 7.0);
  AddTrial(s, "mixed", "post", 100, 1e-3, 1, "SUCCEEDED", kNaN, 6.0, L0From::kStep0Late);
  AddTrial(s, "mixed", "post", 100, 1e-2, 0, "SUCCEEDED", 8.0, 7.0);
  AddTrial(s, "mixed", "post", 100, 1e-2, 1, "DIVERGED", std::nullopt, 12.0, L0From::kStep0Batch);
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  ASSERT_EQ(a.importance_size(), 2);
  EXPECT_EQ(a.importance(0).variant(), "");
  EXPECT_EQ(a.importance(1).variant(), "mixed");
  for (const v1::VarianceShares& v : a.importance()) {
    SCOPED_TRACE(v.variant());
    EXPECT_EQ(v.note(), "");
    EXPECT_EQ(v.warmups(), 2);
    EXPECT_EQ(v.lrs(), 2);
    EXPECT_EQ(v.trials(), 8);
    EXPECT_NEAR(v.total_variance(), 8.0, kTight);
    EXPECT_NEAR(v.share_warmup(), 32.0 / 64, kTight);
    EXPECT_NEAR(v.share_lr(), 18.0 / 64, kTight);
    EXPECT_NEAR(v.share_interaction(), 2.0 / 64, kTight);
    EXPECT_NEAR(v.share_seed(), 12.0 / 64, kTight);
    EXPECT_NEAR(v.share_warmup() + v.share_lr() + v.share_interaction() + v.share_seed(), 1.0, kTight);
  }
}

// What has no shares, and why: in one sweep, post's grid has a RUNNING
// trial in one cell (3 of 4 cells counted); pre's a DIVERGED seed without
// l0 (also 3 of 4); variant "one-warmup" has one warm-up and lrs 1e-3
// (2, 4: f 3) and 1e-2 (4, 6: f 5): mu 4, var_lr 1, var_seed 1, total 2:
// shares 0, 0.5, 0, 0.5; variant "flat" the same loss 2.5 everywhere.
TEST_F(LrSensitivityViewsTest, IncompleteGridsOneWarmupAndNoVariance) {
  const int64_t s = AddSweep();
  AddTrial(s, "", "post", 0, 1e-3, 0, "SUCCEEDED", 2.0, 7.0);
  AddTrial(s, "", "post", 0, 1e-2, 0, "SUCCEEDED", 3.0, 7.0);
  AddTrial(s, "", "post", 100, 1e-3, 0, "SUCCEEDED", 2.5, 7.0);
  AddTrial(s, "", "post", 100, 1e-2, 0, "SUCCEEDED", 3.5, 7.0);
  AddTrial(s, "", "pre", 0, 1e-3, 0, "SUCCEEDED", 2.0, 7.0);
  AddTrial(s, "", "pre", 0, 1e-2, 0, "SUCCEEDED", 3.0, 7.0);
  AddTrial(s, "", "pre", 100, 1e-3, 0, "SUCCEEDED", 2.5, 7.0);
  AddTrial(s, "", "pre", 100, 1e-2, 0, "DIVERGED", std::nullopt, std::nullopt, L0From::kNone);
  AddTrial(s, "one-warmup", "pre", 0, 1e-3, 0, "SUCCEEDED", 2.0, 7.0);
  AddTrial(s, "one-warmup", "pre", 0, 1e-3, 1, "SUCCEEDED", 4.0, 7.0);
  AddTrial(s, "one-warmup", "pre", 0, 1e-2, 0, "SUCCEEDED", 4.0, 7.0);
  AddTrial(s, "one-warmup", "pre", 0, 1e-2, 1, "SUCCEEDED", 6.0, 7.0);
  for (int w : {0, 100}) {
    for (double lr : {1e-3, 1e-2}) AddTrial(s, "flat", "pre", w, lr, 0, "SUCCEEDED", 2.5, 7.0);
  }
  // Last, so that the post grid is complete until now.
  AddTrial(s, "", "post", 100, 1e-2, 1, "RUNNING", std::nullopt, std::nullopt, L0From::kNone);
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  for (const char* p : {"post", "pre"}) {
    SCOPED_TRACE(p);
    const v1::VarianceShares* v = Shares(a, "", p);
    ASSERT_NE(v, nullptr);
    EXPECT_THAT(v->note(), HasSubstr("incomplete grid: 3 of 4 cells counted"));
    EXPECT_FALSE(v->has_share_warmup());
    EXPECT_FALSE(v->has_share_lr());
    EXPECT_FALSE(v->has_share_interaction());
    EXPECT_FALSE(v->has_share_seed());
    EXPECT_FALSE(v->has_total_variance());
    EXPECT_EQ(v->trials(), 3);
  }
  const v1::VarianceShares* one = Shares(a, "one-warmup", "pre");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->note(), "one warm-up: the warm-up and interaction shares are 0 by construction");
  EXPECT_EQ(one->warmups(), 1);
  EXPECT_NEAR(one->total_variance(), 2.0, kTight);
  EXPECT_NEAR(one->share_warmup(), 0.0, kTight);
  EXPECT_NEAR(one->share_lr(), 0.5, kTight);
  EXPECT_NEAR(one->share_interaction(), 0.0, kTight);
  EXPECT_NEAR(one->share_seed(), 0.5, kTight);
  const v1::VarianceShares* flat = Shares(a, "flat", "pre");
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->note(), "no variance: every counted loss is the same");
  EXPECT_FALSE(flat->has_share_lr());
  EXPECT_NEAR(flat->total_variance(), 0.0, kTight);
}

// A random search has no grid (each sample its own warm-up and lr), and a
// boundary search none either: no shares, said so; the LR-sensitivity lines
// are still given (here one lr each: LRS 0, and no summary line).
TEST_F(LrSensitivityViewsTest, RandomAndBoundarySearchHaveNoShares) {
  const int64_t random = AddSweep(
      R"({"name": "r", "placements": ["pre"], "random_search": {"samples": 3, "lr_min": 0.0001,)"
      R"( "lr_max": 0.01, "warmup_min": 0, "warmup_max": 500}})");
  AddTrial(random, "", "pre", 17, 2.1e-4, 0, "SUCCEEDED", 3.0, 6.0);
  AddTrial(random, "", "pre", 230, 1.7e-3, 0, "SUCCEEDED", 2.5, 6.0);
  AddTrial(random, "", "pre", 488, 6.4e-3, 0, "DIVERGED", std::nullopt, 6.0);
  const v1::GetSweepAnalysisResponse r = Analysis(random);
  ASSERT_EQ(r.importance_size(), 1);
  EXPECT_EQ(r.importance(0).note(),
            "random search: no grid; fANOVA needs a surrogate model (Optuna's fANOVA fits a random forest) - "
            "not computed");
  EXPECT_FALSE(r.importance(0).has_share_lr());
  EXPECT_FALSE(r.importance(0).has_total_variance());
  ASSERT_EQ(r.lr_sensitivity_size(), 3);
  for (const v1::LrSensitivity& l : r.lr_sensitivity()) {
    EXPECT_EQ(l.lrs(), 1);
    EXPECT_EQ(l.lr_sensitivity(), 0.0);
  }
  ASSERT_EQ(r.lr_sensitivity_summary_size(), 1);
  EXPECT_EQ(r.lr_sensitivity_summary(0).warmups(), 0);

  const int64_t boundary = AddSweep(
      R"({"name": "b", "placements": ["post"], "warmup_steps": [0], "boundary_search": {"lr_min": 0.0001,)"
      R"( "lr_max": 0.1}})");
  AddBalancedGrid(boundary, "", "post");
  const v1::GetSweepAnalysisResponse b = Analysis(boundary);
  ASSERT_EQ(b.importance_size(), 1);
  EXPECT_THAT(b.importance(0).note(), HasSubstr("boundary search"));
  EXPECT_FALSE(b.importance(0).has_share_warmup());
}

// The views answer for the sweep asked about only, and a sweep without
// trials has no rows.
TEST_F(LrSensitivityViewsTest, OtherSweepsDoNotLeakIn) {
  const int64_t a = AddSweep();
  const int64_t b = AddSweep();
  const int64_t empty = AddSweep();
  AddBalancedGrid(a, "", "post");
  AddTrial(b, "", "post", 0, 1e-3, 0, "SUCCEEDED", 100.0, 7.0);
  const v1::GetSweepAnalysisResponse ra = Analysis(a);
  ASSERT_EQ(ra.importance_size(), 1);
  EXPECT_NEAR(ra.importance(0).total_variance(), 8.0, kTight);
  ASSERT_EQ(ra.lr_sensitivity_size(), 2);
  const v1::GetSweepAnalysisResponse re = Analysis(empty);
  EXPECT_EQ(re.lr_sensitivity_size(), 0);
  EXPECT_EQ(re.lr_sensitivity_summary_size(), 0);
  EXPECT_EQ(re.importance_size(), 0);
}

}  // namespace
}  // namespace normsweep::db
