// The analysis views of db/views (warmup_lr_grid_stats, placement_sensitivity,
// step0_grad_norms) against a real PostgreSQL: hand-inserted trials
// (succeeded/diverged/failed mixes, several seeds, both placements, a NaN
// loss, tolerance edges) and figures worked out by hand in the comments.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>

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

class SensitivityViewsTest : public testing::ViewsTest {
 protected:
  int64_t AddTrial(int64_t sweep, const std::string& variant, const std::string& placement, int warmup, double lr,
                   int seed, const std::string& state, std::optional<double> final_val_loss = std::nullopt,
                   const std::string& config = "{}") {
    return ViewsTest::AddTrial(sweep, {.variant = variant, .placement = placement, .warmup_steps = warmup,
                                       .peak_lr = lr, .seed = seed, .state = state,
                                       .final_val_loss = final_val_loss, .config = config});
  }

  void AddNorm(int64_t trial, int step, int layer, const std::string& matrix, double norm) {
    auto r = conn_->Exec("INSERT INTO layer_grad_norms (trial_id, step, layer, matrix, norm) VALUES ($1,$2,$3,$4,$5)",
                         PgParams().Add(trial).Add(static_cast<int32_t>(step)).Add(static_cast<int32_t>(layer))
                             .Add(matrix).Add(norm));
    EXPECT_TRUE(r.ok()) << r.status();
  }

  // Sweep A, variant "": post/pre x warm-up {0, 100} x lr {1e-3, 1e-2} x
  // seeds {0, 1}. Cell means (over succeeded seeds with a finite loss):
  //   pre  (0, 1e-3) 2.25 [2.0, 2.5]     (0, 1e-2) 2.0 [1.75, 2.25]  <- best cell
  //        (100,1e-3) 2.5 [2.5, 2.5]     (100,1e-2) 2.25 [2.25, DIVERGED]
  //   post (0, 1e-3) -   [DIV, DIV]      (0, 1e-2) -  [DIV, FAILED]
  //        (100,1e-3) 2.5 [2.5, NaN]     (100,1e-2) 3.25 [3.0, 3.5]
  // Variant "layers=2" of the same sweep: post (0, 1e-3) 1.0 and a pending
  // pre trial; it must not move the yardstick of variant "". Sweep B holds a
  // loss of 0.5 that must not either.
  void AddGrid() {
    a_ = AddSweep("a");
    AddTrial(a_, "", "pre", 0, 1e-3, 0, "SUCCEEDED", 2.0);
    AddTrial(a_, "", "pre", 0, 1e-3, 1, "SUCCEEDED", 2.5);
    AddTrial(a_, "", "pre", 0, 1e-2, 0, "SUCCEEDED", 1.75);
    AddTrial(a_, "", "pre", 0, 1e-2, 1, "SUCCEEDED", 2.25);
    AddTrial(a_, "", "pre", 100, 1e-3, 0, "SUCCEEDED", 2.5);
    AddTrial(a_, "", "pre", 100, 1e-3, 1, "SUCCEEDED", 2.5);
    AddTrial(a_, "", "pre", 100, 1e-2, 0, "SUCCEEDED", 2.25);
    AddTrial(a_, "", "pre", 100, 1e-2, 1, "DIVERGED");
    AddTrial(a_, "", "post", 0, 1e-3, 0, "DIVERGED");
    AddTrial(a_, "", "post", 0, 1e-3, 1, "DIVERGED");
    AddTrial(a_, "", "post", 0, 1e-2, 0, "DIVERGED");
    AddTrial(a_, "", "post", 0, 1e-2, 1, "FAILED");
    AddTrial(a_, "", "post", 100, 1e-3, 0, "SUCCEEDED", 2.5);
    AddTrial(a_, "", "post", 100, 1e-3, 1, "SUCCEEDED", kNaN);
    AddTrial(a_, "", "post", 100, 1e-2, 0, "SUCCEEDED", 3.0);
    AddTrial(a_, "", "post", 100, 1e-2, 1, "SUCCEEDED", 3.5);
    AddTrial(a_, "layers=2", "post", 0, 1e-3, 0, "SUCCEEDED", 1.0);
    AddTrial(a_, "layers=2", "pre", 0, 1e-3, 0, "PENDING");
    const int64_t b = AddSweep("b");
    AddTrial(b, "", "pre", 0, 1e-3, 0, "SUCCEEDED", 0.5);
  }

  struct Sensitivity {
    int64_t trials, succeeded, diverged, failed, unfinished, grid_cells, cells_near_best;
    std::optional<double> best, median, share, divergence_rate, best_cell;
  };
  // placement -> row, for sweep a_ and one variant.
  std::map<std::string, Sensitivity> Query(const std::string& from, const std::string& variant = "") {
    auto r = conn_->Exec(absl::StrCat("SELECT placement, trials, succeeded, diverged, failed, unfinished, grid_cells,"
                                      " cells_near_best, best_val_loss, median_val_loss, share_near_best,"
                                      " divergence_rate, best_cell_val_loss FROM ",
                                      from, " WHERE sweep_id = $1 AND variant = $2"),
                         PgParams().Add(a_).Add(variant));
    EXPECT_TRUE(r.ok()) << r.status();
    std::map<std::string, Sensitivity> out;
    if (!r.ok()) return out;
    for (int i = 0; i < r->rows(); ++i) {
      out[r->GetString(i, 0)] = {r->GetInt64(i, 1), r->GetInt64(i, 2), r->GetInt64(i, 3), r->GetInt64(i, 4),
                                 r->GetInt64(i, 5), r->GetInt64(i, 6), r->GetInt64(i, 7),
                                 r->GetOptionalDouble(i, 8), r->GetOptionalDouble(i, 9), r->GetOptionalDouble(i, 10),
                                 r->GetOptionalDouble(i, 11), r->GetOptionalDouble(i, 12)};
    }
    return out;
  }

  int64_t a_ = 0;
};

TEST_F(SensitivityViewsTest, GridStatsPerCell) {
  AddGrid();
  auto r = conn_->Exec(
      "SELECT placement, warmup_steps, peak_lr, trials, succeeded, diverged, mean_val_loss, std_val_loss, n_seeds,"
      " divergence_rate FROM warmup_lr_grid_stats WHERE sweep_id = $1 AND variant = ''"
      " ORDER BY placement, warmup_steps, peak_lr",
      PgParams().Add(a_));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows(), 8);
  using Row = std::tuple<std::string, int64_t, double, int64_t, int64_t, int64_t, std::optional<double>,
                         std::optional<double>, int64_t, std::optional<double>>;
  auto row = [&](int i) {
    return Row{r->GetString(i, 0),         r->GetInt64(i, 1),          r->GetDouble(i, 2),
               r->GetInt64(i, 3),          r->GetInt64(i, 4),          r->GetInt64(i, 5),
               r->GetOptionalDouble(i, 6), r->GetOptionalDouble(i, 7), r->GetInt64(i, 8),
               r->GetOptionalDouble(i, 9)};
  };
  const double sd = std::sqrt(0.125);  // two seeds 0.5 apart: sample std = 0.25 * sqrt(2)
  // post (0, 1e-3): both diverged: no mean, divergence rate 1.
  EXPECT_EQ(row(0), (Row{"post", 0, 1e-3, 2, 0, 2, std::nullopt, std::nullopt, 0, 1.0}));
  // post (0, 1e-2): one diverged, one failed: the failure is not a divergence
  // and not a survivor either, so the rate is 1 / 1.
  EXPECT_EQ(row(1), (Row{"post", 0, 1e-2, 2, 0, 1, std::nullopt, std::nullopt, 0, 1.0}));
  // post (100, 1e-3): the NaN loss is counted as succeeded but not averaged.
  EXPECT_EQ(row(2), (Row{"post", 100, 1e-3, 2, 2, 0, 2.5, std::nullopt, 1, 0.0}));
  EXPECT_EQ(std::get<0>(row(3)), "post");
  EXPECT_DOUBLE_EQ(*std::get<6>(row(3)), 3.25);
  EXPECT_NEAR(*std::get<7>(row(3)), sd, 1e-12);
  EXPECT_EQ(std::get<8>(row(3)), 2);
  EXPECT_DOUBLE_EQ(*std::get<6>(row(4)), 2.25);  // pre (0, 1e-3)
  EXPECT_NEAR(*std::get<7>(row(4)), sd, 1e-12);
  EXPECT_DOUBLE_EQ(*std::get<6>(row(5)), 2.0);   // pre (0, 1e-2)
  EXPECT_EQ(row(6), (Row{"pre", 100, 1e-3, 2, 2, 0, 2.5, 0.0, 2, 0.0}));
  // pre (100, 1e-2): one seed survived, one diverged.
  EXPECT_EQ(row(7), (Row{"pre", 100, 1e-2, 2, 1, 1, 2.25, std::nullopt, 1, 0.5}));
}

TEST_F(SensitivityViewsTest, PlacementSensitivityAtTheDefaultTolerance) {
  AddGrid();
  std::map<std::string, Sensitivity> s = Query("placement_sensitivity");
  ASSERT_EQ(s.size(), 2u);
  const Sensitivity& pre = s["pre"];
  EXPECT_EQ(pre.trials, 8);
  EXPECT_EQ(pre.succeeded, 7);
  EXPECT_EQ(pre.diverged, 1);
  EXPECT_EQ(pre.failed, 0);
  EXPECT_EQ(pre.best, 1.75);    // best single trial
  EXPECT_EQ(pre.median, 2.25);  // of 1.75 2.0 2.25 2.25 2.5 2.5 2.5
  EXPECT_EQ(pre.best_cell, 2.0);
  // 5% of 2.0: only cells <= 2.1, i.e. the best cell itself.
  EXPECT_EQ(pre.grid_cells, 4);
  EXPECT_EQ(pre.cells_near_best, 1);
  EXPECT_EQ(pre.share, 0.25);
  EXPECT_EQ(pre.divergence_rate, 1.0 / 8.0);
  const Sensitivity& post = s["post"];
  EXPECT_EQ(post.trials, 8);
  EXPECT_EQ(post.succeeded, 4);  // the NaN trial included
  EXPECT_EQ(post.diverged, 3);
  EXPECT_EQ(post.failed, 1);
  EXPECT_EQ(post.best, 2.5);
  EXPECT_EQ(post.median, 3.0);    // of 2.5 3.0 3.5 (NaN left out)
  EXPECT_EQ(post.best_cell, 2.0);  // the yardstick is shared with Pre-LN
  EXPECT_EQ(post.grid_cells, 4);
  EXPECT_EQ(post.cells_near_best, 0);
  EXPECT_EQ(post.share, 0.0);
  EXPECT_EQ(post.divergence_rate, 3.0 / 7.0);

  // The view is the function at 0.05.
  std::map<std::string, Sensitivity> f = Query("placement_sensitivity_at(0.05)");
  EXPECT_EQ(f["pre"].cells_near_best, 1);
  EXPECT_EQ(f["post"].cells_near_best, 0);

  // Another variant has its own yardstick: its own best (1.0), and a cell
  // still pending is in the grid but not near the best.
  std::map<std::string, Sensitivity> v = Query("placement_sensitivity", "layers=2");
  EXPECT_EQ(v["post"].cells_near_best, 1);
  EXPECT_EQ(v["post"].share, 1.0);
  EXPECT_EQ(v["pre"].grid_cells, 1);
  EXPECT_EQ(v["pre"].cells_near_best, 0);
  EXPECT_EQ(v["pre"].unfinished, 1);
  EXPECT_EQ(v["pre"].best, std::nullopt);
  EXPECT_EQ(v["pre"].median, std::nullopt);
  EXPECT_EQ(v["pre"].divergence_rate, std::nullopt);
}

TEST_F(SensitivityViewsTest, ToleranceEdgesAreInclusive) {
  AddGrid();
  // 25% of 2.0 is exactly 2.5: the cells at 2.5 count (inclusive).
  std::map<std::string, Sensitivity> at = Query("placement_sensitivity_at(0.25)");
  EXPECT_EQ(at["pre"].cells_near_best, 4);
  EXPECT_EQ(at["pre"].share, 1.0);
  EXPECT_EQ(at["post"].cells_near_best, 1);
  EXPECT_EQ(at["post"].share, 0.25);
  // Just below: they do not.
  std::map<std::string, Sensitivity> below = Query("placement_sensitivity_at(0.2499)");
  EXPECT_EQ(below["pre"].cells_near_best, 3);
  EXPECT_EQ(below["post"].cells_near_best, 0);
  // Tolerance 0: only the best cell itself.
  std::map<std::string, Sensitivity> zero = Query("placement_sensitivity_at(0)");
  EXPECT_EQ(zero["pre"].cells_near_best, 1);
  EXPECT_EQ(zero["post"].cells_near_best, 0);
}

TEST_F(SensitivityViewsTest, BadToleranceIsAnErrorNamingIt) {
  for (const char* bad : std::initializer_list<const char*>{"-0.1", "NaN", "Infinity", nullptr}) {
    PgParams params;
    if (bad == nullptr) {
      params.AddNull();
    } else {
      params.Add(bad);
    }
    auto r = conn_->Exec("SELECT * FROM placement_sensitivity_at($1::double precision)", params);
    ASSERT_FALSE(r.ok()) << (bad ? bad : "NULL");
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("tolerance must be a finite number >= 0"));
  }
}

// Step-0 FFN gradient norms: per layer, mean over seeds (each seed once,
// however many grid cells it ran in), two depths, only step 0.
TEST_F(SensitivityViewsTest, Step0GradNormsMeanOverSeedsAndLastLayerAcrossDepths) {
  const int64_t s = AddSweep("depth");
  auto add_norms = [&](int64_t trial, int layers, double scale) {
    for (int l = 0; l < layers; ++l) {
      AddNorm(trial, 0, l, "ffn.fc1", scale * (l + 1));
      AddNorm(trial, 0, l, "ffn.fc2", scale * (l + 1) * 1.5);
      AddNorm(trial, 5, l, "ffn.fc2", 100.0);  // a later step: not Figure 3
    }
  };
  // Depth 2 (from the config): seed 0 in two cells with norms x1, seed 1 in
  // one cell with norms x2. Mean over seeds: W1 = 1.5 * (l + 1), not the
  // per-trial mean 4/3 * (l + 1).
  add_norms(AddTrial(s, "layers=2", "post", 0, 1e-3, 0, "SUCCEEDED", 2.0, R"({"layers":2})"), 2, 1.0);
  add_norms(AddTrial(s, "layers=2", "post", 100, 1e-3, 0, "DIVERGED", std::nullopt, R"({"layers":2})"), 2, 1.0);
  add_norms(AddTrial(s, "layers=2", "post", 0, 1e-3, 1, "SUCCEEDED", 2.0, R"({"layers":2})"), 2, 2.0);
  // Depth 3, no layers in the stored config: taken from the reported layers.
  add_norms(AddTrial(s, "layers=3", "post", 0, 1e-3, 0, "SUCCEEDED", 2.0), 3, 0.5);
  add_norms(AddTrial(s, "layers=3", "pre", 0, 1e-3, 0, "SUCCEEDED", 2.0), 3, 0.25);

  auto all = conn_->Exec(
      "SELECT placement, layers, layer, w1_grad_norm, w2_grad_norm, n_seeds FROM step0_grad_norms"
      " WHERE sweep_id = $1 ORDER BY placement, layers, layer",
      PgParams().Add(s));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->rows(), 2 + 3 + 3);
  EXPECT_EQ(all->GetString(0, 0), "post");
  EXPECT_EQ(all->GetInt64(0, 1), 2);
  EXPECT_EQ(all->GetInt64(0, 2), 0);
  EXPECT_DOUBLE_EQ(all->GetDouble(0, 3), 1.5);
  EXPECT_DOUBLE_EQ(all->GetDouble(0, 4), 2.25);
  EXPECT_EQ(all->GetInt64(0, 5), 2);
  EXPECT_DOUBLE_EQ(all->GetDouble(1, 3), 3.0);
  EXPECT_EQ(all->GetInt64(2, 1), 3);
  EXPECT_EQ(all->GetInt64(2, 5), 1);

  // The paper's "last-layer W2 across depths", as the README writes it.
  auto last = conn_->Exec(
      "SELECT placement, layers, w2_grad_norm FROM step0_grad_norms"
      " WHERE sweep_id = $1 AND layer = layers - 1 ORDER BY placement, layers",
      PgParams().Add(s));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->rows(), 3);
  EXPECT_EQ(last->GetString(0, 0), "post");
  EXPECT_EQ(last->GetInt64(0, 1), 2);
  EXPECT_DOUBLE_EQ(last->GetDouble(0, 2), 1.5 * 2 * 1.5);  // layer 1, mean scale 1.5
  EXPECT_EQ(last->GetInt64(1, 1), 3);
  EXPECT_DOUBLE_EQ(last->GetDouble(1, 2), 0.5 * 3 * 1.5);
  EXPECT_EQ(last->GetString(2, 0), "pre");
  EXPECT_DOUBLE_EQ(last->GetDouble(2, 2), 0.25 * 3 * 1.5);
}

}  // namespace
}  // namespace normsweep::db
