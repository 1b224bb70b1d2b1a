// PyTorch parity, as llm.c's test_gpt2 does it: the fixtures written by
// tests/reference/make_fixtures.py hold weights, a batch, the loss, every
// gradient, the instability diagnostics (largest attention logit per block,
// mean log Z) and the losses and update-to-weight RMS ratios of 5 Adam steps,
// computed in float64 by PyTorch, at an odd size (head dim 15, seq_len 19).
//
// Diagnostics' tolerances: float32 PyTorch lands within 3e-7 of the float64
// maxima and log Z and within 2e-6 of the update ratios (make_fixtures.py
// prints it); we allow 1e-5 and 1e-4 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainer/backend.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"

namespace normsweep::trainer {
namespace {

std::string FixturePath(const std::string& placement) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/reference/fixtures/parity_" + placement + ".safetensors";
}

double MaxRelativeError(const std::vector<float>& got, const float* want, size_t n) {
  double max_diff = 0, max_want = 0;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_want = std::max(max_want, std::fabs(static_cast<double>(want[i])));
  }
  return max_want > 0 ? max_diff / max_want : max_diff;
}

std::string Scientific(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", x);
  return buf;
}

class PyTorchParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PyTorchParityTest, LossGradientsAndAdamStepsMatch) {
  auto file = ReadSafeTensors(FixturePath(GetParam()));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const auto& md = file->metadata;
  ModelConfig m;
  m.placement = md.at("placement") == "pre" ? Placement::kPreLN : Placement::kPostLN;
  m.layers = std::stoi(md.at("layers"));
  m.d_model = std::stoi(md.at("d_model"));
  m.heads = std::stoi(md.at("heads"));
  m.d_ff = std::stoi(md.at("d_ff"));
  m.seq_len = std::stoi(md.at("seq_len"));
  ASSERT_EQ(md.at("positions"), "sinusoidal");

  const SafeTensor& inputs = file->tensors.at("batch.inputs");
  Batch batch;
  batch.batch_size = static_cast<int>(inputs.shape[0]);
  batch.seq_len = static_cast<int>(inputs.shape[1]);
  batch.inputs = inputs.ints;
  batch.targets = file->tensors.at("batch.targets").ints;

  BackendOptions o;
  o.model = m;
  o.threads = 2;
  o.max_batch_size = batch.batch_size;
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.beta1 = std::stod(md.at("adam_beta1"));
  o.optimizer.beta2 = std::stod(md.at("adam_beta2"));
  o.optimizer.eps = std::stod(md.at("adam_eps"));
  auto backend = MakeBackend(o);
  ASSERT_TRUE(backend.ok());
  Backend& be = **backend;

  // Weights by name: every parameter of the layout must be in the fixture.
  std::vector<float> params(be.layout().total());
  for (const TensorSpec& t : be.layout().tensors()) {
    auto it = file->tensors.find(t.name);
    ASSERT_NE(it, file->tensors.end()) << "fixture lacks " << t.name;
    ASSERT_EQ(it->second.shape, t.shape) << t.name;
    std::copy(it->second.floats.begin(), it->second.floats.end(), params.begin() + t.offset);
  }
  ASSERT_TRUE(be.SetParameters(params).ok());

  // The diagnostics of an evaluation of the batch.
  auto eval = be.Evaluate(batch);
  ASSERT_TRUE(eval.ok());
  const float want_log_z = file->tensors.at("expected.log_z").floats[0];
  EXPECT_NEAR(eval->mean_log_z(), want_log_z, 1e-5 * std::fabs(want_log_z)) << "log Z";
  auto maxima = be.TakeMaxAttentionLogits();
  ASSERT_TRUE(maxima.ok());
  const std::vector<float>& want_max = file->tensors.at("expected.max_attn_logit").floats;
  ASSERT_EQ(maxima->size(), want_max.size());
  double worst_diag = std::fabs(eval->mean_log_z() - want_log_z) / std::fabs(want_log_z);
  for (size_t l = 0; l < want_max.size(); ++l) {
    EXPECT_NEAR((*maxima)[l], want_max[l], 1e-5 * std::fabs(want_max[l])) << "max attention logit, block " << l;
    worst_diag = std::max(worst_diag, std::fabs((*maxima)[l] - want_max[l]) / std::fabs(want_max[l]));
  }
  RecordProperty("worst_log_z_or_max_logit_rel_error", Scientific(worst_diag));

  auto loss = be.ForwardBackward(batch, 0);
  ASSERT_TRUE(loss.ok());
  const float want_loss = file->tensors.at("expected.loss").floats[0];
  EXPECT_NEAR(loss->mean(), want_loss, 1e-4 * std::fabs(want_loss)) << "loss";

  std::vector<float> grads;
  ASSERT_TRUE(be.GetGradients(&grads).ok());
  double worst = 0;
  for (const TensorSpec& t : be.layout().tensors()) {
    const SafeTensor& want = file->tensors.at("grads." + t.name);
    std::vector<float> got(grads.begin() + t.offset, grads.begin() + t.offset + t.size);
    const double err = MaxRelativeError(got, want.floats.data(), t.size);
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-3) << "gradient of " << t.name;
  }
  RecordProperty("worst_gradient_rel_error", std::to_string(worst));

  // Five Adam steps on the same batch: the loss at the start of each, and
  // each step's update ratios [step][block][qkv, proj, fc1, fc2].
  const std::vector<float>& adam = file->tensors.at("expected.adam_losses").floats;
  const SafeTensor& want_ratios = file->tensors.at("expected.update_ratios");
  ASSERT_EQ(md.at("update_ratio_matrices"), "attn.qkv,attn.proj,ffn.fc1,ffn.fc2");
  ASSERT_EQ(want_ratios.shape, (std::vector<int64_t>{static_cast<int64_t>(adam.size()), m.layers, 4}));
  const double lr = std::stod(md.at("adam_lr"));
  double worst_ratio = 0;
  for (size_t step = 0; step < adam.size(); ++step) {
    if (step > 0) {
      auto l = be.ForwardBackward(batch, 0);
      ASSERT_TRUE(l.ok());
      EXPECT_NEAR(l->mean(), adam[step], 1e-4 * std::fabs(adam[step])) << "Adam step " << step;
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
        size_t t = 0;
        while (be.layout().tensors()[t].offset != offsets[k]) ++t;
        const double got = std::sqrt(u->update[t] / u->weight[t]);
        const float want = want_ratios.floats[(step * m.layers + static_cast<size_t>(l)) * 4 + static_cast<size_t>(k)];
        EXPECT_NEAR(got, want, 1e-4 * want) << "update ratio of " << be.layout().tensors()[t].name << ", Adam step "
                                            << step + 1;
        worst_ratio = std::max(worst_ratio, std::fabs(got - want) / want);
      }
    }
  }
  RecordProperty("worst_update_ratio_rel_error", Scientific(worst_ratio));
}

INSTANTIATE_TEST_SUITE_P(Placements, PyTorchParityTest, ::testing::Values("post", "pre"));

}  // namespace
}  // namespace normsweep::trainer
