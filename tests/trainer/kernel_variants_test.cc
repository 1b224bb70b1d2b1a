// The CPU kernels' instruction-set variants (trainer/cpu/kernel_variant.h):
// every op of trainer/cpu/ops.h run through the baseline (x86-64, SSE2)
// fallback and through each wider variant this CPU runs, on the same inputs;
// a short training run both ways; and how the variant is chosen.
//
// Tolerance: the variants differ in rounding only (fused multiply-adds, the
// vector width of reductions, the avx512 variant's packed sgemm), so every
// output element of an op must agree with the fallback's within
// kOpTolerance = 1e-5 of the largest magnitude in that output (float's
// epsilon is 1.2e-7: about a hundred roundings' worth; seen: 5e-7 at most).
// A training run: the first step's loss and gradient norm (the whole model's
// forward and backward) within 1e-5 relative; after that Adam turns rounding
// differences into different updates (its first steps move every weight by
// about lr whatever the gradient's size), so the runs drift apart and only
// stay close: every loss within 1e-3 and every gradient norm within 1e-2
// relative over 20 steps (seen: 1e-4 and 6e-4, Post-LN; Pre-LN stays at
// 1e-7). The evaluations' diagnostics likewise: at step 0 within 1e-5, then
// log Z within 1e-3 and the largest attention logit and the update ratios
// within 1e-2 (a maximum follows the drifting weights: seen 4e-3, Post-LN,
// avx2). Shapes are chosen off the vector widths (4, 8, 16 lanes and twice
// that) so that the tails run too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/cpu/ops.h"
#include "trainer/rng.h"
#include "trainer/trainer.h"
#include "tests/trainer/valid_settings.h"

namespace normsweep::trainer {
namespace {

using cpu::KernelVariant;

constexpr double kOpTolerance = 1e-5;
constexpr double kFirstStepTolerance = 1e-5;
constexpr double kRunLossTolerance = 1e-3;
constexpr double kRunGradNormTolerance = 1e-2;

std::vector<float> RandomVector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.Normal());
  return v;
}

// Expects `got` within tolerance * max|want| of `want`, element by element.
void ExpectClose(const std::string& what, const std::vector<float>& want, const std::vector<float>& got,
                 double tolerance = kOpTolerance) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double scale = 0, worst = 0;
  size_t worst_at = 0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= worst)) {  // NaN counts as the worst
      worst = err;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, tolerance * std::max(scale, 1e-30))
      << what << ": largest difference " << worst << " at " << worst_at << " (fallback " << want[worst_at]
      << ", dispatched " << got[worst_at] << "), largest magnitude " << scale;
}

// Runs `op` (which writes its outputs into `outputs`) with the baseline
// kernels and with `variant`, and compares every output.
void CompareVariants(KernelVariant variant, const std::string& what, std::vector<std::vector<float>*> outputs,
                     const std::function<void()>& op) {
  const std::vector<std::vector<float>> initial = [&] {
    std::vector<std::vector<float>> v;
    for (auto* o : outputs) v.push_back(*o);
    return v;
  }();
  ASSERT_TRUE(cpu::SetKernelVariant(KernelVariant::kBaseline));
  op();
  std::vector<std::vector<float>> fallback;
  for (size_t i = 0; i < outputs.size(); ++i) {
    fallback.push_back(*outputs[i]);
    *outputs[i] = initial[i];  // accumulating ops start from the same values
  }
  ASSERT_TRUE(cpu::SetKernelVariant(variant));
  op();
  for (size_t i = 0; i < outputs.size(); ++i) {
    ExpectClose(what + " output " + std::to_string(i), fallback[i], *outputs[i]);
  }
}

class KernelVariantsTest : public ::testing::TestWithParam<KernelVariant> {
 protected:
  void SetUp() override {
    saved_ = cpu::ActiveKernelVariant();
    if (!cpu::KernelVariantSupported(GetParam())) {
      GTEST_SKIP() << "this CPU does not run the " << cpu::KernelVariantName(GetParam()) << " kernels";
    }
    cpu::SetThreads(2);
  }
  void TearDown() override { cpu::SetKernelVariant(saved_); }
  KernelVariant saved_ = KernelVariant::kBaseline;
};

TEST_P(KernelVariantsTest, Encoder) {
  const int B = 3, T = 37, C = 72, V = 256;
  std::vector<int32_t> tokens(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % V);
  const auto emb = RandomVector(static_cast<size_t>(V) * C, 1), pos = RandomVector(static_cast<size_t>(T) * C, 2);
  const auto dout = RandomVector(static_cast<size_t>(B) * T * C, 3);
  std::vector<float> out(static_cast<size_t>(B) * T * C), demb(static_cast<size_t>(V) * C);
  std::vector<float> dpos = RandomVector(static_cast<size_t>(T) * C, 4);
  CompareVariants(GetParam(), "EncoderForward", {&out},
                  [&] { cpu::EncoderForward(out.data(), tokens.data(), emb.data(), pos.data(), B, T, C, 8.5f); });
  CompareVariants(GetParam(), "EncoderBackward", {&demb, &dpos}, [&] {
    cpu::EncoderBackward(demb.data(), dpos.data(), dout.data(), tokens.data(), B, T, C, V, 8.5f);
  });
}

TEST_P(KernelVariantsTest, LayerNorm) {
  for (int C : {72, 128}) {
    const int N = 111;
    const auto x = RandomVector(static_cast<size_t>(N) * C, 5, 3.0), w = RandomVector(C, 6), b = RandomVector(C, 7);
    const auto dout = RandomVector(static_cast<size_t>(N) * C, 8);
    std::vector<float> out(static_cast<size_t>(N) * C), mean(N), rstd(N), dw(C), db(C);
    std::vector<float> dx = RandomVector(static_cast<size_t>(N) * C, 9);
    const std::string c = " C=" + std::to_string(C);
    CompareVariants(GetParam(), "LayerNormForward" + c, {&out, &mean, &rstd}, [&] {
      cpu::LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    });
    CompareVariants(GetParam(), "LayerNormBackward" + c, {&dx, &dw, &db}, [&] {
      cpu::LayerNormBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                             rstd.data(), N, C);
    });
  }
}

TEST_P(KernelVariantsTest, RmsNorm) {
  for (int C : {15, 72, 128}) {  // 15: qk_norm's head_dim in the parity fixtures
    const int N = 111;
    const auto x = RandomVector(static_cast<size_t>(N) * C, 25, 3.0), w = RandomVector(C, 26);
    const auto dout = RandomVector(static_cast<size_t>(N) * C, 27);
    std::vector<float> out(static_cast<size_t>(N) * C), rstd(N), dw(C);
    std::vector<float> dx = RandomVector(static_cast<size_t>(N) * C, 28);
    const std::string c = " C=" + std::to_string(C);
    CompareVariants(GetParam(), "RmsNormForward" + c, {&out, &rstd},
                    [&] { cpu::RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f); });
    CompareVariants(GetParam(), "RmsNormBackward" + c, {&dx, &dw}, [&] {
      cpu::RmsNormBackward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    });
  }
}

TEST_P(KernelVariantsTest, Matmul) {
  // Off the register tiles (12 x 32) and the k block (256), and the bench's shapes.
  struct Shape {
    int N, I, O;
  };
  for (Shape s : {Shape{111, 72, 200}, Shape{2048, 128, 512}, Shape{70, 300, 33}}) {
    const int N = s.N, I = s.I, O = s.O;
    const std::string shape = " " + std::to_string(N) + "x" + std::to_string(I) + "x" + std::to_string(O);
    const auto inp = RandomVector(static_cast<size_t>(N) * I, 10), w = RandomVector(static_cast<size_t>(O) * I, 11);
    const auto bias = RandomVector(O, 12), dout = RandomVector(static_cast<size_t>(N) * O, 13);
    std::vector<float> out(static_cast<size_t>(N) * O), dw(static_cast<size_t>(O) * I), db(O);
    std::vector<float> dinp = RandomVector(static_cast<size_t>(N) * I, 14);
    CompareVariants(GetParam(), "MatmulForward" + shape, {&out},
                    [&] { cpu::MatmulForward(out.data(), inp.data(), w.data(), bias.data(), N, I, O); });
    CompareVariants(GetParam(), "MatmulForward without bias" + shape, {&out},
                    [&] { cpu::MatmulForward(out.data(), inp.data(), w.data(), nullptr, N, I, O); });
    for (bool accumulate : {false, true}) {
      CompareVariants(GetParam(), std::string("MatmulBackward") + (accumulate ? " accumulating" : "") + shape,
                      {&dinp, &dw, &db}, [&] {
                        cpu::MatmulBackward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                                            I, O, accumulate);
                      });
    }
  }
}

// The variant's own packed sgemm (trainer/cpu/packed_sgemm.inc; the Matmul
// ops above reach it only where OpenBLAS's kernels are narrower), called
// directly: every transpose, beta 0 and not, shapes off both register tiles
// (6 x 16, 12 x 32) and across the k block (256), against a double-precision
// product.
TEST_P(KernelVariantsTest, PackedSgemm) {
  ASSERT_TRUE(cpu::SetKernelVariant(GetParam()));
  const cpu::SgemmFunction sgemm = cpu::ActivePackedSgemm();
  ASSERT_NE(sgemm, nullptr);
  struct Shape {
    int M, N, K;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 17, 5}, Shape{13, 33, 300}, Shape{50, 70, 513}, Shape{128, 512, 128}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (float beta : {0.0f, 1.5f}) {
        const int lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 1, ldc = s.N + 2;  // padded rows
        const auto A = RandomVector(static_cast<size_t>(ta ? s.K : s.M) * lda, 20);
        const auto B = RandomVector(static_cast<size_t>(tb ? s.N : s.K) * ldb, 21);
        auto C = RandomVector(static_cast<size_t>(s.M) * ldc, 22);
        std::vector<float> want = C;
        for (int i = 0; i < s.M; ++i) {
          for (int j = 0; j < s.N; ++j) {
            double sum = 0;
            for (int k = 0; k < s.K; ++k) {
              sum += static_cast<double>(ta ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k]) *
                     (tb ? B[static_cast<size_t>(j) * ldb + k] : B[static_cast<size_t>(k) * ldb + j]);
            }
            float& w = want[static_cast<size_t>(i) * ldc + j];
            w = static_cast<float>(sum + (beta == 0.0f ? 0.0 : beta * static_cast<double>(w)));
          }
        }
        sgemm(ta, tb, s.M, s.N, s.K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
        ExpectClose("packed sgemm " + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
                        (ta ? " A^T" : "") + (tb ? " B^T" : "") + " beta " + std::to_string(beta),
                    want, C);
      }
    }
  }
}

TEST_P(KernelVariantsTest, Attention) {
  struct Shape {
    int B, T, C, H;
  };
  // The bench's heads (hd 32), heads of 18 channels over 37 positions, and
  // of 15 over 19 (the PyTorch fixtures' odd size).
  for (Shape s : {Shape{2, 64, 128, 4}, Shape{3, 37, 72, 4}, Shape{2, 19, 45, 3}}) {
    const int B = s.B, T = s.T, C = s.C, H = s.H;
    const std::string shape = " T=" + std::to_string(T) + " C=" + std::to_string(C);
    const auto qkv = RandomVector(static_cast<size_t>(B) * T * 3 * C, 15, 2.0);
    const auto dout = RandomVector(static_cast<size_t>(B) * T * C, 16);
    std::vector<float> out(static_cast<size_t>(B) * T * C), att(static_cast<size_t>(B) * H * T * T);
    std::vector<float> dqkv(static_cast<size_t>(B) * T * 3 * C), max_logit(static_cast<size_t>(B) * H);
    CompareVariants(GetParam(), "AttentionForward" + shape, {&out, &att, &max_logit}, [&] {
      cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H, max_logit.data());
    });
    // att from the dispatched kernels; without max_logit nothing else changes.
    std::vector<float> out_without(out.size()), att_without(att.size());
    cpu::AttentionForward(out_without.data(), att_without.data(), qkv.data(), B, T, C, H, nullptr);
    cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H, max_logit.data());
    EXPECT_EQ(out_without, out) << shape;
    EXPECT_EQ(att_without, att) << shape;
    CompareVariants(GetParam(), "AttentionBackward" + shape, {&dqkv},
                    [&] { cpu::AttentionBackward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, H); });
  }
}

TEST_P(KernelVariantsTest, Elementwise) {
  const size_t n = 70001;  // past the parallel threshold, and a tail
  const auto a = RandomVector(n, 17), b = RandomVector(n, 18);
  std::vector<float> x = a, out(n), dx(n);
  CompareVariants(GetParam(), "ReluForward", {&x}, [&] { cpu::ReluForward(x.data(), n); });
  CompareVariants(GetParam(), "ReluBackward", {&dx}, [&] { cpu::ReluBackward(dx.data(), b.data(), a.data(), n); });
  CompareVariants(GetParam(), "Add", {&out}, [&] { cpu::Add(out.data(), a.data(), b.data(), n); });
  CompareVariants(GetParam(), "Multiply", {&out}, [&] { cpu::Multiply(out.data(), a.data(), b.data(), n); });
}

TEST_P(KernelVariantsTest, CrossEntropy) {
  for (int V : {256, 77}) {
    const int N = 131;
    const auto logits = RandomVector(static_cast<size_t>(N) * V, 19, 4.0);
    std::vector<int32_t> targets(N);
    for (int n = 0; n < N; ++n) targets[n] = n % 7 == 3 ? -1 : (n * 31) % V;
    std::vector<float> probs(static_cast<size_t>(N) * V), row_loss(N), row_log_z(N),
        dlogits(static_cast<size_t>(N) * V);
    std::vector<float> sums(2);
    CompareVariants(GetParam(), "CrossEntropyForward V=" + std::to_string(V), {&probs, &row_loss, &row_log_z, &sums},
                    [&] {
                      const cpu::CrossEntropyStats stats = cpu::CrossEntropyForward(
                          probs.data(), row_loss.data(), row_log_z.data(), logits.data(), targets.data(), N, V);
                      sums[0] = static_cast<float>(stats.loss_sum);
                      sums[1] = static_cast<float>(stats.log_z_sum);
                      EXPECT_EQ(stats.count, N - (N + 3) / 7);
                    });
    CompareVariants(GetParam(), "CrossEntropyBackward V=" + std::to_string(V), {&dlogits}, [&] {
      cpu::CrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), N, V, 1.0f / N);
    });
    CompareVariants(GetParam(), "CrossEntropyZLossBackward V=" + std::to_string(V), {&dlogits}, [&] {
      cpu::CrossEntropyZLossBackward(dlogits.data(), probs.data(), row_log_z.data(), targets.data(), N, V, 1.0f / N,
                                     1e-2f);
    });
  }
}

class StepSink : public EventSink {
 public:
  void OnStep(const StepEvent& e) override { steps.push_back(e); }
  void OnEval(const EvalEvent& e) override { evals.push_back(e); }
  void OnGradNorms(const GradNormsEvent&) override {}
  void OnFinal(const FinalEvent&) override {}
  std::vector<StepEvent> steps;
  std::vector<EvalEvent> evals;
};

// A diagnostic of the two runs' evaluations: both present or both absent, and
// within tolerance relative.
void ExpectNear(const char* what, const std::optional<double>& fallback, const std::optional<double>& dispatched,
                double tolerance, const std::string& where) {
  ASSERT_EQ(fallback.has_value(), dispatched.has_value()) << what << " " << where;
  if (fallback) {
    EXPECT_NEAR(*dispatched, *fallback, tolerance * std::fabs(*fallback)) << what << " " << where;
  }
}

// The whole training step (both placements, dropout on): losses and gradient
// norms of 20 Adam steps, the first one tightly.
TEST_P(KernelVariantsTest, TrainingRunsAgree) {
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
    TrainSettings s;
    s.model = {.placement = p, .layers = 2, .d_model = 72, .heads = 4, .d_ff = 144, .seq_len = 37, .dropout = 0.1f};
    s.batch_size = 6;
    s.steps = 20;
    s.schedule.peak_lr = 3e-3;
    s.schedule.warmup_steps = 5;
    s.schedule.total_steps = 20;
    s.eval_every = 10;
    s.eval_batches = 2;
    s.threads = 2;
    s.seed = 5;
    StepSink fallback, dispatched;
    ASSERT_TRUE(cpu::SetKernelVariant(KernelVariant::kBaseline));
    ASSERT_EQ(RunTraining(Valid(s), RunOptions{}, fallback).outcome, Outcome::kSucceeded);
    ASSERT_TRUE(cpu::SetKernelVariant(GetParam()));
    ASSERT_EQ(RunTraining(Valid(s), RunOptions{}, dispatched).outcome, Outcome::kSucceeded);
    ASSERT_EQ(fallback.steps.size(), 20u);
    ASSERT_EQ(dispatched.steps.size(), 20u);
    for (size_t i = 0; i < fallback.steps.size(); ++i) {
      const StepEvent &f = fallback.steps[i], &d = dispatched.steps[i];
      const double loss_tolerance = i == 0 ? kFirstStepTolerance : kRunLossTolerance;
      const double norm_tolerance = i == 0 ? kFirstStepTolerance : kRunGradNormTolerance;
      EXPECT_NEAR(d.train_loss, f.train_loss, loss_tolerance * std::fabs(f.train_loss))
          << PlacementName(p) << " step " << i + 1;
      EXPECT_NEAR(d.grad_norm, f.grad_norm, norm_tolerance * std::fabs(f.grad_norm))
          << PlacementName(p) << " step " << i + 1;
    }
    // The evaluations' diagnostics (steps 0, 10 and 20): at step 0 as tight
    // as the first step, later as close as the runs stay.
    ASSERT_EQ(fallback.evals.size(), 3u);
    ASSERT_EQ(dispatched.evals.size(), 3u);
    for (size_t i = 0; i < fallback.evals.size(); ++i) {
      const EvalEvent &f = fallback.evals[i], &d = dispatched.evals[i];
      const std::string where = std::string(PlacementName(p)) + " eval at step " + std::to_string(f.step);
      const double tolerance = f.step == 0 ? kFirstStepTolerance : kRunLossTolerance;
      const double max_tolerance = f.step == 0 ? kFirstStepTolerance : kRunGradNormTolerance;
      ExpectNear("log Z", f.output_log_z, d.output_log_z, tolerance, where);
      ASSERT_EQ(f.layers.size(), 2u);
      ASSERT_EQ(d.layers.size(), 2u);
      for (size_t l = 0; l < f.layers.size(); ++l) {
        const LayerDiagnosticsValue &fl = f.layers[l], &dl = d.layers[l];
        const std::string at = where + " layer " + std::to_string(l);
        ExpectNear("max attention logit", fl.max_attn_logit, dl.max_attn_logit, max_tolerance, at);
        ExpectNear("update ratio qkv", fl.update_ratio_qkv, dl.update_ratio_qkv, kRunGradNormTolerance, at);
        ExpectNear("update ratio proj", fl.update_ratio_proj, dl.update_ratio_proj, kRunGradNormTolerance, at);
        ExpectNear("update ratio fc1", fl.update_ratio_fc1, dl.update_ratio_fc1, kRunGradNormTolerance, at);
        ExpectNear("update ratio fc2", fl.update_ratio_fc2, dl.update_ratio_fc2, kRunGradNormTolerance, at);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WiderThanBaseline, KernelVariantsTest,
                         ::testing::Values(KernelVariant::kAvx2, KernelVariant::kAvx512),
                         [](const ::testing::TestParamInfo<KernelVariant>& info) {
                           return std::string(cpu::KernelVariantName(info.param));
                         });

// ---- how the variant is chosen ----

TEST(KernelVariantChoiceTest, FastestSupportedUnlessTheVariableNamesAnother) {
  const std::vector<KernelVariant> supported = cpu::SupportedKernelVariants();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), KernelVariant::kBaseline);
  const KernelVariant fastest = supported.back();
  std::string warning = "stale";
  EXPECT_EQ(cpu::ChooseKernelVariant(nullptr, &warning), fastest);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(cpu::ChooseKernelVariant("", &warning), fastest);
  for (KernelVariant v : supported) {
    EXPECT_EQ(cpu::ChooseKernelVariant(cpu::KernelVariantName(v), &warning), v);
    EXPECT_EQ(warning, "");
  }
  EXPECT_EQ(cpu::ChooseKernelVariant("sse9", &warning), fastest);
  EXPECT_THAT(warning, ::testing::HasSubstr("NORMSWEEP_CPU_KERNELS=sse9 is not one of baseline, avx2, avx512"));
  if (!cpu::KernelVariantSupported(KernelVariant::kAvx512)) {
    EXPECT_EQ(cpu::ChooseKernelVariant("avx512", &warning), fastest);
    EXPECT_THAT(warning, ::testing::HasSubstr("this CPU does not run it"));
  }
}

// The variable is read when a process first calls a kernel: a child process
// (gtest's threadsafe death-test style re-runs this binary) with
// NORMSWEEP_CPU_KERNELS=baseline runs the fallback, and one with a bad value
// says so on stderr and runs the fastest.
TEST(KernelVariantChoiceTest, TheVariableForcesTheFallbackInANewProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv(cpu::kKernelVariantEnv, "baseline", 1);
  EXPECT_EXIT(std::exit(cpu::ActiveKernelVariant() == KernelVariant::kBaseline ? 0 : 1),
              ::testing::ExitedWithCode(0), "");
  ::setenv(cpu::kKernelVariantEnv, "avx9000", 1);
  const int fastest = static_cast<int>(cpu::SupportedKernelVariants().back());
  EXPECT_EXIT(std::exit(static_cast<int>(cpu::ActiveKernelVariant()) == fastest ? 0 : 1),
              ::testing::ExitedWithCode(0), "NORMSWEEP_CPU_KERNELS=avx9000 is not one of baseline, avx2, avx512");
  ::unsetenv(cpu::kKernelVariantEnv);
}

}  // namespace
}  // namespace normsweep::trainer
