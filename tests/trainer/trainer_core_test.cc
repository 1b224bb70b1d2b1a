// Schedules, data, safetensors and checkpoints, determinism and resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"
#include "trainer/schedule.h"
#include "trainer/trainer.h"

namespace normsweep::trainer {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("normsweep_trainer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// ---- schedules ----

TEST(ScheduleTest, LinearWarmupThenConstant) {
  ScheduleConfig s{.peak_lr = 1e-3, .warmup_steps = 4, .kind = ScheduleKind::kConstant, .total_steps = 100};
  EXPECT_DOUBLE_EQ(LearningRate(s, 1), 0.25e-3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 2), 0.5e-3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4), 1e-3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 5), 1e-3);
  EXPECT_DOUBLE_EQ(LearningRate(s, 100), 1e-3);
}

TEST(ScheduleTest, NoWarmupStartsAtPeak) {
  ScheduleConfig s{.peak_lr = 2e-3, .warmup_steps = 0, .kind = ScheduleKind::kConstant, .total_steps = 10};
  EXPECT_DOUBLE_EQ(LearningRate(s, 1), 2e-3);
}

TEST(ScheduleTest, InverseSqrtAsFairseq) {
  ScheduleConfig s{.peak_lr = 1e-3, .warmup_steps = 100, .kind = ScheduleKind::kInverseSqrt, .total_steps = 1000};
  EXPECT_DOUBLE_EQ(LearningRate(s, 100), 1e-3);
  EXPECT_NEAR(LearningRate(s, 400), 1e-3 * std::sqrt(100.0 / 400.0), 1e-15);
  s.warmup_steps = 0;  // max(W, 1) = 1
  EXPECT_NEAR(LearningRate(s, 4), 0.5e-3, 1e-15);
}

TEST(ScheduleTest, LinearDecaysToZeroAtLastStep) {
  ScheduleConfig s{.peak_lr = 1.0, .warmup_steps = 10, .kind = ScheduleKind::kLinear, .total_steps = 110};
  EXPECT_DOUBLE_EQ(LearningRate(s, 10), 1.0);
  EXPECT_NEAR(LearningRate(s, 60), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(LearningRate(s, 110), 0.0);
}

TEST(ScheduleTest, CosineHalfWay) {
  ScheduleConfig s{.peak_lr = 1.0, .warmup_steps = 0, .kind = ScheduleKind::kCosine, .total_steps = 100};
  EXPECT_NEAR(LearningRate(s, 50), 0.5, 1e-12);
  EXPECT_NEAR(LearningRate(s, 100), 0.0, 1e-12);
}

// ---- data ----

TEST(DataTest, TranslateTaskIsDeterministicAndMasksTheSource) {
  auto data = MakeDataset(DataConfig{.task = "translate", .data_file = ""}, 32, 4);
  ASSERT_TRUE(data.ok());
  Batch a = (*data)->TrainBatch(1, 5, 4, 32), b = (*data)->TrainBatch(1, 5, 4, 32), c = (*data)->TrainBatch(2, 5, 4, 32);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_NE(a.inputs, c.inputs);
  // Each row: letters, '=', the reversed shifted letters, '.'; targets only after '='.
  for (int r = 0; r < 4; ++r) {
    const int32_t* in = a.inputs.data() + r * 32;
    const int32_t* tg = a.targets.data() + r * 32;
    int n = 0;
    while (in[n] != '=') ++n;
    for (int t = 0; t < n; ++t) EXPECT_EQ(tg[t], -1);
    for (int i = 0; i < n; ++i) EXPECT_EQ(tg[n + i], 'a' + (in[n - 1 - i] - 'a' + 7) % 16);
    EXPECT_EQ(tg[2 * n], '.');
  }
  EXPECT_TRUE((*data)->has_accuracy());
}

TEST(DataTest, TextCorpusSplitAndWindows) {
  const std::string path = TempPath("corpus.txt");
  std::string text;
  for (int i = 0; i < 4000; ++i) text.push_back(static_cast<char>('a' + i % 26));
  std::ofstream(path) << text;
  auto data = MakeDataset(DataConfig{.data_file = path}, 16, 4);
  ASSERT_TRUE(data.ok()) << data.status().message();
  // Validation windows start at byte 3600 (the last 10%), consecutive, 17 bytes apart.
  Batch v = (*data)->ValidationBatch(1, 4, 16);
  EXPECT_EQ(v.inputs[0], text[3600 + 4 * 17]);
  EXPECT_EQ(v.targets[15], text[3600 + 4 * 17 + 16]);
  EXPECT_EQ((*data)->ValidationBatchCount(4, 16), 6);  // 23 windows: 5 full batches and one of 3
  EXPECT_EQ((*data)->ValidationBatch(5, 4, 16).batch_size, 3);
  // Training windows come from the first 90% only.
  Batch t = (*data)->TrainBatch(3, 1, 4, 16);
  EXPECT_EQ(t.targets[0], (t.inputs[0] - 'a' + 1) % 26 + 'a');
}

TEST(DataTest, MissingOrTinyFileNamesDataFile) {
  auto missing = MakeDataset(DataConfig{.data_file = "/nonexistent/file.txt"}, 16, 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("data_file"));
  const std::string path = TempPath("tiny.txt");
  std::ofstream(path) << "hello world";
  auto tiny = MakeDataset(DataConfig{.data_file = path}, 16, 4);
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.status().message(), HasSubstr("too small"));
}

// ---- safetensors and checkpoints ----

ModelConfig SmallModel(Placement p) {
  ModelConfig m;
  m.placement = p;
  m.layers = 2;
  m.d_model = 16;
  m.heads = 2;
  m.d_ff = 24;
  m.seq_len = 8;
  return m;
}

TEST(CheckpointTest, RoundTripWithOptimizerState) {
  Checkpoint c;
  c.model = SmallModel(Placement::kPreLN);
  const ParamLayout layout = ParamLayout::ForModel(c.model);
  c.params = InitParameters(layout, c.model, 3);
  c.m.assign(layout.total(), 0.5f);
  c.v.assign(layout.total(), 0.25f);
  c.has_optimizer_state = true;
  c.step = 17;
  c.metadata["config"] = "{\"lr\": 0.001, \"note\": \"quotes \\\" and newlines\n\"}";
  const std::string path = TempPath("ckpt.safetensors");
  ASSERT_TRUE(SaveCheckpoint(path, c).ok());
  auto loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->params, c.params);
  EXPECT_EQ(loaded->m, c.m);
  EXPECT_EQ(loaded->v, c.v);
  EXPECT_EQ(loaded->step, 17);
  EXPECT_EQ(loaded->model.placement, Placement::kPreLN);
  EXPECT_EQ(loaded->model.d_ff, 24);
  EXPECT_EQ(loaded->metadata["config"], c.metadata["config"]);
  // Names as documented: ln_f only for Pre-LN, PyTorch shapes.
  auto file = ReadSafeTensors(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->tensors.at("blocks.1.attn.qkv.weight").shape, (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(file->tensors.at("blocks.0.ffn.fc1.weight").shape, (std::vector<int64_t>{24, 16}));
  EXPECT_TRUE(file->tensors.count("ln_f.weight"));
  EXPECT_EQ(file->metadata.at("placement"), "pre");
}

TEST(CheckpointTest, PostLnHasNoFinalLayerNorm) {
  const ParamLayout layout = ParamLayout::ForModel(SmallModel(Placement::kPostLN));
  EXPECT_EQ(layout.Find("ln_f.weight"), nullptr);
  EXPECT_NE(layout.Find("head.weight"), nullptr);
}

TEST(CheckpointTest, CorruptFilesAreErrorsNotCrashes) {
  Checkpoint c;
  c.model = SmallModel(Placement::kPostLN);
  c.params = InitParameters(ParamLayout::ForModel(c.model), c.model, 1);
  const std::string path = TempPath("good.safetensors");
  ASSERT_TRUE(SaveCheckpoint(path, c).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  auto try_bytes = [&](const std::string& b) {
    const std::string p = TempPath("bad.safetensors");
    std::ofstream(p, std::ios::binary | std::ios::trunc) << b;
    return LoadCheckpoint(p).status();
  };
  // Truncated data, truncated header, garbage length, garbage JSON, empty file.
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 10), bytes.substr(0, 40), std::string(8, '\xff') + "{}",
                                 std::string("\x10\0\0\0\0\0\0\0{\"a\":[1,2,}xxxx", 24), std::string()}) {
    Status s = try_bytes(bad);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.message();
  }
  // A wrong shape names the tensor.
  std::string wrong = bytes;
  const size_t at = wrong.find("\"tok_emb.weight\":{\"dtype\":\"F32\",\"shape\":[256,16]");
  ASSERT_NE(at, std::string::npos);
  wrong.replace(wrong.find("[256,16]", at), 8, "[128,32]");
  Status s = try_bytes(wrong);
  EXPECT_THAT(s.message(), HasSubstr("tok_emb.weight"));
  EXPECT_FALSE(LoadCheckpoint(TempPath("does-not-exist")).ok());
}

// ---- training runs ----

class RecordingSink : public EventSink {
 public:
  void OnStep(const StepEvent& e) override { steps.push_back(e); }
  void OnEval(const EvalEvent& e) override { evals.push_back(e); }
  void OnGradNorms(const GradNormsEvent& e) override { grad_norms.push_back(e); }
  void OnFinal(const FinalEvent& e) override { finals.push_back(e); }
  std::vector<StepEvent> steps;
  std::vector<EvalEvent> evals;
  std::vector<GradNormsEvent> grad_norms;
  std::vector<FinalEvent> finals;
};

TrainSettings SmallRun(Placement p, int steps) {
  TrainSettings s;
  s.model = SmallModel(p);
  s.model.seq_len = 16;
  s.batch_size = 8;
  s.steps = steps;
  s.schedule.peak_lr = 3e-3;
  s.schedule.warmup_steps = 5;
  s.schedule.total_steps = steps;
  s.eval_every = 10;
  s.eval_batches = 2;
  s.threads = 2;
  s.seed = 11;
  return s;
}

TEST(TrainingTest, LearnsTheTranslateTaskAndEmitsEveryEvent) {
  RecordingSink sink;
  FinalEvent f = RunTraining(SmallRun(Placement::kPreLN, 60), RunOptions{}, sink);
  ASSERT_EQ(f.outcome, Outcome::kSucceeded) << f.error;
  ASSERT_EQ(sink.steps.size(), 60u);
  EXPECT_EQ(sink.steps[0].step, 1);
  EXPECT_DOUBLE_EQ(sink.steps[0].lr, 3e-3 / 5);
  EXPECT_DOUBLE_EQ(sink.steps[10].lr, 3e-3);
  ASSERT_EQ(sink.evals.size(), 6u);  // steps 10, 20, ..., 60
  EXPECT_LT(sink.evals.back().val_loss, sink.evals.front().val_loss);
  EXPECT_LT(sink.steps.back().train_loss, 0.8 * sink.steps.front().train_loss);
  ASSERT_TRUE(f.final_val_accuracy.has_value());
  ASSERT_EQ(sink.grad_norms.size(), 1u);
  EXPECT_EQ(sink.grad_norms[0].norms.size(), 4u);  // 2 layers x (fc1, fc2)
  for (const auto& n : sink.grad_norms[0].norms) EXPECT_GT(n.norm, 0.0);
  EXPECT_GT(f.mean_tokens_per_s, 0.0);
  ASSERT_EQ(sink.finals.size(), 1u);
}

TEST(TrainingTest, SameConfigAndThreadsGiveBitIdenticalRuns) {
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
    TrainSettings s = SmallRun(p, 20);
    s.model.dropout = 0.1f;  // the dropout masks must be deterministic too
    RecordingSink a, b;
    RunTraining(s, RunOptions{}, a);
    RunTraining(s, RunOptions{}, b);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].train_loss, b.steps[i].train_loss) << "step " << i + 1;
      EXPECT_EQ(a.steps[i].grad_norm, b.steps[i].grad_norm);
    }
    EXPECT_EQ(a.evals.back().val_loss, b.evals.back().val_loss);
  }
}

TEST(TrainingTest, ResumeContinuesExactly) {
  for (OptimizerKind opt : {OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    TrainSettings full = SmallRun(Placement::kPostLN, 20);
    full.optimizer.kind = opt;
    full.optimizer.momentum = 0.9;
    full.schedule.kind = ScheduleKind::kCosine;
    RecordingSink whole;
    RunTraining(full, RunOptions{}, whole);

    // First half: the same config (same schedule), stopped after 10 steps by
    // a run whose steps = 10 but whose schedule length is the full 20.
    TrainSettings half = full;
    half.steps = 10;
    RunOptions save;
    save.checkpoint_out = TempPath("half.safetensors");
    RecordingSink first;
    ASSERT_EQ(RunTraining(half, save, first).outcome, Outcome::kSucceeded);
    RunOptions resume;
    resume.resume_from = save.checkpoint_out;
    RecordingSink second;
    ASSERT_EQ(RunTraining(full, resume, second).outcome, Outcome::kSucceeded);
    ASSERT_EQ(second.steps.size(), 10u);
    EXPECT_EQ(second.steps[0].step, 11);
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_EQ(first.steps[i].train_loss, whole.steps[i].train_loss);
      EXPECT_EQ(second.steps[i].train_loss, whole.steps[10 + i].train_loss) << "step " << 11 + i;
    }
    EXPECT_EQ(second.evals.back().val_loss, whole.evals.back().val_loss);
  }
}

TEST(TrainingTest, ResumeIntoADifferentModelIsAnError) {
  TrainSettings s = SmallRun(Placement::kPostLN, 5);
  RunOptions save;
  save.checkpoint_out = TempPath("other.safetensors");
  RecordingSink sink;
  RunTraining(s, save, sink);
  s.model.layers = 3;
  RunOptions resume;
  resume.resume_from = save.checkpoint_out;
  FinalEvent f = RunTraining(s, resume, sink);
  EXPECT_EQ(f.outcome, Outcome::kFailed);
  EXPECT_THAT(f.error, HasSubstr("resume"));
}

TEST(TrainingTest, HugeLearningRateDiverges) {
  TrainSettings s = SmallRun(Placement::kPostLN, 200);
  s.optimizer.kind = OptimizerKind::kSgd;
  s.schedule.peak_lr = 90.0;
  s.schedule.warmup_steps = 0;
  s.divergence_patience = 5;
  RecordingSink sink;
  FinalEvent f = RunTraining(s, RunOptions{}, sink);
  EXPECT_EQ(f.outcome, Outcome::kDiverged);
  ASSERT_TRUE(f.diverged_step.has_value());
  EXPECT_LT(*f.diverged_step, 200);
  EXPECT_EQ(sink.steps.back().step, *f.diverged_step);
}

TEST(TrainingTest, CancelStopsWithCancelled) {
  std::atomic<bool> cancel{true};
  RunOptions o;
  o.cancel = &cancel;
  RecordingSink sink;
  FinalEvent f = RunTraining(SmallRun(Placement::kPreLN, 50), o, sink);
  EXPECT_EQ(f.outcome, Outcome::kCancelled);
  EXPECT_TRUE(sink.steps.empty());
}

TEST(TrainingTest, InvalidSettingsFail) {
  TrainSettings s = SmallRun(Placement::kPreLN, 5);
  s.model.heads = 3;
  RecordingSink sink;
  FinalEvent f = RunTraining(s, RunOptions{}, sink);
  EXPECT_EQ(f.outcome, Outcome::kFailed);
  EXPECT_THAT(f.error, HasSubstr("heads"));
}

}  // namespace
}  // namespace normsweep::trainer
