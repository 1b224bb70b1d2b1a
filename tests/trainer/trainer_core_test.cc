// Schedules, data, safetensors and checkpoints, determinism and resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/settings/config.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"
#include "trainer/schedule.h"
#include "trainer/trainer.h"
#include "tests/trainer/recording_sink.h"
#include "tests/trainer/temp_path.h"
#include "tests/trainer/valid_settings.h"

namespace normsweep::trainer {
namespace {

using ::testing::HasSubstr;

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
  return {.placement = p, .layers = 2, .d_model = 16, .heads = 2, .d_ff = 24, .seq_len = 8};
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

TrainSettings SmallRun(Placement p, int steps) {
  TrainSettings s{.model = SmallModel(p),
                  .schedule = {.peak_lr = 3e-3, .warmup_steps = 5, .total_steps = steps},
                  .batch_size = 8,
                  .steps = steps,
                  .eval_every = 10,
                  .eval_batches = 2,
                  .seed = 11,
                  .threads = 2};
  s.model.seq_len = 16;
  return s;
}

TEST(TrainingTest, LearnsTheTranslateTaskAndEmitsEveryEvent) {
  RecordingSink sink;
  FinalEvent f = RunTraining(Valid(SmallRun(Placement::kPreLN, 60)), RunOptions{}, sink);
  ASSERT_EQ(f.outcome, Outcome::kSucceeded) << f.error;
  ASSERT_EQ(sink.steps.size(), 60u);
  EXPECT_EQ(sink.steps[0].step, 1);
  EXPECT_DOUBLE_EQ(sink.steps[0].lr, 3e-3 / 5);
  EXPECT_DOUBLE_EQ(sink.steps[10].lr, 3e-3);
  ASSERT_EQ(sink.evals.size(), 7u);  // steps 0, 10, 20, ..., 60
  for (size_t i = 0; i < sink.evals.size(); ++i) EXPECT_EQ(sink.evals[i].step, static_cast<int>(10 * i));
  EXPECT_LT(sink.evals.back().val_loss, sink.evals.front().val_loss);
  EXPECT_LT(sink.steps.back().train_loss, 0.8 * sink.steps.front().train_loss);
  ASSERT_TRUE(f.final_val_accuracy.has_value());
  ASSERT_EQ(sink.grad_norms.size(), 7u);  // at initialization, then at every evaluation step
  for (size_t i = 0; i < sink.grad_norms.size(); ++i) {
    EXPECT_EQ(sink.grad_norms[i].step, static_cast<int>(10 * i));
    EXPECT_EQ(sink.grad_norms[i].norms.size(), 4u);  // 2 layers x (fc1, fc2)
    for (const auto& n : sink.grad_norms[i].norms) EXPECT_GT(n.norm, 0.0);
  }
  EXPECT_GT(f.mean_tokens_per_s, 0.0);
  ASSERT_EQ(sink.finals.size(), 1u);
}

TEST(TrainingTest, SameConfigAndThreadsGiveBitIdenticalRuns) {
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
    TrainSettings s = SmallRun(p, 20);
    s.model.dropout = 0.1f;  // the dropout masks must be deterministic too
    RecordingSink a, b;
    RunTraining(Valid(s), RunOptions{}, a);
    RunTraining(Valid(s), RunOptions{}, b);
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
    RunTraining(Valid(full), RunOptions{}, whole);

    // First half: the same config (same schedule), stopped after 10 steps by
    // a run whose steps = 10 but whose schedule length is the full 20.
    TrainSettings half = full;
    half.steps = 10;
    RunOptions save;
    save.checkpoint_out = TempPath("half.safetensors");
    RecordingSink first;
    ASSERT_EQ(RunTraining(Valid(half), save, first).outcome, Outcome::kSucceeded);
    RunOptions resume;
    resume.resume_from = save.checkpoint_out;
    RecordingSink second;
    ASSERT_EQ(RunTraining(Valid(full), resume, second).outcome, Outcome::kSucceeded);
    ASSERT_EQ(second.steps.size(), 10u);
    EXPECT_EQ(second.steps[0].step, 11);
    // A resumed run has no step-0 evaluation, so no l0.
    ASSERT_FALSE(second.evals.empty());
    EXPECT_EQ(second.evals.front().step, 20);
    EXPECT_FALSE(second.finals.at(0).init_val_loss.has_value());
    EXPECT_TRUE(whole.finals.at(0).init_val_loss.has_value());
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_EQ(first.steps[i].train_loss, whole.steps[i].train_loss);
      EXPECT_EQ(second.steps[i].train_loss, whole.steps[10 + i].train_loss) << "step " << 11 + i;
    }
    EXPECT_EQ(second.evals.back().val_loss, whole.evals.back().val_loss);
  }
}

// l0 and the diagnostics, checked against the backend directly: the step-0
// evaluation is the loss of the initial weights; the update ratios of the
// evaluation at step 10 come from the weights after steps 9 and 10 (two
// runs' checkpoints); its grad_norms event from step 10's gradients.
TEST(TrainingTest, StepZeroLossAndTheDiagnosticsMatchTheBackend) {
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
    const TrainSettings s = SmallRun(p, 10);
    RunOptions o9, o10;
    o9.checkpoint_out = TempPath("diag9.safetensors");
    o10.checkpoint_out = TempPath("diag10.safetensors");
    TrainSettings s9 = s;
    s9.steps = 9;
    RecordingSink sink9, sink;
    ASSERT_EQ(RunTraining(Valid(s9), o9, sink9).outcome, Outcome::kSucceeded);
    const FinalEvent f = RunTraining(Valid(s), o10, sink);
    ASSERT_EQ(f.outcome, Outcome::kSucceeded) << f.error;
    ASSERT_EQ(sink.evals.size(), 2u);
    const EvalEvent &e0 = sink.evals[0], &e10 = sink.evals[1];
    ASSERT_EQ(e0.step, 0);
    ASSERT_EQ(e10.step, 10);

    BackendOptions bo;
    bo.model = s.model;
    bo.threads = s.threads;
    bo.max_batch_size = s.batch_size;
    auto backend = MakeBackend(bo);
    ASSERT_TRUE(backend.ok());
    Backend& be = **backend;
    auto data = MakeDataset(s.data, s.model.seq_len, s.batch_size);
    ASSERT_TRUE(data.ok());
    auto evaluate = [&](const std::vector<float>& params, LossStats* total) {
      ASSERT_TRUE(be.SetParameters(params).ok());
      for (int i = 0; i < s.eval_batches; ++i) {
        auto r = be.Evaluate((*data)->ValidationBatch(i, s.batch_size, s.model.seq_len));
        ASSERT_TRUE(r.ok());
        *total += *r;
      }
    };
    // Step 0: the initial weights.
    LossStats init;
    evaluate(InitParameters(be.layout(), s.model, s.seed), &init);
    auto init_max = be.TakeMaxAttentionLogits();
    ASSERT_TRUE(init_max.ok());
    EXPECT_EQ(e0.val_loss, init.mean());
    ASSERT_TRUE(f.init_val_loss.has_value());
    EXPECT_EQ(*f.init_val_loss, init.mean());
    EXPECT_NE(f.best_val_loss, f.init_val_loss);  // l0 is neither the best nor the final loss
    ASSERT_TRUE(e0.output_log_z.has_value());
    EXPECT_EQ(*e0.output_log_z, init.mean_log_z());
    ASSERT_EQ(e0.layers.size(), 2u);
    for (int l = 0; l < 2; ++l) {
      EXPECT_EQ(e0.layers[l].layer, l);
      ASSERT_TRUE(e0.layers[l].max_attn_logit.has_value());
      EXPECT_EQ(*e0.layers[l].max_attn_logit, (*init_max)[l]);
      EXPECT_FALSE(e0.layers[l].update_ratio_qkv || e0.layers[l].update_ratio_proj ||
                   e0.layers[l].update_ratio_fc1 || e0.layers[l].update_ratio_fc2);
    }
    // Taking the maxima starts afresh.
    auto empty = be.TakeMaxAttentionLogits();
    ASSERT_TRUE(empty.ok());
    for (double m : *empty) EXPECT_EQ(m, -INFINITY);

    // Step 10: the update of step 10 and the gradients of its batch.
    auto c9 = LoadCheckpoint(o9.checkpoint_out);
    auto c10 = LoadCheckpoint(o10.checkpoint_out);
    ASSERT_TRUE(c9.ok() && c10.ok());
    const ParamLayout& layout = be.layout();
    auto ratio = [&](size_t offset) {
      const TensorSpec* t = nullptr;
      for (const TensorSpec& spec : layout.tensors()) {
        if (spec.offset == offset) t = &spec;
      }
      double du = 0, w = 0;
      for (size_t i = t->offset; i < t->offset + t->size; ++i) {
        const double d = static_cast<double>(c10->params[i] - c9->params[i]);
        du += d * d;
        w += static_cast<double>(c9->params[i]) * c9->params[i];
      }
      return std::sqrt(du / w);
    };
    LossStats after;
    evaluate(c10->params, &after);
    auto after_max = be.TakeMaxAttentionLogits();
    ASSERT_TRUE(after_max.ok());
    EXPECT_EQ(e10.val_loss, after.mean());
    EXPECT_EQ(*e10.output_log_z, after.mean_log_z());
    ASSERT_TRUE(be.SetParameters(c9->params).ok());
    ASSERT_TRUE(be.ForwardBackward((*data)->TrainBatch(s.seed, 10, s.batch_size, s.model.seq_len), 0).ok());
    auto sq = be.GradientSquaredNorms();
    ASSERT_TRUE(sq.ok());
    ASSERT_EQ(sink.grad_norms.size(), 2u);
    const GradNormsEvent& g10 = sink.grad_norms[1];
    EXPECT_EQ(g10.step, 10);
    ASSERT_EQ(g10.norms.size(), 4u);
    for (int l = 0; l < 2; ++l) {
      const BlockOffsets& b = layout.blocks()[l];
      const LayerDiagnosticsValue& d = e10.layers[l];
      EXPECT_EQ(*d.max_attn_logit, (*after_max)[l]);
      ASSERT_TRUE(d.update_ratio_qkv && d.update_ratio_proj && d.update_ratio_fc1 && d.update_ratio_fc2);
      EXPECT_NEAR(*d.update_ratio_qkv, ratio(b.qkv_w), 1e-9 * ratio(b.qkv_w)) << PlacementName(p) << " layer " << l;
      EXPECT_NEAR(*d.update_ratio_proj, ratio(b.proj_w), 1e-9 * ratio(b.proj_w));
      EXPECT_NEAR(*d.update_ratio_fc1, ratio(b.fc1_w), 1e-9 * ratio(b.fc1_w));
      EXPECT_NEAR(*d.update_ratio_fc2, ratio(b.fc2_w), 1e-9 * ratio(b.fc2_w));
      EXPECT_GT(*d.update_ratio_fc1, 0.0);
      EXPECT_EQ(g10.norms[2 * l].matrix, "ffn.fc1");
      EXPECT_EQ(g10.norms[2 * l].norm, std::sqrt((*sq)[b.fc1_w_index]));
      EXPECT_EQ(g10.norms[2 * l + 1].norm, std::sqrt((*sq)[b.fc2_w_index]));
    }
  }
}

// Off, the run has no step-0 evaluation and no diagnostics, and trains
// bit for bit as with them (measuring an update does not change it).
TEST(TrainingTest, WithoutDiagnosticsNoStepZeroNoDiagnostics) {
  RunOptions o;
  o.diagnostics = false;
  RecordingSink sink, with;
  const FinalEvent f = RunTraining(Valid(SmallRun(Placement::kPostLN, 20)), o, sink);
  ASSERT_EQ(RunTraining(Valid(SmallRun(Placement::kPostLN, 20)), RunOptions{}, with).outcome, Outcome::kSucceeded);
  ASSERT_EQ(with.steps.size(), sink.steps.size());
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    EXPECT_EQ(with.steps[i].train_loss, sink.steps[i].train_loss) << "step " << i + 1;
    EXPECT_EQ(with.steps[i].grad_norm, sink.steps[i].grad_norm) << "step " << i + 1;
  }
  ASSERT_EQ(with.evals.size(), 3u);
  EXPECT_EQ(with.evals.back().val_loss, sink.evals.back().val_loss);
  ASSERT_EQ(f.outcome, Outcome::kSucceeded) << f.error;
  EXPECT_FALSE(f.init_val_loss.has_value());
  ASSERT_EQ(sink.evals.size(), 2u);  // steps 10 and 20
  for (const EvalEvent& e : sink.evals) {
    EXPECT_GT(e.step, 0);
    EXPECT_FALSE(e.output_log_z.has_value());
    EXPECT_TRUE(e.layers.empty());
  }
  ASSERT_EQ(sink.grad_norms.size(), 1u);  // at initialization only, as before the diagnostics
  EXPECT_EQ(sink.grad_norms[0].step, 0);
}

TEST(TrainingTest, ResumeIntoADifferentModelIsAnError) {
  TrainSettings s = SmallRun(Placement::kPostLN, 5);
  RunOptions save;
  save.checkpoint_out = TempPath("other.safetensors");
  RecordingSink sink;
  RunTraining(Valid(s), save, sink);
  s.model.layers = 3;
  RunOptions resume;
  resume.resume_from = save.checkpoint_out;
  FinalEvent f = RunTraining(Valid(s), resume, sink);
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
  FinalEvent f = RunTraining(Valid(s), RunOptions{}, sink);
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
  FinalEvent f = RunTraining(Valid(SmallRun(Placement::kPreLN, 50)), o, sink);
  EXPECT_EQ(f.outcome, Outcome::kCancelled);
  EXPECT_TRUE(sink.steps.empty());
}

// RunTraining takes only checked settings: the check names the field.
TEST(TrainingTest, InvalidSettingsAreRefusedBeforeARun) {
  TrainSettings s = SmallRun(Placement::kPreLN, 5);
  s.model.heads = 3;
  const StatusOr<ValidTrainSettings> valid = ValidTrainSettings::Check(s);
  ASSERT_FALSE(valid.ok());
  EXPECT_EQ(valid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(valid.status().message(), HasSubstr("heads"));
  s.model.heads = 4;
  EXPECT_TRUE(ValidTrainSettings::Check(s).ok());
}

}  // namespace
}  // namespace normsweep::trainer
