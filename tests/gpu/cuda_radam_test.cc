// The CUDA backend's RAdam (trainer/cuda/kernels/optimizers.cu RAdamKernel) against the
// CPU reference trainer::OptimizerUpdate: the GPU's own gradients replayed on
// the host step by step, through torch's rho_t > 5 switch (step 6 with beta2
// 0.98), with weight decay on the matrices and a clipping scale; then 10 steps
// of the CUDA backend tracking the CPU backend. Every test skips, saying so,
// when the machine has no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/settings/config.h"
#include "trainer/data.h"
#include "trainer/optimizer.h"
#include "trainer/param_layout.h"
#include "tests/common/gpu_skip.h"
#include "tests/trainer/max_relative_error.h"

namespace normsweep::trainer {
namespace {

using testing::MaxRelativeError;

ModelConfig Model() {
  return {.placement = Placement::kPostLN, .layers = 3, .d_model = 64, .heads = 4, .d_ff = 128, .seq_len = 32};
}

OptimizerConfig RAdam() {
  OptimizerConfig o;
  o.kind = OptimizerKind::kRAdam;
  o.beta1 = 0.9;
  o.beta2 = 0.98;
  o.eps = 1e-8;
  o.weight_decay = 0.01;
  return o;
}

std::unique_ptr<Backend> Make(const std::string& device, int batch) {
  BackendOptions o;
  o.device = device;
  o.model = Model();
  o.threads = 2;
  o.max_batch_size = batch;
  o.optimizer = RAdam();
  auto b = MakeBackend(o);
  EXPECT_TRUE(b.ok()) << device << ": " << b.status().message();
  if (!b.ok()) return nullptr;
  return std::move(b.value());
}

TEST(CudaRAdamTest, StepsMatchTheCpuReferenceUpdate) {
  SKIP_WITHOUT_GPU("the CUDA RAdam checks");
  constexpr int kBatch = 4;
  std::unique_ptr<Backend> gpu = Make("cuda:0", kBatch);
  ASSERT_TRUE(gpu);
  const ParamLayout& layout = gpu->layout();
  const OptimizerConfig config = RAdam();
  std::vector<float> p = InitParameters(layout, Model(), 3);
  ASSERT_TRUE(gpu->SetParameters(p).ok());
  std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
  auto data = MakeDataset(DataConfig{}, Model().seq_len, kBatch);
  ASSERT_TRUE(data.ok());
  bool saw_unrectified = false, saw_rectified = false;
  for (int step = 1; step <= 12; ++step) {
    ASSERT_TRUE(gpu->ForwardBackward((*data)->TrainBatch(5, step, kBatch, Model().seq_len), 0).ok());
    std::vector<float> g, before, after, mg, vg;
    ASSERT_TRUE(gpu->GetGradients(&g).ok());
    ASSERT_TRUE(gpu->GetParameters(&before).ok());
    OptimizerStepArgs args;
    args.step = step;
    args.lr = 1e-2;
    args.grad_scale = step % 4 == 3 ? 0.5 : 1.0;
    (RAdamFor(config, args, 0.0).rectified ? saw_rectified : saw_unrectified) = true;
    for (const TensorSpec& t : layout.tensors()) {
      OptimizerUpdate(config, args, t.decay ? config.weight_decay : 0.0, p.data() + t.offset, g.data() + t.offset,
                      m.data() + t.offset, v.data() + t.offset, t.size);
    }
    ASSERT_TRUE(gpu->OptimizerStep(args).ok());
    ASSERT_TRUE(gpu->GetParameters(&after).ok());
    ASSERT_TRUE(gpu->GetOptimizerState(&mg, &vg).ok());
    for (const TensorSpec& t : layout.tensors()) {
      const size_t o = t.offset;
      EXPECT_LT(MaxRelativeError(after.data() + o, p.data() + o, t.size), 1e-6) << t.name << " step " << step;
      EXPECT_LT(MaxRelativeError(mg.data() + o, m.data() + o, t.size), 1e-5) << t.name << " step " << step;
      EXPECT_LT(MaxRelativeError(vg.data() + o, v.data() + o, t.size), 1e-5) << t.name << " step " << step;
      // The step itself, which params at 1e-6 could hide where it is small:
      // within 1e-4 of the tensor's largest step, plus an ulp or two of the
      // param (nvcc may fuse p - s*m into one rounding).
      double max_step = 0.0;
      for (size_t i = 0; i < t.size; ++i) max_step = std::max(max_step, std::fabs(double(p[o + i]) - before[o + i]));
      size_t bad = 0;
      for (size_t i = 0; i < t.size; ++i) {
        const double dg = double(after[o + i]) - before[o + i], dc = double(p[o + i]) - before[o + i];
        const double ulp = std::nextafter(std::fabs(before[o + i]), INFINITY) - std::fabs(before[o + i]);
        if (std::fabs(dg - dc) > 1e-4 * max_step + 2.0 * ulp) ++bad;
      }
      EXPECT_EQ(bad, 0u) << t.name << " step " << step << ": steps differ from the reference's";
    }
    // Host and device go on from the device's params (ulps apart at most).
    p = after;
  }
  EXPECT_TRUE(saw_unrectified && saw_rectified);
}

TEST(CudaRAdamTest, TenStepsTrackTheCpuBackend) {
  SKIP_WITHOUT_GPU("the CUDA RAdam checks");
  constexpr int kBatch = 8;
  std::unique_ptr<Backend> cpu = Make("cpu", kBatch), gpu = Make("cuda:0", kBatch);
  ASSERT_TRUE(cpu && gpu);
  const std::vector<float> params = InitParameters(cpu->layout(), Model(), 2);
  ASSERT_TRUE(cpu->SetParameters(params).ok() && gpu->SetParameters(params).ok());
  auto data = MakeDataset(DataConfig{}, Model().seq_len, kBatch);
  ASSERT_TRUE(data.ok());
  for (int step = 1; step <= 10; ++step) {
    const Batch batch = (*data)->TrainBatch(7, step, kBatch, Model().seq_len);
    auto lc = cpu->ForwardBackward(batch, static_cast<uint64_t>(step));
    auto lg = gpu->ForwardBackward(batch, static_cast<uint64_t>(step));
    ASSERT_TRUE(lc.ok() && lg.ok());
    EXPECT_LT(std::fabs(lg->mean() - lc->mean()) / lc->mean(), 1e-4) << "step " << step;
    OptimizerStepArgs args;
    args.step = step;
    args.lr = 1e-3;
    ASSERT_TRUE(cpu->OptimizerStep(args).ok() && gpu->OptimizerStep(args).ok());
  }
  std::vector<float> pc, pg;
  ASSERT_TRUE(cpu->GetParameters(&pc).ok() && gpu->GetParameters(&pg).ok());
  // As in cuda_vs_cpu_test: the key third of each qkv bias has a gradient
  // that is rounding noise, which an adaptive step turns into steps of ~lr
  // in directions that differ between any two backends. Leave it out.
  const size_t C = static_cast<size_t>(Model().d_model);
  for (const BlockOffsets& w : cpu->layout().blocks()) {
    std::fill(pc.begin() + w.qkv_b + C, pc.begin() + w.qkv_b + 2 * C, 0.0f);
    std::fill(pg.begin() + w.qkv_b + C, pg.begin() + w.qkv_b + 2 * C, 0.0f);
  }
  EXPECT_LT(MaxRelativeError(pg.data(), pc.data(), pc.size()), 1e-3);
}

}  // namespace
}  // namespace normsweep::trainer
