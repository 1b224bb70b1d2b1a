// PyTorch parity, as llm.c's test_gpt2 does it: the fixtures written by
// tests/reference/make_fixtures.py hold weights, a batch, the loss, every
// gradient, the instability diagnostics (largest attention logit per block,
// mean log Z) and the losses and update-to-weight RMS ratios of 5 Adam steps,
// computed in float64 by PyTorch, at an odd size (head dim 15, seq_len 19).
//
// Diagnostics' tolerances: float32 PyTorch lands within 3e-7 of the float64
// maxima and log Z and within 2e-6 of the update ratios (make_fixtures.py
// prints it); we allow 1e-5 and 1e-4 relative.
//
// One fixture per scheme (issue 24): post, pre, peri, deepnorm, mix, and
// qk_norm, z_loss and rmsnorm each on top of post and of pre; every fixture
// runs on every CPU kernel variant this machine has (kernel_variant.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "tests/trainer/parity_fixture.h"
#include "trainer/backend.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"

namespace normsweep::trainer {
namespace {

std::string Scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", x);
  return buf;
}

// The whole check of one fixture on the active kernel variant.
void CheckFixture(const SafeTensorsFile& file, double* worst_grad, double* worst_diag, double* worst_ratio) {
  const auto& md = file.metadata;
  ASSERT_EQ(md.at("positions"), "sinusoidal");
  const Batch batch = parity::FixtureBatch(file);
  const double z_loss = parity::FixtureZLoss(file);
  BackendOptions o = parity::FixtureBackendOptions(file);
  o.threads = 2;
  const ModelConfig& m = o.model;
  auto backend = MakeBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  Backend& be = **backend;
  ASSERT_NO_FATAL_FAILURE(parity::SetFixtureParameters(file, be));

  // The diagnostics of an evaluation of the batch.
  auto eval = be.Evaluate(batch);
  ASSERT_TRUE(eval.ok());
  const float want_log_z = file.tensors.at("expected.log_z").floats[0];
  EXPECT_NEAR(eval->mean_log_z(), want_log_z, 1e-5 * std::fabs(want_log_z)) << "log Z";
  auto maxima = be.TakeMaxAttentionLogits();
  ASSERT_TRUE(maxima.ok());
  const std::vector<float>& want_max = file.tensors.at("expected.max_attn_logit").floats;
  ASSERT_EQ(maxima->size(), want_max.size());
  *worst_diag = std::max(*worst_diag, std::fabs(eval->mean_log_z() - want_log_z) / std::fabs(want_log_z));
  for (size_t l = 0; l < want_max.size(); ++l) {
    EXPECT_NEAR((*maxima)[l], want_max[l], 1e-5 * std::fabs(want_max[l])) << "max attention logit, block " << l;
    *worst_diag = std::max(*worst_diag, std::fabs((*maxima)[l] - want_max[l]) / std::fabs(want_max[l]));
  }

  // The training objective: cross-entropy plus the z term when z_loss > 0.
  auto objective = [&](const LossStats& l) { return l.mean() + l.z_term(z_loss); };
  auto loss = be.ForwardBackward(batch, 0);
  ASSERT_TRUE(loss.ok());
  const float want_loss = file.tensors.at("expected.loss").floats[0];
  EXPECT_NEAR(objective(*loss), want_loss, 1e-4 * std::fabs(want_loss)) << "loss";
  if (z_loss > 0) {
    const float want_z = file.tensors.at("expected.z_term").floats[0];
    EXPECT_NEAR(loss->z_term(z_loss), want_z, 1e-4 * std::fabs(want_z)) << "z term";
  }

  std::vector<float> grads;
  ASSERT_TRUE(be.GetGradients(&grads).ok());
  // Every gradient of the fixture must be a parameter of the layout, too.
  EXPECT_EQ(parity::FixtureGradientCount(file), be.layout().tensors().size())
      << "the fixture has parameters the layout lacks";
  for (const TensorSpec& t : be.layout().tensors()) {
    const double err = parity::GradientError(file, t, grads.data() + t.offset);
    *worst_grad = std::max(*worst_grad, err);
    EXPECT_LT(err, 1e-3) << "gradient of " << t.name;
  }

  // Five Adam steps on the same batch: the loss at the start of each, and
  // each step's update ratios [step][block][qkv, proj, fc1, fc2].
  const std::vector<float>& adam = file.tensors.at("expected.adam_losses").floats;
  const SafeTensor& want_ratios = file.tensors.at("expected.update_ratios");
  ASSERT_EQ(md.at("update_ratio_matrices"), "attn.qkv,attn.proj,ffn.fc1,ffn.fc2");
  ASSERT_EQ(want_ratios.shape, (std::vector<int64_t>{static_cast<int64_t>(adam.size()), m.layers, 4}));
  const double lr = std::stod(md.at("adam_lr"));
  for (size_t step = 0; step < adam.size(); ++step) {
    if (step > 0) {
      auto l = be.ForwardBackward(batch, 0);
      ASSERT_TRUE(l.ok());
      EXPECT_NEAR(objective(*l), adam[step], 1e-4 * std::fabs(adam[step])) << "Adam step " << step;
    }
    OptimizerStepArgs args;
    args.step = static_cast<int>(step) + 1;
    args.lr = lr;
    args.measure_update = true;
    ASSERT_TRUE(be.OptimizerStep(args).ok());
    auto u = be.LastUpdateSquaredNorms();
    ASSERT_TRUE(u.ok());
    for (int l = 0; l < m.layers; ++l) {
      const BlockOffsets& b = be.layout().blocks()[static_cast<size_t>(l)];
      const size_t offsets[4] = {b.qkv_w, b.proj_w, b.fc1_w, b.fc2_w};
      for (int k = 0; k < 4; ++k) {
        const size_t t = parity::TensorAt(be.layout(), offsets[k]);
        const double got = std::sqrt(u->update[t] / u->weight[t]);
        const float want = want_ratios.floats[(step * m.layers + static_cast<size_t>(l)) * 4 + static_cast<size_t>(k)];
        EXPECT_NEAR(got, want, 1e-4 * want) << "update ratio of " << be.layout().tensors()[t].name << ", Adam step "
                                            << step + 1;
        *worst_ratio = std::max(*worst_ratio, std::fabs(got - want) / want);
      }
    }
  }
}

class PyTorchParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PyTorchParityTest, LossGradientsAndAdamStepsMatch) {
  auto file = ReadSafeTensors(parity::FixturePath(GetParam()));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const cpu::KernelVariant initial = cpu::ActiveKernelVariant();
  double worst_grad = 0, worst_diag = 0, worst_ratio = 0;
  std::string variants;
  for (cpu::KernelVariant v : cpu::SupportedKernelVariants()) {
    ASSERT_TRUE(cpu::SetKernelVariant(v));
    SCOPED_TRACE(std::string("kernel variant ") + cpu::KernelVariantName(v));
    variants += std::string(variants.empty() ? "" : ",") + cpu::KernelVariantName(v);
    CheckFixture(*file, &worst_grad, &worst_diag, &worst_ratio);
  }
  cpu::SetKernelVariant(initial);
  RecordProperty("kernel_variants", variants);
  RecordProperty("worst_gradient_rel_error", Scientific(worst_grad));
  RecordProperty("worst_log_z_or_max_logit_rel_error", Scientific(worst_diag));
  RecordProperty("worst_update_ratio_rel_error", Scientific(worst_ratio));
}

INSTANTIATE_TEST_SUITE_P(Schemes, PyTorchParityTest, parity::Schemes());

}  // namespace
}  // namespace normsweep::trainer
