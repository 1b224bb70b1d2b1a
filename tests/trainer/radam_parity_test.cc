// RAdam against torch.optim.RAdam (torch 1.13): tests/reference/make_radam_fixture.py
// wrote 12 steps of RAdam and Adam on three tensors with fixed gradients
// (float64 in torch); trainer::OptimizerUpdate replays the gradients and the
// params must match after every step. The fixture crosses torch's rho_t > 5
// threshold between steps 5 and 6, has weight decay on one tensor and, on
// another, gradients so small that sqrt(v) is of the order of eps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/optimizer.h"
#include "trainer/safetensors.h"
#include "tests/trainer/max_relative_error.h"

namespace normsweep::trainer {
namespace {

using testing::MaxRelativeError;

std::string FixturePath() {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/reference/fixtures/radam_steps.safetensors";
}

const SafeTensorsFile& Fixture() {
  static const SafeTensorsFile* file = [] {
    auto f = ReadSafeTensors(FixturePath());
    if (!f.ok()) {
      ADD_FAILURE() << FixturePath() << ": " << f.status().message();
      return new SafeTensorsFile();
    }
    return new SafeTensorsFile(std::move(*f));
  }();
  return *file;
}

const std::vector<std::string> kTensors = {"w", "b", "tiny"};

OptimizerConfig ConfigFromFixture(OptimizerKind kind) {
  const auto& md = Fixture().metadata;
  OptimizerConfig c;
  c.kind = kind;
  c.beta1 = std::stod(md.at("beta1"));
  c.beta2 = std::stod(md.at("beta2"));
  c.eps = std::stod(md.at("eps"));
  c.weight_decay = std::stod(md.at("weight_decay"));
  return c;
}

constexpr double kTolerance = 1e-6;

// Replays the fixture's gradients through OptimizerUpdate and compares the
// params after every step with the stored rows of `prefix` ("radam"/"adam").
void ExpectStepsMatch(OptimizerKind kind, const std::string& prefix) {
  const SafeTensorsFile& f = Fixture();
  ASSERT_FALSE(f.tensors.empty());
  const OptimizerConfig config = ConfigFromFixture(kind);
  const int steps = std::stoi(f.metadata.at("steps"));
  const std::string decay = f.metadata.at("decay");
  const std::vector<float>& lr = f.tensors.at("lr").floats;
  const std::vector<float>& scale = f.tensors.at("grad_scale").floats;
  ASSERT_EQ(lr.size(), static_cast<size_t>(steps));
  for (const std::string& name : kTensors) {
    std::vector<float> p = f.tensors.at("param0." + name).floats;
    const size_t n = p.size();
    const std::vector<float>& grads = f.tensors.at("grads." + name).floats;
    const std::vector<float>& want = f.tensors.at(prefix + "." + name).floats;
    ASSERT_EQ(grads.size(), n * steps) << name;
    ASSERT_EQ(want.size(), n * steps) << name;
    const double wd = decay == name ? config.weight_decay : 0.0;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    for (int t = 1; t <= steps; ++t) {
      OptimizerStepArgs args;
      args.step = t;
      args.lr = lr[t - 1];
      args.grad_scale = scale[t - 1];
      OptimizerUpdate(config, args, wd, p.data(), grads.data() + (t - 1) * n, m.data(), v.data(), n);
      EXPECT_LT(MaxRelativeError(p.data(), want.data() + (t - 1) * n, n), kTolerance)
          << prefix << " " << name << " after step " << t;
    }
  }
}

TEST(RAdamParityTest, StepsMatchTorchRAdam) { ExpectStepsMatch(OptimizerKind::kRAdam, "radam"); }

TEST(RAdamParityTest, AdamStepsMatchTorchAdam) { ExpectStepsMatch(OptimizerKind::kAdam, "adam"); }

// The comparison above can tell RAdam from Adam: on every tensor the two
// trajectories part by far more than the tolerance (from step 1 on w and b,
// whose first steps are plain momentum steps; on tiny once rectified).
TEST(RAdamParityTest, FixtureTellsRAdamFromAdam) {
  const SafeTensorsFile& f = Fixture();
  ASSERT_FALSE(f.tensors.empty());
  const int steps = std::stoi(f.metadata.at("steps"));
  for (const std::string& name : kTensors) {
    const std::vector<float>& radam = f.tensors.at("radam." + name).floats;
    const std::vector<float>& adam = f.tensors.at("adam." + name).floats;
    const size_t n = radam.size() / steps;
    const size_t last = static_cast<size_t>(steps - 1) * n;
    EXPECT_GT(MaxRelativeError(adam.data() + last, radam.data() + last, n), 1000 * kTolerance) << name;
  }
}

// torch's threshold, not the paper's: rho_t is 4.92 at step 5 with beta2
// 0.98, so step 5 is un-adapted and step 6 the first rectified one.
TEST(RAdamParityTest, RectifiesFromTheStepTorchDoes) {
  const SafeTensorsFile& f = Fixture();
  ASSERT_FALSE(f.tensors.empty());
  const OptimizerConfig config = ConfigFromFixture(OptimizerKind::kRAdam);
  const std::vector<float>& rho = f.tensors.at("rho").floats;
  const int first = std::stoi(f.metadata.at("first_rectified_step"));
  for (int t = 1; t <= static_cast<int>(rho.size()); ++t) {
    EXPECT_NEAR(RAdamRho(config.beta2, t), rho[t - 1], 1e-6 * std::fabs(rho[t - 1])) << "step " << t;
    OptimizerStepArgs args;
    args.step = t;
    args.lr = 1e-3;
    EXPECT_EQ(RAdamFor(config, args, 0.0).rectified, t >= first) << "step " << t;
  }
  EXPECT_GT(rho[first - 2], 4.0) << "the step before the first rectified one must tell 4 from 5";
  EXPECT_EQ(RAdamRho(0.98, 1), 1.0);
}

// Disjoint ranges give the update of the whole (the CPU backend splits
// tensors over threads).
TEST(RAdamParityTest, RangesUpdateIndependently) {
  const SafeTensorsFile& f = Fixture();
  ASSERT_FALSE(f.tensors.empty());
  const OptimizerConfig config = ConfigFromFixture(OptimizerKind::kRAdam);
  const std::vector<float>& grads = f.tensors.at("grads.w").floats;
  std::vector<float> p1 = f.tensors.at("param0.w").floats, p2 = p1;
  const size_t n = p1.size(), half = n / 2 + 1;
  std::vector<float> m1(n), v1(n), m2(n), v2(n);
  for (int t = 1; t <= 8; ++t) {
    OptimizerStepArgs args;
    args.step = t;
    args.lr = 0.03;
    OptimizerUpdate(config, args, 0.01, p1.data(), grads.data() + (t - 1) * n, m1.data(), v1.data(), n);
    OptimizerUpdate(config, args, 0.01, p2.data(), grads.data() + (t - 1) * n, m2.data(), v2.data(), half);
    OptimizerUpdate(config, args, 0.01, p2.data() + half, grads.data() + (t - 1) * n + half, m2.data() + half,
                    v2.data() + half, n - half);
  }
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(v1, v2);
}

TEST(RAdamConfigTest, NameParsesAndValidates) {
  auto k = ParseOptimizer("radam");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, OptimizerKind::kRAdam);
  EXPECT_STREQ(OptimizerName(OptimizerKind::kRAdam), "radam");
  TrainSettings s;
  s.schedule.peak_lr = 1e-3;
  s.optimizer.kind = OptimizerKind::kRAdam;
  EXPECT_TRUE(ValidateTrainSettings(s).ok());
  auto bad = ParseOptimizer("RAdamW");
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_NE(msg.find("optimizer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RAdamW"), std::string::npos) << msg;
  EXPECT_NE(msg.find("radam"), std::string::npos) << msg;
}

}  // namespace
}  // namespace normsweep::trainer
