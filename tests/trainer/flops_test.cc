// trainer/settings/flops.h: the count per token against
// tests/reference/model.py's training_flops_per_token, and a trial's total
// with its evaluations.
//
// torch is not installed where CI runs, and model.py imports it first: the
// reference side runs tests/reference/flops_reference.py, which executes
// only model.py's constants, ModelConfig, matmul_params and
// training_flops_per_token, extracted from its source with Python's ast
// module. A change of either count fails the first test.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/train_config.h"
#include "tests/common/read_file.h"
#include "tests/common/subprocess.h"
#include "tests/trainer/temp_path.h"
#include "trainer/settings/flops.h"

namespace normsweep::trainer {
namespace {

// The resolved settings of config (defaults applied, as the scheduler
// stores them); fails the test when the config is refused.
TrainSettings Resolved(v1::TrainConfig config) {
  config.set_lr(1e-3);
  auto valid = schema::SettingsFromProto(config);
  EXPECT_TRUE(valid.ok()) << valid.status();
  return valid.ok() ? valid->get() : TrainSettings{};
}

// model.py's ModelConfig fields, as JSON.
std::string ModelJson(const ModelConfig& m) {
  return absl::StrCat(R"({"placement": ")", PlacementName(m.placement), R"(", "layers": )", m.layers,
                      R"(, "d_model": )", m.d_model, R"(, "heads": )", m.heads, R"(, "d_ff": )", m.d_ff,
                      R"(, "seq_len": )", m.seq_len, R"(, "positions": ")", PositionsName(m.positions),
                      R"(", "mix_post_fraction": )", m.mix_post_fraction, R"(, "qk_norm": )",
                      m.qk_norm ? "true" : "false", R"(, "norm": ")", NormName(m.norm), R"("})");
}

// model.py's training_flops_per_token of each model, through
// flops_reference.py; fails the test when the script does.
std::vector<int64_t> ReferenceCounts(const std::vector<ModelConfig>& models) {
  const char* source = std::getenv("NORMSWEEP_SOURCE_DIR");
  EXPECT_NE(source, nullptr) << "NORMSWEEP_SOURCE_DIR is unset (run through ctest)";
  if (source == nullptr) return {};
  std::vector<std::string> argv = {NORMSWEEP_PYTHON3, absl::StrCat(source, "/tests/reference/flops_reference.py")};
  for (const ModelConfig& m : models) argv.push_back(ModelJson(m));
  const std::string log = TempPath("flops_reference.out");
  std::remove(log.c_str());
  auto process = testing::Subprocess::Start(argv, {}, log);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {};
  const int code = process->Wait(60);
  const std::string out = testing::ReadFile(log);
  EXPECT_EQ(code, 0) << out;
  std::vector<int64_t> counts;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    int64_t n = 0;
    EXPECT_TRUE(absl::SimpleAtoi(line, &n)) << "not a count: " << line << "\n" << out;
    counts.push_back(n);
  }
  return counts;
}

TEST(FlopsTest, PerTokenCountIsModelPysForEveryShape) {
  std::vector<v1::TrainConfig> configs;
  v1::TrainConfig c;
  configs.push_back(c);  // every default: Post-LN, 6 layers, d_model 128, d_ff 4 x d_model
  c.set_placement("pre");
  c.set_d_model(64);
  c.set_heads(4);
  c.set_d_ff(128);  // deploy/sweeps/paper.yaml's model
  configs.push_back(c);
  c.set_placement("peri");
  c.set_qk_norm(true);
  c.set_layers(3);
  c.set_seq_len(32);
  configs.push_back(c);
  c.set_placement("deepnorm");
  c.set_qk_norm(false);
  c.clear_d_ff();  // the default from d_model: 256
  c.set_layers(12);
  c.set_seq_len(128);
  configs.push_back(c);
  c.set_placement("mix");
  c.set_mix_post_fraction(0.5);
  c.set_norm("rmsnorm");
  c.set_d_model(96);
  c.set_heads(3);
  c.set_d_ff(200);
  c.set_layers(1);
  c.set_seq_len(7);
  configs.push_back(c);
  c = v1::TrainConfig();
  c.set_placement("post");
  c.set_qk_norm(true);
  c.set_positions("learned");
  c.set_layers(24);
  c.set_d_model(1024);
  c.set_heads(16);
  c.set_seq_len(2048);
  configs.push_back(c);

  std::vector<ModelConfig> models;
  for (const v1::TrainConfig& config : configs) models.push_back(Resolved(config).model);
  ASSERT_EQ(models[3].d_ff, 256);  // a default d_ff is resolved before counting
  const std::vector<int64_t> reference = ReferenceCounts(models);
  ASSERT_EQ(reference.size(), models.size());
  for (size_t i = 0; i < models.size(); ++i) {
    EXPECT_EQ(TrainingFlopsPerToken(models[i]), reference[i]) << ModelJson(models[i]);
  }
  // The figures docs/performance.md quotes: 5.5 MFLOP per token for the
  // benchmark model (d_ff 256), 6 x 819,200 matmul parameters.
  ModelConfig bench;
  bench.d_ff = 256;
  EXPECT_EQ(MatmulParams(bench), 819200);
  EXPECT_EQ(TrainingFlopsPerToken(bench), 5505024);
}

TEST(FlopsTest, EvaluationsAreStepZeroEachIntervalBelowTheLastAndTheLast) {
  TrainSettings s;
  s.steps = 400;
  s.eval_every = 100;
  EXPECT_EQ(EvaluationCount(s), 5);  // 0, 100, 200, 300, 400
  s.steps = 401;
  EXPECT_EQ(EvaluationCount(s), 6);  // ..., 400, 401
  s.steps = 3;
  s.eval_every = 1;
  EXPECT_EQ(EvaluationCount(s), 4);  // 0, 1, 2, 3
  s.eval_every = 0;
  EXPECT_EQ(EvaluationCount(s), 2);  // 0 and the last
  s.eval_every = 500;
  EXPECT_EQ(EvaluationCount(s), 2);
}

TEST(FlopsTest, TrialFlopsAreTrainingPlusEvaluationForwardPasses) {
  // deploy/sweeps/paper.yaml's trial: 400 steps of 32 x 64 tokens at
  // 1,572,864 FLOPs per token, 5 evaluations of 16 batches at a third of it.
  v1::TrainConfig c;
  c.set_d_model(64);
  c.set_heads(4);
  c.set_d_ff(128);
  c.set_batch_size(32);
  c.set_steps(400);
  c.set_eval_every(100);
  c.set_eval_batches(16);
  const TrainSettings s = Resolved(c);
  EXPECT_EQ(TrainingFlopsPerToken(s.model), 1572864);
  EXPECT_EQ(ForwardFlopsPerToken(s.model), 524288);
  EXPECT_EQ(TrainingTokens(s), 819200);
  EXPECT_DOUBLE_EQ(TrialFlops(s), 819200.0 * 1572864 + 5.0 * 16 * 32 * 64 * 524288);
  // Defaults apply: 1000 steps, eval every 100 (11 evaluations), 8 batches of 32.
  const TrainSettings d = Resolved(v1::TrainConfig());
  const double per_token = static_cast<double>(TrainingFlopsPerToken(d.model));
  EXPECT_DOUBLE_EQ(TrialFlops(d), 1000.0 * 32 * 64 * per_token + 11.0 * 8 * 32 * 64 * per_token / 3);
}

}  // namespace
}  // namespace normsweep::trainer
