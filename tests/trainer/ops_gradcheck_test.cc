// Finite-difference checks of every CPU op's backward pass, and of the whole
// model's gradients in both placements. Each check uses a scalar loss
// L = sum(out * R) for a fixed random R, perturbs inputs by +-eps, and
// compares (L(x+eps) - L(x-eps)) / 2eps with the analytic gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <functional>
#include <vector>

#include "trainer/backend.h"
#include "trainer/cpu/ops.h"
#include "trainer/param_layout.h"
#include "trainer/rng.h"

namespace normsweep::trainer {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.Normal());
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// d loss / d x by central differences: x moved by +-eps, then restored.
double NumericGradient(float& x, float eps, const std::function<double()>& loss) {
  const float keep = x;
  x = keep + eps;
  const double up = loss();
  x = keep - eps;
  const double down = loss();
  x = keep;
  return (up - down) / (2.0 * eps);
}

// Checks d loss / d x[i] for every i (or a strided subset) against `analytic`.
void CheckGradient(const char* what, std::vector<float>& x, const std::vector<float>& analytic,
                   const std::function<double()>& loss, float eps = 1e-2f, double tol = 2e-2, size_t stride = 1) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  double max_abs = 0;
  for (float g : analytic) max_abs = std::max(max_abs, std::fabs(static_cast<double>(g)));
  ASSERT_GT(max_abs, 0.0) << what << ": gradient is all zero";
  int checked = 0;
  for (size_t i = 0; i < x.size(); i += stride) {
    const double numeric = NumericGradient(x[i], eps, loss);
    // Relative to the gradient's overall scale, so tiny entries do not dominate.
    EXPECT_NEAR(numeric, analytic[i], tol * max_abs + 1e-4) << what << " index " << i;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

class OpsGradientTest : public ::testing::Test {
 protected:
  void SetUp() override { cpu::SetThreads(2); }
};

TEST_F(OpsGradientTest, LayerNorm) {
  const int N = 3, C = 7;
  std::vector<float> x = RandomVector(N * C, 1, 2.0), w = RandomVector(C, 2), b = RandomVector(C, 3);
  const std::vector<float> r = RandomVector(N * C, 4);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    cpu::LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    return Dot(out, r);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw(C), db(C);
  cpu::LayerNormBackward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  CheckGradient("ln dx", x, dx, loss, 1e-2f);
  CheckGradient("ln dw", w, dw, loss);
  CheckGradient("ln db", b, db, loss);
}

TEST_F(OpsGradientTest, RmsNorm) {
  const int N = 3, C = 7;
  std::vector<float> x = RandomVector(N * C, 21, 2.0), w = RandomVector(C, 22);
  const std::vector<float> r = RandomVector(N * C, 23);
  std::vector<float> out(N * C), rstd(N);
  auto loss = [&] {
    cpu::RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    return Dot(out, r);
  };
  loss();
  // out = x / sqrt(mean(x^2) + eps) * w, row by row.
  for (int n = 0; n < N; ++n) {
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += static_cast<double>(x[n * C + c]) * x[n * C + c];
    const double r_want = 1.0 / std::sqrt(ss / C + 1e-5);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(out[n * C + c], x[n * C + c] * r_want * w[c], 1e-5);
  }
  std::vector<float> dx(N * C, 0.0f), dw(C);
  cpu::RmsNormBackward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  CheckGradient("rms dx", x, dx, loss, 1e-2f);
  CheckGradient("rms dw", w, dw, loss);
}

TEST_F(OpsGradientTest, LinearAndRelu) {
  const int N = 5, I = 6, O = 4;
  std::vector<float> x = RandomVector(N * I, 5), w = RandomVector(O * I, 6), b = RandomVector(O, 17);
  const std::vector<float> r = RandomVector(N * O, 8);
  std::vector<float> out(N * O);
  // These seeds keep every pre-activation at least 0.1 from the ReLU kink.
  cpu::MatmulForward(out.data(), x.data(), w.data(), b.data(), N, I, O);
  for (float v : out) ASSERT_GT(std::fabs(v), 0.1f);
  auto loss = [&] {
    cpu::MatmulForward(out.data(), x.data(), w.data(), b.data(), N, I, O);
    cpu::ReluForward(out.data(), out.size());
    return Dot(out, r);
  };
  loss();
  std::vector<float> dout(N * O), dx(N * I), dw(O * I), db(O);
  cpu::ReluBackward(dout.data(), r.data(), out.data(), dout.size());
  cpu::MatmulBackward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, I, O, false);
  CheckGradient("linear dx", x, dx, loss, 1e-3f);
  CheckGradient("linear dw", w, dw, loss, 1e-3f);
  CheckGradient("linear db", b, db, loss, 1e-3f);
}

TEST_F(OpsGradientTest, CausalAttention) {
  const int B = 2, T = 5, C = 6, H = 2;
  std::vector<float> qkv = RandomVector(B * T * 3 * C, 9);
  const std::vector<float> r = RandomVector(B * T * C, 10);
  std::vector<float> out(B * T * C), att(B * H * T * T);
  auto loss = [&] {
    cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H, nullptr);
    return Dot(out, r);
  };
  loss();
  // Causality: the output at t = 0 attends to itself only.
  for (int t = 1; t < T; ++t) EXPECT_EQ(att[t], 0.0f);
  // The largest logit of each (batch, head), by brute force in double over
  // the visible pairs (s <= t) only.
  std::vector<float> max_logit(B * H);
  int masked_larger = 0;
  cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H, max_logit.data());
  const int hd = C / H;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      double want = -INFINITY, masked = -INFINITY;
      for (int t = 0; t < T; ++t) {
        for (int s = 0; s < T; ++s) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) {
            dot += static_cast<double>(qkv[(b * T + t) * 3 * C + h * hd + i]) * qkv[(b * T + s) * 3 * C + C + h * hd + i];
          }
          (s <= t ? want : masked) = std::max(s <= t ? want : masked, dot / std::sqrt(static_cast<double>(hd)));
        }
      }
      EXPECT_NEAR(max_logit[b * H + h], want, 1e-5 * std::max(1.0, std::fabs(want))) << "b " << b << " h " << h;
      if (masked > want) ++masked_larger;
    }
  }
  // The data must tell the causal maximum from the full one somewhere.
  EXPECT_GT(masked_larger, 0) << "no (batch, head) whose largest logit is masked: the check proves little";
  std::vector<float> dqkv(qkv.size());
  cpu::AttentionBackward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, C, H);
  CheckGradient("attention dqkv", qkv, dqkv, loss, 1e-2f);
}

TEST_F(OpsGradientTest, Embedding) {
  const int B = 2, T = 3, C = 4, V = 6;
  const std::vector<int32_t> tokens = {1, 3, 1, 0, 5, 3};
  std::vector<float> emb = RandomVector(V * C, 11), pos = RandomVector(T * C, 12);
  const std::vector<float> r = RandomVector(B * T * C, 13);
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    cpu::EncoderForward(out.data(), tokens.data(), emb.data(), pos.data(), B, T, C, 2.0f);
    return Dot(out, r);
  };
  loss();
  std::vector<float> demb(V * C), dpos(T * C, 0.0f);
  cpu::EncoderBackward(demb.data(), dpos.data(), r.data(), tokens.data(), B, T, C, V, 2.0f);
  // Rows of tokens that never occur (2, 4) must have zero gradient.
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(demb[2 * C + c], 0.0f);
    EXPECT_EQ(demb[4 * C + c], 0.0f);
  }
  CheckGradient("embedding", emb, demb, loss, 1e-2f);
  CheckGradient("positions", pos, dpos, loss, 1e-2f);
}

TEST_F(OpsGradientTest, SoftmaxCrossEntropy) {
  const int N = 4, V = 9;
  std::vector<float> logits = RandomVector(N * V, 14, 3.0);
  const std::vector<int32_t> targets = {2, -1, 8, 0};
  std::vector<float> probs(N * V), row_loss(N), row_log_z(N);
  double log_z_mean = 0;
  auto loss = [&] {
    auto s = cpu::CrossEntropyForward(probs.data(), row_loss.data(), row_log_z.data(), logits.data(), targets.data(),
                                      N, V);
    log_z_mean = s.log_z_sum / static_cast<double>(s.count);
    return s.loss_sum / static_cast<double>(s.count);
  };
  const double l = loss();
  // Mean of -log softmax, and of log Z, over the three counted rows.
  double expect = 0, expect_log_z = 0;
  for (int n : {0, 2, 3}) {
    double z = 0, m = -1e30;
    for (int j = 0; j < V; ++j) m = std::max(m, static_cast<double>(logits[n * V + j]));
    for (int j = 0; j < V; ++j) z += std::exp(logits[n * V + j] - m);
    expect += std::log(z) + m - logits[n * V + targets[n]];
    expect_log_z += std::log(z) + m;
  }
  EXPECT_NEAR(l, expect / 3.0, 1e-5);
  EXPECT_NEAR(log_z_mean, expect_log_z / 3.0, 1e-5);
  EXPECT_EQ(row_log_z[1], 0.0f);  // ignored row
  std::vector<float> dlogits(N * V);
  cpu::CrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), N, V, 1.0f / 3.0f);
  for (int j = 0; j < V; ++j) EXPECT_EQ(dlogits[V + j], 0.0f);  // ignored row
  CheckGradient("cross-entropy", logits, dlogits, loss, 1e-2f);

  // With the z-loss: mean over counted rows of CE + z (log Z)^2.
  const float z = 0.3f;
  auto z_loss = [&] {
    const double ce = loss();
    double sq = 0;
    for (int n : {0, 2, 3}) sq += static_cast<double>(row_log_z[n]) * row_log_z[n];
    return ce + z * sq / 3.0;
  };
  z_loss();
  cpu::CrossEntropyZLossBackward(dlogits.data(), probs.data(), row_log_z.data(), targets.data(), N, V, 1.0f / 3.0f, z);
  for (int j = 0; j < V; ++j) EXPECT_EQ(dlogits[V + j], 0.0f);  // ignored row
  CheckGradient("cross-entropy + z-loss", logits, dlogits, z_loss, 1e-2f);
}

// The whole model: every parameter tensor checked at a few coordinates.
class ModelGradientTest : public ::testing::TestWithParam<Placement> {};

TEST_P(ModelGradientTest, MatchesFiniteDifferences) {
  ModelConfig m;
  m.placement = GetParam();
  m.mix_post_fraction = 0.5;  // mix: block 0 Post-LN, block 1 Pre-LN
  m.layers = 2;
  m.d_model = 8;
  m.heads = 2;
  m.d_ff = 12;
  m.seq_len = 5;
  m.positions = Positions::kLearned;  // so pos_emb is checked too
  BackendOptions o;
  o.model = m;
  o.threads = 2;
  o.max_batch_size = 2;
  auto backend = MakeBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  Backend& be = **backend;
  std::vector<float> params = InitParameters(be.layout(), m, 42);
  // Non-trivial LayerNorm parameters and biases, so every path carries gradient.
  Rng rng(7);
  for (float& p : params) p += static_cast<float>(0.1 * rng.Normal());
  Batch batch;
  batch.batch_size = 2;
  batch.seq_len = 5;
  batch.inputs = {3, 7, 1, 200, 9, 4, 4, 2, 100, 5};
  batch.targets = {7, 1, -1, 9, 3, 4, 2, 100, 5, 6};
  ASSERT_TRUE(be.SetParameters(params).ok());
  ASSERT_TRUE(be.ForwardBackward(batch, 0).ok());
  std::vector<float> grads;
  ASSERT_TRUE(be.GetGradients(&grads).ok());
  auto loss = [&] {
    EXPECT_TRUE(be.SetParameters(params).ok());
    return be.Evaluate(batch)->mean();
  };
  // Small steps: larger ones cross ReLU kinks somewhere in the network.
  const float eps = 1e-3f;
  for (const TensorSpec& t : be.layout().tensors()) {
    double max_abs = 0;
    for (size_t i = 0; i < t.size; ++i) max_abs = std::max(max_abs, std::fabs(static_cast<double>(grads[t.offset + i])));
    // Unused token rows are zero; every tensor must still carry some gradient.
    EXPECT_GT(max_abs, 0.0) << t.name;
    for (size_t k = 0; k < 6; ++k) {
      // Largest-gradient coordinates plus a spread of others.
      const size_t i = (k * 7919 + 13) % t.size;
      const size_t at = t.offset + i;
      if (t.name == "tok_emb.weight" && grads[at] == 0.0f) continue;
      const double numeric = NumericGradient(params[at], eps, loss);
      EXPECT_NEAR(numeric, grads[at], 3e-2 * max_abs + 2e-4) << t.name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, ModelGradientTest,
                         ::testing::Values(Placement::kPostLN, Placement::kPreLN, Placement::kPeriLN,
                                           Placement::kDeepNorm, Placement::kMix),
                         [](const auto& info) { return std::string(PlacementName(info.param)); });

}  // namespace
}  // namespace normsweep::trainer
