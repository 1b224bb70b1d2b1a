// WorkerMetrics on its own, on a registry this test serialises: the
// per-trial gauges' names (normsweep_worker_trial_*, the old
// normsweep_trial_* kept one release with the same values), their labels
// (the trial's variant among them, so that the QK-norm-on and -off trials
// of one cell are told apart) and their removal when the trial ends.
#include "worker/worker_metrics.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Trial TrialOf(int64_t id, const std::string& variant) {
  v1::Trial t;
  t.set_id(id);
  t.set_sweep_id(7);
  t.set_variant(variant);
  v1::TrainConfig* c = t.mutable_config();
  c->set_placement("pre");
  c->set_warmup_steps(4);
  c->set_lr(1e-3);
  c->set_seed(3);
  c->set_layers(2);
  return t;
}

v1::TrainEvent StepEvent(int step, double train_loss, double lr, double grad_norm) {
  v1::TrainEvent e;
  e.set_type("step");
  e.set_step(step);
  e.set_train_loss(train_loss);
  e.set_lr(lr);
  e.set_grad_norm(grad_norm);
  return e;
}

v1::TrainEvent EvalEvent(int step, double val_loss, double max_attn_logit) {
  v1::TrainEvent e;
  e.set_type("eval");
  e.set_step(step);
  e.set_val_loss(val_loss);
  e.set_output_log_z(5.5);
  v1::LayerDiagnostics* d = e.add_layer_diagnostics();
  d->set_layer(1);
  d->set_max_attn_logit(max_attn_logit);
  return e;
}

// A series' value: the gauge of family `name` whose labels are exactly
// `labels`; absent: nullopt.
std::optional<double> GaugeValue(prometheus::Registry& registry, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::map<std::string, std::string> got;
      for (const prometheus::ClientMetric::Label& l : m.label) got[l.name] = l.value;
      if (got == labels) return m.gauge.value;
    }
  }
  return std::nullopt;
}

class WorkerMetricsTest : public ::testing::Test {
 protected:
  WorkerMetricsTest() : metrics_(registry_) {}

  std::string Text() {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, registry_.Collect());
    return out.str();
  }

  // The labels trial `id` of TrialOf has under the old names, and with its
  // variant under the new ones.
  static std::map<std::string, std::string> OldLabels(int64_t id) {
    return {{"sweep", "7"}, {"trial", absl::StrCat(id)}, {"placement", "pre"},
            {"warmup_steps", "4"}, {"peak_lr", "0.001"}, {"seed", "3"}};
  }
  static std::map<std::string, std::string> NewLabels(int64_t id, const std::string& variant) {
    std::map<std::string, std::string> labels = OldLabels(id);
    labels["variant"] = variant;
    return labels;
  }

  prometheus::Registry registry_;
  WorkerMetrics metrics_;
};

TEST_F(WorkerMetricsTest, EveryNameIsTheWorkersAndTheOldOnesSayTheyAreDeprecated) {
  std::set<std::string> deprecated;
  for (const RenamedMetric& r : RenamedTrialGauges()) {
    EXPECT_TRUE(absl::StartsWith(r.name, "normsweep_worker_trial_")) << r.name;
    EXPECT_FALSE(absl::StartsWith(r.deprecated_name, "normsweep_worker_")) << r.deprecated_name;
    deprecated.insert(r.deprecated_name);
  }
  EXPECT_EQ(deprecated, (std::set<std::string>{"normsweep_trial_step", "normsweep_trial_train_loss",
                                               "normsweep_trial_val_loss", "normsweep_trial_grad_norm",
                                               "normsweep_trial_learning_rate"}));
  metrics_.TrialStarted(TrialOf(1, ""), 0, "cpu");  // a family without series is not collected
  std::set<std::string> families;
  for (const prometheus::MetricFamily& family : registry_.Collect()) {
    families.insert(family.name);
    if (deprecated.count(family.name)) {
      EXPECT_TRUE(absl::StartsWith(family.help, "Deprecated")) << family.name << ": " << family.help;
    } else {
      EXPECT_TRUE(absl::StartsWith(family.name, "normsweep_worker_")) << family.name;
      EXPECT_FALSE(absl::StrContains(family.help, "Deprecated")) << family.name << ": " << family.help;
    }
  }
  for (const RenamedMetric& r : RenamedTrialGauges()) {
    EXPECT_TRUE(families.count(r.name)) << r.name << " is not registered";
    EXPECT_TRUE(families.count(r.deprecated_name)) << r.deprecated_name << " is not registered";
  }
}

TEST_F(WorkerMetricsTest, TheVariantTellsApartTrialsOfOneCell) {
  // QK-norm off and on: the same sweep, placement, warm-up, lr and seed.
  metrics_.TrialStarted(TrialOf(11, "qk_norm=false"), 0, "cpu");
  metrics_.TrialStarted(TrialOf(12, "qk_norm=true"), 1, "cpu");
  metrics_.OnEvent(11, StepEvent(5, 2.5, 1e-4, 0.75));
  metrics_.OnEvent(12, StepEvent(6, 3.5, 2e-4, 1.25));
  metrics_.OnEvent(11, EvalEvent(5, 3.25, 2.0));
  metrics_.OnEvent(12, EvalEvent(6, 4.25, 9.0));

  const std::map<std::string, std::map<int64_t, double>> want = {
      {"normsweep_worker_trial_step", {{11, 5}, {12, 6}}},
      {"normsweep_worker_trial_train_loss", {{11, 2.5}, {12, 3.5}}},
      {"normsweep_worker_trial_learning_rate", {{11, 1e-4}, {12, 2e-4}}},
      {"normsweep_worker_trial_grad_norm", {{11, 0.75}, {12, 1.25}}},
      {"normsweep_worker_trial_val_loss", {{11, 3.25}, {12, 4.25}}}};
  const std::map<int64_t, std::string> variant = {{11, "qk_norm=false"}, {12, "qk_norm=true"}};
  for (const RenamedMetric& r : RenamedTrialGauges()) {
    SCOPED_TRACE(r.name);
    ASSERT_TRUE(want.count(r.name));
    for (const auto& [trial, value] : want.at(r.name)) {
      EXPECT_EQ(GaugeValue(registry_, r.name, NewLabels(trial, variant.at(trial))), value) << "trial " << trial;
      // The old name: the same value, the labels it always had.
      EXPECT_EQ(GaugeValue(registry_, r.deprecated_name, OldLabels(trial)), value) << "trial " << trial;
    }
  }
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_step{peak_lr=\"0.001\",placement=\"pre\",seed=\"3\",sweep=\"7\","
                              "trial=\"12\",variant=\"qk_norm=true\",warmup_steps=\"4\"} 6"));
  EXPECT_THAT(text, HasSubstr("normsweep_trial_step{peak_lr=\"0.001\",placement=\"pre\",seed=\"3\",sweep=\"7\","
                              "trial=\"12\",warmup_steps=\"4\"} 6"));
  // The per-layer and per-evaluation gauges carry it too.
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_max_attn_logit{layer=\"1\",peak_lr=\"0.001\",placement=\"pre\","
                              "seed=\"3\",sweep=\"7\",trial=\"12\",variant=\"qk_norm=true\",warmup_steps=\"4\"} 9"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_output_log_z{peak_lr=\"0.001\",placement=\"pre\",seed=\"3\","
                              "sweep=\"7\",trial=\"11\",variant=\"qk_norm=false\",warmup_steps=\"4\"} 5.5"));
}

TEST_F(WorkerMetricsTest, ATrialWithoutExtraAxesHasAnEmptyVariant) {
  metrics_.TrialStarted(TrialOf(21, ""), 0, "cpu");
  metrics_.OnEvent(21, StepEvent(1, 2.0, 1e-5, 0.5));
  EXPECT_EQ(GaugeValue(registry_, "normsweep_worker_trial_step", NewLabels(21, "")), 1);
  EXPECT_EQ(GaugeValue(registry_, "normsweep_trial_step", OldLabels(21)), 1);
  // No evaluation yet: NaN under both names.
  const std::optional<double> val = GaugeValue(registry_, "normsweep_worker_trial_val_loss", NewLabels(21, ""));
  const std::optional<double> old_val = GaugeValue(registry_, "normsweep_trial_val_loss", OldLabels(21));
  ASSERT_TRUE(val.has_value() && old_val.has_value());
  EXPECT_TRUE(std::isnan(*val) && std::isnan(*old_val));
}

TEST_F(WorkerMetricsTest, EndingATrialRemovesItsSeriesUnderBothNames) {
  metrics_.TrialStarted(TrialOf(31, "qk_norm=true"), 0, "cpu");
  metrics_.TrialStarted(TrialOf(32, "qk_norm=false"), 1, "cpu");
  metrics_.OnEvent(31, StepEvent(2, 2.0, 1e-5, 0.5));
  metrics_.OnEvent(31, EvalEvent(2, 3.0, 1.0));
  metrics_.TrialEnded(31, v1::TRIAL_SUCCEEDED);
  const std::string text = Text();
  EXPECT_THAT(text, Not(HasSubstr("trial=\"31\"")));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trials_finished_total{outcome=\"SUCCEEDED\"} 1"));
  for (const RenamedMetric& r : RenamedTrialGauges()) {
    EXPECT_TRUE(GaugeValue(registry_, r.name, NewLabels(32, "qk_norm=false")).has_value()) << r.name;
    EXPECT_TRUE(GaugeValue(registry_, r.deprecated_name, OldLabels(32)).has_value()) << r.deprecated_name;
  }
  metrics_.TrialEnded(32, v1::TRIAL_STATE_UNSPECIFIED);
  EXPECT_THAT(Text(), Not(HasSubstr("trial=")));
}

}  // namespace
}  // namespace normsweep::worker
