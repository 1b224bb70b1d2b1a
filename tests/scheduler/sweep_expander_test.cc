#include "scheduler/sweep_expander.h"

#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

v1::SweepSpec Grid() {
  v1::SweepSpec spec;
  spec.set_name("grid");
  spec.mutable_base()->set_d_model(64);
  spec.mutable_base()->set_heads(4);
  spec.mutable_base()->set_steps(100);
  spec.add_placements("post");
  spec.add_placements("pre");
  spec.add_warmup_steps(0);
  spec.add_warmup_steps(4000);
  spec.add_peak_lrs(1e-4);
  spec.add_peak_lrs(5e-4);
  spec.add_peak_lrs(1e-3);
  spec.add_seeds(1);
  spec.add_seeds(2);
  return spec;
}

std::string Error(const v1::SweepSpec& spec) {
  auto trials = ExpandSweep(spec);
  EXPECT_FALSE(trials.ok());
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(trials.status().message());
}

TEST(SweepExpanderTest, GridIsTheProductInDocumentedOrder) {
  auto trials = ExpandSweep(Grid());
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
  v1::ExtraAxis* layers = spec.add_extra_axes();
  layers->set_field("layers");
  layers->add_values("6");
  layers->add_values("18");
  v1::ExtraAxis* opt = spec.add_extra_axes();
  opt->set_field("optimizer");
  opt->add_values("adam");
  opt->add_values("sgd");
  v1::ExtraAxis* beta2 = spec.add_extra_axes();
  beta2->set_field("beta2");
  beta2->add_values("0.98");
  v1::ExtraAxis* dm = spec.add_extra_axes();
  dm->set_field("d_model");
  dm->add_values("64");
  dm->add_values("128");
  auto trials = ExpandSweep(spec);
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

TEST(SweepExpanderTest, RandomSearchIsDeterministicAndInRange) {
  v1::SweepSpec spec = Grid();
  spec.clear_warmup_steps();
  spec.clear_peak_lrs();
  v1::RandomSearch* rs = spec.mutable_random_search();
  rs->set_samples(50);
  rs->set_lr_min(1e-5);
  rs->set_lr_max(1e-2);
  rs->set_warmup_min(0);
  rs->set_warmup_max(8000);
  rs->set_seed(7);
  auto a = ExpandSweep(spec);
  auto b = ExpandSweep(spec);
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
  rs->set_seed(8);
  auto c = ExpandSweep(spec);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)[0].config.lr(), (*a)[0].config.lr());
}

TEST(SweepExpanderTest, RejectsBadSpecsNamingTheField) {
  v1::SweepSpec s = Grid();
  s.clear_name();
  EXPECT_THAT(Error(s), HasSubstr("spec.name"));
  s = Grid();
  s.set_name(std::string(kMaxNameLength + 1, 'x'));
  EXPECT_THAT(Error(s), HasSubstr("spec.name: at most"));
  s.set_name(std::string("a\0b", 3));
  EXPECT_THAT(Error(s), HasSubstr("spec.name: must not contain NUL"));
  s.set_name("ok");
  s.mutable_base()->set_data_file(std::string("/data/a\0b", 9));
  EXPECT_THAT(Error(s), HasSubstr("spec.base.data_file: must not contain NUL"));
  s = Grid();
  s.clear_placements();
  EXPECT_THAT(Error(s), HasSubstr("spec.placements: must not be empty"));
  s = Grid();
  s.clear_seeds();
  EXPECT_THAT(Error(s), HasSubstr("spec.seeds: must not be empty"));
  s = Grid();
  s.clear_warmup_steps();
  EXPECT_THAT(Error(s), HasSubstr("spec.warmup_steps: must not be empty"));
  s = Grid();
  s.clear_peak_lrs();
  EXPECT_THAT(Error(s), HasSubstr("spec.peak_lrs: must not be empty"));
  s = Grid();
  s.add_placements("middle");
  EXPECT_THAT(Error(s), HasSubstr("spec.placements[2]"));
  s = Grid();
  s.add_peak_lrs(-1);
  EXPECT_THAT(Error(s), HasSubstr("spec.peak_lrs[3]"));
  s = Grid();
  s.add_peak_lrs(0);
  EXPECT_THAT(Error(s), HasSubstr("spec.peak_lrs[3]"));
  s = Grid();
  s.add_peak_lrs(std::nan(""));
  EXPECT_THAT(Error(s), HasSubstr("spec.peak_lrs[3]"));
  s = Grid();
  s.add_peak_lrs(INFINITY);
  EXPECT_THAT(Error(s), HasSubstr("spec.peak_lrs[3]"));
  s = Grid();
  s.add_warmup_steps(-5);
  EXPECT_THAT(Error(s), HasSubstr("spec.warmup_steps[2]"));
  s = Grid();
  s.add_seeds(1);
  EXPECT_THAT(Error(s), HasSubstr("spec.seeds[2]: duplicate"));
  s = Grid();
  s.mutable_base()->set_heads(5);  // 64 % 5 != 0
  EXPECT_THAT(Error(s), HasSubstr("spec.base"));
  EXPECT_THAT(Error(s), HasSubstr("heads"));
  s = Grid();
  s.mutable_base()->set_task(std::string(kMaxStringFieldLength + 1, 'a'));
  EXPECT_THAT(Error(s), HasSubstr("spec.base.task: at most"));
  s = Grid();
  s.set_max_attempts(-1);
  EXPECT_THAT(Error(s), HasSubstr("spec.max_attempts"));
  s = Grid();
  s.set_max_concurrent_trials(-1);
  EXPECT_THAT(Error(s), HasSubstr("spec.max_concurrent_trials"));
  s = Grid();
  s.set_priority(5000);
  EXPECT_THAT(Error(s), HasSubstr("spec.priority"));
}

TEST(SweepExpanderTest, RejectsBadExtraAxesAndCombinations) {
  v1::SweepSpec s = Grid();
  v1::ExtraAxis* axis = s.add_extra_axes();
  axis->set_field("lr");  // a main axis
  axis->add_values("0.1");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].field"));
  axis->set_field("no_such_field");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].field"));
  axis->set_field("layers");
  axis->set_values(0, "many");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->set_values(0, "-3");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->set_field("optimizer");
  axis->set_values(0, "lion");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->clear_values();
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].values: must not be empty"));
  // With the base's 8 heads, d_model 96 is valid and 100 is not.
  s = Grid();
  s.mutable_base()->set_heads(8);
  axis = s.add_extra_axes();
  axis->set_field("d_model");
  axis->add_values("96");
  axis->add_values("100");
  EXPECT_THAT(Error(s), HasSubstr("spec.extra_axes[0].values[1]"));
  // Each value valid on its own, but d_model 100 with 8 heads is not.
  s = Grid();
  axis = s.add_extra_axes();
  axis->set_field("d_model");
  axis->add_values("100");
  v1::ExtraAxis* heads = s.add_extra_axes();
  heads->set_field("heads");
  heads->add_values("4");
  heads->add_values("8");
  std::string e = Error(s);
  EXPECT_THAT(e, HasSubstr("spec: trial 12 (placement=post, warmup_steps=0, lr=0.0001, seed=1, d_model=100,heads=8)"));
  EXPECT_THAT(e, HasSubstr("heads"));
}

TEST(SweepExpanderTest, EnforcesTheGridLimit) {
  v1::SweepSpec s = Grid();
  s.clear_seeds();
  for (int i = 0; i < kMaxAxisValues; ++i) s.add_seeds(i);  // 12 x 1000 > 10,000
  std::string e = Error(s);
  EXPECT_THAT(e, HasSubstr("the limit is 10000"));
  s.add_seeds(kMaxAxisValues);
  EXPECT_THAT(Error(s), HasSubstr("spec.seeds: at most 1000 values"));
  // Exactly at the limit is fine: 2 x 1 x 1 x 5000.
  s = Grid();
  s.clear_warmup_steps();
  s.add_warmup_steps(0);
  s.clear_peak_lrs();
  s.add_peak_lrs(1e-3);
  s.clear_seeds();
  for (int i = 0; i < 1000; ++i) s.add_seeds(i);
  v1::ExtraAxis* axis = s.add_extra_axes();
  axis->set_field("layers");
  for (int l = 1; l <= 5; ++l) axis->add_values(std::to_string(l));
  auto trials = ExpandSweep(s);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 10000u);
  axis->add_values("6");
  EXPECT_THAT(Error(s), HasSubstr("limit"));
}

TEST(SweepExpanderTest, NormalizedSpecFillsMaxAttempts) {
  EXPECT_EQ(NormalizedSpec(Grid()).max_attempts(), kDefaultMaxAttempts);
  v1::SweepSpec s = Grid();
  s.set_max_attempts(7);
  EXPECT_EQ(NormalizedSpec(s).max_attempts(), 7);
}

}  // namespace
}  // namespace normsweep::scheduler
