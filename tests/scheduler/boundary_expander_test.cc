// Parse and ExpandSweep for boundary_search sweeps: the coarse start of every line,
// the lines' numbers, the stored defaults, and bad specs refused naming the
// field.
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/boundary_search.h"
#include "scheduler/sweep_expander.h"
#include "scheduler/sweep_spec.h"
#include "tests/common/expand_sweep.h"
#include "tests/common/specs.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

v1::SweepSpec Boundary() {
  v1::SweepSpec spec = testing::BoundarySpec("boundary", /*seeds=*/0);
  spec.add_warmup_steps(100);
  spec.add_warmup_steps(400);
  spec.add_seeds(1);
  spec.add_seeds(2);
  return spec;
}

using testing::ExpansionError;

TEST(BoundaryExpanderTest, CoarseStartOfEveryLine) {
  v1::SweepSpec spec = Boundary();
  testing::AddAxis(&spec, "layers", {"2", "4"});
  auto trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  // 2 placements x 3 warm-ups x 2 seeds x 2 variants = 24 lines, 4 lrs each.
  ASSERT_EQ(trials->size(), 24u * 4);
  std::map<int32_t, std::vector<double>> lrs_of_line;
  std::map<int32_t, std::tuple<std::string, int, int, std::string>> line_key;
  for (size_t i = 0; i < trials->size(); ++i) {
    const db::NewTrial& t = (*trials)[i];
    EXPECT_EQ(t.index, static_cast<int>(i));
    ASSERT_TRUE(t.boundary_line.has_value());
    lrs_of_line[*t.boundary_line].push_back(t.config.lr());
    auto key = std::make_tuple(t.config.placement(), t.config.warmup_steps(), t.config.seed(), t.variant);
    auto [it, inserted] = line_key.emplace(*t.boundary_line, key);
    if (!inserted) {
      EXPECT_EQ(it->second, key) << "trial " << i << " is in line " << *t.boundary_line;
    }
  }
  ASSERT_EQ(lrs_of_line.size(), 24u);
  EXPECT_EQ(lrs_of_line.begin()->first, 0);
  EXPECT_EQ(lrs_of_line.rbegin()->first, 23);
  std::set<std::tuple<std::string, int, int, std::string>> distinct;
  for (const auto& [line, key] : line_key) distinct.insert(key);
  EXPECT_EQ(distinct.size(), 24u);  // one line per (placement, warm-up, seed, variant)
  const std::vector<double> expected = schema::InitialLrs(schema::BoundarySettingsOf(spec.boundary_search()));
  for (const auto& [line, lrs] : lrs_of_line) EXPECT_EQ(lrs, expected) << "line " << line;
  // Placement innermost, as for a grid: lines 0 and 1 are post and pre.
  EXPECT_EQ(std::get<0>(line_key[0]), "post");
  EXPECT_EQ(std::get<0>(line_key[1]), "pre");
  EXPECT_EQ(std::get<1>(line_key[2]), 100);
}

TEST(BoundaryExpanderTest, StoredSpecSaysTheDefaults) {
  const v1::SweepSpec s = testing::StoredSpec(Boundary());
  EXPECT_EQ(s.boundary_search().resolution(), 1.25);
  EXPECT_EQ(s.boundary_search().initial_points(), 4);
  EXPECT_EQ(s.boundary_search().min_improvement(), 0.5);
  EXPECT_FALSE(s.boundary_search().has_max_val_loss());
  v1::SweepSpec given = Boundary();
  given.mutable_boundary_search()->set_resolution(2);
  given.mutable_boundary_search()->set_initial_points(3);
  given.mutable_boundary_search()->set_min_improvement(1);
  const v1::SweepSpec kept = testing::StoredSpec(given);
  EXPECT_EQ(kept.boundary_search().resolution(), 2);
  EXPECT_EQ(kept.boundary_search().initial_points(), 3);
  EXPECT_EQ(kept.boundary_search().min_improvement(), 1);
  EXPECT_FALSE(testing::StoredSpec(given).has_random_search());
  // A grid gets no boundary_search.
  v1::SweepSpec grid = Boundary();
  grid.clear_boundary_search();
  grid.add_peak_lrs(1e-3);
  EXPECT_FALSE(testing::StoredSpec(grid).has_boundary_search());
}

TEST(BoundaryExpanderTest, BadSpecsNameTheField) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto with = [](auto change) {
    v1::SweepSpec s = Boundary();
    change(*s.mutable_boundary_search());
    return s;
  };
  // The whole message of each of these changes...
  const std::vector<std::pair<std::function<void(v1::BoundarySearch&)>, std::string>> exact = {
      {[&](v1::BoundarySearch& b) { b.set_lr_min(0); }, "spec.boundary_search.lr_min: must be finite and > 0 (got 0)"},
      {[&](v1::BoundarySearch& b) { b.set_lr_max(1e-4); },
       "spec.boundary_search.lr_max: must be finite and > lr_min (got 0.0001, lr_min 0.0001)"},
      {[&](v1::BoundarySearch& b) { b.set_lr_max(1e-5); },
       "spec.boundary_search.lr_max: must be finite and > lr_min (got 1e-05, lr_min 0.0001)"},
      {[&](v1::BoundarySearch& b) { b.set_resolution(1); },
       "spec.boundary_search.resolution: must be finite and > 1 (got 1; 0: default 1.25)"},
      {[&](v1::BoundarySearch& b) { b.set_initial_points(1); },
       "spec.boundary_search.initial_points: must be in [2, 64] (got 1; 0: one per decade plus one)"},
      {[&](v1::BoundarySearch& b) { b.set_min_improvement(-0.1); },
       "spec.boundary_search.min_improvement: must be finite and >= 0 (got -0.1; 0: default 0.5)"},
      {[&](v1::BoundarySearch& b) { b.set_max_val_loss(nan); },
       "spec.boundary_search.max_val_loss: must be finite and > 0 when set (got nan)"},
  };
  for (const auto& [change, message] : exact) EXPECT_EQ(ExpansionError(with(change)), message);
  // ...and the field that these name.
  const std::vector<std::pair<std::function<void(v1::BoundarySearch&)>, std::string>> named = {
      {[&](v1::BoundarySearch& b) { b.set_lr_min(nan); }, "spec.boundary_search.lr_min: must be finite"},
      {[&](v1::BoundarySearch& b) { b.set_lr_max(inf); }, "spec.boundary_search.lr_max: must be finite"},
      {[&](v1::BoundarySearch& b) { b.set_resolution(0.5); }, "spec.boundary_search.resolution"},
      {[&](v1::BoundarySearch& b) { b.set_resolution(nan); }, "spec.boundary_search.resolution"},
      {[&](v1::BoundarySearch& b) { b.set_resolution(inf); }, "spec.boundary_search.resolution"},
      {[&](v1::BoundarySearch& b) { b.set_initial_points(65); }, "spec.boundary_search.initial_points"},
      {[&](v1::BoundarySearch& b) { b.set_initial_points(-3); }, "spec.boundary_search.initial_points"},
      {[&](v1::BoundarySearch& b) { b.set_min_improvement(inf); }, "spec.boundary_search.min_improvement"},
  };
  for (const auto& [change, field] : named) EXPECT_THAT(ExpansionError(with(change)), HasSubstr(field));

  v1::SweepSpec lrs = Boundary();
  lrs.add_peak_lrs(1e-3);
  EXPECT_EQ(ExpansionError(lrs), "spec.peak_lrs: must be empty when boundary_search is set (the search picks the lrs)");
  v1::SweepSpec random = Boundary();
  random.mutable_random_search()->set_samples(3);
  EXPECT_EQ(ExpansionError(random), "spec.random_search: must be unset when boundary_search is set");
  v1::SweepSpec no_warmup = Boundary();
  no_warmup.clear_warmup_steps();
  EXPECT_EQ(ExpansionError(no_warmup), "spec.warmup_steps: must not be empty");
  v1::SweepSpec bad_warmup = Boundary();
  bad_warmup.add_warmup_steps(-1);
  EXPECT_THAT(ExpansionError(bad_warmup), HasSubstr("spec.warmup_steps[3]"));
}

TEST(BoundaryExpanderTest, TrialLimitCountsTheBisections) {
  v1::BoundarySearch b = Boundary().boundary_search();
  // Three decades in 4 points: each coarse interval is a decade, and 10 ->
  // 3.16 -> 1.78 -> 1.33 -> 1.15 takes 4 bisections to get to 1.25.
  EXPECT_EQ(MaxBoundaryTrialsPerLine(b), 8);
  b.set_resolution(2);
  EXPECT_EQ(MaxBoundaryTrialsPerLine(b), 4 + 2);  // 10 -> 3.16 -> 1.78
  b.set_resolution(10);
  EXPECT_EQ(MaxBoundaryTrialsPerLine(b), 4);      // exactly reached by the coarse start
  b.set_resolution(0);
  b.set_initial_points(2);
  EXPECT_EQ(MaxBoundaryTrialsPerLine(b), 2 + 5);  // 1000 -> 31.6 -> 5.6 -> 2.37 -> 1.54 -> 1.24

  v1::SweepSpec big = Boundary();  // 12 lines x 8 = 96
  ASSERT_TRUE(testing::Expand(big).ok());
  big.clear_seeds();
  for (int i = 0; i < 417; ++i) big.add_seeds(i);  // 6 x 417 = 2502 lines x 8 = 20016 > 10000
  const std::string message = ExpansionError(big);
  EXPECT_THAT(message, HasSubstr("spec: the boundary search"));
  EXPECT_THAT(message, HasSubstr("2502 lines, up to 8 trials each"));
  EXPECT_THAT(message, HasSubstr("the limit is 10000"));
}

}  // namespace
}  // namespace normsweep::scheduler
