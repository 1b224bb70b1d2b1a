// The paper's evidence at initialization, checked qualitatively as issue 5
// asks (Xiong et al. 2020: hidden-state growth, LayerNorm's Jacobian,
// Figure 3's gradient norms).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "trainer/probes.h"

namespace normsweep::trainer {
namespace {

TEST(ProbesTest, HiddenNormsFollowTheMeanFieldTheory) {
  HiddenNormsOptions o;  // the paper's setting: d 512, 8 tokens, 12 layers; Post-LN and Pre-LN
  o.draws = 8;
  auto rows = ProbeHiddenNorms(o);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 5u);
  double previous = 1.0;
  for (const HiddenNormsRow& r : *rows) {
    ASSERT_EQ(r.values.size(), 2u);
    EXPECT_NEAR(r.values[0].mean, 1.5, 0.2) << "Post-LN x^{post,5} after layer " << r.layer;
    EXPECT_DOUBLE_EQ(r.lower[0], 1.5);
    EXPECT_DOUBLE_EQ(r.lower[1], 1.0 + r.layer / 2.0);
    EXPECT_DOUBLE_EQ(r.upper[1], 1.0 + 3.0 * r.layer / 2.0);
    EXPECT_GE(r.values[1].mean, r.lower[1]) << "Pre-LN after layer " << r.layer;
    EXPECT_LE(r.values[1].mean, r.upper[1]) << "Pre-LN after layer " << r.layer;
    EXPECT_GT(r.values[1].mean, previous) << "Pre-LN grows with depth";
    previous = r.values[1].mean;
  }
}

TEST(ProbesTest, HiddenNormsOfEveryPlacement) {
  HiddenNormsOptions o;
  o.draws = 6;
  o.placements = {Placement::kPostLN, Placement::kPreLN, Placement::kPeriLN, Placement::kDeepNorm, Placement::kMix};
  auto rows = ProbeHiddenNorms(o);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 5u);
  const double alpha2 = std::sqrt(2.0 * o.layers), beta4 = 1.0 / (8.0 * o.layers);
  double previous_peri = 1.0;
  for (const HiddenNormsRow& r : *rows) {
    ASSERT_EQ(r.values.size(), 5u);
    const MeanStd& post = r.values[0];
    const MeanStd& pre = r.values[1];
    const MeanStd& peri = r.values[2];
    const MeanStd& deep = r.values[3];
    const MeanStd& mix = r.values[4];
    // Peri-LN: each normalised sublayer output adds d, so 1 + 2l, with or
    // without the weights growing; it rises with depth.
    EXPECT_NEAR(peri.mean, 1.0 + 2.0 * r.layer, 0.1 * (1.0 + 2.0 * r.layer)) << "Peri-LN after layer " << r.layer;
    EXPECT_GT(peri.mean, previous_peri + 1.5) << "Peri-LN grows by about 2 per layer";
    previous_peri = peri.mean;
    // DeepNorm: the pre-normalisation sum is bounded like Post-LN's, at
    // alpha^2 + beta^4/2 whatever the layer.
    EXPECT_NEAR(r.lower[3], alpha2 + beta4 / 2, 1e-12);
    EXPECT_NEAR(deep.mean, alpha2 + beta4 / 2, 0.05) << "DeepNorm x^{post,5} in layer " << r.layer;
    EXPECT_LT(deep.std, post.std) << "alpha x dominates DeepNorm's sum";
    // Mix-LN (alpha 0.25 of 12 layers: 3 Post-LN blocks): normalised
    // through layer 3, Pre-LN's growth after it, below Pre-LN's.
    if (r.layer <= 3) {
      EXPECT_NEAR(mix.mean, 1.0, 1e-3) << "Mix-LN's stream is normalised after its Post-LN blocks";
      EXPECT_DOUBLE_EQ(r.lower[4], 1.0);
    } else {
      EXPECT_GE(mix.mean, r.lower[4]) << "Mix-LN after layer " << r.layer;
      EXPECT_LE(mix.mean, r.upper[4]) << "Mix-LN after layer " << r.layer;
      EXPECT_LT(mix.mean, pre.mean) << "Mix-LN after layer " << r.layer;
    }
  }
}

TEST(ProbesTest, PeriLnGrowsSlowerThanPreLnOnceTheWeightsGrow) {
  HiddenNormsOptions o;
  o.draws = 4;
  o.report_layers = {12};
  o.placements = {Placement::kPreLN, Placement::kPeriLN};
  auto at_init = ProbeHiddenNorms(o);
  o.weight_scale = 2.0;
  auto grown = ProbeHiddenNorms(o);
  ASSERT_TRUE(at_init.ok() && grown.ok());
  const double pre1 = (*at_init)[0].values[0].mean, peri1 = (*at_init)[0].values[1].mean;
  const double pre2 = (*grown)[0].values[0].mean, peri2 = (*grown)[0].values[1].mean;
  // At initialization (unit gains) Peri-LN's stream is the larger: 25 against
  // Pre-LN's 7..19. Pre-LN's sublayer outputs grow as the weights^2 (x16 in
  // ||.||^2 for weights x2); Peri-LN's are normalised, so its stream does not move.
  EXPECT_GT(peri1, pre1);
  EXPECT_NEAR(peri2, peri1, 0.05 * peri1);
  EXPECT_GT(pre2, 10 * pre1);
  EXPECT_LT(peri2, 0.2 * pre2);
  EXPECT_DOUBLE_EQ((*grown)[0].upper[0], 1.0 + 3.0 * 16 * 12 / 2.0);
}

TEST(ProbesTest, PlacementListsAreParsedAndUnknownNamesRefused) {
  auto all = ParsePlacementList("post,pre,sandwich,deepnorm,mix");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<Placement>{Placement::kPostLN, Placement::kPreLN, Placement::kPeriLN,
                                          Placement::kDeepNorm, Placement::kMix}));
  for (const char* bad : {"post,bogus", "", "post,", "peri;pre"}) {
    auto r = ParsePlacementList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--placements"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("deepnorm"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(ParsePlacementList("post,bogus").status().message().find("'bogus'"), std::string::npos);
}

TEST(ProbesTest, HiddenNormsTableHasAColumnPerPlacement) {
  HiddenNormsOptions o;
  o.d = 64;
  o.layers = 4;
  o.draws = 2;
  o.report_layers = {1, 4};
  o.placements = {Placement::kPeriLN, Placement::kDeepNorm, Placement::kMix};
  auto rows = ProbeHiddenNorms(o);
  ASSERT_TRUE(rows.ok());
  const std::string table = HiddenNormsTable(o, *rows);
  EXPECT_NE(table.find("Peri-LN |x_l|^2/d"), std::string::npos) << table;
  EXPECT_NE(table.find("DeepNorm |x_post5|^2/d"), std::string::npos) << table;
  EXPECT_NE(table.find("Mix-LN |x_l|^2/d"), std::string::npos) << table;
  EXPECT_EQ(table.find("Post-LN |"), std::string::npos) << table;
  EXPECT_NE(table.find("the first 1 of 4 layers Post-LN"), std::string::npos) << table;
  EXPECT_NE(table.find("\n4  "), std::string::npos) << table;
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
  o.placements = {Placement::kPostLN, Placement::kPreLN, Placement::kPeriLN, Placement::kDeepNorm};
  auto r = ProbeGradNorms(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->w1.size(), 4u);
  ASSERT_EQ(r->w2.size(), 4u);
  ASSERT_EQ(r->last_w2_by_depth.size(), 4u);
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
  for (size_t p = 2; p < 4; ++p) {
    for (size_t l = 0; l < 6; ++l) {
      EXPECT_TRUE(std::isfinite(r->w2[p][l].mean) && r->w2[p][l].mean > 0) << "placement " << p << " layer " << l;
    }
  }
  // DeepNorm: beta = (8N)^(-1/4) scales the FFN weights down, so the last
  // layer's W2 gradient is well below Post-LN's at every depth, and it does
  // not grow toward the output as Post-LN's does.
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_LT(r->last_w2_by_depth[3][d].mean, 0.7 * r->last_w2_by_depth[0][d].mean) << "depth index " << d;
  }
  const std::string table = GradNormsTable(o, *r);
  for (const char* column : {"Post-LN W1", "Pre-LN W2", "Peri-LN W1", "Peri-LN W2", "DeepNorm W1", "DeepNorm W2"}) {
    EXPECT_NE(table.find(column), std::string::npos) << column << "\n" << table;
  }
  EXPECT_EQ(table.find("Mix-LN"), std::string::npos) << table;
}

}  // namespace
}  // namespace normsweep::trainer
