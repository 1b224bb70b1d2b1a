// Issue 24's normalisation family outside the PyTorch parity test: names and
// validation of the settings, the parameter layout and init of each scheme,
// checkpoints and exact resume across the new options, the z term in step
// events, and the CUDA backend's refusal of what it does not implement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/trainer.h"
#include "tests/trainer/recording_sink.h"
#include "tests/trainer/temp_path.h"
#include "tests/trainer/valid_settings.h"

namespace normsweep::trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// ---- names and validation ----

TEST(NormSchemeNamesTest, EveryPlacementParsesAndPrintsItsCanonicalName) {
  for (const char* name : {"post", "pre", "peri", "deepnorm", "mix"}) {
    auto p = ParsePlacement(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_STREQ(PlacementName(*p), name);
  }
  auto sandwich = ParsePlacement("sandwich");  // CogView's name for the same block
  ASSERT_TRUE(sandwich.ok());
  EXPECT_EQ(*sandwich, Placement::kPeriLN);
  EXPECT_STREQ(PlacementName(*sandwich), "peri");
  for (const char* name : {"layernorm", "rmsnorm"}) {
    auto n = ParseNorm(name);
    ASSERT_TRUE(n.ok()) << name;
    EXPECT_STREQ(NormName(*n), name);
  }
}

TEST(NormSchemeNamesTest, UnknownNamesAreQuotedWithTheValidOnes) {
  auto p = ParsePlacement("middle");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("placement"));
  EXPECT_THAT(p.status().message(), HasSubstr("middle"));
  EXPECT_THAT(p.status().message(), HasSubstr("post, pre, peri (alias sandwich), deepnorm or mix"));
  auto n = ParseNorm("batchnorm");
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("norm"));
  EXPECT_THAT(n.status().message(), HasSubstr("batchnorm"));
  EXPECT_THAT(n.status().message(), HasSubstr("layernorm or rmsnorm"));
}

TEST(NormSchemeNamesTest, RangesOfMixPostFractionAndZLoss) {
  TrainSettings s;
  s.schedule.peak_lr = 1e-3;
  ASSERT_TRUE(ValidateTrainSettings(s).ok());
  EXPECT_DOUBLE_EQ(s.model.mix_post_fraction, 0.25);  // Mix-LN's alpha
  for (double bad : {-0.1, 1.5, double(NAN), double(INFINITY)}) {
    TrainSettings t = s;
    t.model.mix_post_fraction = bad;
    const Status st = ValidateTrainSettings(t);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr("mix_post_fraction")) << bad;
  }
  for (double ok : {0.0, 1.0}) {
    TrainSettings t = s;
    t.model.mix_post_fraction = ok;
    EXPECT_TRUE(ValidateTrainSettings(t).ok()) << ok;
  }
  for (double bad : {-1e-4, double(NAN), double(INFINITY)}) {
    TrainSettings t = s;
    t.z_loss = bad;
    const Status st = ValidateTrainSettings(t);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr("z_loss")) << bad;
  }
}

// ---- layout and init ----

ModelConfig Model(Placement p, int layers = 4) {
  return {.placement = p, .layers = layers, .d_model = 16, .heads = 2, .d_ff = 24, .seq_len = 8};
}

TEST(NormSchemeLayoutTest, MixIsPostLnThenPreLn) {
  ModelConfig m = Model(Placement::kMix, 4);
  EXPECT_EQ(m.BlockPlacement(0), Placement::kPostLN);  // floor(0.25 * 4) = 1 Post-LN block
  EXPECT_EQ(m.BlockPlacement(1), Placement::kPreLN);
  m.mix_post_fraction = 0.5;
  EXPECT_EQ(m.BlockPlacement(0), Placement::kPostLN);
  EXPECT_EQ(m.BlockPlacement(1), Placement::kPostLN);
  EXPECT_EQ(m.BlockPlacement(2), Placement::kPreLN);
  EXPECT_TRUE(m.HasFinalNorm());
  m.mix_post_fraction = 1.0;  // every block Post-LN: no final norm, as Post-LN
  EXPECT_FALSE(m.HasFinalNorm());
  EXPECT_EQ(ParamLayout::ForModel(m).total(), ParamLayout::ForModel(Model(Placement::kPostLN)).total());
}

TEST(NormSchemeLayoutTest, NamesFollowPyTorch) {
  const ParamLayout peri = ParamLayout::ForModel(Model(Placement::kPeriLN));
  for (const char* name : {"ln_emb.weight", "ln_emb.bias", "blocks.0.ln1_out.weight", "blocks.3.ln2_out.bias",
                           "ln_f.weight"}) {
    EXPECT_NE(peri.Find(name), nullptr) << name;
  }
  ModelConfig qk = Model(Placement::kPreLN);
  qk.qk_norm = true;
  const ParamLayout ql = ParamLayout::ForModel(qk);
  const TensorSpec* q_norm = ql.Find("blocks.1.attn.q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->shape, std::vector<int64_t>{qk.head_dim()});  // shared by the heads
  EXPECT_NE(ql.Find("blocks.1.attn.k_norm.bias"), nullptr);
  ModelConfig rms = Model(Placement::kPreLN);
  rms.norm = NormKind::kRmsNorm;
  rms.qk_norm = true;
  const ParamLayout rl = ParamLayout::ForModel(rms);
  EXPECT_NE(rl.Find("ln_f.weight"), nullptr);
  EXPECT_FALSE(rl.norm_bias());
  for (const TensorSpec& t : rl.tensors()) {
    const bool norm_bias = t.name.find("ln") != std::string::npos || t.name.find("_norm.") != std::string::npos;
    EXPECT_FALSE(norm_bias && t.name.size() > 5 && t.name.substr(t.name.size() - 5) == ".bias") << t.name;
  }
  EXPECT_EQ(ParamLayout::ForModel(Model(Placement::kDeepNorm)).Find("ln_f.weight"), nullptr);
}

// DeepNorm's init (Wang et al. 2022; torchscale divides v_proj, out_proj,
// fc1 and fc2 by (8N)^(1/4)): the same streams as Post-LN's, so q and k and
// the head are Post-LN's own numbers and v, proj, fc1, fc2 are beta times them.
TEST(NormSchemeLayoutTest, DeepNormInitScalesVProjAndFfnByBeta) {
  const ModelConfig post = Model(Placement::kPostLN), deep = Model(Placement::kDeepNorm);
  const double beta = std::pow(8.0 * deep.layers, -0.25);
  EXPECT_DOUBLE_EQ(deep.DeepNormBeta(), beta);
  EXPECT_DOUBLE_EQ(deep.ResidualAlpha(), std::pow(2.0 * deep.layers, 0.25));
  EXPECT_DOUBLE_EQ(post.ResidualAlpha(), 1.0);
  const ParamLayout lp = ParamLayout::ForModel(post), ld = ParamLayout::ForModel(deep);
  ASSERT_EQ(lp.total(), ld.total());
  const std::vector<float> wp = InitParameters(lp, post, 5), wd = InitParameters(ld, deep, 5);
  const size_t d = static_cast<size_t>(post.d_model);
  auto expect_scaled = [&](const std::string& name, size_t from, size_t to, double scale) {
    const TensorSpec* t = lp.Find(name);
    ASSERT_NE(t, nullptr) << name;
    for (size_t i = from; i < to; ++i) {
      EXPECT_NEAR(wd[t->offset + i], scale * wp[t->offset + i], 1e-6 * std::fabs(wp[t->offset + i])) << name << "[" << i << "]";
    }
  };
  for (int l = 0; l < deep.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    expect_scaled(p + "attn.qkv.weight", 0, 2 * d * d, 1.0);         // q, k: gain 1
    expect_scaled(p + "attn.qkv.weight", 2 * d * d, 3 * d * d, beta);  // v
    expect_scaled(p + "attn.proj.weight", 0, d * d, beta);
    expect_scaled(p + "ffn.fc1.weight", 0, d * static_cast<size_t>(post.d_ff), beta);
    expect_scaled(p + "ffn.fc2.weight", 0, d * static_cast<size_t>(post.d_ff), beta);
  }
  expect_scaled("head.weight", 0, d * kVocabSize, 1.0);
}

// ---- checkpoints, resume, events ----

struct Variant {
  const char* name;
  Placement placement;
  bool qk_norm = false;
  NormKind norm = NormKind::kLayerNorm;
  double z_loss = 0.0;
  double mix_post_fraction = kDefaultMixPostFraction;
};

TrainSettings SmallRun(const Variant& v, int steps) {
  TrainSettings s;
  s.model = Model(v.placement, 3);
  s.model.seq_len = 16;
  s.model.qk_norm = v.qk_norm;
  s.model.norm = v.norm;
  s.model.mix_post_fraction = v.mix_post_fraction;
  s.schedule = {.peak_lr = 3e-3, .warmup_steps = 5, .total_steps = steps};
  s.batch_size = 8;
  s.steps = steps;
  s.eval_every = 10;
  s.eval_batches = 2;
  s.seed = 11;
  s.threads = 2;
  s.z_loss = v.z_loss;
  return s;
}

const Variant kVariants[] = {
    {"peri", Placement::kPeriLN},
    {"deepnorm", Placement::kDeepNorm},
    {"mix", Placement::kMix, false, NormKind::kLayerNorm, 0.0, 0.5},
    {"pre_qknorm", Placement::kPreLN, true},
    {"post_rmsnorm", Placement::kPostLN, false, NormKind::kRmsNorm},
    {"peri_qknorm_rmsnorm_zloss", Placement::kPeriLN, true, NormKind::kRmsNorm, 1e-3},
    {"post_zloss", Placement::kPostLN, false, NormKind::kLayerNorm, 1e-4},
};

TEST(NormSchemeTrainingTest, ResumeContinuesExactlyAcrossTheNewOptions) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    const TrainSettings full = SmallRun(v, 12);
    RecordingSink whole;
    ASSERT_EQ(RunTraining(Valid(full), RunOptions{}, whole).outcome, Outcome::kSucceeded);
    TrainSettings half = full;
    half.steps = 6;
    RunOptions save;
    save.checkpoint_out = TempPath(std::string(v.name) + ".safetensors");
    RecordingSink first;
    ASSERT_EQ(RunTraining(Valid(half), save, first).outcome, Outcome::kSucceeded);

    // The checkpoint describes the model it holds.
    auto c = LoadCheckpoint(save.checkpoint_out);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->model.placement, v.placement);
    EXPECT_EQ(c->model.qk_norm, v.qk_norm);
    EXPECT_EQ(c->model.norm, v.norm);
    if (v.placement == Placement::kMix) {
      EXPECT_EQ(c->model.mix_post_fraction, v.mix_post_fraction);
    }

    RunOptions resume;
    resume.resume_from = save.checkpoint_out;
    RecordingSink second;
    ASSERT_EQ(RunTraining(Valid(full), resume, second).outcome, Outcome::kSucceeded);
    ASSERT_EQ(second.steps.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(second.steps[i].train_loss, whole.steps[6 + i].train_loss) << "step " << 7 + i;
      // The z term is reported with z_loss on, and is part of train_loss.
      EXPECT_EQ(whole.steps[i].z_term.has_value(), v.z_loss > 0) << "step " << i + 1;
      if (v.z_loss > 0) {
        EXPECT_GT(*whole.steps[i].z_term, 0.0);
        EXPECT_LT(*whole.steps[i].z_term, whole.steps[i].train_loss);
      }
    }
    EXPECT_EQ(second.evals.back().val_loss, whole.evals.back().val_loss);
    // Training moved the loss: the scheme learns, not just runs.
    EXPECT_LT(whole.steps.back().train_loss, whole.steps.front().train_loss);
  }
}

// Dropout masks in the new blocks (after Peri-LN's output norms, on its
// normalised embedding, DeepNorm's scaled residual) are as deterministic as
// Post-LN's and Pre-LN's.
TEST(NormSchemeTrainingTest, SameConfigGivesBitIdenticalRunsWithDropout) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    TrainSettings s = SmallRun(v, 8);
    s.model.dropout = 0.1f;
    RecordingSink a, b;
    ASSERT_EQ(RunTraining(Valid(s), RunOptions{}, a).outcome, Outcome::kSucceeded);
    ASSERT_EQ(RunTraining(Valid(s), RunOptions{}, b).outcome, Outcome::kSucceeded);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].train_loss, b.steps[i].train_loss) << "step " << i + 1;
      EXPECT_EQ(a.steps[i].grad_norm, b.steps[i].grad_norm) << "step " << i + 1;
    }
    EXPECT_EQ(a.evals.back().val_loss, b.evals.back().val_loss);
  }
}

TEST(NormSchemeTrainingTest, ResumeRefusesAnotherModel) {
  const Variant qk{"pre_qknorm", Placement::kPreLN, true};
  RunOptions save;
  save.checkpoint_out = TempPath("qk.safetensors");
  RecordingSink sink;
  ASSERT_EQ(RunTraining(Valid(SmallRun(qk, 2)), save, sink).outcome, Outcome::kSucceeded);
  for (const Variant& other : {Variant{"pre", Placement::kPreLN},
                               Variant{"pre_qknorm_rmsnorm", Placement::kPreLN, true, NormKind::kRmsNorm}}) {
    RunOptions resume;
    resume.resume_from = save.checkpoint_out;
    RecordingSink s;
    const FinalEvent f = RunTraining(Valid(SmallRun(other, 4)), resume, s);
    EXPECT_EQ(f.outcome, Outcome::kFailed) << other.name;
    EXPECT_THAT(f.error, HasSubstr("differs")) << other.name;
  }
}

// The z-loss changes training only, never the validation loss (plain
// cross-entropy): the step-0 evaluation of the same weights is the same.
TEST(NormSchemeTrainingTest, ZLossLeavesTheValidationLossPlain) {
  const Variant plain{"post", Placement::kPostLN}, z{"post_zloss", Placement::kPostLN, false, NormKind::kLayerNorm, 0.5};
  RecordingSink a, b;
  RunTraining(Valid(SmallRun(plain, 1)), RunOptions{}, a);
  RunTraining(Valid(SmallRun(z, 1)), RunOptions{}, b);
  ASSERT_FALSE(a.evals.empty());
  ASSERT_FALSE(b.evals.empty());
  EXPECT_EQ(a.evals.front().step, 0);
  EXPECT_EQ(a.evals.front().val_loss, b.evals.front().val_loss);
  // The first step's objective is the cross-entropy plus the z term.
  ASSERT_TRUE(b.steps.at(0).z_term.has_value());
  EXPECT_NEAR(b.steps[0].train_loss - *b.steps[0].z_term, a.steps.at(0).train_loss, 1e-6);
}

// The CUDA backend takes every scheme (e5a6198): on a machine with a GPU it
// is created; without one it fails only for want of a device, never for the
// scheme. (Its numbers are checked against the fixtures by tests/gpu.)
TEST(NormSchemeBackendTest, CudaTakesEveryScheme) {
  for (const Variant& v : kVariants) {
    BackendOptions o;
    o.device = "cuda:0";
    o.model = Model(v.placement);
    o.model.qk_norm = v.qk_norm;
    o.model.norm = v.norm;
    o.z_loss = v.z_loss;
    auto b = MakeBackend(o);
    if (b.ok()) continue;
    EXPECT_THAT(b.status().message(), Not(HasSubstr("does not implement"))) << v.name;
    EXPECT_THAT(b.status().message(), HasSubstr("cuda:0")) << v.name;
  }
}

}  // namespace
}  // namespace normsweep::trainer
