// What the PyTorch parity tests of both backends share
// (tests/trainer/pytorch_parity_test.cc on the CPU,
// tests/gpu/cuda_pytorch_parity_test.cc on cuda:0): where a fixture of
// tests/reference/make_fixtures.py lies, the model its metadata describes,
// and the yardstick with its one exception. Header-only.
#ifndef NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_
#define NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "trainer/settings/config.h"

namespace normsweep::trainer::parity {

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

}  // namespace normsweep::trainer::parity

#endif  // NORMSWEEP_TESTS_TRAINER_PARITY_FIXTURE_H_
