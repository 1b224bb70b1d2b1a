// Fused trials (trainer.h, RunFusedTraining): each trial of a fused run
// computes what its solo run computes, bit for bit when the solo run uses one
// thread (the CPU runs whole trials per thread); a diverged or cancelled
// trial stops alone; CheckFusable names what fused trials may not differ in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/trainer.h"
#include "tests/trainer/recording_sink.h"
#include "tests/trainer/valid_settings.h"

namespace normsweep::trainer {
namespace {

using ::testing::HasSubstr;

// A small Post-LN model on the built-in translate task; threads 2.
TrainSettings Base() {
  TrainSettings s;
  s.model = {.placement = Placement::kPostLN, .layers = 2, .d_model = 16, .heads = 2, .d_ff = 32, .seq_len = 16};
  s.schedule = {.peak_lr = 3e-3, .warmup_steps = 5, .total_steps = 30};
  s.batch_size = 8;
  s.steps = 30;
  s.eval_every = 10;
  s.eval_batches = 2;
  s.seed = 1;
  s.threads = 2;
  return s;
}

// Trials that differ in everything fused trials may differ in.
std::vector<TrainSettings> Varied() {
  std::vector<TrainSettings> v(4, Base());
  v[1].schedule.peak_lr = 1e-2;
  v[1].schedule.warmup_steps = 0;
  v[1].seed = 7;
  v[2].schedule.kind = ScheduleKind::kCosine;
  v[2].optimizer.beta1 = 0.8;
  v[2].optimizer.beta2 = 0.95;
  v[2].optimizer.eps = 1e-6;
  v[2].optimizer.weight_decay = 0.01;
  v[2].z_loss = 1e-4;
  v[3].optimizer.grad_clip = 0.5;
  v[3].divergence_patience = 20;
  v[3].seed = 3;
  return v;
}

// Everything a run reports except wall-clock figures.
void ExpectSameRun(const RecordingSink& fused, const RecordingSink& solo, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(fused.steps.size(), solo.steps.size());
  for (size_t i = 0; i < solo.steps.size(); ++i) {
    EXPECT_EQ(fused.steps[i].step, solo.steps[i].step);
    EXPECT_EQ(fused.steps[i].train_loss, solo.steps[i].train_loss) << "step " << solo.steps[i].step;
    EXPECT_EQ(fused.steps[i].grad_norm, solo.steps[i].grad_norm) << "step " << solo.steps[i].step;
    EXPECT_EQ(fused.steps[i].lr, solo.steps[i].lr);
    EXPECT_EQ(fused.steps[i].z_term, solo.steps[i].z_term);
  }
  ASSERT_EQ(fused.evals.size(), solo.evals.size());
  for (size_t i = 0; i < solo.evals.size(); ++i) {
    EXPECT_EQ(fused.evals[i].step, solo.evals[i].step);
    EXPECT_EQ(fused.evals[i].val_loss, solo.evals[i].val_loss);
    EXPECT_EQ(fused.evals[i].output_log_z, solo.evals[i].output_log_z);
    ASSERT_EQ(fused.evals[i].layers.size(), solo.evals[i].layers.size());
    for (size_t l = 0; l < solo.evals[i].layers.size(); ++l) {
      EXPECT_EQ(fused.evals[i].layers[l].max_attn_logit, solo.evals[i].layers[l].max_attn_logit);
      EXPECT_EQ(fused.evals[i].layers[l].update_ratio_fc2, solo.evals[i].layers[l].update_ratio_fc2);
    }
  }
  ASSERT_EQ(fused.grad_norms.size(), solo.grad_norms.size());
  for (size_t i = 0; i < solo.grad_norms.size(); ++i) {
    ASSERT_EQ(fused.grad_norms[i].norms.size(), solo.grad_norms[i].norms.size());
    for (size_t j = 0; j < solo.grad_norms[i].norms.size(); ++j) {
      EXPECT_EQ(fused.grad_norms[i].norms[j].norm, solo.grad_norms[i].norms[j].norm);
    }
  }
  ASSERT_EQ(fused.finals.size(), 1u);
  ASSERT_EQ(solo.finals.size(), 1u);
  EXPECT_EQ(fused.finals[0].outcome, solo.finals[0].outcome) << fused.finals[0].error;
  EXPECT_EQ(fused.finals[0].step, solo.finals[0].step);
  EXPECT_EQ(fused.finals[0].final_val_loss, solo.finals[0].final_val_loss);
  EXPECT_EQ(fused.finals[0].best_val_loss, solo.finals[0].best_val_loss);
  EXPECT_EQ(fused.finals[0].init_val_loss, solo.finals[0].init_val_loss);
  EXPECT_EQ(fused.finals[0].diverged_step, solo.finals[0].diverged_step);
}

RecordingSink Solo(TrainSettings s, int threads, const RunOptions& options = {}) {
  s.threads = threads;
  RecordingSink sink;
  RunTraining(Valid(s), options, sink);
  return sink;
}

// Runs the trials fused; options[k] defaults to none.
std::vector<RecordingSink> Fused(const std::vector<TrainSettings>& settings,
                                 const std::vector<RunOptions>& options = {}) {
  std::vector<RecordingSink> sinks(settings.size());
  std::vector<FusedTrial> trials;
  for (size_t k = 0; k < settings.size(); ++k) {
    trials.push_back({Valid(settings[k]), k < options.size() ? options[k] : RunOptions{}, &sinks[k]});
  }
  std::vector<FinalEvent> finals = RunFusedTraining(trials);
  EXPECT_EQ(finals.size(), settings.size());
  return sinks;
}

TEST(FusedTrialsTest, EachTrialIsItsSoloRunWithOneThreadBitForBit) {
  const std::vector<TrainSettings> v = Varied();
  const std::vector<RecordingSink> fused = Fused(v);
  for (size_t k = 0; k < v.size(); ++k) {
    ExpectSameRun(fused[k], Solo(v[k], 1), "trial " + std::to_string(k));
    EXPECT_EQ(fused[k].finals[0].outcome, Outcome::kSucceeded);
  }
  // The trials did differ.
  EXPECT_NE(fused[0].finals[0].final_val_loss, fused[1].finals[0].final_val_loss);
  EXPECT_NE(fused[0].finals[0].final_val_loss, fused[2].finals[0].final_val_loss);
}

TEST(FusedTrialsTest, FewerTrialsThanThreadsTakeTurnsWithEveryThread) {
  // Two trials on four threads: each takes its steps with all four (its
  // batch in four parts), as a solo run with four threads.
  std::vector<TrainSettings> v = {Varied()[0], Varied()[1]};
  for (TrainSettings& s : v) s.threads = 4;
  const std::vector<RecordingSink> fused = Fused(v);
  for (size_t k = 0; k < v.size(); ++k) ExpectSameRun(fused[k], Solo(v[k], 4), "trial " + std::to_string(k));
  // One trial on two threads likewise.
  ExpectSameRun(Fused({Base()})[0], Solo(Base(), 2), "one trial, two threads");
}

TEST(FusedTrialsTest, ADivergedTrialStopsAndTheOthersGoOn) {
  std::vector<TrainSettings> v = Varied();
  v[1].schedule.peak_lr = 1.0;  // Post-LN without warm-up at this lr does not train
  v[1].divergence_loss = 4.0;
  v[1].divergence_patience = 2;
  const std::vector<RecordingSink> fused = Fused(v);
  ASSERT_EQ(fused[1].finals.size(), 1u);
  EXPECT_EQ(fused[1].finals[0].outcome, Outcome::kDiverged);
  ASSERT_TRUE(fused[1].finals[0].diverged_step.has_value());
  EXPECT_LT(*fused[1].finals[0].diverged_step, v[1].steps);
  for (size_t k = 0; k < v.size(); ++k) ExpectSameRun(fused[k], Solo(v[k], 1), "trial " + std::to_string(k));
}

// Sets a flag once its trial has reported step `at`.
class CancelAtSink : public RecordingSink {
 public:
  CancelAtSink(std::atomic<bool>* flag, int at) : flag_(flag), at_(at) {}
  void OnStep(const StepEvent& e) override {
    RecordingSink::OnStep(e);
    if (e.step == at_) flag_->store(true);
  }

 private:
  std::atomic<bool>* flag_;
  int at_;
};

TEST(FusedTrialsTest, ACancelledTrialStopsWithItsCheckpointAndTheOthersGoOn) {
  const std::vector<TrainSettings> v = Varied();
  const std::string dir = ::testing::TempDir();
  std::atomic<bool> cancel{false};
  std::vector<RecordingSink> sinks(v.size());
  CancelAtSink cancelled(&cancel, 12);
  std::vector<FusedTrial> trials;
  for (size_t k = 0; k < v.size(); ++k) {
    RunOptions o;
    o.checkpoint_out = dir + "/fused_cancel_" + std::to_string(k) + ".safetensors";
    std::remove(o.checkpoint_out.c_str());
    if (k == 2) o.cancel = &cancel;
    trials.push_back({Valid(v[k]), o, k == 2 ? static_cast<EventSink*>(&cancelled) : &sinks[k]});
  }
  RunFusedTraining(trials);
  ASSERT_EQ(cancelled.finals.size(), 1u);
  EXPECT_EQ(cancelled.finals[0].outcome, Outcome::kCancelled);
  EXPECT_EQ(cancelled.finals[0].step, 12);
  StatusOr<Checkpoint> c = LoadCheckpoint(trials[2].options.checkpoint_out);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->step, 12);
  for (size_t k : {0u, 1u, 3u}) {
    ASSERT_EQ(sinks[k].finals.size(), 1u);
    EXPECT_EQ(sinks[k].finals[0].outcome, Outcome::kSucceeded);
    EXPECT_EQ(sinks[k].finals[0].step, v[k].steps);
    StatusOr<Checkpoint> ck = LoadCheckpoint(trials[k].options.checkpoint_out);
    ASSERT_TRUE(ck.ok());
    EXPECT_EQ(ck->step, v[k].steps);
  }
}

TEST(FusedTrialsTest, ResumesEachTrialFromItsOwnCheckpoint) {
  // Trial 0 resumes from step 10 of its solo run, trial 1 starts fresh:
  // both end where their uninterrupted solo runs end.
  const std::vector<TrainSettings> v = {Varied()[0], Varied()[1]};
  const std::string ckpt = ::testing::TempDir() + "/fused_resume.safetensors";
  TrainSettings first = v[0];
  first.steps = 10;
  RunOptions save;
  save.checkpoint_out = ckpt;
  Solo(first, 1, save);
  RunOptions resume;
  resume.resume_from = ckpt;
  const std::vector<RecordingSink> fused = Fused(v, {resume, RunOptions{}});
  const RecordingSink whole0 = Solo(v[0], 1), whole1 = Solo(v[1], 1);
  ASSERT_EQ(fused[0].finals.size(), 1u);
  EXPECT_EQ(fused[0].finals[0].step, v[0].steps);
  EXPECT_EQ(fused[0].finals[0].final_val_loss, whole0.finals[0].final_val_loss);
  EXPECT_EQ(fused[0].steps.front().step, 11);
  ExpectSameRun(fused[1], whole1, "fresh trial");
}

TEST(FusedTrialsTest, CheckFusableNamesTheSettingThatDiffers) {
  EXPECT_TRUE(CheckFusable(Varied()).ok());
  struct Case {
    const char* field;
    void (*change)(TrainSettings&);
  };
  const Case cases[] = {
      {"placement", [](TrainSettings& s) { s.model.placement = Placement::kPreLN; }},
      {"d_model", [](TrainSettings& s) { s.model.d_model = 32; }},
      {"layers", [](TrainSettings& s) { s.model.layers = 3; }},
      {"norm", [](TrainSettings& s) { s.model.norm = NormKind::kRmsNorm; }},
      {"qk_norm", [](TrainSettings& s) { s.model.qk_norm = true; }},
      {"optimizer", [](TrainSettings& s) { s.optimizer.kind = OptimizerKind::kSgd; }},
      {"dropout", [](TrainSettings& s) { s.model.dropout = 0.1f; }},
      {"batch_size", [](TrainSettings& s) { s.batch_size = 4; }},
      {"steps", [](TrainSettings& s) { s.steps = 31; }},
      {"eval_every", [](TrainSettings& s) { s.eval_every = 5; }},
      {"threads", [](TrainSettings& s) { s.threads = 1; }},
      {"data_file", [](TrainSettings& s) { s.data.data_file = "/tmp/other.txt"; }},
  };
  for (const Case& c : cases) {
    std::vector<TrainSettings> v = Varied();
    c.change(v[2]);
    const Status st = CheckFusable(v);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(st.message(), HasSubstr(std::string("config 2: ") + c.field + " ")) << st.message();
  }
  // A fused run of unfusable trials fails every trial with that message.
  std::vector<TrainSettings> v = Varied();
  v[1].model.d_model = 32;
  const std::vector<RecordingSink> fused = Fused(v);
  for (const RecordingSink& s : fused) {
    ASSERT_EQ(s.finals.size(), 1u);
    EXPECT_EQ(s.finals[0].outcome, Outcome::kFailed);
    EXPECT_THAT(s.finals[0].error, HasSubstr("d_model"));
  }
}

}  // namespace
}  // namespace normsweep::trainer
