#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/schema/train_config.h"

namespace normsweep::schema {
namespace {

using ::testing::HasSubstr;
using trainer::Placement;
using trainer::ScheduleKind;

v1::TrainConfig Valid() {
  v1::TrainConfig c;
  c.set_lr(1e-3);
  return c;
}

TEST(TrainConfigTest, DefaultsAreApplied) {
  auto s = SettingsFromProto(Valid());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->model.placement, Placement::kPostLN);
  EXPECT_EQ((*s)->model.layers, 6);
  EXPECT_EQ((*s)->model.d_model, 128);
  EXPECT_EQ((*s)->model.d_ff, 512);
  EXPECT_DOUBLE_EQ((*s)->optimizer.beta2, 0.98);
  EXPECT_EQ((*s)->schedule.kind, ScheduleKind::kConstant);
}

// d_ff's default is 4 * d_model in the schema and in the trainer's own
// settings alike (a model built without the schema gets the same one).
TEST(TrainConfigTest, DffDefaultsToFourTimesDModelEverywhere) {
  v1::TrainConfig c = Valid();
  c.set_d_model(64);
  auto s = SettingsFromProto(c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->model.d_ff, 256);
  EXPECT_EQ(trainer::ModelConfig{.d_model = 64}.d_ff, 256);
  EXPECT_EQ(trainer::ModelConfig{}.d_ff, 4 * trainer::ModelConfig{}.d_model);
}

TEST(TrainConfigTest, ExplicitZeroBetaIsKept) {
  v1::TrainConfig c = Valid();
  c.set_beta1(0.0);
  auto s = SettingsFromProto(c);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ((*s)->optimizer.beta1, 0.0);
}

struct BadCase {
  const char* json;
  const char* field;
};

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, NamesTheField) {
  auto c = TrainConfigFromJson(GetParam().json);
  absl::Status st = c.ok() ? ValidateTrainConfig(*c) : c.status();
  ASSERT_FALSE(st.ok()) << GetParam().json;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr(GetParam().field));
}

INSTANTIATE_TEST_SUITE_P(
    All, BadConfigTest,
    ::testing::Values(BadCase{R"({"lr": 0.001, "placement": "middle"})", "placement"},
                      BadCase{R"({"lr": 0.001, "d_model": 100, "heads": 3})", "heads"},
                      BadCase{R"({"lr": 0.001, "warmup_steps": -5})", "warmup_steps"},
                      BadCase{R"({"lr": 0})", "lr"},
                      BadCase{R"({"lr": -1})", "lr"},
                      BadCase{R"({"lr": "NaN"})", "lr"},
                      BadCase{R"({"lr": "Infinity"})", "lr"},
                      BadCase{R"({"lr": 0.001, "optimizer": "lion"})", "optimizer"},
                      BadCase{R"({"lr": 0.001, "schedule": "step"})", "schedule"},
                      BadCase{R"({"lr": 0.001, "layers": -2})", "layers"},
                      BadCase{R"({"lr": 0.001, "beta2": 1.5})", "beta2"},
                      BadCase{R"({"lr": 0.001, "dropout": 1.0})", "dropout"},
                      BadCase{R"({"lr": 0.001, "task": "chess"})", "task"},
                      BadCase{R"({"lr": 0.001, "positions": "rotary"})", "positions"},
                      BadCase{R"({"lr": 0.001, "precision": "fp8"})", "precision"},
                      BadCase{R"({"lr": 0.001, "precision": "bf16"})", "precision"},  // cpu is fp32 only
                      BadCase{R"({"lr": 0.001, "device": "tpu:0"})", "device"},
                      BadCase{R"({"lr": 0.001, "no_such_field": 1})", "no_such_field"},
                      BadCase{R"({"lr": 0.001, "norm": "batchnorm"})", "norm"},
                      BadCase{R"({"lr": 0.001, "z_loss": -0.0001})", "z_loss"},
                      BadCase{R"({"lr": 0.001, "z_loss": "NaN"})", "z_loss"},
                      BadCase{R"({"lr": 0.001, "placement": "mix", "mix_post_fraction": 1.5})",
                              "mix_post_fraction"},
                      BadCase{R"({"lr": 0.001, "placement": "mix", "mix_post_fraction": -0.1})",
                              "mix_post_fraction"}));

// Issue 24's fields reach the trainer's settings from JSON (as the worker
// passes a trial's config), and the resolved config says them: "sandwich"
// is stored as "peri", Mix-LN's fraction defaults to 0.25.
TEST(TrainConfigTest, NormalisationSchemesFromJsonAndResolved) {
  auto c = TrainConfigFromJson(
      R"({"lr": 0.001, "placement": "sandwich", "qk_norm": true, "z_loss": 0.0001, "norm": "rmsnorm"})");
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = SettingsFromProto(*c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->model.placement, Placement::kPeriLN);
  EXPECT_TRUE((*s)->model.qk_norm);
  EXPECT_EQ((*s)->model.norm, trainer::NormKind::kRmsNorm);
  EXPECT_DOUBLE_EQ((*s)->z_loss, 1e-4);
  auto resolved = ResolvedTrainConfig(*c);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->placement(), "peri");
  EXPECT_TRUE(resolved->qk_norm());
  EXPECT_EQ(resolved->norm(), "rmsnorm");
  EXPECT_DOUBLE_EQ(resolved->z_loss(), 1e-4);
  EXPECT_FALSE(resolved->has_mix_post_fraction());  // only for mix

  auto mix = ResolvedTrainConfig(*TrainConfigFromJson(R"({"lr": 0.001, "placement": "mix"})"));
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->placement(), "mix");
  EXPECT_DOUBLE_EQ(mix->mix_post_fraction(), 0.25);
  EXPECT_EQ(mix->norm(), "layernorm");
}

TEST(TrainConfigTest, JsonRoundTripOfResolvedConfig) {
  auto c = TrainConfigFromJson(R"({"lr": 0.002, "placement": "pre", "warmup_steps": 100})");
  ASSERT_TRUE(c.ok()) << c.status();
  auto resolved = ResolvedTrainConfig(*c);
  ASSERT_TRUE(resolved.ok());
  auto again = TrainConfigFromJson(TrainConfigToJson(*resolved));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->placement(), "pre");
  EXPECT_EQ(again->warmup_steps(), 100);
  EXPECT_EQ(again->d_ff(), 512);
}

TEST(TrainEventTest, OptionalZeroFieldsArePrinted) {
  v1::TrainEvent e;
  e.set_type("step");
  e.set_step(1);
  e.set_train_loss(0.0);
  e.set_lr(0.0);
  std::string json = TrainEventToJson(e);
  EXPECT_THAT(json, HasSubstr("\"train_loss\":0"));
  EXPECT_THAT(json, HasSubstr("\"lr\":0"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("val_loss")));
}

}  // namespace
}  // namespace normsweep::schema
