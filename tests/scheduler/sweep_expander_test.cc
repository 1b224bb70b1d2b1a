// ExpandSweep (scheduler/sweep_expander.h): the trials of a parsed spec,
// in their documented order, and the pieces that make them.
#include "scheduler/sweep_expander.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/sweep_expander_internal.h"
#include "tests/common/expand_sweep.h"
#include "tests/scheduler/spec_fixtures.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;
using testing::Grid;

TEST(SweepExpanderTest, GridIsTheProductInDocumentedOrder) {
  auto trials = testing::Expand(Grid());
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 2u * 2 * 3 * 2);
  const auto& t = *trials;
  // Placement innermost, then lr, then warm-up, seed outermost.
  EXPECT_EQ(t[0].config.placement(), "post");
  EXPECT_EQ(t[1].config.placement(), "pre");
  EXPECT_DOUBLE_EQ(t[1].config.lr(), 1e-4);
  EXPECT_DOUBLE_EQ(t[2].config.lr(), 5e-4);
  EXPECT_EQ(t[5].config.warmup_steps(), 0);
  EXPECT_EQ(t[6].config.warmup_steps(), 4000);
  EXPECT_EQ(t[11].config.seed(), 1);
  EXPECT_EQ(t[12].config.seed(), 2);
  std::set<std::tuple<std::string, int, double, int>> distinct;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].index, static_cast<int>(i));
    EXPECT_EQ(t[i].config.d_model(), 64);   // from the base
    EXPECT_EQ(t[i].config.d_ff(), 256);     // resolved default 4 * d_model
    EXPECT_EQ(t[i].variant, "");
    distinct.insert({t[i].config.placement(), t[i].config.warmup_steps(), t[i].config.lr(), t[i].config.seed()});
  }
  EXPECT_EQ(distinct.size(), t.size());
}

TEST(SweepExpanderTest, ExtraAxesMultiplyTheGridAndNameTheVariant) {
  v1::SweepSpec spec = Grid();
  spec.mutable_base()->clear_d_model();  // the axis sets it
  testing::AddAxis(&spec, "layers", {"6", "18"});
  testing::AddAxis(&spec, "optimizer", {"adam", "sgd"});
  testing::AddAxis(&spec, "beta2", {"0.98"});
  testing::AddAxis(&spec, "d_model", {"64", "128"});
  auto trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 24u * 2 * 2 * 1 * 2);
  std::set<std::string> variants;
  for (const auto& t : *trials) {
    variants.insert(t.variant);
    EXPECT_DOUBLE_EQ(t.config.beta2(), 0.98);
  }
  EXPECT_EQ(variants.size(), 8u);
  EXPECT_TRUE(variants.contains("layers=18,optimizer=sgd,beta2=0.98,d_model=128"));
  const auto& last = trials->back();
  EXPECT_EQ(last.config.layers(), 18);
  EXPECT_EQ(last.config.optimizer(), "sgd");
  EXPECT_EQ(last.config.d_model(), 128);
}

// The paper's Figure 4 comparison (issue 16): adam against radam, the grid
// once per optimizer; an unknown name is rejected at its index.
TEST(SweepExpanderTest, OptimizerAxisTakesAdamAndRAdam) {
  v1::SweepSpec spec = Grid();
  v1::ExtraAxis* opt = testing::AddAxis(&spec, "optimizer", {"adam", "radam"});
  auto trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 24u * 2);
  std::map<std::string, int> per_optimizer;
  for (const auto& t : *trials) {
    ++per_optimizer[t.config.optimizer()];
    EXPECT_EQ(t.variant, "optimizer=" + t.config.optimizer());
  }
  EXPECT_EQ(per_optimizer, (std::map<std::string, int>{{"adam", 24}, {"radam", 24}}));
  opt->set_values(1, "radamw");
  EXPECT_THAT(testing::ExpansionError(spec), HasSubstr("spec.extra_axes[0].values[1]"));
}

TEST(SweepExpanderTest, RandomSearchIsDeterministicAndInRange) {
  v1::SweepSpec spec = testing::Random(/*samples=*/50, /*lr_min=*/1e-5, /*warmup_max=*/8000, /*seed=*/7);
  auto a = testing::Expand(spec);
  auto b = testing::Expand(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 50u * 2 * 2);
  int below_1e3 = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    const auto& c = (*a)[i].config;
    EXPECT_EQ(c.lr(), (*b)[i].config.lr());
    EXPECT_EQ(c.warmup_steps(), (*b)[i].config.warmup_steps());
    EXPECT_GE(c.lr(), 1e-5);
    EXPECT_LE(c.lr(), 1e-2);
    EXPECT_GE(c.warmup_steps(), 0);
    EXPECT_LE(c.warmup_steps(), 8000);
    if (c.lr() < 1e-3) ++below_1e3;
  }
  // Log-uniform: two thirds of the mass lies below 1e-3 (uniform would give 10%).
  EXPECT_GT(below_1e3, a->size() / 2);
  // Both placements get the same sample (a paired comparison).
  EXPECT_EQ((*a)[0].config.lr(), (*a)[1].config.lr());
  spec.mutable_random_search()->set_seed(8);
  auto c = testing::Expand(spec);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)[0].config.lr(), (*a)[0].config.lr());
}

TEST(SweepExpanderTest, EveryPlacementCrossedWithTheNormSwitches) {
  v1::SweepSpec spec = testing::AllPlacements();
  testing::AddAxis(&spec, "qk_norm", {"false", "true"});
  testing::AddAxis(&spec, "z_loss", {"0", "1e-4"});
  testing::AddAxis(&spec, "norm", {"layernorm", "rmsnorm"});
  auto trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 5u * 2 * 3 * 2 * 2 * 2 * 2);  // placements x warm-ups x lrs x seeds x the axes
  std::set<std::string> placements, variants;
  for (const auto& t : *trials) {
    placements.insert(t.config.placement());
    variants.insert(t.variant);
    EXPECT_EQ(t.config.qk_norm(), t.variant.find("qk_norm=true") != std::string::npos) << t.variant;
    EXPECT_EQ(t.config.norm(), t.variant.find("norm=rmsnorm") != std::string::npos ? "rmsnorm" : "layernorm");
    EXPECT_DOUBLE_EQ(t.config.z_loss(), t.variant.find("z_loss=0.0001") != std::string::npos ? 1e-4 : 0);
    // Mix-LN's resolved config says its fraction (the default), the others' do not.
    EXPECT_EQ(t.config.has_mix_post_fraction(), t.config.placement() == "mix");
  }
  EXPECT_EQ(placements, (std::set<std::string>{"post", "pre", "peri", "deepnorm", "mix"}));
  EXPECT_EQ(variants.size(), 8u);
  EXPECT_TRUE(variants.contains("qk_norm=true,z_loss=0.0001,norm=rmsnorm")) << *variants.begin();
  EXPECT_TRUE(variants.contains("qk_norm=false,z_loss=0,norm=layernorm"));
  // The stored spec says peri, as its trials do.
  const v1::SweepSpec stored = testing::StoredSpec(spec);
  EXPECT_EQ(std::vector<std::string>(stored.placements().begin(), stored.placements().end()),
            (std::vector<std::string>{"post", "pre", "peri", "deepnorm", "mix"}));
  spec.set_placements(0, "post-ln");
  EXPECT_EQ(testing::StoredSpec(spec).placements(0), "post");
}

TEST(SweepExpanderTest, MixPostFractionAxisVariesMixLnOnly) {
  v1::SweepSpec spec = Grid();
  spec.clear_placements();
  spec.add_placements("mix");
  testing::AddAxis(&spec, "mix_post_fraction", {"0", "0.25", "1"});
  auto trials = testing::Expand(spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u * 2 * 3 * 2 * 3);
  std::set<double> fractions;
  for (const auto& t : *trials) fractions.insert(t.config.mix_post_fraction());
  EXPECT_EQ(fractions, (std::set<double>{0, 0.25, 1}));
  EXPECT_EQ(trials->back().variant, "mix_post_fraction=1");
  // With another placement its values would be one trial twice.
  spec.add_placements("pre");
  EXPECT_EQ(testing::ExpansionError(spec),
            "spec.extra_axes[0].field: an axis over mix_post_fraction needs every placement to be mix (it sets "
            "Mix-LN's share of Post-LN blocks); spec.placements[1] is 'pre'");
}

TEST(SweepExpanderTest, SettingsGridAndSamples) {
  const auto grid = internal::GridSettings(Grid());
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[0], (internal::WarmupLr{0, 1e-4}));
  EXPECT_EQ(grid[2], (internal::WarmupLr{0, 1e-3}));
  EXPECT_EQ(grid[3], (internal::WarmupLr{4000, 1e-4}));  // warm-up outer

  v1::RandomSearch rs = testing::Random().random_search();
  const auto a = internal::SampleRandomSearch(rs);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, internal::SampleRandomSearch(rs));
  for (const auto& [w, lr] : a) {
    EXPECT_GE(w, 0);
    EXPECT_LE(w, 100);
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-2);
  }
  rs.set_lr_max(rs.lr_min());
  rs.set_warmup_min(7);
  rs.set_warmup_max(7);
  for (const auto& [w, lr] : internal::SampleRandomSearch(rs)) {
    EXPECT_EQ(w, 7);
    EXPECT_EQ(lr, 1e-4);
  }
}

TEST(SweepExpanderTest, ExpansionRefusesTwoTrialsOfOneConfig) {
  v1::SweepSpec s = Grid();
  s.clear_placements();
  s.add_placements("post");
  s.clear_seeds();
  s.add_seeds(1);
  const std::vector<internal::WarmupLr> settings = {{0, 1e-3}, {10, 1e-3}};
  auto trials = internal::ExpandTrials(s, settings, {}, 2);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[1].index, 1);
  EXPECT_EQ((*trials)[1].config.warmup_steps(), 10);
  const std::vector<internal::WarmupLr> twice = {{0, 1e-3}, {10, 1e-3}, {0, 1e-3}};
  EXPECT_EQ(testing::Message(internal::ExpandTrials(s, twice, {}, 3).status()),
            "spec: trials 0 and 2 would have the same resolved config (placement=post, warmup_steps=0, lr=0.001, "
            "seed=1)");
  s.mutable_random_search()->set_samples(3);
  EXPECT_THAT(testing::Message(internal::ExpandTrials(s, twice, {}, 3).status()),
              ::testing::StartsWith("spec.random_search: trials 0 and 2"));
}

}  // namespace
}  // namespace normsweep::scheduler
