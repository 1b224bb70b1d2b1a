// The paper's evidence at initialization (Xiong et al. 2020, sections 3-4),
// measured with the trainer's own kernels:
//   hidden-norms:  ||x||^2/d through a stack of simplified layers (d x d
//                  Xavier weights, W_Q = W_K = 0 so attention is a uniform
//                  average, Gaussian inputs), per placement, with the blocks
//                  written as the trainer's (trainer/cpu/cpu_backend.cc):
//                  Post-LN's pre-normalisation sum x^{post,5} stays near
//                  3/2 d, Pre-LN's residual stream grows between (1 + l/2) d
//                  and (1 + 3l/2) d, Peri-LN's by d per sublayer (1 + 2l)
//                  whatever the weights, DeepNorm's pre-normalisation sum
//                  stays near (alpha^2 + beta^4/2) d, Mix-LN's stream is
//                  normalised in its Post-LN blocks and then grows as Pre-LN's.
//   ln-jacobian:   the spectral norm of LayerNorm's Jacobian at x = k z
//                  against sqrt(d)/||x||.
//   grad-norms:    Frobenius norms of each layer's FFN W1/W2 gradients at
//                  initialization on a real batch (Figure 3), and the last
//                  layer's W2 gradient as the depth grows.
#ifndef NORMSWEEP_TRAINER_PROBES_H_
#define NORMSWEEP_TRAINER_PROBES_H_

#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/settings/status.h"

namespace normsweep::trainer {

struct MeanStd {
  double mean = 0, std = 0;
};

// "Post-LN", "Pre-LN", "Peri-LN", "DeepNorm", "Mix-LN" (the report's titles,
// client/report/svg.cc, which the trainer does not link).
const char* PlacementTitle(Placement p);
// "post,pre,peri": each name as ParsePlacement takes it; an unknown or empty
// name is an InvalidArgument that quotes it and lists the valid names.
StatusOr<std::vector<Placement>> ParsePlacementList(const std::string& list);

struct HiddenNormsOptions {
  int d = 512;
  int tokens = 8;
  int layers = 12;
  int draws = 20;
  uint64_t seed = 0;
  std::vector<int> report_layers = {1, 2, 4, 8, 12};
  std::vector<Placement> placements = {Placement::kPostLN, Placement::kPreLN};
  double mix_post_fraction = kDefaultMixPostFraction;
  // Every weight times this (1: Xavier as initialised); stands in for weights
  // grown in training: Pre-LN's sublayer outputs grow as scale^2, Peri-LN's
  // are normalised.
  double weight_scale = 1.0;
};

struct HiddenNormsRow {
  int layer = 0;
  // [placement]: ||x||^2 / d of the tracked state in (Post-LN, DeepNorm: the
  // pre-normalisation sum x^{post,5}) or after (the others: the residual
  // stream) that layer, and the mean-field expectation (lower == upper when
  // it is one value).
  std::vector<MeanStd> values;
  std::vector<double> lower, upper;
};

StatusOr<std::vector<HiddenNormsRow>> ProbeHiddenNorms(const HiddenNormsOptions& options);

struct LnJacobianOptions {
  int d = 256;
  std::vector<double> scales = {1, 2, 4, 8};
  uint64_t seed = 0;
};

struct LnJacobianRow {
  double k = 0;
  double spectral_norm = 0;    // of d LN(x) / dx at x = k z (gain 1, bias 0, eps 1e-5)
  double sqrt_d_over_norm = 0; // sqrt(d) / ||x||
};

StatusOr<std::vector<LnJacobianRow>> ProbeLnJacobian(const LnJacobianOptions& options);

struct GradNormsOptions {
  ModelConfig model;            // placement is set per column
  std::vector<Placement> placements = {Placement::kPostLN, Placement::kPreLN};
  int batch_size = 32;
  int seeds = 10;
  std::string data_file;        // empty: the built-in translate task
  std::vector<int> depths = {6, 8, 10, 12, 14};
  int threads = 1;
};

struct GradNormsResult {
  // [placement][layer]: mean and std over seeds, placements in the order of
  // GradNormsOptions::placements.
  std::vector<std::vector<MeanStd>> w1, w2;
  // [placement][depth index]: the last layer's W2 gradient norm.
  std::vector<std::vector<MeanStd>> last_w2_by_depth;
};

StatusOr<GradNormsResult> ProbeGradNorms(const GradNormsOptions& options);

// The tables normsweep-train probe prints: one column per placement.
std::string HiddenNormsTable(const HiddenNormsOptions& options, const std::vector<HiddenNormsRow>& rows);
std::string GradNormsTable(const GradNormsOptions& options, const GradNormsResult& result);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PROBES_H_
