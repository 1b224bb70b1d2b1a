// schema::FusionKey: what fused trials may differ in leaves the key alone,
// what shapes the fused model (or its data, length, evaluation) changes it.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "normsweep/v1/train.pb.h"
#include "proto/schema/train_config.h"

namespace normsweep::schema {
namespace {

v1::TrainConfig Base() {
  v1::TrainConfig c;
  c.set_placement("post");
  c.set_d_model(64);
  c.set_heads(4);
  c.set_steps(100);
  c.set_lr(1e-3);
  return c;
}

std::string KeyOf(const v1::TrainConfig& c) {
  absl::StatusOr<std::string> key = FusionKey(c);
  EXPECT_TRUE(key.ok()) << key.status();
  return key.ok() ? *key : "";
}

using Change = std::pair<const char*, std::function<void(v1::TrainConfig&)>>;

TEST(FusionKeyTest, WhatFusedTrialsMayDifferInLeavesTheKeyAlone) {
  const std::string base = KeyOf(Base());
  const std::vector<Change> changes = {
      {"lr", [](v1::TrainConfig& c) { c.set_lr(3e-3); }},
      {"warmup_steps", [](v1::TrainConfig& c) { c.set_warmup_steps(10); }},
      {"schedule", [](v1::TrainConfig& c) { c.set_schedule("cosine"); }},
      {"seed", [](v1::TrainConfig& c) { c.set_seed(7); }},
      {"beta1", [](v1::TrainConfig& c) { c.set_beta1(0.8); }},
      {"beta2", [](v1::TrainConfig& c) { c.set_beta2(0.95); }},
      {"eps", [](v1::TrainConfig& c) { c.set_eps(1e-6); }},
      {"weight_decay", [](v1::TrainConfig& c) { c.set_weight_decay(0.1); }},
      {"momentum", [](v1::TrainConfig& c) { c.set_momentum(0.9); }},
      {"grad_clip", [](v1::TrainConfig& c) { c.set_grad_clip(1.0); }},
      {"z_loss", [](v1::TrainConfig& c) { c.set_z_loss(1e-4); }},
      {"divergence_loss", [](v1::TrainConfig& c) { c.set_divergence_loss(9.0); }},
      {"divergence_patience", [](v1::TrainConfig& c) { c.set_divergence_patience(5); }},
      {"threads", [](v1::TrainConfig& c) { c.set_threads(8); }},
      {"device", [](v1::TrainConfig& c) { c.set_device("cuda:0"); }},
  };
  for (const auto& [field, change] : changes) {
    v1::TrainConfig c = Base();
    change(c);
    EXPECT_EQ(KeyOf(c), base) << field;
    EXPECT_TRUE(FusionCompatible(Base(), c)) << field;
  }
}

TEST(FusionKeyTest, WhatShapesTheFusedRunChangesTheKey) {
  const std::string base = KeyOf(Base());
  const std::vector<Change> changes = {
      {"placement", [](v1::TrainConfig& c) { c.set_placement("pre"); }},
      {"layers", [](v1::TrainConfig& c) { c.set_layers(2); }},
      {"d_model", [](v1::TrainConfig& c) { c.set_d_model(128); }},
      {"norm", [](v1::TrainConfig& c) { c.set_norm("rmsnorm"); }},
      {"qk_norm", [](v1::TrainConfig& c) { c.set_qk_norm(true); }},
      {"optimizer", [](v1::TrainConfig& c) { c.set_optimizer("sgd"); }},
      {"dropout", [](v1::TrainConfig& c) { c.set_dropout(0.1); }},
      {"data_file", [](v1::TrainConfig& c) { c.set_data_file("corpus.txt"); }},
      {"steps", [](v1::TrainConfig& c) { c.set_steps(200); }},
      {"eval_every", [](v1::TrainConfig& c) { c.set_eval_every(10); }},
      {"batch_size", [](v1::TrainConfig& c) { c.set_batch_size(8); }},
  };
  for (const auto& [field, change] : changes) {
    v1::TrainConfig c = Base();
    change(c);
    EXPECT_NE(KeyOf(c), base) << field;
    EXPECT_FALSE(FusionCompatible(Base(), c)) << field;
  }
}

TEST(FusionKeyTest, DefaultsAreResolvedFirst) {
  v1::TrainConfig explicit_default = Base();
  explicit_default.set_layers(6);  // the default, spelt out
  EXPECT_EQ(KeyOf(explicit_default), KeyOf(Base()));
}

TEST(FusionKeyTest, AnInvalidConfigHasNoKeyAndFusesWithNothing) {
  v1::TrainConfig bad = Base();
  bad.set_heads(3);  // does not divide d_model
  EXPECT_EQ(FusionKey(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(FusionCompatible(bad, bad));
}

}  // namespace
}  // namespace normsweep::schema
