#include "client/sweep_flags.h"

#include "client/sweep_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

CliArgs Args(std::map<std::string, std::string> flags, std::vector<std::string> sets = {}) {
  CliArgs a;
  a.flags = std::move(flags);
  if (!sets.empty()) {
    a.flags["set"] = sets.back();
    a.all["set"] = sets;
  }
  return a;
}

std::string Error(const CliArgs& args) {
  absl::StatusOr<v1::SweepSpec> spec = SpecFromFlags(args);
  EXPECT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(SpecFromFlagsTest, BuildsTheSpec) {
  absl::StatusOr<v1::SweepSpec> spec =
      SpecFromFlags(Args({{"name", "ln"}, {"placements", "post,pre"}, {"warmup-steps", "0,100,1e3"},
                          {"lrs", "5e-4, 1e-3,,3e-3"}, {"seeds", "0,1"}, {"max-attempts", "5"}, {"priority", "-3"},
                          {"max-concurrent", "4"}},
                         {"layers=12", "steps=300", "data_file=/data/corpus.txt", "beta2=0.999", "dropout=0.1"}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "ln");
  EXPECT_THAT(spec->placements(), ElementsAre("post", "pre"));
  EXPECT_THAT(spec->warmup_steps(), ElementsAre(0, 100, 1000));
  EXPECT_THAT(spec->peak_lrs(), ElementsAre(5e-4, 1e-3, 3e-3));
  EXPECT_THAT(spec->seeds(), ElementsAre(0, 1));
  EXPECT_EQ(spec->max_attempts(), 5);
  EXPECT_EQ(spec->priority(), -3);
  EXPECT_EQ(spec->max_concurrent_trials(), 4);
  EXPECT_EQ(spec->base().layers(), 12);
  EXPECT_EQ(spec->base().steps(), 300);
  EXPECT_EQ(spec->base().data_file(), "/data/corpus.txt");
  EXPECT_TRUE(spec->base().has_beta2());
  EXPECT_DOUBLE_EQ(spec->base().beta2(), 0.999);
  EXPECT_DOUBLE_EQ(spec->base().dropout(), 0.1);
  EXPECT_FALSE(spec->has_random_search());
}

TEST(SpecFromFlagsTest, DefaultsSeedsAndWarmupToZero) {
  absl::StatusOr<v1::SweepSpec> spec = SpecFromFlags(Args({{"name", "n"}, {"placements", "pre"}, {"lrs", "1e-3"}}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->seeds(), ElementsAre(0));
  EXPECT_THAT(spec->warmup_steps(), ElementsAre(0));
  EXPECT_EQ(spec->max_attempts(), 0);  // the scheduler's default
  EXPECT_EQ(spec->base().SerializeAsString(), "");
}

// The flag form and the file form give a spec that leaves out seeds and
// warm-ups the same axes.
TEST(SpecFromFlagsTest, DefaultsAgreeWithASweepFile) {
  absl::StatusOr<v1::SweepSpec> flags = SpecFromFlags(Args({{"name", "n"}, {"placements", "pre"}, {"lrs", "1e-3"}}));
  absl::StatusOr<v1::SweepSpec> file = SweepSpecFromYaml("name: n\nplacements: [pre]\npeak_lrs: [1e-3]\n");
  ASSERT_TRUE(flags.ok()) << flags.status();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(flags->seeds(), ElementsAre(0));
  EXPECT_THAT(flags->seeds(), ElementsAreArray(file->seeds()));
  EXPECT_THAT(flags->warmup_steps(), ElementsAre(0));
  EXPECT_THAT(flags->warmup_steps(), ElementsAreArray(file->warmup_steps()));
  // Given as an empty list: the same default, not an empty axis.
  flags = SpecFromFlags(Args({{"name", "n"}, {"placements", "pre"}, {"lrs", "1e-3"}, {"seeds", ""},
                              {"warmup-steps", ","}}));
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_THAT(flags->seeds(), ElementsAre(0));
  EXPECT_THAT(flags->warmup_steps(), ElementsAre(0));
}

TEST(SpecFromFlagsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(Error(Args({{"placements", "pre"}})), "--name is required when no sweep file is given");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"lrs", "1e-3,fast"}})), "--lrs: 'fast' is not a finite number");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"lrs", "nan"}})), "--lrs: 'nan' is not a finite number");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"warmup-steps", "1.5"}})), "--warmup-steps: '1.5' is not an integer");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"seeds", "x"}})), "--seeds: 'x' is not an integer");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"seeds", "99999999999"}})), "--seeds: '99999999999' is not an integer");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"max-attempts", "many"}})), "--max-attempts: 'many' is not an integer");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"priority", ""}})), "--priority: '' is not an integer");
  EXPECT_EQ(Error(Args({{"name", "n"}, {"max-concurrent", "2.5"}})), "--max-concurrent: '2.5' is not an integer");
}

TEST(ApplySetFlagsTest, SetsFieldsByNameAndType) {
  v1::TrainConfig c;
  ASSERT_TRUE(ApplySetFlags({"optimizer=sgd", "momentum=0.9", "d_model=256", "warmupSteps=40", "task=", "eps=1e-6"},
                            &c)
                  .ok());
  EXPECT_EQ(c.optimizer(), "sgd");
  EXPECT_DOUBLE_EQ(c.momentum(), 0.9);
  EXPECT_EQ(c.d_model(), 256);
  EXPECT_EQ(c.warmup_steps(), 40);  // the JSON name works too
  EXPECT_EQ(c.task(), "");
  EXPECT_TRUE(c.has_eps());
  EXPECT_DOUBLE_EQ(c.eps(), 1e-6);
  ASSERT_TRUE(ApplySetFlags({"layers=2", "layers=3", "placement=pre=ln"}, &c).ok());
  EXPECT_EQ(c.layers(), 3);  // the last one wins
  EXPECT_EQ(c.placement(), "pre=ln");  // the first '=' splits
}

TEST(ApplySetFlagsTest, ErrorsNameTheFlagAndTheField) {
  v1::TrainConfig c;
  auto error = [&](const std::string& set) { return std::string(ApplySetFlags({set}, &c).message()); };
  EXPECT_EQ(error("layers"), "--set layers: expected FIELD=VALUE");
  EXPECT_EQ(error("=3"), "--set =3: expected FIELD=VALUE");
  EXPECT_EQ(error("nope=1"), "--set nope=1: TrainConfig has no field 'nope'; did you mean 'norm'?");
  EXPECT_EQ(error("warmup_step=1"), "--set warmup_step=1: TrainConfig has no field 'warmup_step'; did you mean "
                                    "'warmup_steps'?");
  EXPECT_EQ(error("zzzzzzzzzz=1"), "--set zzzzzzzzzz=1: TrainConfig has no field 'zzzzzzzzzz'");
  EXPECT_EQ(error("layers=twelve"), "--set layers=twelve (TrainConfig.layers): 'twelve' is not an integer");
  EXPECT_EQ(error("layers="), "--set layers= (TrainConfig.layers): '' is not an integer");
  EXPECT_EQ(error("dropout=inf"), "--set dropout=inf (TrainConfig.dropout): 'inf' is not a finite number");
  EXPECT_EQ(error("steps=1e12"), "--set steps=1e12 (TrainConfig.steps): '1e12' is not an integer");
  EXPECT_EQ(ApplySetFlags({"layers=2", "bad"}, &c).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace normsweep::client
