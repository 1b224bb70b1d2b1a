// The paper's evidence at initialization (Xiong et al. 2020, sections 3-4),
// measured with the trainer's own kernels:
//   hidden-norms:  ||x||^2/d through a stack of simplified layers (d x d
//                  Xavier weights, W_Q = W_K = 0 so attention is a uniform
//                  average, Gaussian inputs): Post-LN's pre-normalisation sum
//                  x^{post,5} stays near 3/2 d, Pre-LN's residual stream grows
//                  between (1 + l/2) d and (1 + 3l/2) d.
//   ln-jacobian:   the spectral norm of LayerNorm's Jacobian at x = k z
//                  against sqrt(d)/||x||.
//   grad-norms:    Frobenius norms of each layer's FFN W1/W2 gradients at
//                  initialization on a real batch (Figure 3), and the last
//                  layer's W2 gradient as the depth grows.
#ifndef NORMSWEEP_TRAINER_PROBES_H_
#define NORMSWEEP_TRAINER_PROBES_H_

#include <string>
#include <vector>

#include "trainer/config.h"
#include "trainer/status.h"

namespace normsweep::trainer {

struct MeanStd {
  double mean = 0, std = 0;
};

struct HiddenNormsOptions {
  int d = 512;
  int tokens = 8;
  int layers = 12;
  int draws = 20;
  uint64_t seed = 0;
  std::vector<int> report_layers = {1, 2, 4, 8, 12};
};

struct HiddenNormsRow {
  int layer = 0;
  MeanStd post;  // ||x^{post,5}||^2 / d in that layer
  MeanStd pre;   // ||x_l^{pre}||^2 / d after that layer
  double pre_lower = 0, pre_upper = 0;  // 1 + l/2, 1 + 3l/2
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
  ModelConfig model;            // placement is set per row
  int batch_size = 32;
  int seeds = 10;
  std::string data_file;        // empty: the built-in translate task
  std::vector<int> depths = {6, 8, 10, 12, 14};
  int threads = 1;
};

struct GradNormsResult {
  // [placement][layer]: mean and std over seeds, placement 0 = Post-LN, 1 = Pre-LN.
  std::vector<std::vector<MeanStd>> w1, w2;
  // [placement][depth index]: the last layer's W2 gradient norm.
  std::vector<std::vector<MeanStd>> last_w2_by_depth;
};

StatusOr<GradNormsResult> ProbeGradNorms(const GradNormsOptions& options);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PROBES_H_
