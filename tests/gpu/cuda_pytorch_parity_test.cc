// PyTorch parity of the CUDA backend: the 11 fixtures of
// tests/reference/make_fixtures.py (weights, a batch, the loss, every
// gradient, the diagnostics and 5 Adam steps, in float64, at an odd size:
// head dim 15, seq_len 19), checked on cuda:0 with the tolerances of the CPU's
// tests/trainer/pytorch_parity_test.cc: loss and Adam losses within 1e-4
// relative, every gradient within 1e-3 max-relative error, log Z and the
// largest attention logits within 1e-5, update ratios within 1e-4. One
// fixture per scheme of issue 24: post, pre, peri, deepnorm, mix, and
// qk_norm, z_loss and rmsnorm each on top of post and of pre.
//
// The fixture's reading, the model it describes and the yardstick are the
// CPU test's (tests/trainer/parity_fixture.h). Every test skips, saying so,
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/gpu_skip.h"
#include "tests/trainer/parity_fixture.h"
#include "trainer/backend.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"

namespace normsweep::trainer {
namespace {

class CudaPyTorchParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU("the CUDA backend's PyTorch parity checks");
    auto file = ReadSafeTensors(parity::FixturePath(GetParam()));
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file.value());
    ASSERT_EQ(file_.metadata.at("positions"), "sinusoidal");
    z_loss_ = parity::FixtureZLoss(file_);
    batch_ = parity::FixtureBatch(file_);
    BackendOptions o = parity::FixtureBackendOptions(file_);
    o.device = "cuda:0";
    model_ = o.model;
    auto backend = MakeBackend(o);
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    gpu_ = std::move(backend.value());
    ASSERT_NO_FATAL_FAILURE(parity::SetFixtureParameters(file_, *gpu_));
  }

  // The training objective: cross-entropy plus the z term when z_loss > 0.
  double Objective(const LossStats& l) const { return l.mean() + l.z_term(z_loss_); }
  float Expected(const std::string& name) const { return file_.tensors.at(name).floats[0]; }

  SafeTensorsFile file_;
  ModelConfig model_;
  double z_loss_ = 0.0;
  Batch batch_;
  std::unique_ptr<Backend> gpu_;
};

TEST_P(CudaPyTorchParityTest, DiagnosticsOfAnEvaluation) {
  auto eval = gpu_->Evaluate(batch_);
  ASSERT_TRUE(eval.ok()) << eval.status().message();
  const float want_log_z = Expected("expected.log_z");
  EXPECT_NEAR(eval->mean_log_z(), want_log_z, 1e-5 * std::fabs(want_log_z)) << "log Z";
  auto maxima = gpu_->TakeMaxAttentionLogits();
  ASSERT_TRUE(maxima.ok());
  const std::vector<float>& want_max = file_.tensors.at("expected.max_attn_logit").floats;
  ASSERT_EQ(maxima->size(), want_max.size());
  for (size_t l = 0; l < want_max.size(); ++l) {
    EXPECT_NEAR((*maxima)[l], want_max[l], 1e-5 * std::fabs(want_max[l])) << "max attention logit, block " << l;
  }
}

TEST_P(CudaPyTorchParityTest, LossAndEveryGradient) {
  auto loss = gpu_->ForwardBackward(batch_, 0);
  ASSERT_TRUE(loss.ok()) << loss.status().message();
  const float want_loss = Expected("expected.loss");
  EXPECT_NEAR(Objective(*loss), want_loss, 1e-4 * std::fabs(want_loss)) << "loss";
  if (z_loss_ > 0) {
    const float want_z = Expected("expected.z_term");
    EXPECT_NEAR(loss->z_term(z_loss_), want_z, 1e-4 * std::fabs(want_z)) << "z term";
  }
  std::vector<float> grads;
  ASSERT_TRUE(gpu_->GetGradients(&grads).ok());
  EXPECT_EQ(parity::FixtureGradientCount(file_), gpu_->layout().tensors().size())
      << "the fixture has parameters the layout lacks";
  for (const TensorSpec& t : gpu_->layout().tensors()) {
    EXPECT_LT(parity::GradientError(file_, t, grads.data() + t.offset), 1e-3) << "gradient of " << t.name;
  }
}

// Five Adam steps on the same batch: the loss at the start of each, and
// each step's update ratios [step][block][qkv, proj, fc1, fc2].
TEST_P(CudaPyTorchParityTest, FiveAdamSteps) {
  const std::vector<float>& adam = file_.tensors.at("expected.adam_losses").floats;
  const SafeTensor& want_ratios = file_.tensors.at("expected.update_ratios");
  ASSERT_EQ(file_.metadata.at("update_ratio_matrices"), "attn.qkv,attn.proj,ffn.fc1,ffn.fc2");
  ASSERT_EQ(want_ratios.shape, (std::vector<int64_t>{static_cast<int64_t>(adam.size()), model_.layers, 4}));
  const double lr = std::stod(file_.metadata.at("adam_lr"));
  const ParamLayout& layout = gpu_->layout();
  for (size_t step = 0; step < adam.size(); ++step) {
    auto l = gpu_->ForwardBackward(batch_, 0);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_NEAR(Objective(*l), adam[step], 1e-4 * std::fabs(adam[step])) << "Adam step " << step;
    OptimizerStepArgs args;
    args.step = static_cast<int>(step) + 1;
    args.lr = lr;
    args.measure_update = true;
    ASSERT_TRUE(gpu_->OptimizerStep(args).ok());
    auto u = gpu_->LastUpdateSquaredNorms();
    ASSERT_TRUE(u.ok()) << u.status().message();
    for (int b = 0; b < model_.layers; ++b) {
      const BlockOffsets& w = layout.blocks()[static_cast<size_t>(b)];
      const size_t offsets[4] = {w.qkv_w, w.proj_w, w.fc1_w, w.fc2_w};
      for (int k = 0; k < 4; ++k) {
        const size_t t = parity::TensorAt(layout, offsets[k]);
        const double got = std::sqrt(u->update[t] / u->weight[t]);
        const float want = want_ratios.floats[(step * model_.layers + static_cast<size_t>(b)) * 4 +
                                              static_cast<size_t>(k)];
        EXPECT_NEAR(got, want, 1e-4 * want) << "update ratio of " << layout.tensors()[t].name << ", Adam step "
                                            << step + 1;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, CudaPyTorchParityTest, parity::Schemes());

}  // namespace
}  // namespace normsweep::trainer
