// ValidSpec::Parse (scheduler/sweep_spec.h): what it refuses, naming the
// field, and each of its steps on its own.
#include "scheduler/sweep_spec.h"

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/api_limits.h"
#include "scheduler/field_errors.h"
#include "tests/common/expand_sweep.h"
#include "tests/scheduler/spec_fixtures.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;
using testing::AllPlacements;
using testing::ExpansionError;
using testing::Grid;
using testing::Message;
using testing::Random;

TEST(SweepSpecTest, RejectsBadSpecsNamingTheField) {
  v1::SweepSpec s = Grid();
  s.clear_name();
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.name"));
  s = Grid();
  s.set_name(std::string(schema::kMaxNameLength + 1, 'x'));
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.name: at most"));
  s.set_name(std::string("a\0b", 3));
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.name: must not contain NUL"));
  s.set_name("ok");
  s.mutable_base()->set_data_file(std::string("/data/a\0b", 9));
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.base.data_file: must not contain NUL"));
  // A good grid with one change each, and what its rejection names.
  const std::vector<std::pair<std::function<void(v1::SweepSpec&)>, std::string>> bad = {
      {[](v1::SweepSpec& g) { g.clear_placements(); }, "spec.placements: must not be empty"},
      {[](v1::SweepSpec& g) { g.clear_seeds(); }, "spec.seeds: must not be empty"},
      {[](v1::SweepSpec& g) { g.clear_warmup_steps(); }, "spec.warmup_steps: must not be empty"},
      {[](v1::SweepSpec& g) { g.clear_peak_lrs(); }, "spec.peak_lrs: must not be empty"},
      {[](v1::SweepSpec& g) { g.add_placements("middle"); }, "spec.placements[2]"},
      {[](v1::SweepSpec& g) { g.add_peak_lrs(-1); }, "spec.peak_lrs[3]"},
      {[](v1::SweepSpec& g) { g.add_peak_lrs(0); }, "spec.peak_lrs[3]"},
      {[](v1::SweepSpec& g) { g.add_peak_lrs(std::nan("")); }, "spec.peak_lrs[3]"},
      {[](v1::SweepSpec& g) { g.add_peak_lrs(INFINITY); }, "spec.peak_lrs[3]"},
      {[](v1::SweepSpec& g) { g.add_warmup_steps(-5); }, "spec.warmup_steps[2]"},
      {[](v1::SweepSpec& g) { g.add_seeds(1); }, "spec.seeds[2]: duplicate"},
      {[](v1::SweepSpec& g) { g.mutable_base()->set_task(std::string(schema::kMaxStringFieldLength + 1, 'a')); },
       "spec.base.task: at most"},
      {[](v1::SweepSpec& g) { g.set_max_attempts(-1); }, "spec.max_attempts"},
      {[](v1::SweepSpec& g) { g.set_max_interruptions(-1); }, "spec.max_interruptions"},
      {[](v1::SweepSpec& g) { g.set_max_concurrent_trials(-1); }, "spec.max_concurrent_trials"},
      {[](v1::SweepSpec& g) { g.set_priority(5000); }, "spec.priority"},
  };
  for (const auto& [change, field] : bad) {
    s = Grid();
    change(s);
    EXPECT_THAT(ExpansionError(s), HasSubstr(field));
  }
  s = Grid();
  s.mutable_base()->set_heads(5);  // 64 % 5 != 0
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.base"));
  EXPECT_THAT(ExpansionError(s), HasSubstr("heads"));
}

TEST(SweepSpecTest, RejectsBadExtraAxesAndCombinations) {
  v1::SweepSpec s = Grid();
  v1::ExtraAxis* axis = s.add_extra_axes();
  axis->set_field("lr");  // a main axis
  axis->add_values("0.1");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].field"));
  axis->set_field("no_such_field");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].field"));
  axis->set_field("layers");
  axis->set_values(0, "many");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->set_values(0, "-3");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->set_field("optimizer");
  axis->set_values(0, "lion");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[0]"));
  axis->clear_values();
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values: must not be empty"));
  // With the base's 8 heads, d_model 96 is valid and 100 is not (the base
  // leaves d_model to the axis).
  s = Grid();
  s.mutable_base()->set_heads(8);
  s.mutable_base()->clear_d_model();
  axis = s.add_extra_axes();
  axis->set_field("d_model");
  axis->add_values("96");
  axis->add_values("100");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[1]"));
  // Each value valid on its own, but d_model 100 with 8 heads is not.
  s = Grid();
  s.mutable_base()->clear_d_model();
  s.mutable_base()->clear_heads();
  axis = s.add_extra_axes();
  axis->set_field("d_model");
  axis->add_values("100");
  testing::AddAxis(&s, "heads", {"4", "8"});
  std::string e = ExpansionError(s);
  EXPECT_THAT(e, HasSubstr("spec: trial 12 (placement=post, warmup_steps=0, lr=0.0001, seed=1, d_model=100,heads=8)"));
  EXPECT_THAT(e, HasSubstr("heads"));
}

TEST(SweepSpecTest, EnforcesTheGridLimit) {
  v1::SweepSpec s = Grid();
  s.clear_seeds();
  for (int i = 0; i < schema::kMaxAxisValues; ++i) s.add_seeds(i);  // 12 x 1000 > 10,000
  std::string e = ExpansionError(s);
  EXPECT_THAT(e, HasSubstr("the limit is 10000"));
  s.add_seeds(schema::kMaxAxisValues);
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.seeds: at most 1000 values"));
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
  auto trials = testing::Expand(s);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 10000u);
  axis->add_values("6");
  EXPECT_THAT(ExpansionError(s), HasSubstr("limit"));
}

TEST(SweepSpecTest, StoredSpecFillsMaxAttemptsAndMaxInterruptions) {
  EXPECT_EQ(testing::StoredSpec(Grid()).max_attempts(), schema::kDefaultMaxAttempts);
  EXPECT_EQ(testing::StoredSpec(Grid()).max_interruptions(), schema::kDefaultMaxInterruptions);
  v1::SweepSpec s = Grid();
  s.set_max_attempts(7);
  s.set_max_interruptions(9);
  EXPECT_EQ(testing::StoredSpec(s).max_attempts(), 7);
  EXPECT_EQ(testing::StoredSpec(s).max_interruptions(), 9);
}

TEST(SweepSpecTest, BadSchemesNameTheFieldAndIndexAndNothingIsExpanded) {
  v1::SweepSpec s = AllPlacements();
  s.add_placements("middle");
  std::string e = ExpansionError(s);
  EXPECT_THAT(e, HasSubstr("spec.placements[5]: placement: unknown placement 'middle'"));
  for (const char* name : {"post", "pre", "peri", "deepnorm", "mix"}) EXPECT_THAT(e, HasSubstr(name));
  s = AllPlacements();
  s.add_placements("peri");  // sandwich at [2] is peri
  EXPECT_EQ(ExpansionError(s),
            "spec.placements[5]: duplicate value: 'peri' is the same setting as spec.placements[2]");
  s = AllPlacements();
  s.set_placements(0, "");
  EXPECT_EQ(ExpansionError(s),
            "spec.placements[0]: must not be empty (one of post, pre, peri, deepnorm, mix; sandwich is peri)");
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>> bad_axes = {
      {"z_loss", {"0", "-1e-4"}, "spec.extra_axes[0].values[1]: z_loss: must be >= 0"},
      {"z_loss", {"inf"}, "spec.extra_axes[0].values[0]: 'inf' is not a finite number (z_loss)"},
      {"z_loss", {"nan"}, "spec.extra_axes[0].values[0]: 'nan' is not a finite number (z_loss)"},
      {"qk_norm", {"false", "yes"}, "spec.extra_axes[0].values[1]: 'yes' is not true or false (qk_norm)"},
      {"qk_norm", {"false", "false"}, "spec.extra_axes[0].values[1]: duplicate value"},
      {"norm", {"layernorm", "batchnorm"}, "spec.extra_axes[0].values[1]: norm: unknown norm 'batchnorm' (expected "
                                           "layernorm or rmsnorm)"},
  };
  for (const auto& [field, values, message] : bad_axes) {
    s = AllPlacements();
    testing::AddAxis(&s, field, values);
    EXPECT_THAT(ExpansionError(s), HasSubstr(message)) << field;
  }
  s = Grid();
  s.clear_placements();
  s.add_placements("mix");
  testing::AddAxis(&s, "mix_post_fraction", {"0.5", "1.5"});
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[1]: mix_post_fraction: must be in [0, 1]"));
  s.mutable_extra_axes(0)->set_values(1, "-0.1");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[1]: mix_post_fraction: must be in [0, 1]"));
  s.mutable_extra_axes(0)->set_values(1, "nan");
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.extra_axes[0].values[1]: 'nan' is not a finite number"));
  // In the base config the same rules name spec.base.
  s = AllPlacements();
  s.mutable_base()->set_z_loss(-1);
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.base: z_loss: must be >= 0"));
  s = AllPlacements();
  s.mutable_base()->set_mix_post_fraction(2);
  EXPECT_THAT(ExpansionError(s), HasSubstr("spec.base: mix_post_fraction: must be in [0, 1]"));
}

// ---- Parse's steps ----

const google::protobuf::FieldDescriptor* Field(const std::string& name) {
  return v1::TrainConfig::descriptor()->FindFieldByName(name);
}

TEST(SweepSpecStepsTest, ScalarFieldsInOrder) {
  EXPECT_TRUE(CheckScalarFields(Grid()).ok());
  v1::SweepSpec s = Grid();
  s.clear_name();
  s.set_priority(5000);
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.name: required");  // the first error wins
  s = Grid();
  s.set_name(std::string(schema::kMaxNameLength, 'x'));
  EXPECT_TRUE(CheckScalarFields(s).ok());
  s.set_name(std::string(schema::kMaxNameLength + 1, 'x'));
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.name: at most 200 characters");
  s = Grid();
  s.set_max_attempts(schema::kMaxMaxAttempts + 1);
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.max_attempts: must be in [1, 100] (0: default 3)");
  s.set_max_attempts(schema::kMaxMaxAttempts);
  EXPECT_TRUE(CheckScalarFields(s).ok());
  s.set_max_interruptions(schema::kMaxMaxInterruptions + 1);
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.max_interruptions: must be in [1, 1000] (0: default 20)");
  s.set_max_interruptions(schema::kMaxMaxInterruptions);
  EXPECT_TRUE(CheckScalarFields(s).ok());
  s.set_priority(-schema::kMaxPriority - 1);
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.priority: must be in [-1000, 1000]");
  s.set_priority(-schema::kMaxPriority);
  EXPECT_TRUE(CheckScalarFields(s).ok());
  s.set_max_concurrent_trials(-1);
  EXPECT_EQ(Message(CheckScalarFields(s)), "spec.max_concurrent_trials: must be >= 0 (0: unlimited)");
}

TEST(SweepSpecStepsTest, BaseIsCheckedWithKnownGoodMainAxes) {
  v1::TrainConfig base = Grid().base();
  base.set_lr(-1);  // a main axis: the probe replaces it
  base.set_placement("middle");
  EXPECT_TRUE(CheckBase(base).ok());
  const v1::TrainConfig probe = Probe(base);
  EXPECT_EQ(probe.placement(), "post");
  EXPECT_DOUBLE_EQ(probe.lr(), 1e-3);
  EXPECT_EQ(probe.d_model(), 64);  // the rest is the base's
  base.set_heads(5);
  EXPECT_THAT(Message(CheckBase(base)), ::testing::StartsWith("spec.base: "));
  base.set_heads(4);
  base.set_optimizer(std::string("ad\0am", 5));
  EXPECT_EQ(Message(CheckBase(base)), "spec.base.optimizer: must not contain NUL characters");
}

TEST(SweepSpecStepsTest, AxisSizesAndRandomSearchFields) {
  EXPECT_TRUE(CheckAxisSizes(Grid()).ok());
  EXPECT_TRUE(CheckAxisSizes(Random()).ok());
  v1::SweepSpec s = Random();
  s.add_warmup_steps(0);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.warmup_steps: must be empty when random_search is set");
  s = Random();
  s.add_peak_lrs(1e-3);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.peak_lrs: must be empty when random_search is set");
  s = Random();
  s.mutable_random_search()->set_samples(0);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.random_search.samples: must be in [1, 10000]");
  s.mutable_random_search()->set_samples(schema::kMaxTrialsPerSweep + 1);
  EXPECT_THAT(Message(CheckAxisSizes(s)), HasSubstr("spec.random_search.samples"));
  s = Random();
  s.mutable_random_search()->set_lr_min(0);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.random_search.lr_min: must be finite and > 0");
  s = Random();
  s.mutable_random_search()->set_lr_max(1e-5);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.random_search.lr_max: must be finite and >= lr_min");
  s = Random();
  s.mutable_random_search()->set_warmup_min(-1);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.random_search.warmup_min: must be >= 0");
  s = Random();
  s.mutable_random_search()->set_warmup_max(-1);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.random_search.warmup_max: must be >= warmup_min");
  s = Random();
  s.clear_seeds();
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.seeds: must not be empty");
  s = Grid();
  for (int i = 0; i < schema::kMaxAxisValues; ++i) s.add_peak_lrs(1);
  EXPECT_EQ(Message(CheckAxisSizes(s)), "spec.peak_lrs: at most 1000 values");
}

TEST(SweepSpecStepsTest, MainAxisDuplicatesAreFoundOnResolvedValues) {
  const v1::TrainConfig probe = Probe(Grid().base());
  EXPECT_TRUE(CheckMainAxisValues(Grid(), probe).ok());
  v1::SweepSpec s = Grid();
  s.add_placements("post-ln");
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()),
            "spec.placements[2]: duplicate value: 'post-ln' is the same setting as spec.placements[0]");
  s = Grid();
  s.add_placements("");
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()), "spec.placements[2]: must not be empty (one of post, pre, peri, deepnorm, mix; sandwich is peri)");
  s = Grid();
  s.add_placements(std::string(schema::kMaxPlacementLength + 1, 'p'));
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()), "spec.placements[2]: at most 64 characters");
  s = Grid();
  s.add_peak_lrs(0.0005);
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()),
            "spec.peak_lrs[3]: duplicate value: '0.0005' is the same setting as spec.peak_lrs[1]");
  s = Grid();
  s.add_warmup_steps(4000);
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()),
            "spec.warmup_steps[2]: duplicate value: '4000' is the same setting as spec.warmup_steps[1]");
  s = Grid();
  s.add_warmup_steps(-1);
  EXPECT_EQ(Message(CheckMainAxisValues(s, probe).status()), "spec.warmup_steps[2]: warmup_steps: must be >= 0");
  // A random search has no warm-up or lr values to check.
  EXPECT_TRUE(CheckMainAxisValues(Random(), probe).ok());
}

TEST(SweepSpecStepsTest, AxisValuesKeysOnTheResolvedConfig) {
  const v1::TrainConfig probe = Probe(Grid().base());
  AxisValues seen("axis");
  v1::TrainConfig pre = probe;
  pre.set_placement("pre");
  EXPECT_TRUE(seen.Add(0, "pre", pre).ok());
  EXPECT_TRUE(seen.Add(1, "post", probe).ok());
  pre.set_placement("pre_ln");
  EXPECT_EQ(Message(seen.Add(2, "pre_ln", pre)), "axis[2]: duplicate value: 'pre_ln' is the same setting as axis[0]");
  v1::TrainConfig bad = probe;
  bad.set_heads(5);  // invalid: named where it came from
  EXPECT_THAT(Message(seen.Add(3, "5", bad)), ::testing::StartsWith("axis[3]: "));
}

TEST(SweepSpecStepsTest, AxisFieldsAndValues) {
  EXPECT_TRUE(IsAxisField(Field("layers")));
  EXPECT_TRUE(IsAxisField(Field("beta2")));
  EXPECT_TRUE(IsAxisField(Field("optimizer")));
  for (const char* name : {"qk_norm", "z_loss", "norm", "mix_post_fraction"}) EXPECT_TRUE(IsAxisField(Field(name))) << name;
  for (const char* name : {"placement", "warmup_steps", "lr", "seed", "threads", "device", "checkpoint_every"}) {
    EXPECT_FALSE(IsAxisField(Field(name))) << name;
  }
  EXPECT_FALSE(IsAxisField(nullptr));

  absl::StatusOr<AxisValue> v = ParseAxisValue(Field("layers"), " 02", "w");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->i, 2);
  EXPECT_EQ(v->text, "2");
  v = ParseAxisValue(Field("beta2"), "0.950", "w");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_DOUBLE_EQ(v->d, 0.95);
  EXPECT_EQ(v->text, "0.95");
  v1::TrainConfig c;
  Apply(*v, &c);
  EXPECT_TRUE(c.has_beta2());
  EXPECT_DOUBLE_EQ(c.beta2(), 0.95);
  v = ParseAxisValue(Field("optimizer"), "sgd", "w");
  ASSERT_TRUE(v.ok());
  Apply(*v, &c);
  EXPECT_EQ(c.optimizer(), "sgd");
  v = ParseAxisValue(Field("qk_norm"), "true", "w");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->text, "true");
  Apply(*v, &c);
  EXPECT_TRUE(c.qk_norm());
  v = ParseAxisValue(Field("qk_norm"), "false", "w");
  ASSERT_TRUE(v.ok()) << v.status();
  Apply(*v, &c);
  EXPECT_FALSE(c.qk_norm());
  EXPECT_EQ(Message(ParseAxisValue(Field("qk_norm"), "1", "w").status()), "w: '1' is not true or false (qk_norm)");
  EXPECT_EQ(Message(ParseAxisValue(Field("layers"), "1.5", "w").status()), "w: '1.5' is not an integer (layers)");
  EXPECT_EQ(Message(ParseAxisValue(Field("beta2"), "nan", "w").status()),
            "w: 'nan' is not a finite number (beta2)");
  EXPECT_EQ(Message(ParseAxisValue(Field("optimizer"), "", "w").status()), "w: must not be empty");
  EXPECT_EQ(Message(ParseAxisValue(Field("task"), std::string(schema::kMaxStringFieldLength + 1, 't'), "w")
                        .status()),
            "w: at most 1024 characters");
}

TEST(SweepSpecStepsTest, ExtraAxes) {
  const v1::TrainConfig probe = Probe(Grid().base());
  v1::SweepSpec s = Grid();
  v1::ExtraAxis* layers = testing::AddAxis(&s, "layers", {"2", "3"});
  const std::vector<const trainer::SchemeInfo*> schemes = *CheckMainAxisValues(s, probe);
  ASSERT_EQ(schemes.size(), 2u);
  EXPECT_EQ(schemes[1]->name, std::string("pre"));
  auto extra = ParseExtraAxes(s, schemes, probe);
  ASSERT_TRUE(extra.ok()) << extra.status();
  ASSERT_EQ(extra->size(), 1u);
  EXPECT_EQ((*extra)[0].size(), 2u);
  layers->add_values("02");
  EXPECT_EQ(Message(ParseExtraAxes(s, schemes, probe).status()),
            "spec.extra_axes[0].values[2]: duplicate value: '02' is the same setting as spec.extra_axes[0].values[0]");
  layers->mutable_values()->RemoveLast();
  v1::ExtraAxis* again = testing::AddAxis(&s, "layers", {"4"});
  EXPECT_EQ(Message(ParseExtraAxes(s, schemes, probe).status()), "spec.extra_axes[1].field: duplicate axis layers");
  again->set_field("seed");
  EXPECT_THAT(Message(ParseExtraAxes(s, schemes, probe).status()),
              ::testing::StartsWith("spec.extra_axes[1].field: 'seed' cannot be an axis; allowed: layers, d_model, "));
}

TEST(SweepSpecStepsTest, GridSize) {
  std::vector<std::vector<AxisValue>> extra;
  auto n = CheckGridSize(Grid(), extra);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 24);
  extra.push_back(std::vector<AxisValue>(3, AxisValue{Field("layers"), "1"}));
  EXPECT_EQ(*CheckGridSize(Grid(), extra), 72);
  EXPECT_EQ(*CheckGridSize(Random(), extra), 20 * 2 * 2 * 3);
  // 24 x 417 = 10,008 > 10,000.
  extra[0].resize(417, AxisValue{Field("layers"), "1"});
  EXPECT_EQ(Message(CheckGridSize(Grid(), extra).status()),
            "spec: the grid (placements x warmup_steps x peak_lrs x seeds x extra_axes) has 10008+ trials; the limit "
            "is 10000");
  // Many large axes: counted without overflow, reported as at least the limit.
  extra.assign(8, std::vector<AxisValue>(1000, AxisValue{Field("layers"), "1"}));
  EXPECT_EQ(Message(CheckGridSize(Random(), extra).status()),
            "spec: the grid (placements x random_search.samples x seeds x extra_axes) has 800080+ trials; the limit "
            "is 10000");
}

TEST(SweepSpecStepsTest, ShortestDouble) {
  EXPECT_EQ(ShortestDouble(0.5), "0.5");
  EXPECT_EQ(ShortestDouble(1e-3), "0.001");
  EXPECT_EQ(ShortestDouble(3e-4), "0.0003");
  EXPECT_EQ(ShortestDouble(0.1 + 0.2), "0.30000000000000004");
}

}  // namespace
}  // namespace normsweep::scheduler
