// PyTorch parity, as llm.c's test_gpt2 does it: the fixtures written by
// tests/reference/make_fixtures.py hold weights, a batch, the loss, every
// gradient and the losses of 5 Adam steps, computed in float64 by PyTorch.
#include <gtest/gtest.h>

#include <cmath>
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

  // Five Adam steps on the same batch: the loss at the start of each.
  const std::vector<float>& adam = file->tensors.at("expected.adam_losses").floats;
  const double lr = std::stod(md.at("adam_lr"));
  for (size_t step = 0; step < adam.size(); ++step) {
    if (step > 0) {
      auto l = be.ForwardBackward(batch, 0);
      ASSERT_TRUE(l.ok());
      EXPECT_NEAR(l->mean(), adam[step], 1e-4 * std::fabs(adam[step])) << "Adam step " << step;
    }
    OptimizerStepArgs args;
    args.step = static_cast<int>(step) + 1;
    args.lr = lr;
    ASSERT_TRUE(be.OptimizerStep(args).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, PyTorchParityTest, ::testing::Values("post", "pre"));

}  // namespace
}  // namespace normsweep::trainer
