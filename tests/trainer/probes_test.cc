// The paper's evidence at initialization, checked qualitatively as issue 5
// asks (Xiong et al. 2020: hidden-state growth, LayerNorm's Jacobian,
// Figure 3's gradient norms).
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/probes.h"

namespace normsweep::trainer {
namespace {

TEST(ProbesTest, HiddenNormsFollowTheMeanFieldTheory) {
  HiddenNormsOptions o;  // the paper's setting: d 512, 8 tokens, 12 layers
  o.draws = 8;
  auto rows = ProbeHiddenNorms(o);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 5u);
  double previous = 1.0;
  for (const HiddenNormsRow& r : *rows) {
    EXPECT_NEAR(r.post.mean, 1.5, 0.2) << "Post-LN x^{post,5} after layer " << r.layer;
    EXPECT_GE(r.pre.mean, r.pre_lower) << "Pre-LN after layer " << r.layer;
    EXPECT_LE(r.pre.mean, r.pre_upper) << "Pre-LN after layer " << r.layer;
    EXPECT_GT(r.pre.mean, previous) << "Pre-LN grows with depth";
    previous = r.pre.mean;
  }
}

TEST(ProbesTest, LayerNormJacobianScalesAsSqrtDOverNorm) {
  auto rows = ProbeLnJacobian(LnJacobianOptions{});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const LnJacobianRow& r = (*rows)[i];
    EXPECT_NEAR(r.spectral_norm / r.sqrt_d_over_norm, 1.0, 0.01) << "k = " << r.k;
    if (i > 0) {
      EXPECT_NEAR(r.spectral_norm / (*rows)[i - 1].spectral_norm, 0.5, 0.005) << "k = " << r.k;
    }
  }
}

TEST(ProbesTest, GradientNormsAtInitializationShowFigure3sTrends) {
  GradNormsOptions o;
  o.model = {.layers = 6, .d_model = 64, .heads = 4, .d_ff = 256, .seq_len = 32};
  o.batch_size = 8;
  o.seeds = 4;
  o.depths = {6, 14};
  o.threads = 2;
  auto r = ProbeGradNorms(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& post_w2 = r->w2[0];
  const auto& pre_w2 = r->w2[1];
  const auto& post_w1 = r->w1[0];
  // Post-LN: the FFN gradients grow toward the output.
  EXPECT_GT(post_w2.back().mean, 1.05 * post_w2.front().mean);
  EXPECT_GT(post_w1.back().mean, 1.05 * post_w1.front().mean);
  // Pre-LN: no growth toward the output, and a last layer well below Post-LN's.
  EXPECT_LT(pre_w2.back().mean, pre_w2.front().mean);
  EXPECT_LT(pre_w2.back().mean, 0.7 * post_w2.back().mean);
  // Last layer's W2 across depth 6 -> 14: Post-LN does not shrink; Pre-LN
  // falls roughly as 1/sqrt(L) (sqrt(6/14) = 0.65).
  const double post_ratio = r->last_w2_by_depth[0][1].mean / r->last_w2_by_depth[0][0].mean;
  const double pre_ratio = r->last_w2_by_depth[1][1].mean / r->last_w2_by_depth[1][0].mean;
  EXPECT_GT(post_ratio, 0.85);
  EXPECT_LT(pre_ratio, 0.85);
  EXPECT_GT(pre_ratio, 0.45);
}

}  // namespace
}  // namespace normsweep::trainer
