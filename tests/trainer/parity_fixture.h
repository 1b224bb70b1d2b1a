// What the PyTorch parity tests of both backends share
// (tests/trainer/pytorch_parity_test.cc on the CPU,
// tests/gpu/cuda_pytorch_parity_test.cc on cuda:0): the schemes, where a
// fixture of tests/reference/make_fixtures.py lies, the model, batch and
// optimizer its metadata describes, its weights put into a backend, and the
// yardstick with its one exception. Header-only; includes no CUDA header.
#ifndef NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_
#define NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/backend.h"
#include "trainer/param_layout.h"
#include "trainer/safetensors.h"
#include "trainer/settings/config.h"

namespace normsweep::trainer::parity {

// The fixtures, one per scheme of issue 24: post, pre, peri, deepnorm, mix,
// and qk_norm, z_loss and rmsnorm each on top of post and of pre.
inline auto Schemes() {
  return ::testing::Values("post", "pre", "peri", "deepnorm", "mix", "post_qknorm", "pre_qknorm", "post_zloss",
                           "pre_zloss", "post_rmsnorm", "pre_rmsnorm");
}

inline std::string FixturePath(const std::string& placement) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/reference/fixtures/parity_" + placement + ".safetensors";
}

inline double MaxAbs(const float* x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
  return m;
}

// max|got - want| / scale, scale = max|want| unless given.
inline double MaxRelativeError(const float* got, const float* want, size_t n, double scale = -1) {
  double max_diff = 0;
  for (size_t i = 0; i < n; ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  if (scale < 0) scale = MaxAbs(want, n);
  return scale > 0 ? max_diff / scale : max_diff;
}

// attn.k_norm.bias has a zero gradient in exact arithmetic (a bias added to
// every key of a head adds q.b to every logit of a query's row, which the
// softmax ignores; the fixture holds ~1e-17): its error is measured against
// the scale of its weight's gradient, as make_fixtures.py does.
inline bool ZeroByShiftInvariance(const std::string& name) {
  const std::string suffix = "attn.k_norm.bias";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The model the fixture's metadata describes (the keys of a checkpoint).
inline ModelConfig FixtureModel(const std::map<std::string, std::string>& md) {
  ModelConfig m;
  auto placement = ParsePlacement(md.at("placement"));
  EXPECT_TRUE(placement.ok()) << placement.status().message();
  if (placement.ok()) m.placement = *placement;
  if (md.count("mix_post_fraction")) m.mix_post_fraction = std::stod(md.at("mix_post_fraction"));
  m.qk_norm = md.count("qk_norm") && md.at("qk_norm") == "true";
  if (md.count("norm")) {
    auto norm = ParseNorm(md.at("norm"));
    EXPECT_TRUE(norm.ok()) << norm.status().message();
    if (norm.ok()) m.norm = *norm;
  }
  m.layers = std::stoi(md.at("layers"));
  m.d_model = std::stoi(md.at("d_model"));
  m.heads = std::stoi(md.at("heads"));
  m.d_ff = std::stoi(md.at("d_ff"));
  m.seq_len = std::stoi(md.at("seq_len"));
  return m;
}

// The z-loss coefficient the fixture's objective has (0: none).
inline double FixtureZLoss(const SafeTensorsFile& file) {
  const auto& md = file.metadata;
  return md.count("z_loss") ? std::stod(md.at("z_loss")) : 0.0;
}

// The fixture's batch: (batch_size, seq_len) inputs and targets.
inline Batch FixtureBatch(const SafeTensorsFile& file) {
  const SafeTensor& inputs = file.tensors.at("batch.inputs");
  Batch batch;
  batch.batch_size = static_cast<int>(inputs.shape[0]);
  batch.seq_len = static_cast<int>(inputs.shape[1]);
  batch.inputs = inputs.ints;
  batch.targets = file.tensors.at("batch.targets").ints;
  return batch;
}

// A backend for the fixture's model and batch, with the Adam it was
// computed with and its z-loss; the device and threads are the caller's.
inline BackendOptions FixtureBackendOptions(const SafeTensorsFile& file) {
  const auto& md = file.metadata;
  BackendOptions o;
  o.model = FixtureModel(md);
  o.max_batch_size = FixtureBatch(file).batch_size;
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.beta1 = std::stod(md.at("adam_beta1"));
  o.optimizer.beta2 = std::stod(md.at("adam_beta2"));
  o.optimizer.eps = std::stod(md.at("adam_eps"));
  o.z_loss = FixtureZLoss(file);
  return o;
}

// The fixture's weights into backend, by name: every parameter of the
// layout must be in the fixture. Fatal: call through ASSERT_NO_FATAL_FAILURE.
inline void SetFixtureParameters(const SafeTensorsFile& file, Backend& backend) {
  std::vector<float> params(backend.layout().total());
  for (const TensorSpec& t : backend.layout().tensors()) {
    auto it = file.tensors.find(t.name);
    ASSERT_NE(it, file.tensors.end()) << "fixture lacks " << t.name;
    ASSERT_EQ(it->second.shape, t.shape) << t.name;
    std::copy(it->second.floats.begin(), it->second.floats.end(), params.begin() + t.offset);
  }
  ASSERT_TRUE(backend.SetParameters(params).ok());
}

// How many gradients the fixture holds (one per parameter).
inline size_t FixtureGradientCount(const SafeTensorsFile& file) {
  size_t n = 0;
  for (const auto& [name, t] : file.tensors) n += name.rfind("grads.", 0) == 0;
  return n;
}

// The error of `got`, the gradient of tensor t, against the fixture's:
// MaxRelativeError, k_norm.bias's against its weight's gradient
// (ZeroByShiftInvariance).
inline double GradientError(const SafeTensorsFile& file, const TensorSpec& t, const float* got) {
  const SafeTensor& want = file.tensors.at("grads." + t.name);
  double scale = -1;
  if (ZeroByShiftInvariance(t.name)) {
    const SafeTensor& w = file.tensors.at("grads." + t.name.substr(0, t.name.size() - 4) + "weight");
    scale = MaxAbs(w.floats.data(), w.floats.size());
  }
  return MaxRelativeError(got, want.floats.data(), t.size, scale);
}

// The index in layout.tensors() of the tensor at `offset`.
inline size_t TensorAt(const ParamLayout& layout, size_t offset) {
  size_t t = 0;
  while (layout.tensors()[t].offset != offset) ++t;
  return t;
}

}  // namespace normsweep::trainer::parity

#endif  // NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_
